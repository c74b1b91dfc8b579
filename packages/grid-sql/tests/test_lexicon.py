"""Schema lexicons (L3): spelling rules, role words, validation errors.

Spider-wide checks (every database, every word through the lexer and the real
SQLite database) are in test_lexicon_spider.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from grid_core.errors import LexiconError
from grid_sql.dialect import Dialect, DialectDefinitionError
from grid_sql.dialects import POSTGRES, SQLITE
from grid_sql.lexicon import SchemaLexicon, case_form, full_grants, spellings
from grid_sql.policy import PolicyBundle, example_policy
from grid_sql.projection import dialect_grammar
from grid_sql.schema import Column, SchemaError, SchemaSnapshot, Table, example_schema

SPELLINGS = {
    # (dialect, name): admitted lexemes
    ("sqlite", "employees"): [b"employees", b"EMPLOYEES", b"Employees", b'"employees"'],
    ("sqlite", "FacID"): [b"FacID", b"facid", b"FACID", b"Facid", b'"FacID"'],
    ("sqlite", "Official_ratings_(millions)"): [
        b'"Official_ratings_(millions)"',
        b'"official_ratings_(millions)"',
        b'"OFFICIAL_RATINGS_(MILLIONS)"',
    ],
    ("sqlite", "Home Town"): [b'"Home Town"', b'"home town"', b'"HOME TOWN"', b'"Home town"'],
    ("sqlite", "order"): [b'"order"', b'"ORDER"', b'"Order"'],  # a keyword: quoted
    ("sqlite", "match"): [b'"match"', b'"MATCH"', b'"Match"'],  # reserved in SQLite
    ("sqlite", 'say "hi"'): [b'"say ""hi"""', b'"SAY ""HI"""', b'"Say ""hi"""'],
    ("sqlite", "Äpfel"): ['"Äpfel"'.encode(), '"ÄPFEL"'.encode()],  # ASCII folding only
    ("postgres", "employees"): [b"employees", b"EMPLOYEES", b"Employees", b'"employees"'],
    ("postgres", "Employees"): [b'"Employees"'],  # bare forms fold to another name
    ("postgres", "user"): [b'"user"'],  # reserved: the quoted catalog spelling only
    ("postgres", "date"): [b"date", b"DATE", b"Date", b'"date"'],  # not reserved in PG
}


@pytest.mark.parametrize(("dialect", "name"), SPELLINGS, ids=lambda x: str(x))
def test_spellings(dialect: str, name: str) -> None:
    d = {"sqlite": SQLITE, "postgres": POSTGRES}[dialect]
    assert spellings(name, d, "COLUMN_NAME") == tuple(SPELLINGS[dialect, name])


def test_sensitive_dialect_admits_the_catalog_spelling_only() -> None:
    sensitive = dataclasses.replace(SQLITE, identifier_case="sensitive")
    assert spellings("Employees", sensitive, "TABLE_NAME") == (b"Employees", b'"Employees"')


def test_case_forms() -> None:
    assert [case_form("faC_iD", f) for f in ("catalog", "lower", "upper", "capitalized")] == [
        "faC_iD",
        "fac_id",
        "FAC_ID",
        "Fac_id",
    ]
    assert spellings("Name", SQLITE, "COLUMN_NAME", forms=("catalog",)) == (b"Name", b'"Name"')


@pytest.mark.parametrize(
    ("name", "reason"),
    [("", "empty name"), ("a\x00b", "no quote form"), ("\ud800x", "not valid Unicode")],
)
def test_unspellable_names(name: str, reason: str) -> None:
    with pytest.raises(LexiconError, match=reason) as info:
        spellings(name, SQLITE, "COLUMN_NAME")
    assert info.value.category == "COLUMN_NAME"


def test_unspellable_catalog_name_is_a_build_error() -> None:
    schema = SchemaSnapshot("sqlite", (Table("t", (Column("ok"), Column("bad\x00name"))),))
    with pytest.raises(LexiconError, match="bad") as info:
        SchemaLexicon.build(SQLITE, schema)
    assert info.value.word == b"bad\x00name" and info.value.category == "COLUMN_NAME"


def test_brackets_cannot_hold_a_bracket_but_double_quotes_can() -> None:
    assert spellings("a]b", SQLITE, "TABLE_NAME")[0] == b'"a]b"'
    only_brackets = dataclasses.replace(SQLITE, identifier_quotes=SQLITE.identifier_quotes[2:])
    with pytest.raises(LexiconError, match="no quote form"):
        spellings("a]b", only_brackets, "TABLE_NAME")


