"""Write the golden fixture the crate's Rust tests check without Python.

``fixtures/analyst_toy.txt`` holds grid-core's artifacts for the analyst
projection of the CRUD grammar with its lexicon and the byte-complete toy
vocabulary (``packages/grid-core/tests/toy.py``), and, for configurations
reached by seeded random replays, what grid-core's Python path computes: the
allowed set, the root walk (CI nodes, CD entries), the whole mask (ids, EOS,
CD counts) and one lexer advance. ``tests/fixture.rs`` replays them against
the kernels. Regenerate after a change to grid-core's semantics or layouts:

    cd /work/main && uv run python packages/grid-kernels/tests/make_fixture.py

Format: one record per line, ``key token token ...``; ints in decimal, bitsets
in hex, bytes in hex (``-`` when empty). Each ``config`` line opens a block
closed by ``end``.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "grid-core" / "tests"))

from toy import ANALYST, LEXICON, TOY  # noqa: E402

from grid_core.guide import Engine, GridGuide  # noqa: E402
from grid_core.walk import walk_from  # noqa: E402

SEED, REPLAYS, STEPS, MAX_REMAINDER = 7, 24, 24, 6
# Whole statements, written with the longest admitted token at each step: they
# reach string literals, comments, whitespace runs and EOS.
SCRIPTS = (
    b"select * from employees;",
    b"select sal, yer from orders where sal <> 'it''s' and yer >= 1.5;",
    b"select  yer\tfrom employees_public -- note\n where sal=1;",
)


def hexb(data: bytes) -> str:
    return data.hex() or "-"


def ints(xs: Iterable[int]) -> str:
    return " ".join(str(x) for x in xs)


def edges(kids: Mapping[int, int]) -> str:
    return ",".join(f"{b}:{c}" for b, c in sorted(kids.items())) or "-"


def pick(rng: random.Random, ids: list[int]) -> int:
    """A multi-byte token half the time, else a printable byte: replays that
    make progress through statements, with a comment now and then."""
    longer = [i for i in ids if len(TOY.token_bytes[i]) > 1]
    if longer and rng.random() < 0.5:
        return rng.choice(longer)
    printable = [i for i in ids if all(0x20 <= b < 0x7F for b in TOY.token_bytes[i])]
    return rng.choice(printable or ids)


def main() -> None:
    engine = Engine(ANALYST, TOY, LEXICON, cache=False)
    tables, dfa, lexicon, trie = engine.tables, engine.dfa, engine.lexicon, engine.trie
    lines = [
        "grid-kernels fixture v1",
        f"n_terminals {tables.n_terminals}",
        f"n_nonterminals {tables.n_nonterminals}",
        f"dfa_states {dfa.n_states}",
        "dfa_trans_sparse " + " ".join(f"{i}:{q}" for i, q in enumerate(dfa.trans) if q >= 0),
        "dfa_accept " + " ".join(f"{x:x}" for x in dfa.accept),
        "dfa_live " + " ".join(f"{x:x}" for x in dfa.live),
        "action " + ints(tables.action),
        "goto " + ints(tables.goto),
        "rule_lhs " + ints(tables.rule_lhs),
        "rule_len " + ints(tables.rule_len),
        "lexicon_children " + " ".join(edges(kids) for kids in lexicon.children),
        "lexicon_prefix_cats " + " ".join(f"{x:x}" for x in lexicon.prefix_cats),
        "lexicon_word_cats " + " ".join(f"{x:x}" for x in lexicon.word_cats),
        f"lexicon_categories {lexicon.categories:x}",
        "pick_order " + ints(engine.grammar.pick_order),
        f"ignored {engine.scanner.ignored:x}",
        "trie_edge " + ints(trie.edge),
        "trie_token " + ints(trie.token),
        "trie_size " + ints(trie.size),
        "trie_alias_offset " + ints(trie.alias_offset),
        "trie_alias_ids " + ints(trie.alias_ids),
        f"n_vocab {TOY.n_vocab}",
        "eos_ids " + ints(TOY.eos_ids),
    ]
    rng = random.Random(SEED)
    seen: set[tuple[tuple[int, ...], bytes]] = set()

    def record(guide: GridGuide, choice: int) -> None:
        """One configuration block, unless this configuration was recorded before."""
        config = guide.config
        states = tuple(config.node.states())
        if (states, config.remainder) in seen:
            return
        seen.add((states, config.remainder))
        allowed = engine.parser.allowed(config.node)
        ci, cd = walk_from(engine.scanner, trie, 0, config.remainder, allowed, False)
        mask = engine.compute_mask(config)
        data = TOY.token_bytes[choice]
        after = engine.lexer.advance(config, data)
        assert after is not None
        lines.extend(
            [
                f"config {','.join(map(str, states))} {hexb(config.remainder)}",
                f"allowed {allowed:x}",
                "walk_ci " + ints(ci),
                "walk_cd " + " ".join(f"{n}:{t}:{hexb(tail)}" for n, t, tail in cd),
                "mask_ci " + ints(mask.ci_ids),
                "mask_cd " + ints(mask.cd_ids),
                f"mask_meta {int(mask.eos)} {mask.cd_entries} {mask.cd_classes}",
                f"advance {hexb(data)} {','.join(map(str, after.node.states()))} "
                f"{hexb(after.remainder)}",
                "end",
            ]
        )

    for script in SCRIPTS:
        guide = GridGuide(engine)
        rest = script
        while rest:
            ids = guide.mask_ids()
            choice = max(
                (i for i in ids if rest.startswith(TOY.token_bytes[i]) and TOY.token_bytes[i]),
                key=lambda i: len(TOY.token_bytes[i]),
            )
            record(guide, choice)
            guide.accept_token(choice)
            rest = rest[len(TOY.token_bytes[choice]) :]
        assert guide.is_complete(), script
        record(guide, TOY.eos_ids[0])
    for _ in range(REPLAYS):
        guide = GridGuide(engine)
        for _ in range(STEPS):
            if len(guide.config.remainder) > MAX_REMAINDER:
                break  # long identifiers and comments add size, not coverage
            ids = [i for i in guide.mask_ids() if i not in TOY.eos_ids]
            choice = pick(rng, ids)
            record(guide, choice)
            guide.accept_token(choice)
    out = HERE / "fixtures" / "analyst_toy.txt"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out} ({len(seen)} configurations)")


if __name__ == "__main__":
    main()
