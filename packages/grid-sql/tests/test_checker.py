"""The SemanticChecker: parse, name resolution, column policy.

- Parse: GRID's lexing feeding lark's LALR parser agrees with the executable
  specification on the sqlite corpus (accept lines parse, reject lines raise).
- Unit tables: each violation kind, its span and message; the rowid, double-quote
  and USING rules; input errors.
- Theorem 5 (docs/guarantees/index.md): on its counterexample both statements are
  in L (no mask over the base configuration tells them apart) and the checker
  flags exactly the one that reads the restricted column.
- Fixtures (fixtures/column_policy/): every case yields exactly its expected
  violations, and SQLite agrees: it compiles the cases (and rejects those with a
  resolution violation), and its authorizer reports a read of each expected column.
- Spider: zero violations under full grants on every executable dev gold query,
  and the checker's column reads equal SQLite's authorizer reads. Train gold is
  the same check, `slow`.
"""

from __future__ import annotations

import collections
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from grid_spec.spec import Language
from grid_sql.checker import (
    Analysis,
    GrantError,
    SchemaError,
    SemanticChecker,
    StatementParseError,
    Violation,
    ViolationKind,
    check_statement,
    contract_gaps,
    fold,
    full_grants,
    parse_statement,
    unquote,
)
from grid_sql.dialects import SQLITE

SPIDER = Path(
    os.environ.get("GRID_SPIDER_DIR", Path(__file__).resolve().parents[4] / "shared/data/spider")
)
FIXTURES = Path(__file__).parent / "fixtures" / "column_policy"

# The example of the brief: clerk may not see salary.
SCHEMA = {
    "employees": ["id", "name", "dept_id", "salary", "ssn"],
    "departments": ["id", "name", "budget"],
    "payroll": ["employee_id", "amount"],
}
GRANTS: dict[str, dict[str, Sequence[str] | None]] = {
    "clerk": {"employees": ["id", "name", "dept_id"], "departments": None},
    "admin": full_grants(SCHEMA),
}


@pytest.fixture(scope="module")
def checker() -> SemanticChecker:
    return SemanticChecker(SCHEMA, GRANTS)


def kinds(violations: list[Violation]) -> list[tuple[str, str | None, str | None]]:
    return [(v.kind.value, v.table, v.column) for v in violations]


# ================================================================ parse


def test_corpus_accept_lines_parse_and_reject_lines_raise() -> None:
    spec = Language(SQLITE.grammar_text)
    counts: collections.Counter[str] = collections.Counter()
    for entry in SQLITE.corpus():
        if entry.kind == "accept":
            assert parse_statement(entry.text).data == "start", entry
            counts["accept"] += 1
        elif entry.kind == "reject" and not spec.is_viable_prefix(entry.text):
            with pytest.raises(StatementParseError):
                parse_statement(entry.text)
            counts["reject"] += 1
    assert counts["accept"] >= 100 and counts["reject"] >= 40


def test_parse_supplies_a_missing_semicolon_and_counts_bytes() -> None:
    tree = parse_statement("SELECT 'é' AS x, name FROM t -- done")
    tokens = {t.type: (t.start_pos, t.end_pos) for t in tree.scan_values(lambda _: True)}
    assert tokens["COLUMN_NAME"] == (18, 22)  # 'é' is two bytes
    assert parse_statement(b"SELECT 1;") == parse_statement(b"SELECT 1")


def test_parse_error_names_offset_and_expected() -> None:
    with pytest.raises(StatementParseError) as err:
        parse_statement("SELECT name FROM t WHERE = 1;")
    assert (err.value.offset, err.value.lexeme) == (25, b"=")
    assert "COLUMN_NAME" in err.value.expected


def test_parse_reads_a_keyword_only_as_the_keyword() -> None:
    # Keywords are reserved (DESIGN.md section 11): a column named like one is quoted.
    checker = SemanticChecker({"train": ["From", "To"]}, {"r": {"train": ["To"]}})
    assert kinds(checker.check('SELECT "From" FROM train;', "r")) == [
        ("column_not_granted", "train", "From")
    ]
    with pytest.raises(StatementParseError) as err:
        parse_statement("SELECT From FROM train;")
    assert (err.value.offset, err.value.lexeme) == (7, b"From")


