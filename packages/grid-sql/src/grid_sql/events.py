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
- `alias`: `{"alias": name, "table": name}`: the table it names when the alias
  directly follows a table reference (only blanks and comments between them),
  else null (a subquery's alias);
- `qualifier`: `{"qualifier": name}`;
- `column`: `{"column": name, "qualifier": q, "table": t}`: `qualifier` when the
  column is written qualified (blanks and comments may follow the dot), `table`
  when that qualifier is a table or an alias seen earlier in the stream
  (qualified when known), else null. Names are compared as the dialect compares
  identifiers (PostgreSQL: a quoted name keeps its case, a bare one folds to
  lower case);
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
from grid_sql.dialect import Dialect, QuoteForm
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
        self._names: dict[str, str] = {}  # a table or alias (its key) -> its table
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
            out.update(self.grant(text, event.name))
            self._names[self.key(text)] = name
            self._last_table = (event.end, name)
        elif kind == "alias":
            written = _alias_word(text, self.dialect.identifier_quotes)
            table = None
            if self._last_table is not None and _blank(output, self._last_table[0], event.start):
                table = self._last_table[1]
            out["alias"], out["table"] = self.unquote(written), table
            if table is not None:
                self._names[self.key(written)] = table
        elif kind == "qualifier":
            written = text.rstrip().removesuffix(".")
            out["qualifier"] = self.unquote(written)
            self._qualifier = (event.end, written)
        elif kind == "column":
            written = None
            if self._qualifier is not None and _blank(output, self._qualifier[0], event.start):
                written = self._qualifier[1]
            out["column"] = self.unquote(text)
            out["qualifier"] = None if written is None else self.unquote(written)
            out["table"] = None if written is None else self._names.get(self.key(written))
        elif kind == "clause_open":
            out["clause"] = text.upper()
        elif kind == "clause_close":
            out["clause"] = event.name
        elif kind == "statement":
            out["complete"] = True
        return out

    def grant(self, written: str, terminal: str) -> dict[str, Any]:
        """The role's grant on a table reference as written (null without grants or
        for a CTE)."""
        if self.grants is None or terminal != self.dialect.table_category:
            return {"granted": None, "columns": None}
        for catalog, columns in self.grants.columns.items():
            if self.catalog_key(catalog) == self.key(written):
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

    def key(self, written: str) -> str:
        """An identifier lexeme as written, as the dialect compares it: quotes
        removed; folded to lower case unless the dialect is case-sensitive, or it
        folds bare names only (PostgreSQL) and this one is quoted."""
        word = self.unquote(written)
        case = self.dialect.identifier_case
        if case == "sensitive" or (case == "fold-lower" and word != written):
            return word
        return word.lower()

    def catalog_key(self, name: str) -> str:
        """A catalog name (as created) as :meth:`key` compares it."""
        return name if self.dialect.identifier_case != "insensitive" else name.lower()


def _skip_blank(text: bytes, at: int, end: int) -> int:
    """The first offset from ``at`` (before ``end``) that is no blank and starts no
    comment (``--`` to the end of its line, ``/* ... */``)."""
    while at < end:
        if text[at : at + 1].isspace():
            at += 1
        elif text.startswith(b"--", at):
            newline = text.find(b"\n", at, end)
            at = end if newline < 0 else newline + 1
        elif text.startswith(b"/*", at):
            close = text.find(b"*/", at + 2, end)
            at = end if close < 0 else close + 2
        else:
            break
    return at


def _blank(output: bytes, start: int, end: int) -> bool:
    """Whether ``output[start:end]`` holds only blanks and comments."""
    return start <= end and _skip_blank(output, start, end) == end


def _alias_word(text: str, quotes: tuple[QuoteForm, ...]) -> str:
    """The alias lexeme of a ``table_alias`` span (``AS x``, ``"x y"``, PostgreSQL's
    ``AS t(a, b)``): what follows an optional ``AS`` and its blanks or comments, up
    to a blank, a comment or ``(``; a name in one of the dialect's ``quotes`` whole."""
    data = text.encode("utf-8")
    at = _skip_blank(data, 0, len(data))
    opens = tuple(q.open.encode() for q in quotes)
    after = data[at + 2 : at + 3]
    if data[at : at + 2].upper() == b"AS" and (
        after == b"" or after.isspace() or data.startswith((b"--", b"/*", *opens), at + 2)
    ):
        at = _skip_blank(data, at + 2, len(data))
    rest = data[at:].decode("utf-8", "replace")
    for form in quotes:
        if rest.startswith(form.open):
            end = len(form.open)
            while True:
                found = rest.find(form.close, end)
                if found < 0:
                    return rest
                if form.doubling and rest.startswith(form.close * 2, found):
                    end = found + 2 * len(form.close)  # a doubled quote
                    continue
                return rest[: found + len(form.close)]
    end = 0
    while end < len(rest) and not rest[end].isspace() and rest[end] != "(":
        if rest.startswith(("--", "/*"), end):
            break
        end += 1
    return rest[:end]
