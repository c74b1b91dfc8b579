"""The reserve table (grid_core.reserve): token costs, written completions, bounds.

Theorem 4 of docs/guarantees (proofs/Reserve.v, ``termination_as_written``)
assumes of the reserve that the completion the loop writes is legal token by
token, ends where EOS is legal and is no longer than the reserve
(``completion_legal``, ``completion_within_reserve``):
``test_completion_never_exceeds_reserve``. It needs no bound on how much one
token raises the reserve (the early trigger takes its place);
``termination_with_reserve`` adds that with a rise of at most the trigger's
safety margin the early trigger never fires:
``test_reserve_rise_bounded_by_safety``.

Fixtures: the CRUD analyst projection with the byte-complete toy vocabulary
of ``toy.py`` (hand-checked table below), and the SQLite dialect's admin
projection with cl100k and the example schema's lexicon.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toy import ANALYST, EOS, LEXICON, TOY, analyst_engine, token

from grid_core.complete import shortest_completion
from grid_core.errors import MaskError
from grid_core.grammar import load_grammar
from grid_core.guide import Engine, GridGuide
from grid_core.reserve import DEFAULT_SAFETY, ReserveError, ReserveTable, reserve_table
from grid_core.vocab import Vocabulary, cl100k
from grid_spec import Language

TOY_ENGINE = analyst_engine()
TOY_TABLE = reserve_table(TOY_ENGINE)
TOY_SPEC = Language(ANALYST.to_lark(), LEXICON)


def toy_guide(text: bytes) -> GridGuide:
    g = GridGuide(TOY_ENGINE)
    for b in text:
        g.accept_token(b)
    return g


def admin(dialect_name: str) -> tuple[Engine, ReserveTable, Language]:
    """The example policy's admin role over a dialect (the example schema read as
    that dialect's), with cl100k and the schema's lexicon."""
    from grid_sql.dialects import get_dialect
    from grid_sql.lexicon import SchemaLexicon
    from grid_sql.policy import example_policy
    from grid_sql.projection import RoleProjection
    from grid_sql.schema import example_schema

    dialect = get_dialect(dialect_name)
    schema = dataclasses.replace(example_schema(), dialect=dialect_name)
    policy = example_policy(schema)
    lexicon = SchemaLexicon.build(dialect, schema, policy.grants("admin", schema))
    projection = RoleProjection.compile(policy.role("admin"), dialect, words=lexicon.words)
    engine = Engine(projection.grammar, cl100k(), lexicon.lexicon)
    spec = Language(projection.grammar.to_lark(), lexicon.word_lists())
    return engine, reserve_table(engine), spec


@pytest.fixture(scope="module")
def sql() -> tuple[Engine, ReserveTable, Language]:
    """The example policy's admin role over the SQLite dialect, with cl100k."""
    return admin("sqlite")


@pytest.fixture(scope="module")
def postgres_sql() -> tuple[Engine, ReserveTable, Language]:
    """The same over the PostgreSQL dialect."""
    return admin("postgres")


# -- hand-checked -----------------------------------------------------------------


def test_split_is_the_fewest_tokens() -> None:
    assert TOY_TABLE.split(b"") == ()
    assert TOY_TABLE.split(b"yees where") == (token(b"yees where"),)
    assert TOY_TABLE.split(b" employees") == (token(b" "), token(b"employees"))
    assert TOY_TABLE.token_cost(b" employees where") == 2  # b" emplo", b"yees where"
    assert TOY_TABLE.token_cost(b"select *") == 2  # b"select", b" *"


@pytest.mark.parametrize(
    ("prefix", "reserve", "written"),
    [
        pytest.param(b"", 7, b"select * from employees ;", id="empty"),
        pytest.param(b"select", 6, b" * from employees ;", id="after-keyword"),
        pytest.param(b"select * from emplo", 3, b"yees ;", id="mid-lexicon-word"),
        pytest.param(b"select * from employees", 2, b" ;", id="needs-semicolon"),
        pytest.param(b"select * from employees;", 0, b"", id="complete"),
        pytest.param(b"select * from orders where x", 6, b" = 0 ;", id="column-then-value"),
        pytest.param(b"select * from orders where x = '", 3, b"' ;", id="open-string"),
        pytest.param(b"select * from orders --", 3, b"\n ;", id="open-comment"),
        pytest.param(b"select * from orders ", 1, b";", id="pending-space"),
    ],
)
def test_toy_reserve_and_completion(prefix: bytes, reserve: int, written: bytes) -> None:
    g = toy_guide(prefix)
    tokens = TOY_TABLE.completion(g.config)
    assert TOY_TABLE.reserve(g.config) == reserve == len(tokens)
    assert b"".join(TOY.token_bytes[t] for t in tokens) == written
    assert TOY_SPEC.in_language(prefix + written)