def test_grammar_contract_holds_for_sqlite() -> None:
    assert contract_gaps("sqlite") == ()


# ================================================================ unit tables


def test_the_brief_message(checker: SemanticChecker) -> None:
    (v,) = checker.check("SELECT salary FROM employees", "clerk")
    assert v.kind is ViolationKind.COLUMN_NOT_GRANTED
    assert (v.table, v.column, v.span, v.via) == ("employees", "salary", (7, 13), "reference")
    assert v.message == (
        "column salary of employees is not granted to role clerk; granted: id, name, dept_id"
    )


UNIT_CASES = [
    # (statement, [(kind, table, column, span text)])
    ("SELECT e.salary FROM employees AS e", [
        ("column_not_granted", "employees", "salary", "e.salary"),
    ]),
    ("SELECT * FROM employees", [
        ("column_not_granted", "employees", "salary", "*"),
        ("column_not_granted", "employees", "ssn", "*"),
    ]),
    ("SELECT d.name, e.* FROM departments d, employees e", [
        ("column_not_granted", "employees", "salary", "e.*"),
        ("column_not_granted", "employees", "ssn", "e.*"),
    ]),
    ("SELECT amount FROM payroll", [("table_not_granted", "payroll", None, "payroll")]),
    ("SELECT p.amount, p.x FROM payroll p", [
        ("unknown_column", "payroll", "x", "p.x"),
        ("table_not_granted", "payroll", None, "payroll"),
    ]),
    ("SELECT nme FROM employees", [("unknown_column", None, "nme", "nme")]),
    ("SELECT name FROM employes", [("unknown_table", "employes", None, "employes")]),
    ("SELECT d.name FROM employees e", [("unknown_qualifier", "d", None, "d.name")]),
    ("SELECT name FROM employees, departments", [("ambiguous_column", None, "name", "name")]),
    ("SELECT 1 FROM employees JOIN departments USING (budget)", [
        ("unknown_column", None, "budget", "budget"),
    ]),
    ("SELECT name FROM employees WHERE ssn IN (SELECT name FROM departments)", [
        ("column_not_granted", "employees", "ssn", "ssn"),
    ]),
    ("UPDATE employees SET salary = 1", [("column_not_granted", "employees", "salary", "salary")]),
    ("SELECT name AS salary FROM employees ORDER BY salary", []),
    ("SELECT name FROM employees WHERE name = \"Sales\"", []),
    ("SELECT name FROM employees WHERE name = \"salary\"", [
        ("column_not_granted", "employees", "salary", '"salary"'),
    ]),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "expected"), UNIT_CASES, ids=[c[0] for c in UNIT_CASES])
def test_unit_cases(
    checker: SemanticChecker, sql: str, expected: list[tuple[str, str, str, str]]
) -> None:
    found = checker.check(sql, "clerk")
    data = sql.encode()
    got = [
        (*k, data[v.span[0] : v.span[1]].decode()) for k, v in zip(kinds(found), found, strict=True)
    ]
    assert got == expected
    assert all(v.message and "\n" not in v.message for v in found)


def test_ambiguous_column_names_its_candidates(checker: SemanticChecker) -> None:
    (v,) = checker.check("SELECT id FROM employees e JOIN departments d ON 1", "admin")
    assert v.candidates == ("employees AS e", "departments AS d")
    assert v.message.endswith("qualify it as e.id or d.id")


def test_analysis_does_not_depend_on_the_role(checker: SemanticChecker) -> None:
    analysis = checker.analyze("SELECT e.*, d.name FROM employees e JOIN departments d USING (id)")
    assert isinstance(analysis, Analysis)
    assert [t.table for t in analysis.tables] == ["employees", "departments"]
    reads = [(a.table, a.column, a.via) for a in analysis.accesses]
    assert ("employees", "id", "using") in reads and ("departments", "id", "using") in reads
    assert [c for t, c, via in reads if via == "star"] == [
        "id", "name", "dept_id", "salary", "ssn",
    ]  # fmt: skip
    assert analysis.violations == ()
    assert checker.check("SELECT e.* FROM employees e JOIN departments d USING (id)", "admin") == []


