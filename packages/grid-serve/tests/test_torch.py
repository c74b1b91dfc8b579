"""grid_serve.torch: packed bitmasks unpack to exactly the packed ids, and apply as hard -inf."""

from __future__ import annotations

import array
import random

import pytest

torch = pytest.importorskip("torch")

from grid_serve.torch import (  # noqa: E402
    apply_bitmask_,
    bitmask_tensor,
    unpack_bitmask,
)


def pack(ids: list[int], n_vocab: int) -> array.array[int]:
    """The documented packing, written out: bit ``i % 32`` of int32 word ``i // 32``."""
    words = [0] * ((n_vocab + 31) // 32)
    for i in ids:
        words[i // 32] |= 1 << (i % 32)
    return array.array("i", [w - (1 << 32) if w >= 1 << 31 else w for w in words])


# Named cases: vocabulary sizes around word boundaries, and id sets at the edges.
CASES = {
    "empty": (64, []),
    "first-and-last": (64, [0, 63]),
    "sign-bit": (96, [31, 63, 95]),
    "partial-last-word": (70, [0, 33, 69]),
    "everything": (40, list(range(40))),
}


@pytest.mark.parametrize(("n_vocab", "ids"), list(CASES.values()), ids=list(CASES))
def test_unpack_is_the_packed_set(n_vocab: int, ids: list[int]) -> None:
    words = bitmask_tensor([pack(ids, n_vocab)])
    allowed = unpack_bitmask(words, n_vocab)
    assert allowed.dtype == torch.bool and allowed.shape == (1, n_vocab)
    assert allowed[0].nonzero().flatten().tolist() == ids


def test_random_batches_round_trip() -> None:
    rng = random.Random(7)
    for n_vocab in (1, 31, 32, 33, 1000, 49152):
        masks = [sorted(rng.sample(range(n_vocab), rng.randint(0, n_vocab))) for _ in range(3)]
        words = bitmask_tensor([pack(m, n_vocab) for m in masks])
        allowed = unpack_bitmask(words, n_vocab)
        for row, m in zip(allowed, masks, strict=True):
            assert row.nonzero().flatten().tolist() == m


def test_columns_past_the_words_are_blocked() -> None:
    """A logits row wider than the vocabulary (embedding padding): the padding is -inf."""
    words = bitmask_tensor([pack(list(range(40)), 40)])  # 2 words = 64 ids
    allowed = unpack_bitmask(words, 100)
    assert allowed[0, :40].all() and not allowed[0, 40:].any()


def test_apply_is_in_place_hard_minus_inf() -> None:
    logits = torch.randn(2, 70)
    before = logits.clone()
    masks = [[1, 5, 69], [0]]
    out = apply_bitmask_(logits, bitmask_tensor([pack(m, 70) for m in masks]))
    assert out is logits
    for row, m, old in zip(logits, masks, before, strict=True):
        assert torch.isfinite(row).nonzero().flatten().tolist() == m
        assert torch.equal(row[m], old[m])  # admitted logits untouched
        assert (row[torch.isinf(row)] == float("-inf")).all()


def test_one_dimensional_logits() -> None:
    logits = torch.zeros(33)
    apply_bitmask_(logits, bitmask_tensor([pack([32], 33)])[0])
    assert torch.isfinite(logits).nonzero().flatten().tolist() == [32]


def masked_reference(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """The documented rule, row by row: refused columns -inf, admitted ones untouched,
    unless no admitted logit is finite, when each admitted logit is 0.0."""
    out = logits.clone().masked_fill_(~allowed, float("-inf"))
    for row, admitted in zip(out, allowed, strict=True):
        if not row.isfinite().any():
            row[admitted] = 0.0
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_a_row_with_no_finite_admitted_logit_is_uniform_over_its_mask(
    dtype: torch.dtype,
) -> None:
    """Another processor put -inf (or +inf, NaN) on every admitted id: the admitted
    ids become 0.0 (a sampler's softmax is uniform over the mask, greedy takes the
    lowest admitted id), on the kernels' path (float32) and the torch path alike;
    a row with one finite admitted logit is masked as always."""
    inf, nan = float("inf"), float("nan")
    logits = torch.tensor(
        [
            [1.0, -inf, 2.0, -inf, 3.0],  # admitted 1 and 3, both -inf
            [1.0, inf, 2.0, nan, 3.0],  # admitted 1 and 3, +inf and NaN
            [1.0, -inf, 2.0, 4.0, 3.0],  # admitted 1 and 3, one finite
            [-inf, -inf, -inf, -inf, -inf],  # nothing admitted
        ]
    ).to(dtype)
    words = bitmask_tensor([pack([1, 3], 5)] * 3 + [pack([], 5)])
    out = apply_bitmask_(logits, words)
    assert out[0].tolist() == out[1].tolist() == [-inf, 0.0, -inf, 0.0, -inf]
    assert out[2].tolist() == [-inf, -inf, -inf, 4.0, -inf]
    assert out[3].tolist() == [-inf] * 5
    probs = torch.softmax(out[:3].float(), dim=-1)
    assert torch.multinomial(probs, 1).flatten().tolist()[:2] in ([1, 1], [1, 3], [3, 1], [3, 3])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_the_native_apply_blocks_what_the_torch_unpack_blocks(
    dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CPU float32 logits go through the kernels' one-pass apply (its calls that
    return are counted here), other dtypes through the torch unpack; both give
    the documented result (:func:`masked_reference`): the torch unpack's -inf set,
    admitted logits (NaN and inf included) untouched, and 0.0 on the admitted
    ids of a row with no finite admitted logit, for random rows and for logits
    narrower and wider than the bitmask. Fails on any differing column."""
    native = pytest.importorskip("grid_kernels")
    calls = []
    real = native.apply_token_bitmask
    monkeypatch.setattr(native, "apply_token_bitmask", lambda *a: (real(*a), calls.append(1)))
    rng = random.Random(5)
    for _ in range(50):
        n_words = rng.randint(1, 6)
        width = rng.randint(1, 32 * n_words + 40)
        words = torch.tensor(
            [[rng.randint(-(2**31), 2**31 - 1) for _ in range(n_words)] for _ in range(3)],
            dtype=torch.int32,
        )
        logits = torch.randn(3, width).to(dtype)
        logits[0, 0], logits[1, -1] = float("nan"), float("inf")
        if rng.random() < 0.5:  # row 2's every logit non-finite, or all but one
            logits[2] = rng.choice([float("-inf"), float("nan"), float("inf")])
            if rng.random() < 0.5:
                logits[2, rng.randrange(width)] = 1.0
        fast = apply_bitmask_(logits.clone(), words)
        allowed = unpack_bitmask(words, width)
        expected = masked_reference(logits, allowed)
        assert torch.equal(fast.isnan(), expected.isnan())
        assert torch.equal(fast.nan_to_num(0.5), expected.nan_to_num(0.5))
    assert len(calls) == (50 if dtype == torch.float32 else 0)


def test_the_native_apply_refuses_mismatched_buffers() -> None:
    native = pytest.importorskip("grid_kernels")
    logits, words = torch.zeros(2, 64), torch.zeros(3, 2, dtype=torch.int32)
    with pytest.raises(ValueError, match="logits shaped"):
        native.apply_token_bitmask(logits.numpy(), words.numpy())
    with pytest.raises(TypeError, match="float32"):
        native.apply_token_bitmask(logits.double().numpy(), words[:2].numpy())
    with pytest.raises(ValueError, match="C-contiguous"):
        native.apply_token_bitmask(torch.zeros(64, 2).t().numpy(), words[:2].numpy())
    frozen = logits[0].numpy().copy()
    frozen.flags.writeable = False
    with pytest.raises(TypeError, match="read-only"):
        native.apply_token_bitmask(frozen, words[0].numpy())
    # The greedy pick reads the same buffers (read-only is fine: it only reads).
    with pytest.raises(TypeError, match="int32"):
        native.masked_argmax(logits[0].numpy(), words[0].double().numpy())
    with pytest.raises(ValueError, match="C-contiguous"):
        native.masked_argmax(torch.zeros(64, 2)[:, 0].numpy(), words[0].numpy())
    assert native.masked_argmax(frozen, words[0].numpy()) is None  # nothing admitted


def test_the_kernels_read_only_contiguous_cpu_float32_tensors() -> None:
    """The kernels read a torch tensor in place (``data_ptr``, no numpy view) when
    it is a CPU float32 strided contiguous ``torch.Tensor`` that needs no grad and
    has no lazy negation: masking writes through to the tensor. Every other
    tensor is refused with ``LogitsError`` (a ``TypeError``) before anything is
    read or written (the callers then take the torch path); a lazily negated
    view written in place would read -inf back as +inf."""
    native = pytest.importorskip("grid_kernels")
    logits = torch.randn(2, 70)
    words = torch.zeros(2, 3, dtype=torch.int32)
    words[1, 0] = 1 << 3
    native.apply_token_bitmask(logits, words.numpy())
    assert logits[1, 3].isfinite() and logits.isinf().sum() == 2 * 70 - 1
    row = torch.tensor([1.0, 7.0, 7.0, 2.0])
    assert native.first_argmax(row) == 1
    assert native.first_argmax(torch.tensor([[1.0, float("nan")]])) == 1
    assert native.masked_argmax(row, torch.tensor([0b1101], dtype=torch.int32).numpy()) == 2
    assert native.first_argmax(torch.zeros(0)) is None

    class Sub(torch.Tensor):
        pass

    base = torch.randn(2, 70)
    others = {
        "float64": base.double(),
        "bfloat16": base.bfloat16(),
        "float16": base.half(),
        "strided": base.t(),
        "expanded": torch.zeros(1).expand(140),
        "grad": torch.randn(2, 70, requires_grad=True),
        "negated": torch._neg_view(base),
        "meta": torch.empty(2, 70, device="meta"),
        "sparse": base.to_sparse(),
        "subclass": base.as_subclass(Sub),
    }

    def dense(t: torch.Tensor) -> torch.Tensor:
        return t.detach().to_dense() if t.is_sparse else t.detach().clone()

    for name, tensor in others.items():
        before = dense(tensor) if name != "meta" else None
        with pytest.raises(native.LogitsError):
            native.apply_token_bitmask(tensor, words.numpy())
        with pytest.raises(native.LogitsError):
            native.first_argmax(tensor)
        with pytest.raises(native.LogitsError):
            native.masked_argmax(tensor, words[0].numpy())
        if before is not None:
            assert torch.equal(dense(tensor), before), name


def test_a_bad_mask_row_is_not_a_reason_to_take_the_torch_path() -> None:
    """Only logits the kernels do not read send the greedy pick to torch: a mask
    row that is not int32 raises, where torch would reinterpret its bytes as
    int32 words (a different mask, silently). Fails if ``masked_argmax`` falls
    back on any ``TypeError``."""
    pytest.importorskip("grid_kernels")
    from grid_serve.transformers import masked_argmax

    logits = torch.tensor([0.0, 5.0, 1.0, 2.0])
    assert masked_argmax(logits, array.array("i", [0b1101])) == 3
    with pytest.raises(TypeError, match="int32") as raised:
        masked_argmax(logits, array.array("d", [1.0]))
    assert type(raised.value) is TypeError  # the kernels' bitmask error, not LogitsError


def test_bitmask_tensor_refuses_masks_of_unequal_lengths() -> None:
    """A 1-word and a 3-word mask once passed (16 bytes split into two rows of
    two words): row 1 held the tail of the second mask, its ids shifted."""
    for masks in ([pack([0], 32), pack([65], 96)], [], [b"\x01\x00\x00"]):
        with pytest.raises(ValueError, match="packed masks"):
            bitmask_tensor(masks)
