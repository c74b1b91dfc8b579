"""User-defined routines a statement runs by the names it writes (PostgreSQL).

PostgreSQL resolves a function or operator over every schema of the search
path, and an exact match beats a built-in that needs a cast: a user's
`lower(integer)` or `=(integer, numeric)` runs where a role's statement writes
`lower(id)` or `id = 1.5`, and can read what the role is not granted. The
snapshot lists such routines (`SchemaSnapshot.routines`); the policy refuses a
role that does not name each one it can reach (`routines`). DuckDB's macros
are tested in grid-duckdb.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from pg_server import Server, running_server

from grid_sql.dialects.postgres import (
    BOUND_FUNCTIONS,
    BOUND_OPERATORS,
    BOUND_TYPES,
    POSTGRES,
)
from grid_sql.policy import PolicyBundle, PolicyReferenceError
from grid_sql.policy_init import starter_policy
from grid_sql.projection import dialect_grammar
from grid_sql.schema import Routine, SchemaError, SchemaSnapshot, example_schema

SECRET = """
CREATE TABLE t (id integer, x text, n numeric, m money);
INSERT INTO t VALUES (1, 'a', 1.5, 2), (2, 'b', 2.5, 3);
CREATE TABLE salaries (secret text);
INSERT INTO salaries VALUES ('TOPSECRET');
"""
ROUTINES = """
CREATE FUNCTION public.lower(integer) RETURNS text LANGUAGE sql
    AS 'SELECT max(secret) FROM salaries';
CREATE FUNCTION public.leak(integer, numeric) RETURNS boolean LANGUAGE sql
    AS 'SELECT (SELECT max(secret) FROM salaries) IS NOT NULL';
CREATE OPERATOR public.= (leftarg = integer, rightarg = numeric, function = public.leak);
CREATE SCHEMA other;
CREATE FUNCTION other.repeat(integer) RETURNS text LANGUAGE sql AS 'SELECT ''r''';
CREATE FUNCTION public.max(integer) RETURNS text LANGUAGE sql AS 'SELECT ''m''';
CREATE TYPE mood AS ENUM ('ok');
CREATE FUNCTION public.to_mood(integer) RETURNS mood LANGUAGE sql AS 'SELECT ''ok''::mood';
CREATE CAST (integer AS mood) WITH FUNCTION public.to_mood(integer) AS IMPLICIT;
CREATE FUNCTION public.unrelated(integer) RETURNS integer LANGUAGE sql AS 'SELECT 1';
CREATE PROCEDURE public.upper(integer) LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION public.mhash(money) RETURNS integer LANGUAGE plpgsql
    AS 'BEGIN RAISE EXCEPTION ''mhash ran''; END';
CREATE OPERATOR CLASS public.money_hash_ops DEFAULT FOR TYPE money USING hash
    AS OPERATOR 1 = (money, money), FUNCTION 1 public.mhash(money);
CREATE FUNCTION public.refuse(integer) RETURNS boolean LANGUAGE plpgsql
    AS 'BEGIN RAISE EXCEPTION ''refuse ran''; END';
