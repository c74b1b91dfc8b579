"""The RBAC speller (``grid_sql.speller``) at default-suite size.

Real parts throughout: Qwen's 151,851-token vocabulary, the SQLite dialect, the
example policy and schema, grid-core's masks, SQLite's authorizer. The full run
(every position, every glue, every role) is ``bench/rbac_speller.py``
(``nox -s rbac``); here the speller runs at every *relation* and *verb*
position of the two roles with something forbidden and a mixed grant (analyst:
SELECT only; clerk: no DELETE, so no REPLACE), after a blank and after nothing,
and the oracle at a sample of free-name positions; functions (issue 15) at the
first three positions where a call may stand, for intern and admin. Planted
faults (a lexicon that admits a forbidden table or every function, a projection
that keeps forbidden verbs, a grammar that lets a free name stand for a table)
show that each check fails when it should.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from grid_core.cache import SharedCache
from grid_core.grammar import load_grammar
from grid_core.guide import Engine
from grid_core.trie import TokenTrie, build_trie
from grid_core.vocab import Vocabulary, qwen
from grid_sql.dialects import SQLITE
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import PolicyBundle, example_policy
from grid_sql.projection import RoleProjection, dialect_dfa
from grid_sql.schema import SchemaSnapshot, example_schema
from grid_sql.speller import (
    Oracle,
    Position,
    RoleProbe,
    Speller,
    TokenIndex,
    find_positions,
    forbidden_verbs,
    function_controls,
    function_targets,
    identifier_terminals,
    keyword_terminals,
    probe_role,
    table_targets,
    verb_targets,
)

RESULTS = Path(__file__).resolve().parents[3] / "bench" / "results" / "rbac_speller.json"


@cache
def world() -> tuple[Vocabulary, TokenTrie, TokenIndex, SharedCache, SchemaSnapshot, PolicyBundle]:
    vocab = qwen()
    trie = build_trie(vocab)
    shared = SharedCache()
    schema = example_schema()
    return vocab, trie, TokenIndex.build(vocab), shared, schema, example_policy(schema)


@cache
def engine(role: str, verbs_of: str | None = None, lexicon_of: str | None = None) -> Engine:
    """``role``'s engine; ``verbs_of``/``lexicon_of`` plant another role's projection or
    lexicon (``"*"``: full grants) to make a faulty engine."""
    vocab, trie, _, shared, schema, policy = world()
    grants = None if lexicon_of == "*" else policy.grants(lexicon_of or role, schema)
    lexicon = SchemaLexicon.build(SQLITE, schema, grants)
    projection = RoleProjection.compile(policy.role(verbs_of or role), SQLITE, words=lexicon.words)
    return Engine(
        projection.grammar,
        vocab,
        lexicon.lexicon,
        dfa=dialect_dfa(SQLITE),
        trie=trie,
        cache=shared,
    )


def positions(e: Engine, keep: Callable[[int], bool]) -> list[Position]:
    _, _, _, _, schema, _ = world()
    terminals = identifier_terminals(e, SQLITE, schema) | keyword_terminals(e, SQLITE)
    found, _, _ = find_positions(e, terminals)
    return [p for p in found if keep(e.parser.allowed(p.node))]


def probe(
    role: str, e: Engine, at: list[Position], oracle: bool = False, functions: bool = False
) -> RoleProbe:
    _, _, index, _, schema, policy = world()
    grants = policy.grants(role, schema)
    return probe_role(
        e,
        SQLITE,
        schema,
        grants,
        index,
        glues=(b" ", b""),
        oracle=Oracle.example() if oracle else None,
        positions=at,
        functions=functions,
    )


def calls(e: Engine) -> Callable[[int], bool]:
    """Positions where a function call may come next."""
    call = 1 << e.grammar.terminal_id("FUNCTION_NAME")
    return lambda allowed: bool(allowed & call)


def relation_or_verb(e: Engine) -> Callable[[int], bool]:
    """Positions where a relation, a verb or a statement may come next."""
    names = ("TABLE_NAME", "CTE_NAME", "SELECT", "VALUES", "WITH", "INSERT", "UPDATE", "DELETE")
    wanted = sum(1 << e.grammar.terminal_id(t) for t in (*names, "REPLACE"))
    return lambda allowed: bool(allowed & wanted)


@pytest.mark.parametrize("role", ["analyst", "clerk", "admin", "intern"])
def test_positions_hit_every_identifier_and_verb_goal(role: str) -> None:
    """Every (LALR state, terminal) pair that shifts an identifier or a keyword is hit,
    and no state shifts a verb the role lacks.

    Fails when the position generator misses a state (a path, yield or sample
    lexeme that lexes otherwise), which would leave part of the grammar unprobed.
    """
    e = engine(role)
    _, _, _, _, schema, _ = world()
    ident, keywords = identifier_terminals(e, SQLITE, schema), keyword_terminals(e, SQLITE)
    call = 1 << e.grammar.terminal_id("FUNCTION_NAME")
    found, goals, missed = find_positions(e, ident | keywords | call)
    assert missed == frozenset()
    _, _, _, _, _, policy = world()
    banned = {v.name for v in verb_targets(e.grammar, policy.role(role).verbs) if v.forbidden}
    assert not {e.grammar.terminals[t].name for _, t in goals} & banned
    assert len(goals) > 200
    assert {g for p in found for g in p.goals} == goals
    names = {e.grammar.terminals[t].name for _, t in goals}
    assert {"TABLE_NAME", "COLUMN_NAME", "ALIAS_NAME", "QUALIFIER", "STRING", "SELECT"} <= names
    assert "FUNCTION_NAME" in names


@pytest.mark.parametrize("role", ["intern", "admin"])
def test_no_forbidden_function_is_spelled(role: str) -> None:
    """Issue 15's function policy at mask level: at positions where a call may stand,
    no function outside the role's grant (the default leaves out randomblob, zeroblob,
    printf and format) is spelled as FUNCTION_NAME in any case or token path; every
    granted function is reached there; SQLite's authorizer sees the granted calls
    and no other.

    Fails on a function bypass (a lexicon or word class admitting a function the
    policy does not grant), on a mask/lexer disagreement, or on a control not reached.
    """
    e = engine(role)
    at = positions(e, calls(e))[:3]
    result = probe(role, e, at, oracle=True, functions=True)
    _, _, _, _, schema, policy = world()
    granted = set(policy.grants(role, schema).functions or ())
    assert {"randomblob", "zeroblob", "printf", "format"}.isdisjoint(granted)
    assert {"substr", "upper", "round", "random"} <= granted == set(result.functions)
    forbidden = {t.split(" ")[1] for t in result.targets_forbidden if t.startswith("function")}
    assert forbidden == {"randomblob", "zeroblob", "printf", "format"}
    assert result.function_positions == 3
    assert result.bypasses == [] and result.disagreements == []
    assert result.witness_violations == [] and result.controls_missing == []
    # every granted function at the first position, one more at each other
    assert result.control_forms["call"] == len(granted) + 2
    assert result.controls_reached == result.controls_expected >= len(granted) + 2
    assert result.oracle_controls_seen >= len(granted) // 2


def test_a_lexicon_granting_every_function_is_a_bypass() -> None:
    """The intern's grammar with the full-grants lexicon (no function category): the
    speller must spell printf( as FUNCTION_NAME, in every case form.

    Fails if the speller cannot see a function bypass (it would pass vacuously).
    """
    e = engine("intern", lexicon_of="*")
    _, _, index, _, schema, policy = world()
    at = positions(e, calls(e))[0]
    targets = {t.name: t for t in function_targets(SQLITE, policy.grants("intern", schema))}
    speller = Speller(e, index)
    call = e.grammar.terminal_id("FUNCTION_NAME")
    for name in ("printf",):
        assert targets[name].forbidden
        found = speller.spell(at, b" ", targets[name])
        assert found is not None
        spelled = {w for w, (r, ends) in found.spelled.items() if r == call and ends}
        word = name.encode() + b"("
        assert {word, word.upper(), word.capitalize()} <= spelled


def test_a_projection_keeping_forbidden_verbs_is_a_bypass() -> None:
    """The admin's projection with the analyst's grants: INSERT, UPDATE, DELETE and
    REPLACE open a statement, and the speller must report each at the head.

    Fails if the speller cannot see a verb bypass.
    """
    e = engine("analyst", verbs_of="admin", lexicon_of="analyst")
    head = positions(e, lambda a: True)[:1]
    assert head[0].context == b""
    result = probe("analyst", e, head)
    found = {line.split(" (bare")[0] for line in result.bypasses}
    assert found == {"verb INSERT", "verb UPDATE", "verb DELETE", "verb REPLACE"}


def test_the_oracle_catches_a_free_name_in_a_table_position() -> None:
    """A grammar that lets ALIAS_NAME stand for a table (a plausible grammar bug:
    ``x IN name`` reads a table in SQLite): the lexicon never admits salaries, so
    the mask-level search finds nothing, and the witness ``select ? in salaries``
    must be flagged by SQLite's authorizer.

    Fails if the oracle does not report a read of a table without grant.
    """
    _, _, _, _, schema, policy = world()
    text = SQLITE.grammar_text.replace('in_target: "(" ")"', 'in_target: ALIAS_NAME\n | "(" ")"')
    assert text != SQLITE.grammar_text
    grants = policy.grants("analyst", schema)
    lexicon = SchemaLexicon.build(SQLITE, schema, grants)
    projection = RoleProjection.compile(
        policy.role("analyst"), SQLITE, grammar=load_grammar(text, "sqlite"), words=lexicon.words
    )
    vocab, trie, _, _, _, _ = world()
    e = Engine(projection.grammar, vocab, lexicon.lexicon, dfa=dialect_dfa(SQLITE), trie=trie)
    both = (1 << e.grammar.terminal_id("TABLE_NAME")) | (1 << e.grammar.terminal_id("ALIAS_NAME"))
    at = positions(e, lambda a: a & both == both)[:1]
    result = probe("analyst", e, at, oracle=True)
    assert result.bypasses == []
    assert any(
        "table salaries (bare: salaries) read as ALIAS_NAME" in v and "READ salaries" in v
        for v in result.witness_violations
    )


def test_oracle_reports_reads_and_writes() -> None:
    """SQLite's authorizer, through ``Oracle``: what a statement touches, even when it
    fails to compile. Fails if an access is lost or invented."""
    oracle = Oracle.example()
    seen, error = oracle.accesses("SELECT * FROM employees AS salaries;")
    assert error is None and {t for _, t in seen} == {"", "employees"}
    seen, error = oracle.accesses("SELECT 1 WHERE 1 IN salaries;")
    assert error is not None and ("READ", "salaries") in seen
    seen, error = oracle.accesses("DELETE FROM orders WHERE id = ?;")
    assert error is None and ("DELETE", "orders") in seen
    seen, error = oracle.accesses("SELECT salaries.amount FROM employees;")
    assert error is not None and {t for _, t in seen} == {""}
    seen, error = oracle.accesses("SELECT upper(name), RandomBlob(3) FROM employees;")
    assert error is None and {("FUNCTION", "upper"), ("FUNCTION", "randomblob")} <= seen


def test_token_index_agrees_with_a_scan_of_the_vocabulary() -> None:
    """Prefix and exact queries of the index equal a brute-force scan of Qwen's
    spellings, any case. Fails on a wrong sort or bound."""
    vocab, _, index, _, _, _ = world()
    spellings = vocab.token_bytes
    for prefix in (b" sal", b"sal", b"(s", b'"', b"aries", b"select"):
        want = {i for i, b in enumerate(spellings) if b and b.lower().startswith(prefix)}
        assert set(index.starting(prefix)) == want
        exact = {i for i, b in enumerate(spellings) if b and b.lower() == prefix}
        assert set(index.spelled(prefix)) == exact
    assert index.longest == max(len(b) for b in spellings)
    assert all(spellings[i] == bytes([b]) for b in range(256) for i in index.byte_ids[b])


def test_speller_refuses_a_case_sensitive_dfa() -> None:
    """The search matches letters in any case, which is sound only when the union DFA
    treats both cases alike. Fails if a grammar with a case-sensitive keyword is
    accepted (its closers would depend on the case variant)."""
    vocab, trie, index, _, _, _ = world()
    Speller(engine("intern"), index)  # the SQLite dialect's DFA is case-blind
    toy = load_grammar('start: SEL ";"\nSEL: "select"\n', "toy")
    with pytest.raises(ValueError, match=r"the union DFA tells '[a-z]' from '[A-Z]'"):
        Speller(Engine(toy, vocab, trie=trie), index)


def test_forbidden_sets_follow_the_policy() -> None:
    """REPLACE needs DELETE (and INSERT or UPDATE), as the projection rules say; every
    relation comes in every form. Fails if a verb or form is dropped."""
    _, _, _, _, schema, policy = world()
    assert forbidden_verbs(frozenset({"SELECT", "INSERT", "UPDATE"})) == {"DELETE", "REPLACE"}
    assert forbidden_verbs(frozenset({"SELECT", "INSERT", "UPDATE", "DELETE"})) == set()
    assert forbidden_verbs(frozenset({"SELECT"})) == {"INSERT", "UPDATE", "DELETE", "REPLACE"}
    targets = table_targets(SQLITE, schema, policy.grants("intern", schema))
    assert {t.form for t in targets} == {
        "bare",
        'quoted ""',
        "quoted ``",
        "quoted []",
        "string",
        "qualifier",
    }
    assert {t.name for t in targets if t.forbidden} == {"employees", "orders", "salaries"}
    functions = function_targets(SQLITE, policy.grants("intern", schema))
    assert {t.name for t in functions} == set(SQLITE.functions)
    assert {t.name for t in functions if t.forbidden} == {
        "randomblob",
        "zeroblob",
        "printf",
        "format",
    }
    assert {(t.form, t.home) for t in functions} == {("call", "FUNCTION_NAME")}
    allowed = [t for t in functions if not t.forbidden]
    assert function_controls(functions, 0) == [*(t for t in functions if t.forbidden), *allowed]
    assert function_controls(functions, 1)[-1] == allowed[1]
    assert len(function_controls(functions, 1)) == 5


def test_a_glue_that_leaves_the_language_spells_nothing() -> None:
    """In the narrow generation profile (no comments) the glue ``/**/`` leaves L: the
    speller skips it (None, never a path), where the role's whole language reads it."""
    from grid_sql.generation import generation_language

    vocab, trie, index, _, schema, policy = world()
    grants = policy.grants("intern", schema)
    lexicon = SchemaLexicon.build(SQLITE, schema, grants)
    projection = RoleProjection.compile(policy.role("intern"), SQLITE, words=lexicon.words)
    grammar, words, dfa = generation_language(
        "narrow", projection.grammar, SQLITE, lexicon.words, "intern"
    )
    narrow = Engine(grammar, vocab, words, dfa=dfa, trie=trie)
    at = positions(narrow, relation_or_verb(narrow))[:3]
    full = probe_role(
        engine("intern"), SQLITE, schema, grants, index, glues=(b"/**/",), positions=at
    )
    got = probe_role(narrow, SQLITE, schema, grants, index, glues=(b"/**/",), positions=at)
    assert full.searches > 0 and full.paths > 0
    assert got.searches == 0 and got.paths == 0 and not got.bypasses


@pytest.mark.parametrize("name", ["rbac_speller.json", "rbac_speller_narrow.json"])
def test_committed_results_have_no_bypass(name: str) -> None:
    """The committed full runs (``bench/results/rbac_speller.json``, and
    ``rbac_speller_narrow.json`` in the narrow generation profile) cover every role of
    the example policy with every goal hit, every control reached and nothing
    forbidden spelled. Fails when the results are stale or record a failure."""
    _, _, _, _, _, policy = world()
    data = json.loads((RESULTS.parent / name).read_text(encoding="utf-8"))
    assert data["vocab"] == "qwen" and data["glues"] == [" ", "", "\n", "\t", "/**/"]
    assert data.get("generation", "full") == ("narrow" if "narrow" in name else "full")
    assert sorted(r["role"] for r in data["roles"]) == sorted(policy.roles)
    totals = data["totals"]
    assert totals["failures"] == totals["bypasses"] == totals["disagreements"] == 0
    assert totals["goals_missed"] == totals["witness_violations"] == 0
    assert totals["controls_reached"] == totals["controls_expected"] > 100
    for role in data["roles"]:
        assert role["positions"] > 0 and role["controls_reached"] == role["controls_expected"]
