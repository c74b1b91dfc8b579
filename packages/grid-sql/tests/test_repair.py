"""Checker-guided repair: feedback text, the tighter lexicon, the retry loop.

- The feedback quotes every violation with its span and text, and lists what
  the role is granted on the tables involved.
- `tighten_lexicon` removes every spelling of an offending column, and only from
  COLUMN_NAME; `plan_retry` names the columns it over-restricts.
- The tighter lexicon works where it is meant to be used: a grid-core `Engine`
  built from it masks the removed column after SELECT, keeps the others; and,
  as documented, it is no proof: a double-quoted name outside the column lexicon
  is in L as a string, and the checker still flags it.
- `repair` with a scripted, model-free `generate`.
"""

from __future__ import annotations

import pytest

from grid_core.grammar import load_grammar
from grid_core.guide import Engine, GridGuide
from grid_core.vocab import Vocabulary
from grid_spec.spec import Language
from grid_sql.checker import SemanticChecker, ViolationKind
from grid_sql.dialects import SQLITE
from grid_sql.repair import RetryPlan, feedback_text, plan_retry, repair, tighten_lexicon

SCHEMA = {
    "employees": ["id", "name", "dept_id", "salary", "ssn"],
    "departments": ["id", "name", "budget"],
    "projects": ["id", "name", "budget"],
    "payroll": ["employee_id", "amount"],
}
GRANTS = {
    "clerk": {
        "employees": ["id", "name", "dept_id"],
        "departments": ["id", "name"],
        "projects": None,
    }
}
LEXICON = {
    "TABLE_NAME": [b"employees", b"departments", b"projects"],
    "COLUMN_NAME": [b"id", b"name", b"dept_id", b"salary", b'"Salary"', b"[SSN]", b"budget"],
}
CHECKER = SemanticChecker(SCHEMA, GRANTS)


def test_feedback_quotes_spans_messages_and_grants() -> None:
    sql = "SELECT e.salary, * FROM employees e JOIN departments d ON d.id = e.dept_id"
    violations = CHECKER.check(sql, "clerk")
    text = feedback_text(sql, "clerk", violations, CHECKER)
    assert sql in text
    for v in violations:
        assert v.message in text
    assert "1. bytes 7-15 `e.salary`: column salary of employees is not granted" in text
    assert "bytes 17-18 `*`: * expands to column ssn of employees" in text
    assert "- employees: id, name, dept_id\n" in text
    assert "- departments: id, name\n" in text
    assert "- other tables: projects" in text
    assert "Do not use * or t.*" in text
    assert feedback_text(sql, "clerk", [], CHECKER) == ""


def test_feedback_for_a_table_outside_the_grants() -> None:
    sql = "SELECT amount FROM payroll"
    violations = CHECKER.check(sql, "clerk")
    assert [v.kind for v in violations] == [ViolationKind.TABLE_NOT_GRANTED]
    text = feedback_text(sql, "clerk", violations, CHECKER)
    assert "table payroll is not granted to role clerk" in text
    assert "- other tables: employees, departments, projects" in text
    assert "(every column)" not in text.split("other tables")[0].split("Granted to")[1]


@pytest.mark.parametrize(
    ("sql", "headline"),
    [
        ("SELECT salary FROM employees", "it uses a column the role cannot use."),
        ("SELECT amount FROM payroll", "it uses a table the role cannot use."),
        ("SELECT nope FROM projects", "it names a column that no table in its FROM clause has."),
        ("SELECT x.id FROM projects", "it qualifies a column with a name that is no table or "),
        (
            "SELECT name FROM projects, projects AS p2 WHERE budget > 0",
            "it names a column that two of its tables have, without saying which",
        ),
        (
            "SELECT salary, nope FROM employees",
            "it uses a column the role cannot use; it names a column that no table in",
        ),
        ("SELECT sin() FROM projects", "it calls a function with the wrong number of arg"),
        ("SELECT rank() FROM projects", "it uses a window function without OVER or where"),
        ("SELECT id FROM projects WHERE count(*) > 1", "it uses an aggregate where none is"),
        (
            "SELECT (SELECT id, name FROM projects)",
            "a subquery, compound SELECT, VALUES, INSERT or IN table gives the",
        ),
    ],
)
def test_feedback_headline_is_true_for_the_violations(sql: str, headline: str) -> None:
    """The headline says what the checker found, never that a statement which uses only
    granted names "uses names the role cannot use" (issue #16: a role granted every
    table was told so about a column that does not exist)."""
    violations = CHECKER.check(sql, "clerk")
    assert violations
    first = feedback_text(sql, "clerk", violations, CHECKER).splitlines()[0]
    assert first.startswith("The SQL statement below was rejected for role clerk: ")
    assert headline in first
    grant_kinds = {ViolationKind.TABLE_NOT_GRANTED, ViolationKind.COLUMN_NOT_GRANTED}
    assert ("cannot use" in first) == any(v.kind in grant_kinds for v in violations)


