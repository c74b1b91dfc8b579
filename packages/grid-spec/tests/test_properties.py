"""The property predicates, and the size bound of the specification itself."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest
from sql_corpus import GRAMMARS

import grid_spec.spec
from grid_spec import Language
from grid_spec.properties import (
    completeness,
    eos_iff_complete,
    mask_properties,
    non_empty,
    soundness,
    stop_in_language,
)

LANG = Language(
    (GRAMMARS / "crud_analyst.lark").read_text(),
    {"TABLE_NAME": [b"employees", b"orders"]},
)
VOCAB = [b"select", b" *", b" from", b" employees", b" salaries", b";", b"sel", b"<eos>"]
EOS = 7


def test_soundness_flags_a_token_that_leaves_prefix() -> None:
    assert soundness(LANG, VOCAB, EOS, b"select * from", [3]) == []
    assert len(soundness(LANG, VOCAB, EOS, b"select * from", [3, 4])) == 1
    assert len(soundness(LANG, VOCAB, EOS, b"select * from", [EOS])) == 1


def test_completeness_flags_a_blocked_token() -> None:
    assert completeness({1, 2}, {1, 2, 3}) == []
    assert completeness({1, 2}, {1}) == ["token 2 admitted by the specification is blocked"]


def test_eos_iff_complete_both_directions() -> None:
    assert eos_iff_complete(LANG, EOS, b"select * from employees;", {EOS}) == []
    assert eos_iff_complete(LANG, EOS, b"select * from employees;", set()) != []
    assert eos_iff_complete(LANG, EOS, b"select * from employees", {EOS}) != []


def test_non_empty_only_at_viable_prefixes() -> None:
    assert non_empty(LANG, b"select", set()) != []
    assert non_empty(LANG, b"insert", set()) == []


def test_stop_in_language() -> None:
    assert stop_in_language(LANG, b"select * from orders;") == []
    assert stop_in_language(LANG, b"select * from orders") != []


@pytest.mark.parametrize(
    ("w", "expected"),
    [
        (b"", {0, 6}),
        (b"select", {1, 2, 3, 4}),  # " from" may still become the column "fromage"
        (b"select * from", {3}),
        (b"select * from employees", {5}),
        (b"select * from employees;", {EOS}),
    ],
)
def test_spec_mask_on_a_toy_vocabulary(w: bytes, expected: set[int]) -> None:
    assert LANG.mask(VOCAB, {EOS}, EOS, w) == expected
    assert mask_properties(LANG, VOCAB, {EOS}, EOS, w, expected) == []
    assert mask_properties(LANG, VOCAB, {EOS}, EOS, w, expected ^ {5}) != []


def _code_lines(path: Path) -> int:
    """Lines holding code: not blank, not comments, not docstrings."""
    source = path.read_text()
    doc_lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                doc_lines.update(range(body[0].lineno, (body[0].end_lineno or 0) + 1))
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in (
            tokenize.COMMENT,
            tokenize.NL,
            tokenize.NEWLINE,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.ENDMARKER,
        ):
            code.update(range(tok.start[0], tok.end[0] + 1))
    return len(code - doc_lines)


def test_specification_stays_small() -> None:
    n = _code_lines(Path(grid_spec.spec.__file__))
    assert 60 < n <= 200, n


def test_lazy_quantifiers_are_refused_because_the_oracle_misreports_them() -> None:
    import regex

    # The bug this guards against, pinned: 'xX' cannot start a match of x+?y{1,2}?.
    assert regex.fullmatch(r"x+?y{1,2}?", "xX", partial=True) is not None
    assert regex.fullmatch(r"x+y{1,2}", "xX", partial=True) is None
    with pytest.raises(AssertionError, match="lazy"):
        Language("start: A\nA: /x+?y/\n")
    Language('start: A B\nA: /\\*?x/\nB: "y"\n')  # an escaped "*" made optional is greedy
