"""The postgres dialect (L1): grammar build, corpus, a real server's verdict, policy.

Every membership verdict here comes from the executable specification
(`grid_spec.spec.Language`), never from lark's own lexers.

- The corpus `dialects/corpus/postgres.txt` (over `SCHEMA` below): accept lines
  are in L, "!" lines are not viable prefixes, "~" lines are viable prefixes
  not in L.
- Every accept line is also prepared (`PREPARE s AS ...`: parsed and analysed,
  never run) by a real PostgreSQL server that a module fixture starts in a
  temporary directory on 127.0.0.1 and a free port, driven through `psql`.
  Needs the server binaries (Debian: `apt-get install postgresql`, found under
  /usr/lib/postgresql/*/bin or $GRID_PG_BIN); as root, the server runs as the
  `postgres` system user. Without binaries the test is skipped, unless
  GRID_REQUIRE_POSTGRES=1 (CI), which turns the skip into a failure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import Server, running_server

from grid_spec.spec import Language
from grid_sql.dialect import CorpusEntry, build_lalr
from grid_sql.dialects import POSTGRES

CORPUS = POSTGRES.corpus()
RESULTS = Path(__file__).resolve().parents[3] / "bench" / "results" / "dialect_coverage"

SCHEMA = """
CREATE TABLE departments (id integer PRIMARY KEY, name text NOT NULL, location text,
  budget numeric(12,2), parent_id integer REFERENCES departments(id));
CREATE TABLE employees (id integer PRIMARY KEY, first_name text NOT NULL,
  last_name text NOT NULL, email text UNIQUE, department_id integer REFERENCES departments(id),
  manager_id integer REFERENCES employees(id), hire_date date, salary numeric(10,2),
  title text, is_active boolean DEFAULT true);
CREATE TABLE salaries (employee_id integer REFERENCES employees(id),
  amount numeric(10,2) NOT NULL, from_date date NOT NULL, to_date date,
  PRIMARY KEY (employee_id, from_date));
CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, email text UNIQUE,
  city text, country text, created_at timestamptz DEFAULT now());
CREATE TABLE products (id integer PRIMARY KEY, name text UNIQUE NOT NULL, category text,
  price numeric(10,2), stock integer DEFAULT 0);
CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer REFERENCES customers(id),
  employee_id integer REFERENCES employees(id), order_date date, status text DEFAULT 'new',
  total numeric(12,2), shipped_at timestamp);
CREATE TABLE order_items (order_id integer REFERENCES orders(id),
  product_id integer REFERENCES products(id), quantity integer NOT NULL,
  unit_price numeric(10,2), discount numeric(4,2) DEFAULT 0,
  PRIMARY KEY (order_id, product_id));
CREATE TABLE attendance (employee_id integer REFERENCES employees(id), date date NOT NULL,
  hours numeric(4,1), PRIMARY KEY (employee_id, date));
CREATE TABLE projects (id integer PRIMARY KEY, name text NOT NULL,
  department_id integer REFERENCES departments(id), start_date date, end_date date,
  budget numeric(12,2));
CREATE TABLE employee_projects (employee_id integer REFERENCES employees(id),
  project_id integer REFERENCES projects(id), role text, PRIMARY KEY (employee_id, project_id));
"""


@pytest.fixture(scope="module")
def spec() -> Language:
    return Language(POSTGRES.grammar_text)


# ---------------------------------------------------------------- grammar and corpus


def test_grammar_is_lalr1_without_conflicts() -> None:
    build_lalr(POSTGRES.grammar_text)  # strict: raises on any conflict
    POSTGRES.check_invariants()


def test_corpus_sizes() -> None:
    kinds = [e.kind for e in CORPUS]
    assert kinds.count("accept") >= 300
    assert kinds.count("reject") >= 50
    assert kinds.count("prefix") >= 30


@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: f"{e.kind}-line{e.line}")
def test_corpus(spec: Language, entry: CorpusEntry) -> None:
    if entry.kind == "accept":
        assert spec.in_language(entry.text)
    elif entry.kind == "prefix":
        assert spec.is_viable_prefix(entry.text)
        assert not spec.in_language(entry.text)
    else:
        assert not spec.is_viable_prefix(entry.text)
        assert not spec.in_language(entry.text)


# ---------------------------------------------------------------- a real PostgreSQL


@pytest.fixture(scope="module")
def postgres() -> Iterator[Server]:
    with running_server(SCHEMA) as server:
        yield server


def prepare_all(server: Server, entries: list[CorpusEntry]) -> list[str]:
    """PREPARE (parse and analyse, never run) every entry; the failures, with messages."""
    script = "".join(f"PREPARE s{i} AS {e.text.decode()}\n" for i, e in enumerate(entries))
    script += "SELECT name FROM pg_prepared_statements;\n"
    done = set(server.run(script).stdout.split())
    errors = []
    for i, entry in enumerate(entries):
        if f"s{i}" not in done:  # rerun alone for the server's message
            alone = server.run(f"PREPARE s AS {entry.text.decode()}\n")
            errors.append(f"line {entry.line}: {entry.text.decode()}\n    {alone.stderr.strip()}")
    return errors


def test_server_prepares_every_accept_line(postgres: Server) -> None:
    """PostgreSQL's parser and analyser take every accept line (PREPARE, not run)."""
    errors = prepare_all(postgres, [e for e in CORPUS if e.kind == "accept"])
    assert not errors, "\n".join(errors)


