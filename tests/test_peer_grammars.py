"""The translation of GRID's grammar IR for the peer engines (``bench/peer_grammars.py``).

The peers themselves (llguidance, xgrammar) live in the ``peers`` dependency group
and are exercised by ``nox -s peers``; these tests need neither: they check that
each translated terminal denotes the same lexemes as GRID's byte pattern, that
the folding of optional symbols regenerates exactly the IR's alternatives, and
that the translations committed under ``bench/grammars/`` are current.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import peer_grammars as pg  # noqa: E402

LEXEMES = [
    "select", "SELECT", "SeLeCt", "\u017felect", "selectx", "from", "name", "_x1$", "T1.",
    "T1", "1abc", "1e3", "2.5E-3", ".5", "1.", "0x1F", "0x", "?", "?12", ":name", "@p", "$v",
    '"na\u00efve caf\u00e9"', '"a""b"', '""', '"x', "`x`", "`a``b`", "[a b]", "[\u00e9]", "[]",
    "'it''s'", "'na\u00efve'", "''", "'\u20ac\U0001f600'", "x'CAFE'", "X''", "x'CAF'",
    "-- comment", "-- \u00e9t\u00e9", "--", "/* c */", "/* a * b **/", "/**/", "/* open",
    " ", " \t\n\r\x0c", "<=", "<>", "<<", "||", "|", "*", "count(", "substr(", "SUBSTR(",
    "substr (", "unsigned  big int", "double\tprecision", "binary", "NoCase", "\u00e9",
    "\x7f", "a\x00b", "'\x00'", "'\u00e9",
]  # fmt: skip


def python_regex(node: pg.Node) -> str:
    """The regex tree in Python syntax, to run it (a third printer, for the test only)."""
    if isinstance(node, pg.Chars):
        if node.negated:
            return "[^\\x00-\\x7f]"
        return "[" + "".join(f"\\x{lo:02x}-\\x{hi:02x}" for lo, hi in node.ranges) + "]"
    if isinstance(node, pg.Seq):
        return "".join(f"(?:{python_regex(n)})" for n in node.items)
    if isinstance(node, pg.Alt):
        return "|".join(f"(?:{python_regex(n)})" for n in node.options)
    high = "" if node.high is None else str(node.high)
    return f"(?:{python_regex(node.item)}){{{node.low},{high}}}"


@pytest.fixture(scope="module")
def measured() -> dict[str, tuple[object, dict[str, list[bytes]], str]]:
    return pg.measured_grammars()  # type: ignore[return-value]


def test_terminals_denote_the_same_lexemes(measured: dict) -> None:
    """Fails if a translated terminal accepts a lexeme GRID's byte pattern rejects or the
    reverse (case folding beyond ASCII, a lost UTF-8 class, a misprinted escape)."""
    grammar, _, _ = measured["free"]
    translation = pg.translate(grammar)
    patterns = {t.name: t.pattern for t in grammar.terminals}
    assert set(translation.terminals) <= set(patterns)
    differ = []
    for name, tree in translation.terminals.items():
        ours = re.compile(python_regex(tree), re.DOTALL)
        grid = re.compile(patterns[name], re.DOTALL)
        for lexeme in LEXEMES:
            as_bytes = lexeme.encode("utf-8").decode("latin-1")
            if bool(grid.fullmatch(as_bytes)) != bool(ours.fullmatch(lexeme)):
                differ.append((name, lexeme))
    assert not differ


def test_lexicon_categories_are_their_words(measured: dict) -> None:
    """Fails if a lexicon category's translation admits a word outside its list (a table
    the role was not granted) or misses one of its words."""
    grammar, words, _ = measured["lexicon"]
    translation = pg.translate(grammar, words)
    tables = re.compile(python_regex(translation.terminals["TABLE_NAME"]))
    assert all(tables.fullmatch(w.decode()) for w in words["TABLE_NAME"])
    assert b"salaries" not in words["TABLE_NAME"]
    assert not tables.fullmatch("salaries")
    assert not tables.fullmatch("employee")


def test_stray_bytes_are_refused() -> None:
    """Fails if a byte above 0x7F outside a UTF-8 multibyte sequence, or a negated class
    (one byte, not one character), were translated instead of refused."""
    with pytest.raises(pg.TranslationError, match="above 0x7F"):
        pg.parse_pattern("LATIN1", "[\x80-\xff]+")
    with pytest.raises(pg.TranslationError, match="negated"):
        pg.parse_pattern("NOT_A", "[^a]")
    with pytest.raises(pg.TranslationError, match="negated"):
        pg.parse_pattern("NOT_AB", "[^ab]")
    multibyte = pg.parse_pattern("MB", f"(?:{pg.UTF8_MULTIBYTE}|[a-z])+")
    assert pg.rust_regex(multibyte) == "(?:[^\\x{00}-\\x{7F}]|[a-z])+"


@pytest.mark.parametrize(
    ("alternatives", "expected"),
    [
        (
            [("a", "b", "c", "d"), ("a", "b", "d"), ("a", "c", "d"), ("a", "d")],
            [(("a", False), ("b", True), ("c", True), ("d", False))],
        ),
        (  # one combination cut (a projection): b and c cannot both be optional
            [("a", "b", "c"), ("a", "b"), ("a", "c")],
            [(("a", False), ("b", False), ("c", True)), (("a", False), ("c", False))],
        ),
        ([("x",), ()], [(("x", True),)]),
    ],
)
def test_factor_regenerates_the_alternatives(
    alternatives: list[tuple[str, ...]], expected: list[tuple[tuple[str, bool], ...]]
) -> None:
    """Fails if folding optional symbols generates a sentence form the IR does not have,
    or loses one."""
    families = pg.factor(alternatives)
    assert families == expected
    generated = set().union(*(pg._expansions_of(f) for f in families))
    assert generated == set(alternatives)


def test_committed_translations_are_current(measured: dict) -> None:
    """Fails when the grammars under bench/grammars/ are not what the translator makes of
    today's grammars (regenerate: ``uv run python bench/peer_grammars.py``)."""
    for name, (grammar, words, title) in measured.items():
        translation = pg.translate(grammar, words, title)
        lark, ebnf = pg.grammar_files(name)
        assert lark.read_text(encoding="utf-8") == translation.lark, lark
        assert ebnf.read_text(encoding="utf-8") == translation.ebnf, ebnf
