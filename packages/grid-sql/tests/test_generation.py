"""The narrow generation profile (grid_sql.generation): a sublanguage of the role's
language that leaves out what a small model writes and no database runs.

Membership is decided twice, by grid-core's lexer and parser and by grid-spec's
Language (lark, independent of grid-core), over the same grammar and words; the
masks of the two are compared token by token on SmolLM2's real vocabulary.
"""

from __future__ import annotations

import re
import sqlite3
from functools import cache

import pytest
from core_language import CoreLanguage
from hypothesis import given, settings
from hypothesis import strategies as st

from grid_core.errors import GridError
from grid_core.grammar import Grammar
from grid_core.guide import Engine
from grid_core.vocab import smollm2
from grid_spec.spec import Language
from grid_sql.dialect import Dialect, word_alternatives
from grid_sql.dialects import POSTGRES, SQLITE
from grid_sql.generation import (
    ALIASES,
    call_terminal,
    generation_language,
    narrow_grammar,
    narrow_rule,
    narrow_words,
    placed_calls,
    typed_calls,
)
from grid_sql.policy import PolicyBundle, Role
from grid_sql.projection import RoleProjection, dialect_dfa, dialect_grammar, language_dfa

WORDS = {
    "TABLE_NAME": [b"departments", b"employees"],
    "COLUMN_NAME": [b"id", b"name", b"dept_id", b"budget"],
    "CTE_NAME": [b"cte"],
}
READER = Role("reader", frozenset({"SELECT"}), "*")


@cache
def languages(
    dialect: Dialect = SQLITE,
) -> tuple[CoreLanguage, CoreLanguage, Language, Grammar, dict]:
    """(full, narrow by grid-core, narrow by grid-spec, narrow grammar, narrow words)."""
    full = RoleProjection.compile(READER, dialect, words=WORDS).grammar
    narrow, words, _ = generation_language("narrow", full, dialect, WORDS, "reader")
    return (
        CoreLanguage(full, dialect, WORDS),
        CoreLanguage(narrow, dialect, words),
        Language(narrow.to_lark(), words),
        narrow,
        words,
    )


#: Aggregate and window calls where SQL places them (``placed_calls``, the covering
#: and FROM-first languages' rewrite): each runs.
PLACED = [
    b"SELECT dept_id, count(*) FROM employees GROUP BY dept_id HAVING count(*) > 1 "
    b"ORDER BY count(*) DESC;",
    b"SELECT rank() OVER (ORDER BY count(*)) FROM employees GROUP BY dept_id;",
    b"SELECT name FROM employees WHERE id IN (SELECT max(id) FROM employees);",
    b"SELECT sum(id) OVER (PARTITION BY dept_id), max(abs(id)) FROM employees;",
    b"SELECT (SELECT count(*) FROM departments WHERE id = 1) FROM employees WHERE id > 1;",
    b"SELECT CASE WHEN count(*) > 1 THEN max(id) END FROM employees;",
]
#: Aggregate and window calls where SQLite refuses them: ``placed_calls`` leaves
#: them out (the narrow profile keeps them: see grid_sql.generation's header).
MISPLACED = {
    b"SELECT sum(sum(id)) FROM employees;": "an aggregate inside an aggregate",
    b"SELECT max(id + count(*)) FROM employees;": "an aggregate deeper inside an aggregate",
    b"SELECT name FROM employees WHERE count(*) > 1;": "an aggregate in WHERE",
    b"SELECT name FROM employees WHERE (CASE WHEN max(id) > 1 THEN 1 END) = 1;": (
        "an aggregate deeper in WHERE"
    ),
    b"SELECT name FROM employees GROUP BY count(*);": "an aggregate in GROUP BY",
    b"SELECT e.name FROM employees AS e JOIN departments AS d ON max(e.id) = d.id;": (
        "an aggregate in a join condition"
    ),
    b"SELECT name FROM employees LIMIT count(*);": "an aggregate in LIMIT",
    b"SELECT total(id) FILTER (WHERE count(*) > 1) FROM employees;": "an aggregate in FILTER",
    b"SELECT rank() OVER (PARTITION BY rank() OVER (ORDER BY id)) FROM employees;": (
        "a window call in a window's PARTITION BY"
    ),
    b"SELECT rank() OVER (ORDER BY sum(id) OVER ()) FROM employees;": (
        "a window call in a window's ORDER BY"
    ),
    b"SELECT max(rank() OVER (ORDER BY id)) FROM employees;": "a window call in an aggregate",
    b"SELECT lag(rank() OVER (ORDER BY id)) OVER (ORDER BY id) FROM employees;": (
        "a window call in a window function's arguments"
    ),
    b"SELECT name FROM employees WHERE rank() OVER (ORDER BY id) > 1;": "a window call in WHERE",
    b"SELECT dept_id FROM employees GROUP BY dept_id HAVING rank() OVER (ORDER BY dept_id) > 1;": (
        "a window call in HAVING"
    ),
}

