"""The text-to-SQL task over a SQLite database: role engines, prompts, verdicts, read-only runs.

This is what ``grid ask``, the SmolLM2 tests and ``bench/smollm2_50.py`` share.
It composes grid-sql's artifacts into GRID engines and talks to a chat model:

- :class:`RoleEngines`: for one schema snapshot, policy bundle and vocabulary,
  each role's :class:`~grid_core.guide.Engine` over its projection
  (:class:`~grid_sql.projection.RoleProjection`, L2) and its schema lexicon
  (:class:`~grid_sql.lexicon.SchemaLexicon`, L3), narrowed to the role's
  generation profile (:mod:`grid_sql.generation`: ``narrow`` unless the policy
  says ``full``). The union DFA, the token trie and the T2 mask cache are
  shared by every role (one walk family).
- :func:`schema_ddl` and :func:`prompt_schema`: what the model is shown of the
  database: the ``CREATE TABLE`` statements of the role's granted tables with
  their granted columns only, so the prompt never names what the mask refuses;
  the :func:`foreign_keys` between them and a few :func:`sample_rows` of each
  (granted columns only, for a role that may SELECT).
- :func:`prompt_ids`: the question in the model's chat template (as plain text,
  :func:`plain_prompt`, for a model without one), with the checker's feedback on
  a rejected statement for a retry.
- :func:`checker_for` and :func:`checker_verdict`: the SemanticChecker of a
  role and its violations (the column policy no mask can enforce, and name
  resolution).
- :func:`answer`: the repair pass (the loop of :func:`grid_sql.repair.repair`,
  one retry by default): decode, check, and when the checker refuses, decode
  once more with the violations quoted back to the model, under a guide
  tightened by them (:meth:`RoleEngines.retry_engine`). Every attempt is kept,
  with its sealed audit log. :func:`answer_covering` and
  :func:`answer_from_first` are the same in the column-scoped languages
  (:meth:`RoleEngines.scoped`); :func:`default_language` picks ``grid ask``'s
  (:data:`Language`): covering where :func:`scope_obstacle` finds nothing in
  the way, else the role's.
- :func:`shortest_statement` and :func:`budget_refusal`: the decode loop's
  precondition (the budget holds the shortest completion and EOS) checked before
  a decode, and the sealed audit log of a decode that cannot start.
- :func:`run_readonly`: execute a statement on a SQLite file opened
  ``mode=ro`` (a write statement fails there instead of writing), under the
  role's execution limits (:func:`grid_sql.execute.run_readonly`: wall time,
  rows, result bytes, SQLite heap; a limit exceeded is a
  :class:`~grid_sql.limits.LimitExceededError`).

Policy decisions: the dialect is the schema's (SQLite for the example database
and Spider's; a plug-in's, such as DuckDB, for a database file it owns);
the lexicon admits the catalog spelling of each name and its lower, upper and
capitalised forms (grid-sql's defaults); the system prompt asks for one SQLite
statement and nothing else, but nothing relies on the model obeying it. A retry
keeps the question and the tables and adds the feedback
(:func:`grid_sql.repair.feedback_text`) after them in the same user turn: the
rejected statement, each violation with its byte span and the text there, and
the grants of the tables involved. Its budget is the first attempt's.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from grid_core import strict_json
from grid_core.audit import AuditLog
from grid_core.cache import SharedCache
from grid_core.decode import Generation, reserve_source
from grid_core.errors import GridError, ServingError
from grid_core.files import read_bounded
from grid_core.grammar import Grammar, Rule
from grid_core.guide import Engine, family_of
from grid_core.lexicon import Lexicon
from grid_core.protocol import Guide
from grid_core.trie import TokenTrie, build_trie
from grid_core.vocab import Vocabulary
from grid_sql.checker import SemanticChecker, Violation
from grid_sql.column_scope import ScopedEngines, scoped_engines
from grid_sql.database import database_for
from grid_sql.dialects import get_dialect
from grid_sql.from_first import from_first_of, to_select_first
from grid_sql.generation import generation_language
from grid_sql.lexicon import SchemaLexicon
from grid_sql.limits import DEFAULT_LIMITS, LimitExceededError, Limits
from grid_sql.policy import PolicyBundle, RoleGrants
from grid_sql.projection import RoleProjection, language_dfa
from grid_sql.repair import COLUMN_CATEGORY, feedback_text, plan_retry
from grid_sql.schema import SchemaSnapshot, ascii_lower
from grid_sql.worker import WorkerError

__all__ = [
    "ANSWER_PREFIX",
    "LANGUAGES",
    "NO_STATEMENT",
    "SYSTEM_PROMPT",
    "Attempt",
    "Decode",
    "Example",
    "Language",
    "RoleEngine",
    "RoleEngines",
    "answer",
    "answer_covering",
    "answer_from_first",
    "answer_in",
    "budget_refusal",
    "chat_messages",
    "check_examples",
    "check_from_first",
    "checker_for",
    "checker_verdict",
    "default_language",
    "example_database",
    "foreign_keys",
    "format_table",
    "load_examples",
    "plain_prompt",
    "prompt_ids",
    "prompt_schema",
    "run_readonly",
    "sample_rows",
    "schema_ddl",
    "scope_obstacle",
    "shortest_statement",
]

DIALECT = "sqlite"
"""The example database's dialect; a schema's own dialect (``SchemaSnapshot.dialect``)
is the one its engines, prompt and checker use."""
SYSTEM_PROMPT = (
    "You write SQLite queries. Answer with exactly one SQL statement that answers "
    "the question over the given tables, ending with a semicolon, and nothing else."
)
#: The database named in the system prompt, per dialect (SQLite's is SYSTEM_PROMPT).
ENGINE_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL", "duckdb": "DuckDB"}

#: What the system prompt adds for the FROM-first profile (``grid ask --from-first``).
FROM_FIRST_PROMPT = (
    "Write it FROM-first: the FROM clause (with any joins) before SELECT, as in "
    "FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.singer_id SELECT T1.name "
    "WHERE T2.year > 2014;"
)

#: The start of the assistant's answer, written into the prompt: chat models
#: open SQL with a code fence, and GRID's mask would refuse the fence itself.
ANSWER_PREFIX = "```sql\n"

Language = Literal["covering", "role", "from-first"]
"""The languages ``grid ask`` decodes in (``--language``): ``covering``, the role's
SELECT-first covering language (:func:`answer_covering`); ``role``, the role's own
generation language (:func:`answer`); ``from-first``, its FROM-first scoped
language (:func:`answer_from_first`). :func:`default_language` picks one."""
LANGUAGES: tuple[Language, ...] = ("covering", "role", "from-first")

#: The stop reason sealed into the (empty) audit log of a decode that cannot start
#: because its budget cannot hold the role's shortest statement and EOS.
NO_STATEMENT = "no_statement_in_budget"


@dataclass(frozen=True, eq=False)
class RoleEngine:
    """One role's grants, projection, lexicon and engine."""

    grants: RoleGrants
    projection: RoleProjection
    lexicon: SchemaLexicon
    engine: Engine

    @property
    def role(self) -> str:
        return self.grants.role


