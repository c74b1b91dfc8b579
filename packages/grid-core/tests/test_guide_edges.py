"""The protocol's edges, alike on both guides: odd integers, odd buffers, audit off.

Each case drives the Python guide (``GridGuide`` on an engine without kernels)
and the native one (``Engine.guide()`` with them) the same way and asks for the
same outcome: the same error class (and, for a refused token, the same text),
or the same result. Found by a review that drove the two in lockstep
(2026-12-06); each test fails on the side that was wrong then:

- a big-endian int32 buffer was filled natively with swapped words;
- a torch tensor pointed at new storage (``Tensor.set_``) was filled through
  the old storage's view;
- ``numpy.int64`` tokens broke the Python guide's seal;
- an unaudited Python guide handed out an (empty) audit log and seal;
- a bad ``kind`` was an ``assert`` in Python (nothing under ``-O``);
- an int of 2**63 or more raised ``OverflowError`` natively;
- a refused token's bytes were quoted unlike Python's ``repr``;
- uint32 and unaligned buffers were filled by the Python guide only;
- ``fill_rows`` over Python guides wrote rows before refusing a bad batch.

A later review (2026-12-07) added: one guide given for two rows, and a bug in
one guide's fill raised into the whole batch. A third (session 45) added: the
native guide kept a buffer's export between fills and missed a reshape in
place; the Python guide computed the mask before checking the buffer (after EOS
a bad buffer raised GuideError); ``fill_rows`` over Python guides failed each
row for a bad buffer instead of refusing the batch; a non-str ``kind`` was a
``TypeError`` natively; natively ``validate_tokens`` read the whole list before
the first refusal; a refused token beyond 64 bits was named clamped.
"""

from __future__ import annotations

import array
import os

import pytest
from toy import ANALYST, EOS, LEXICON, TOY, token

from grid_core.errors import GuideError
from grid_core.guide import Engine, GridGuide
from grid_core.protocol import Guide, fill_rows

np = pytest.importorskip("numpy")
pytest.importorskip("grid_kernels._native")
if os.environ.get("GRID_KERNELS") == "0":
    pytest.skip("compares the native guide: GRID_KERNELS=0 is off", allow_module_level=True)

NATIVE = Engine(ANALYST, TOY, LEXICON)
PYTHON = Engine(ANALYST, TOY, LEXICON)
PYTHON.kernel = None
STATEMENT = [token(b"select"), token(b" *"), token(b" from"), token(b" emplo"), token(b"yees")]


def both(audit: bool = True) -> list[Guide]:
    guides = [GridGuide(PYTHON, audit=audit), NATIVE.guide(audit=audit)]
    assert type(guides[1]).__name__ == "KernelGuide", "the kernels are loaded"
    return guides


def outcome(call: object) -> tuple[str, str]:
    """(exception class name or "ok", its text or the result's repr)."""
    try:
        result = call()  # type: ignore[operator]
    except Exception as e:  # the class is what is compared
        return type(e).__name__, str(e)
    return "ok", repr(result)


def test_a_big_endian_buffer_is_refused() -> None:
    for guide in both():
        with pytest.raises(TypeError, match="int32"):
            guide.fill_next_token_bitmask(np.zeros(PYTHON.n_words, ">i4"))


@pytest.mark.parametrize(
    "make",
    [
        lambda n: np.zeros(n, np.uint32),
        lambda n: array.array("I", [0]) * n,
        lambda n: np.frombuffer(bytearray(4 * n + 1), np.int32, n, offset=1),
    ],
    ids=["uint32", "array-I", "unaligned"],
)
def test_buffers_the_kernels_refuse_the_python_guide_refuses(make: object) -> None:
    n = PYTHON.n_words
    kinds = {outcome(lambda g=g: g.fill_next_token_bitmask(make(n)))[0] for g in both()}  # type: ignore[operator]
    assert len(kinds) == 1 and kinds != {"ok"}, kinds