#: PostgreSQL prefixes ending in a type word that whitespace would carry on into a
#: typed string (``date '2024-01-31'`` is one TYPED_STRING lexeme): only a piece
#: written bare right after it ends it (an abutting finish option).
TYPE_WORDS = [
    b"SELECT CAST(id AS da",
    b"SELECT CAST(id AS date",
    b"SELECT id::date",
    b"SELECT now()::DaT",
    b"SELECT id FROM employees WHERE hired > now()::date",
    b"SELECT CASE WHEN id = 1 THEN id::date",  # END would not end it: `)` or an operator
]


@pytest.mark.parametrize("prefix", TYPE_WORDS)
def test_a_type_word_is_finished_by_an_abutting_piece(
    postgres_sql: tuple[Engine, ReserveTable, Language], prefix: bytes
) -> None:
    """Where a space or a newline would continue the lexeme, the completion writes
    the next piece without its space (``CAST(id AS date) ;``), legal token by token,
    within the reserve, a sentence (there was no finish option before: ReserveError);
    the native reserve agrees there and after every token admitted."""
    engine, table, spec = postgres_sql
    tokens = table.split(prefix)
    assert tokens is not None
    g = GridGuide(engine)
    for t in tokens:
        g.accept_token(t)
    check_completion(engine, table, spec, g, prefix)
    written = b"".join(engine.vocab.token_bytes[t] for t in table.completion(g.config))
    assert not written[:1].isspace() and written.rstrip().endswith(b";"), written
    if engine.kernel is not None and os.environ.get("GRID_KERNELS") != "0":
        assert check_native_reserve(engine, table, random.Random(1).choice, 4, 0, tokens) > 100


def test_tables_check_invariants(sql: tuple[Engine, ReserveTable, Language]) -> None:
    TOY_TABLE.check_invariants()
    sql[1].check_invariants()
    assert reserve_table(TOY_ENGINE) is TOY_TABLE


def test_sql_costs_are_counted_in_cl100k_tokens(
    sql: tuple[Engine, ReserveTable, Language],
) -> None:
    engine, table, _ = sql
    names = engine.tables.terminal_names
    cost = {names[t]: table.term_cost[t] for t in table.pieces}
    assert cost["SELECT"] == cost["STAR"] == 1  # b" SELECT", b" *"
    assert cost["NUMBER"] == 2  # cl100k never glues a space to a digit: b" ", b"0"
    assert table.start_cost == 3  # b" SELECT * ;"
    assert table.reserve(GridGuide(engine).config) == 3  # b"SELECT * ;": no leading space


def test_unwritable_vocabulary_raises() -> None:
    words = [b"select", b"*", b"from", b"employees", b";", b""]
    vocab = Vocabulary.from_spellings("no-space", words, {5}, (5,))
    with pytest.raises(ReserveError, match="no writable lexeme"):
        reserve_table(Engine(ANALYST, vocab, LEXICON))


def test_grammar_without_ignored_space_raises() -> None:
    grammar = load_grammar('start: "a" ";"\n')
    vocab = Vocabulary.from_spellings("ab", [b"a", b";", b" ", b""], {3}, (3,))
    with pytest.raises(ReserveError, match="space"):
        reserve_table(Engine(grammar, vocab))


# -- properties (theorem 4's assumptions) -------------------------------------------


def walk(engine: Engine, data: st.DataObject, steps: int) -> list[tuple[GridGuide, bytes]]:
    """(guide, output) at each configuration of a random walk over the mask (no EOS)."""
    eos = set(engine.vocab.eos_ids)
    g, text, seen = GridGuide(engine), b"", []
    for _ in range(steps):
        seen.append((g.fork(), text))
        ids = [i for i in g.mask_ids() if i not in eos]
        if not ids:
            break
        t = data.draw(st.sampled_from(ids))
        g.accept_token(t)
        text += engine.vocab.token_bytes[t]
    return seen


def check_completion(
    engine: Engine, table: ReserveTable, spec: Language, g: GridGuide, text: bytes
) -> None:
    """The written completion: legal token by token, within the reserve, a sentence,
    and every suffix of it priced at most its length."""
    config = g.config
    reserve = table.reserve(config)
    tokens = table.completion(config)
    assert len(tokens) <= reserve
    assert (reserve == 0) is g.is_complete()
    w = g.fork()
    for i, t in enumerate(tokens):
        if i == 0:
            assert t in g.mask_ids()
        w.accept_token(t)  # raises GuideError for a token outside the mask
        assert table.reserve(w.config) <= len(tokens) - i - 1, "not met one token at a time"
    assert w.eos_allowed()
    written = b"".join(engine.vocab.token_bytes[t] for t in tokens)
    assert spec.in_language(text + written)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.data())
