"""A language decided by grid-core alone (lexer and parser), for membership tests."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from grid_core.grammar import Grammar
from grid_core.lexer import Lexer, Scanner
from grid_core.lexicon import build_lexicon
from grid_core.parser import Parser
from grid_sql.dialect import Dialect
from grid_sql.projection import language_dfa


class CoreLanguage:
    """L of one grammar with one lexicon (category -> words), decided by grid-core's
    lexer and parser over the union DFA of the grammar's terminals (the dialect's, or
    a typed generation language's: :func:`grid_sql.generation.typed_calls`). The
    dialect is the grammar's (kept for the callers' symmetry)."""

    def __init__(
        self, grammar: Grammar, dialect: Dialect, words: Mapping[str, Collection[bytes]]
    ) -> None:
        dfa = language_dfa(grammar)
        lexicon = build_lexicon(grammar, dfa, words)
        self.lexer = Lexer(Scanner(grammar, dfa, lexicon), Parser(grammar.lalr()))

    def accepts(self, sql: bytes) -> bool:
        config = self.lexer.advance(self.lexer.initial, sql)
        return config is not None and self.lexer.eos_allowed(config)

    def viable(self, sql: bytes) -> bool:
        config = self.lexer.advance(self.lexer.initial, sql)
        return config is not None and self.lexer.is_viable(config)
