"""Cross-package differential: grid-core's masks equal grid-spec's on the sqlite dialect.

Prefixes are cut at seeded random byte offsets of Spider dev gold statements
(all of which are sentences of the dialect, so every prefix is viable): mid-
keyword, mid-identifier, inside string literals, after qualifiers, right after a
complete statement. Real vocabularies; the spec's mask is brute force over the
whole vocabulary (seconds per prefix), so the default suite checks one prefix
per vocabulary and ``nox -s differential`` runs the long version.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from grid_core import vocab as vocabularies
from grid_core.grammar import Grammar, load_grammar
from grid_core.guide import Engine
from grid_core.vocab import Vocabulary
from grid_spec import Language
from grid_sql.dialects import get_dialect

SPIDER = Path(__file__).resolve().parents[3] / "shared" / "data" / "spider"
VOCABS: dict[str, Callable[[], Vocabulary]] = {
    "cl100k": vocabularies.cl100k,
    "qwen": vocabularies.qwen,
    "llama3": vocabularies.llama3,
    "smollm2": vocabularies.smollm2,
}
GRAMMAR: Grammar = load_grammar(get_dialect("sqlite").grammar_text, "sqlite")
SPEC = Language(GRAMMAR.to_lark())


def statements() -> list[bytes]:
    """Spider's dev gold statements (``../shared/data/spider``); where that folder is
    absent (a user's clone), the accept lines of the dialect's own corpus, which the
    project ships (and SQLite compiles, ``test_dialect_sqlite.py``)."""
    gold = SPIDER / "dev_gold.sql"
    if not gold.is_file():
        corpus = get_dialect("sqlite").corpus()
        return [entry.text for entry in corpus if entry.kind == "accept"]
    out = []
    for line in gold.read_text().splitlines():
        query = line.split("\t")[0].strip()
        out.append((query if query.endswith(";") else query + ";").encode())
    return out


def prefixes(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    corpus = statements()
    out: list[bytes] = []
    while len(out) < n:
        s = rng.choice(corpus)
        w = s[: rng.randint(0, len(s))]
        if w not in out:
            out.append(w)
    return out


def mismatches(name: str, n: int) -> list[str]:
    vocab = VOCABS[name]()
    engine = Engine(GRAMMAR, vocab)
    bad = []
    for w in prefixes(n, seed=sum(map(ord, name))):
        config = engine.lexer.advance(engine.lexer.initial, w)
        assert config is not None and engine.lexer.is_viable(config), w
        result = engine.compute_mask(config)
        fast = set(result.ci_ids) | set(result.cd_ids) | ({vocab.eos_id} if result.eos else set())
        spec = SPEC.mask(vocab.token_bytes, vocab.special_ids, vocab.eos_id, w)
        if fast != spec:
            bad.append(f"{w!r}: {sorted(fast ^ spec)[:5]}")
    return bad


@pytest.mark.parametrize("name", sorted(VOCABS))
def test_sqlite_masks_equal_spec(name: str) -> None:
    assert mismatches(name, 1) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(VOCABS))
def test_sqlite_masks_equal_spec_long(name: str) -> None:
    assert mismatches(name, 60) == []
