"""Checker-guided repair: feedback for the model and the inputs of one constrained retry.

Column policy is not enforceable by the mask (docs/guarantees/index.md, theorem 5),
so a statement the guide produced may still read a column its role is not
granted. The `SemanticChecker` finds it after the parse; this module turns its
verdict into one more, better informed attempt. It is model-agnostic: it
produces text and lexicon words, and the caller decides how to prompt and decode.

The loop (`repair`):

1. decode under the role's guide (verb- and table-level policy are in the mask);
2. check the statement (`SemanticChecker.check`); no violation: done;
3. `plan_retry`: the feedback text (each violation's message, quoted with its
   byte span and the text there, and what the role is granted) and, optionally,
   a tighter lexicon for the retry;
4. decode once more, with the feedback in the prompt, under the same role's
   guide, or under a guide built with the tighter lexicon
   (`grid_core.guide.Engine(grammar, vocab, lexicon=plan.lexicon)`);
5. check again. The retry's output is checked like any other: the tighter
   lexicon narrows what the model can write, it proves nothing (a
   double-quoted name outside the column lexicon is lexed as a string, yet SQLite
   resolves it to the column when one has that name; ``*`` still expands to every
   column). What is never returned is a statement with a violation.

The tighter lexicon removes the offending column names from ``COLUMN_NAME``
(every spelling of them: bare, quoted, any ASCII case). It is **per retry**:
build the retry's engine from it, then drop it. It may **over-restrict**: the
column lexicon is one list of names for all tables, so removing ``budget``
because ``departments.budget`` is not granted also removes the granted
``projects.budget``. `RetryPlan.over_restricted` names such columns; a caller
may then prefer the unchanged guide for that retry.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from grid_sql.checker import SemanticChecker, Violation, ViolationKind, fold, unquote
from grid_sql.violations import STATEMENT_RULES

COLUMN_CATEGORY = "COLUMN_NAME"


@dataclass(frozen=True)
class RetryPlan:
    """What one constrained retry needs.

    ``feedback`` is the text for the model. ``lexicon`` is the tighter lexicon
    (category -> words) for the retry's engine, or None when no lexicon was given
    or nothing is to be removed. ``removed`` lists the column names taken out of
    ``COLUMN_NAME``; ``over_restricted`` those of them that the role is granted on
    some other table (``table.column``).
    """

    feedback: str
    lexicon: dict[str, list[bytes]] | None
    removed: tuple[str, ...]
    over_restricted: tuple[str, ...]


def feedback_text(
    sql: str | bytes, role: str, violations: Sequence[Violation], checker: SemanticChecker
) -> str:
    """The feedback for the model: the statement, each violation (span, quoted text,
    message) and the grants of the tables involved. Empty when there is no violation."""
    if not violations:
        return ""
    data = sql.encode("utf-8") if isinstance(sql, str) else sql
    lines = [
        f"The SQL statement below was rejected for role {role}: {_headline(violations)}.",
        "",
        data.decode("utf-8", "replace").strip(),
        "",
        "Problems (byte offsets into the statement):",
    ]
    for number, v in enumerate(violations, start=1):
        start, end = v.span
        quoted = data[start:end].decode("utf-8", "replace") or "<end of statement>"
        lines.append(f"{number}. bytes {start}-{end} `{quoted}`: {v.message}")
    lines += ["", f"Granted to role {role}:"]
    granted = checker.granted_tables(role)
    involved = _involved_tables(data, violations, checker)
    for table in granted:
        if fold(table) not in involved:
            continue
        columns = checker.granted_columns(role, table) or ()
        every = len(columns) == len(checker.table_columns(table))
        suffix = " (every column)" if every else ""
        lines.append(f"- {table}: {', '.join(columns) or 'no column'}{suffix}")
    others = [t for t in granted if fold(t) not in involved]
    if others:
        lines.append(f"- other tables: {', '.join(others)}")
    if not granted:
        lines.append("- nothing")
    advice = []
    read_only = ViolationKind.READ_ONLY_COLUMN
    if any(v.kind not in STATEMENT_RULES and v.kind is not read_only for v in violations):
        advice.append("Rewrite the statement using only granted tables and columns.")
    if any(v.kind is read_only for v in violations):
        advice.append(
            "Leave the generated and hidden columns named above out of INSERT and SET, and "
            "name the columns an INSERT's values are for."
        )
    if any(v.via == "star" for v in violations):
        advice.append("Do not use * or t.* on a table with a column that is not granted.")
    if any(v.kind in STATEMENT_RULES for v in violations):
        advice.append("Correct each call and subquery named above.")
    lines += ["", " ".join(advice)]
    return "\n".join(lines)


#: What each kind of violation says about the statement, in the feedback's headline.
_WHAT = {
    ViolationKind.TABLE_NOT_GRANTED: "it uses a table the role cannot use",
    ViolationKind.COLUMN_NOT_GRANTED: "it uses a column the role cannot use",
    ViolationKind.UNKNOWN_TABLE: "it names a table that does not exist",
    ViolationKind.UNKNOWN_COLUMN: "it names a column that no table in its FROM clause has",
    ViolationKind.UNKNOWN_QUALIFIER: "it qualifies a column with a name that is no table or "
    "alias of its FROM clause",
    ViolationKind.AMBIGUOUS_COLUMN: "it names a column that two of its tables have, "
    "without saying which",
    ViolationKind.WRONG_ARGUMENT_COUNT: "it calls a function with the wrong number of arguments",
    ViolationKind.CONSTANT_ARGUMENT: "it passes a function an argument that must be a constant "
    "of a range (likelihood(x, 0.5))",
    ViolationKind.MISUSED_WINDOW: "it uses a window function without OVER or where none is allowed",
    ViolationKind.MISUSED_AGGREGATE: "it uses an aggregate where none is allowed",
    ViolationKind.MISUSED_ROW_VALUE: "it uses a row value (x, y, ...) where none is allowed",
    ViolationKind.COLUMN_COUNT: (
        "a subquery, compound SELECT, VALUES, INSERT or IN table gives the wrong number of columns"
    ),
    ViolationKind.DUPLICATE_NAME: (
        "it gives two common tables, two windows or two tables of one FROM clause the same name"
    ),
    ViolationKind.READ_ONLY_COLUMN: "it writes a column that is computed or hidden",
}


def _headline(violations: Sequence[Violation]) -> str:
    """What is wrong, true for the violations found: one clause per kind, in order."""
    kinds = dict.fromkeys(v.kind for v in violations)
    return "; ".join(_WHAT[k] for k in kinds)


def _involved_tables(
    data: bytes, violations: Sequence[Violation], checker: SemanticChecker
) -> set[str]:
    involved = {fold(v.table) for v in violations if v.table is not None}
    involved |= {fold(t.table) for t in checker.analyze(data).tables}
    return involved


def tighten_lexicon(
    lexicon: Mapping[str, Collection[bytes]],
    columns: Collection[str],
    category: str = COLUMN_CATEGORY,
) -> dict[str, list[bytes]]:
    """A copy of ``lexicon`` without the words of ``category`` that spell one of
    ``columns`` (compared unquoted, by ASCII case folding). Words keep their order;
    other categories are copied unchanged."""
    banned = {fold(c) for c in columns}
    out: dict[str, list[bytes]] = {}
    for name, words in lexicon.items():
        if name == category:
            out[name] = [w for w in words if _word_key(w) not in banned]
        else:
            out[name] = list(words)
    return out


def _word_key(word: bytes) -> str:
    return fold(unquote(word.decode("utf-8", "replace")))


def plan_retry(
    sql: str | bytes,
    role: str,
    violations: Sequence[Violation],
    checker: SemanticChecker,
    lexicon: Mapping[str, Collection[bytes]] | None = None,
    category: str = COLUMN_CATEGORY,
) -> RetryPlan:
    """Feedback plus the optional tighter lexicon for one retry (see the module header).

    The columns removed are those of the ``column_not_granted`` violations (a
    column reached through ``*`` included, so the retry cannot list it either;
    the row-id pseudo-column excluded). A ``read_only_column`` removes nothing: the
    retry may still read that column; the feedback says not to write it.
    """
    feedback = feedback_text(sql, role, violations, checker)
    denied: dict[str, tuple[str, str]] = {}  # column key -> (table, column)
    for v in violations:
        if v.kind is ViolationKind.COLUMN_NOT_GRANTED and v.via != "rowid":
            assert v.table is not None and v.column is not None
            denied.setdefault(fold(v.column), (v.table, v.column))
    removed = tuple(column for _, column in denied.values())
    over: list[str] = []
    for key, (table, _) in denied.items():
        for other in checker.granted_tables(role):
            if fold(other) == fold(table):
                continue
            columns = checker.granted_columns(role, other) or ()
            over += [f"{other}.{c}" for c in columns if fold(c) == key]
    tighter = None
    if lexicon is not None and removed:
        tighter = tighten_lexicon(lexicon, removed, category)
    return RetryPlan(feedback, tighter, removed, tuple(over))


Generate = Callable[[str, dict[str, list[bytes]] | None], str]
"""``generate(feedback, lexicon)``: one decode. ``feedback`` is "" on the first
attempt; ``lexicon`` is None (use the role's guide as is) or the tighter lexicon."""


@dataclass(frozen=True)
class RepairResult:
    """The outcome of `repair`: the accepted statement (None if every attempt had a
    violation), every attempt made, and the violations of each."""

    sql: str | None
    attempts: tuple[str, ...]
    violations: tuple[tuple[Violation, ...], ...]


def repair(
    generate: Generate,
    role: str,
    checker: SemanticChecker,
    *,
    lexicon: Mapping[str, Collection[bytes]] | None = None,
    retries: int = 1,
    tighten: bool = True,
) -> RepairResult:
    """Decode, check, and retry with feedback up to ``retries`` times.

    With ``tighten`` and a ``lexicon`` (the role's lexicon), each retry gets the
    lexicon tightened by the violations of every attempt so far, else None. A
    statement is returned only when it has no violation. Raises
    `~grid_sql.checker.StatementParseError` if ``generate`` returns a statement
    outside L (a guided decode in mode 1 never does).
    """
    attempts: list[str] = []
    found: list[tuple[Violation, ...]] = []
    feedback, retry_lexicon = "", None
    for _ in range(retries + 1):
        sql = generate(feedback, retry_lexicon)
        violations = checker.check(sql, role)
        attempts.append(sql)
        found.append(tuple(violations))
        if not violations:
            return RepairResult(sql, tuple(attempts), tuple(found))
        base = (retry_lexicon or lexicon) if tighten else None  # removals accumulate
        plan = plan_retry(sql, role, violations, checker, base)
        feedback, retry_lexicon = plan.feedback, plan.lexicon or retry_lexicon
    return RepairResult(None, tuple(attempts), tuple(found))


__all__ = [
    "COLUMN_CATEGORY",
    "Generate",
    "RepairResult",
    "RetryPlan",
    "feedback_text",
    "plan_retry",
    "repair",
    "tighten_lexicon",
]