@pytest.mark.parametrize(
    ("sql", "advice"),
    [
        ("SELECT salary FROM employees", "Rewrite the statement using only granted tables and "
         "columns."),
        ("SELECT sin() FROM projects", "Correct each call and subquery named above."),
        ("SELECT sin(), salary FROM employees", "Rewrite the statement using only granted "
         "tables and columns. Correct each call and subquery named above."),
    ],
)  # fmt: skip
def test_feedback_advice_fits_the_violations(sql: str, advice: str) -> None:
    """A statement whose only problems are statement rules is not told to use
    granted names: its names are granted."""
    text = feedback_text(sql, "clerk", CHECKER.check(sql, "clerk"), CHECKER)
    assert text.splitlines()[-1] == advice


def test_tighten_lexicon_removes_every_spelling_and_only_columns() -> None:
    tighter = tighten_lexicon(LEXICON, ["salary", "ssn"])
    assert tighter["COLUMN_NAME"] == [b"id", b"name", b"dept_id", b"budget"]
    assert tighter["TABLE_NAME"] == LEXICON["TABLE_NAME"]
    assert LEXICON["COLUMN_NAME"][3] == b"salary"  # the input is not modified


def test_plan_retry_names_over_restricted_columns() -> None:
    sql = "SELECT d.budget, e.ssn FROM departments d JOIN employees e ON e.dept_id = d.id"
    plan = plan_retry(sql, "clerk", CHECKER.check(sql, "clerk"), CHECKER, LEXICON)
    assert isinstance(plan, RetryPlan)
    assert plan.removed == ("budget", "ssn")
    assert plan.over_restricted == ("projects.budget",)  # granted there, removed for all
    assert plan.lexicon is not None
    assert plan.lexicon["COLUMN_NAME"] == [b"id", b"name", b"dept_id", b"salary", b'"Salary"']
    assert plan_retry(sql, "clerk", CHECKER.check(sql, "clerk"), CHECKER).lexicon is None
    clean = plan_retry("SELECT name FROM projects", "clerk", [], CHECKER, LEXICON)
    assert clean == RetryPlan("", None, (), ())


def _engine(lexicon: dict[str, list[bytes]]) -> tuple[Engine, list[bytes]]:
    words = [b"SELECT ", b"salary ", b"name ", b"budget "]
    spellings = [bytes([b]) for b in range(256)] + words + [b""]
    vocab = Vocabulary.from_spellings("bytes+words", spellings, [], [len(spellings) - 1])
    return Engine(load_grammar(SQLITE.grammar_text, "sqlite"), vocab, lexicon), words


def test_tighter_lexicon_masks_the_removed_column_in_a_grid_core_engine() -> None:
    sql = "SELECT salary FROM employees"
    plan = plan_retry(sql, "clerk", CHECKER.check(sql, "clerk"), CHECKER, LEXICON)
    assert plan.lexicon is not None
    for lexicon, salary_allowed in ((LEXICON, True), (plan.lexicon, False)):
        engine, words = _engine(lexicon)
        guide = GridGuide(engine)
        guide.accept_token(256)  # "SELECT "
        allowed = set(guide.mask_ids())
        assert (256 + words.index(b"salary ") in allowed) == salary_allowed
        assert 256 + words.index(b"name ") in allowed


