"""Schema lexicons by hand: each field of ``full_grants`` and ``SchemaLexicon.build``.

Written for the mutation campaign (``bench/mutation.py``, ``sql.lexicon``):
every object is built inside its test, never in a module fixture (mutmut
attributes a fixture's calls to the first test that uses it, so a fixture-built
lexicon is checked by one test only), and every value is written out by hand.
"""

from __future__ import annotations

import dataclasses

import pytest

from grid_core.errors import LexiconError
from grid_sql.dialects import POSTGRES, SQLITE
from grid_sql.lexicon import SchemaLexicon, full_grants
from grid_sql.policy import ALL, DEFAULT_CTE_NAMES, RoleGrants, example_policy
from grid_sql.schema import SchemaError, SchemaSnapshot, example_schema


def test_full_grants_by_hand() -> None:
    schema = example_schema()
    grants = full_grants(schema)
    assert grants == RoleGrants(
        ALL,
        frozenset({"SELECT", "INSERT", "UPDATE", "DELETE"}),
        frozenset(),
        grants.columns,
        frozenset({"departments", "employees", "orders", "salaries"}),
        DEFAULT_CTE_NAMES,
        schema.fingerprint,
    )
    assert dict(grants.columns) == {
        "departments": ("id", "name", "budget"),
        "employees": ("id", "name", "dept_id", "hired"),
        "orders": ("id", "employee_id", "total", "placed"),
        "salaries": ("employee_id", "amount", "since"),
    }
    assert full_grants(schema, ("recent",)).cte_names == ("recent",)


def test_the_errors_name_the_snapshot() -> None:
    schema = SchemaSnapshot.from_sqlite_ddl("CREATE TABLE t (a);", "shop")
    with pytest.raises(SchemaError) as info:
        SchemaLexicon.build(POSTGRES, schema)
    assert (info.value.source, info.value.reason) == (
        "shop",
        "a sqlite snapshot cannot feed a postgres lexicon",
    )
    other = SchemaSnapshot.from_sqlite_ddl("CREATE TABLE t (b);", "elsewhere")
    with pytest.raises(SchemaError) as info:
        SchemaLexicon.build(SQLITE, schema, full_grants(other))
    assert (info.value.source, info.value.reason) == (
        "shop",
        "role '*' was resolved on another schema",
    )


def test_words_origins_and_quoted_names_by_hand() -> None:
    """A name only a quote can spell is `quoted`; each word maps to the names it spells."""
    schema = SchemaSnapshot.from_sqlite_ddl('CREATE TABLE t ("Home Town" TEXT, ab INT);', "s")
    lex = SchemaLexicon.build(SQLITE, schema, full_grants(schema, ()))
    assert (lex.role, lex.dialect, lex.schema_fingerprint) == ("*", "sqlite", schema.fingerprint)
    assert lex.quoted == frozenset({"Home Town"})
    assert lex.words["TABLE_NAME"] == {b"t", b"T", b'"t"'}
    assert lex.words["COLUMN_NAME"] == {
        b'"Home Town"',
        b'"home town"',
        b'"HOME TOWN"',
        b'"Home town"',
        b"ab",
        b"AB",
        b"Ab",
        b'"ab"',
    }
    assert lex.words["CTE_NAME"] == frozenset()
    assert dict(lex.origins["COLUMN_NAME"]) == {
        b'"Home Town"': {"Home Town"},
        b'"home town"': {"Home Town"},
        b'"HOME TOWN"': {"Home Town"},
        b'"Home town"': {"Home Town"},
        b"ab": {"ab"},
        b"AB": {"ab"},
        b"Ab": {"ab"},
        b'"ab"': {"ab"},
    }


def test_case_forms_are_passed_on() -> None:
    schema = SchemaSnapshot.from_sqlite_ddl("CREATE TABLE Shop (a);", "s")
    lex = SchemaLexicon.build(SQLITE, schema, full_grants(schema, ()), forms=("upper",))
    assert lex.words["TABLE_NAME"] == {b"SHOP", b'"Shop"'}
    assert lex.words["COLUMN_NAME"] == {b"A", b'"a"'}


def test_a_role_that_bans_ctes_has_no_cte_words() -> None:
    schema = example_schema()
    policy = example_policy(schema)
    intern = policy.grants("intern", schema)
    assert "cte" in intern.banned_clauses
    assert SchemaLexicon.build(SQLITE, schema, intern).words["CTE_NAME"] == frozenset()
    analyst = SchemaLexicon.build(SQLITE, schema, policy.grants("analyst", schema))
    assert analyst.words["CTE_NAME"] == {b"cte", b"CTE", b"Cte", b'"cte"'}


def test_a_cte_name_spelling_an_ungranted_relation_names_its_word() -> None:
    """The CTE check runs over every relation of the schema, granted or not."""
    schema = example_schema()
    grants = example_policy(schema).grants("analyst", schema)  # no salaries
    grants = dataclasses.replace(grants, cte_names=("recent", "SALARIES"))
    with pytest.raises(LexiconError) as info:
        SchemaLexicon.build(SQLITE, schema, grants)
    assert (info.value.word, info.value.category, info.value.reason) == (
        b"SALARIES",
        "CTE_NAME",
        "spells relation 'salaries' of the schema",
    )
