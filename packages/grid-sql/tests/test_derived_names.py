"""The names SQLite gives a subquery's columns, against SQLite itself.

A NATURAL JOIN or USING compares the columns whose names both sides share, so
the checker must name a subquery's columns as SQLite does, or a NATURAL JOIN
compares a denied column it does not see (a red team's, session 46):

- a name ``true`` or ``false`` (any case, alias or not) is ``column<i>``;
- a duplicate takes ``:<count>`` in place of a ``:<digits>`` it ends with
  (``"x:1"`` twice is ``x:1, x:2``), and the fifth try a random count.

For each list of aliases, SQLite derives the names (``SELECT * FROM (...)``); a
table ``t`` gets exactly those columns (the random ones left out), and the
checker, for a role granted only ``t.id``, must flag exactly those columns in
``SELECT t.id FROM t NATURAL JOIN (<the list>) AS s``, which SQLite runs.
"""

from __future__ import annotations

import sqlite3

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid_sql.checker import SemanticChecker, ViolationKind

WORDS = ("a", "A", "a:1", "a:01", "a:", "true", "FALSE", "column2", ":5", "5", "x:2", "x")


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sqlite_names(select: str) -> list[str]:
    """SQLite's names of ``select``'s columns that do not change between runs (each
    run on a connection of its own: one would reuse its prepared statement)."""
    runs = []
    for _ in range(2):
        with sqlite3.connect(":memory:") as con:
            runs.append([d[0] for d in con.execute(f"SELECT * FROM ({select})").description])
        con.close()
    return [a for a, b in zip(*runs, strict=True) if a == b]


def check(aliases: list[str]) -> None:
    select = "SELECT " + ", ".join(f"{i} AS {quoted(a)}" for i, a in enumerate(aliases))
    names = sqlite_names(select)
    columns = ["id", *(n for n in names if n.lower() != "id")]
    sql = f"SELECT t.id FROM t NATURAL JOIN ({select}) AS s"
    with sqlite3.connect(":memory:") as con:
        con.execute(f"CREATE TABLE t ({', '.join(quoted(c) for c in columns)})")
        con.execute(sql).fetchall()  # SQLite runs it
    con.close()
    checker = SemanticChecker({"t": columns}, {"r": {"t": ["id"]}})
    found = checker.check(sql, "r")
    assert all(v.kind == ViolationKind.COLUMN_NOT_GRANTED for v in found), found
    assert {v.column for v in found} == set(columns[1:]), (aliases, names, found)


def test_true_false_and_suffixed_duplicates() -> None:
    for aliases in (
        ["true"],
        ["FALSE", "column1"],
        ["column2", "true"],
        ["x", "x:1", "x"],
        ["x:1", "x:1"],
        ["x:2", "x:2"],
        ["a:01", "a:01"],
        [":5", ":5"],
        ["a"] * 5,
        ["a"] * 7,  # the sixth and seventh names are random
    ):
        check(aliases)


@settings(
    derandomize=True, deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=7))
def test_subquery_names_are_sqlites(aliases: list[str]) -> None:
    check(aliases)
