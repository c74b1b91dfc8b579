"""Tests of grid_core.regex_bytes: patterns to Thompson NFAs over bytes.

The oracle is Python itself: ``re.fullmatch(p, s, re.ASCII)`` for membership and
``regex.fullmatch(p, s, flags=regex.ASCII, partial=True)`` for liveness, with
byte strings read as latin-1 text (one character per byte).
"""

from __future__ import annotations

import random
import re
import warnings

import pytest
import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st
from lark.lexer import PatternRE, PatternStr

from grid_core import regex_bytes
from grid_core.dfa import union_of_nfas
from grid_core.errors import GrammarError, PatternError
from grid_core.regex_bytes import (
    ALL_BYTES,
    MAX_NFA_STATES,
    ByteNFA,
    byteset,
    compile_pattern,
)

DERANDOMIZED = settings(derandomize=True, deadline=None, max_examples=100)

# name -> pattern; every language is non-empty and excludes the empty string.
PATTERNS: dict[str, str] = {
    "keyword": r"(?i:select)",
    "ident": r'[A-Za-z_][A-Za-z0-9_]*|"(?:[^"]|"")+"',
    "number": r"\d+(?:\.\d*)?(?:[eE][+-]?\d+)?",
    "string": r"'(?:[^']|'')*'",
    "block_comment": r"/\*(?:[^*]|\*+[^*/])*\*+/",
    "nested_groups": r"(a(b(c|d)*)+e)?f",
    "negated_class_fold": r"(?i:[^a-c])z",
    "global_fold_class": r"(?i)[a-c]+x",
    "scoped_unfold": r"(?i)a(?-i:b)c",
    "no_latin1_fold": r"(?i)\xe9+",
    "dot": r"a.c",
    "dot_all": r"(?s)a.c",
    "scoped_dot_all": r"a(?s:.)c",
    "high_bytes": r"\xc3[\x80-\xbf]|[\x80-\xff]{3}",
    "counted": r"(?:ab){1,3}c{2}d{2,}",
    "lazy": r"a+?b{1,2}?",
    "categories": r"[^\W\d]\s\S\w\W\D",
    "verbose": "(?x) a b  # a comment\n c",
    "epsilon_loops": r"(?:a|b?)+c|(?:x{0,2}){2,3}y|((a)|b)+?z|(?:(?:ab)?)*d",
}


LATIN1 = st.characters(max_codepoint=0xFF)


def strings_near(pattern: str) -> st.SearchStrategy[str]:
    """Latin-1 text in, just inside and just outside the language of ``pattern``.

    Members (from hypothesis' own regex generator), their prefixes, two members
    joined, and members with one character replaced, inserted or appended.
    """
    member = st.from_regex(re.compile(pattern, re.ASCII), fullmatch=True, alphabet=LATIN1)
    cut = st.tuples(member, st.integers(0, 30)).map(lambda m: m[0][: m[1]])
    twice = st.tuples(member, member).map("".join)
    edited = st.tuples(member, st.integers(0, 30), LATIN1, st.integers(0, 1)).map(
        lambda m: m[0][: m[1]] + m[2] + m[0][m[1] + m[3] :]
    )
    noise = st.text(LATIN1, max_size=4)
    return st.one_of(member, cut, twice, edited, noise)


def _assert_agrees(nfa: ByteNFA, pattern: str, text: str) -> None:
    data = text.encode("latin-1")
    expected_match = re.fullmatch(pattern, text, re.ASCII) is not None
    # regex's partial matching misreports lazy quantifiers; the greedy spelling has
    # the same language (see test_dfa._greedy).
    greedy = pattern.replace("+?", "+").replace("}?", "}")
    expected_live = regex.fullmatch(greedy, text, flags=regex.ASCII, partial=True) is not None
    assert nfa.fullmatch(data) == expected_match, (pattern, text)
    assert nfa.is_live(data) == expected_live, (pattern, text)


@pytest.fixture(scope="module")
def nfas() -> dict[str, ByteNFA]:
    return {name: compile_pattern(name, pattern) for name, pattern in PATTERNS.items()}


