"""Artifacts kept by content (``grid_core.memo``): the memo itself, and the LALR(1)
tables a grammar shares with every grammar of the same content.

A memo is only as good as its key: each test that reads an artifact from a memo
compares it with the artifact built afresh, so a key that misses something the
build reads fails here."""

from __future__ import annotations

import threading

import pytest

from grid_core.grammar import LALR_TABLES, Grammar, Rule, load_grammar
from grid_core.memo import ContentMemo

TEXT = """
start: item+
item: NAME "=" NUMBER -> assign
    | NAME -> bare
NAME: /[a-z]+/
NUMBER: /[0-9]+/
%ignore " "
"""


def test_a_memo_keeps_the_last_used_and_builds_once() -> None:
    memo: ContentMemo[list[str]] = ContentMemo(2)
    built: list[str] = []

    def build(key: str) -> list[str]:
        built.append(key)
        return [key]

    a = memo.get("a", lambda: build("a"))
    assert memo.get("a", lambda: build("a")) is a
    memo.get("b", lambda: build("b"))
    memo.get("a", lambda: build("a"))  # a is now the most recent
    memo.get("c", lambda: build("c"))  # evicts b, not a
    assert memo.get("a", lambda: build("a")) is a
    memo.get("b", lambda: build("b"))
    assert built == ["a", "b", "c", "b"] and len(memo) == 2
    assert (memo.hits, memo.misses) == (3, 4)
    with pytest.raises(ValueError, match="at least one"):
        ContentMemo(0)


def test_a_failed_build_is_not_kept() -> None:
    memo: ContentMemo[int] = ContentMemo(4)

    def fail() -> int:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        memo.get("k", fail)
    assert memo.get("k", lambda: 7) == 7 and len(memo) == 1


def test_threads_missing_one_key_get_one_artifact() -> None:
    memo: ContentMemo[object] = ContentMemo(4)
    got: list[object] = []
    barrier = threading.Barrier(4)

    def worker() -> None:
        barrier.wait()
        got.append(memo.get("k", object))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(x) for x in got}) == 1


def test_grammars_of_one_content_share_their_tables() -> None:
    """A renamed grammar and a projection keeping every rule share the tables of the
    original, and those are the tables built afresh; a grammar that differs only in a
    rule's alias (what the tables name rules by) gets its own."""
    g = load_grammar(TEXT, "memo-test")
    tables = g.lalr()
    assert g.renamed("other").lalr() is tables
    assert g.project(lambda _: True, "kept").lalr() is tables
    fresh = g._build_lalr()
    assert (fresh.fingerprint, fresh.rule_names) == (tables.fingerprint, tables.rule_names)
    assert g.renamed("other").name == "other" and g.renamed("memo-test") is g
    assert g.renamed("other").fingerprint == g.fingerprint
    realiased = Grammar(
        g.name,
        g.terminals,
        tuple(Rule(r.origin, r.expansion, "other" if r.alias else None) for r in g.rules),
        g.start,
    )
    assert realiased.fingerprint == g.fingerprint  # aliases are not in the fingerprint
    other = realiased.lalr()
    assert other is not tables and other.rule_names != tables.rule_names
    assert other.rule_names == realiased._build_lalr().rule_names
    assert len(LALR_TABLES) >= 2
