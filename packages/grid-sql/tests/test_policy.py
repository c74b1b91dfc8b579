"""Policy bundles: the TOML format, located errors, schema validation, fingerprints."""

from __future__ import annotations

import random
from importlib import resources
from pathlib import Path

import pytest

from grid_core.errors import PolicyError
from grid_sql.policy import (
    ALL,
    CLAUSES,
    MissingKeyError,
    PolicyBundle,
    PolicyFileError,
    PolicyReferenceError,
    PolicySyntaxError,
    PolicyTypeError,
    PolicyValueError,
    Role,
    UnknownKeyError,
    UnknownRoleError,
    example_policy,
)
from grid_sql.schema import SchemaSnapshot, example_schema

BASE = """\
version = 1

[roles.reader]
verbs = ["SELECT"]
tables = ["employees"]
"""


# ---------------------------------------------------------------- the example policy


def test_example_policy_roles() -> None:
    policy = example_policy(example_schema())
    assert set(policy.roles) == {"analyst", "clerk", "admin", "intern"}
    analyst, clerk, admin = policy.role("analyst"), policy.role("clerk"), policy.role("admin")
    assert analyst.verbs == {"SELECT"} and analyst.tables == ("departments", "employees")
    assert analyst.columns == {} and analyst.banned_clauses == frozenset()
    assert clerk.verbs == {"SELECT", "INSERT", "UPDATE"}
    assert clerk.columns == {"employees": ("id", "name", "dept_id")}
    assert admin.verbs == {"SELECT", "INSERT", "UPDATE", "DELETE"} and admin.tables == ALL
    assert policy.role("intern").banned_clauses == {
        "subquery",
        "set_operations",
        "cte",
        "join",
        "window",
    }
    assert policy.path == "grid_sql/examples/company.policy.toml"


def test_example_column_grants() -> None:
    schema = example_schema()
    grants = example_policy().column_grants(schema)
    assert grants["analyst"] == {"departments": None, "employees": None}  # nothing hidden
    assert grants["clerk"] == {"orders": None, "employees": ("id", "name", "dept_id")}
    assert grants["admin"] == dict.fromkeys(["departments", "employees", "orders", "salaries"])
    analyst = example_policy().grants("analyst", schema)
    assert analyst.columns == {
        "departments": ("id", "name", "budget"),
        "employees": ("id", "name", "dept_id", "hired"),
    }
    clerk = example_policy().grants("clerk", schema)
    assert clerk.unrestricted == {"orders"} and clerk.tables == ("orders", "employees")
    assert clerk.schema_fingerprint == schema.fingerprint


def test_unknown_role() -> None:
    with pytest.raises(UnknownRoleError, match="'auditor'") as info:
        example_policy().role("auditor")
    assert info.value.known == ("admin", "analyst", "clerk", "intern")
    assert isinstance(info.value, PolicyError)


# ---------------------------------------------------------------- fingerprints


def test_fingerprint_ignores_layout_comments_and_order() -> None:
    one = PolicyBundle.loads(
        'version = 1\n[roles.a]\nverbs = ["SELECT", "INSERT"]\ntables = ["t", "u"]\n'
        'columns.t = ["x", "y"]\n[roles.b]\nverbs = ["DELETE"]\ntables = "*"\n'
    )
    two = PolicyBundle.loads(
        "# the same policy\nversion = 1\nroles.b = { verbs = ['delete'], tables = '*' }\n"
        "[roles.a]\ntables = ['u', 't']  # order is no content\n"
        "verbs = ['insert', 'select']\n[roles.a.columns]\nt = ['y', 'x']\n",
        "elsewhere.toml",
    )
    assert one.fingerprint == two.fingerprint
    three = PolicyBundle.loads(BASE.replace('"SELECT"', '"SELECT", "DELETE"'))
    assert three.fingerprint != PolicyBundle.loads(BASE).fingerprint
    assert example_policy().fingerprint == example_policy().fingerprint