def test_a_torch_tensor_given_new_storage_is_filled_there() -> None:
    """``Tensor.set_`` gives the same tensor object new memory (a batch that grew):
    the native guide must not write through the view it kept of the old memory."""
    torch = pytest.importorskip("torch")
    n = PYTHON.n_words
    expected = GridGuide(PYTHON).mask().tobytes()
    for guide in both():
        t = torch.zeros((1, n), dtype=torch.int32)
        guide.fill_next_token_bitmask(t, 0)
        old = t.untyped_storage()
        kept = torch.empty(0, dtype=torch.int32).set_(old, 0, (1, n))
        kept.zero_()
        t.set_(torch.full((4, n), -7, dtype=torch.int32))
        guide.fill_next_token_bitmask(t, 3)
        guide.fill_next_token_bitmask(t, 0)
        assert t[3].numpy().tobytes() == t[0].numpy().tobytes() == expected
        assert (kept == 0).all(), "nothing was written into the old memory"
        assert (t[1] == -7).all()


def test_numpy_integer_tokens_are_tokens() -> None:
    seals = []
    for guide in both():
        for t in STATEMENT:
            guide.accept_token(np.int64(t))
        guide.accept_token(np.int32(token(b";")))
        guide.accept_token(np.intp(EOS))
        log = guide.seal("eos", {"mode": "test"})
        assert all(type(r.token) is int for r in log.records)
        seals.append(log.lines())
    assert seals[0] == seals[1]


def test_an_unaudited_guide_has_no_audit_log() -> None:
    """No log and no seal at any step. (``step_audit`` differs on purpose: the
    Python reference answers it unaudited, for the parity tests.)"""
    for guide in both(audit=False):
        for step in range(2):
            for call in (guide.audit_log, lambda g=guide: g.seal("x", {})):
                with pytest.raises(GuideError, match="does not audit"):
                    call()
            guide.accept_token(STATEMENT[step])
        guide.rollback(2)
        with pytest.raises(GuideError, match="does not audit"):
            guide.audit_log()


def test_a_bad_kind_is_a_value_error_before_anything_else() -> None:
    for guide in both():
        for args in ((STATEMENT[0], "eos"), (10**9, "nope"), (STATEMENT[0], "")):
            with pytest.raises(ValueError, match="an audit kind is 'sampled', 'forced' or"):
                guide.accept_token(*args)
        guide.accept_tokens([*STATEMENT, token(b";"), EOS])
        with pytest.raises(ValueError, match="an audit kind"):
            guide.accept_token(EOS, "eos")
    messages = {outcome(lambda g=g: g.accept_token(STATEMENT[0], "eos")) for g in both()}
    assert len(messages) == 1, messages


def test_huge_integers_are_out_of_range_not_overflow() -> None:
    for guide in both():
        with pytest.raises(GuideError, match="outside the vocabulary"):
            guide.accept_token(2**63)
        with pytest.raises(GuideError, match="outside the vocabulary"):
            guide.accept_token(-(2**70))
        assert guide.accept_tokens([STATEMENT[0], 2**64]) == 1
        assert guide.validate_tokens([STATEMENT[1], 2**63]) == 1
        with pytest.raises(GuideError, match="cannot roll back"):
            guide.rollback(2**64)
        with pytest.raises(ValueError, match="out of range"):
            guide.fill_next_token_bitmask(np.zeros((2, PYTHON.n_words), np.int32), 2**64)


def test_a_refused_token_is_named_as_python_prints_its_bytes() -> None:
    for spelling in (b"')", b"'", b"\"'", b"\\"):
        if spelling not in TOY.token_bytes:
            continue
        t = TOY.token_bytes.index(spelling)
        found = {outcome(lambda g=g, t=t: g.accept_token(t)) for g in both()}
        assert len(found) == 1 and repr(spelling) in next(iter(found))[1], found


def test_fill_rows_of_python_guides_refuses_a_bad_batch_before_writing() -> None:
    n = PYTHON.n_words
    for guides in ([GridGuide(PYTHON), GridGuide(PYTHON)], [NATIVE.guide(), NATIVE.guide()]):
        batch = np.full((2, n), 7, dtype=np.int32)
        with pytest.raises(ValueError, match="row 1 is given to two sessions"):
            fill_rows(guides, batch, rows=[1, 1])
        with pytest.raises(ValueError, match=r"row 2 is out of range 0\.\.2"):
            fill_rows(guides, batch, rows=[0, 2])
        with pytest.raises(ValueError, match="row -1 is out of range"):
            fill_rows(guides, batch, rows=[-1, 0])
        assert (batch == 7).all()


