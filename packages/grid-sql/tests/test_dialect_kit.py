"""The shared dialect test kit: what every dialect, built-in or plug-in, must pass.

Parametrised over ``available_dialects()``, so a dialect registered through the
``grid.dialects`` entry-point group is checked by simply being installed. The
checks:

1. the grammar text builds with grid-core's own LALR(1) construction (which
   refuses shift/reduce and reduce/reduce conflicts alike) and its union DFA;
2. the corpus: every accept line is in L, every reject line is not a viable
   prefix, every ``~`` line is a viable prefix but not in L (grid-spec);
3. differential: on prefixes cut from the accept corpus, the fast path's masks
   equal grid-spec's, id for id (a toy byte-complete vocabulary in the default
   suite; a real one in the slow run).
"""

from __future__ import annotations

import random
from functools import cache

import pytest

from grid_core.grammar import Grammar, load_grammar
from grid_core.guide import Engine
from grid_core.vocab import Vocabulary, cl100k
from grid_spec import Language
from grid_sql.dialect import Dialect
from grid_sql.dialects import available_dialects, get_dialect

DIALECTS = available_dialects()
WORDS = [b"SELECT", b" FROM", b" WHERE", b" *", b"')", b"1;", b" AND", b" t", b"(", b" ("]
BYTES = Vocabulary.from_spellings(
    "bytes+sql",
    [bytes([i]) for i in range(256)] + WORDS + [b""],
    {256 + len(WORDS)},
    (256 + len(WORDS),),
)


@cache
def compiled(name: str) -> tuple[Dialect, Grammar, Language]:
    dialect = get_dialect(name)
    grammar = load_grammar(dialect.grammar_text, name)
    return dialect, grammar, Language(grammar.to_lark())


@pytest.mark.parametrize("name", DIALECTS)
def test_builds_with_grid_core_lalr_and_dfa(name: str) -> None:
    _, grammar, _ = compiled(name)
    tables = grammar.lalr()
    tables.check_invariants()
    engine = Engine(grammar, BYTES, cache=False)
    engine.dfa.check_invariants()


@pytest.mark.parametrize("name", DIALECTS)
def test_corpus_verdicts(name: str) -> None:
    dialect, _, spec = compiled(name)
    wrong = []
    for entry in dialect.corpus():
        if entry.kind == "accept":
            ok = spec.in_language(entry.text)
        elif entry.kind == "reject":
            ok = not spec.is_viable_prefix(entry.text)
        else:
            ok = spec.is_viable_prefix(entry.text) and not spec.in_language(entry.text)
        if not ok:
            wrong.append(f"line {entry.line} ({entry.kind}): {entry.text!r}")
    assert wrong == []


def _prefixes(dialect: Dialect, n: int, seed: int) -> list[bytes]:
    accepts = [e.text for e in dialect.corpus() if e.kind == "accept"]
    rng = random.Random(seed)
    return [s[: rng.randint(0, len(s))] for s in rng.sample(accepts, min(n, len(accepts)))]


def _mismatches(name: str, vocab: Vocabulary, n: int) -> list[bytes]:
    dialect, grammar, spec = compiled(name)
    engine = Engine(grammar, vocab)
    bad = []
    for w in _prefixes(dialect, n, seed=len(name)):
        config = engine.lexer.advance(engine.lexer.initial, w)
        assert config is not None, w
        r = engine.compute_mask(config)
        fast = set(r.ci_ids) | set(r.cd_ids) | ({vocab.eos_id} if r.eos else set())
        if fast != spec.mask(vocab.token_bytes, vocab.special_ids, vocab.eos_id, w):
            bad.append(w)
    return bad


@pytest.mark.parametrize("name", DIALECTS)
def test_masks_equal_spec_on_corpus_prefixes(name: str) -> None:
    assert _mismatches(name, BYTES, 12) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", DIALECTS)
def test_masks_equal_spec_on_corpus_prefixes_real_vocabulary(name: str) -> None:
    assert _mismatches(name, cl100k(), 30) == []