def test_defaults_and_aliases() -> None:
    role = PolicyBundle.loads(
        BASE + 'banned_clauses = ["union", "with", "join"]\ncte_names = ["recent"]\n'
    ).role("reader")
    assert role.banned_clauses == {"set_operations", "cte", "join"}
    assert role.cte_names == ("recent",)
    assert PolicyBundle.loads(BASE).role("reader").cte_names == ("cte",)
    assert role == Role(
        "reader",
        frozenset({"SELECT"}),
        ("employees",),
        frozenset({"set_operations", "cte", "join"}),
        {},
        ("recent",),
    )


def test_roles_hash_by_content() -> None:
    one, two = PolicyBundle.loads(BASE).role("reader"), PolicyBundle.loads(BASE).role("reader")
    assert one == two and hash(one) == hash(two) and len({one, two}) == 1
    assert len(set(example_policy().roles.values())) == 4


def test_every_clause_is_documented() -> None:
    assert set(CLAUSES) >= {"subquery", "set_operations", "cte", "join"}
    assert all(CLAUSES.values())


# ---------------------------------------------------------------- errors: file, line, field

ERRORS = {
    "syntax: missing value": (
        BASE + "description = \n",
        PolicySyntaxError, 6, "roles.reader.description",
    ),
    "syntax: unclosed header": (
        "version = 1\n[roles.reader\n", PolicySyntaxError, 2, "",
    ),
    "syntax: duplicate key": (
        BASE + 'verbs = ["DELETE"]\n', PolicySyntaxError, 6, "roles.reader.verbs",
    ),
    "unknown top-level key": (
        "version = 1\nroels = {}\n" + BASE[12:], UnknownKeyError, 2, "roels",
    ),
    "unknown dotted key": (
        BASE + 'colums.employees = "*"\n', UnknownKeyError, 6, "roles.reader.colums",
    ),
    "unknown role key": (
        BASE + 'table = ["x"]\n', UnknownKeyError, 6, "roles.reader.table",
    ),
    "unknown key in an inline table": (
        'version = 1\nroles.r = { verbs = [], tables = "*", colums = {} }\n',
        UnknownKeyError, 2, "roles.r.colums",
    ),
    "missing version": (BASE[12:], MissingKeyError, None, ""),
    "missing roles": ("version = 1\n", MissingKeyError, None, ""),
    "missing verbs": ("version = 1\n[roles.r]\ntables = '*'\n", MissingKeyError, 2, "roles.r"),
    "no role": ("version = 1\n[roles]\n", PolicyValueError, 2, "roles"),
    "wrong version": ("version = 2\n" + BASE[12:], PolicyValueError, 1, "version"),
    "version is a string": ('version = "1"\n' + BASE[12:], PolicyTypeError, 1, "version"),
    "version is a boolean": ("version = true\n" + BASE[12:], PolicyTypeError, 1, "version"),
    "verbs is a string": (
        BASE.replace('["SELECT"]', '"SELECT"'), PolicyTypeError, 4, "roles.reader.verbs",
    ),
    "a verb is a number": (
        BASE.replace('["SELECT"]', '["SELECT", 1]'), PolicyTypeError, 4, "roles.reader.verbs[1]",
    ),
    "unknown verb": (
        BASE.replace('["SELECT"]', '[\n  "SELECT",\n  "UPSERT",\n]'),
        PolicyValueError, 6, "roles.reader.verbs[1]",
    ),
    "a verb spelled with a long s": (  # Unicode's upper case of "ſelect" is SELECT
        BASE.replace('["SELECT"]', '["ſelect"]'), PolicyValueError, 4, "roles.reader.verbs[0]",
    ),
    "a verb spelled with a dotless i": (
        BASE.replace('["SELECT"]', '["SELECT", "ınsert"]'),
        PolicyValueError, 4, "roles.reader.verbs[1]",
    ),
    "verb twice": (
        BASE.replace('["SELECT"]', '["SELECT", "select"]'),
        PolicyValueError, 4, "roles.reader.verbs[1]",
    ),
    "unknown clause": (
        BASE + 'banned_clauses = ["subquery", "joins"]\n',
        PolicyValueError, 6, "roles.reader.banned_clauses[1]",
    ),
    "tables is a word": (
        BASE.replace('["employees"]', '"all"'), PolicyValueError, 5, "roles.reader.tables",
    ),
    "empty table name": (
        BASE.replace('["employees"]', '[""]'), PolicyValueError, 5, "roles.reader.tables[0]",
    ),
    "columns of a table not granted": (
        BASE + 'columns.salaries = ["amount"]\n',
        PolicyValueError, 6, "roles.reader.columns.salaries",
    ),
    "columns is an array": (BASE + "columns = []\n", PolicyTypeError, 6, "roles.reader.columns"),
    "column list is a number": (
        BASE + "[roles.reader.columns]\nemployees = 3\n",
        PolicyTypeError, 7, "roles.reader.columns.employees",
    ),
    "role is a string": ('version = 1\nroles.r = "admin"\n', PolicyTypeError, 2, "roles.r"),
    "no verb": (BASE.replace('["SELECT"]', "[]"), PolicyValueError, 4, "roles.reader.verbs"),
    "no table": (
        BASE.replace('["employees"]', "[]"), PolicyValueError, 5, "roles.reader.tables",
    ),
    "functions is a word": (
        BASE + 'functions = "all"\n', PolicyValueError, 6, "roles.reader.functions",
    ),
    "functions is a number": (
        BASE + "functions = 3\n", PolicyTypeError, 6, "roles.reader.functions",
    ),
    "function twice in two cases": (
        BASE + 'functions = ["upper", "UPPER"]\n',
        PolicyValueError, 6, "roles.reader.functions[1]",
    ),
    "bad role name": (
        'version = 1\n[roles."two words"]\nverbs = []\ntables = []\n',
        PolicyValueError, 2, 'roles."two words"',
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", ERRORS, ids=str)
def test_errors_name_file_line_and_field(case: str) -> None:
    text, kind, line, field = ERRORS[case]
    with pytest.raises(kind) as info:
        PolicyBundle.loads(text, "roles.toml")
    error = info.value
    assert isinstance(error, PolicyFileError) and isinstance(error, PolicyError)
    assert (error.path, error.line, error.field) == ("roles.toml", line, field), str(error)
    prefix = "roles.toml" if line is None else f"roles.toml:{line}"
    assert str(error).startswith(f"{prefix}: {field + ': ' if field else ''}"), str(error)


def test_load_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(BASE.replace('"SELECT"', '"SELEKT"'))
    with pytest.raises(PolicyValueError) as info:
        PolicyBundle.load(path)
    assert str(info.value) == f"{path}:4: roles.reader.verbs[0]: unknown verb 'SELEKT' " + (
        "(known: SELECT, INSERT, UPDATE, DELETE)"
    )
    with pytest.raises(PolicyFileError, match="cannot read"):
        PolicyBundle.load(tmp_path / "missing.toml")


def test_a_file_too_large_or_too_deep_is_refused_naming_it(tmp_path: Path) -> None:
    """An endless file (``/dev/zero``) is refused after a bounded read, never read
    into memory whole; nesting too deep for the TOML reader is a syntax error that
    names the file (it was a bare RecursionError, or a message with no file)."""
    if Path("/dev/zero").exists():
        with pytest.raises(PolicyFileError, match="/dev/zero: cannot read the file: it hol"):
            PolicyBundle.load("/dev/zero")
    deep = tmp_path / "deep.toml"
    deep.write_text(BASE + "description = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(PolicySyntaxError, match=r"deep\.toml: it nests too deeply"):
        PolicyBundle.load(deep)


# ---------------------------------------------------------------- against a schema

REFERENCE_ERRORS = {
    "unknown table": (
        BASE.replace('["employees"]', '[\n  "employees",\n  "payroll",\n]'),
        7, "roles.reader.tables[1]", "no relation 'payroll'",
    ),
    "unknown table named in a comment first": (
        BASE.replace('["employees"]', '[\n  # "payroll" went\n  "employees", "payroll",\n]'),
        7, "roles.reader.tables[1]", "no relation 'payroll'",
    ),
    "unknown column": (
        BASE + '[roles.reader.columns]\nemployees = ["id", "salary"]\n',
        7, "roles.reader.columns.employees[1]", "has no column 'salary'",
    ),
    "unknown table under all tables": (
        'version = 1\n[roles.r]\nverbs = ["SELECT"]\ntables = "*"\ncolumns.payroll = "*"\n',
        5, "roles.r.columns.payroll", "no relation 'payroll'",
    ),
    "cte name spells a relation": (
        BASE + 'cte_names = ["recent", "Salaries"]\n',
        6, "roles.reader.cte_names[1]", "is the name of relation 'salaries'",
    ),
    "a function that reads files": (
        BASE + 'functions = ["upper", "load_extension"]\n',
        6, "roles.reader.functions[1]", "the sqlite dialect has no function 'load_extension'",
    ),
    "a cte name no quote form holds": (
        BASE + 'cte_names = ["recent", "\\u0000x"]\n',
        6, "roles.reader.cte_names[1]", "': no quote form of sqlite can hold",
    ),
    "one relation's columns granted twice": (
        'version = 1\n[roles.r]\nverbs = ["SELECT"]\ntables = "*"\n'
        'columns.employees = ["id"]\ncolumns.EMPLOYEES = "*"\n',
        6, "roles.r.columns.EMPLOYEES",
        "columns.employees and columns.EMPLOYEES both name relation 'employees'",
    ),
    "a function of another dialect": (
        BASE + 'functions = ["repeat"]\n',
        6, "roles.reader.functions[0]", "the sqlite dialect has no function 'repeat'",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", REFERENCE_ERRORS, ids=str)
def test_reference_errors(case: str) -> None:
    text, line, field, reason = REFERENCE_ERRORS[case]
    bundle = PolicyBundle.loads(text, "roles.toml")  # structurally fine
    with pytest.raises(PolicyReferenceError, match=reason) as info:
        bundle.validate(example_schema())
    assert (info.value.line, info.value.field) == (line, field), str(info.value)
    with pytest.raises(PolicyReferenceError):
        PolicyBundle.loads(text, "roles.toml", example_schema())


def test_names_resolve_with_the_dialect_case_rule() -> None:
    text = BASE.replace('"employees"', '"Employees"') + 'columns.Employees = ["ID", "Name"]\n'
    sqlite = example_schema()
    grants = PolicyBundle.loads(text).grants("reader", sqlite)
    assert grants.columns == {"employees": ("id", "name")}  # catalog spelling
    postgres = SchemaSnapshot.from_dict({**sqlite.to_dict(), "dialect": "postgres"})
    with pytest.raises(PolicyReferenceError, match="no relation 'Employees'"):
        PolicyBundle.loads(text).validate(postgres)  # PostgreSQL: exact catalog spelling


def test_mutated_files_fail_only_with_policy_errors() -> None:
    """Random one-character edits of the example: a bundle or a located PolicyError, never
    another exception (seeded)."""
    text = resources.files("grid_sql.examples").joinpath("company.policy.toml").read_text()
    rng = random.Random(2026)
    alphabet = "[]{}\"'=.,#\n *abcSELECT0"
    outcomes = {"bundle": 0, "error": 0}
    for _ in range(400):
        i = rng.randrange(len(text))
        edit = rng.choice(["delete", "insert", "replace"])
        c = rng.choice(alphabet)
        mutated = {
            "delete": text[:i] + text[i + 1 :],
            "insert": text[:i] + c + text[i:],
            "replace": text[:i] + c + text[i + 1 :],
        }[edit]
        try:
            PolicyBundle.loads(mutated, "m.toml", example_schema())
            outcomes["bundle"] += 1
        except PolicyFileError as e:
            assert e.path == "m.toml" and (e.line is None or 1 <= e.line <= mutated.count("\n") + 1)
            outcomes["error"] += 1
    assert outcomes["bundle"] and outcomes["error"]


# ---------------------------------------------------------------- execution limits

LIMITED = """\
version = 1

[limits]
wall_time = 2
max_rows = 50

[roles.reader]
verbs = ["SELECT"]
tables = ["employees"]

[roles.batch]
verbs = ["SELECT"]
tables = "*"

[roles.batch.limits]
wall_time = 30.5
max_result_bytes = 10_000_000
"""


def test_limits_are_optional_with_the_documented_defaults() -> None:
    """A file without limits: every role gets DEFAULT_LIMITS, and its fingerprint is the one
    it had before limits existed (the example policy's, pinned)."""
    from grid_sql.limits import DEFAULT_LIMITS

    policy = example_policy(example_schema())
    assert policy.limits == DEFAULT_LIMITS
    assert all(role.limits == DEFAULT_LIMITS for role in policy.roles.values())
    assert policy.fingerprint == "3127589fe232e836c183a7b519c6af7c"


def test_limits_per_file_and_per_role_key_by_key() -> None:
    from grid_sql.limits import Limits

    policy = PolicyBundle.loads(LIMITED, "p.toml", example_schema())
    assert policy.limits == Limits(wall_time=2, max_rows=50)
    assert policy.role("reader").limits == Limits(wall_time=2, max_rows=50)
    assert policy.role("batch").limits == Limits(
        wall_time=30.5, max_rows=50, max_result_bytes=10_000_000
    )


def test_limits_enter_the_fingerprint_only_when_not_the_defaults() -> None:
    plain = PolicyBundle.loads(BASE)
    spelled = PolicyBundle.loads(BASE + "[roles.reader.limits]\nwall_time = 5.0\nmax_rows = 1000\n")
    tighter = PolicyBundle.loads(BASE + "[roles.reader.limits]\nmax_rows = 10\n")
    assert plain.fingerprint == spelled.fingerprint != tighter.fingerprint


@pytest.mark.parametrize(
    ("extra", "kind", "message"),
    [
        ("[limits]\nwall_time = -1\n", PolicyValueError, "p.toml:7: limits.wall_time: wall_time "),
        ("[limits]\nwall_time = nan\n", PolicyValueError, "limits.wall_time: wall_time must be"),
        ("[limits]\nmax_rows = 1.5\n", PolicyTypeError, "limits.max_rows: expected an integer"),
        ("[limits]\nmax_rows = true\n", PolicyTypeError, "expected an integer, got a boolean"),
        ("[limits]\nmax_memory = 0\n", PolicyValueError, "max_memory must be an integer in"),
        ("[limits]\nmax_row = 1\n", UnknownKeyError, "p.toml:7: limits.max_row: unknown key"),
        ("limits = 5\n", PolicyTypeError, "limits: expected a table of limits, got an integer"),
        (
            "[roles.reader.limits]\nwall_time = '5s'\n",
            PolicyTypeError,
            "p.toml:7: roles.reader.limits.wall_time: expected a number of seconds, got a string",
        ),
    ],
)
def test_limit_errors_name_file_line_and_field(
    extra: str, kind: type[PolicyFileError], message: str
) -> None:
    text = BASE + extra if extra.startswith("[") else BASE.replace("\n\n", f"\n{extra}\n", 1)
    with pytest.raises(kind) as info:
        PolicyBundle.loads(text, "p.toml")
    assert message in str(info.value)


# ---------------------------------------------------------------- functions (issue 15)


def test_functions_default_to_the_dialects_safe_list() -> None:
    """A role without ``functions`` may call every SQLite function but the allocators
    over a size; ``"*"`` is every function (no restriction); a list is resolved case-
    insensitively to the dialect's spelling. Fails if the default grants randomblob,
    zeroblob, printf or format, or if a list is not what the role gets."""
    from grid_sql.dialects import POSTGRES, SQLITE

    schema = example_schema()
    unsafe = {"randomblob", "zeroblob", "printf", "format"}
    assert {name for name, _ in SQLITE.unsafe_functions} == unsafe
    assert {name for name, _ in POSTGRES.unsafe_functions} == {"repeat", "lpad", "rpad", "format"}
    for role in ("analyst", "clerk", "admin", "intern"):
        granted = example_policy(schema).grants(role, schema).functions
        assert granted == SQLITE.default_functions and not unsafe & set(granted)
        assert set(granted) | unsafe == set(SQLITE.functions)
    every = PolicyBundle.loads(BASE + 'functions = "*"\n', "p.toml", schema)
    assert every.grants("reader", schema).functions is None
    listed = PolicyBundle.loads(BASE + 'functions = ["Upper", "ROUND"]\n', "p.toml", schema)
    assert listed.grants("reader", schema).functions == ("round", "upper")  # dialect order
    none = PolicyBundle.loads(BASE + "functions = []\n", "p.toml", schema)
    assert none.grants("reader", schema).functions == ()


def test_functions_enter_the_fingerprint_only_when_listed() -> None:
    """A file without ``functions`` keeps the fingerprint it had before functions were
    policy; listing them (or ``*``) changes it, in any order and case."""
    plain = PolicyBundle.loads(BASE)
    upper = PolicyBundle.loads(BASE + 'functions = ["upper", "lower"]\n')
    same = PolicyBundle.loads(BASE + 'functions = ["LOWER", "upper"]\n')
    every = PolicyBundle.loads(BASE + 'functions = "*"\n')
    assert upper.fingerprint == same.fingerprint
    assert len({plain.fingerprint, upper.fingerprint, every.fingerprint}) == 3


def test_a_relation_named_cte_moves_the_default_cte_name(tmp_path: Path) -> None:
    """A table named ``cte`` (issue 15: it broke every role) is granted, and a role that
    names no CTE gets ``cte1`` (``cte2`` when ``cte1`` is taken too); a role that lists
    ``cte`` itself is still an error naming the clash."""
    import sqlite3

    path = tmp_path / "cte.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript("CREATE TABLE cte (id INTEGER); CREATE TABLE CTE1 (id INTEGER);")
    schema = SchemaSnapshot.from_sqlite(path)
    policy = PolicyBundle.loads('version = 1\n[roles.r]\nverbs = ["SELECT"]\ntables = "*"\n')
    grants = policy.grants("r", schema)
    assert grants.tables == ("CTE1", "cte") and grants.cte_names == ("cte2",)
    listed = PolicyBundle.loads(
        'version = 1\n[roles.r]\nverbs = ["SELECT"]\ntables = "*"\ncte_names = ["cte"]\n'
    )
    with pytest.raises(PolicyReferenceError, match="CTE name 'cte' is the name of relation"):
        listed.grants("r", schema)


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ('tables = ["employees", "Employees"]', 5, "'Employees' names relation 'employees' again"),
        ('tables = ["employees"]\ncolumns.employees = ["id", "ID"]', 6,
         "'ID' names column 'id' again"),
        ('tables = ["employees"]\ncte_names = ["recent", "RECENT"]', 6,
         "'RECENT' is 'recent' again"),
        ('tables = ["employees"]\ncte_names = ["sqlite_master"]', 6,
         "starts with 'sqlite_', as the sqlite catalog's own relations do"),
        ('tables = ["employees"]\ncte_names = ["Pragma_Table_List"]', 6, "starts with 'pragma_'"),
    ],
)  # fmt: skip
def test_a_name_given_twice_or_reaching_the_catalog_is_an_error_at_its_line(
    body: str, line: int, message: str
) -> None:
    """Duplicate verbs were errors while a table, column or CTE name given twice (in
    two cases) passed; a CTE name the database resolves to its own catalog let the
    mask admit ``SELECT * FROM sqlite_master``."""
    text = f'version = 1\n\n[roles.r]\nverbs = ["SELECT"]\n{body}\n'
    policy = PolicyBundle.loads(text, "p.toml")
    with pytest.raises(PolicyReferenceError, match=message) as info:
        policy.grants("r", example_schema())
    assert f"p.toml:{line}:" in str(info.value)


def test_all_tables_of_a_schema_without_relations_is_an_error(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "empty.sqlite"
    sqlite3.connect(path).close()
    schema = SchemaSnapshot.from_sqlite(path)
    policy = PolicyBundle.loads('version = 1\n[roles.r]\nverbs = ["SELECT"]\ntables = "*"\n')
    with pytest.raises(PolicyReferenceError, match=r"roles\.r\.tables: .* has no relation"):
        policy.grants("r", schema)


def test_a_policy_file_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    """Some editors start a UTF-8 file with a BOM; tomllib read it as "Invalid
    statement (at line 1, column 1)"."""
    path = tmp_path / "bom.toml"
    path.write_bytes(b'\xef\xbb\xbfversion = 1\n[roles.r]\nverbs = ["SELECT"]\ntables = "*"\n')
    assert PolicyBundle.load(path).roles["r"].verbs == frozenset({"SELECT"})
