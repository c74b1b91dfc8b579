"""The fast path against the specification, mask for mask, on real vocabularies.

For each vocabulary, prefixes are drawn from a seeded corpus of statements of
the analyst projection of ``grammars/crud.lark`` with table and column
lexicons, at every kind of position: statement head, mid-keyword, mid-
identifier at lexicon positions, inside strings and comments, right after a
complete statement. The fast path's mask (CI + CD + EOS, alias classes
expanded) must equal ``grid_spec.Language.mask`` id for id.

Each backend is checked against the spec on its own, with the spec's mask
computed once per prefix: ``python`` is grid-core's Python path alone (the
kernels switched off for that engine: Python walks, Python cache), ``native``
the guide users get (``Engine.guide()``: the kernels' session, fed the prefix
one single-byte token at a time, its ``mask_ids``), and ``engine`` what
``Engine.compute_mask`` gives with the kernels loaded (its cold walks native).

The default suite runs 8 prefixes per vocabulary on the whole vocabulary (all
three backends) and 100 per vocabulary on a seeded sample of 1,500 ids each
(``engine`` and ``native``; every kind of position still, the spec restricted
exactly to the sample); ``nox -s differential`` runs 500 per vocabulary on the
whole vocabulary (``-m slow``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest
from toy import ANALYST

from grid_core import vocab as vocabularies
from grid_core.guide import Engine
from grid_core.kernels import KernelGuide
from grid_core.vocab import Vocabulary
from grid_spec import Language

LEXICON = {
    "TABLE_NAME": [b"employees", b"employees_public", b"orders"],
    "COLUMN_NAME": [b"id", b"name", b"salary", b"order_total", b"set_id"],
}
STATEMENTS = [
    b"select * from employees;",
    b"select id, name from employees where salary >= 1000 and name = 'O''Brien';",
    b"select order_total from orders where id <> 3 -- the third\n;",
    b"select*from employees_public where set_id=1;",
    b"select name from employees where name = 'select * from';",
    b"select\tid\nfrom orders\twhere id<=10.5;",
]


def generated_statements(n: int, seed: int) -> list[bytes]:
    """Seeded statements of the analyst language over the lexicons, varied spacing."""
    rng = random.Random(seed)
    tables, columns = LEXICON["TABLE_NAME"], LEXICON["COLUMN_NAME"]
    out = []
    for _ in range(n):
        cols = b"*" if rng.random() < 0.3 else b", ".join(rng.sample(columns, rng.randint(1, 3)))
        s = b"select " + cols + b" from " + rng.choice(tables)
        for i in range(rng.choice([0, 0, 1, 2])):
            value = rng.choice([b"1", b"42", b"3.25", b"'x'", b"'it''s'", b"''"])
            op = rng.choice([b"=", b"<", b">=", b"<>", b"<="])
            s += (b" where " if i == 0 else b" and ") + rng.choice(columns) + op + value
        s += rng.choice([b";", b" ;", b"\n;", b" -- done\n;"])
        out.append(s)
    return out


VOCABS: dict[str, Callable[[], Vocabulary]] = {
    "cl100k": vocabularies.cl100k,
    "qwen": vocabularies.qwen,
    "llama3": vocabularies.llama3,
    "smollm2": vocabularies.smollm2,
}
SPEC = Language(ANALYST.to_lark(), LEXICON)


def prefixes(n: int, seed: int) -> list[bytes]:
    """``n`` distinct viable prefixes, the boundary cases first, then seeded random cuts."""
    fixed = [
        b"",
        b"sel",
        b"select * from emplo",
        b"select * from employees",
        b"select * from employees;",
        b"select name from employees where name = 'ab",
    ]
    rng = random.Random(seed)
    out = list(dict.fromkeys(fixed))
    corpus = STATEMENTS + generated_statements(120, seed)
    while len(out) < n:
        s = rng.choice(corpus)
        w = s[: rng.randint(0, len(s))]
        if w not in out and SPEC.is_viable_prefix(w):
            out.append(w)
    return out[:n]


def fast_mask(engine: Engine, w: bytes) -> set[int]:
    config = engine.lexer.advance(engine.lexer.initial, w)
    assert config is not None and engine.lexer.is_viable(config), w
    result = engine.compute_mask(config)
    ids = set(result.ci_ids) | set(result.cd_ids)
    return ids | ({engine.vocab.eos_id} if result.eos else set())


def native_mask(engine: Engine, w: bytes) -> set[int]:
    """The native guide's mask after ``w``, fed as single-byte tokens (the
    configuration depends on the bytes only, not on how they were tokenized)."""
    guide = engine.guide()
    assert isinstance(guide, KernelGuide)
    trie = engine.trie
    for b in w:
        guide.accept_token(trie.ids_at(trie.find(bytes([b])))[0])
    ids = set(guide.mask_ids())
    eos = set(engine.vocab.eos_ids)
    if ids & eos:  # the guide admits every EOS id where EOS is legal; the spec one
        assert eos <= ids
        ids = ids - eos | {engine.vocab.eos_id}
    return ids


#: How each backend computes a prefix's mask (see the module header).
BACKENDS: dict[str, Callable[[Engine, bytes], set[int]]] = {
    "python": fast_mask,
    "engine": fast_mask,
    "native": native_mask,
}


def mismatches(
    name: str, n: int, sample: tuple[int, int] | None = None, backends: tuple[str, ...] = ()
) -> list[str]:
    """Prefixes where a backend's mask differs from the spec's (``backends``: all
    three by default).

    ``sample = (admitted, uniform)`` compares each prefix on a seeded sample of the
    vocabulary instead of all of it: up to ``admitted`` ids of the fast mask (where
    a wrong admission shows) and ``uniform`` ids drawn from the whole vocabulary
    (where a wrong refusal shows), the sample drawn afresh per prefix. The spec
    then runs on a view of the vocabulary whose other spellings are empty (which
    its mask skips), so it computes exactly its mask restricted to the sample.
    """
    voc = VOCABS[name]()
    engines = {b: engine_for(name, b) for b in backends or tuple(BACKENDS)}
    rng = random.Random(f"differential-{name}")
    out = []
    for w in prefixes(n, seed=len(name)):
        masks = {b: BACKENDS[b](e, w) for b, e in engines.items()}
        spellings: Sequence[bytes] = voc.token_bytes
        if sample is not None:
            admitted, uniform = sample
            union = set().union(*masks.values())
            ids = sorted(union - {voc.eos_id})
            chosen = set(rng.sample(ids, min(admitted, len(ids))))
            chosen |= set(rng.sample(range(voc.n_vocab), uniform)) | {voc.eos_id}
            spellings = [b if i in chosen else b"" for i, b in enumerate(voc.token_bytes)]
            masks = {b: m & chosen for b, m in masks.items()}
        spec = SPEC.mask(spellings, voc.special_ids, voc.eos_id, w)
        for backend, fast in masks.items():
            if fast != spec:
                diff = sorted(fast ^ spec)[:5]
                out.append(f"{backend} {w!r}: {[(i, voc.token_bytes[i], i in fast) for i in diff]}")
    return out


def engine_for(name: str, backend: str) -> Engine:
    """A fresh engine over the vocabulary; ``python``'s without the kernels."""
    engine = Engine(ANALYST, VOCABS[name](), LEXICON)
    if backend == "python":
        engine.kernel = None
    elif engine.kernel is None:
        pytest.skip("grid-kernels is not installed: the native and engine backends need it")
    return engine


@pytest.mark.parametrize("name", sorted(VOCABS))
def test_fast_path_equals_spec(name: str) -> None:
    """Eight prefixes, each on the whole vocabulary."""
    assert mismatches(name, 8) == []


@pytest.mark.parametrize("name", sorted(VOCABS))
def test_fast_path_equals_spec_on_100_prefixes(name: str) -> None:
    """A hundred prefixes, each on a sample of 1,500 ids (see :func:`mismatches`): the
    spec's brute force over a whole real vocabulary costs about half a second to a
    second per prefix here, which 400 prefixes cannot afford in the default suite
    (nor can the Python path's walks of a whole vocabulary at every prefix)."""
    assert mismatches(name, 100, sample=(500, 1000), backends=("engine", "native")) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(VOCABS))
def test_fast_path_equals_spec_500_prefixes(name: str) -> None:
    assert mismatches(name, 500) == []