def test_rowid_is_an_access() -> None:
    schema = {"people": ["pid", "name"]}
    grants = {"r": {"people": ["name"]}, "s": {"people": ["name", "rowid"]}}
    plain = SemanticChecker(schema, grants)
    assert kinds(plain.check("SELECT rowid FROM people", "r")) == [
        ("column_not_granted", "people", "rowid")
    ]
    assert plain.check("SELECT rowid FROM people", "s") == []
    aliased = SemanticChecker(schema, grants, rowid_aliases={"people": "pid"})
    assert kinds(aliased.check("SELECT p.oid FROM people p", "s")) == [
        ("column_not_granted", "people", "pid")
    ]
    assert aliased.check("SELECT name FROM people WHERE _rowid_ = 1", "r")[0].column == "pid"


def test_names_compare_by_ascii_case_folding() -> None:
    assert unquote('"a""b"') == 'a"b' and unquote("[x]") == "x" and unquote("`a``b`") == "a`b"
    assert fold("ÉmployeeS") == "Émployees"  # ASCII only, as SQLite
    checker = SemanticChecker({"Émp": ["Ü"]}, {"r": {"Émp": []}})
    assert kinds(checker.check('SELECT "Ü" FROM "Émp"', "r")) == [
        ("column_not_granted", "Émp", "Ü")
    ]


def test_input_errors() -> None:
    with pytest.raises(SchemaError):
        SemanticChecker({"t": ["a", "A"]}, {})
    with pytest.raises(SchemaError):
        SemanticChecker({"t": ["a"], "T": ["b"]}, {})
    with pytest.raises(GrantError) as err:
        SemanticChecker({"t": ["a"]}, {"r": {"t": ["b"]}})
    assert (err.value.role, err.value.table, err.value.column) == ("r", "t", "b")
    with pytest.raises(GrantError):
        SemanticChecker({"t": ["a"]}, {"r": {"u": None}})
    with pytest.raises(GrantError):
        SemanticChecker({"t": ["a"]}, {"r": {"t": None}}).check("SELECT a FROM t", "nobody")
    assert check_statement("SELECT a FROM t", {"t": ["a"]}, {"r": {"t": []}}, "r")[0].column == "a"


# ================================================================ theorem 5


def test_column_policy_flagged_after_the_parse() -> None:
    """Rbac.v's counterexample: `b` may not be read from `t2`. Both statements are
    in L with the schema lexicons, and their prefixes up to FROM are one parser
    configuration; only the checker can tell them apart."""
    schema = {"t1": ["a", "b"], "t2": ["a", "b"]}
    checker = SemanticChecker(schema, {"r": {"t1": None, "t2": ["a"]}})
    language = Language(
        SQLITE.grammar_text, {"TABLE_NAME": [b"t1", b"t2"], "COLUMN_NAME": [b"a", b"b"]}
    )
    stacks = []
    for column in ("a", "b"):
        scanned = language.scan(f"SELECT {column} FROM".encode())
        assert scanned is not None
        stacks.append(scanned[0][0].parser_state.state_stack)
        for table in ("t1", "t2"):
            sql = f"SELECT {column} FROM {table};"
            assert language.in_language(sql.encode())
            expected = [("column_not_granted", "t2", "b")] if (column, table) == ("b", "t2") else []
            assert kinds(checker.check(sql, "r")) == expected
    assert stacks[0] == stacks[1]


# ================================================================ fixtures


@dataclass(frozen=True)
class Case:
    line: int
    construct: str
    role: str
    expected: frozenset[tuple[str, str | None, str | None]]
    sql: str

    @property
    def resolution(self) -> bool:
        return any(k.startswith(("unknown", "ambiguous")) for k, _, _ in self.expected)