@dataclass(eq=False)
class RoleEngines:
    """The engines of a policy's roles over one schema and vocabulary, built on demand."""

    schema: SchemaSnapshot
    policy: PolicyBundle
    vocab: Vocabulary
    trie: TokenTrie | None = None
    _built: dict[str, RoleEngine] = field(default_factory=dict)
    _shared: dict[str, SharedCache] = field(default_factory=dict)
    _scoped: dict[tuple[str, bool], ScopedEngines] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.policy.validate(self.schema)

    def __getitem__(self, role: str) -> RoleEngine:
        if role not in self._built:
            self._built[role] = self._build(role)
        return self._built[role]

    def _build(self, role: str) -> RoleEngine:
        dialect = get_dialect(self.schema.dialect)
        grants = self.policy.grants(role, self.schema)  # UnknownRoleError for a bad name
        lexicon = SchemaLexicon.build(dialect, self.schema, grants)
        projection = RoleProjection.compile(self.policy.role(role), dialect, words=lexicon.words)
        grammar, words = self._language(role, projection.grammar, lexicon.words)
        engine = self._engine(grammar, words)
        return RoleEngine(grants, projection, lexicon, engine)

    def _language(
        self, role: str, grammar: Grammar, words: Mapping[str, Collection[bytes]]
    ) -> tuple[Grammar, Mapping[str, Collection[bytes]]]:
        """The role's generation language (:func:`generation_language`, the profile its
        policy names) over a projection ``grammar`` and lexicon ``words``."""
        profile = self.policy.role(role).generation
        language, words, _ = generation_language(
            profile, grammar, get_dialect(self.schema.dialect), words, role
        )
        return language, words

    def scoped(self, role: str, *, covering: bool = False) -> ScopedEngines:
        """The role's FROM-first engines with column policy in the mask
        (:mod:`grid_sql.column_scope`): the dialect's FROM-first profile projected
        for the role, narrowed to the scoped generation language (FROM-first cores
        only, :func:`grid_sql.column_scope.generation_rule`); with ``covering``, to
        the SELECT-first covering language instead
        (:func:`grid_sql.column_scope.covering_rule`: a select list names columns
        granted wherever they are, then its FROM clause is chosen to have them).
        Raises :class:`~grid_core.errors.ServingError` for a dialect with no
        FROM-first profile, a role that may do more than SELECT, or a granted table
        with no granted column (the scope's preconditions), naming the role."""
        got = self._scoped.get((role, covering))
        if got is not None:
            return got
        dialect = get_dialect(self.schema.dialect)
        flag = f"--language {'covering' if covering else 'from-first'}"
        check_from_first(self.schema, self[role].grants, flag)
        profile = from_first_of(dialect)
        assert profile is not None
        built = self[role]
        projection = RoleProjection.compile(
            self.policy.role(role), profile, words=built.lexicon.words
        )
        if self.trie is None:
            self.trie = build_trie(self.vocab)
        try:
            got = scoped_engines(
                dialect,
                self.schema,
                built.grants,
                self.vocab,
                grammar=projection.grammar,
                trie=self.trie,
                generation=not covering,
                covering=covering,
            )
        except ValueError as e:
            raise ServingError(f"{flag}: {e}") from None
        self._scoped[(role, covering)] = got
        return got

    def _engine(
        self, grammar: Grammar, lexicon: Lexicon | Mapping[str, Collection[bytes]]
    ) -> Engine:
        dfa = language_dfa(grammar)  # the dialect's, or a typed generation language's
        if self.trie is None:
            self.trie = build_trie(self.vocab)
        family = family_of(grammar, dfa, self.trie)  # one T2 per walk family
        shared = self._shared.setdefault(family, SharedCache(family))
        return Engine(grammar, self.vocab, lexicon, dfa=dfa, trie=self.trie, cache=shared)

    def retry_engine(
        self, role: str, words: Mapping[str, Collection[bytes]] | None = None, *, star: bool = True
    ) -> Engine:
        """An engine for a retry of ``role``: its lexicon replaced by ``words`` (``category
        -> words``, a tighter lexicon; None keeps the role's) and, without ``star``, its
        projection without the result columns ``*`` and ``q.*`` (``count(*)`` stays).
        The role's own engine when neither changes anything. It shares the DFA, the
        trie and the T2 cache (keys at identifier positions carry the lexicon fingerprint).
        """
        built = self[role]
        if words is not None and {c: sorted(ws) for c, ws in words.items()} == (
            built.lexicon.word_lists()
        ):
            words = None
        if words is None and star:
            return built.engine
        grammar = built.projection.grammar
        if not star:
            grammar = grammar.project(lambda r: not _star_column(r), f"{role}-no-star")
        return self._engine(
            *self._language(role, grammar, built.lexicon.words if words is None else words)
        )


