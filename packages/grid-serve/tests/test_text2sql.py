"""grid_serve.text2sql: what the model is shown, the checker verdict, read-only runs (no model)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grid_serve.text2sql import (
    ANSWER_PREFIX,
    chat_messages,
    checker_verdict,
    format_table,
    run_readonly,
    schema_ddl,
)
from grid_sql.checker import ViolationKind
from grid_sql.limits import DEFAULT_LIMITS, LimitExceededError
from grid_sql.policy import PolicyBundle
from grid_sql.schema import SchemaSnapshot


def test_the_prompt_shows_granted_tables_and_columns_only(
    schema: SchemaSnapshot, policy: PolicyBundle
) -> None:
    clerk = schema_ddl(schema, policy.grants("clerk", schema))
    assert clerk.splitlines() == [
        "CREATE TABLE employees (id INTEGER, name TEXT, dept_id INTEGER);",
        "CREATE TABLE orders (id INTEGER, employee_id INTEGER, total REAL, placed TEXT);",
    ]
    admin = schema_ddl(schema, policy.grants("admin", schema))
    assert "salaries" in admin and "salaries" not in clerk and "hired" not in clerk
    user = chat_messages("How many?", clerk)[-1]
    assert user["role"] == "user" and clerk in user["content"] and "How many?" in user["content"]
    assert ANSWER_PREFIX.startswith("```")


@pytest.mark.parametrize(
    ("role", "sql", "kinds"),
    [
        pytest.param("analyst", "SELECT name FROM employees;", [], id="granted"),
        pytest.param(
            "clerk", "SELECT hired FROM employees;", [ViolationKind.COLUMN_NOT_GRANTED], id="column"
        ),
        pytest.param(
            "clerk", "SELECT * FROM employees;", [ViolationKind.COLUMN_NOT_GRANTED], id="star"
        ),
        pytest.param(
            "analyst", "SELECT budget FROM employees;", [ViolationKind.UNKNOWN_COLUMN], id="name"
        ),
    ],
)
def test_checker_verdict(
    schema: SchemaSnapshot, policy: PolicyBundle, role: str, sql: str, kinds: list[ViolationKind]
) -> None:
    assert [v.kind for v in checker_verdict(schema, policy.grants(role, schema), sql)] == kinds


def test_run_readonly_reads_and_never_writes(company_db: Path) -> None:
    columns, rows, more = run_readonly(company_db, "SELECT name FROM departments ORDER BY id;", 2)
    assert (columns, rows, more) == (["name"], [("Research",), ("Sales",)], True)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        run_readonly(company_db, "DELETE FROM orders;")
    assert run_readonly(company_db, "SELECT count(*) FROM orders;")[1] == [(3,)]


def test_run_readonly_runs_the_statement_in_a_worker_killed_at_its_deadline(
    company_db: Path,
) -> None:
    """One SQLite call the progress handler never interrupts (three
    ``%.1000000000c``: 20-27 s in the calling process at a 1 s limit) is stopped
    at the deadline, because ``grid ask``'s statement runs in a worker
    (grid_sql.worker)."""
    sql = "SELECT length(printf('%.1000000000c%.1000000000c%.1000000000c'));"
    t0 = time.monotonic()
    with pytest.raises(LimitExceededError, match="wall_time"):
        run_readonly(company_db, sql, 1, DEFAULT_LIMITS.replace(wall_time=1.0))
    assert time.monotonic() - t0 < 8.0


def test_format_table() -> None:
    assert format_table(["id", "name"], [(1, "Ada"), (22, None)]).splitlines() == [
        "id | name",
        "---+-----",
        "1  | Ada",
        "22 | NULL",
    ]


def test_the_prompt_spells_hostile_names_as_one_quoted_name() -> None:
    """A table and columns whose names hold a semicolon, quotes and a comment
    marker, and a declared type that is SQL of its own: the prompt quotes each name
    as a statement must spell it and leaves the type out, so no line carries a
    second statement. Fails if a name is shown bare."""
    from grid_sql.policy import RoleGrants

    schema = SchemaSnapshot.from_sqlite_ddl(
        'CREATE TABLE "semi; DROP TABLE x" ("a""b" INTEGER, "c -- d" "TEXT); DROP TABLE y; --", '
        "ok VARCHAR(10));"
    )
    table = schema.tables[0].name
    grants = RoleGrants(
        role="r",
        verbs=frozenset({"select"}),
        banned_clauses=frozenset(),
        columns={table: ('a"b', "c -- d", "ok")},
        unrestricted=frozenset({table}),
        cte_names=(),
        schema_fingerprint=schema.fingerprint,
    )
    assert schema_ddl(schema, grants) == (
        'CREATE TABLE "semi; DROP TABLE x" ("a""b" INTEGER, "c -- d", ok VARCHAR(10));'
    )


class _PlainTokenizer:
    """A tokenizer with no chat template (a base model's): bytes as ids, BOS 1."""

    chat_template = None

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return ([1] if add_special_tokens else []) + list(text.encode())

    def apply_chat_template(self, *args: object, **kwargs: object) -> list[int]:
        raise AssertionError("a tokenizer with no chat template is never asked for one")


def test_a_model_with_no_chat_template_gets_the_chat_as_plain_text() -> None:
    """A base model (Gemma 3 270M's GGUF has no template) is prompted with the same
    messages as plain text, its BOS first and the answer prefix last."""
    from grid_serve.text2sql import plain_prompt, prompt_ids

    ids = prompt_ids(_PlainTokenizer(), "How many?", "CREATE TABLE t (a);", feedback="Fix it.")
    text = bytes(ids[1:]).decode()
    messages = chat_messages("How many?", "CREATE TABLE t (a);", "Fix it.")
    assert ids[0] == 1 and text == plain_prompt(messages) + ANSWER_PREFIX
    assert text.startswith(messages[0]["content"] + "\n\n" + messages[1]["content"])
    assert text.endswith("\n\nAnswer:\n" + ANSWER_PREFIX)


POLICY = """version = 1
[roles.narrow]
verbs = ["SELECT"]
tables = "*"
[roles.full]
verbs = ["SELECT"]
tables = "*"
generation = "full"
"""


def test_the_role_engine_decodes_in_the_policys_generation_profile(
    schema: SchemaSnapshot, writes: Callable[[Any, bytes], bool]
) -> None:
    """``generation = "narrow"`` (the default) builds the engine over the narrow
    profile, ``"full"`` over the role's whole language; the checking language (the
    projection) is the same for both, and the retry engine keeps the profile."""
    from grid_core.vocab import cl100k
    from grid_serve.text2sql import RoleEngines

    engines = RoleEngines(schema, PolicyBundle.loads(POLICY, schema=schema), cl100k())
    narrow, full = engines["narrow"], engines["full"]
    assert narrow.projection.grammar.fingerprint == full.projection.grammar.fingerprint
    refused = (b"SELECT name FROM employees -- all\n;", b"SELECT 1;", b"SELECT zz.id FROM orders;")
    for sql in refused:
        assert writes(full.engine, sql) and not writes(narrow.engine, sql), sql
        assert not writes(engines.retry_engine("narrow", star=False), sql), sql
    good = b"SELECT T1.name FROM employees AS T1;"
    assert writes(narrow.engine, good) and writes(full.engine, good)
    assert writes(engines.retry_engine("narrow", star=False), good)
    # a full role's retry stays in the whole language, with a tighter lexicon too
    comment = b"SELECT name FROM employees -- all\n;"
    assert writes(engines.retry_engine("full", star=False), comment)
    words = {c: set(ws) for c, ws in full.lexicon.words.items()}
    words["TABLE_NAME"] = {w for w in words["TABLE_NAME"] if w.lower() != b"orders"}
    assert writes(engines.retry_engine("full", words), comment)
    assert not writes(engines.retry_engine("narrow", words), comment)
    assert not writes(engines.retry_engine("narrow", words), b"SELECT T1.id FROM orders AS T1;")
    assert writes(engines.retry_engine("narrow", words), good)


def test_the_prompt_shows_foreign_keys_and_sample_rows_of_granted_columns_only(
    tmp_path: Path,
) -> None:
    """``prompt_schema``: each granted table's statement with the foreign keys whose
    tables and columns are all granted, then up to N of its rows, granted columns only;
    a long value is cut, and a value cannot close the comment block it sits in."""
    from grid_serve.text2sql import SAMPLE_CHARS, foreign_keys, prompt_schema
    from grid_sql.policy_init import starter_policy

    db = tmp_path / "shop.sqlite"
    with sqlite3.connect(db) as c:
        c.executescript(
            """
            CREATE TABLE dept (id INTEGER PRIMARY KEY, name TEXT, secret TEXT);
            CREATE TABLE emp (id INTEGER PRIMARY KEY, dept_id INTEGER REFERENCES dept(id),
                              boss INTEGER, note TEXT, FOREIGN KEY (boss) REFERENCES emp(id));
            INSERT INTO dept VALUES (1, 'R&D', 's1'), (2, 'Ops */ DROP', 's2');
            """
        )
        c.executemany(
            "INSERT INTO emp VALUES (?, ?, ?, ?)",
            [(i, 1, None, "x" * 100 if i == 1 else "n") for i in range(1, 6)],
        )
    schema = SchemaSnapshot.from_sqlite(db)
    assert sorted(foreign_keys(db, schema)) == [
        ("emp", ("boss",), "emp", ("id",)),
        ("emp", ("dept_id",), "dept", ("id",)),
    ]
    text = starter_policy(schema, "r") + 'columns.dept = ["id", "name"]\n'
    grants = PolicyBundle.loads(text, schema=schema).grants("r", schema)
    shown = prompt_schema(db, schema, grants, rows=3)
    assert "secret" not in shown and "s1" not in shown
    assert "CREATE TABLE dept (id INTEGER, name TEXT);" in shown
    assert "FOREIGN KEY (dept_id) REFERENCES dept (id)" in shown
    assert "FOREIGN KEY (boss) REFERENCES emp (id)" in shown
    assert "/* 2 rows of dept:\nid | name\n1 | R&D\n2 | Ops * / DROP\n*/" in shown
    assert "/* 3 rows of emp:" in shown and "4 | 1 | NULL" not in shown
    assert "x" * (SAMPLE_CHARS - 3) + "..." in shown and "x" * SAMPLE_CHARS not in shown
    assert shown.count("*/") == 2  # the two blocks' own ends, never a value's
    assert "rows of" not in prompt_schema(db, schema, grants, rows=0)
    # a role that may not SELECT is shown no row, only the statements
    writer = text.replace('verbs = ["SELECT"]', 'verbs = ["INSERT"]')
    insert_only = PolicyBundle.loads(writer, schema=schema).grants("r", schema)
    assert "rows of" not in prompt_schema(db, schema, insert_only, rows=3)
    assert "R&D" not in prompt_schema(db, schema, insert_only, rows=3)
    # a foreign key into a table the role is not granted is not shown
    only_emp = starter_policy(schema, "r").replace('    "dept",\n', "")
    emp = PolicyBundle.loads(only_emp, schema=schema).grants("r", schema)
    assert "REFERENCES dept" not in prompt_schema(db, schema, emp, rows=0)


def test_few_shot_examples_are_turns_before_the_question() -> None:
    """The tables open the first example; each example is a user turn and an assistant
    turn with its SQL in the answer's code fence; the question is the last user turn."""
    from grid_serve.text2sql import ANSWER_PREFIX, Example

    examples = [
        Example("How many?", "SELECT count(*) FROM t;"),
        Example("All a?", "SELECT a FROM t"),
    ]
    chat = chat_messages("Max a?", "CREATE TABLE t (a);", examples=examples)
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert chat[1]["content"] == "Tables:\nCREATE TABLE t (a);\n\nQuestion: How many?"
    assert chat[2]["content"] == f"{ANSWER_PREFIX}SELECT count(*) FROM t;\n```"
    assert chat[3]["content"] == "Question: All a?"
    assert chat[5]["content"] == "Question: Max a?"
    assert chat_messages("Max a?", "CREATE TABLE t (a);", examples=[])[1]["content"] == (
        "Tables:\nCREATE TABLE t (a);\n\nQuestion: Max a?"
    )


def test_examples_load_and_are_checked_for_the_role(schema: SchemaSnapshot, tmp_path: Path) -> None:
    """A bad line names the file and line; an example outside the role's generation
    language or refused by the checker is refused, naming the example."""
    from grid_core.errors import ServingError
    from grid_core.vocab import cl100k
    from grid_serve.text2sql import Example, RoleEngines, check_examples, load_examples

    path = tmp_path / "examples.jsonl"
    path.write_text(
        '{"question": "Names?", "sql": "SELECT name FROM employees;"}\n\n'
        '{"question": "Both?", "sql": "SELECT T1.name FROM employees AS T1"}\n'
    )
    examples = load_examples(path)
    assert [e.question for e in examples] == ["Names?", "Both?"]
    for text, message in (
        ("[1]\n", ":1: an example is"),
        ('{"question": "q"}\n', ":1: an example is"),
        ('\n{"question": "q", "sql": ""}\n', ":2: an example is"),
        ("{nope\n", ":1: not JSON"),
        ('{"question": "q", "sql": "SELECT 1 \\ud800"}\n', ":1: the sql holds a lone surrogate"),
        ('{"question": "q\\udfff", "sql": "SELECT 1"}\n', ":1: the question holds a lone"),
    ):
        path.write_text(text)
        with pytest.raises(ServingError, match=message):
            load_examples(path)
    engines = RoleEngines(schema, PolicyBundle.loads(POLICY, schema=schema), cl100k())
    role = engines["narrow"]
    check_examples(examples, role.engine, schema, role.grants)
    bare = Example("Bare?", "SELECT e.name FROM employees e;")  # a bare alias: not in narrow
    with pytest.raises(ServingError, match=r"example 2 \('Bare\?'\): its SQL is not a stat"):
        check_examples([examples[0], bare], role.engine, schema, role.grants)
    check_examples([bare], engines["full"].engine, schema, engines["full"].grants)
    unknown = Example("Nope?", "SELECT sum(count(*)) FROM employees;")
    with pytest.raises(ServingError, match="the checker refuses its SQL for role narrow: the agg"):
        check_examples([unknown], role.engine, schema, role.grants)
    # In the covering language (grid ask's default): checked against the covering
    # guide's language, which writes the first example but not the second.
    covering = engines.scoped("narrow", covering=True)
    check_examples(examples[:1], covering, schema, role.grants, "covering")
    refused = r"example 2 .* in the covering language: .*language role"
    with pytest.raises(ServingError, match=refused):
        check_examples(examples, covering, schema, role.grants, "covering")


def test_answer_in_refuses_a_language_it_does_not_know() -> None:
    """A typo is not quietly the role's language."""
    from grid_serve.text2sql import answer_in

    with pytest.raises(ValueError, match="no language 'covring': one of covering, role"):
        answer_in("covring", None, None, "analyst")  # type: ignore[arg-type]


def test_a_sample_read_of_a_view_is_held_to_the_wall_time(tmp_path: Path) -> None:
    """A granted view whose one SQL function call runs for seconds (SQLite's printf
    pads a gigabyte one character at a time, where no progress handler runs): its
    sample read runs in a worker killed at ``wall_time`` (in this process it took
    about 7 s under a 1 s limit), and has no entry; the plain table's read is kept."""
    import sqlite3
    import time

    from grid_serve.text2sql import sample_rows
    from grid_sql.limits import Limits

    path = tmp_path / "slow.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (a INTEGER)")
        con.execute("INSERT INTO t VALUES (1)")
        pad = "printf('%.*c', 1000000000, 'x')"  # about 2.3 s each, one C call
        con.execute(f"CREATE VIEW v AS SELECT length({pad} || {pad} || {pad}) AS n FROM t")
    con.close()
    schema = SchemaSnapshot.from_sqlite(path)
    policy = 'version = 1\n[roles.r]\nverbs = ["SELECT"]\ntables = ["t", "v"]\n'
    grants = PolicyBundle.loads(policy, schema=schema).grants("r", schema)
    t0 = time.monotonic()
    rows = sample_rows(path, schema, grants, 3, Limits(wall_time=1.0))
    assert time.monotonic() - t0 < 4.5
    assert rows == {"t": (["a"], [(1,)])}