def test_fill_rows_refuses_one_guide_for_two_rows() -> None:
    """A guide is one request's: given twice (natively a borrow error took the whole
    batch down; in Python the second row got the first's state), refused before any
    row is written."""
    n = PYTHON.n_words
    for guide in (GridGuide(PYTHON), NATIVE.guide()):
        batch = np.full((2, n), 7, dtype=np.int32)
        with pytest.raises(ValueError, match="one guide is given for two rows"):
            fill_rows([guide, guide], batch)
        assert (batch == 7).all()


def test_a_bug_in_one_guides_fill_fails_its_row_only() -> None:
    """A guide whose fill raises something other than grid-core's errors (a bug) is
    that row's entry; the other rows are filled."""

    class Buggy(GridGuide):
        def fill_next_token_bitmask(self, bitmask: object, row: int = 0) -> None:
            raise RuntimeError("a bug inside the guide's fill")

    batch = np.zeros((2, PYTHON.n_words), dtype=np.int32)
    errors = fill_rows([Buggy(PYTHON), NATIVE.guide()], batch)
    assert isinstance(errors[0], RuntimeError) and errors[1] is None
    want = np.zeros(PYTHON.n_words, dtype=np.int32)
    NATIVE.guide().fill_next_token_bitmask(want)
    assert (batch[0] == 0).all() and (batch[1] == want).all()


def test_events_from_a_negative_index_are_refused() -> None:
    from test_events import SPEC
    from toy import CRUD

    from grid_core.events import EventGuide, tracker

    python_engine, native_engine = Engine(CRUD, TOY, LEXICON), Engine(CRUD, TOY, LEXICON)
    python_engine.kernel = None
    python = EventGuide(GridGuide(python_engine), tracker(python_engine, SPEC))
    for guide in (python, native_engine.guide(events=SPEC)):
        guide.accept_tokens(STATEMENT)
        assert guide.events(2**64) == []
        with pytest.raises(ValueError, match="not negative"):
            guide.events(-1)


def test_a_buffer_reshaped_in_place_is_checked_again() -> None:
    """``a.shape = ...`` keeps the memory: the native guide once filled through the
    export it kept of the old shape, accepting rows the new shape lacks."""
    n = PYTHON.n_words
    for guide in both():
        a = np.zeros((2, n), np.int32)
        guide.fill_next_token_bitmask(a, 1)
        a.shape = (1, 2 * n)
        for row in (0, 1):
            found = outcome(lambda g=guide, b=a, r=row: g.fill_next_token_bitmask(b, r))
            assert found == (
                "ValueError",
                f"bitmask buffer has {2 * n} 32-bit words per row,"
                f" expected {n} 32-bit words per row",
            ), found
        a.shape = (2, n)
        guide.fill_next_token_bitmask(a, 0)
        assert a[0].tobytes() == a[1].tobytes() != bytes(4 * n)


@pytest.mark.parametrize(
    "make",
    [
        lambda n: (np.zeros(n, np.uint32), 0),
        lambda n: (np.zeros((2, n), np.int32), 5),
        lambda n: (np.zeros(n + 1, np.int32), 0),
        lambda n: (np.zeros((1, 1, n), np.int32), 0),
    ],
    ids=["uint32", "row", "width", "3-D"],
)
def test_a_bad_buffer_after_eos_is_the_buffers_error(make: object) -> None:
    """The buffer and the row are checked before the mask, on both guides: after
    EOS a bad buffer is refused as a bad buffer, not as a step after EOS."""
    found = set()
    for guide in both():
        guide.accept_tokens([*STATEMENT, token(b";"), EOS])
        assert guide.is_terminated()
        buf, row = make(PYTHON.n_words)  # type: ignore[operator]
        found.add(outcome(lambda g=guide, b=buf, r=row: g.fill_next_token_bitmask(b, r))[0])
    assert found in ({"TypeError"}, {"ValueError"}), found


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda n: np.zeros((2, n), np.uint32), TypeError, "int32"),
        (lambda n: np.zeros((2, n + 1), np.int32), ValueError, "words"),
        (lambda n: np.zeros((2, 1, n), np.int32), ValueError, "not 3-D"),
    ],
    ids=["uint32", "width", "3-D"],
)
def test_fill_rows_refuses_a_bad_buffer_at_once(make: object, error: type, message: str) -> None:
    for guides in ([GridGuide(PYTHON), GridGuide(PYTHON)], [NATIVE.guide(), NATIVE.guide()]):
        with pytest.raises(error, match=message):
            fill_rows(guides, make(PYTHON.n_words))  # type: ignore[operator]