def _star_column(rule: Rule) -> bool:
    """A result-column production of ``*`` or ``q.*`` (the checker's grammar contract:
    ``result_column``, or ``star_column`` where the dialect keeps starred lists apart)."""
    return rule.origin in ("result_column", "star_column") and "STAR" in rule.expansion


#: A declared column type the prompt shows: type words, then ``(n)`` or ``(n, m)``.
PLAIN_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_ ]*(\(\s*[+-]?\d+(\s*,\s*[+-]?\d+)?\s*\))?")


#: A foreign key the prompt shows: (table, its columns, the referenced table, its columns).
ForeignKey = tuple[str, tuple[str, ...], str, tuple[str, ...]]
#: Sample rows per table ``grid ask`` shows the model (``--sample-rows``).
SAMPLE_ROWS = 3
#: The longest sample value the prompt shows, in characters (longer ones are cut, ``...``).
SAMPLE_CHARS = 40


def schema_ddl(
    schema: SchemaSnapshot,
    grants: RoleGrants,
    foreign_keys: Sequence[ForeignKey] = (),
    samples: Mapping[str, tuple[list[str], list[tuple[Any, ...]]]] | None = None,
) -> str:
    """``CREATE TABLE`` statements of the role's tables, granted columns only, one per line.

    Names are spelled as a statement must spell them (``Dialect.spell_identifier``:
    quoted unless bare), so a name holding quotes, a semicolon or a comment marker
    reads as the one name it is, never as SQL of its own; a declared type that is
    not a plain type name (:data:`PLAIN_TYPE`) is left out. A foreign key of
    ``foreign_keys`` is shown (``FOREIGN KEY (a) REFERENCES t (b)``) when the role
    is granted both tables and every column it names. ``samples`` (table ->
    (columns, rows), :func:`sample_rows`) adds each table's rows after its
    statement, in a ``/* ... */`` block.
    """
    spell = get_dialect(schema.dialect).spell_identifier
    lines = []
    for table in schema.tables:
        granted = grants.columns.get(table.name)
        if granted is None:
            continue
        types = {c.name: c.type for c in table.columns}
        cols = [
            f"{spell(c)} {types[c] if PLAIN_TYPE.fullmatch(types[c] or '') else ''}".rstrip()
            for c in granted
        ]
        for src, names, dst, targets in foreign_keys:
            if (
                src == table.name
                and set(names) <= set(granted)
                and set(targets) <= set(grants.columns.get(dst, ()))
            ):
                cols.append(
                    f"FOREIGN KEY ({', '.join(map(spell, names))}) REFERENCES "
                    f"{spell(dst)} ({', '.join(map(spell, targets))})"
                )
        lines.append(f"CREATE TABLE {spell(table.name)} ({', '.join(cols)});")
        if samples and samples.get(table.name) and samples[table.name][1]:
            columns, rows = samples[table.name]
            shown = [" | ".join(_sample_value(v) for v in row) for row in [tuple(columns), *rows]]
            lines.append(f"/* {len(rows)} row{'s' * (len(rows) > 1)} of {spell(table.name)}:")
            lines += [*shown, "*/"]
    return "\n".join(lines)


def _sample_value(value: Any) -> str:
    text = "NULL" if value is None else str(value)
    text = text.replace("*/", "* /").replace("\n", " ")
    return text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 3] + "..."


