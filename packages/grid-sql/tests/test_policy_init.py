"""``grid policy init`` (grid_sql.policy_init): a user's database works in two commands.

The starter policy is valid for its schema (one read-only role over every
relation, listed; the default limits spelled out), round-trips odd catalog
names, avoids a CTE name that is a relation's, never overwrites without
``--force``, and bad input is one line and exit 2.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from grid_core.cli import main
from grid_sql.limits import DEFAULT_LIMITS
from grid_sql.policy import PolicyBundle
from grid_sql.policy_init import starter_policy, toml_string
from grid_sql.schema import SchemaSnapshot, example_schema


def shop(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        'CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL, "odd ""col" TEXT);'
        'CREATE TABLE "odd ""name" (a);'
        "CREATE TABLE cte (x);"
        "CREATE VIEW big AS SELECT id FROM orders;"
    )
    db.close()
    return path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_two_commands_from_a_database_to_a_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = shop(tmp_path)
    code, out, err = run(["check", "SELECT total FROM orders;", "--db", str(db)], capsys)
    assert code == 2 and out == "" and f"grid policy init --db {db}" in err
    code, out, err = run(["policy", "init", "--db", str(db)], capsys)
    policy_path = tmp_path / "shop.policy.toml"
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"wrote {policy_path}: role reader may SELECT from 4 relations of shop",
        f"next: grid ask QUESTION --db {db} --policy {policy_path}",
    ]
    argv = ["check", "SELECT total FROM orders;", "--db", str(db), "--policy", str(policy_path)]
    code, out, err = run(argv, capsys)
    assert (code, err) == (0, ""), out
    tables = 'big, cte, odd "name, orders'
    assert out.splitlines()[0] == f"role reader on shop (sqlite; tables: {tables})"
    code, out, _ = run([*argv[:1], "DELETE FROM orders;", *argv[2:]], capsys)
    assert code == 1 and "language: leaves the role's language at byte 0" in out


def test_the_starter_policy_is_valid_and_read_only(tmp_path: Path) -> None:
    schema = SchemaSnapshot.from_sqlite(shop(tmp_path))
    text = starter_policy(schema, "viewer")
    policy = PolicyBundle.loads(text, "starter.toml", schema)
    assert list(policy.roles) == ["viewer"]
    role = policy.role("viewer")
    assert role.verbs == {"SELECT"}
    assert set(role.tables) == {t.name for t in schema.tables}
    assert role.cte_names == ("cte1",)  # "cte" is a table of this database
    assert role.limits == DEFAULT_LIMITS == policy.limits
    assert "[limits]\nwall_time = 5.0  # seconds\nmax_rows = 1000\n" in text
    example = PolicyBundle.loads(starter_policy(example_schema()), "x.toml", example_schema())
    assert example.role("reader").cte_names == ("cte",)


def test_shadow_tables_are_left_out_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """FTS5's ``docs_content`` holds a copy of ``docs``' text: granted by the starter,
    it kept exposing that text after a user removed ``docs`` from the role. A
    snapshot file has no shadow flag: its relations are all listed."""
    db = tmp_path / "search.sqlite"
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE VIRTUAL TABLE docs USING fts5(body);"
        "CREATE VIRTUAL TABLE box USING rtree(id, x0, x1);"
        "CREATE TABLE t (x);"
        "INSERT INTO docs VALUES ('secret');"
    )
    con.close()
    code, out, err = run(["policy", "init", "--db", str(db)], capsys)
    assert (code, err) == (0, "")
    assert "may SELECT from 3 relations of search (8 shadow tables left out)" in out
    text = (tmp_path / "search.policy.toml").read_text()
    shadow = "box_node, box_parent, box_rowid, docs_config, docs_content, docs_data, "
    shadow += "docs_docsize, docs_idx"
    assert f"# {shadow}.\n" in text
    policy = tmp_path / "search.policy.toml"
    argv = ["--db", str(db), "--policy", str(policy)]
    code, out, _ = run(["check", "SELECT body FROM docs_content;", *argv], capsys)
    assert code == 1 and "leaves the role's language" in out
    code, out, _ = run(["check", "SELECT body FROM docs;", *argv], capsys)
    assert code == 0, out
    schema = SchemaSnapshot.from_sqlite(db)
    listed = PolicyBundle.loads(starter_policy(schema), "s.toml", schema).role("reader").tables
    assert "docs_content" in listed and len(listed) == 11


def test_a_label_with_control_characters_stays_in_its_comment() -> None:
    """A database named with a newline wrote the rest of its name as a TOML line."""
    base = example_schema()
    for label in ("x\ny", 'a"b', "tab\there\r\n[roles.admin]"):
        schema = SchemaSnapshot(base.dialect, base.tables, label)
        text = starter_policy(schema)
        assert text.splitlines()[0].startswith("# GRID policy for ")
        assert PolicyBundle.loads(text, "x.toml", schema).description.startswith(
            f"Starter policy for {label}"
        )


def test_toml_strings_escape_what_toml_requires() -> None:
    import tomllib

    for name in ['a"b', "a\\b", "tab\there", "nl\nx", "del\x7f", "é😀", "\x00"]:
        assert tomllib.loads(f"k = {toml_string(name)}")["k"] == name


def test_an_existing_file_is_kept_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = shop(tmp_path)
    out_path = tmp_path / "mine.toml"
    out_path.write_text("# mine\n")
    code, out, err = run(["policy", "init", "--db", str(db), "--out", str(out_path)], capsys)
    assert (code, out) == (2, "")
    assert err == f"grid policy: error: {out_path} exists; pass --force to overwrite it\n"
    assert out_path.read_text() == "# mine\n"
    argv = ["policy", "init", "--db", str(db), "--out", str(out_path), "--force"]
    assert run(argv, capsys)[0] == 0
    assert out_path.read_text().startswith("# GRID policy for shop")


def test_the_database_read_is_never_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out`` naming the ``--db`` file it reads (or the ``--schema`` file), even with
    ``--force``, is refused: it replaced the database with its own policy."""
    db = shop(tmp_path)
    before = db.read_bytes()
    for extra in ([], ["--force"]):
        code, out, err = run(["policy", "init", "--db", str(db), "--out", str(db), *extra], capsys)
        assert (code, out) == (2, ""), err
        assert (
            err == f"grid policy: error: --out {db} is the --db file it reads: name another file\n"
        )
    assert db.read_bytes() == before
    snapshot = tmp_path / "company.json"
    example_schema().save(snapshot)
    argv = ["policy", "init", "--schema", str(snapshot), "--out", str(snapshot), "--force"]
    assert run(argv, capsys)[0] == 2


