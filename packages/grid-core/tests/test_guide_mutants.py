"""The guide's pieces by hand (issue 14's mutation campaign).

``test_guide.py`` checks the worked example end to end and ``test_cache.py``
that cache-on equals cache-off; these checks pin ``grid_core.guide`` itself, in
a second, on the analyst projection of the toy CRUD grammar with a vocabulary
whose tokens cross up to four lexemes (so the CD levels of a mask go three deep
and two verdict classes land on one stack):

- every mask (ids, bits, EOS, packed words) against the definition, token by
  token: ``t`` is admitted iff the lexer's ``advance`` by its spelling gives a
  viable configuration (EOS iff the lexer says the output is a sentence), on
  engines without cache, with T1 and with a shared T2;
- the CD entries and verdict classes a mask counts, worked out by hand;
- what the caches hold after a mask (the root walk under its normal-form key,
  each sub-walk under its raw tail, each class verdict memoized on its group),
  T1 and T2 hits, and the cache keys themselves;
- the guide's verbs: accept (every refusal with its step, token and reason),
  EOS, the audit fields of each step against values recomputed here, rollback,
  fork, validation, output, seal and the packed layout;
- the kernels' branches, with the kernels replaced by recorders (the arguments
  the engine hands them), so they are checked on the Python path too.

Every object is built inside its test: mutmut's trampolines act only on what a
test builds while its mutant is active.
"""

from __future__ import annotations

import array
import hashlib
from typing import Any

import pytest
from toy import ANALYST, LEXICON

from grid_core import kernels
from grid_core.cache import CDGroup, GenericKey, IdentKey, SharedCache, id_bits, make_entry
from grid_core.errors import EMPTY_MASK, GuideError, MaskError
from grid_core.events import EventGuide, EventSpec, tracker
from grid_core.guide import Engine, GridGuide, _Step
from grid_core.lexer import Config
from grid_core.lexicon import build_lexicon
from grid_core.trie import build_trie
from grid_core.vocab import Vocabulary
from grid_core.walk import walk_from

MULTI = [
    b"select",
    b"* from ",
    b"id from ",
    b"* from employees;",
    b"id from orders;",
    b"* from employees; ",
    b"id from orders; ",
    b"yees where",
    b"yees;",
    b" from",
    b"employees",
    b" from",
]
SPELLINGS = [bytes([i]) for i in range(256)] + MULTI + [b"", b""]
PAD, EOS = len(SPELLINGS) - 2, len(SPELLINGS) - 1
N = len(SPELLINGS)


def vocab() -> Vocabulary:
    return Vocabulary.from_spellings("guide-mutants", SPELLINGS, frozenset({PAD, EOS}), (EOS,))


def tok(spelling: bytes) -> int:
    return SPELLINGS.index(spelling)


def engine(cache: bool | SharedCache = True) -> Engine:
    e = Engine(ANALYST, vocab(), LEXICON, cache=cache)
    e.kernel = None  # the Python path, also where the kernels are loaded
    return e


def config(e: Engine, text: bytes) -> Config:
    c = e.lexer.advance(e.lexer.initial, text)
    assert c is not None and e.lexer.is_viable(c)
    return c


def at(e: Engine, text: bytes, *, audit: bool = True) -> GridGuide:
    """A guide whose history is ``text`` byte by byte."""
    g = GridGuide(e, audit=audit)
    for b in text:
        g.accept_token(b)
    return g


def reference(e: Engine, c: Config) -> list[int]:
    """The mask by its definition: every token whose spelling leads to a viable
    configuration, EOS when the output is a sentence."""
    out = []
    for t, spelling in enumerate(SPELLINGS):
        if t in e.vocab.special_ids:
            continue
        nxt = e.lexer.advance(c, spelling)
        if nxt is not None and e.lexer.is_viable(nxt):
            out.append(t)
    if e.lexer.eos_allowed(c):
        out.append(EOS)
    return out


