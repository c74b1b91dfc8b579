"""What a role's writes make the database write: held against the role's grants.

Purpose: a statement the role may write can do more when the database runs it,
through what the schema declares (`grid_sql.schema`, "write effects"): a
foreign key's ``ON DELETE`` / ``ON UPDATE`` action writes the referencing
table, a constraint with ``ON CONFLICT REPLACE`` makes an INSERT or UPDATE
delete rows, and a trigger runs statements GRID never sees. None of that is in
the statement, so neither the mask nor the SemanticChecker can judge it; this
module judges the role instead, once, when a policy meets a schema
(:meth:`grid_sql.policy.PolicyBundle.validate`).

The rule (:func:`first_escape`). Every write the role can start is a *step*
``(table, verb, columns)``: for each granted relation and each write verb the
role holds, the verb over the role's granted columns (UPDATE and INSERT) or
the whole row (DELETE). An UPDATE's columns count the table's generated
columns too: they change with what they are computed from, which the snapshot
does not say. One step leads to others:

- DELETE on ``p`` -> for each foreign key of ``c`` referencing ``p``:
  ``ON DELETE CASCADE`` is DELETE on ``c``; ``SET NULL`` / ``SET DEFAULT`` is
  UPDATE of the key's columns of ``c``;
- UPDATE of columns ``S`` of ``p`` -> for each key referencing columns of ``p``
  that meet ``S``: the ``ON UPDATE`` action, the same way (``CASCADE``, ``SET
  NULL``, ``SET DEFAULT`` all write the key's columns of ``c``);
- INSERT on a table with an ``ON CONFLICT REPLACE`` constraint, or UPDATE of
  one of its columns -> DELETE on it;
- any step on a relation another is written through (``writes_through``: a
  view's base table, the same verb; an inheriting table, the same UPDATE or
  DELETE; a partition or a virtual table's shadow table, every verb) -> that
  verb, or every verb, on it (UPDATE: of every column);
- any step on a table with a trigger for that event (an ``UPDATE OF`` trigger
  when its columns meet ``S``) fires the trigger; so do a rule, a user function
  its expressions call, and a write past the snapshot (``Trigger.kind``).

A role passes when each step its own steps lead to is one of its own (the
table granted, the verb held, UPDATE's columns granted) and each trigger they
fire is one the role names (``triggers``). One step suffices: a step that is
the role's own is itself a starting step over at least as many columns, so its
own consequences are checked where it starts (induction on the chain).

Precondition: the snapshot's write effects are complete: what the SQLite and
PostgreSQL readers read (docs/policy.md lists it) is all the database does on
a write (not seen: functions an application registers on its own SQLite
connection). A snapshot that does not list them (``write_effects`` False)
fails every write role. SQLite runs foreign-key actions only where a connection sets
``PRAGMA foreign_keys = ON``; they are held against the role either way.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

from grid_sql.dialect import IdentifierCase
from grid_sql.schema import WRITING_ACTIONS, SchemaSnapshot, Trigger, name_key

__all__ = ["Step", "first_escape", "steps_from", "trigger_key"]

WRITE_VERBS = ("INSERT", "UPDATE", "DELETE")


@dataclass(frozen=True)
class Step:
    """A write the database makes: ``verb`` on ``table`` (UPDATE: of ``columns``),
    and ``because``, the declaration that makes it (for messages)."""

    table: str
    verb: str
    columns: tuple[str, ...] = ()
    because: str = ""


def steps_from(schema: SchemaSnapshot, start: Step) -> Iterator[Step | tuple[Trigger, str]]:
    """The writes ``start`` makes the database make, one step on: a :class:`Step`,
    or ``(trigger, why)`` for a trigger (a rule, a function, a write past the
    snapshot) it fires."""
    case = schema.identifier_case
    table = schema.table(start.table)
    assert table is not None, start.table  # steps name relations of the schema
    written = start.columns
    if start.verb == "UPDATE":  # generated columns change with their sources
        written += tuple(c.name for c in table.columns if c.generated)

    def meets(a: Collection[str], b: Collection[str]) -> bool:
        return bool({name_key(x, case) for x in a} & {name_key(x, case) for x in b})

    for trigger in table.triggers:
        if trigger.event == start.verb and (
            start.verb != "UPDATE" or not trigger.columns or meets(trigger.columns, written)
        ):
            yield trigger, _trigger_text(trigger, table.name)
    replaces = table.replace_columns
    if replaces and (
        start.verb == "INSERT" or (start.verb == "UPDATE" and meets(replaces, written))
    ):
        yield Step(
            table.name,
            "DELETE",
            because=f"{', '.join(replaces)} of {table.name} "
            f"{'says' if len(replaces) == 1 else 'say'} ON CONFLICT REPLACE, so a "
            f"conflicting {start.verb} deletes the rows it conflicts with",
        )
    for through in table.writes_through:
        other = schema.table(through.relation)
        assert other is not None, through.relation  # the snapshot checks its names
        if through.verbs == "rows" and start.verb == "INSERT":
            continue  # an INSERT into a parent stays in the parent
        because = {
            "all": f"{other.name} is a partition or shadow table of {table.name}",
            "same": f"{table.name} is a view of {other.name}",
            "rows": f"{other.name} inherits from {table.name}",
        }[through.verbs]
        verbs = WRITE_VERBS if through.verbs == "all" else (start.verb,)
        for verb in verbs:
            yield Step(other.name, verb, other.column_names if verb == "UPDATE" else (), because)
    if start.verb not in ("UPDATE", "DELETE"):
        return
    for child, key in schema.keys_to(table):
        action = key.on_delete if start.verb == "DELETE" else key.on_update
        if action not in WRITING_ACTIONS:
            continue
        if start.verb == "UPDATE" and not meets(key.parent_columns, written):
            continue
        because = (
            f"{child.name} ({', '.join(key.columns)}) REFERENCES {table.name} "
            f"({', '.join(key.parent_columns)}) ON {start.verb} {action}"
        )
        if action == "CASCADE" and start.verb == "DELETE":
            yield Step(child.name, "DELETE", because=because)
        else:
            yield Step(child.name, "UPDATE", key.columns, because)


def first_escape(
    schema: SchemaSnapshot,
    verbs: Collection[str],
    columns: Mapping[str, tuple[str, ...]],
    triggers: Collection[tuple[str, str]] | None,
) -> str | None:
    """Why the role's writes reach past its grants, or None when they do not.

    ``columns``: granted relation (catalog name) -> granted columns (catalog
    names); ``triggers``: the triggers the role may fire, as ``(relation, name)``
    (catalog names), None for every trigger.
    """
    writes = [v for v in WRITE_VERBS if v in verbs]
    if writes and not schema.write_effects:
        return (
            f"{schema.label} does not say what the database does on a write (a JSON "
            "snapshot written before write effects: no write_effects key); take a new "
            "snapshot of the database, or take the write verbs from the role"
        )
    case = schema.identifier_case
    granted = {name_key(t, case): {name_key(c, case) for c in cs} for t, cs in columns.items()}
    allowed = None if triggers is None else {trigger_key(t, n, case) for t, n in triggers}
    for name, cols in columns.items():
        table = schema.table(name)
        assert table is not None, name
        for verb in writes:
            start = Step(table.name, verb, cols if verb != "DELETE" else ())
            what = _start_text(start)
            for step in steps_from(schema, start):
                if isinstance(step, tuple):
                    trigger, why = step
                    if allowed is None or trigger_key(table.name, trigger.name, case) in allowed:
                        continue
                    return (
                        f"{what} {why}, whose statements GRID does not see; name it in "
                        f"triggers ({table.name}.{trigger.name}) to allow it, or take {verb} "
                        f"on {table.name} from the role"
                    )
                reason = _outside(step, verbs, granted, case)
                if reason is not None:
                    return (
                        f"{what} makes the database {_step_text(step)} ({step.because}), "
                        f"which the role may not: {reason}"
                    )
    return None


def trigger_key(table: str, name: str, case: IdentifierCase) -> tuple[str, str]:
    """How a trigger is compared: its relation's and its own name, as the dialect
    compares names (PostgreSQL trigger names are unique per relation only)."""
    return name_key(table, case), name_key(name, case)


def _outside(
    step: Step,
    verbs: Collection[str],
    granted: Mapping[str, set[str]],
    case: IdentifierCase,
) -> str | None:
    key = name_key(step.table, case)
    if key not in granted:
        return f"{step.table} is not one of its relations"
    if step.verb not in verbs:
        return f"it does not hold {step.verb}"
    missing = [c for c in step.columns if name_key(c, case) not in granted[key]]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        return f"{', '.join(missing)} of {step.table} {verb} not granted"
    return None


def _trigger_text(trigger: Trigger, table: str) -> str:
    on = f" OF {', '.join(trigger.columns)}" if trigger.columns else ""
    event = f"{trigger.event}{on}"
    if trigger.kind == "rule":
        return f"runs the {event} rule {trigger.name} of {table}"
    if trigger.kind == "function":
        return (
            f"calls the function {trigger.name} (reached from the defaults, constraints, "
            f"indexes, policies, types or query of {table}) on {event}"
        )
    if trigger.kind == "outside":
        if trigger.name == "remote":
            return f"writes another server's rows ({table} is a foreign table) on {event}"
        return (
            f"writes {trigger.name}, outside the snapshot (another schema, or a relation or "
            f"column the snapshot's user cannot see), on {event} of {table}"
        )
    return f"fires the {event} trigger {trigger.name} of {table}"


def _start_text(step: Step) -> str:
    if step.verb == "DELETE":
        return f"DELETE on {step.table}"
    return f"{step.verb} on {step.table} (of {', '.join(step.columns)})"


def _step_text(step: Step) -> str:
    if step.verb == "DELETE":
        return f"delete rows of {step.table}"
    if step.verb == "INSERT":
        return f"insert rows into {step.table}"
    return f"update {', '.join(step.columns)} of {step.table}"