def foreign_keys(
    db_path: Path, schema: SchemaSnapshot, limits: Limits = DEFAULT_LIMITS
) -> list[ForeignKey]:
    """The foreign keys a SQLite database declares between the relations of ``schema``
    (``pragma_foreign_key_list``, read-only, under ``limits``); none for another
    backend. A key whose target columns are not named (``REFERENCES t``) refers to
    ``t``'s primary key, which the pragma does not say: it is left out."""
    if schema.dialect != "sqlite":
        return []
    names = {ascii_lower(t.name): t for t in schema.tables}
    out: list[ForeignKey] = []
    for table in schema.tables:
        literal = "'" + table.name.replace("'", "''") + "'"
        sql = f'SELECT id, "table", "from", "to" FROM pragma_foreign_key_list({literal})'
        try:
            _, rows, _ = _read(db_path, sql, 1000, limits)
        except (sqlite3.Error, LimitExceededError):
            continue
        keys: dict[int, list[tuple[str, str, str | None]]] = {}
        for key, dst, src, to in rows:
            keys.setdefault(int(key), []).append((str(dst), str(src), to))
        for parts in keys.values():
            target = names.get(ascii_lower(parts[0][0]))
            if target is None or any(to is None for _, _, to in parts):
                continue
            cols = {ascii_lower(c.name): c.name for c in table.columns}
            dst_cols = {ascii_lower(c.name): c.name for c in target.columns}
            src_names = tuple(cols.get(ascii_lower(src), "") for _, src, _ in parts)
            dst_names = tuple(dst_cols.get(ascii_lower(str(to)), "") for _, _, to in parts)
            if all(src_names) and all(dst_names):
                out.append((table.name, src_names, target.name, dst_names))
    return out


def sample_rows(
    db_path: Path,
    schema: SchemaSnapshot,
    grants: RoleGrants,
    n: int = SAMPLE_ROWS,
    limits: Limits = DEFAULT_LIMITS,
) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    """Up to ``n`` rows of each granted table, granted columns only (table -> (columns,
    rows)), read under the role's ``limits`` on the database opened read-only. None for
    a role without SELECT: a role that may not read the rows is never shown them. A
    table whose read fails or exceeds a limit has no entry.

    A relation that computes what it returns (a view, a table with a generated or a
    virtual table's hidden column) is read in a worker process killed at the limits
    (``Database.run_isolated``): one SQL function call of a view can outlast
    ``wall_time`` where the in-process deadline cannot interrupt it. A plain table's
    read runs in this process (a worker costs about 0.1 s)."""
    if n <= 0 or "SELECT" not in grants.verbs:
        return {}
    spell = get_dialect(schema.dialect).spell_identifier
    errors: tuple[type[Exception], ...] = (
        *database_for(db_path).errors,
        LimitExceededError,
        WorkerError,
    )
    out = {}
    for table, granted in grants.columns.items():
        sql = f"SELECT {', '.join(map(spell, granted))} FROM {spell(table)} LIMIT {int(n)}"
        relation = schema.table(table)
        computes = (
            relation is None
            or relation.kind != "table"
            or any(c.generated or c.hidden for c in relation.columns)
        )
        try:
            columns, rows, _ = _read(db_path, sql, n, limits, isolated=computes)
        except errors:
            continue
        out[table] = (list(columns), [tuple(r) for r in rows])
    return out


def prompt_schema(
    db_path: Path,
    schema: SchemaSnapshot,
    grants: RoleGrants,
    rows: int = SAMPLE_ROWS,
    limits: Limits = DEFAULT_LIMITS,
) -> str:
    """What the model is shown of the database: :func:`schema_ddl` with the database's
    :func:`foreign_keys` and ``rows`` :func:`sample_rows` per table (0: none), read
    under the role's ``limits``."""
    return schema_ddl(
        schema,
        grants,
        foreign_keys(db_path, schema, limits),
        sample_rows(db_path, schema, grants, rows, limits),
    )


@dataclass(frozen=True)
class Example:
    """A worked example for the prompt: a question over the same tables and its SQL."""

    question: str
    sql: str

    @property
    def statement(self) -> str:
        """The SQL as the model is shown it and must write it: stripped, ending in ``;``."""
        sql = self.sql.strip()
        return sql if sql.endswith(";") else sql + ";"


def chat_messages(
    question: str,
    ddl: str,
    feedback: str = "",
    dialect: str = DIALECT,
    from_first: bool = False,
    examples: Sequence[Example] = (),
) -> list[dict[str, str]]:
    """The chat: system instructions (naming the dialect's database; with ``from_first``
    the FROM-first form, :data:`FROM_FIRST_PROMPT`), then the tables, the question and,
    for a retry, the checker's feedback on the rejected statement.

    With ``examples`` (few-shot), the tables open the first example's question, each
    example is a user turn and an assistant turn that answers it (its SQL in a code
    fence, as the answer prefix opens one), and the question is the last user turn."""
    system = SYSTEM_PROMPT.replace("SQLite", ENGINE_NAMES.get(dialect, dialect), 1)
    if from_first:
        system += " " + FROM_FIRST_PROMPT
    messages = [{"role": "system", "content": system}]
    opening = f"Tables:\n{ddl}\n\n"
    for example in examples:
        messages.append({"role": "user", "content": f"{opening}Question: {example.question}"})
        answer = f"{ANSWER_PREFIX}{example.statement}\n```"
        messages.append({"role": "assistant", "content": answer})
        opening = ""
    user = f"{opening}Question: {question}"
    if feedback:
        user += f"\n\n{feedback}"
    messages.append({"role": "user", "content": user})
    return messages


