"""A language decided by grid-core alone (lexer and parser), for membership tests."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from grid_core.grammar import Grammar
from grid_core.lexer import Lexer, Scanner
from grid_core.lexicon import build_lexicon
from grid_core.parser import Parser
from grid_sql.dialect import Dialect
from grid_sql.projection import dialect_dfa


class CoreLanguage:
    """L of one grammar with one lexicon (category -> words), decided by grid-core's
    lexer and parser over the dialect's union DFA."""

    def __init__(
        self, grammar: Grammar, dialect: Dialect, words: Mapping[str, Collection[bytes]]
    ) -> None:
        dfa = dialect_dfa(dialect)
        lexicon = build_lexicon(grammar, dfa, words)
        self.lexer = Lexer(Scanner(grammar, dfa, lexicon), Parser(grammar.lalr()))

    def accepts(self, sql: bytes) -> bool:
        config = self.lexer.advance(self.lexer.initial, sql)
        return config is not None and self.lexer.eos_allowed(config)

    def viable(self, sql: bytes) -> bool:
        config = self.lexer.advance(self.lexer.initial, sql)
        return config is not None and self.lexer.is_viable(config)
