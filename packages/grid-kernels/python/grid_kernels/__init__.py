"""GRID kernels: the compiled hot path, bit-identical to grid-core's Python path.

The native module ``grid_kernels._native`` is private; this package re-exports
its classes and adds two builders that take grid-core's artifacts apart into
the flat tables the kernels read. They duck-type grid-core's objects (this
package imports nothing of ours: it sits below grid-core in the layering):

- :func:`trie_tables` takes a ``TokenTrie`` and its ``Vocabulary`` (built once
  per tokenizer, shared by every grammar);
- :func:`engine_tables` takes an ``Engine`` (grammar, LALR tables, union DFA,
  lexicon, scanner) and, optionally, the trie tables to share.

An :class:`EngineTables` also serves requests: ``EngineTables.session()`` is a
:class:`Session`, one request's guide with the whole step in Rust
(``accept_token`` and ``fill_next_token_bitmask``, one call each), sharing the
engine's tables, walk cache and stacks with every other session.

grid-core decides whether to use the kernels (``GRID_KERNELS=0`` forces its
pure-Python path) and checks :data:`ABI_VERSION` first.
"""

from __future__ import annotations

from typing import Any

from grid_kernels._native import (
    ABI_VERSION,
    BitmaskApplier,
    EngineTables,
    Entry,
    EventTables,
    Lexing,
    LogitsError,
    Parsing,
    RemoteWalks,
    Reserve,
    ReserveState,
    ScopedEngines,
    ScopedReserve,
    ScopedSession,
    ScopedState,
    Session,
    SessionError,
    SharedWalks,
    TrieTables,
    apply_token_bitmask,
    attach_remote,
    fill_next_token_bitmasks,
    first_argmax,
    lalr_tables,
    lexicon_trie,
    masked_argmax,
    pack_trie,
    thompson,
    union_dfa,
)

__all__ = [
    "ABI_VERSION",
    "BitmaskApplier",
    "EngineTables",
    "Entry",
    "EventTables",
    "Lexing",
    "LogitsError",
    "Parsing",
    "RemoteWalks",
    "Reserve",
    "ReserveState",
    "ScopedEngines",
    "ScopedReserve",
    "ScopedSession",
    "ScopedState",
    "Session",
    "SessionError",
    "SharedWalks",
    "TrieTables",
    "apply_token_bitmask",
    "attach_remote",
    "engine_tables",
    "fill_next_token_bitmasks",
    "first_argmax",
    "lalr_tables",
    "lexicon_trie",
    "lexing_of",
    "masked_argmax",
    "pack_trie",
    "parsing_of",
    "thompson",
    "trie_tables",
    "union_dfa",
]


def trie_tables(trie: Any, vocab: Any) -> TrieTables:
    """The kernels' copy of a ``grid_core.trie.TokenTrie`` (EOS ids from ``vocab``)."""
    return TrieTables(
        edge=trie.edge,
        token=trie.token,
        size=trie.size,
        alias_offset=trie.alias_offset,
        alias_ids=trie.alias_ids,
        n_vocab=trie.n_vocab,
        eos_ids=list(vocab.eos_ids),
    )


def lexing_of(engine: Any) -> Lexing:
    """The :class:`Lexing` of a ``grid_core.guide.Engine``'s union DFA and ignored
    terminals (the same for every projection of its dialect)."""
    dfa = engine.dfa
    return Lexing(
        n_terminals=engine.tables.n_terminals,
        dfa_trans=dfa.trans,
        dfa_accept=dfa.accept,
        dfa_live=dfa.live,
        ignored=engine.scanner.ignored,
    )


def parsing_of(engine: Any) -> Parsing:
    """The :class:`Parsing` of a ``grid_core.guide.Engine``'s LALR(1) tables (the
    same for every engine of its projection)."""
    tables = engine.tables
    return Parsing(
        n_terminals=tables.n_terminals,
        action=tables.action,
        goto=tables.goto,
        n_nonterminals=tables.n_nonterminals,
        rule_lhs=tables.rule_lhs,
        rule_len=tables.rule_len,
    )


def engine_tables(
    engine: Any,
    trie: TrieTables | None = None,
    threads: int | None = 1,
    shared: SharedWalks | None = None,
    lexing: Lexing | None = None,
    parsing: Parsing | None = None,
) -> EngineTables:
    """The kernels' tables of a ``grid_core.guide.Engine``.

    Pass ``trie`` to share one :class:`TrieTables` between engines over the same
    vocabulary (the trie is the large part); otherwise it is built here. Pass
    ``lexing`` (:func:`lexing_of` an engine of the same dialect) to share the DFA's
    tables between the dialect's projections, and ``parsing`` (:func:`parsing_of`
    an engine of the same projection) to share its LALR(1) tables; otherwise
    they are built here.
    ``threads``: the pool cold walks are spread over (None: rayon's global
    pool, one thread per CPU unless ``RAYON_NUM_THREADS`` says otherwise). One
    by default: through the subtree memo a typical cold walk takes a few
    hundred microseconds, less than waking a second thread costs on a small
    host (``docs/performance.md``); pass more on a host with idle cores.
    ``shared``: the walk cache of the engine's family (``engine.family``), shared
    with the family's other engines (grid-core's T2); None gives it its own.
    """
    if trie is None:
        trie = trie_tables(engine.trie, engine.vocab)
    if lexing is None:
        lexing = lexing_of(engine)
    if parsing is None:
        parsing = parsing_of(engine)
    lexicon = engine.lexicon
    return EngineTables(
        trie=trie,
        n_terminals=engine.tables.n_terminals,
        lexing=lexing,
        parsing=parsing,
        lexicon_words=[(t, list(ws)) for t, ws in lexicon.words.items()],
        lexicon_categories=lexicon.categories,
        pick_order=engine.grammar.pick_order,
        ignored=engine.scanner.ignored,
        schema=engine.lexicon.fingerprint,
        threads=threads,
        shared=shared,
        family=engine.family if shared is not None else None,
    )
