"""Property predicates over masks, called by the other packages' tests.

Each predicate takes the specification's :class:`~grid_spec.spec.Language` and
what an implementation produced, and returns a list of human-readable
violations (empty when the property holds), so a failing test can print what
went wrong instead of a bare ``False``.

* soundness: every admitted token keeps the output in Prefix(L), and EOS is
  admitted only at a sentence of L;
* completeness: every token the specification admits is admitted;
* EOS iff complete: EOS is in the mask exactly when w is in L;
* non-empty: the mask is never empty at a viable prefix;
* stop in L: a finished generation is a sentence of L.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from grid_spec.spec import Language


def soundness(
    lang: Language, vocab: Sequence[bytes], eos_id: int, w: bytes, admitted: Iterable[int]
) -> list[str]:
    """Violations of: every admitted token t has w.bytes(t) in Prefix(L)."""
    bad = []
    for t in admitted:
        if t == eos_id:
            if not lang.in_language(w):
                bad.append(f"EOS admitted after {w!r}, which is not in L")
        elif not lang.is_viable_prefix(w + vocab[t]):
            bad.append(f"token {t} ({vocab[t]!r}) admitted after {w!r} leaves Prefix(L)")
    return bad


def completeness(spec_mask: Collection[int], admitted: Collection[int]) -> list[str]:
    """Violations of: every token the specification admits is admitted."""
    missing = sorted(set(spec_mask) - set(admitted))
    return [f"token {t} admitted by the specification is blocked" for t in missing]


def eos_iff_complete(lang: Language, eos_id: int, w: bytes, admitted: Collection[int]) -> list[str]:
    """Violations of: EOS is admitted exactly when w is in L."""
    if (eos_id in admitted) == lang.in_language(w):
        return []
    state = "admitted" if eos_id in admitted else "blocked"
    return [f"EOS {state} after {w!r}, but in_language is {lang.in_language(w)}"]


def non_empty(lang: Language, w: bytes, admitted: Collection[int]) -> list[str]:
    """Violations of: the mask is non-empty at every viable prefix."""
    if admitted or not lang.is_viable_prefix(w):
        return []
    return [f"empty mask at the viable prefix {w!r}"]


def stop_in_language(lang: Language, output: bytes) -> list[str]:
    """Violations of: a finished generation is a sentence of L."""
    return [] if lang.in_language(output) else [f"finished output {output!r} is not in L"]


def mask_properties(
    lang: Language,
    vocab: Sequence[bytes],
    specials: Collection[int],
    eos_id: int,
    w: bytes,
    admitted: Collection[int],
) -> list[str]:
    """All per-step properties at once, against a freshly computed specification mask."""
    spec_mask = lang.mask(vocab, specials, eos_id, w)
    return (
        (
            [f"mask differs from the specification on {sorted(set(admitted) ^ spec_mask)[:10]}"]
            if set(admitted) != spec_mask
            else []
        )
        + eos_iff_complete(lang, eos_id, w, admitted)
        + non_empty(lang, w, admitted)
    )