@pytest.mark.parametrize("name", sorted(PATTERNS))
@DERANDOMIZED
@given(data=st.data())
def test_nfa_agrees_with_python_re(
    nfas: dict[str, ByteNFA], name: str, data: st.DataObject
) -> None:
    text = data.draw(strings_near(PATTERNS[name]))
    _assert_agrees(nfas[name], PATTERNS[name], text)


def test_nfa_agrees_with_python_re_seeded(nfas: dict[str, ByteNFA]) -> None:
    rng = random.Random(20240611)
    pieces = ["select", "SeLeCT", "'", "''", '"', "/*", "*/", "**", "1.5e+3", "ab", "c", "d", "\n"]
    for _ in range(400):
        parts = [
            rng.choice(pieces) if rng.random() < 0.7 else chr(rng.randrange(256))
            for _ in range(rng.randrange(5))
        ]
        text = "".join(parts)
        for name, pattern in PATTERNS.items():
            _assert_agrees(nfas[name], pattern, text)


# -- single characters, exhaustively over the 256 bytes ------------------------------

SINGLE_CHARACTER = [
    r"\d",
    r"\D",
    r"\w",
    r"\W",
    r"\s",
    r"\S",
    r".",
    r"(?s).",
    r"[^\n]",
    r"(?i)k",
    r"(?i)[^k]",
    r"(?i)[a-z]",
    r"(?i)[^\x41-\x5a]",
    r"(?i)\xe0",
    r"(?i)\xb5",
    r"(?i)\xff",
    r"(?i)[\xc0-\xde]",
    r"[\w.-]",
    r"[^\s\d]",
    r"[\x00-\x1f\x7f]",
    r"\101",  # octal escape: 'A'
    r"\N{LATIN SMALL LETTER E WITH ACUTE}",
]


@pytest.mark.parametrize("pattern", SINGLE_CHARACTER)
def test_single_byte_sets_match_re_ascii(pattern: str) -> None:
    nfa = compile_pattern("T", pattern)
    for b in range(256):
        expected = re.fullmatch(pattern, chr(b), re.ASCII) is not None
        assert nfa.fullmatch(bytes([b])) == expected, (pattern, b)


def test_ascii_semantics_by_hand() -> None:
    """Hand-checkable cases where Unicode semantics would differ."""
    assert not compile_pattern("T", r"(?i)\xe9").fullmatch(b"\xc9")  # é does not fold to É
    assert not compile_pattern("T", r"\w").fullmatch(b"\xe9")
    assert not compile_pattern("T", r"\s").fullmatch(b"\x85")  # NEL
    assert not compile_pattern("T", r"\s").fullmatch(b"\xa0")  # NBSP
    assert not compile_pattern("T", r"\d").fullmatch(b"\xb2")  # superscript two
    assert compile_pattern("T", r"(?i:select)").fullmatch(b"sElEcT")
    assert not compile_pattern("T", r".").fullmatch(b"\n")
    assert compile_pattern("T", r"(?s:.)").fullmatch(b"\n")


def test_lark_patterns_compile() -> None:
    """The spellings lark produces for string and regex terminals with flags."""
    keyword = PatternStr("select", ("i",)).to_regexp()
    assert compile_pattern("SELECT", keyword).fullmatch(b"SeLect")
    dotted = PatternRE("a.b", ("s", "i")).to_regexp()
    nfa = compile_pattern("DOT", dotted)
    assert nfa.fullmatch(b"A\nB") and not nfa.fullmatch(b"A\n")
    literal = PatternStr("a.b*").to_regexp()
    assert compile_pattern("LIT", literal).fullmatch(b"a.b*")
    assert not compile_pattern("LIT", literal).fullmatch(b"axbb")