WRITTEN = [
    b"SELECT name FROM employees;",
    b"SELECT * FROM employees;",
    b"SELECT T1.name FROM employees AS T1;",
    b"SELECT e.name, d.name FROM employees AS e JOIN departments AS d ON e.dept_id = d.id;",
    b"SELECT employees.name FROM employees;",
    b"SELECT count(*) FROM employees;",
    b"SELECT name\n    FROM employees\n    WHERE id = 1;",
    b"SELECT name FROM employees WHERE id IN (SELECT dept_id FROM employees);",
    b"WITH cte AS (SELECT id FROM employees) SELECT cte.id FROM cte;",
    b"SELECT\tname FROM employees;",
    b"SELECT  name\n\n  FROM employees;",
    b"SELECT pow(id, 2), substr(name, 1, 2), coalesce(name, 'x', 'y') FROM employees;",
    b"SELECT rank() OVER (ORDER BY id), random() FROM employees;",
    b"SELECT total(id) FILTER (WHERE id > 1) FROM employees;",
    b"SELECT count(*) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING) FROM employees;",
]
LEFT_OUT = {
    b"SELECT 1;": "a constant query",
    b"SELECT upper('x');": "a constant query",
    b"SELECT name FROM employees -- the names\n;": "a line comment",
    b"SELECT name /* x */ FROM employees;": "a block comment",
    b"SELECT name FROM employees T1;": "a bare alias",
    b"SELECT name AS total FROM employees;": "a result-column alias",
    b"SELECT count(*) AS c FROM employees;": "a result-column alias, even of the set",
    b"SELECT name FROM employees AS T10;": "an alias outside the set",
    b"SELECT zz.name FROM employees;": "a qualifier naming nothing the role declares",
    b"SELECT CONductor_ID_LIMIT_1000.name FROM employees;": "an invented qualifier",
    b"SELECT name FROM employees WHERE id = ?;": "a bind parameter",
    b"SELECT DISTINCT (id, name) FROM employees;": "a row value (SQLite refuses it here)",
    b"SELECT name FROM employees WHERE (id, id) IN (SELECT id, dept_id FROM employees);": (
        "a row value, even where SQLite takes one"
    ),
    b"SELECT pow(id) FROM employees;": "a call with fewer arguments than the function takes",
    b"SELECT abs(id, id) FROM employees;": "a call with more arguments than the function takes",
    b"SELECT rank() FROM employees;": "a window function without OVER (SQLite refuses it)",
    b"SELECT abs(id) OVER () FROM employees;": "OVER after a function that is no window function",
    b"SELECT upper(*) FROM employees;": "a * argument (a call with none, in SQLite's reading)",
    b"SELECT total(DISTINCT id) FROM employees;": "DISTINCT in a call, even where it runs",
    b"SELECT rank() OVER w FROM employees WINDOW w AS (ORDER BY id);": (
        "a window named by reference (that WINDOW defines it is not regular)"
    ),
    b"SELECT count(*) OVER (ROWS id PRECEDING) FROM employees;": "a frame offset not a number",
}