def load_cases() -> list[Case]:
    cases = []
    for number, line in enumerate((FIXTURES / "cases.txt").read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        construct, role, expected, sql = line.split(" | ", 3)
        found: set[tuple[str, str | None, str | None]] = set()
        if expected != "ok":
            for item in expected.split(";"):
                kind, _, target = item.strip().rpartition(":")
                table, _, column = target.partition(".")
                found.add((kind or "column_not_granted", table or None, column or None))
        cases.append(Case(number, construct, role, frozenset(found), sql))
    return cases


CASES = load_cases()


def sqlite_schema(con: sqlite3.Connection) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Tables and views with their columns, and each table's INTEGER PRIMARY KEY."""
    schema: dict[str, list[str]] = {}
    rowid: dict[str, str] = {}
    names = con.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
        "AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
    ).fetchall()
    for (name,) in names:
        info = con.execute(f"PRAGMA table_info({json.dumps(name)})").fetchall()
        schema[name] = [row[1] for row in info]
        keys = [row for row in info if row[5]]
        if len(keys) == 1 and str(keys[0][2]).upper() == "INTEGER":
            rowid[name] = keys[0][1]
    return schema, rowid


@pytest.fixture(scope="module")
def fixture_db() -> Iterator[sqlite3.Connection]:
    con = sqlite3.connect(":memory:")
    con.executescript((FIXTURES / "schema.sql").read_text())
    yield con
    con.close()


@pytest.fixture(scope="module")
def fixture_checker(fixture_db: sqlite3.Connection) -> SemanticChecker:
    schema, rowid = sqlite_schema(fixture_db)
    grants = json.loads((FIXTURES / "grants.json").read_text())
    return SemanticChecker(schema, grants, rowid_aliases=rowid)


def _folded(items: frozenset[tuple[str, str | None, str | None]]) -> set[tuple[str, ...]]:
    return {(k, fold(t or ""), fold(c or "")) for k, t, c in items}


def test_fixture_counts() -> None:
    violating = [c for c in CASES if c.expected]
    column = [c for c in violating if any(k == "column_not_granted" for k, _, _ in c.expected)]
    controls = [c for c in CASES if not c.expected]
    by_construct = collections.Counter(c.construct for c in column)
    assert len(column) >= 100, len(column)
    assert len(controls) >= 40, len(controls)
    for construct in (
        "alias", "where", "group_by", "having", "order_by", "function", "scalar_subquery",
        "in_subquery", "exists", "from_subquery", "correlated", "cte", "set_op", "join",
        "using", "natural", "star", "qualified_star", "window", "quoted", "dml",
    ):  # fmt: skip
        assert by_construct[construct] >= 1, construct
    assert len({(c.role, c.sql) for c in CASES}) == len(CASES), "a case is listed twice"


@pytest.mark.parametrize("case", CASES, ids=[f"{c.line}-{c.construct}" for c in CASES])
def test_fixture_case(fixture_checker: SemanticChecker, case: Case) -> None:
    found = fixture_checker.check(case.sql, case.role)
    got = frozenset((v.kind.value, v.table, v.column) for v in found)
    assert _folded(got) == _folded(case.expected)
    data = case.sql.encode()
    for v in found:
        start, end = v.span
        assert 0 <= start < end <= len(data)
        text = fold(data[start:end].decode())
        if v.via == "reference":
            assert fold(v.column or "") in text, (v, text)
        elif v.via == "star":
            assert text.endswith("*")