@pytest.mark.parametrize(
    ("pattern", "text"),
    [(r"--[^\n]*", b"-- a"), (r"[\[:a]+", b"[:"), (r"[&|~-]+", b"&|~-"), (r"a&&b|c\|\|", b"a&&b")],
)
def test_doubled_set_characters_outside_a_class_or_escaped_compile(
    pattern: str, text: bytes
) -> None:
    """The refusal of classes Python warns about (``[[``, doubled ``-&~|`` inside
    ``[...]``) leaves the same characters elsewhere alone, and warns nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compile_pattern("T", pattern).fullmatch(text)


def test_byteset() -> None:
    assert byteset(b"ab") == 1 << 0x61 | 1 << 0x62
    assert byteset(range(256)) == ALL_BYTES


def _assert_trimmed(nfa: ByteNFA) -> None:
    """Every state is reachable from ``start`` and reaches ``final``; edges are sane."""
    succ: list[list[int]] = [list(nfa.eps[q]) for q in range(nfa.n_states)]
    for q, e in enumerate(nfa.edge):
        if e is not None:
            assert e[0] != 0 and 0 <= e[1] < nfa.n_states
            succ[q].append(e[1])
    assert nfa.edge[nfa.final] is None and not nfa.eps[nfa.final]
    pred: list[list[int]] = [[] for _ in range(nfa.n_states)]
    for q, targets in enumerate(succ):
        for r in targets:
            pred[r].append(q)
    for origin, graph in ((nfa.start, succ), (nfa.final, pred)):
        seen, stack = {origin}, [origin]
        while stack:
            for r in graph[stack.pop()]:
                if r not in seen:
                    seen.add(r)
                    stack.append(r)
        assert seen == set(range(nfa.n_states))


def test_nfas_are_trimmed(nfas: dict[str, ByteNFA]) -> None:
    for nfa in nfas.values():
        _assert_trimmed(nfa)


def test_dead_alternative_is_trimmed() -> None:
    """A branch through an empty byte set leaves no state behind."""
    nfa = compile_pattern("T", r"a[^\x00-\xff]b|ac")
    _assert_trimmed(nfa)
    assert nfa.is_live(b"a") and not nfa.is_live(b"ab") and nfa.fullmatch(b"ac")
    assert all(e is None or e[0] != 1 << ord("b") for e in nfa.edge)


# -- rejections: one per construct -------------------------------------------------

REJECTIONS: list[tuple[str, str, str]] = [
    # (test id, pattern, a word the reason must contain)
    ("caret", r"^select", "^"),
    ("dollar", r"select$", "$"),
    ("begin_string", r"\Aselect", "\\A"),
    ("end_string", r"select\Z", "\\Z"),
    ("word_boundary", r"\bselect", "\\b"),
    ("non_boundary", r"se\Blect", "\\B"),
    ("lookahead", r"(?=s)select", "lookahead"),
    ("negative_lookahead", r"(?!x)select", "negative lookahead"),
    ("lookbehind", r"a(?<=a)b", "lookbehind"),
    ("negative_lookbehind", r"a(?<!b)b", "negative lookbehind"),
    ("backreference", r"(a)\1", "backreference"),
    ("named_backreference", r"(?P<q>['\"])x(?P=q)", "backreference"),
    ("conditional", r"(a)?(?(1)b|c)", "conditional"),
    ("atomic_group", r"(?>ab|a)c", "atomic group"),
    ("possessive_star", r"xa*+", "possessive"),
    ("possessive_plus", r"a++", "possessive"),
    ("possessive_optional", r"xa?+", "possessive"),
    ("possessive_counted", r"a{1,3}+", "possessive"),
    ("empty_pattern", r"", "empty string"),
    ("nullable_star", r"[a-z]*", "empty string"),
    ("nullable_alternative", r"select|", "empty string"),
    ("nullable_optionals", r"a?(?:b|c?)", "empty string"),
    ("empty_language", r"[^\x00-\xff]", "no byte string"),
    ("char_above_ff_literal", "caf\u0100", "U+0100"),
    ("char_above_ff_escape", r"caf\u0100", "U+0100"),
    ("char_above_ff_in_range", r"[a-\u20ac]", "U+20AC"),
    ("char_above_ff_negated", r"[^\u0101]", "U+0101"),
    ("anchor_hidden_by_zero_repeat", r"a(?:\b){0}", "\\b"),
    ("syntax_error", r"(unclosed", "not a Python regular expression"),
    ("posix_class", r"[[:alpha:]]+", "POSIX class"),
    ("nested_set_negated", r"x[[^a]]", "Possible nested set"),
    ("posix_class_negated", r"[^[:alpha:]]", "Possible POSIX class [:alpha:]"),
    ("posix_class_not_first", r"[a[:digit:]]", "Possible POSIX class [:digit:]"),
    ("posix_collating", r"x[^ab[.-.]]", "Possible POSIX class [.-.]"),
    ("posix_equivalence", r"[[=e=]x]", "POSIX class"),
    ("posix_verbose", "(?x) a # a comment\n [^[:alpha:]]", "Possible POSIX class [:alpha:]"),
    ("posix_after_verbose_group", "(?x: a # c\n )#[^[:alpha:]]", "Possible POSIX class"),
    ("set_difference", r"[a-z--q]", "Possible set difference"),
    ("set_intersection", r"[a&&b]", "Possible set intersection"),
    ("set_union", r"[a||b]", "Possible set union"),
    ("set_symmetric_difference", r"[a~~b]", "Possible set symmetric difference"),
    ("too_large", rf"[a-z]{{{MAX_NFA_STATES}}}", "NFA states"),
]


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [pytest.param(p, r, id=i) for i, p, r in REJECTIONS],
)
def test_rejected_construct(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError) as info:
        compile_pattern("MY_TERMINAL", pattern)
    error = info.value
    assert isinstance(error, GrammarError)
    assert error.terminal == "MY_TERMINAL" and error.pattern == pattern
    assert "MY_TERMINAL" in str(error)
    assert reason in error.reason


@pytest.mark.parametrize(
    ("pattern", "member"),
    [
        (r"\[:alpha:\]", "[:alpha:]"),  # escaped: no class at all
        (r"[:alpha:]+", "ahp:"),  # a class of its letters (POSIX too reads it so)
        (r"[\[]:x:]", "[:x:]"),  # an escaped '[' in a class, then text
        (r"[]:[]x", "[x"),  # ']' first in a class is itself
        (r"a(?#[a[:digit:]] a comment)b", "ab"),
        ("(?x) a+ # a comment: [x[:digit:]]\n b", "aab"),
        ("(?x: a # [x[:digit:]]\n ) [#]", "a #"),  # '#' in a class is itself
    ],
)
def test_posix_looking_text_outside_a_class_is_accepted(pattern: str, member: str) -> None:
    """Only a POSIX class inside a class is refused (what Python reads as characters
    where POSIX reads a named set); the same text elsewhere means what it says."""
    program = compile_pattern("T", pattern)
    assert program.fullmatch(member.encode()), (pattern, member)


# -- the literal fast path ------------------------------------------------------------


def parsed_program(pattern: str) -> tuple[list[int], list[int], int]:
    """The program ``re``'s parse tree gives (the path every non-literal takes)."""
    tree = regex_bytes._parser.parse(pattern)
    program = regex_bytes._Program("T", pattern, int(tree.getwidth()[1]))
    program.validate(tree)
    program.sequence(tree, tree.state.flags)
    return program.code.tolist(), program.masks, program.max_width


