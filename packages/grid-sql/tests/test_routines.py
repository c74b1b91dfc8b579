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

from collections.abc import Iterator

import pytest
from pg_server import Server, running_server

from grid_sql.policy import PolicyBundle, PolicyReferenceError
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


@pytest.fixture(scope="module")
def postgres() -> Iterator[Server]:
    with running_server(SECRET + ROUTINES + "CREATE DATABASE plain;") as server:
        server.run(SECRET, "-d", "plain")
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
        with pytest.raises(PolicyReferenceError, match="user-defined routines"):
            policy(READER, s)
        policy(f'{READER}\nroutines = "*"', s)
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
