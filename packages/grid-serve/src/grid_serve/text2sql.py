"""The text-to-SQL task over a SQLite database: role engines, prompts, verdicts, read-only runs.

This is what ``grid ask``, the SmolLM2 tests and ``bench/smollm2_50.py`` share.
It composes grid-sql's artifacts into GRID engines and talks to a chat model:

- :class:`RoleEngines`: for one schema snapshot, policy bundle and vocabulary,
  each role's :class:`~grid_core.guide.Engine` over its projection
  (:class:`~grid_sql.projection.RoleProjection`, L2) and its schema lexicon
  (:class:`~grid_sql.lexicon.SchemaLexicon`, L3). The union DFA, the token trie
  and the T2 mask cache are shared by every role (one dialect family).
- :func:`schema_ddl`: the ``CREATE TABLE`` statements the model is shown: the
  role's granted tables with their granted columns only, so the prompt never
  names what the mask refuses.
- :func:`prompt_ids`: the question in the model's chat template.
- :func:`checker_verdict`: the SemanticChecker's violations for the role (the
  column policy no mask can enforce, and name resolution).
- :func:`run_readonly`: execute a statement on a SQLite file opened
  ``mode=ro``: a write statement fails there instead of writing.

Policy decisions: the dialect is SQLite (the example database and Spider's);
the lexicon admits the catalog spelling of each name and its lower, upper and
capitalised forms (grid-sql's defaults); the system prompt asks for one SQLite
statement and nothing else, but nothing relies on the model obeying it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from grid_core.cache import SharedCache
from grid_core.errors import ServingError
from grid_core.guide import Engine
from grid_core.trie import TokenTrie, build_trie
from grid_core.vocab import Vocabulary
from grid_sql.checker import SemanticChecker, Violation
from grid_sql.dialects import get_dialect
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import PolicyBundle, RoleGrants
from grid_sql.projection import RoleProjection, dialect_dfa
from grid_sql.schema import SchemaSnapshot

__all__ = [
    "ANSWER_PREFIX",
    "SYSTEM_PROMPT",
    "RoleEngine",
    "RoleEngines",
    "chat_messages",
    "checker_verdict",
    "example_database",
    "format_table",
    "prompt_ids",
    "run_readonly",
    "schema_ddl",
]

DIALECT = "sqlite"
SYSTEM_PROMPT = (
    "You write SQLite queries. Answer with exactly one SQL statement that answers "
    "the question over the given tables, ending with a semicolon, and nothing else."
)

#: The start of the assistant's answer, written into the prompt: chat models
#: open SQL with a code fence, and GRID's mask would refuse the fence itself.
ANSWER_PREFIX = "```sql\n"


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
    _shared: SharedCache | None = None

    def __post_init__(self) -> None:
        if self.schema.dialect != DIALECT:
            raise ServingError(f"a {self.schema.dialect} schema: only {DIALECT} is supported")
        self.policy.validate(self.schema)

    def __getitem__(self, role: str) -> RoleEngine:
        if role not in self._built:
            self._built[role] = self._build(role)
        return self._built[role]

    def _build(self, role: str) -> RoleEngine:
        dialect = get_dialect(DIALECT)
        grants = self.policy.grants(role, self.schema)  # UnknownRoleError for a bad name
        projection = RoleProjection.compile(self.policy.role(role), dialect)
        lexicon = SchemaLexicon.build(dialect, self.schema, grants)
        dfa = dialect_dfa(dialect)
        if self.trie is None:
            self.trie = build_trie(self.vocab)
        if self._shared is None:
            self._shared = SharedCache(f"{dfa.fingerprint}:{self.trie.fingerprint}")
        engine = Engine(
            projection.grammar,
            self.vocab,
            lexicon.lexicon,
            dfa=dfa,
            trie=self.trie,
            cache=self._shared,
        )
        return RoleEngine(grants, projection, lexicon, engine)


def schema_ddl(schema: SchemaSnapshot, grants: RoleGrants) -> str:
    """``CREATE TABLE`` statements of the role's tables, granted columns only, one per line."""
    lines = []
    for table in schema.tables:
        granted = grants.columns.get(table.name)
        if granted is None:
            continue
        types = {c.name: c.type for c in table.columns}
        cols = ", ".join(f"{c} {types[c]}".rstrip() for c in granted)
        lines.append(f"CREATE TABLE {table.name} ({cols});")
    return "\n".join(lines)


def chat_messages(question: str, ddl: str) -> list[dict[str, str]]:
    """The chat: system instructions, then the tables and the question."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Tables:\n{ddl}\n\nQuestion: {question}"},
    ]


def prompt_ids(tokenizer: Any, question: str, ddl: str, prefix: str = ANSWER_PREFIX) -> list[int]:
    """The prompt's token ids in the tokenizer's chat template, the assistant turn opened
    and started with ``prefix`` (default: a SQL code fence)."""
    ids = tokenizer.apply_chat_template(
        chat_messages(question, ddl), add_generation_prompt=True, tokenize=True
    )
    if isinstance(ids, Mapping):  # some versions return a BatchEncoding
        ids = ids["input_ids"]
    return [int(i) for i in ids] + list(tokenizer.encode(prefix, add_special_tokens=False))


def _checker_grants(grants: RoleGrants) -> dict[str, dict[str, Sequence[str] | None]]:
    return {
        grants.role: {
            t: None if t in grants.unrestricted else cols for t, cols in grants.columns.items()
        }
    }


def checker_verdict(schema: SchemaSnapshot, grants: RoleGrants, sql: str) -> list[Violation]:
    """The SemanticChecker's violations of ``sql`` for the role (empty: accepted)."""
    tables = {t.name: t.column_names for t in schema.tables}
    checker = SemanticChecker(tables, _checker_grants(grants), dialect=DIALECT)
    return checker.check(sql, grants.role)


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
    db_path: Path, sql: str, max_rows: int = 50
) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    """Run ``sql`` on the database opened read-only: (column names, rows, more rows left).

    Raises :class:`sqlite3.Error` when the database refuses the statement.
    """
    uri = db_path.resolve().as_uri() + "?mode=ro"
    db = sqlite3.connect(uri, uri=True)
    try:
        cursor = db.execute(sql)
        columns = [d[0] for d in cursor.description or ()]
        rows = cursor.fetchmany(max_rows + 1)
        return columns, rows[:max_rows], len(rows) > max_rows
    finally:
        db.close()


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table: a header, a rule and the rows, columns padded to width."""
    cells = [[str(c) for c in columns]] + [
        ["NULL" if v is None else str(v) for v in r] for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = [" | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)