def words_of(ids: list[int]) -> list[int]:
    """Packed int32 words by hand: bit ``i % 32`` of word ``i // 32``."""
    words = [0] * ((N + 31) // 32)
    for i in ids:
        words[i // 32] |= 1 << (i % 32)
    return [w - (1 << 32) if w >> 31 else w for w in words]


PREFIXES = [
    b"",
    b"select",
    b"select ",
    b"select * from emplo",
    b"select * from employe",
    b"select * from employees",
    b"select * from employees where id = 1",
    b"select id from orders;",
    b"select * from orders; --x",
]


@pytest.mark.parametrize("kind", ["off", "t1", "t2"])
def test_masks_are_the_definition(kind: str) -> None:
    cache: bool | SharedCache = {"off": False, "t1": True}.get(kind, True)
    if kind == "t2":
        cache = SharedCache(engine(False).family)
    e = engine(cache)
    for prefix in PREFIXES:
        for _ in range(2):  # the second time from the caches
            g = at(e, prefix)
            want = reference(e, g.config)
            ids, result = g.mask_and_ids()
            assert ids == want == g.mask_ids(), prefix
            assert result.eos is (EOS in want)
            assert result.bits == id_bits([t for t in want if t != EOS])
            assert sorted([*result.ci_ids, *result.cd_ids]) == [t for t in want if t != EOS]
            assert list(g.mask()) == words_of(want)
            assert g.eos_allowed() is g.is_complete() is (EOS in want)


def test_cd_levels_and_classes_by_hand() -> None:
    # After "select " the root walk finds four CD entries in two classes: "* "
    # (STAR ends at the space) and "id ", "yees " and "yees;" (COLUMN_NAME; the
    # last two fail after the shift). The two live classes' sub-walks find one FROM
    # entry each ("* from ", "id from "); both FROM shifts land on one stack, where
    # the two TABLE_NAME entries ("...employees;", "...orders;") are one class; its
    # two sub-walks find the ";" entries ("...; "), on one stack again:
    # 4 + 2 + 2 + 2 = 10 entries, 2 + 2 + 1 + 1 = 6 classes.
    for cache in (False, True):
        e = engine(cache)
        result = e.compute_mask(config(e, b"select "))
        assert (result.cd_entries, result.cd_classes) == (10, 6)
        cd = {t for part in result.cd_parts for t in part}
        assert cd == set(result.cd_ids)
        assert {tok(s) for s in MULTI[1:7]} <= cd
        assert not {tok(s) for s in MULTI[1:7]} & set(result.ci_ids)
    # "emplo": one entry, "yees where" and "yees;" are another token each of it.
    e = engine()
    result = e.compute_mask(config(e, b"select * from emplo"))
    assert (result.cd_entries, result.cd_classes) == (2, 1)
    assert set(result.cd_ids) == {tok(b"yees where"), tok(b"yees;")}
    # No CD entry at all: no class.
    result = e.compute_mask(config(e, b"select * from employees; "))
    assert (result.cd_entries, result.cd_classes, result.cd_parts) == (0, 0, ())
    assert result.eos is True


def test_what_the_caches_hold_after_a_mask() -> None:
    shared = SharedCache(engine(False).family)
    a, b = engine(shared), engine(shared)
    assert a.t1 is not None and b.t1 is not None
    c = config(a, b"select ")
    allowed = a.parser.allowed(c.node)
    root = a.key(0, c.normal, allowed)
    a.compute_mask(c)
    entry = a.t1.get(root)
    assert entry is not None and shared.table.get(root) is entry
    # The entry is the walk's, under its key (its id addresses both).
    nodes, cd = walk_from(a.scanner, a.trie, 0, c.remainder, allowed, False)
    assert entry.entry_id == make_entry(root, a.ids(nodes), cd, N).entry_id
    assert entry.cd == tuple(cd) and len(cd) == 4
    # Each class verdict is memoized on the entry's own group, under
    # (class index, allowed set after the shift, lexicon).
    memo = {
        (i, a.parser.allowed(a.parser.shift(c.node, t)), a.lexicon.fingerprint)
        for i, (t, _) in enumerate(entry.group.classes)
    }
    assert set(entry.group.verdicts) == memo
    # Each sub-walk is cached under its raw tail.
    for t, members in entry.group.classes:
        after = a.parser.allowed(a.parser.shift(c.node, t))
        for node, _, tail in members:
            assert node != 0
            assert isinstance(a.t1.get(a.key(node, tail, after)), type(entry))
    # A second mask: T1 alone, no walk. The root entry's verdicts are memoized, so
    # its sub-walks are not looked up again; a merged group is new at each mask, so
    # the sub-walks of the two merged classes (two entries each) are: 1 + 4 hits.
    hits, shared_hits, shared_misses = a.t1.hits, shared.table.hits, shared.table.misses
    verdicts = dict(entry.group.verdicts)
    again = a.compute_mask(c)
    assert a.t1.hits == hits + 5
    assert (shared.table.hits, shared.table.misses) == (shared_hits, shared_misses)
    assert all(entry.group.verdicts[k] is v for k, v in verdicts.items())
    assert again.cd_parts == a.compute_mask(c).cd_parts
    # Another engine of the family: a T2 hit, copied into its T1.
    before = shared.table.hits
    b_result = b.compute_mask(config(b, b"select "))
    assert shared.table.hits > before
    assert b.t1.get(root) is entry
    assert b_result.bits == again.bits


def test_verdicts_are_memoized_only_with_a_cache() -> None:
    for cache in (False, True):
        e = engine(cache)
        c = config(e, b"select * from emplo")
        allowed = e.parser.allowed(c.node)
        _, cd = walk_from(e.scanner, e.trie, 0, c.remainder, allowed, False)
        group = CDGroup(tuple(cd))
        ((t, _),) = group.classes
        after = e.parser.allowed(e.parser.shift(c.node, t))
        first = e.verdict(group, 0, after)
        assert sorted(first[0]) == [tok(b"yees where"), tok(b"yees;")]
        assert first[1] == id_bits(first[0]) and first[2] is None
        if cache:
            assert e.t1 is not None
            assert list(group.verdicts) == [(0, after, e.lexicon.fingerprint)]
            hits = e.t1.hits
            assert e.verdict(group, 0, after) is first
            assert e.t1.hits == hits  # the memo, no walk
        else:
            assert group.verdicts == {}


def test_walk_without_cache_sorts_the_ids() -> None:
    e = engine(False)
    c = config(e, b"select ")
    allowed = e.parser.allowed(c.node)
    assert c.remainder == b" "
    ci, cd = e.walk(0, b" ", allowed)
    _, want_cd = walk_from(e.scanner, e.trie, 0, b" ", allowed, False)
    assert list(ci) == sorted(ci) and cd == tuple(want_cd)
    # The root walk's CI ids: the mask less its CD tokens (and EOS).
    cd_tokens = {tok(s) for s in MULTI[1:7]}
    assert set(ci) == {t for t in reference(e, c) if t != EOS} - cd_tokens


def test_ids_expand_alias_classes() -> None:
    e = engine(False)
    alias = [i for i, s in enumerate(SPELLINGS) if s == b" from"]
    assert len(alias) == 2
    nodes = [e.trie.find(b" from"), e.trie.find(b"*"), e.trie.find(b"* from ")]
    assert e.ids(nodes) == [*alias, ord("*"), tok(b"* from ")]
    assert e.ids([]) == []


def test_keys() -> None:
    shared = SharedCache(engine(False).family)
    shared.rollover()
    for e, namespace in ((engine(), 0), (engine(shared), 1)):
        ident = config(e, b"select * from emp")  # TABLE_NAME (a category) is allowed
        allowed = e.parser.allowed(ident.node)
        key = e.key(0, ident.normal, allowed)
        assert key == IdentKey(namespace, 0, ident.normal, allowed, e.lexicon.fingerprint)
        plain = config(e, b"select * from employees wh")  # WHERE's remainder, no category
        allowed = e.parser.allowed(plain.node)
        q, ln, p, v = plain.normal
        assert q != ln
        assert e.key(0, plain.normal, allowed) == GenericKey(namespace, 0, (q, p, v), allowed)
        assert e.key(7, b"ab", allowed) == GenericKey(namespace, 7, b"ab", allowed)


def test_engine_fields() -> None:
    v = vocab()
    e = Engine(ANALYST, v, LEXICON)
    assert e.grammar is ANALYST and e.vocab is v and e.tables.fingerprint
    assert e.t1 is not None and e.shared is None
    assert e.n_words == 9 == len(e.pack([]))
    assert Engine(ANALYST, v, LEXICON, cache=False).t1 is None
    lexicon = build_lexicon(ANALYST, e.dfa, LEXICON)
    assert e.lexicon.fingerprint == lexicon.fingerprint
    assert e.lexicon.words == lexicon.words
    trie = build_trie(v)
    given = Engine(ANALYST, v, lexicon, dfa=e.dfa, trie=trie)
    assert given.lexicon is lexicon and given.trie is trie and given.dfa is e.dfa
    assert Engine(ANALYST, v).lexicon.categories == 0
    shared = SharedCache(e.family)
    with_t2 = Engine(ANALYST, v, LEXICON, cache=shared)
    assert with_t2.shared is shared and with_t2.t1 is not None
    with pytest.raises(ValueError, match=r"^a shared cache serves one walk family"):
        Engine(ANALYST, v, LEXICON, cache=SharedCache("another family"))
    # 1,024 tokens are exactly 32 words (not 33, nor 1,055 // 33 = 31).
    words = [bytes([i]) for i in range(256)] + [b"x" * k for k in range(2, 769)] + [b""]
    v1024 = Vocabulary.from_spellings("v1024", words, frozenset({1023}), (1023,))
    assert v1024.n_vocab == 1024
    assert Engine(ANALYST, v1024, LEXICON).n_words == 32


def test_engine_hands_itself_to_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    tables = object()

    def engine_tables(e: Any) -> Any:
        seen.append(e)
        return tables

    monkeypatch.setattr(kernels, "engine_tables", engine_tables)
    e = Engine(ANALYST, vocab(), LEXICON)
    assert seen == [e] and e.kernel is tables


def test_fingerprints() -> None:
    e = engine()
    want = {
        "grammar": ANALYST.fingerprint,
        "tables": e.tables.fingerprint,
        "dfa": e.dfa.fingerprint,
        "lexicon": e.lexicon.fingerprint,
        "tokenizer": e.vocab.fingerprint,
        "trie": e.trie.fingerprint,
    }
    assert e.fingerprints() == want == GridGuide(e).fingerprints()


def test_pack_by_hand() -> None:
    e = engine()
    words = e.pack([0, 31, 32, 271, 0])
    assert isinstance(words, array.array) and words.typecode == "i"
    assert list(words) == [1 - (1 << 31), 1, 0, 0, 0, 0, 0, 0, 1 << 15]
    assert list(e.pack([7, 8, 9, 255])) == [0x380, 0, 0, 0, 0, 0, 0, -(1 << 31), 0]


def test_guide_of_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    e = engine()
    g = e.guide()
    assert type(g) is GridGuide and g.audited and g.engine is e and g.steps == 0
    assert not e.guide(audit=False).audited
    spec = EventSpec((("select_stmt", "statement"),))
    with_events = e.guide(audit=False, events=spec)
    assert isinstance(with_events, EventGuide)
    assert type(with_events.inner) is GridGuide and with_events.inner.engine is e
    assert not with_events.audited
    assert with_events.tracker is tracker(e, spec)
    # With the kernels loaded: their session, with the same arguments.
    calls: list[tuple[Any, ...]] = []
    session = object()

    def fake_session(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return session

    monkeypatch.setattr(kernels, "session", fake_session)
    e.kernel = object()
    assert e.guide(audit=False, events=spec) is session
    assert e.guide() is session
    assert calls == [
        ((e,), {"audit": False, "events": spec}),
        ((e,), {"audit": True, "events": None}),
    ]


class Kernel:
    """A stand-in for the kernels' tables: the Python walk, each call recorded."""

    def __init__(self, e: Engine) -> None:
        self.e = e
        self.calls: list[tuple[int, bytes, int, bool]] = []

    def walk(self, root: int, pending: bytes, allowed: int, inner: bool) -> Any:
        self.calls.append((root, pending, allowed, inner))
        nodes, cd = walk_from(self.e.scanner, self.e.trie, root, pending, allowed, inner)
        return array.array("i", nodes), [(n, t, bytearray(tail)) for n, t, tail in cd]


def test_walks_through_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    want_e = engine(False)
    want = want_e.compute_mask(config(want_e, b"select "))
    # Without cache: every walk is the kernel's, roots flagged as such.
    e = engine(False)
    kernel = Kernel(e)
    e.kernel = kernel
    got = e.compute_mask(config(e, b"select "))
    assert (got.bits, got.cd_entries, got.cd_classes) == (want.bits, 10, 6)
    allowed = e.parser.allowed(config(e, b"select ").node)
    assert kernel.calls[0] == (0, b" ", allowed, False)
    assert len(kernel.calls) == 11 and all(r != 0 and inner for r, _, _, inner in kernel.calls[1:])
    nodes, cd = e._walk_from(0, b" ", allowed)
    assert type(nodes) is list and all(type(tail) is bytes for _, _, tail in cd)
    # With T1: a miss is the kernels' cold entry, given the remainder's bytes.
    cold: list[tuple[Any, ...]] = []

    def cold_entry(eng: Engine, key: Any, root: int, pending: bytes, allowed: int) -> Any:
        cold.append((eng, key, root, pending, allowed))
        nodes, cd = walk_from(eng.scanner, eng.trie, root, pending, allowed, root != 0)
        return make_entry(key, eng.ids(nodes), cd, N)

    monkeypatch.setattr(kernels, "cold_entry", cold_entry)
    e = engine(True)
    e.kernel = Kernel(e)
    c = config(e, b"select * from emplo")
    got = e.compute_mask(c)
    want = want_e.compute_mask(config(want_e, b"select * from emplo"))
    assert got.bits == want.bits and got.cd_ids == want.cd_ids
    allowed = e.parser.allowed(c.node)
    assert cold[0] == (e, e.key(0, c.normal, allowed), 0, b"emplo", allowed)
    assert type(cold[0][3]) is bytes
    assert len(cold) == 3 and all(root != 0 for _, _, root, _, _ in cold[1:])


def test_accept_refusals() -> None:
    e = engine()
    g = at(e, b"select * from ")
    history = g._step
    cases = [
        (-1, "outside the vocabulary"),
        (N, "outside the vocabulary"),
        (0, "b'\\x00' is not in the mask"),
        (ord("7"), "b'7' is not in the mask"),
        (EOS, "EOS before the output is a sentence"),
        (PAD, "special tokens are never admitted"),
    ]
    for t, reason in cases:
        with pytest.raises(GuideError) as err:
            g.accept_token(t)
        assert (err.value.step, err.value.token, err.value.reason) == (14, t, reason)
        assert g._step is history
    # A remainder the lexer reaches ("orderss") but that no word continues.
    orders = at(e, b"select * from orders")
    assert e.lexer.advance(orders.config, b"s") is not None
    with pytest.raises(GuideError, match="b's' is not in the mask"):
        orders.accept_token(ord("s"))
    with pytest.raises(ValueError, match="an audit kind is 'sampled', 'forced' or 'reserve'"):
        g.accept_token(ord("e"), "bogus")  # type: ignore[arg-type]


def test_eos_and_after() -> None:
    e = engine()
    g = at(e, b"select * from orders;")
    before = g.config
    g.accept_token(EOS)
    assert g.is_terminated() is True and g.steps == 22 and g.config is before
    assert not g.eos_allowed() and g.is_complete()
    assert g.output() == b"select * from orders;"
    for t in (ord(" "), EOS):
        with pytest.raises(GuideError) as err:
            g.accept_token(t)
        assert (err.value.step, err.value.token) == (22, t)
        assert err.value.reason == "the guide has already accepted EOS"
    with pytest.raises(GuideError) as err:
        g.mask_ids()
    assert (err.value.step, err.value.token) == (22, None)
    assert err.value.reason == "the guide has accepted EOS; it has no next mask"
    assert [r.kind for r in g.audit_log().records][-2:] == ["sampled", "eos"]
    assert g.audit_log().records[-1].token == EOS
    g.rollback()
    assert not g.is_terminated() and g.steps == 21 and g.eos_allowed()


def test_an_empty_mask_is_an_error() -> None:
    e = engine()
    c = e.lexer.advance(e.lexer.initial, b"select * from sal")
    assert c is not None and not e.lexer.is_viable(c)
    g = GridGuide(e, _Step(c, None, 5))
    with pytest.raises(MaskError) as err:
        g.mask()
    assert (err.value.step, err.value.detail) == (5, EMPTY_MASK)


def test_steps_output_and_kinds() -> None:
    e = engine()
    g = GridGuide(e)
    assert g.steps == 0 and g.output() == b"" and g.audited is True
    assert g.accept_tokens([tok(b"select"), ord(" ")]) == 2
    g.accept_token(tok(b"* from "), "forced")
    assert g.accept_tokens([tok(b"employees"), ord("x"), ord(";")], "reserve") == 1
    g.accept_token(ord(";"))
    assert g.steps == 5 and g.output() == b"select * from employees;"
    assert g.is_terminated() is False  # a bool, as the protocol says
    kinds = [r.kind for r in g.audit_log().records]
    assert kinds == ["sampled", "sampled", "forced", "reserve", "sampled"]
    assert [r.token for r in g.audit_log().records] == [
        tok(b"select"),
        ord(" "),
        tok(b"* from "),
        tok(b"employees"),
        ord(";"),
    ]


def test_audit_fields_recomputed() -> None:
    # Each record: the configuration's hash, the packed mask's content address and
    # the blocked count, for the configuration the token was taken at.
    e = engine()
    g = GridGuide(e)
    text = b"select * from orders;"
    expected = []
    c = e.lexer.initial
    for i, b in enumerate(text):
        want = reference(e, c)
        packed = array.array("i", words_of(want)).tobytes()
        entry_id = hashlib.blake2b(packed, digest_size=16).hexdigest()
        expected.append((f"{c.hash:016x}", entry_id, N - len(want)))
        if i % 3 == 0:
            g.mask()  # some steps masked first, some not
        g.accept_token(b)
        nxt = e.lexer.advance(c, bytes([b]))
        assert nxt is not None
        c = nxt
    got = [(r.config_hash, r.mask_entry_id, r.blocked_count) for r in g.audit_log().records]
    assert got == expected
    # The complete output: EOS is admitted, and counted.
    want = reference(e, c)
    assert EOS in want
    assert g.step_audit()[2] == N - len(want)
    g.accept_token(EOS)
    assert g.audit_log().records[-1].blocked_count == N - len(want)


def test_step_audit_is_computed_once_per_step() -> None:
    e = engine()
    g = at(e, b"select ")
    assert e.t1 is not None
    g.mask()
    memo = g._audit_memo
    assert memo is not None and memo[0] is g._step
    hits = e.t1.hits
    fields = g.step_audit()
    assert e.t1.hits == hits and fields is memo[1]
    g.mask()
    assert g._audit_memo is memo
    # An unaudited guide keeps no memo while masking, but tells its fields.
    quiet = at(e, b"select ", audit=False)
    quiet.mask()
    assert quiet._audit_memo is None
    assert quiet.step_audit() == fields and quiet.audited is False
    g.accept_token(ord("*"))
    assert g.audited is True
    assert g.step_audit()[0] == g.config.hash
    with pytest.raises(GuideError) as err:
        quiet.audit_log()
    assert (err.value.step, err.value.token) == (7, None)
    assert err.value.reason == "this guide does not audit its steps"


def test_rollback_fork_and_validate() -> None:
    e = engine()
    g = at(e, b"select *")
    assert g.steps == 8
    g.rollback(0)
    assert g.steps == 8
    g.rollback()
    assert g.steps == 7 and g.output() == b"select "
    g.rollback(7)
    assert g.steps == 0 and g.config is e.lexer.initial
    with pytest.raises(GuideError) as err:
        g.rollback(1)
    assert (err.value.step, err.value.token) == (0, None)
    assert err.value.reason == "cannot roll back 1 of 0 tokens"
    g = at(e, b"select")
    with pytest.raises(GuideError, match="cannot roll back -1 of 6 tokens"):
        g.rollback(-1)
    fork = g.fork()
    assert fork.audited is True and fork._step is g._step and fork.engine is e
    assert at(e, b"select", audit=False).fork().audited is False
    assert t1_calls(e, lambda: g.validate_tokens([ord(" "), ord("*"), ord("x")])) == 2
    assert g.steps == 6 and g.output() == b"select"
    assert len(g.audit_log().records) == 6


def t1_calls(e: Engine, f: Any) -> Any:
    """``f()``, checking it computed no mask (no cache lookup)."""
    assert e.t1 is not None
    before = (e.t1.hits, e.t1.misses)
    out = f()
    assert (e.t1.hits, e.t1.misses) == before
    return out


def test_fill_writes_the_given_row() -> None:
    e = engine()
    g = at(e, b"select * from orders;")
    buf = array.array("i", [7] * (2 * e.n_words))
    rows = memoryview(buf).cast("B").cast("i", (2, e.n_words))
    g.fill_next_token_bitmask(rows)
    assert list(buf[: e.n_words]) == words_of(reference(e, g.config))
    assert list(buf[e.n_words :]) == [7] * e.n_words
    g.fill_next_token_bitmask(rows, 1)
    assert list(buf[e.n_words :]) == list(buf[: e.n_words])


def test_seal() -> None:
    e = engine()
    g = at(e, b"select * from orders;")
    log = g.seal("eos", {"mode": 1})
    assert log.seal is not None
    assert log.seal["stop_reason"] == "eos"
    assert log.seal["fingerprints"] == e.fingerprints()
    assert log.seal["mode"] == {"mode": 1}
    assert log.seal["record_count"] == 21
    assert log.records == g.audit_log().records


def test_the_token_at_trie_node_1_is_judged_in_its_sub_walk() -> None:
    # No control bytes: " " is the root's first child, trie node 1. After "select",
    # " " ends SELECT (a CD entry at node 1, tail " "), as " from" and "*" do; the
    # class's sub-walk from node 1 judges the token " " itself (a walk from a node
    # past the root includes its own token), which is admitted; "selectx" is no
    # lexeme that can start a statement, and ";" cannot follow SELECT.
    words = [b" ", b"*", b";", b"select", b" from", b"orders", b"x", b""]
    v = Vocabulary.from_spellings("printable", words, frozenset({7}), (7,))
    e = Engine(ANALYST, v, LEXICON, cache=False)
    e.kernel = None
    assert e.trie.find(b" ") == 1
    g = GridGuide(e)
    g.accept_token(3)
    result = e.compute_mask(g.config)
    assert (result.cd_entries, result.cd_ids, result.ci_ids) == (3, (0, 4, 1), ())
    assert g.mask_ids() == [0, 1, 4]