def program_of(pattern: str) -> tuple[list[int], list[int], int]:
    program = regex_bytes._program("T", pattern)
    return program.code.tolist(), program.masks, program.max_width


@pytest.mark.parametrize(
    ("pattern", "literal"),
    [
        ('"name"', '"name"'),
        (re.escape('"a.b[c]"'), '"a.b[c]"'),
        (re.escape("x y#z-~"), "x y#z-~"),
        (r"\\\^\$", "\\^$"),
        ("caf\xe9", "caf\xe9"),
        ("a\nb", "a\nb"),
        # Not plain literals: a metacharacter, an escape with a meaning, a
        # bracket or brace alone (re reads some as literals; the fast path
        # leaves them to re), the empty pattern.
        ("a.b", None),
        (r"\d", None),
        (r"\n", None),
        (r"\x41", None),
        ("a]", None),
        ("a}", None),
        ("(?i)ab", None),
        ("", None),
    ],
)
def test_plain_literals_are_recognised(pattern: str, literal: str | None) -> None:
    assert regex_bytes._literal(pattern) == literal
    if literal is not None:
        assert re.fullmatch(pattern, literal)
        assert program_of(pattern) == parsed_program(pattern)


LITERAL_TEXT = st.text(alphabet=st.characters(max_codepoint=0xFF), min_size=1, max_size=12)


