"""Schema snapshots: SQLite files (read-only), SQLite DDL, PostgreSQL, JSON; fingerprints.

The PostgreSQL tests start a throw-away server (the fixture below is a copy of
the one in test_dialect_postgres.py: binaries from /usr/lib/postgresql/*/bin or
$GRID_PG_BIN, a temp data directory, 127.0.0.1 and a free port; as root the
server runs as the `postgres` user). Without binaries they are skipped, unless
GRID_REQUIRE_POSTGRES=1.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
from pg_server import Server, running_server

from grid_sql.dialects import POSTGRES
from grid_sql.lexicon import SchemaLexicon
from grid_sql.schema import Column, SchemaError, SchemaSnapshot, Table, example_schema

SPIDER = Path(__file__).resolve().parents[4] / "shared" / "data" / "spider" / "database"


def company_json() -> str:
    return resources.files("grid_sql.examples").joinpath("company.schema.json").read_text()


def sqlite_file(tmp_path: Path, ddl: str, name: str = "db.sqlite") -> Path:
    path = tmp_path / name
    db = sqlite3.connect(path)
    db.executescript(ddl)
    db.commit()
    db.close()
    return path


# ---------------------------------------------------------------- SQLite


def test_example_schema() -> None:
    s = example_schema()
    assert s.dialect == "sqlite" and s.name == "company"
    assert s.table_names == ("departments", "employees", "orders", "salaries")
    assert s.table("employees") is not None
    assert s.table("EMPLOYEES") is s.table("employees")  # SQLite: ASCII case-insensitive
    employees = s.table("employees")
    assert employees is not None
    assert employees.column_names == ("id", "name", "dept_id", "hired")  # ordinal order
    assert employees.columns[0] == Column("id", "INTEGER")
    s.check_invariants()


def test_example_json_fixture_is_the_example_schema() -> None:
    assert SchemaSnapshot.from_json(company_json()) == example_schema()
    assert example_schema().to_json() == company_json()


def test_from_sqlite_file_is_read_only(tmp_path: Path) -> None:
    path = sqlite_file(
        tmp_path,
        "CREATE TABLE b (x INTEGER, y); CREATE TABLE a (z TEXT);"
        "CREATE VIEW v AS SELECT x FROM b; CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT);",
    )
    before = (path.read_bytes(), path.stat().st_mtime_ns, sorted(os.listdir(tmp_path)))
    s = SchemaSnapshot.from_sqlite(path)
    assert (path.read_bytes(), path.stat().st_mtime_ns, sorted(os.listdir(tmp_path))) == before
    assert s.name == "db"
    assert s.table_names == ("a", "b", "t", "v")  # sorted; sqlite_sequence left out
    v = s.table("v")
    assert v is not None and v.kind == "view" and v.column_names == ("x",)
    b = s.table("b")
    assert b is not None and b.columns == (Column("x", "INTEGER"), Column("y", ""))


def test_from_sqlite_odd_path(tmp_path: Path) -> None:
    odd = tmp_path / "a dir?#%"
    odd.mkdir()
    path = sqlite_file(odd, "CREATE TABLE t (c);", "my db.sqlite")
    assert SchemaSnapshot.from_sqlite(path).table_names == ("t",)


def test_from_sqlite_errors(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="no such file"):
        SchemaSnapshot.from_sqlite(tmp_path / "missing.sqlite")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(SchemaError, match=r"junk\.sqlite"):
        SchemaSnapshot.from_sqlite(junk)
    with pytest.raises(SchemaError, match="syntax error"):
        SchemaSnapshot.from_sqlite_ddl("CREATE TABLE (;", "broken")
    # A relation whose name is not UTF-8 (a UnicodeDecodeError traceback before).
    odd = tmp_path / "odd.sqlite"
    con = sqlite3.connect(odd)
    con.execute("CREATE TABLE t (x INT)")
    con.execute("PRAGMA writable_schema = ON")
    con.execute(
        "UPDATE sqlite_master SET name = CAST(X'61FF62' AS TEXT), "
        "sql = 'CREATE TABLE \"' || CAST(X'61FF62' AS TEXT) || '\" (x INT)'"
    )
    con.commit()
    con.close()
    with pytest.raises(SchemaError, match="name is not UTF-8"):
        SchemaSnapshot.from_sqlite(odd)


@pytest.mark.skipif(
    not SPIDER.is_dir(), reason=f"Spider databases not found at {SPIDER} (not vendored)"
)
def test_spider_database_snapshot() -> None:
    s = SchemaSnapshot.from_sqlite(SPIDER / "orchestra" / "orchestra.sqlite")
    assert s.name == "orchestra"
    assert s.table_names == ("conductor", "orchestra", "performance", "show")
    performance = s.table("performance")
    assert performance is not None
    assert "Official_ratings_(millions)" in performance.column_names


# ---------------------------------------------------------------- identity


def test_fingerprint_ignores_catalog_order_and_label(tmp_path: Path) -> None:
    one = sqlite_file(tmp_path, "CREATE TABLE a (x INT, y TEXT); CREATE TABLE b (z);", "one.db")
    two = sqlite_file(tmp_path, "CREATE TABLE b (z); CREATE TABLE a (x INT, y TEXT);", "two.db")
    s1, s2 = SchemaSnapshot.from_sqlite(one), SchemaSnapshot.from_sqlite(two)
    assert s1.name != s2.name
    assert s1 == s2 and s1.fingerprint == s2.fingerprint
    tables = s1.tables
    assert SchemaSnapshot("sqlite", tables[::-1]).fingerprint == s1.fingerprint


@pytest.mark.parametrize(
    "change",
    [
        "CREATE TABLE a (x INT, y INT); CREATE TABLE b (z);",  # a column type
        "CREATE TABLE a (y TEXT, x INT); CREATE TABLE b (z);",  # column order is content
        "CREATE TABLE a (x INT, y TEXT); CREATE TABLE c (z);",  # a relation name
        "CREATE TABLE a (x INT, y TEXT); CREATE VIEW b AS SELECT 1 AS z;",  # a kind
        "CREATE TABLE a (x INT, y TEXT, w); CREATE TABLE b (z);",  # a column more
    ],
)
def test_fingerprint_sees_catalog_changes(change: str) -> None:
    base = SchemaSnapshot.from_sqlite_ddl("CREATE TABLE a (x INT, y TEXT); CREATE TABLE b (z);")
    assert SchemaSnapshot.from_sqlite_ddl(change).fingerprint != base.fingerprint


def test_dialect_is_fingerprinted() -> None:
    s = example_schema()
    assert dataclasses.replace(s, dialect="postgres").fingerprint != s.fingerprint


def test_snapshot_is_immutable() -> None:
    s = example_schema()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.tables = ()  # type: ignore[misc]
    assert isinstance(s.tables, tuple) and isinstance(s.tables[0].columns, tuple)


def test_duplicate_names_follow_the_dialect_case_rule() -> None:
    upper, lower = Table("T", (Column("a"),)), Table("t", (Column("a"),))
    with pytest.raises(SchemaError, match="one name"):
        SchemaSnapshot("sqlite", (upper, lower))
    both = SchemaSnapshot("postgres", (upper, lower))  # "T" and t are two relations
    assert both.table("T") is upper and both.table("t") is lower
    assert both.table("TT") is None
    with pytest.raises(SchemaError, match="duplicate column"):
        SchemaSnapshot("sqlite", (Table("t", (Column("a"), Column("A"))),))
    with pytest.raises(SchemaError, match="unknown SQL dialect"):
        SchemaSnapshot("oracle", (upper,))
    with pytest.raises(SchemaError, match="the name '\\\\udce9' is not valid Unicode text"):
        SchemaSnapshot("sqlite", (Table("t", (Column("\udce9"),)),))


def test_sqlite_folds_ascii_only() -> None:
    s = SchemaSnapshot("sqlite", (Table("Äpfel", (Column("x"),)),))
    assert s.table("Äpfel") is not None
    assert s.table("äpfel") is None  # SQLite folds ASCII letters only
    assert s.table("äPFEL") is None and s.table("ÄPFEL") is not None


# ---------------------------------------------------------------- JSON


def test_json_round_trip(tmp_path: Path) -> None:
    s = SchemaSnapshot(
        "postgres",
        (
            Table('Odd "name"\twith tab', (Column("é", "text"), Column("x", "")), "view"),
            Table("empty", ()),
        ),
        "weird",
    )
    again = SchemaSnapshot.from_json(s.to_json())
    assert again == s and again.name == "weird" and again.fingerprint == s.fingerprint
    assert again.to_json() == s.to_json()
    s.save(tmp_path / "s.json")
    assert SchemaSnapshot.load(tmp_path / "s.json") == s


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "line 1"),
        ("[]", "snapshot must be an object"),
        ('{"format": "grid.schema/2", "dialect": "sqlite", "tables": []}', "format must be"),
        ('{"format": "grid.schema/1", "dialect": "sqlite", "tables": [], "x": 1}', "unknown keys"),
        ('{"format": "grid.schema/1", "dialect": 3, "tables": []}', "dialect must be a string"),
        ('{"format": "grid.schema/1", "dialect": "sqlite", "tables": {}}', "tables must be a list"),
        (
            '{"format": "grid.schema/1", "dialect": "sqlite", '
            '"tables": [{"name": "t", "kind": "index", "columns": []}]}',
            r"tables\[0\].kind",
        ),
        (
            '{"format": "grid.schema/1", "dialect": "sqlite", '
            '"tables": [{"name": "t", "columns": [{"name": 1}]}]}',
            r"tables\[0\].columns\[0\].name must be a string",
        ),
        (
            '{"format": "grid.schema/1", "dialect": "sqlite", '
            '"tables": [{"name": "t", "columns": [{"name": "\\udce9"}]}]}',
            r"tables\[0\].columns\[0\].name is not valid Unicode text: '\\udce9'",
        ),
        (
            '{"format": "grid.schema/1", "dialect": "sqlite", '
            '"tables": [{"name": "\\ud800x", "columns": []}]}',
            r"tables\[0\].name is not valid Unicode text: '\\ud800x'",
        ),
        (
            '{"format": "grid.schema/1", "dialect": "sqlite", "dialect": "postgres", "tables": []}',
            "the key 'dialect' is given twice",
        ),
        (  # a ValueError from int(): a traceback before
            '{"format": "grid.schema/1", "dialect": "sqlite", "name": ' + "9" * 5000 + "}",
            "Exceeds the limit",
        ),
        (
            '{"format": "grid.schema/1", "dialect": "sqlite", '
            '"tables": [{"name": "t", "columns": [{"name": "a", "hidden": 1}]}]}',
            r"tables\[0\].columns\[0\].hidden must be true or false, not 1",
        ),
    ],
)
def test_json_errors(text: str, message: str) -> None:
    with pytest.raises(SchemaError, match=message) as info:
        SchemaSnapshot.from_json(text, "bad.json")
    assert info.value.source == "bad.json"


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match=r"missing\.json"):
        SchemaSnapshot.load(tmp_path / "missing.json")


# ---------------------------------------------------------------- a real PostgreSQL

PG_SCHEMA = """
CREATE TABLE departments (id integer PRIMARY KEY, name text NOT NULL, budget numeric(12,2));
CREATE TABLE employees (id integer PRIMARY KEY, name text, dept_id integer, hired date);
CREATE TABLE "Mixed Case" ("Col A" integer, "select" text, "tab\tname" text, "ÿ" int);
CREATE TABLE "user" (id integer);
CREATE TABLE nocols ();
CREATE VIEW staff AS SELECT id, name FROM employees;
CREATE SCHEMA other;
CREATE TABLE other.hidden (secret text);
"""


@pytest.fixture(scope="module")
def postgres() -> Iterator[Server]:
    with running_server(PG_SCHEMA) as server:
        yield server


def snapshot(server: Server, schema: str = "public") -> SchemaSnapshot:
    return SchemaSnapshot.from_postgres(
        host="127.0.0.1",
        port=server.port,
        user="postgres",
        dbname="postgres",
        schema=schema,
        psql=server.psql,
    )


def test_postgres_snapshot(postgres: Server) -> None:
    s = snapshot(postgres)
    assert s.dialect == "postgres" and s.name == "postgres"
    assert s.table_names == ("Mixed Case", "departments", "employees", "nocols", "staff", "user")
    mixed = s.table("Mixed Case")
    assert mixed is not None
    assert mixed.column_names == ("Col A", "select", "tab\tname", "ÿ")
    assert s.table("mixed case") is None  # PostgreSQL: catalog spelling is exact
    departments = s.table("departments")
    assert departments is not None
    assert departments.columns == (
        Column("id", "integer"),
        Column("name", "text"),
        Column("budget", "numeric"),
    )
    staff = s.table("staff")
    assert staff is not None and staff.kind == "view" and staff.column_names == ("id", "name")
    nocols = s.table("nocols")
    assert nocols is not None and nocols.columns == ()
    assert s.table("hidden") is None
    other = snapshot(postgres, "other")
    assert other.table_names == ("hidden",)
    assert SchemaSnapshot.from_json(s.to_json()) == s
    assert snapshot(postgres).fingerprint == s.fingerprint


def test_postgres_errors(postgres: Server, tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="psql exited"):
        SchemaSnapshot.from_postgres(
            host="127.0.0.1", port=postgres.port, user="postgres", dbname="nosuchdb",
            psql=postgres.psql,
        )  # fmt: skip
    with pytest.raises(SchemaError, match="cannot run psql"):
        SchemaSnapshot.from_postgres(psql=str(tmp_path / "no-psql"))


def test_postgres_lexicon_words_resolve_on_the_server(postgres: Server) -> None:
    """Every table word with every column word of its table is prepared by the server."""
    s = snapshot(postgres)
    lex = SchemaLexicon.build(POSTGRES, s)
    by_name = {
        cat: {
            name: [w for w, names in ws.items() if name in names]
            for name in {n for ns in ws.values() for n in ns}
        }
        for cat, ws in lex.origins.items()
    }
    assert b'"Mixed Case"' in lex.words["TABLE_NAME"]
    assert b"mixed case" not in lex.words["TABLE_NAME"]
    assert b'"user"' in lex.words["TABLE_NAME"] and b"user" not in lex.words["TABLE_NAME"]
    assert {b"employees", b"EMPLOYEES", b"Employees", b'"employees"'} <= lex.words["TABLE_NAME"]
    assert b'"EMPLOYEES"' not in lex.words["TABLE_NAME"]  # would name another relation
    statements = []
    for table in s.tables:
        for tword in by_name["TABLE_NAME"][table.name]:
            for column in table.column_names:
                for cword in by_name["COLUMN_NAME"][column]:
                    statements.append(f"SELECT {cword.decode()} FROM {tword.decode()}")
    script = "".join(f"PREPARE s{i} AS {q};\n" for i, q in enumerate(statements))
    script += "SELECT count(*) FROM pg_prepared_statements;\n"
    result = postgres.run(script)
    assert result.stdout.split()[-1] == str(len(statements)), result.stderr
    # and a spelling the lexicon leaves out is indeed another name
    wrong = postgres.run('PREPARE w AS SELECT 1 FROM "EMPLOYEES";\n')
    assert "does not exist" in wrong.stderr


def test_a_snapshot_too_large_or_too_deep_is_refused_naming_it(tmp_path: Path) -> None:
    """``/dev/zero`` as a snapshot is refused after a bounded read; JSON nested too deep
    for the reader names the file (it was a bare RecursionError)."""
    if Path("/dev/zero").exists():
        with pytest.raises(SchemaError, match=r"/dev/zero.*holds more than"):
            SchemaSnapshot.load("/dev/zero")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SchemaError, match=r"deep\.json.*nests too deeply"):
        SchemaSnapshot.load(deep)