@pytest.mark.parametrize("sql", WRITTEN)
def test_narrow_writes_what_runs(sql: bytes) -> None:
    full, narrow, spec, _, _ = languages()
    assert narrow.accepts(sql) and spec.in_language(sql)
    assert full.accepts(sql)


@pytest.mark.parametrize("sql", list(LEFT_OUT))
def test_narrow_leaves_out_what_the_role_language_admits(sql: bytes) -> None:
    full, narrow, spec, _, _ = languages()
    assert full.accepts(sql), LEFT_OUT[sql]
    assert not narrow.accepts(sql) and not spec.in_language(sql), LEFT_OUT[sql]


@cache
def placed(dialect: Dialect = SQLITE) -> tuple[CoreLanguage, Language]:
    """The narrow language with its calls placed, by grid-core and by grid-spec."""
    *_, narrow, words = languages(dialect)
    grammar = placed_calls(narrow)
    return CoreLanguage(grammar, dialect, words), Language(grammar.to_lark(), words)


@pytest.mark.parametrize("sql", PLACED)
def test_placed_calls_keep_what_sql_places(sql: bytes) -> None:
    core, spec = placed()
    assert core.accepts(sql) and spec.in_language(sql)
    assert languages()[1].accepts(sql)


@pytest.mark.parametrize("sql", list(MISPLACED))
def test_placed_calls_leave_out_what_sql_refuses(sql: bytes) -> None:
    core, spec = placed()
    assert languages()[1].accepts(sql), MISPLACED[sql]  # the narrow profile keeps it
    assert not core.accepts(sql) and not spec.in_language(sql), MISPLACED[sql]


def test_placed_calls_build_on_postgres() -> None:
    """PostgreSQL's narrow grammar keeps ``FUNCTION_NAME`` calls (no argument bounds),
    whose FILTER or OVER comes after their arguments: those are read alike whatever
    follows (else LALR(1) conflicts: ``function_arguments: STAR .`` against its plain
    copy). A grammar with no call comes back as it is."""
    *_, narrow, words = languages(POSTGRES)
    grammar = placed_calls(narrow)
    assert grammar.lalr().n_states > narrow.lalr().n_states
    core = CoreLanguage(grammar, POSTGRES, words)
    assert core.accepts(b"SELECT name FROM employees GROUP BY name HAVING sum(id) > 1;")
    assert not core.accepts(b"SELECT name FROM employees WHERE sum(id) > 1;")
    callless = narrow.project(lambda r: r.origin not in ("function_call", "aggregate_call"), "x")
    assert placed_calls(callless) is callless


def test_calls_are_placed_where_sqlite_runs_them() -> None:
    """What ``placed_calls`` keeps runs on SQLite, and what it leaves out SQLite
    refuses as a misuse: the cut leaves out no statement that runs."""
    db = sqlite3.connect(":memory:")
    db.executescript(
        "CREATE TABLE employees (id INTEGER, name TEXT, dept_id INTEGER, budget REAL);"
        "CREATE TABLE departments (id INTEGER, name TEXT, budget REAL);"
    )
    for sql in PLACED:
        db.execute(sql.decode()).fetchall()
    for sql, why in MISPLACED.items():
        with pytest.raises(sqlite3.OperationalError, match=r"misuse|not allowed"):
            db.execute(sql.decode()).fetchall()
            pytest.fail(f"SQLite ran {why}: {sql!r}")