@settings(derandomize=True, deadline=None, max_examples=400)
@given(text=LITERAL_TEXT, escape=st.booleans())
def test_literal_programs_are_the_parsed_ones(text: str, escape: bool) -> None:
    """Any text, escaped as ``re.escape`` does or raw: where the fast path takes
    it, its program is the one ``re``'s parse tree gives."""
    pattern = re.escape(text) if escape else text
    if escape:
        assert regex_bytes._literal(pattern) == text
    if regex_bytes._literal(pattern) is not None:
        assert program_of(pattern) == parsed_program(pattern)


# -- written patterns: a generator's program beside its text --------------------


def _class_text(mask: int) -> str:
    """A class ``[...]`` of the bytes of ``mask``, each as ``\\xNN``."""
    return "[" + "".join(f"\\x{b:02x}" for b in range(256) if mask >> b & 1) + "]"


_PIECES = ["[0-9]", "ab|c", "(?:x|yz)+", r"\\n|\\\x22", "[\xc2-\xdf][\x80-\xbf]"]


def _written() -> st.SearchStrategy[regex_bytes.Written]:
    """Written regexes: every leaf kind under every combinator, nested."""
    leaves = st.one_of(
        st.integers(1, (1 << 256) - 1).map(lambda m: regex_bytes.chars(m, _class_text(m))),
        st.text(LATIN1, min_size=0, max_size=4).map(regex_bytes.literal),
        st.sampled_from(_PIECES).map(regex_bytes.parsed),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3).map(lambda ps: regex_bytes.seq(*ps)),
            st.lists(inner, max_size=3).map(lambda ps: regex_bytes.alt(*ps)),
            inner.map(regex_bytes.star),
        ),
        max_leaves=8,
    )


def _outcome(pattern: str, written: regex_bytes.Written | None) -> tuple[str, int | str]:
    """The union DFA's fingerprint and the NFA's width, or the refusal, of
    ``pattern`` compiled afresh, from ``written``'s program where given."""
    with regex_bytes._compiled_lock:
        regex_bytes._compiled.pop(pattern, None)
        regex_bytes._written.pop(pattern, None)
    if written is not None:
        regex_bytes.remember(pattern, written)
    try:
        nfa = compile_pattern("W", pattern)
    except PatternError as e:
        return ("refused", e.reason)
    finally:
        with regex_bytes._compiled_lock:
            regex_bytes._compiled.pop(pattern, None)
    return (union_of_nfas(["W"], [nfa]).fingerprint, nfa.max_width)


@settings(derandomize=True, deadline=None, max_examples=300)
@given(written=_written())
@example(  # a star of the empty string beside a byte: width 1
    written=regex_bytes.seq(
        regex_bytes.star(regex_bytes.literal("")), regex_bytes.chars(2, _class_text(2))
    )
)
def test_written_programs_mean_their_text(written: regex_bytes.Written) -> None:
    """A written regex's program has its text's language (the same minimal DFA,
    the same refusal) and its width is ``re``'s; rendered with the identity on
    its leaves, it is its text (once per function)."""
    text = written.text
    assert written.render(lambda leaf: leaf, lambda leaf: leaf) == (text, text)
    assert _outcome(text, written) == _outcome(text, None)


def test_written_spellings() -> None:
    r = regex_bytes
    word = r.alt(r.literal("a.b"), r.seq(), r.chars(1 << 0x61, "a"))
    assert word.text == r"(?:a\.b||a)"
    assert r.star(word).text == r"(?:a\.b||a)*"
    assert r.star(r.literal("ab")).text == "(?:ab)*"
    assert r.star(r.chars(6, r"[\x01\x02]")).text == r"[\x01\x02]*"
    assert r.alt().text == ""
    assert word.render(str.upper, str.lower) == (r"(?:A\.B||A)", r"(?:a\.b||a)")