def prompt_ids(
    tokenizer: Any,
    question: str,
    ddl: str,
    prefix: str = ANSWER_PREFIX,
    feedback: str = "",
    dialect: str = DIALECT,
    from_first: bool = False,
    examples: Sequence[Example] = (),
) -> list[int]:
    """The prompt's token ids in the tokenizer's chat template, the assistant turn opened
    and started with ``prefix`` (default: a SQL code fence); ``examples``: few-shot
    turns before the question (:func:`chat_messages`).

    A tokenizer with no chat template (a base model, such as the pretrained Gemma 3
    270M GGUF) gets the same messages as plain text (:func:`plain_prompt`), encoded
    with the tokenizer's own special tokens (its BOS)."""
    messages = chat_messages(question, ddl, feedback, dialect, from_first, examples)
    if getattr(tokenizer, "chat_template", None) is None:
        return list(tokenizer.encode(plain_prompt(messages) + prefix, add_special_tokens=True))
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, Mapping):  # some versions return a BatchEncoding
        ids = ids["input_ids"]
    return [int(i) for i in ids] + list(tokenizer.encode(prefix, add_special_tokens=False))


#: The most bytes of an ``--examples`` file read (every example is prompted: a few KiB).
MAX_EXAMPLES_BYTES = 1 << 20


def load_examples(path: Path) -> list[Example]:
    """Few-shot examples from a JSON Lines file: one ``{"question": ..., "sql": ...}``
    object per line (blank lines skipped), at most :data:`MAX_EXAMPLES_BYTES` read.
    Raises :class:`~grid_core.errors.ServingError` naming the file (and the line) of a
    bad one: unreadable, too large, not UTF-8, not strict JSON (a key given twice, NaN),
    not two non-empty strings, a lone surrogate."""
    try:
        lines = read_bounded(path, MAX_EXAMPLES_BYTES).decode("utf-8").splitlines()
    except OSError as e:
        raise ServingError(f"examples file {path}: {e.strerror or e}") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise ServingError(f"examples file {path}: {e}") from None
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = strict_json.loads(line)
        except strict_json.DuplicateKeyError as e:
            raise ServingError(f"{path}:{number}: {e}") from None
        except ValueError as e:
            raise ServingError(f"{path}:{number}: not JSON ({e})") from None
        if not (
            isinstance(item, dict)
            and set(item) == {"question", "sql"}
            and all(isinstance(item[k], str) and item[k].strip() for k in item)
        ):
            raise ServingError(
                f'{path}:{number}: an example is {{"question": "...", "sql": "..."}}, '
                "two non-empty strings"
            )
        for key in ("question", "sql"):
            try:
                item[key].encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate ("\ud800"): no text at all
                raise ServingError(
                    f"{path}:{number}: the {key} holds a lone surrogate escape; "
                    "examples are Unicode text"
                ) from None
        out.append(Example(item["question"], item["sql"]))
    return out


def check_examples(
    examples: Sequence[Example],
    served: Engine | ScopedEngines,
    schema: SchemaSnapshot,
    grants: RoleGrants,
    language: Language = "role",
) -> None:
    """Raise :class:`~grid_core.errors.ServingError` naming the first example whose SQL
    the guide of the statement could not write (outside ``served``'s language, named
    ``language``: the role's generation profile, or the covering language's scoped
    engines) or the checker refuses: an example the model imitates must be one it may
    write, and must not show it what the role cannot read."""
    for number, example in enumerate(examples, start=1):
        sql = example.statement
        if not writes(served, sql.encode("utf-8")):
            hint = " (--language role writes the role's whole language)"
            raise ServingError(
                f"example {number} ({example.question!r}): its SQL is not a statement "
                f"role {grants.role} may write in the {language} language: {sql}"
                + (hint if language == "covering" else "")
            )
        violations = checker_verdict(schema, grants, sql)
        if violations:
            raise ServingError(
                f"example {number} ({example.question!r}): the checker refuses its SQL for "
                f"role {grants.role}: {violations[0].message}"
            )


def writes(served: Engine | ScopedEngines, data: bytes) -> bool:
    """Whether ``data`` is a whole sentence of ``served``'s language (a statement its
    guide could write, EOS included)."""
    if isinstance(served, ScopedEngines):
        state = served.advance(served.start(), data)
        return state is not None and served.eos_allowed(state)
    lexer = served.lexer
    config = lexer.advance(lexer.initial, data)
    return config is not None and lexer.eos_allowed(config)


