"""Packed token bitmasks on torch tensors: build, unpack, apply (the torch adapter).

Reference: DESIGN.md section 4 (masks are hard -inf, never an approximation)
and grid-core's packing (:meth:`grid_core.guide.Engine.pack`): a mask over a
vocabulary of ``n`` ids is ``ceil(n / 32)`` int32 *words*; bit ``i % 32`` of
word ``i // 32`` set means token ``i`` is admitted. Ids at or beyond
``32 * words`` (the padding columns of a logits row wider than the
vocabulary) are never admitted.

Nouns: a *bitmask* is a ``[batch, words]`` int32 tensor; an *allowed set* is
the ``[batch, width]`` bool tensor it unpacks to. Unpacking is one shift and
one ``and`` over a ``[batch, words, 32]`` view, on whatever device the bitmask
lives (the logits' device in practice): no Python loop over ids.

Only this module and its siblings for other frameworks import torch; grid-core
never does (STYLE.md: heavy frameworks are extras).
"""

from __future__ import annotations

import array
from collections.abc import Sequence

import torch

from grid_core import kernels

__all__ = ["apply_bitmask_", "bitmask_tensor", "unpack_bitmask"]

_BITS = 32


def bitmask_tensor(
    masks: Sequence[array.array[int] | bytes], device: torch.device | str | None = None
) -> torch.Tensor:
    """Stack packed masks (``array('i')`` or their bytes, all one length) into ``[batch, words]``.

    Words are read in the host's byte order, the order ``Engine.pack``'s array
    holds them in. No masks, masks of unequal lengths or a length that is no
    whole number of words are a ``ValueError``.
    """
    rows = [m.tobytes() if isinstance(m, array.array) else bytes(m) for m in masks]
    lengths = sorted({len(r) for r in rows})
    if len(lengths) != 1 or lengths[0] % 4:
        raise ValueError(f"packed masks of byte lengths {lengths}: give one length, whole words")
    words = torch.frombuffer(bytearray(b"".join(rows)), dtype=torch.int32).view(len(rows), -1)
    return words.to(device) if device is not None else words


def unpack_bitmask(words: torch.Tensor, width: int) -> torch.Tensor:
    """The allowed set ``[..., width]`` (bool) of a bitmask ``[..., words]`` (int32).

    Columns past ``32 * words`` are False (blocked).
    """
    shifts = torch.arange(_BITS, dtype=torch.int32, device=words.device)
    bits = (words.unsqueeze(-1) >> shifts).bitwise_and_(1).bool()
    allowed = bits.flatten(-2)
    have = allowed.shape[-1]
    if have >= width:
        return allowed[..., :width]
    pad = torch.zeros((*allowed.shape[:-1], width - have), dtype=torch.bool, device=words.device)
    return torch.cat([allowed, pad], dim=-1)


def apply_bitmask_(logits: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
    """Set every logit whose token the bitmask does not admit to -inf, in place.

    ``logits`` is ``[batch, width]`` (or ``[width]`` with ``words`` ``[n_words]``);
    returns ``logits``. Contiguous CPU ``float32`` logits with a CPU bitmask are
    masked by the kernels in one pass (``grid_kernels.apply_token_bitmask``,
    when installed); anything else by the unpack above, on the logits' device.
    Both block exactly the same columns and leave admitted logits untouched,
    except in a row where no admitted logit is finite (another processor put
    -inf on every id the mask admits): there each admitted logit becomes 0.0,
    so the choice is uniform over the mask (as mode 1 chooses when every
    admitted logit is -inf) and a sampler's softmax stays defined. A row with
    a finite admitted logit is left as it is, NaN or +inf on another admitted
    id included (a model's fault: greedy picks that admitted id, a sampler
    raises; mode 1 reads a non-finite logit as -inf). The mask stays hard
    either way.
    """
    native = kernels.load()
    if (
        native is not None
        and words.device.type == "cpu"
        and words.is_contiguous()
        and words.dtype == torch.int32
    ):
        try:  # the kernels read CPU float32 tensors in place (no torch op)
            native.apply_token_bitmask(logits, words.numpy())
            return logits
        except native.LogitsError:  # logits they do not read: another device, dtype or layout
            pass
    allowed = unpack_bitmask(words.to(logits.device, non_blocking=True), logits.shape[-1])
    logits.masked_fill_(allowed.logical_not(), float("-inf"))
    # No host sync: a row with no finite logit left is flattened on the device.
    none_finite = logits.isfinite().any(dim=-1, keepdim=True).logical_not_()
    return logits.masked_fill_(allowed.logical_and_(none_finite), 0.0)