PIECES = [
    b"SELECT ",
    b"FROM ",
    b"WHERE ",
    b"AS ",
    b"JOIN ",
    b"ON ",
    b"name",
    b"id",
    b"employees",
    b"departments",
    b"T1.",
    b"T1",
    b"e.",
    b"e",
    b"zz.",
    b"*",
    b",",
    b" ",
    b"  ",
    b"\n",
    b"\n    ",
    b"= ",
    b"1",
    b"'x'",
    b"(",
    b")",
    b";",
    b"--",
    b"count(",
    b"cte",
    b"pow(",
    b"abs(",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=12))
def test_narrow_prefixes_are_role_prefixes_and_both_readers_agree(pieces: list[bytes]) -> None:
    """Prefix(narrow) is inside Prefix(role) and narrow's statements are the role's:
    generation never leaves the checking language; and grid-core and grid-spec agree
    on the narrow language."""
    full, narrow, spec, _, _ = languages()
    sql = b"".join(pieces)
    viable = narrow.viable(sql)
    assert viable == spec.is_viable_prefix(sql), sql
    if viable:
        assert full.viable(sql), sql
    statement = sql + b";"
    assert narrow.accepts(statement) == spec.in_language(statement), sql
    if narrow.accepts(statement):
        assert full.accepts(statement), sql


PREFIXES = [
    b"",
    b"SELECT name FROM employees",
    b"SELECT name FROM employees AS ",
    b"SELECT T",
    b"SELECT name FROM employees\n",
    b"SELECT name FROM employees WHERE id = 1 -",
    b"SELECT e.name FROM employees AS e WHERE e",
]