def plain_prompt(messages: Sequence[Mapping[str, str]]) -> str:
    """The chat as plain text for a model without a chat template: each message's
    content, a blank line apart, then ``Answer:`` on a line of its own (the answer
    prefix follows it)."""
    return "\n\n".join(m["content"] for m in messages) + "\n\nAnswer:\n"


def _checker_grants(grants: RoleGrants) -> dict[str, dict[str, Sequence[str] | None]]:
    return {
        grants.role: {
            t: None if t in grants.unrestricted else cols for t, cols in grants.columns.items()
        }
    }


def checker_for(schema: SchemaSnapshot, grants: RoleGrants) -> SemanticChecker:
    """The SemanticChecker of one role's grants over the schema."""
    return SemanticChecker.for_schema(schema, _checker_grants(grants))


def checker_verdict(schema: SchemaSnapshot, grants: RoleGrants, sql: str) -> list[Violation]:
    """The SemanticChecker's violations of ``sql`` for the role (empty: accepted)."""
    return checker_for(schema, grants).check(sql, grants.role)


def shortest_statement(engine: Engine | ScopedEngines) -> int:
    """Tokens of the shortest statement a fresh guide of ``engine`` writes, EOS included:
    the reserve of the initial configuration plus one (the decode loop's reserve
    source, :func:`grid_core.decode.reserve_source`). A mode-1 decode starts iff its
    budget is at least this (``grid_core.decode``)."""
    source = reserve_source(engine.guide(audit=False))
    return source.reserve(source.start()) + 1


def scope_obstacle(schema: SchemaSnapshot, grants: RoleGrants) -> str:
    """Why the column-scoped engines (:meth:`RoleEngines.scoped`: FROM-first or
    covering) cannot serve ``grants``' role, "" when they can: the schema's dialect
    has a FROM-first profile, the role may only SELECT, and every granted table
    grants a column."""
    if from_first_of(get_dialect(schema.dialect)) is None:
        return (
            f"the {schema.dialect} dialect has no FROM-first profile "
            "(SQLite and PostgreSQL have one; DuckDB parses FROM-first SQL itself)"
        )
    if grants.verbs - {"SELECT"}:
        return (
            f"role {grants.role!r} may do more than SELECT; the column scope is for "
            "SELECT-only roles"
        )
    empty = sorted(t for t, cols in grants.columns.items() if not cols)
    if empty:
        return f"role {grants.role!r} has tables without a granted column: {', '.join(empty)}"
    return ""


def check_from_first(
    schema: SchemaSnapshot, grants: RoleGrants, flag: str = "--language from-first"
) -> None:
    """Raise :class:`~grid_core.errors.ServingError` (naming ``flag``) unless the
    column-scoped engines can serve the role (:func:`scope_obstacle`), before any
    engine is built."""
    why = scope_obstacle(schema, grants)
    if why:
        raise ServingError(f"{flag}: {why}")


def default_language(
    schema: SchemaSnapshot, policy: PolicyBundle, grants: RoleGrants
) -> tuple[Language, str]:
    """The language ``grid ask`` writes in when none is named, and why: ``covering``
    (:func:`answer_covering`) where the column-scoped engines can serve the role
    (:func:`scope_obstacle`) and its policy keeps the narrow generation profile (the
    covering language is a narrow generation language; ``generation = "full"`` asks
    for the role's whole language); else ``role`` (:func:`answer`, the role's own
    generation language), the reason naming what ruled the covering language out.

    Why covering first: on Spider's 972 dev questions with SmolLM2-135M, 97.0% of its
    first attempts run on SQLite, against 48.8% in the role's narrow language, and
    its execution accuracy is 5.2% against 4.6% (``bench/results/spider_ex/``)."""
    if policy.role(grants.role).generation != "narrow":
        return "role", f'role {grants.role!r} decodes in its whole language (generation = "full")'
    why = scope_obstacle(schema, grants)
    if why:
        return "role", f"no covering language: {why}"
    return "covering", "the role may only SELECT and is granted a column of each table"


def budget_refusal(
    engine: Engine | ScopedEngines, budget: int, flags: Mapping[str, str] | None = None
) -> AuditLog:
    """The sealed audit log of a decode that cannot start: no record, stop reason
    :data:`NO_STATEMENT`, mode flags ``mode`` 1, ``budget`` and ``shortest`` (the
    tokens the shortest statement needs, EOS included) and ``flags`` (``grid ask``'s:
    the ``role`` and the ``language`` ``engine`` is), and the engine's fingerprints."""
    shortest = shortest_statement(engine)
    assert shortest > budget, "the budget holds a statement"
    log = AuditLog()
    mode: dict[str, object] = {"mode": 1, "budget": budget, "shortest": shortest, **(flags or {})}
    log.close(NO_STATEMENT, engine.fingerprints(), mode)
    return log


@dataclass(frozen=True)
class Avoid:
    """A retry's obligation to differ: ``statement`` (UTF-8) was rejected, and its first
    violation starts at byte ``at``. A retry that has written ``statement[:k]`` may
    not take a token that keeps it a prefix of ``statement`` past byte ``at``
    (``grid_serve.transformers.DivergeLogits``)."""

    statement: bytes
    at: int


