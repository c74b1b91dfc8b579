"""A user's lark grammar compiled against a vocabulary: the one public entry point.

:func:`compile_grammar` is how a caller outside GRID's SQL stack gets an
:class:`~grid_core.guide.Engine` (and from it guides) for its own grammar. The
grammar means what lark says it means, with the differences listed in
``docs/lark.md``: lexing is maximal munch over all terminals, and a lexeme that
several terminals match goes to the first of them, in lark's order
(:attr:`grid_core.grammar.Terminal.tie_key`), that the parser can shift.

Every construct GRID refuses is a :class:`~grid_core.errors.GrammarError`
subclass that names it:

- lark's own grammar errors, and a symbol used but not defined
  (:class:`~grid_core.errors.UndefinedSymbolError`), including a ``%declare``d
  terminal, which has no pattern to lex with;
- a rule priority (``rule.2: ...``): LALR(1) tables have no use for it;
- a pattern with no byte-automaton meaning (:class:`~grid_core.errors.PatternError`:
  anchors, lookaround, backreferences, an empty match);
- a grammar that is not LALR(1) (:class:`~grid_core.errors.LALRConflictError`,
  naming both items and the lookahead);
- a start symbol that derives no sentence (:class:`~grid_core.errors.EmptyLanguageError`).
"""

from __future__ import annotations

from grid_core.grammar import load_grammar
from grid_core.guide import Engine
from grid_core.trie import TokenTrie
from grid_core.vocab import Vocabulary

__all__ = ["compile_grammar"]


def compile_grammar(
    text: str,
    vocab: Vocabulary,
    *,
    start: str = "start",
    name: str = "user",
    trie: TokenTrie | None = None,
) -> Engine:
    """Compile a lark grammar against ``vocab``: the engine whose guides mask to its language.

    The grammar is reduced first (rules no sentence uses are cut). The LALR(1)
    tables and the union DFA are built here, so every refusal (module header)
    is raised by this call, never later by a guide. ``trie``: ``vocab``'s token
    trie, built once and shared by every grammar compiled against ``vocab``
    (built here when absent).
    """
    return Engine(load_grammar(text, name, start).project(lambda _: True, name), vocab, trie=trie)