# ---------------------------------------------------------------- policy (lexicons)

LEXICONS: dict[str, set[bytes]] = {
    "TABLE_NAME": {b"employees", b"departments"},
    "COLUMN_NAME": {b"id", b"name", b"department_id", b"salary", b"date"},
    "CTE_NAME": {b"recent"},
}

POLICY_CASES = {
    "allowed table": (b"SELECT id FROM employees;", True),
    "cte in the cte lexicon": (
        b"WITH recent AS (SELECT id FROM employees) SELECT id FROM recent;",
        True,
    ),
    # A CTE_NAME word needs no WITH in the grammar: were `recent` also a table of the
    # catalog, the database would read that table. The CTE lexicon must be disjoint
    # from the catalog's relation names (or the SemanticChecker must bind every CTE).
    "cte word without its WITH": (b"SELECT id FROM recent;", True),
    "a column named by an alias list is no lexicon word": (
        b"SELECT v.n FROM (VALUES (1)) AS v(n);",
        False,
    ),
    # No string fallback in PostgreSQL: a double-quoted word is an identifier only.
    "double-quoted hidden column": (b'SELECT "secret" FROM employees;', False),
    "typed literal beside a date column": (
        b"SELECT date FROM employees WHERE date > date '2024-01-01';",
        True,
    ),
    "returning a hidden column": (b"DELETE FROM employees RETURNING secret;", False),
}


@pytest.fixture(scope="module")
def policy_spec() -> Language:
    return Language(POSTGRES.grammar_text, LEXICONS)


@pytest.mark.parametrize("case", POLICY_CASES, ids=str)
def test_policy_cases(policy_spec: Language, case: str) -> None:
    sentence, expected = POLICY_CASES[case]
    assert policy_spec.in_language(sentence) is expected


TABLE_POSITIONS = [
    b"SELECT id FROM {};",
    b"SELECT id FROM employees JOIN {} ON true;",
    b"SELECT id FROM employees CROSS JOIN {};",
    b"SELECT id FROM employees, {};",
    b"SELECT id FROM employees WHERE EXISTS (SELECT 1 FROM {});",
    b"INSERT INTO {} (id) VALUES (1);",
    b"UPDATE {} SET id = 1;",
    b"UPDATE employees SET id = 1 FROM {};",
    b"DELETE FROM {};",
    b"DELETE FROM employees USING {};",
    b"WITH recent AS (SELECT id FROM {}) SELECT id FROM recent;",
]


@pytest.mark.parametrize("template", TABLE_POSITIONS, ids=lambda t: t.decode())
def test_table_positions_take_lexicon_words_only(policy_spec: Language, template: bytes) -> None:
    assert policy_spec.in_language(template.replace(b"{}", b"employees"))
    for name in (b"salaries", b'"salaries"', b"public.employees", b"pg_catalog.pg_user"):
        sentence = template.replace(b"{}", name)
        assert not policy_spec.in_language(sentence), sentence
        assert not policy_spec.is_viable_prefix(sentence[: sentence.index(name) + len(name)])


@pytest.mark.parametrize(
    ("word", "spelling"),
    [
        ("employees", "employees"),
        ("Employees", '"Employees"'),
        ("user", '"user"'),
        ("order", '"order"'),
        ("date", "date"),
        ('say "hi"', '"say ""hi"""'),
    ],
)
def test_spell_identifier(word: str, spelling: str) -> None:
    assert POSTGRES.spell_identifier(word) == spelling


# ---------------------------------------------------------------- results (script mode)


def write_results() -> None:
    """Prepare the corpus on a fresh server; write bench/results/dialect_coverage/postgres.json."""
    accepted = [e for e in CORPUS if e.kind == "accept"]
    with running_server(SCHEMA) as server:
        version = server.run("SHOW server_version;").stdout.strip()
        t0 = time.perf_counter()
        errors = prepare_all(server, accepted)
        seconds = time.perf_counter() - t0
    spec = Language(POSTGRES.grammar_text)
    t0 = time.perf_counter()
    verdicts = {
        kind: sum(
            (spec.in_language(e.text) if kind == "accept" else not spec.in_language(e.text))
            and (kind != "reject" or not spec.is_viable_prefix(e.text))
            and (kind != "prefix" or spec.is_viable_prefix(e.text))
            for e in CORPUS
            if e.kind == kind
        )
        for kind in ("accept", "reject", "prefix")
    }
    report = {
        "corpus": POSTGRES.corpus_file,
        "lines": {k: sum(e.kind == k for e in CORPUS) for k in ("accept", "reject", "prefix")},
        "spec_agrees": verdicts,
        "spec_seconds": round(time.perf_counter() - t0, 1),
        "server": f"PostgreSQL {version}",
        "server_check": "PREPARE s AS <statement> through psql (parse + analysis, not run)",
        "server_accepted": len(accepted) - len(errors),
        "server_failures": errors,
        "server_seconds": round(seconds, 1),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "postgres.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    write_results()