def test_a_kind_that_is_no_string_is_the_same_value_error() -> None:
    for kind, error in ((None, "ValueError"), (3, "ValueError"), (["forced"], "ValueError"),
                        (b"sampled", "TypeError"), (object(), "TypeError")):  # fmt: skip
        found = {outcome(lambda g=g, k=kind: g.accept_token(STATEMENT[0], k)) for g in both()}
        assert len(found) == 1 and next(iter(found))[0] == error, found
    found = {outcome(lambda g=g: g.accept_token("x", object())) for g in both()}  # type: ignore[arg-type]
    assert len(found) == 1 and "'str'" in next(iter(found))[1], found


def test_validate_tokens_reads_up_to_the_first_refusal() -> None:
    for guide in both():
        assert guide.validate_tokens([token(b" *"), 1.5]) == 0  # type: ignore[list-item]
        with pytest.raises(TypeError):
            guide.validate_tokens([STATEMENT[0], 1.5])  # type: ignore[list-item]
        assert guide.steps == 0


def test_a_refused_token_beyond_64_bits_is_named_as_given() -> None:
    for t in (2**70, -(2**64) - 3):
        found = set()
        for guide in both():
            with pytest.raises(GuideError) as err:
                guide.accept_token(t)
            assert err.value.token == t
            found.add(str(err.value))
        assert len(found) == 1 and str(t) in next(iter(found)), found


# ---------------------------------------------------------------- a bindings review (session 46)


def test_a_bitmask_of_no_words_is_a_value_error_not_a_panic() -> None:
    import grid_kernels

    logits = np.zeros((1, 5), np.float32)
    for call in (
        lambda: grid_kernels.apply_token_bitmask(logits, np.zeros((1, 0), np.int32)),
        lambda: grid_kernels.apply_token_bitmask(logits[0], np.zeros(0, np.int32)),
        lambda: grid_kernels.BitmaskApplier(np.zeros((1, 0), np.int32)).apply(logits),
    ):
        with pytest.raises(ValueError, match="no words"):
            call()


def test_logits_and_a_bitmask_sharing_memory_are_refused() -> None:
    """The kernels write the logits while they read the bitmask: one memory for
    both was accepted (aliased slices inside the kernels)."""
    import grid_kernels

    logits = np.zeros((1, 64), np.float32)
    for mask in (logits.view(np.int32)[:, :2], logits.view(np.int32)[:, 62:]):
        with pytest.raises(ValueError, match="share memory"):
            grid_kernels.apply_token_bitmask(logits, mask)
    grid_kernels.apply_token_bitmask(logits, np.full((1, 2), -1, np.int32))  # apart: fine


def test_an_empty_vocabulary_is_refused() -> None:
    import grid_kernels

    with pytest.raises(ValueError, match="empty"):
        grid_kernels.TrieTables(
            edge=[0], token=[-1], size=[1], alias_offset=[0, 0], alias_ids=[], n_vocab=0, eos_ids=[]
        )


