"""The `Dialect` base: a SQL dialect of GRID as a small set of declarative knobs.

A dialect (layer L1 of DESIGN.md section 3) is a known set of files: a lark
grammar `dialects/<name>.lark`, a subclass of `Dialect` in `dialects/<name>.py`
whose fields are data (keywords, known functions and types, identifier quote
forms, the names of the lexicon categories), an accept/reject corpus under
`dialects/corpus/` and one test module. Adding a dialect needs no reading of the
engine.

Nouns used here:

- *keyword*: a word the grammar uses as a terminal of its own, case-insensitive
  under the ASCII folding of GRID's lexing (`keyword_case`). Keyword terminals
  are generated from `keywords` (name `WORD.upper()`, priority 4), so the word
  list is the single source of truth; the `.lark` file only uses them.
- *word class*: a closed set of words with one terminal (priority 3): the
  known scalar functions (`FUNCTION_NAME`, whose lexeme is the name *and* its
  opening parenthesis, e.g. `substr(`), the type names of CAST (`TYPE_NAME`,
  multi-word names allowed) and dialect extras (`COLLATION_NAME`, ...).
- *lexicon category*: an identifier terminal whose words are restricted to an
  allow-list from the catalog in deployment (table, column, CTE names). The mask
  enforces table-level policy through them.

Policy decisions:

- The grammar text a consumer compiles is `Dialect.grammar_text`: the `.lark`
  file followed by the generated keyword and word-class terminals, in a fixed
  order, so terminal numbering is stable for a given dialect value.
- A keyword must not be a function name, except for words listed in
  `keyword_functions`: keywords that the grammar never lets an opening
  parenthesis follow (SQLite's REPLACE, PostgreSQL's LEFT/RIGHT), so the
  keyword lexeme `left` and the function lexeme `left(` never collide.
- Identifiers are spelled with `spell_identifier`: bare when the word is a bare
  identifier and neither a keyword of the grammar nor a reserved word of the
  database, else in the first quote form that can hold it. A lexicon builder
  must not admit a reserved word bare: GRID lets a keyword act as an identifier
  where the keyword is not viable, the database may not (PostgreSQL reads
  `SELECT FROM t` as an empty target list over t; with a column lexicon word
  `from`, GRID would read a column `from` aliased `t`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal

from grid_core.errors import GrammarError

KEYWORD_PRIORITY = 4
WORD_CLASS_PRIORITY = 3

# The blank that may separate the words of a multi-word type name (`double precision`).
_BLANK = r"[ \t\n\r\f]+"
# Terminals every dialect grammar defines: the lexicon categories and the free names.
REQUIRED_TERMINALS = ("TABLE_NAME", "COLUMN_NAME", "CTE_NAME", "ALIAS_NAME", "QUALIFIER")

KeywordCase = Literal["insensitive", "sensitive"]
IdentifierCase = Literal["insensitive", "fold-lower", "sensitive"]


class UnknownDialectError(GrammarError):
    """A dialect name that neither the built-ins nor an installed plug-in provides."""

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown SQL dialect {name!r}; known: {', '.join(known)}")


class DialectDefinitionError(GrammarError):
    """A dialect's knobs contradict each other or its grammar."""

    def __init__(self, dialect: str, problem: str) -> None:
        self.dialect = dialect
        self.problem = problem
        super().__init__(f"dialect {dialect!r}: {problem}")


CorpusKind = Literal["accept", "reject", "prefix"]
_CORPUS_MARKERS: dict[str, CorpusKind] = {"! ": "reject", "~ ": "prefix"}


@dataclass(frozen=True)
class CorpusEntry:
    """One corpus line: `accept` (in L), `reject` (not a viable prefix) or `prefix`
    (a viable prefix that is not in L); `line` is its 1-based line number."""

    kind: CorpusKind
    text: bytes
    line: int


def parse_corpus(source: str) -> list[CorpusEntry]:
    """Read a corpus: one statement per line; "! " marks a reject, "~ " a viable
    prefix, "#" a comment; blank lines are skipped; anything else is an accept."""
    entries = []
    for number, raw in enumerate(source.split("\n"), start=1):
        if not raw.strip() or raw.startswith("#"):
            continue
        kind: CorpusKind = _CORPUS_MARKERS.get(raw[:2], "accept")
        body = raw if kind == "accept" else raw[2:]
        entries.append(CorpusEntry(kind, body.encode("utf-8"), number))
    return entries