def test_tighter_lexicon_is_no_proof_the_checker_still_decides() -> None:
    sql = "SELECT salary FROM employees"
    plan = plan_retry(sql, "clerk", CHECKER.check(sql, "clerk"), CHECKER, LEXICON)
    assert plan.lexicon is not None
    language = Language(SQLITE.grammar_text, plan.lexicon)
    assert not language.in_language(b"SELECT salary FROM employees;")
    sneaky = 'SELECT "salary" FROM employees;'  # a DQ_STRING for GRID, a column for SQLite
    assert language.in_language(sneaky.encode())
    assert [(v.table, v.column) for v in CHECKER.check(sneaky, "clerk")] == [
        ("employees", "salary")
    ]


def test_repair_retries_with_feedback_and_tighter_lexicon() -> None:
    script = iter(["SELECT * FROM employees", "SELECT id, name FROM employees"])
    calls: list[tuple[str, dict[str, list[bytes]] | None]] = []

    def generate(feedback: str, lexicon: dict[str, list[bytes]] | None) -> str:
        calls.append((feedback, lexicon))
        return next(script)

    result = repair(generate, "clerk", CHECKER, lexicon=LEXICON)
    assert result.sql == "SELECT id, name FROM employees"
    assert result.attempts == ("SELECT * FROM employees", "SELECT id, name FROM employees")
    assert [len(v) for v in result.violations] == [2, 0]
    assert calls[0] == ("", None)
    assert "* expands to column salary" in calls[1][0]
    assert calls[1][1] is not None
    assert calls[1][1]["COLUMN_NAME"] == [b"id", b"name", b"dept_id", b"budget"]


def test_repair_gives_up_and_accumulates_removals() -> None:
    script = iter(["SELECT salary FROM employees", "SELECT ssn FROM employees", "SELECT 1"])
    seen: list[dict[str, list[bytes]] | None] = []

    def generate(feedback: str, lexicon: dict[str, list[bytes]] | None) -> str:
        seen.append(lexicon)
        return next(script)

    result = repair(generate, "clerk", CHECKER, lexicon=LEXICON, retries=1)
    assert result.sql is None and len(result.attempts) == 2
    script = iter(["SELECT salary FROM employees", "SELECT ssn FROM employees", "SELECT 1"])
    seen.clear()
    result = repair(generate, "clerk", CHECKER, lexicon=LEXICON, retries=2)
    assert result.sql == "SELECT 1"
    last = seen[-1]
    assert last is not None and last["COLUMN_NAME"] == [b"id", b"name", b"dept_id", b"budget"]
    script = iter(["SELECT salary FROM employees", "SELECT 1"])
    seen.clear()
    assert repair(generate, "clerk", CHECKER, lexicon=LEXICON, tighten=False).sql == "SELECT 1"
    assert seen == [None, None]


def test_a_write_to_a_read_only_column_is_told_so_not_sent_to_the_grants() -> None:
    """The feedback said "Rewrite the statement using only granted tables and columns"
    under a grant that lists the column, and a generated column's message spoke of
    FTS5 commands."""
    checker = SemanticChecker(
        {"salaries": ["id", "amount", "band"], "docs": ["body", "docs"]},
        {"w": {"salaries": None, "docs": None}},
        generated={"salaries": ["band"]},
        hidden={"docs": ["docs"]},
    )
    sql = "UPDATE salaries SET band = 2;"
    found = checker.check(sql, "w")
    assert [v.kind for v in found] == [ViolationKind.READ_ONLY_COLUMN]
    assert "sets its value and takes no value" in found[0].message
    assert "FTS5" not in found[0].message
    feedback = feedback_text(sql, "w", found, checker)
    assert "- salaries: id, amount, band (every column)" in feedback
    assert "granted tables" not in feedback
    assert feedback.endswith(
        "Leave the generated and hidden columns named above out of INSERT and SET, and "
        "name the columns an INSERT's values are for."
    )
    plan = plan_retry(sql, "w", found, checker)
    assert plan.removed == ()  # the retry may still read it
    fts = checker.check("INSERT INTO docs(docs) VALUES ('delete-all');", "w")
    assert [v.kind for v in fts] == [ViolationKind.READ_ONLY_COLUMN]
    assert "FTS5" in fts[0].message