@pytest.mark.parametrize("case", CASES, ids=[f"{c.line}-{c.construct}" for c in CASES])
def test_fixture_sqlite_agrees(fixture_db: sqlite3.Connection, case: Case) -> None:
    grants = json.loads((FIXTURES / "grants.json").read_text())[case.role]
    granted = {fold(t): None if c is None else {fold(x) for x in c} for t, c in grants.items()}
    seen: set[tuple[str, str, str | None]] = set()

    def authorizer(action: int, table: str | None, column: str | None, *_: object) -> int:
        if action in (sqlite3.SQLITE_READ, sqlite3.SQLITE_UPDATE) and table and column:
            allowed = granted.get(fold(table), set())
            if fold(table) not in granted:
                seen.add(("table_not_granted", fold(table), ""))
            elif allowed is not None and fold(column) not in allowed:
                seen.add(("column_not_granted", fold(table), fold(column)))
        return sqlite3.SQLITE_OK

    fixture_db.set_authorizer(authorizer)
    try:
        fixture_db.execute("EXPLAIN " + case.sql).fetchall()
        error = None
    except sqlite3.Error as err:
        error = err
    finally:
        fixture_db.set_authorizer(None)
    if case.resolution:
        assert error is not None, "SQLite accepts a statement the checker rejects"
        return
    assert error is None, error
    expected = _folded(case.expected)
    assert seen <= expected
    # SQLite's authorizer does not report the columns USING/NATURAL compare, nor INSERT's.
    if case.construct not in ("using", "natural") and not case.sql.startswith("INSERT"):
        assert seen == expected


# ================================================================ Spider


@dataclass
class _Database:
    con: sqlite3.Connection
    checker: SemanticChecker
    views: frozenset[str]
    schema_only: bool


class _Spider:
    def __init__(self) -> None:
        self.dbs: dict[str, _Database | None] = {}
        self.failures: list[str] = []

    def database(self, db_id: str) -> _Database | None:
        if db_id not in self.dbs:
            files = sorted((SPIDER / "database" / db_id).glob("*.sqlite"))
            if not files:
                self.dbs[db_id] = None
                return None
            con = sqlite3.connect(f"file:{files[0]}?mode=ro", uri=True)
            schema, rowid = sqlite_schema(con)
            views = con.execute("SELECT name FROM sqlite_master WHERE type = 'view'").fetchall()
            checker = SemanticChecker(schema, {"all": full_grants(schema)}, rowid_aliases=rowid)
            self.dbs[db_id] = _Database(
                con, checker, frozenset(fold(v) for (v,) in views), "schema_only" in files[0].name
            )
        return self.dbs[db_id]

    def run(self, split: str) -> collections.Counter[str]:
        """Check every gold query of ``split``; the counters and the failures."""
        path = SPIDER / f"{split}_gold.sql"
        if not path.exists() or not (SPIDER / "database").is_dir():
            pytest.skip(
                f"Spider gold and databases not found at {SPIDER} (set GRID_SPIDER_DIR): "
                "the queries run on the real databases, which the repository does not vendor"
            )
        stats: collections.Counter[str] = collections.Counter()
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            sql, db_id = line.rsplit("\t", 1)
            db = self.database(db_id)
            if db is None:
                stats["no database"] += 1
                continue
            prefix = "schema-only " if db.schema_only else ""
            reads = self._sqlite_reads(db, sql)
            if reads is None:
                stats[prefix + "not executable"] += 1
                continue
            stats[prefix + "executable"] += 1
            try:
                violations = db.checker.check(sql, "all")
            except StatementParseError as e:
                # Keywords are reserved (DESIGN.md section 11): a bare keyword as a name
                # (`SELECT Range FROM mountain`) is outside L, written quoted in it.
                if e.lexeme.decode().lower() not in SQLITE.quoted_words:
                    self.failures.append(f"{split} {number}: {sql} -> {e}")
                stats[prefix + "keyword as a bare name"] += 1
                continue
            if violations:
                stats[prefix + "false positive"] += 1
                self.failures.append(f"{split} {number}: {sql} -> {violations[0].message}")
            analysis = db.checker.analyze(sql)
            ours = {(fold(a.table), fold(a.column)) for a in analysis.accesses}
            joins = {
                (fold(a.table), fold(a.column))
                for a in analysis.accesses
                if a.via in ("using", "natural")
            }
            core = ours - joins
            if not core <= reads <= ours:
                stats[prefix + "read mismatch"] += 1
                self.failures.append(f"{split} {number}: {sql}: {sorted(core ^ reads)}")
        return stats

    @staticmethod
    def _sqlite_reads(db: _Database, sql: str) -> set[tuple[str, str]] | None:
        reads: set[tuple[str, str]] = set()

        def authorizer(action: int, table: str | None, column: str | None, *rest: object) -> int:
            source = rest[1]
            inside_view = isinstance(source, str) and fold(source) in db.views
            if action == sqlite3.SQLITE_READ and table and column and not inside_view:
                reads.add((fold(table), fold(column)))
            return sqlite3.SQLITE_OK

        db.con.set_authorizer(authorizer)
        try:
            db.con.execute("EXPLAIN " + sql).fetchall()
        except sqlite3.Error:
            return None
        finally:
            db.con.set_authorizer(None)
        return reads