@dataclass(frozen=True, kw_only=True)
class QuoteForm:
    """One way to quote an identifier: `open` word `close`, where a `close` inside
    the word is written twice when `doubling` (else the word may not contain it)."""

    open: str
    close: str
    doubling: bool = True

    def quote(self, word: str) -> str | None:
        """The quoted spelling of `word`, or None when this form cannot hold it
        (the empty word and NUL are never held)."""
        if not word or "\x00" in word:
            return None
        if self.close in word:
            if not self.doubling:
                return None
            word = word.replace(self.close, self.close * 2)
        return f"{self.open}{word}{self.close}"


@dataclass(frozen=True, kw_only=True)
class Dialect:
    """Declarative knobs of one SQL dialect; subclasses give every field a value."""

    name: str
    grammar_file: str
    grammar_package: str = "grid_sql.dialects"
    # Accept/reject/prefix corpus inside grammar_package (see `parse_corpus`); "" for none.
    corpus_file: str = ""
    keywords: tuple[str, ...]
    keyword_case: KeywordCase = "insensitive"
    # The database's own keywords: a schema word spelled like one is quoted.
    reserved_words: frozenset[str] = frozenset()
    functions: tuple[str, ...]
    keyword_functions: frozenset[str] = frozenset()
    type_names: tuple[str, ...]
    word_classes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    bare_identifier: str = r"[A-Za-z_][A-Za-z0-9_$]*"
    identifier_quotes: tuple[QuoteForm, ...]
    # How the database compares unquoted identifiers; data for the lexicon builder.
    identifier_case: IdentifierCase = "insensitive"
    table_category: str = "TABLE_NAME"
    column_category: str = "COLUMN_NAME"
    cte_category: str = "CTE_NAME"
    alias_terminal: str = "ALIAS_NAME"
    qualifier_terminal: str = "QUALIFIER"
    description: str = field(default="", compare=False)

    # ------------------------------------------------------------ derived data

    @property
    def lexicon_categories(self) -> tuple[str, ...]:
        """Terminal names whose words come from an allow-list in deployment."""
        return (self.table_category, self.column_category, self.cte_category)

    @property
    def quoted_words(self) -> frozenset[str]:
        """Words a schema name is never spelled bare as: the database's reserved
        words and this grammar's keywords, lower case (see `spell_identifier`)."""
        return frozenset(w.lower() for w in (*self.reserved_words, *self.keywords))

    @property
    def grammar_text(self) -> str:
        """The complete grammar: the `.lark` file plus the generated terminals."""
        base = (
            resources.files(self.grammar_package)
            .joinpath(self.grammar_file)
            .read_text(encoding="utf-8")
        )
        return base.rstrip("\n") + "\n\n" + self.generated_terminals()

    def corpus(self) -> tuple[CorpusEntry, ...]:
        """The dialect's accept/reject/viable-prefix corpus (empty when it has none)."""
        if not self.corpus_file:
            return ()
        source = resources.files(self.grammar_package).joinpath(self.corpus_file)
        return tuple(parse_corpus(source.read_text(encoding="utf-8")))

    def generated_terminals(self) -> str:
        """Keyword and word-class terminal definitions, in lark syntax."""
        flag = "i" if self.keyword_case == "insensitive" else ""
        lines = [
            f"// {'-' * 64} generated from {type(self).__name__}",
            f"// keywords (priority {KEYWORD_PRIORITY})",
        ]
        for word in sorted(set(self.keywords)):
            lines.append(f'{word.upper()}.{KEYWORD_PRIORITY}: "{word.lower()}"{flag}')
        lines.append(f"// word classes (priority {WORD_CLASS_PRIORITY})")
        classes = [
            ("FUNCTION_NAME", self.functions, r"\("),
            ("TYPE_NAME", self.type_names, ""),
            *((name, words, "") for name, words in self.word_classes),
        ]
        for terminal, words, suffix in classes:
            alternatives = sorted({_word_pattern(w) for w in words}, key=lambda p: (-len(p), p))
            lines.append(
                f"{terminal}.{WORD_CLASS_PRIORITY}: /(?:{'|'.join(alternatives)}){suffix}/{flag}"
            )
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------ identifiers

    def is_bare_identifier(self, word: str) -> bool:
        """True when `word` may be written without quotes in every identifier position."""
        return (
            re.fullmatch(self.bare_identifier, word, re.ASCII) is not None
            and word.lower() not in self.quoted_words
            and (self.identifier_case != "fold-lower" or word == word.lower())
        )

    def quote_identifier(self, word: str) -> str:
        """`word` in the first quote form that can hold it."""
        for form in self.identifier_quotes:
            quoted = form.quote(word)
            if quoted is not None:
                return quoted
        raise DialectDefinitionError(self.name, f"no quote form can hold the word {word!r}")

    def spell_identifier(self, word: str) -> str:
        """The spelling of a schema word as a lexeme: bare if possible, else quoted."""
        return word if self.is_bare_identifier(word) else self.quote_identifier(word)

    # ------------------------------------------------------------ invariants

    def check_invariants(self) -> None:
        """Check the knobs against each other and against the grammar.

        Raises `DialectDefinitionError` naming the first problem. Builds the grammar
        with lark (LALR(1), strict: a shift/reduce conflict is an error too).
        """
        lowered = [w.lower() for w in self.keywords]
        if len(set(lowered)) != len(lowered):
            raise DialectDefinitionError(self.name, "a keyword is listed twice")
        for word in lowered:
            if not re.fullmatch(r"[a-z_][a-z0-9_]*", word):
                raise DialectDefinitionError(self.name, f"keyword {word!r} is not a plain word")
        clash = {f.lower() for f in self.functions} & set(lowered)
        if not clash <= self.keyword_functions:
            raise DialectDefinitionError(
                self.name,
                f"function names {sorted(clash - self.keyword_functions)} are keywords",
            )
        import lark  # deferred: only the checks need the parser generator

        try:
            parser = build_lalr(self.grammar_text)
        except lark.exceptions.GrammarError as err:
            raise DialectDefinitionError(self.name, f"grammar does not build: {err}") from err
        names = {t.name for t in parser.terminals}
        for required in REQUIRED_TERMINALS:
            if required not in names:
                raise DialectDefinitionError(self.name, f"grammar lacks terminal {required}")
        unused = sorted(w for w in lowered if w.upper() not in names)
        if unused:
            raise DialectDefinitionError(self.name, f"keywords no rule uses: {unused}")
        # Every terminal takes part in GRID's lexing, used by a rule or not; lark's
        # lexer-only mode is the one that keeps them all.
        every = lark.Lark(self.grammar_text, parser=None, lexer="basic")
        for terminal in every.terminals:
            regexp = terminal.pattern.to_regexp()
            if any(ord(ch) > 0xFF for ch in regexp):
                raise DialectDefinitionError(
                    self.name, f"terminal {terminal.name} has a character above U+00FF"
                )
            flags = re.ASCII | (re.IGNORECASE if "i" in terminal.pattern.flags else 0)
            if re.fullmatch(regexp, "", flags) is not None:
                raise DialectDefinitionError(
                    self.name, f"terminal {terminal.name} matches the empty string"
                )
        ident = re.compile(
            next(t for t in parser.terminals if t.name == self.table_category).pattern.to_regexp()
        )
        for form in self.identifier_quotes:
            sample = form.quote('odd "name` (x)')
            if sample is not None and ident.fullmatch(sample) is None:
                raise DialectDefinitionError(
                    self.name, f"quote form {form.open}...{form.close} is not in the grammar"
                )


def build_lalr(grammar_text: str) -> Any:
    """Build `grammar_text` with lark's LALR(1) analysis in strict mode.

    Lark resolves a shift/reduce conflict as a shift unless `strict=True`, and its
    strict basic lexer wants the optional `interegular` package to look for regex
    collisions (which GRID's lexing resolves by design). A stand-in lexer keeps
    the strict LALR analysis and skips the collision check. Raises lark's
    `GrammarError` on any conflict.
    """
    import lark
    from lark.lexer import Lexer

    class _NoLexer(Lexer):
        def __init__(self, lexer_conf: Any) -> None:
            pass

        def lex(self, lexer_state: Any, parser_state: Any) -> Any:
            raise NotImplementedError("GRID lexes; this parser is for its tables only")

    return lark.Lark(grammar_text, parser="lalr", lexer=_NoLexer, strict=True)


def _word_pattern(word: str) -> str:
    """A regex for one word-class entry; blanks between words may be any blank run."""
    return _BLANK.join(re.escape(part) for part in word.split())