@pytest.mark.parametrize("prefix", PREFIXES)
def test_engine_mask_equals_the_spec_on_a_real_vocabulary(prefix: bytes) -> None:
    _, _, spec, grammar, words = languages()
    vocab = smollm2()
    engine = Engine(grammar, vocab, words, dfa=language_dfa(grammar))
    guide = engine.guide(audit=False)
    ids = {b: i for i, b in enumerate(vocab.token_bytes) if b and i not in vocab.special_ids}
    rest = prefix
    while rest:  # greedy longest tokens
        n = max(k for k in range(1, len(rest) + 1) if rest[:k] in ids)
        guide.accept_token(ids[rest[:n]])
        rest = rest[n:]
    row = bytearray(((vocab.n_vocab + 31) // 32) * 4)
    buffer = memoryview(row).cast("i")
    guide.fill_next_token_bitmask(buffer, 0)
    core = {i for i in range(vocab.n_vocab) if row[i // 8] >> (i % 8) & 1}
    eos = vocab.eos_ids[0]
    want = spec.mask(vocab.token_bytes, set(vocab.special_ids) - {eos}, eos, prefix)
    assert core == want


def test_words_are_the_profile_sets() -> None:
    *_, words = languages()
    assert words["LINE_COMMENT"] == [] and words["BLOCK_COMMENT"] == []
    assert words["ALIAS_NAME"] == sorted(ALIASES)
    assert b"employees." in words["QUALIFIER"] and b"T1." in words["QUALIFIER"]
    assert b"cte." in words["QUALIFIER"] and b"id." not in words["QUALIFIER"]


def test_postgres_narrows_too() -> None:
    full, narrow, _, _, _ = languages(POSTGRES)
    assert narrow.accepts(b"SELECT T1.name FROM employees AS T1;")
    for sql in (
        b"SELECT name FROM employees -- x\n;",
        b"SELECT name FROM employees AS e2;",
        b"SELECT (id, name) FROM employees;",
    ):
        assert full.accepts(sql) and not narrow.accepts(sql), sql


def test_a_write_targets_alias_needs_as_and_the_set() -> None:
    """DELETE and UPDATE targets (PostgreSQL's ``target_alias: AS? ALIAS_NAME``)."""
    admin = Role("admin", frozenset({"SELECT", "DELETE", "UPDATE"}), "*")
    full = RoleProjection.compile(admin, POSTGRES, words=WORDS).grammar
    narrow = narrow_grammar(full, "admin")
    core = CoreLanguage(narrow, POSTGRES, narrow_words(narrow, dialect_dfa(POSTGRES), WORDS))
    whole = CoreLanguage(full, POSTGRES, WORDS)
    for sql in (b"DELETE FROM employees e;", b"UPDATE employees e SET id = 1;"):
        assert whole.accepts(sql) and not core.accepts(sql), sql
    assert core.accepts(b"DELETE FROM employees AS e WHERE e.id = 1;")


def test_rule_cut() -> None:
    grammar = RoleProjection.compile(READER, SQLITE).grammar
    cut = [r for r in grammar.rules if not narrow_rule(r)]
    assert any(r.origin == "select_core" for r in cut)
    assert all("from_clause" not in r.expansion for r in cut if r.origin == "select_core")


POLICY = """version = 1
[roles.reader]
verbs = ["SELECT"]
tables = "*"
{line}
"""


def test_policy_knob() -> None:
    default = PolicyBundle.loads(POLICY.format(line=""))
    narrow = PolicyBundle.loads(POLICY.format(line='generation = "narrow"'))
    full = PolicyBundle.loads(POLICY.format(line='generation = "full"'))
    assert default.role("reader").generation == "narrow"
    assert full.role("reader").generation == "full"
    # the default is not written into the fingerprint (older files keep theirs)
    assert default.fingerprint == narrow.fingerprint != full.fingerprint
    with pytest.raises(GridError, match=r":5: roles\.reader\.generation: unknown generation"):
        PolicyBundle.loads(POLICY.format(line='generation = "loose"'))
    with pytest.raises(GridError, match=r"roles\.reader\.generation"):
        PolicyBundle.loads(POLICY.format(line="generation = 1"))


def _prepares(db: sqlite3.Connection, sql: str) -> str | None:
    """None when SQLite prepares ``sql``, else its error message."""
    try:
        db.execute("EXPLAIN " + sql)
    except sqlite3.Error as e:
        return str(e)
    return None


def test_typed_calls_take_what_sqlite_takes() -> None:
    """The narrow language writes a call of each SQLite function with 0 to 4
    arguments, with and without OVER, exactly where SQLite prepares it; every call
    SQLite refuses for its argument count or its OVER is left out (typed_calls)."""
    _, narrow, _, _, _ = languages()  # the reader is granted every function
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE employees (id INTEGER, name TEXT, dept_id INTEGER)")
    checked = refused = 0
    for name in sorted(set(SQLITE.functions)):
        for n in range(5):
            for over in ("", " OVER ()"):
                sql = f"SELECT {name}({', '.join(['1'] * n)}){over} FROM employees;"
                error = _prepares(db, sql)
                arity = error is not None and (
                    "wrong number of arguments" in error
                    or "misuse of window function" in error
                    or "may not be used as a window function" in error
                    or "is not a window function" in error
                )
                if error is not None and not arity:
                    continue  # refused for another reason (not this test's)
                checked += 1
                refused += arity
                assert narrow.accepts(sql.encode()) == (error is None), (sql, error)
    assert checked > 400 and refused > 300


#: A helper that asks PostgreSQL to plan each statement (parse analysis resolves every
#: call, nothing runs) and returns its error message, or '' when it plans.
PG_TRY = """CREATE TABLE employees (id integer, name text, dept_id integer);
CREATE FUNCTION grid_try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN EXECUTE 'EXPLAIN ' || q; RETURN ''; EXCEPTION WHEN others THEN RETURN SQLERRM; END $$;"""


def test_typed_calls_take_what_postgres_takes() -> None:
    """The narrow PostgreSQL language writes a call of each typed function with 0 to 4
    ``NULL`` arguments, with and without OVER, exactly where a real PostgreSQL plans
    it. ``NULL`` is of type unknown, which every parameter type takes, so "function
    f(unknown, ...) does not exist" says no overload has that many arguments; a call
    PostgreSQL refuses for another reason (an ambiguous overload, a polymorphic type)
    is not this test's. The functions with no bounds (ordered-set aggregates, and
    the window functions PostgreSQL also reads as hypothetical-set aggregates) stay
    FUNCTION_NAME and are left out."""
    from pg_server import running_server

    _, narrow, _, _, _ = languages(POSTGRES)  # the reader is granted every function
    statements = [
        f"SELECT {name}({', '.join(['NULL'] * n)}){over} FROM employees"
        for name in sorted(set(POSTGRES.functions))
        if call_terminal(POSTGRES, name) is not None
        for n in range(5)
        for over in ("", " OVER ()")
    ]
    with running_server(PG_TRY) as server:
        listed = ",".join(f"$q${sql}$q$" for sql in statements)
        listing = f"unnest(ARRAY[{listed}]) WITH ORDINALITY AS t(q, i)"
        run = server.run(f"SELECT i || '|' || grid_try(q) FROM {listing};")
    errors = dict(line.split("|", 1) for line in run.stdout.splitlines())
    assert len(errors) == len(statements), run.stderr
    checked = refused = 0
    for i, sql in enumerate(statements, 1):
        error = errors[str(i)]
        arity = (error.startswith("function ") and error.endswith("does not exist")) or any(
            why in error
            for why in ("requires an OVER clause", "is not a window function nor an aggregate")
        )
        if error and not arity:
            continue  # refused for another reason (not this test's)
        checked += 1
        refused += arity
        assert narrow.accepts(f"{sql};".encode()) == (not error), (sql, error)
    assert checked > 500 and refused > 400, (checked, refused)


def test_typed_calls_of_a_role_granted_some_functions() -> None:
    """A role's function category is split over the typed terminals: each keeps the
    role's call lexemes of its functions, in the role's case forms only."""
    words = {**WORDS, "FUNCTION_NAME": [b"pow(", b"POW(", b"abs(", b"rank("]}
    full = RoleProjection.compile(READER, SQLITE, words=words).grammar
    narrow, typed, _ = generation_language("narrow", full, SQLITE, words, "reader")
    assert typed["FUNCTION_NAME"] == []
    assert typed["FUNCTION_NAME_2_2_SCALAR"] == [b"POW(", b"pow("]
    assert typed["FUNCTION_NAME_0_0_WINDOW"] == [b"rank("]
    language = CoreLanguage(narrow, SQLITE, typed)
    for sql, ok in [
        (b"SELECT pow(id, 2), POW(id, 2), abs(id) FROM employees;", True),
        (b"SELECT rank() OVER (ORDER BY id) FROM employees;", True),
        (b"SELECT Pow(id, 2) FROM employees;", False),  # not a case form the role has
        (b"SELECT sin(id) FROM employees;", False),  # not granted
        (b"SELECT pow(id) FROM employees;", False),
        (b"SELECT rank() FROM employees;", False),
    ]:
        assert language.accepts(sql) == ok, sql


@pytest.mark.parametrize("dialect", [SQLITE, POSTGRES])
def test_typed_patterns_are_the_dialects_word_class(dialect: Dialect) -> None:
    """The typed terminals' patterns are FUNCTION_NAME's construction over their own
    functions (the same construction over all gives FUNCTION_NAME's): each function
    is lexed by its own terminal alone."""
    grammar = dialect_grammar(dialect)
    (call,) = (t for t in grammar.terminals if t.name == "FUNCTION_NAME")
    assert call.pattern == f"(?i:(?:{word_alternatives(dialect.functions)})\\()"
    typed, words = typed_calls(grammar, dialect, {})
    # FUNCTION_NAME with no function left (SQLite) is a category with no word
    patterns = {t.name: re.compile(t.pattern) for t in typed.terminals if words.get(t.name) != []}
    for name in set(dialect.functions):
        hits = {t for t, p in patterns.items() if p.fullmatch(f"{name.upper()}(")}
        want = call_terminal(dialect, name) or "FUNCTION_NAME"
        assert hits == {want}, (name, hits)