def test_thread_counts_are_bounded() -> None:
    """Each thread count got a pool of its own, kept forever: a caller cycling
    through counts piled up OS threads (5,000 threads took 43 s to start)."""
    import grid_kernels

    guides = [NATIVE.guide() for _ in range(2)]
    rows = np.zeros((2, NATIVE.n_words), np.int32)
    for bad in (0, -1, 257, 10**6):
        with pytest.raises(ValueError, match="threads"):
            fill_rows(guides, rows, threads=bad)
        with pytest.raises(ValueError, match="threads"):
            grid_kernels.fill_next_token_bitmasks([g._native for g in guides], rows, None, bad)  # type: ignore[attr-defined]
    for n in range(2, 14):  # cold walks on a new engine each time, over n threads
        engine = Engine(ANALYST, TOY, LEXICON, dfa=NATIVE.dfa, trie=NATIVE.trie)
        batch = [engine.guide() for _ in range(2)]
        batch[1].accept_token(token(b"select"))
        assert fill_rows(batch, rows, threads=n) == [None, None]
    if os.path.isdir("/proc/self/task"):  # OS threads (rayon's are no Python threads)
        tasks = len(os.listdir("/proc/self/task"))
        assert tasks < 80, tasks  # 4 pools kept at most: 10+11+12+13 threads, not 2+...+13


def test_a_torch_tensor_whose_data_changed_dtype_is_checked_again() -> None:
    """The view kept of a tensor was reused when the tensor kept its memory and
    shape: `t.data = t.view(torch.float32)` got int32 bits written into floats."""
    torch = pytest.importorskip("torch")
    guide = NATIVE.guide()
    t = torch.zeros((2, NATIVE.n_words), dtype=torch.int32)
    guide.fill_next_token_bitmask(t, 0)
    t.data = t.view(torch.float32)
    with pytest.raises(TypeError):
        guide.fill_next_token_bitmask(t, 1)
    assert (t[1] == 0).all()


def test_a_refused_token_at_a_dead_end_is_a_guide_error_on_both() -> None:
    """A grammar whose lexemes run together wedges after "if" (an empty mask):
    with audit on the native guide raised MaskError for any token, even -1,
    where the reference refuses the token (GuideError)."""
    from grid_core import vocab as vocab_module
    from grid_core.compile import compile_grammar

    v = vocab_module.cl100k()
    engine = compile_grammar('start: "if" NAME ";"\n%import common.CNAME -> NAME\n', v)
    reference = compile_grammar('start: "if" NAME ";"\n%import common.CNAME -> NAME\n', v)
    reference.kernel = None
    if_, x = v.token_bytes.index(b"if"), v.token_bytes.index(b"x")
    for guide in (GridGuide(reference), engine.guide()):
        guide.accept_token(if_)
        for bad in (x, -1, 2**70):
            with pytest.raises(GuideError):
                guide.accept_token(bad)
        assert guide.accept_tokens([x]) == 0


def test_reserve_states_are_priced_by_their_own_engines_reserve() -> None:
    """A state of one engine priced by another's reserve panicked (an index out
    of its tables) or gave a wrong number."""
    from toy import CRUD

    from grid_core.reserve import reserve_table

    other = Engine(CRUD, TOY, LEXICON, trie=NATIVE.trie)
    mine, theirs = reserve_table(NATIVE).native(), reserve_table(other).native()
    session = other.kernel.session(0, False)  # type: ignore[union-attr]
    for b in b"update employees set sal =":  # single-byte tokens
        session.accept_token(b)
    state = theirs.start(session)
    assert theirs.reserve(state) >= 1
    for call in (
        lambda: mine.reserve(state),
        lambda: mine.completion(state),
        lambda: mine.advance(state, ord(" ")),
    ):
        with pytest.raises(ValueError, match="another engine"):
            call()


def test_a_ctypes_int32_array_is_a_bitmask() -> None:
    """ctypes exports its c_int32 arrays as '<i' (the machine's own order named
    explicitly), which pyo3 refuses: the native guide said the buffer was "empty
    or not 4-byte aligned" where the reference filled it."""
    import ctypes

    import grid_kernels

    rows = []
    for guide in both():
        buf = (ctypes.c_int32 * PYTHON.n_words)()
        guide.fill_next_token_bitmask(buf)
        rows.append(bytes(buf))
    assert rows[0] == rows[1] and any(rows[0])
    logits = (ctypes.c_float * (32 * PYTHON.n_words))()
    mask = (ctypes.c_int32 * PYTHON.n_words)()
    grid_kernels.apply_token_bitmask(logits, mask)  # nothing admitted: every logit -inf
    assert all(v == float("-inf") for v in logits)