def test_spider_dev_gold_zero_violations_under_full_grants() -> None:
    spider = _Spider()
    stats = spider.run("dev")
    assert spider.failures == []
    # 19 databases with data (972 queries, all executable) and wta_1's schema-only file.
    assert stats == {"executable": 972, "schema-only executable": 62}


@pytest.mark.slow
def test_spider_train_gold_zero_violations_under_full_grants() -> None:
    spider = _Spider()
    stats = spider.run("train")
    assert spider.failures == []
    assert stats["executable"] >= 8500
    assert stats["false positive"] == stats["read mismatch"] == 0
    # CAST (43), count (8), Range/range (6) as table or column names: outside L
    assert stats["keyword as a bare name"] == 57


def test_a_using_join_compares_its_own_left_operand_not_the_update_target() -> None:
    """USING and NATURAL compare the join's own left operand: never an UPDATE's
    target (all three databases; SQLite shown here, running the statement). The
    checker took the leftmost source in scope with the column, the target's
    granted pay.salary, while SQLite compared the denied employees.salary (a red
    team's, session 45; PostgreSQL's comma case is in test_checker_postgres)."""
    import sqlite3

    schema = {"pay": ["id", "salary"], "employees": ["id", "name", "salary"]}
    grants = {"clerk": {"pay": None, "employees": ["id", "name"]}}
    checker = SemanticChecker(schema, grants)
    db = sqlite3.connect(":memory:")
    db.executescript(
        "CREATE TABLE pay (id, salary); INSERT INTO pay VALUES (1, 7);"
        "CREATE TABLE employees (id, name, salary); INSERT INTO employees VALUES (1, 'a', 2000);"
    )
    template = "UPDATE pay SET id = 5 FROM employees AS e {} (SELECT {} AS salary) AS q{}"
    for join, using in (("JOIN", " USING (salary)"), ("NATURAL JOIN", "")):
        hits = {v: db.execute(template.format(join, v, using)).rowcount for v in (2000, 7)}
        db.rollback()
        assert hits == {2000: 1, 7: 0}, hits  # SQLite compares employees.salary
        found = checker.check(template.format(join, 1, using), "clerk")
        assert [v.column for v in found if v.kind == ViolationKind.COLUMN_NOT_GRANTED] == [
            "salary"
        ], found


def test_a_collated_column_keeps_its_name() -> None:
    """SQLite names an unaliased ``x COLLATE c`` as it names ``x``: a NATURAL JOIN
    with such a subquery compares the denied column (the checker named it by its
    text; a red team's, session 45)."""
    import sqlite3

    schema = {"employees": ["id", "name", "salary"]}
    checker = SemanticChecker(schema, {"clerk": {"employees": ["id", "name"]}})
    sql = (
        "SELECT e.name FROM employees AS e NATURAL JOIN "
        "(SELECT z.salary COLLATE binary FROM (SELECT {} AS salary) AS z) AS q"
    )
    db = sqlite3.connect(":memory:")
    db.executescript(
        "CREATE TABLE employees (id, name, salary); INSERT INTO employees VALUES (1, 'a', 2000);"
    )
    assert db.execute(sql.format(2000)).fetchall() == [("a",)]
    assert db.execute(sql.format(7)).fetchall() == []  # SQLite compares the salary
    found = checker.check(sql.format(1), "clerk")
    assert [v.column for v in found if v.kind == ViolationKind.COLUMN_NOT_GRANTED] == ["salary"], (
        found
    )
