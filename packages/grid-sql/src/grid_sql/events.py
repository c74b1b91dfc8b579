"""SQL parse events: the dialect's event symbols (`Dialect.events`) and their meaning.

`event_spec(dialect, grammar)` is the `grid_core.events.EventSpec` of a dialect
for one grammar (L1 or a role's projection: rules the projection cut are left
out, they can never complete). `SqlEventReader` reads a stream's events in order
and resolves each against the output and the role's grants, as one JSON-ready
mapping (`docs/events.md`):

- `verb`: `{"verb": "SELECT"}` (words upper-cased, blanks folded: `INSERT OR REPLACE`);
- `table`: `{"table": name, "granted": bool, "columns": [...] | "*"}`: the name
  unquoted, matched to the catalog as the dialect compares identifiers; the
  role's grant (a table the mask admitted is always granted; a CTE is not in
  the catalog: `granted` is null);
- `alias`: `{"alias": name, "table": name}`: the table it names, when the alias
  directly follows a table reference;
- `qualifier`: `{"qualifier": name}`;
- `column`: `{"column": name, "qualifier": q, "table": t}`: `qualifier` when the
  column is written qualified, `table` when that qualifier is a table or an
  alias seen earlier in the stream (qualified when known), else null;
- `clause_open` / `clause_close`: `{"clause": "WHERE"}` / `{"clause": "where_clause"}`;
- `statement`: `{"complete": true}`.

Every mapping also has `kind`, `name`, `start`, `end`, `step` and `text` (the
span's bytes as UTF-8, invalid bytes replaced).
"""

from __future__ import annotations

import copy
from typing import Any

from grid_core.events import Event, EventSpec
from grid_core.grammar import Grammar
from grid_sql.dialect import Dialect
from grid_sql.policy import RoleGrants


def event_spec(dialect: Dialect, grammar: Grammar) -> EventSpec:
    """The dialect's event symbols that ``grammar`` still has (every terminal, the
    rules a projection kept)."""
    names = {t.name for t in grammar.terminals}
    names |= {r.alias or r.origin for r in grammar.rules}
    return EventSpec(tuple((s, k) for s, k in dialect.events if s in names))


class SqlEventReader:
    """Resolves one stream's events in order (it remembers tables and aliases)."""

    def __init__(self, dialect: Dialect, grants: RoleGrants | None = None) -> None:
        self.dialect = dialect
        self.grants = grants
        self._names: dict[str, str] = {}  # a table or alias (folded) -> its table
        self._last_table: tuple[int, str] | None = None  # (end, table)
        self._qualifier: tuple[int, str] | None = None  # (end, qualifier)

    def fork(self) -> SqlEventReader:
        """An independent reader that has read what this one has (O(tables and
        aliases read); the dialect and grants are shared)."""
        other = copy.copy(self)
        other._names = dict(self._names)
        return other

    def read(self, event: Event, output: bytes) -> dict[str, Any]:
        """The event with its meaning (see the module header). ``output`` holds at
        least the event's span."""
        text = output[event.start : event.end].decode("utf-8", errors="replace")
        out = event.mapping() | {"text": text}
        kind = event.kind
        if kind == "verb":
            out["verb"] = " ".join(text.split()).upper()
        elif kind == "table":
            name = self.unquote(text)
            out["table"] = name
            out.update(self.grant(name, event.name))
            self._names[self.fold(name)] = name
            self._last_table = (event.end, name)
        elif kind == "alias":
            alias = self.unquote(text.split()[-1])
            table = self._last_table[1] if self._last_table else None
            out["alias"], out["table"] = alias, table
            if table is not None:
                self._names[self.fold(alias)] = table
        elif kind == "qualifier":
            qualifier = self.unquote(text.rstrip().removesuffix("."))
            out["qualifier"] = qualifier
            self._qualifier = (event.end, qualifier)
        elif kind == "column":
            qualifier = None
            if self._qualifier is not None and self._qualifier[0] == event.start:
                qualifier = self._qualifier[1]
            out["column"] = self.unquote(text)
            out["qualifier"] = qualifier
            out["table"] = None if qualifier is None else self._names.get(self.fold(qualifier))
        elif kind == "clause_open":
            out["clause"] = text.upper()
        elif kind == "clause_close":
            out["clause"] = event.name
        elif kind == "statement":
            out["complete"] = True
        return out

    def grant(self, table: str, terminal: str) -> dict[str, Any]:
        """The role's grant on a table reference (null without grants or for a CTE)."""
        if self.grants is None or terminal != self.dialect.table_category:
            return {"granted": None, "columns": None}
        for catalog, columns in self.grants.columns.items():
            if self.fold(catalog) == self.fold(table):
                listed = "*" if catalog in self.grants.unrestricted else list(columns)
                return {"granted": True, "columns": listed}
        return {"granted": False, "columns": []}

    def unquote(self, word: str) -> str:
        """An identifier lexeme's word: the quotes of its form removed, doubled
        closing quotes undone."""
        for form in self.dialect.identifier_quotes:
            if len(word) >= 2 and word.startswith(form.open) and word.endswith(form.close):
                inner = word[len(form.open) : len(word) - len(form.close)]
                return inner.replace(form.close * 2, form.close) if form.doubling else inner
        return word

    def fold(self, word: str) -> str:
        """``word`` as the dialect compares identifiers."""
        if self.dialect.identifier_case == "sensitive":
            return word
        return word.lower()
