"""Role projection by hand: each field, error and rule of ``RoleProjection.compile``.

Written for the mutation campaign (``bench/mutation.py``, ``sql.projection``):
each test builds what it checks, and every expected value is written out.
"""

from __future__ import annotations

import dataclasses

import pytest

from grid_core.errors import EmptyLanguageError, PolicyError
from grid_sql.dialect import DialectDefinitionError
from grid_sql.dialects import SQLITE
from grid_sql.policy import Role
from grid_sql.projection import RoleProjection, dialect_grammar, project_role
from grid_sql.projection_rules import Cut, ProjectionRules


def rules() -> ProjectionRules:
    assert SQLITE.projection is not None
    return SQLITE.projection


def test_the_fields_of_a_projection() -> None:
    role = Role("reader", frozenset({"SELECT"}), "*", frozenset({"cte"}))
    projected = RoleProjection.compile(role, SQLITE)
    assert (projected.role, projected.dialect) == ("reader", "sqlite")
    assert (projected.verbs, projected.banned_clauses) == (
        frozenset({"SELECT"}),
        frozenset({"cte"}),
    )
    assert projected.fingerprint == projected.grammar.fingerprint


def test_project_role_is_compile_s_grammar() -> None:
    role = Role("reader", frozenset({"SELECT"}), "*")
    words = {"TABLE_NAME": [b"t"], "COLUMN_NAME": [b"a"], "CTE_NAME": []}
    by_hand = RoleProjection.compile(role, SQLITE, words=words).grammar
    assert project_role(role, SQLITE, words).fingerprint == by_hand.fingerprint
    # the words matter: an empty CTE_NAME category cuts the WITH clause
    assert project_role(role, SQLITE).fingerprint != by_hand.fingerprint
    assert project_role(role, SQLITE).name == "reader"


def test_a_dialect_without_rules_is_named() -> None:
    bare = dataclasses.replace(SQLITE, projection=None)
    with pytest.raises(PolicyError) as info:
        RoleProjection.compile(Role("r", frozenset({"SELECT"}), "*"), bare)
    assert str(info.value) == (
        "role 'r': no projection rules for dialect 'sqlite' "
        "(give its Dialect value a projection: grid_sql.projection_rules)"
    )


def test_bad_rules_name_the_dialect() -> None:
    role = Role("r", frozenset({"SELECT"}), "*")
    unknown = ProjectionRules(
        rules().statement, rules().verb_forms, {**rules().clauses, "pivot": ()}
    )
    with pytest.raises(DialectDefinitionError) as info:
        RoleProjection.compile(role, SQLITE, rules=unknown)
    assert (info.value.dialect, info.value.problem) == (
        "sqlite",
        "projection rules for unknown clauses ['pivot']",
    )
    stray = dataclasses.replace(rules(), requirements=((Cut("no_such_rule"), frozenset()),))
    with pytest.raises(DialectDefinitionError) as info:
        RoleProjection.compile(role, SQLITE, rules=stray)
    assert (info.value.dialect, info.value.problem) == (
        "sqlite",
        "projection cut no_such_rule selects no rule",
    )


def test_a_banned_clause_the_rules_do_not_list_cuts_nothing() -> None:
    role = Role("r", frozenset({"SELECT"}), "*", frozenset({"cte"}))
    fewer = ProjectionRules(
        rules().statement,
        rules().verb_forms,
        {k: v for k, v in rules().clauses.items() if k != "cte"},
        rules().requirements,
    )
    kept = RoleProjection.compile(role, SQLITE, rules=fewer)
    full = RoleProjection.compile(Role("r", frozenset({"SELECT"}), "*"), SQLITE, rules=fewer)
    assert kept.fingerprint == full.fingerprint


def test_a_requirement_is_met_by_exactly_its_verbs() -> None:
    """``needs <= verbs``: a role with exactly the verbs a production needs keeps it."""
    replace_rule = Cut("insert_verb", "REPLACE")
    needs_both = dataclasses.replace(
        rules(), requirements=((replace_rule, frozenset({"INSERT", "DELETE"})),)
    )
    exactly = Role("r", frozenset({"INSERT", "DELETE"}), "*")
    projected = RoleProjection.compile(exactly, SQLITE, rules=needs_both)
    assert not any(replace_rule.selects(r) for r in projected.cut)
    assert any(replace_rule.selects(r) for r in projected.grammar.rules)
    fewer = Role("r", frozenset({"INSERT"}), "*")
    assert any(
        replace_rule.selects(r) for r in RoleProjection.compile(fewer, SQLITE, rules=needs_both).cut
    )


def test_the_empty_language_error_says_what_was_cut() -> None:
    mute = Role("mute", frozenset(), "*", frozenset({"cte"}))
    with pytest.raises(EmptyLanguageError) as info:
        RoleProjection.compile(mute, SQLITE)
    assert str(info.value) == (
        "the projected language of role 'mute' is empty: verbs [], banned clauses ['cte'] "
        "leave no statement in sqlite"
    )
    with pytest.raises(EmptyLanguageError) as info:
        RoleProjection.compile(mute, SQLITE, words={"TABLE_NAME": []})
    assert str(info.value).endswith(
        "banned clauses ['cte'] and empty lexicon categories ['TABLE_NAME'] "
        "leave no statement in sqlite"
    )
    assert dialect_grammar(SQLITE).terminal_id("TABLE_NAME") >= 0