# ---------------------------------------------------------------- role lexicons


@pytest.fixture(scope="module")
def lexicons() -> dict[str, SchemaLexicon]:
    schema = example_schema()
    policy = example_policy(schema)
    return {r: SchemaLexicon.build(SQLITE, schema, policy.grants(r, schema)) for r in policy.roles}


def test_role_tables(lexicons: dict[str, SchemaLexicon]) -> None:
    tables = {
        r: {w for w in lex.words["TABLE_NAME"] if w.islower() and w[:1] != b'"'}
        for r, lex in lexicons.items()
    }
    assert tables["analyst"] == {b"departments", b"employees"}
    assert tables["clerk"] == {b"employees", b"orders"}
    assert tables["admin"] == {b"departments", b"employees", b"orders", b"salaries"}
    assert tables["intern"] == {b"departments"}
    for lex in lexicons.values():
        assert not {b"salaries", b"SALARIES", b"Salaries", b'"salaries"'} & (
            lex.words["TABLE_NAME"] if lex.role != "admin" else set()
        )


def test_role_columns_are_the_union_of_grants(lexicons: dict[str, SchemaLexicon]) -> None:
    analyst, clerk = (
        lexicons["analyst"].words["COLUMN_NAME"],
        lexicons["clerk"].words["COLUMN_NAME"],
    )
    assert b"hired" in analyst and b"budget" in analyst
    assert b"hired" not in clerk and b"budget" not in clerk  # not granted anywhere to the clerk
    assert {b"id", b"name", b"dept_id", b"employee_id", b"total", b"placed"} <= clerk
    assert b"amount" not in analyst | clerk  # salaries' columns
    assert b"amount" in lexicons["admin"].words["COLUMN_NAME"]


def test_cte_words(lexicons: dict[str, SchemaLexicon]) -> None:
    assert lexicons["analyst"].words["CTE_NAME"] == {b"cte", b"CTE", b"Cte", b'"cte"'}
    assert lexicons["intern"].words["CTE_NAME"] == frozenset()  # the intern bans cte


def test_origins_map_words_to_catalog_names(lexicons: dict[str, SchemaLexicon]) -> None:
    admin = lexicons["admin"]
    assert admin.origins["TABLE_NAME"][b"EMPLOYEES"] == {"employees"}
    assert admin.origins["COLUMN_NAME"][b'"id"'] == {"id"}
    assert admin.quoted == frozenset()


def test_word_lists_feed_build_lexicon(lexicons: dict[str, SchemaLexicon]) -> None:
    lex = lexicons["clerk"]
    lists = lex.word_lists()
    assert set(lists) == {"TABLE_NAME", "COLUMN_NAME", "CTE_NAME", "FUNCTION_NAME"}
    assert lists["TABLE_NAME"] == sorted(lex.words["TABLE_NAME"])
    table = dialect_grammar(SQLITE).terminal_id("TABLE_NAME")
    assert lex.lexicon.words[table] == lex.words["TABLE_NAME"]


def test_fingerprints(lexicons: dict[str, SchemaLexicon]) -> None:
    schema = example_schema()
    again = SchemaLexicon.build(SQLITE, schema, example_policy().grants("analyst", schema))
    assert again.fingerprint == lexicons["analyst"].fingerprint
    assert lexicons["analyst"].fingerprint != lexicons["clerk"].fingerprint
    assert again.schema_fingerprint == schema.fingerprint


def test_cte_name_spelling_a_relation_is_an_error() -> None:
    schema = example_schema()
    with pytest.raises(LexiconError, match="spells relation 'orders'") as info:
        SchemaLexicon.build(SQLITE, schema, full_grants(schema, ("recent", "ORDERS")))
    assert info.value.category == "CTE_NAME"


@pytest.mark.parametrize(
    ("dialect", "cte"),
    [(SQLITE, "sqlite_master"), (SQLITE, "SQLite_Schema"), (SQLITE, "pragma_table_list"),
     (SQLITE, "dbstat"),
     (POSTGRES, "pg_stats"), (POSTGRES, "PG_ROLES")],
)  # fmt: skip
def test_cte_name_of_the_catalogs_own_relations_is_an_error(dialect: Dialect, cte: str) -> None:
    """A CTE name stands where a table goes without its WITH: ``SELECT * FROM
    sqlite_master`` read the DDL of every table, ungranted ones too, when a role's
    ``cte_names`` held it (no snapshot lists the catalog's own relations)."""
    schema = SchemaSnapshot(dialect.name, (Table("t", (Column("a"),)),))
    with pytest.raises(LexiconError, match="catalog's own relations") as info:
        SchemaLexicon.build(dialect, schema, full_grants(schema, ("recent", cte)))
    assert info.value.category == "CTE_NAME"
    SchemaLexicon.build(dialect, schema, full_grants(schema, ("recent", "my_" + cte)))