def test_out_dash_prints_the_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = tmp_path / "company.json"
    example_schema().save(snapshot)
    code, out, err = run(["policy", "init", "--schema", str(snapshot), "--out", "-"], capsys)
    assert (code, err) == (0, "")
    assert PolicyBundle.loads(out, "-", example_schema()).role("reader").verbs == {"SELECT"}
    assert not (tmp_path / "company.policy.toml").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["policy"], "grid policy: error: the following arguments are required: verb"),
        (["policy", "init"], "one of the arguments --db --schema is required"),
        (["policy", "init", "--db", "/nonexistent/x.sqlite"], "no such file"),
        (["policy", "init", "--db", "/"], "schema /: is a directory, not a database file"),
        (
            # a PostgreSQL snapshot without "routines": the snapshot's fault, named as
            # such (it was "<the policy file never written>:15: roles.reader.routines")
            ["policy", "init", "--schema", "{pg}"],
            "schema {pg}: the snapshot does not say which user-defined routines its "
            'database has (no "routines" key)',
        ),
        (["policy", "init", "--schema", "{pg}", "--out", "-"], "schema {pg}: the snapshot"),
        (["policy", "init", "--db", "{db}", "--role", "no spaces"], "role name 'no spaces'"),
        (["policy", "init", "--db", "{db}", "--out", "/nonexistent/dir/p.toml"], "cannot write"),
        (["policy", "init", "--db", "{empty}"], "has no tables or views"),
        (["policy", "init", "--db", "{db}", "--out", ""], "--out names no file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    pg = tmp_path / "s_pg.json"
    pg.write_text(
        '{"format": "grid.schema/1", "dialect": "postgres", "name": "s", "tables": '
        '[{"name": "t", "kind": "table", "columns": [{"name": "a", "type": "INTEGER"}]}]}'
    )
    paths = {"{db}": str(shop(tmp_path)), "{empty}": str(empty), "{pg}": str(pg)}
    code, out, err = run([paths.get(a, a) for a in argv], capsys)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and message.replace("{pg}", str(pg)) in err, err
    assert not (tmp_path / "s_pg.policy.toml").exists()