Decode = Callable[[str, Engine, Avoid | None], Generation]
"""``decode(feedback, engine, avoid) -> Generation``: one mode-1 decode of the question
under a fresh guide of ``engine``, prompted with ``feedback`` ("" on the first attempt)
and, on a retry, diverging from the rejected statement at the latest where its first
violation starts (``avoid``; None on the first attempt)."""


@dataclass(frozen=True)
class Attempt:
    """One decode of the repair pass.

    ``sql`` is the statement as decoded (the violations' spans index its UTF-8
    bytes); ``feedback`` the text it was prompted with ("" on the first
    attempt); ``removed`` the column names the attempt's lexicon no longer
    spells and ``star`` whether its guide admitted ``*`` result columns (both
    as the role's guide on the first attempt).
    """

    generation: Generation
    sql: str
    violations: tuple[Violation, ...]
    feedback: str = ""
    removed: tuple[str, ...] = ()
    star: bool = True
    error: str = ""
    """Why the checker could not judge the statement ("" when it did): such an
    attempt is refused and not retried."""
    decoded: str = ""
    """The FROM-first statement as decoded, when ``sql`` is its SELECT-first rewrite
    (:func:`answer_from_first`); "" otherwise."""

    @property
    def verdict(self) -> str:
        """``accepted``, ``refused: N violation(s)`` or ``error: ...`` (the seal's flag)."""
        if self.error:
            return f"error: {self.error}"
        if self.violations:
            n = len(self.violations)
            return f"refused: {n} violation{'s' * (n != 1)}"
        return "accepted"


def answer(
    decode: Decode, engines: RoleEngines, role: str, *, retries: int = 1
) -> tuple[Attempt, ...]:
    """The repair pass: decode, check, and while the checker refuses, retry up to
    ``retries`` times (0: no repair). The loop of :func:`grid_sql.repair.repair`, with
    one more constraint. Each retry is prompted with the feedback on the attempt before
    it (:func:`grid_sql.repair.plan_retry`), told to differ from the rejected statement
    at the latest where its first violation starts (:class:`Avoid`: a retry never
    writes it again word for word; issue #16 saw 129 retries that did), and decoded
    under :meth:`RoleEngines.retry_engine`:
    the lexicon tightened by the ``column_not_granted`` violations so far, and no ``*``
    result column once a violation came from one (the feedback says not to use it; the
    mask then enforces it). The last attempt is the answer: accepted iff it has no
    violation. Every statement is a sentence of L, which the checker's grammar contains;
    should the checker still fail on one, the attempt records why (``Attempt.error``),
    counts as refused, and the pass stops there.
    """
    built = engines[role]
    checker = checker_for(engines.schema, built.grants)
    spelled = built.lexicon.origins[COLUMN_CATEGORY]
    attempts: list[Attempt] = []
    feedback, words, star = "", None, True
    avoid: Avoid | None = None
    for _ in range(retries + 1):
        gen = decode(feedback, engines.retry_engine(role, words, star=star), avoid)
        sql = gen.text.decode("utf-8", "replace")
        try:
            violations = tuple(checker.check(sql, role))
        except GridError as e:  # a statement of L the checker cannot judge: refused, kept
            attempts.append(Attempt(gen, sql, (), feedback, (), star, str(e)))
            break
        gone: set[bytes] = set(spelled) - set(words[COLUMN_CATEGORY]) if words else set()
        removed = tuple(sorted({name for word in gone for name in spelled[word]}))
        attempts.append(Attempt(gen, sql, violations, feedback, removed, star))
        if not violations:
            break
        avoid = Avoid(gen.text, min(v.span[0] for v in violations))
        plan = plan_retry(sql, role, violations, checker, words or built.lexicon.word_lists())
        feedback, words = plan.feedback, plan.lexicon or words  # removals accumulate
        star = star and all(v.via != "star" for v in violations)
    return tuple(attempts)


def answer_from_first(
    decode: Callable[[Guide], Generation], engines: RoleEngines, role: str
) -> tuple[Attempt, ...]:
    """The FROM-first profile (``grid ask --from-first``): one mode-1 decode under the
    role's scoped guide (:meth:`RoleEngines.scoped`: column policy in the mask), the
    statement rewritten SELECT-first (:func:`grid_sql.from_first.to_select_first`;
    a dialect that parses FROM-first SQL, DuckDB, runs it as written), then the
    checker on the rewrite. No repair: the column policy the checker would
    feed back is already the mask's. ``Attempt.sql`` is the rewrite (what runs, what
    the checker's spans index); ``Attempt.decoded`` the FROM-first statement the
    audit log's tokens spell."""
    built = engines[role]
    checker = checker_for(engines.schema, built.grants)
    gen = decode(engines.scoped(role).guide())
    decoded = gen.text.decode("utf-8", "replace")
    dialect = get_dialect(engines.schema.dialect)
    try:
        sql = decoded if dialect.from_first_native else to_select_first(decoded, dialect.name)
        violations = tuple(checker.check(sql, role))
    except GridError as e:  # a statement of L the rewrite or checker cannot read: refused
        return (Attempt(gen, decoded, (), error=str(e), decoded=decoded),)
    return (Attempt(gen, sql, violations, decoded=decoded),)