def test_mismatches() -> None:
    schema = example_schema()
    with pytest.raises(SchemaError, match="sqlite snapshot cannot feed a postgres lexicon"):
        SchemaLexicon.build(POSTGRES, schema)
    other = SchemaSnapshot.from_sqlite_ddl("CREATE TABLE employees (id);")
    grants = PolicyBundle.loads(
        'version = 1\n[roles.r]\nverbs = ["SELECT"]\ntables = ["employees"]\n'
    ).grants("r", other)
    with pytest.raises(SchemaError, match="resolved on another schema"):
        SchemaLexicon.build(SQLITE, schema, grants)


def test_a_word_outside_its_pattern_is_a_build_error() -> None:
    """The precondition of DESIGN.md section 3 is checked by build_lexicon, not assumed."""
    careless = Dialect(
        name="sqlite",
        grammar_file=SQLITE.grammar_file,
        keywords=SQLITE.keywords,
        functions=SQLITE.functions,
        keyword_functions=SQLITE.keyword_functions,
        type_names=SQLITE.type_names,
        word_classes=SQLITE.word_classes,
        # reserves `home` in the grammar but does not quote it (not a reserved word):
        # check_invariants would refuse this dialect, the lexicon build does too
        never_identifiers=frozenset({"home"}),
        identifier_quotes=SQLITE.identifier_quotes,
    )
    schema = SchemaSnapshot("sqlite", (Table("t", (Column("Home"),)),))
    with pytest.raises(LexiconError, match="not matched by the pattern of COLUMN_NAME") as info:
        SchemaLexicon.build(careless, schema)
    assert info.value.word in {b"Home", b"home", b"HOME"}
    with pytest.raises(DialectDefinitionError, match="never_identifiers"):
        careless.check_invariants()


# ---------------------------------------------------------------- functions (issue 15)


def test_function_grants_are_a_lexicon_category() -> None:
    """A role's granted functions are FUNCTION_NAME words in three case forms; the
    default leaves randomblob, zeroblob, printf and format out; every function granted
    adds no category (the word class is then exact); none granted is an empty category,
    and the projection cuts function calls. Fails if a function outside the grant is a
    word, or a granted one is missing."""
    from grid_sql.cli import language_verdict
    from grid_sql.projection import RoleProjection

    schema = example_schema()
    intern = SchemaLexicon.build(SQLITE, schema, example_policy().grants("intern", schema))
    calls = intern.words["FUNCTION_NAME"]
    assert {b"substr(", b"SUBSTR(", b"Substr(", b"random(", b"replace("} <= calls
    assert not {w for w in calls if w.lower().startswith((b"randomblob", b"zeroblob"))}
    assert not {w for w in calls if w.lower() in (b"printf(", b"format(")}
    assert len(calls) == 3 * len(SQLITE.default_functions)
    assert intern.origins["FUNCTION_NAME"][b"Upper("] == {"upper"}
    assert "FUNCTION_NAME" not in SchemaLexicon.build(SQLITE, schema).words  # full grants
    text = 'version = 1\n[roles.r]\nverbs = ["SELECT"]\ntables = "*"\nfunctions = %s\n'
    for listed, words in (('"*"', None), ("[]", 0), ('["Upper"]', 3)):
        policy = PolicyBundle.loads(text % listed, "p.toml", schema)
        lex = SchemaLexicon.build(SQLITE, schema, policy.grants("r", schema))
        got = lex.words.get("FUNCTION_NAME")
        assert (None if got is None else len(got)) == words
        projection = RoleProjection.compile(policy.role("r"), SQLITE, words=lex.words)
        upper = language_verdict(projection, lex, SQLITE, b"SELECT upper(name) FROM orders;")
        assert (upper is None) == (words != 0)
        rb = language_verdict(projection, lex, SQLITE, b"SELECT randomblob(9) FROM orders;")
        assert (rb is None) == (words is None)