def test_completion_never_exceeds_reserve(data: st.DataObject) -> None:
    """Toy grammar: at every configuration of a random walk, the completion the
    guide writes is in the mask token by token, ends where EOS is legal, is a
    sentence of L (grid-spec), and is no longer than the reserve; every suffix
    of it is priced at most its length (the reserve is met stepwise)."""
    for g, text in walk(TOY_ENGINE, data, 20):
        check_completion(TOY_ENGINE, TOY_TABLE, TOY_SPEC, g, text)
        w = g.fork()
        for t in TOY_TABLE.completion(g.config):
            assert t in w.mask_ids()
            w.accept_token(t)
        assert EOS in w.mask_ids()


@settings(derandomize=True, max_examples=6, deadline=None)
@given(st.data())
def test_completion_never_exceeds_reserve_sql(
    sql: tuple[Engine, ReserveTable, Language], data: st.DataObject
) -> None:
    """The same property on the SQLite dialect with cl100k and a schema lexicon."""
    engine, table, spec = sql
    for g, text in walk(engine, data, 12):
        check_completion(engine, table, spec, g, text)


@settings(derandomize=True, max_examples=20, deadline=None)
@given(st.data())
def test_reserve_rise_bounded_by_safety(data: st.DataObject) -> None:
    """Toy grammar, every admitted token at every configuration of a walk."""
    for g, _ in walk(TOY_ENGINE, data, 20):
        r = TOY_TABLE.reserve(g.config)
        for t in g.mask_ids():
            if t != EOS:
                nxt = TOY_ENGINE.lexer.advance(g.config, TOY.token_bytes[t])
                assert nxt is not None
                assert TOY_TABLE.reserve(nxt) - r <= DEFAULT_SAFETY


def test_reserve_rise_bounded_by_safety_sql(sql: tuple[Engine, ReserveTable, Language]) -> None:
    """SQLite + cl100k: every admitted token at the configurations of two short
    walks (the full sweep is ``bench/walk_arm.py --rise-configs``)."""
    engine, table, _ = sql
    rng = random.Random(7)
    spelling, eos = engine.vocab.token_bytes, set(engine.vocab.eos_ids)
    worst = 0
    for _ in range(2):
        g = GridGuide(engine)
        for _ in range(3):
            ids = g.mask_ids()
            r = table.reserve(g.config)
            for t in ids:
                if t not in eos:
                    nxt = engine.lexer.advance(g.config, spelling[t])
                    assert nxt is not None
                    worst = max(worst, table.reserve(nxt) - r)
            g.accept_token(rng.choice([i for i in ids if i not in eos]))
    assert 0 < worst <= DEFAULT_SAFETY


def test_written_completion_is_no_shorter_than_the_byte_oracle() -> None:
    """complete.py's bounded search is the shortest completion in bytes: the
    written one can be longer, never shorter."""
    for prefix in [b"", b"select", b"select * from emplo", b"select * from orders where x = "]:
        g = toy_guide(prefix)
        oracle = shortest_completion(TOY_ENGINE, g.config)
        assert oracle is not None
        written = b"".join(TOY.token_bytes[t] for t in TOY_TABLE.completion(g.config))
        assert len(written) >= len(oracle)
        assert TOY_SPEC.in_language(prefix + oracle)


def test_no_mask_error_on_completion_paths() -> None:
    g = toy_guide(b"select * from orders where x = 1 and y")
    for t in TOY_TABLE.completion(g.config):
        try:
            assert t in g.mask_ids()
        except MaskError:  # pragma: no cover - would be a bug
            pytest.fail("empty mask on a completion path")
        g.accept_token(t)
    assert EOS in g.mask_ids()


# -- the kernels' reserve (grid_core.kernels.NativeReserve) against this table -------


def needs_kernels(engine: Engine) -> None:
    """Skip without grid-kernels or under ``GRID_KERNELS=0``; else the engine has them."""
    pytest.importorskip("grid_kernels._native")
    if os.environ.get("GRID_KERNELS") == "0":
        pytest.skip("tests the kernels' reserve: GRID_KERNELS=0 switches them off")
    assert engine.kernel is not None, "grid-kernels is installed: the engine loads it"