GuideDecode = Callable[[Guide, str, Avoid | None], Generation]
"""``decode(guide, feedback, avoid) -> Generation``: :data:`Decode` with the guide given."""


def answer_covering(
    decode: GuideDecode, engines: RoleEngines, role: str, *, retries: int = 1
) -> tuple[Attempt, ...]:
    """The SELECT-first covering language (``grid ask --covering``): mode-1 decodes
    under fresh guides of the role's covering language (:meth:`RoleEngines.scoped`
    with ``covering``: the FROM clause chosen to have the columns its select list
    named, every later column one its tables have), each judged by the checker, and
    while it refuses, up to ``retries`` retries (0: no repair) as :func:`answer`'s:
    prompted with the feedback on the attempt before, diverging from it at the latest
    where its first violation starts (:class:`Avoid`). The language is the same on a
    retry: the column policy the feedback could tighten is already the mask's, so
    what it refuses are the statement rules (argument counts, aggregates, windows)
    and the walk's column counts. No rewrite."""
    checker = checker_for(engines.schema, engines[role].grants)
    covering = engines.scoped(role, covering=True)
    attempts: list[Attempt] = []
    feedback, avoid = "", None
    for _ in range(retries + 1):
        gen = decode(covering.guide(), feedback, avoid)
        sql = gen.text.decode("utf-8", "replace")
        try:
            violations = tuple(checker.check(sql, role))
        except GridError as e:  # a statement of L the checker cannot judge: refused, kept
            attempts.append(Attempt(gen, sql, (), feedback, error=str(e)))
            break
        attempts.append(Attempt(gen, sql, violations, feedback))
        if not violations:
            break
        avoid = Avoid(gen.text, min(v.span[0] for v in violations))
        feedback = feedback_text(sql, role, violations, checker)
    return tuple(attempts)


def answer_in(
    language: Language,
    decode: GuideDecode,
    engines: RoleEngines,
    role: str,
    *,
    retries: int = 1,
    guide_of: Callable[[Engine], Guide] | None = None,
) -> tuple[Attempt, ...]:
    """What ``grid ask --language LANGUAGE`` answers with: :func:`answer_covering`,
    :func:`answer` (each attempt decoded under ``guide_of(engine)``, default a fresh
    ``engine.guide()``: ``grid ask --events`` streams it) or :func:`answer_from_first`
    (no repair: ``retries`` does not apply), every decode by ``decode(guide, feedback,
    avoid)``. A language none of :data:`LANGUAGES` is a ``ValueError``."""
    if language not in LANGUAGES:
        raise ValueError(f"no language {language!r}: one of {', '.join(LANGUAGES)}")
    if language == "covering":
        return answer_covering(decode, engines, role, retries=retries)
    if language == "from-first":
        return answer_from_first(lambda guide: decode(guide, "", None), engines, role)
    fresh = guide_of or (lambda engine: engine.guide())
    return answer(
        lambda feedback, engine, avoid: decode(fresh(engine), feedback, avoid),
        engines,
        role,
        retries=retries,
    )


def example_database(directory: Path) -> Path:
    """grid-sql's example company database (``examples/company.sql``) as a SQLite file."""
    ddl = resources.files("grid_sql.examples").joinpath("company.sql").read_text()
    path = directory / "company.sqlite"
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    try:
        db.executescript(ddl)
        db.commit()
    finally:
        db.close()
    return path


def run_readonly(
    db_path: Path, sql: str, max_rows: int = 50, limits: Limits = DEFAULT_LIMITS
) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    """Run ``sql`` on the database opened read-only under ``limits``, in a worker
    process killed at them (:mod:`grid_sql.worker`): (column names, the first
    ``max_rows`` rows, whether the result has more). The database's backend is the
    one that owns the file (:func:`grid_sql.database.database_for`: SQLite, or a
    plug-in such as DuckDB).

    Raises :class:`~grid_sql.limits.LimitExceededError` when the statement exceeds a
    limit, one of the backend's ``errors`` (:class:`sqlite3.Error` for SQLite) when
    the database refuses it, and :class:`~grid_sql.worker.WorkerError` when the
    worker fails otherwise.
    """
    result = database_for(db_path).run_isolated(db_path, sql, limits, max_rows)
    return result.columns, result.rows, result.more


def _read(
    db_path: Path,
    sql: str,
    max_rows: int,
    limits: Limits = DEFAULT_LIMITS,
    *,
    isolated: bool = False,
) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    """GRID's own reads of the database (foreign keys, sample rows): statements GRID
    wrote, run in this process, or with ``isolated`` in a worker killed at ``limits``
    (a read of a relation that computes)."""
    database = database_for(db_path)
    run = database.run_isolated if isolated else database.run
    result = run(db_path, sql, limits, max_rows)
    return result.columns, result.rows, result.more


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table: a header, a rule and the rows, columns padded to width."""
    cells = [[str(c) for c in columns]] + [
        ["NULL" if v is None else str(v) for v in r] for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = [" | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)