CREATE DOMAIN public.text AS pg_catalog.text CHECK (public.refuse(length(VALUE)));
"""
EXPECTED = (
    Routine("CAST (integer AS mood)", "cast", ""),
    Routine("other.repeat(integer)", "function", "repeat"),
    Routine("public.=(integer, numeric)", "operator", "="),
    Routine("public.lower(integer)", "function", "lower"),
    Routine("public.max(integer)", "function", "max"),
    Routine("public.money_hash_ops USING hash", "operator family", ""),
    Routine("public.text", "type", "text"),
)


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# One of each routine of every name a statement writes (database `names`).
NAMES = "\n".join(
    [
        "CREATE TABLE t (id integer);",
        "CREATE FUNCTION public.opf(text, integer) RETURNS boolean LANGUAGE sql AS 'SELECT true';",
        "CREATE FUNCTION public.neg(text) RETURNS text LANGUAGE sql AS 'SELECT $1';",
        *(
            f"CREATE OPERATOR public.{op} (leftarg = text, rightarg = integer, function = opf);"
            for op in BOUND_OPERATORS
        ),
        "CREATE OPERATOR public.- (rightarg = text, function = public.neg);",  # prefix
        *(
            f"CREATE FUNCTION public.{quoted(f)}(text, text, text, text, text, text, text, "
            "text) RETURNS text LANGUAGE sql AS 'SELECT $1';"
            for f in BOUND_FUNCTIONS
        ),
        *(f"CREATE DOMAIN other.{quoted(t)} AS integer;" for t in BOUND_TYPES),
        # a window function (C: the built-in rank's), named like one
        "CREATE FUNCTION other.rank() RETURNS bigint LANGUAGE internal WINDOW AS 'window_rank';",
        # types named like functions: a one-argument call may be a cast to them
        "CREATE TYPE other.ascii AS RANGE (subtype = integer);",
        "CREATE TYPE other.chr AS ENUM ('a');",  # enum_in is the built-in's: no routine
        "CREATE TYPE other.initcap AS (d other.int4);",  # a field of a user's type
        "CREATE TYPE other.reverse AS (i integer);",  # built-in fields: no routine
        # a support function added to a built-in operator family
        "CREATE FUNCTION public.cmp4t(int4, text) RETURNS integer LANGUAGE sql AS 'SELECT 0';",
        "ALTER OPERATOR FAMILY integer_ops USING btree ADD FUNCTION 1 (int4, text) cmp4t;",
    ]
)


@pytest.fixture(scope="module")
def postgres() -> Iterator[Server]:
    ddl = SECRET + ROUTINES + "CREATE DATABASE plain; CREATE DATABASE names;"
    with running_server(ddl) as server:
        server.run(SECRET, "-d", "plain")
        made = server.run("CREATE SCHEMA other;\n" + NAMES, "-d", "names")
        assert "ERROR" not in made.stderr, made.stderr
        yield server


def pg_snapshot(server: Server, dbname: str = "postgres") -> SchemaSnapshot:
    return SchemaSnapshot.from_postgres(
        host="127.0.0.1", port=server.port, user="postgres", dbname=dbname, psql=server.psql
    )


def policy(role: str, schema: SchemaSnapshot) -> PolicyBundle:
    return PolicyBundle.loads(f"version = 1\n[roles.r]\n{role}\n", "p.toml", schema)


READER = 'verbs = ["SELECT"]\ntables = ["t"]'


def test_the_routines_run_for_a_role_granted_only_t(postgres: Server) -> None:
    """The hole, run on the server: statements a role granted only `t` may write
    run a user's function and operator (which read `salaries`), a hash operator
    class's function (GROUP BY), and a domain's check where the search path puts
    `public` before pg_catalog (a review found the last two)."""
    for db, lowered, equal in (("postgres", "TOPSECRET", "1\n2"), ("plain", "ERROR", "")):
        run = postgres.run("SELECT lower(id) FROM t;", "-d", db)
        assert lowered in run.stdout + run.stderr
        assert postgres.run("SELECT id FROM t WHERE id = 1.5;", "-d", db).stdout.strip() == equal
    grouped = "SET enable_sort = off; SELECT m FROM t GROUP BY m;"
    assert "mhash ran" in postgres.run(grouped).stderr
    assert "mhash ran" not in postgres.run(grouped, "-d", "plain").stderr
    cast = "SELECT CAST(id AS text) FROM t;"
    assert "refuse ran" not in postgres.run(cast).stderr  # pg_catalog first: the built-in
    assert "refuse ran" in postgres.run(f"SET search_path = public, pg_catalog; {cast}").stderr


def test_the_snapshot_lists_what_a_statement_can_reach(postgres: Server) -> None:
    """Functions named like the dialect's (in any schema, aggregates' names too),
    operators named like the grammar's, casts with a function, types named like
    the grammar's, operator families a user made; not a function no statement
    names, nor a procedure, nor a built-in."""
    s = pg_snapshot(postgres)
    assert s.routines == EXPECTED
    assert pg_snapshot(postgres, "plain").routines == ()
    assert SchemaSnapshot.from_json(s.to_json()).routines == EXPECTED


def test_every_name_a_statement_writes_is_read(postgres: Server) -> None:
    """A user's operator of each name the grammar writes or looks up (prefix too), a
    function of each function name (a window function too), a type of each type
    name, types named like functions whose conversion runs a user's code, a
    support function added to a built-in family: each is a routine."""
    s = pg_snapshot(postgres, "names")
    listed = {(r.kind, r.word) for r in s.routines or ()}
    names = {r.name for r in s.routines or ()}
    assert {("operator", op) for op in BOUND_OPERATORS} <= listed
    assert "public.-(NONE, text)" in names
    assert {("function", f) for f in BOUND_FUNCTIONS} <= listed
    assert "other.rank()" in names
    assert {("type", t) for t in BOUND_TYPES} <= listed
    assert {("type", "ascii"), ("type", "initcap")} <= listed
    assert not {("type", "chr"), ("type", "reverse")} & listed
    assert "pg_catalog.integer_ops USING btree" in names
    with pytest.raises(PolicyReferenceError, match=r"and \d+ more\. Name each"):
        policy(READER, s)


def test_the_bound_names_are_the_grammars() -> None:
    """BOUND_OPERATORS is every operator the PostgreSQL grammar writes (`!=` is
    `<>`) and those its syntax looks up by name; BOUND_FUNCTIONS and BOUND_TYPES
    the names of its calls and types: a grammar that gains one fails here until
    the snapshot reads it."""
    written = {
        re.sub(r"\\(.)", r"\1", t.pattern)
        for t in dialect_grammar(POSTGRES).terminals
        if t.literal and re.fullmatch(r"(?:\\?[-+*/<>=~!@#%^&|])+", t.pattern)
    }
    syntax = {"~~", "!~~", "~~*", "!~~*", "~", "!~"}  # LIKE, ILIKE, SIMILAR TO
    assert (written - {"!="}) | syntax == set(BOUND_OPERATORS)
    # the function words, the keyword aggregates, substring(a, b, c) (unqualified in
    # gram.y; EXTRACT, TRIM and the rest name pg_catalog's)
    aggregates = {"count", "sum", "avg", "min", "max"}
    assert set(BOUND_FUNCTIONS) == set(POSTGRES.functions) | aggregates | {"substring"}
    classes = dict(POSTGRES.word_classes)
    types = {*POSTGRES.type_names, *classes["SIZED_TYPE_NAME"], *classes["SCALED_TYPE_NAME"]}
    assert set(BOUND_TYPES) == types


def test_a_type_named_like_a_function_is_cast_to(postgres: Server) -> None:
    """A one-argument call that no function matches exactly is a cast to the type
    of the function's name (a second review found it): `upper(id)` checks the
    domain `upper`, and `upper('abc')` too, though `upper(text)` would take it."""
    ddl = (
        "CREATE FUNCTION public.loud(integer) RETURNS boolean LANGUAGE plpgsql "
        "AS 'BEGIN RAISE EXCEPTION ''loud ran''; END';"
        "CREATE DOMAIN public.upper AS text CHECK (public.loud(length(VALUE)));"
    )
    postgres.run(ddl, "-d", "plain")
    try:
        for sql in ("SELECT upper(id) FROM t;", "SELECT upper('abc') FROM t;"):
            assert "loud ran" in postgres.run(sql, "-d", "plain").stderr
        s = pg_snapshot(postgres, "plain")
        assert s.routines == (Routine("public.upper", "type", "upper"),)
        with pytest.raises(PolicyReferenceError, match=r"type public\.upper\. Name each"):
            policy(f'{READER}\nfunctions = ["lower"]', s)  # in reach without the function
    finally:
        postgres.run("DROP DOMAIN public.upper; DROP FUNCTION public.loud;", "-d", "plain")


def test_routines_are_part_of_a_roles_identity() -> None:
    """The policy's fingerprint covers a role's routines (docs/policy.md, Identity);
    a snapshot built in code checks its routines as JSON does."""
    base = PolicyBundle.loads(f"version = 1\n[roles.r]\n{READER}\n")
    named = PolicyBundle.loads(f'version = 1\n[roles.r]\n{READER}\nroutines = ["lower"]\n')
    every = PolicyBundle.loads(f'version = 1\n[roles.r]\n{READER}\nroutines = "*"\n')
    assert len({base.fingerprint, named.fingerprint, every.fingerprint}) == 3
    with pytest.raises(SchemaError, match="unknown kind 'trigger'"):
        SchemaSnapshot("postgres", (), routines=(Routine("f", "trigger"),))  # type: ignore[arg-type]


def test_a_role_names_the_routines_it_may_run(postgres: Server) -> None:
    s = pg_snapshot(postgres)
    with pytest.raises(PolicyReferenceError, match="has 6 user-defined routines") as e:
        policy(READER, s)  # `repeat` is not a default function: out of reach
    assert "cast CAST (integer AS mood), operator public.=(integer, numeric)" in str(e.value)
    assert "operator family public.money_hash_ops USING hash, type public.text." in str(e.value)
    always = '"CAST (integer AS mood)", "=", "public.money_hash_ops USING hash", "text"'
    named = f'[{always}, "lower", "public.max(integer)"]'
    policy(f"{READER}\nroutines = {named}", s)
    with pytest.raises(PolicyReferenceError, match=r"function other\.repeat\(integer\)"):
        policy(f'{READER}\nfunctions = "*"\nroutines = {named}', s)
    # `lower` is out of reach without the function; `max` is a keyword's aggregate
    upper = f'{READER}\nfunctions = ["upper"]\nroutines = [{always}'
    policy(upper + ', "max"]', s)
    with pytest.raises(PolicyReferenceError, match=r"function public\.max\(integer\)\."):
        policy(upper + "]", s)
    policy(f'{READER}\nroutines = "*"', s)
    with pytest.raises(PolicyReferenceError, match="no user-defined routine 'unrelated'"):
        policy(f'{READER}\nroutines = ["unrelated"]', s)
    with pytest.raises(PolicyReferenceError, match="no user-defined routine 'LOWER'"):
        policy(f'{READER}\nroutines = ["LOWER"]', s)  # PostgreSQL's names are exact


def test_an_extensions_routines_are_listed(postgres: Server) -> None:
    """citext's operators and its overloads of `max`, `replace`, ... are routines
    (C functions of an extension: still not the built-ins the policy knows)."""
    postgres.run("CREATE EXTENSION citext;", "-d", "plain")
    try:
        s = pg_snapshot(postgres, "plain")
        kinds = {r.kind for r in s.routines or ()}
        words = {r.word for r in s.routines or ()}
        assert kinds == {"function", "operator", "cast", "operator family"}
        assert {"=", "<", "~~", "max", "replace"} <= words
        assert {r.extension for r in s.routines or ()} == {"citext"}
        assert SchemaSnapshot.from_json(s.to_json()).routines == s.routines
        with pytest.raises(PolicyReferenceError, match=r"\(extension citext\)"):
            policy(READER, s)
        policy(f'{READER}\nroutines = "*"', s)
        policy(f'{READER}\nroutines = ["extension citext"]', s)
        with pytest.raises(PolicyReferenceError, match="no user-defined routine 'extension hst"):
            policy(f'{READER}\nroutines = ["extension citext", "extension hstore"]', s)
        starter = starter_policy(s)
        assert '"extension citext",  # its 32 routines' in starter
        PolicyBundle.loads(starter, "starter.toml", s)
    finally:
        postgres.run("DROP EXTENSION citext;", "-d", "plain")


def test_a_snapshot_that_does_not_say_refuses_every_role() -> None:
    """A JSON snapshot of a dialect whose databases store routines, written before
    they were read, does not say which there are: every role is refused, reading
    ones too. SQLite stores none: its snapshots need no list."""
    data = {**example_schema().to_dict(), "dialect": "postgres"}
    unsaid = SchemaSnapshot.from_dict(data)
    assert unsaid.routines is None
    with pytest.raises(PolicyReferenceError, match="does not say which user-defined routines"):
        policy('verbs = ["SELECT"]\ntables = ["employees"]', unsaid)
    said = SchemaSnapshot.from_dict({**data, "routines": []})
    policy('verbs = ["SELECT"]\ntables = ["employees"]', said)
    assert '"routines": []' in said.to_json()
    assert example_schema().routines == ()
    assert "routines" not in example_schema().to_json()
    assert SchemaSnapshot("postgres", ()).routines is None  # built in code: says nothing
    assert SchemaSnapshot("sqlite", ()).routines == ()
    policy('verbs = ["SELECT"]\ntables = ["employees"]\nroutines = "*"', unsaid)


@pytest.mark.parametrize(
    ("routines", "message"),
    [
        ({}, "routines must be a list"),
        ([{"name": "f", "kind": "trigger"}], r"routines\[0\]\.kind must be one of"),
        ([{"name": "f", "kind": "function", "extra": 1}], r"routines\[0\]"),
        ([{"name": "", "kind": "function"}], "an empty name"),
        ([{"name": 3, "kind": "function"}], r"routines\[0\]\.name"),
    ],
)
def test_bad_routines_name_the_entry(routines: object, message: str) -> None:
    data = {**example_schema().to_dict(), "dialect": "postgres", "routines": routines}
    with pytest.raises(SchemaError, match=message):
        SchemaSnapshot.from_dict(data)
