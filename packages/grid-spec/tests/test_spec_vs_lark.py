"""grid-spec against lark alone, on a SQL corpus and its byte mutations.

Agreement is required except at one lexing-semantics corner, which is explained
and pinned by its own test: lark's lexers match a keyword at the start of an
identifier-shaped run (``fromorders`` -> ``from`` ``orders``) where GRID's union
maximal munch reads one identifier. Every disagreement must be of that kind,
and in that direction.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark_oracle import LarkOracle
from sql_corpus import GRAMMARS, corpus, mutations

from grid_spec import Language

GRAMMAR = (GRAMMARS / "crud.lark").read_text()
SPEC = Language(GRAMMAR)
ORACLE = LarkOracle(GRAMMAR)
CORPUS = corpus()
MUTATIONS = mutations(CORPUS, 3000)


def latin1(b: bytes) -> str:
    return b.decode("latin-1")


def test_corpus_size_and_membership() -> None:
    assert len(CORPUS) >= 300
    assert [s for s in CORPUS if not SPEC.in_language(s)] == []
    assert [s for s in CORPUS if not ORACLE.in_language(latin1(s))] == []


def test_in_language_agrees_with_lark_on_mutations() -> None:
    disagreements = [m for m in MUTATIONS if SPEC.in_language(m) != ORACLE.in_language(latin1(m))]
    unexplained = [m for m in disagreements if not ORACLE.glued_keyword(latin1(m))]
    wrong_direction = [m for m in disagreements if SPEC.in_language(m)]
    assert unexplained == []
    assert wrong_direction == []
    # The mutations must exercise both verdicts, or the test could not fail.
    accepted = sum(SPEC.in_language(m) for m in MUTATIONS)
    assert 100 < accepted < len(MUTATIONS) - 100


@pytest.mark.parametrize(
    ("sentence", "spec_verdict"),
    [
        pytest.param(b"deletefrom orders;", False, id="verb-glued-to-verb"),
        pytest.param(b"select a fromorders;", False, id="keyword-glued-to-table"),
        pytest.param(b"select a from orders whereid = 1;", False, id="keyword-glued-to-column"),
        pytest.param(b"select a from fromage;", True, id="identifier-with-keyword-prefix"),
    ],
)
def test_glued_keyword_corner(sentence: bytes, spec_verdict: bool) -> None:
    """Maximal munch reads ``fromorders`` as one identifier; lark splits it."""
    assert SPEC.in_language(sentence) is spec_verdict
    assert ORACLE.in_language(latin1(sentence))


def test_every_prefix_of_every_sentence_is_viable() -> None:
    bad = [s[:i] for s in CORPUS for i in range(len(s) + 1) if not SPEC.is_viable_prefix(s[:i])]
    assert bad == []


def _prefix_disagreements(sentences: list[bytes], hints: list[bytes]) -> list[tuple[bytes, bool]]:
    out = []
    for s, hint in zip(sentences, hints, strict=True):
        for i in range(len(s) + 1):
            w = s[:i]
            rest = latin1(hint[i:]) if hint[:i] == w else None
            witness = ORACLE.witness(latin1(w), rest)
            spec = SPEC.is_viable_prefix(w)
            if spec != (witness is not None) and not (
                witness is not None and ORACLE.glued_keyword(witness) and not spec
            ):
                out.append((w, spec))
    return out


def test_prefixes_agree_with_independent_check_on_corpus() -> None:
    assert _prefix_disagreements(CORPUS, CORPUS) == []


def test_prefixes_agree_with_independent_check_on_mutations_sample() -> None:
    sample = MUTATIONS[:300]
    assert _prefix_disagreements(sample, sample) == []


@pytest.mark.slow
def test_prefixes_agree_with_independent_check_on_all_mutations() -> None:
    assert _prefix_disagreements(MUTATIONS, MUTATIONS) == []


@settings(
    derandomize=True,
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.binary(max_size=40), st.lists(st.binary(min_size=1, max_size=4), max_size=6))
def test_arbitrary_bytes_never_crash(w: bytes, vocab: list[bytes]) -> None:
    viable = SPEC.is_viable_prefix(w)
    complete = SPEC.in_language(w)
    assert viable or not complete  # L is inside Prefix(L)
    mask = SPEC.mask([*vocab, b""], {len(vocab)}, len(vocab), w)
    assert (len(vocab) in mask) is complete
    for t in mask - {len(vocab)}:
        assert SPEC.is_viable_prefix(w + vocab[t])