def check_native_reserve(
    engine: Engine,
    table: ReserveTable,
    draw: Callable[[list[int]], int],
    steps: int,
    fan: int,
    prefix: Sequence[int] = (),
) -> int:
    """A walk of the Python and the native guide in lockstep (``draw`` picks each
    token from the mask), after the tokens of ``prefix``: at every configuration the
    native reserve and completion equal the Python table's, and so do the reserves
    after up to ``fan`` admitted tokens there (all of them with ``fan`` 0). Returns
    how many were compared."""
    needs_kernels(engine)
    from grid_core.kernels import NativeReserve

    eos, spelling = set(engine.vocab.eos_ids), engine.vocab.token_bytes
    g, native = GridGuide(engine), engine.guide()
    for t in prefix:
        g.accept_token(t)
        native.accept_token(t)
    source = native.reserve_source()
    assert isinstance(source, NativeReserve)
    compared = 0
    for _ in range(steps):
        state = source.start()
        assert state.remainder == g.config.remainder
        assert source.reserve(state) == table.reserve(g.config)
        assert source.completion(state) == table.completion(g.config)
        ids = [i for i in g.mask_ids() if i not in eos]
        if not ids:
            break
        for t in ids if not fan else ids[:: max(1, len(ids) // fan)]:
            after = engine.lexer.advance(g.config, spelling[t])
            assert after is not None
            assert source.reserve(source.advance(state, t)) == table.reserve(after), t
            compared += 1
        t = draw(ids)
        g.accept_token(t)
        native.accept_token(t)
    return compared


@settings(derandomize=True, max_examples=40, deadline=None)
@given(st.data())
def test_native_reserve_is_the_tables(data: st.DataObject) -> None:
    """Toy grammar: the kernels' reserve and completion are this table's, at every
    configuration of a walk and after every admitted token."""
    assert check_native_reserve(
        TOY_ENGINE, TOY_TABLE, lambda ids: data.draw(st.sampled_from(ids)), 20, 0
    )


@pytest.mark.parametrize("seed", range(3))
def test_native_reserve_is_the_tables_sql(
    sql: tuple[Engine, ReserveTable, Language], seed: int
) -> None:
    """SQLite + cl100k + a schema lexicon: the same, after 60 sampled tokens per
    configuration of a 30-token walk."""
    engine, table, _ = sql
    rng = random.Random(seed)
    assert check_native_reserve(engine, table, rng.choice, 30, 60) > 1_000


@pytest.mark.parametrize("which", ["toy", "sql"])
def test_native_pieces_are_the_pythons(
    sql: tuple[Engine, ReserveTable, Language], which: str
) -> None:
    """The kernels' compatible rows and single-token pieces (what the table takes
    from them) are the Python walk's, on the toy vocabulary and on cl100k."""
    engine, table = (TOY_ENGINE, TOY_TABLE) if which == "toy" else sql[:2]
    needs_kernels(engine)
    compat, singles = engine.kernel.reserve_pieces()
    assert compat == table._compatible_rows()
    python = table._single_token_pieces()
    assert {t: b" " + x for t, x in enumerate(singles) if x is not None} == python
    assert len(python) > (3 if which == "toy" else 100)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.binary(max_size=24) | st.text("selct *from,wh=1'\"_ab", max_size=24).map(str.encode))
def test_native_split_is_the_pythons(
    sql: tuple[Engine, ReserveTable, Language], data: bytes
) -> None:
    """The kernels' shortest split over cl100k is the Python one (ties: smallest ids)."""
    engine, table, _ = sql
    needs_kernels(engine)
    got = engine.kernel.token_splits([data])[0]
    assert (None if got is None else tuple(got)) == table._split(data)


def test_native_reserve_under_a_small_memo_cap(
    sql: tuple[Engine, ReserveTable, Language], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reserve memos of 2 KiB each evict (least recently used), stay under their
    cap, and every answer is unchanged; ``GRID_CACHE_MB`` sets the cap (1/40 of it)."""
    from grid_core import kernels

    engine = Engine(sql[0].grammar, sql[0].vocab, sql[0].lexicon, dfa=sql[0].dfa, trie=sql[0].trie)
    needs_kernels(engine)
    monkeypatch.setattr(kernels, "reserve_memo_bytes", lambda: 2048)
    table = reserve_table(engine)
    assert check_native_reserve(engine, table, random.Random(5).choice, 30, 60) > 1_000
    usage = table.native().usage()  # (bytes, cap, evicted) per memo
    assert all(held <= cap == 2048 for held, cap, _ in usage), usage
    assert sum(evicted for _, _, evicted in usage) > 0, usage
    monkeypatch.undo()
    monkeypatch.setenv("GRID_CACHE_MB", "1")
    assert kernels.reserve_memo_bytes() == (1 << 20) // 40
    monkeypatch.delenv("GRID_CACHE_MB")
    assert kernels.reserve_memo_bytes() is None
