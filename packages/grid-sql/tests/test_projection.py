"""Role projection (L2): verbs cut at statement forms, clauses cut, reduction, emptiness.

Membership is decided by grid-core's lexer and parser over the projected
grammar with a lexicon of the whole example schema (every relation admitted),
so a rejection below is the projection's doing, not the lexicon's. The last
tests run the example policy end to end through a GridGuide over cl100k.
"""

from __future__ import annotations

from functools import cache

import pytest
from core_language import CoreLanguage
from hypothesis import given, settings
from hypothesis import strategies as st

from grid_core.errors import EmptyLanguageError, GuideError, PolicyError
from grid_core.grammar import Grammar, Rule
from grid_core.guide import Engine, GridGuide
from grid_core.vocab import cl100k
from grid_spec.spec import Language
from grid_sql.dialect import Dialect, DialectDefinitionError
from grid_sql.dialects import POSTGRES, SQLITE, available_dialects, get_dialect
from grid_sql.generation import narrow_grammar, narrow_rule
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import CLAUSES, VERBS, PolicyBundle, Role, example_policy
from grid_sql.projection import RoleProjection, dialect_dfa, dialect_grammar
from grid_sql.projection_rules import STATEMENT_FORMS, Cut, ProjectionRules
from grid_sql.schema import SchemaSnapshot, example_schema

WORDS = {
    "TABLE_NAME": [b"departments", b"employees", b"salaries", b"orders"],
    "COLUMN_NAME": [b"id", b"name", b"dept_id", b"amount", b"total", b"employee_id"],
    "CTE_NAME": [b"cte"],
}


def role(name: str, verbs: set[str], banned: set[str] | frozenset[str] = frozenset()) -> Role:
    return Role(name, frozenset(verbs), "*", frozenset(banned))


ADMIN = role("admin", set(VERBS))


@cache
def lang(dialect_name: str, verbs: frozenset[str], banned: frozenset[str]) -> CoreLanguage:
    dialect = get_dialect(dialect_name)
    projection = RoleProjection.compile(Role("r", verbs, "*", banned), dialect)
    return CoreLanguage(projection.grammar, dialect, WORDS)


# ---------------------------------------------------------------- verbs

STATEMENTS = {
    "sqlite": {
        "SELECT": [
            b"SELECT * FROM employees;",
            b"VALUES (1);",
            b"WITH cte AS (SELECT 1) SELECT * FROM cte;",
        ],
        "INSERT": [
            b"INSERT INTO orders VALUES (1, 2, 3.0, 'x');",
            b"INSERT OR IGNORE INTO orders (id) VALUES (1);",
            b"WITH cte AS (SELECT 1) INSERT INTO orders SELECT * FROM cte;",
        ],
        "UPDATE": [
            b"UPDATE orders SET total = 1 WHERE id = 2;",
            b"UPDATE OR IGNORE orders SET id = 1;",
        ],
        "DELETE": [
            b"DELETE FROM orders WHERE id = 1;",
            b"WITH cte AS (SELECT 1) DELETE FROM orders;",
        ],
        # REPLACE deletes the rows it conflicts with: an insert form that also needs DELETE.
        "INSERT+DELETE": [
            b"REPLACE INTO orders VALUES (1, 2, 3.0, 'x');",
            b"INSERT OR REPLACE INTO orders (id) VALUES (1);",
        ],
        "UPDATE+DELETE": [b"UPDATE OR REPLACE orders SET id = 1;"],
    },
    "postgres": {
        "SELECT": [b"SELECT * FROM employees;", b"VALUES (1);"],
        "INSERT": [
            b"INSERT INTO orders VALUES (1, 2, 3.0, 'x');",
            b"INSERT INTO orders (id) VALUES (1) ON CONFLICT DO NOTHING;",
        ],
        "UPDATE": [b"UPDATE orders SET total = 1 WHERE id = 2;"],
        "DELETE": [b"DELETE FROM orders WHERE id = 1;"],
        # ON CONFLICT ... DO UPDATE updates: PostgreSQL asks for the UPDATE privilege too.
        "INSERT+UPDATE": [
            b"INSERT INTO orders (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET total = 0;"
        ],
    },
}
VERB_SETS = [
    frozenset(),
    frozenset({"SELECT"}),
    frozenset({"INSERT"}),
    frozenset({"SELECT", "INSERT", "UPDATE"}),
    frozenset({"INSERT", "DELETE"}),
    frozenset({"UPDATE", "DELETE"}),
    frozenset({"DELETE"}),
    frozenset(VERBS),
]


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
@pytest.mark.parametrize("verbs", VERB_SETS, ids=lambda v: "+".join(sorted(v)) or "none")
def test_verbs_cut_statement_forms(dialect: str, verbs: frozenset[str]) -> None:
    if not verbs:
        with pytest.raises(EmptyLanguageError):
            lang(dialect, verbs, frozenset())
        return
    language = lang(dialect, verbs, frozenset())
    for needs, sentences in STATEMENTS[dialect].items():
        allowed = set(needs.split("+")) <= verbs
        for sql in sentences:
            assert language.accepts(sql) is allowed, (sorted(verbs), sql)


def test_replace_into_is_blocked_for_a_select_only_role() -> None:
    """Cutting the INSERT terminal alone would leave REPLACE INTO open; the form cut does not."""
    select_only = lang("sqlite", frozenset({"SELECT"}), frozenset())
    for sql in (b"REPLACE INTO employees VALUES (1);", b"replace into employees values (1);"):
        assert not select_only.accepts(sql)
        assert not select_only.viable(sql[:8])  # not even "REPLACE " is a viable prefix
    assert not select_only.viable(b"INSERT")
    assert select_only.viable(b"SEL") and select_only.viable(b"WITH cte AS (")
    l1 = dialect_grammar(SQLITE)
    by_terminal = CoreLanguage(
        l1.drop_terminals(["INSERT", "UPDATE", "DELETE"], "naive"), SQLITE, WORDS
    )
    assert by_terminal.accepts(
        b"REPLACE INTO employees VALUES (1);"
    )  # the leak the form cut closes


def test_empty_language_names_the_role() -> None:
    with pytest.raises(EmptyLanguageError, match="'mute'") as info:
        RoleProjection.compile(Role("mute", frozenset(), "*"), SQLITE)
    assert info.value.role == "mute"
    # every statement form banned, through clause rules that cut them all
    rules = SQLITE.projection
    assert rules is not None
    everything = ProjectionRules(
        rules.statement,
        rules.verb_forms,
        {**rules.clauses, "window": tuple(Cut("statement", f) for f in rules.verb_forms.values())},
    )
    with pytest.raises(EmptyLanguageError, match="'banned'") as info:
        RoleProjection.compile(role("banned", set(VERBS), {"window"}), SQLITE, rules=everything)
    assert info.value.role == "banned"


# ---------------------------------------------------------------- clauses

CLAUSE_SAMPLES: dict[str, dict[str, list[bytes]]] = {
    "sqlite": {
        "subquery": [
            b"SELECT * FROM (SELECT id FROM employees);",
            b"SELECT id FROM employees WHERE id IN (SELECT id FROM orders);",
            b"SELECT id FROM employees WHERE id IN orders;",
            b"SELECT (SELECT 1) FROM employees;",
            b"SELECT id FROM employees WHERE EXISTS (SELECT 1 FROM orders);",
            b"UPDATE orders SET total = (SELECT max(amount) FROM salaries);",
        ],
        "set_operations": [
            b"SELECT id FROM employees UNION SELECT id FROM orders;",
            b"SELECT id FROM employees UNION ALL SELECT 1;",
            b"SELECT 1 INTERSECT SELECT 2;",
            b"SELECT 1 EXCEPT SELECT 2;",
        ],
        "cte": [
            b"WITH cte AS (SELECT 1) SELECT * FROM cte;",
            b"WITH cte AS (SELECT 1) DELETE FROM orders;",
            b"SELECT * FROM cte;",  # a CTE name without its WITH
        ],
        "recursive_cte": [b"WITH RECURSIVE cte AS (SELECT 1) SELECT * FROM cte;"],
        "join": [
            b"SELECT * FROM employees JOIN departments ON dept_id = id;",
            b"SELECT * FROM employees, departments;",
            b"SELECT * FROM employees NATURAL LEFT JOIN departments;",
            b"UPDATE orders SET total = 1 FROM employees;",
        ],
        "window": [
            b"SELECT rank() OVER (ORDER BY id) FROM employees;",
            b"SELECT sum(id) OVER w FROM employees WINDOW w AS (ORDER BY id);",
        ],
        "on_conflict": [
            b"INSERT OR IGNORE INTO orders (id) VALUES (1);",
            b"REPLACE INTO orders (id) VALUES (1);",
            b"UPDATE OR ROLLBACK orders SET id = 1;",
        ],
        "returning": [],
    },
    "postgres": {
        "subquery": [
            b"SELECT * FROM (SELECT id FROM employees) AS e;",
            b"SELECT * FROM employees, LATERAL (SELECT 1) AS x;",
            b"SELECT id FROM employees WHERE id IN (SELECT id FROM orders);",
            b"SELECT id FROM employees WHERE id = ANY (SELECT id FROM orders);",
            b"SELECT (SELECT 1) FROM employees;",
            b"SELECT id FROM employees WHERE EXISTS (SELECT 1 FROM orders);",
        ],
        "set_operations": [
            b"SELECT id FROM employees UNION SELECT id FROM orders;",
            b"SELECT 1 INTERSECT ALL SELECT 2;",
            b"SELECT 1 EXCEPT SELECT 2;",
        ],
        "cte": [
            b"WITH cte AS (SELECT 1) SELECT * FROM cte;",
            b"WITH cte AS MATERIALIZED (SELECT 1) DELETE FROM orders;",
            b"SELECT * FROM cte;",
        ],
        "recursive_cte": [b"WITH RECURSIVE cte AS (SELECT 1) SELECT * FROM cte;"],
        "join": [
            b"SELECT * FROM employees JOIN departments ON dept_id = id;",
            b"SELECT * FROM employees CROSS JOIN departments;",
            b"SELECT * FROM employees, departments;",
            b"UPDATE orders SET total = 1 FROM employees;",
            b"DELETE FROM orders USING employees;",
        ],
        "window": [b"SELECT rank() OVER (ORDER BY id) FROM employees;"],
        "returning": [
            b"DELETE FROM orders RETURNING id;",
            b"INSERT INTO orders (id) VALUES (1) RETURNING *;",
        ],
        "on_conflict": [b"INSERT INTO orders (id) VALUES (1) ON CONFLICT DO NOTHING;"],
    },
}
PLAIN = [
    b"SELECT id, name FROM employees WHERE id = 1 ORDER BY name LIMIT 3;",
    b"DELETE FROM orders;",
]


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
@pytest.mark.parametrize("clause", sorted(CLAUSES))
def test_banned_clause_cuts_its_productions(dialect: str, clause: str) -> None:
    everything = lang(dialect, frozenset(VERBS), frozenset())
    banned = lang(dialect, frozenset(VERBS), frozenset({clause}))
    for sql in CLAUSE_SAMPLES[dialect][clause]:
        assert everything.accepts(sql), sql
        assert not banned.accepts(sql), sql
    for sql in PLAIN:
        assert banned.accepts(sql), sql
    for other, samples in CLAUSE_SAMPLES[dialect].items():  # no collateral damage
        if other != clause and (clause, other) not in COLLATERAL:
            for sql in samples:
                assert banned.accepts(sql), (clause, sql)


# A banned clause may take another's samples along; these are the expected pairs.
COLLATERAL = {
    ("cte", "recursive_cte"),  # no RECURSIVE without WITH
    ("join", "subquery"),  # the LATERAL sample is joined with a comma
}


def test_collateral_pairs_are_real() -> None:
    """Every pair in COLLATERAL is needed for some sample (the list does not hide bugs)."""
    for clause, other in COLLATERAL:
        hits = [
            sql
            for d in ("sqlite", "postgres")
            for sql in CLAUSE_SAMPLES[d].get(other, [])
            if not lang(d, frozenset(VERBS), frozenset({clause})).accepts(sql)
        ]
        assert hits, (clause, other)


def test_example_roles_sqlite() -> None:
    policy = example_policy(example_schema())
    langs = {
        n: CoreLanguage(RoleProjection.compile(r, SQLITE).grammar, SQLITE, WORDS)
        for n, r in policy.roles.items()
    }
    table = {
        b"SELECT * FROM employees;": {"analyst", "clerk", "admin", "intern"},
        b"SELECT 1 UNION SELECT 2;": {"analyst", "clerk", "admin"},
        b"SELECT * FROM employees JOIN departments ON dept_id = id;": {"analyst", "clerk", "admin"},
        b"INSERT INTO orders (id) VALUES (1);": {"clerk", "admin"},
        b"UPDATE orders SET total = 2;": {"clerk", "admin"},
        b"REPLACE INTO orders (id) VALUES (1);": {"admin"},
        b"DELETE FROM orders;": {"admin"},
    }
    for sql, roles in table.items():
        assert {n for n, lg in langs.items() if lg.accepts(sql)} == roles, sql


# ---------------------------------------------------------------- structure


@pytest.mark.parametrize("dialect", [SQLITE, POSTGRES], ids=lambda d: d.name)
def test_projection_shares_terminals_and_is_reduced(dialect: Dialect) -> None:
    l1 = dialect_grammar(dialect)
    for r in example_policy().roles.values():
        projection = RoleProjection.compile(r, dialect)
        g = projection.grammar
        assert g.terminals == l1.terminals  # same numbering: one DFA, one lexicon
        assert g.name == r.name and projection.role == r.name
        assert set(g.rules) <= set(l1.rules)
        assert set(projection.cut) <= set(l1.rules) - set(g.rules)
        assert_reduced(g)
        g.check_invariants()  # compile no longer runs it: a projection is reduced by construction


def assert_reduced(g: Grammar) -> None:
    terminals = {t.name for t in g.terminals}
    generating: set[str] = set()
    changed = True
    while changed:
        changed = False
        for r in g.rules:
            if r.origin not in generating and all(
                s in terminals or s in generating for s in r.expansion
            ):
                generating.add(r.origin)
                changed = True
    assert set(g.nonterminals) == generating
    reachable, todo = {g.start}, [g.start]
    while todo:
        head = todo.pop()
        for r in g.rules:
            if r.origin == head:
                for s in r.expansion:
                    if s not in terminals and s not in reachable:
                        reachable.add(s)
                        todo.append(s)
    assert set(g.nonterminals) == reachable


def test_fingerprint_is_the_grammar_and_shared_by_equal_roles() -> None:
    a = RoleProjection.compile(role("a", {"SELECT"}), SQLITE)
    b = RoleProjection.compile(role("b", {"select".upper()}), SQLITE)
    c = RoleProjection.compile(role("c", {"SELECT"}, {"join"}), SQLITE)
    assert a.fingerprint == b.fingerprint == a.grammar.fingerprint
    assert c.fingerprint != a.fingerprint
    assert RoleProjection.compile(ADMIN, SQLITE).fingerprint == dialect_grammar(SQLITE).fingerprint


@settings(max_examples=60, deadline=None)
@given(
    dialect=st.sampled_from([SQLITE, POSTGRES]),
    verbs=st.frozensets(st.sampled_from(sorted(VERBS)), min_size=1),
    banned=st.frozensets(st.sampled_from(sorted(CLAUSES))),
    empty=st.frozensets(st.sampled_from(["CTE_NAME", "TABLE_NAME"])),
    name=st.sampled_from(["a", "b"]),
)
def test_a_kept_projection_is_the_one_built_afresh(
    dialect: Dialect,
    verbs: frozenset[str],
    banned: frozenset[str],
    empty: frozenset[str],
    name: str,
) -> None:
    """``RoleProjection.compile`` keeps projections by what determines them
    (``PROJECTIONS``: dialect, verbs, banned clauses, empty categories); a kept one
    must equal the projection built afresh for the role asking, its name included.
    Fails if the key misses something the projection reads."""
    r = role(name, set(verbs), banned)
    words: dict[str, tuple[bytes, ...]] = {c: () for c in empty}
    assert dialect.projection is not None
    try:
        fresh = RoleProjection._compile(
            r, dialect, dialect_grammar(dialect), dialect.projection, empty
        )
    except EmptyLanguageError as e:
        with pytest.raises(EmptyLanguageError) as info:
            RoleProjection.compile(r, dialect, words=words)
        assert info.value.role == e.role == name
        return
    for _ in range(2):  # the second one comes from the memo
        kept = RoleProjection.compile(r, dialect, words=words)
        assert (kept.role, kept.grammar.name) == (name, name)
        assert kept.fingerprint == fresh.fingerprint
        assert kept.grammar.rules == fresh.grammar.rules and kept.cut == fresh.cut
        assert (kept.verbs, kept.banned_clauses) == (verbs, banned)
        narrow = narrow_grammar(kept.grammar, name)
        assert narrow.name == f"{name}-narrow"
        assert narrow.rules == fresh.grammar.project(narrow_rule, "x").rules


def test_same_semantics_as_the_demo_statement_cut() -> None:
    """The demo's statement-form cut, wherever no verb requirement applies.

    (SQLite's REPLACE needs DELETE: only roles without INSERT/UPDATE, or with DELETE.)
    """
    l1 = dialect_grammar(SQLITE)
    forms = {
        "SELECT": "select_stmt",
        "INSERT": "insert_stmt",
        "UPDATE": "update_stmt",
        "DELETE": "delete_stmt",
    }
    for verbs in ({"SELECT"}, {"SELECT", "DELETE"}, set(VERBS)):
        banned = {f for v, f in forms.items() if v not in verbs}

        def keep(r: Rule, banned: set[str] = banned) -> bool:
            return r.origin != "statement" or banned.isdisjoint(r.expansion)

        demo = l1.project(keep, "d")
        assert RoleProjection.compile(role("x", verbs), SQLITE).fingerprint == demo.fingerprint


def test_every_cut_selects_a_rule() -> None:
    for name in available_dialects():
        rules = get_dialect(name).projection
        assert rules is not None, name
        rules.check(name, dialect_grammar(get_dialect(name)))
        assert set(rules.clauses) == set(CLAUSES), name
    broken = ProjectionRules("statement", STATEMENT_FORMS, {"join": (Cut("joins"),)})
    with pytest.raises(DialectDefinitionError, match="joins"):
        RoleProjection.compile(ADMIN, SQLITE, rules=broken)
    no_form = ProjectionRules("statement", {"SELECT": "query_stmt"}, {})
    with pytest.raises(DialectDefinitionError, match="query_stmt"):
        RoleProjection.compile(ADMIN, SQLITE, rules=no_form)


def test_unknown_names() -> None:
    with pytest.raises(PolicyError, match="unknown verbs"):
        RoleProjection.compile(role("x", {"MERGE"}), SQLITE)
    with pytest.raises(PolicyError, match="unknown clauses"):
        RoleProjection.compile(role("x", {"SELECT"}, {"pivot"}), SQLITE)
    other = Dialect(
        name="other",
        grammar_file="sqlite.lark",
        keywords=SQLITE.keywords,
        functions=SQLITE.functions,
        type_names=SQLITE.type_names,
        word_classes=SQLITE.word_classes,
        identifier_quotes=SQLITE.identifier_quotes,
    )
    with pytest.raises(PolicyError, match="no projection rules for dialect 'other'"):
        RoleProjection.compile(ADMIN, other)


def test_spec_agrees_on_a_projection() -> None:
    """grid-spec (lark, independent of grid-core) reads the projected grammar the same way."""
    projection = RoleProjection.compile(role("intern", {"SELECT"}, {"join", "subquery"}), SQLITE)
    spec = Language(projection.grammar.to_lark(), WORDS)
    core = CoreLanguage(projection.grammar, SQLITE, WORDS)
    samples = [s for d in STATEMENTS["sqlite"].values() for s in d]
    samples += [s for d in CLAUSE_SAMPLES["sqlite"].values() for s in d] + PLAIN
    for sql in samples:
        assert spec.in_language(sql) == core.accepts(sql), sql


# ---------------------------------------------------------------- end to end through grid-core


@pytest.fixture(scope="module")
def guides() -> dict[str, Engine]:
    schema = example_schema()
    policy = example_policy(schema)
    vocab = cl100k()
    engines = {}
    for name in ("analyst", "admin"):
        projection = RoleProjection.compile(policy.role(name), SQLITE)
        lexicon = SchemaLexicon.build(SQLITE, schema, policy.grants(name, schema))
        engines[name] = Engine(projection.grammar, vocab, lexicon.lexicon, dfa=dialect_dfa(SQLITE))
    return engines


def token_ids(engine: Engine) -> dict[bytes, int]:
    return {
        b: i
        for i, b in enumerate(engine.vocab.token_bytes)
        if b and i not in engine.vocab.special_ids
    }


def feed(engine: Engine, pieces: list[bytes]) -> GridGuide:
    """A guide after the pieces, each split greedily into the longest vocabulary tokens."""
    ids = token_ids(engine)
    guide = GridGuide(engine)
    for piece in pieces:
        while piece:
            n = max(k for k in range(1, len(piece) + 1) if piece[:k] in ids)
            guide.accept_token(ids[piece[:n]])
            piece = piece[n:]
    return guide


def spelled(engine: Engine, ids: list[int]) -> set[bytes]:
    return {engine.vocab.token_bytes[i] for i in ids if i not in engine.vocab.eos_ids}


def test_analyst_guide_never_admits_salaries(guides: dict[str, Engine]) -> None:
    analyst = guides["analyst"]
    guide = feed(analyst, [b"SELECT", b" *", b" FROM", b" "])
    admitted = spelled(analyst, guide.mask_ids())
    assert b"employees" in admitted and b"departments" in admitted  # positive control
    assert not any(t.lstrip().lower().startswith(b"sal") for t in admitted)
    assert not any(t.lstrip().lower().startswith(b"s") for t in admitted)  # no word of W starts so
    config = analyst.lexer.advance(guide.config, b"salaries;")
    assert config is None or not analyst.lexer.is_viable(config)
    # without the trailing blank too: " salaries" is one cl100k token
    guide = feed(analyst, [b"SELECT", b" *", b" FROM"])
    admitted = spelled(analyst, guide.mask_ids())
    assert b" employees" in admitted and b" salaries" not in admitted
    admin = guides["admin"]
    assert b" salaries" in spelled(admin, feed(admin, [b"SELECT", b" *", b" FROM"]).mask_ids())


def test_analyst_guide_statement_head(guides: dict[str, Engine]) -> None:
    analyst = guides["analyst"]
    head = spelled(analyst, GridGuide(analyst).mask_ids())
    assert b"SELECT" in head and b"WITH" in head
    for verb in (b"ins", b"del", b"rep", b"upd"):
        assert not any(t.lstrip().lower().startswith(verb) for t in head), verb
    for verb in (b"INSERT", b"DELETE", b"REPLACE", b"UPDATE"):
        assert verb not in head and b" " + verb not in head
    admin = guides["admin"]
    admin_head = spelled(admin, GridGuide(admin).mask_ids())
    assert {b"INSERT", b"DELETE", b"replace", b"UPDATE"} <= admin_head  # positive control
    # after a WITH clause, only SELECT may follow for the analyst
    guide = feed(analyst, [b"WITH cte AS (SELECT 1) "])
    after = spelled(analyst, guide.mask_ids())
    assert b"SELECT" in after and not {b"INSERT", b"DELETE", b"REPLACE", b"UPDATE"} & after


def test_snapshot_dialect_must_match() -> None:
    schema = SchemaSnapshot.from_dict(
        {**example_schema().to_dict(), "dialect": "postgres", "routines": []}
    )
    projection = RoleProjection.compile(example_policy().role("analyst"), POSTGRES)
    lexicon = SchemaLexicon.build(POSTGRES, schema, example_policy().grants("analyst", schema))
    assert projection.grammar.terminals == dialect_grammar(POSTGRES).terminals
    assert b"employees" in lexicon.words["TABLE_NAME"]


def test_empty_lexicon_categories_are_cut(guides: dict[str, Engine]) -> None:
    """A role granted no table: without its lexicon, FROM is a dead end of the mask
    (blanks, comments and ever more opening parentheses are all it offers)."""
    schema = example_schema()
    nobody = Role("nobody", frozenset({"SELECT", "UPDATE"}), (), frozenset({"subquery", "cte"}))
    grants = PolicyBundle({"nobody": nobody}).grants("nobody", schema)
    lexicon = SchemaLexicon.build(SQLITE, schema, grants)
    assert grants.tables == () and lexicon.words["TABLE_NAME"] == frozenset()
    vocab, dfa = guides["admin"].vocab, dialect_dfa(SQLITE)
    blind = Engine(RoleProjection.compile(nobody, SQLITE).grammar, vocab, lexicon.lexicon, dfa=dfa)
    stuck = spelled(blind, feed(blind, [b"SELECT 1 FROM "]).mask_ids())
    assert b" (" in stuck  # `( (` ... the grammar's parenthesised sources, no way out
    assert all(t.lstrip()[:1] in (b"", b"(", b"-", b"/") for t in stuck)
    projection = RoleProjection.compile(nobody, SQLITE, words=lexicon.words)
    seeing = Engine(projection.grammar, vocab, lexicon.lexicon, dfa=dfa)
    assert "from_clause" not in projection.grammar.nonterminals
    assert "update_stmt" not in projection.grammar.nonterminals  # UPDATE needs a table
    # `FROM` stays a keyword, never a free name (DESIGN.md section 11): with no FROM
    # clause left, `SELECT 1 FROM` does not end there, and `SELECT 1` can end.
    with pytest.raises(GuideError):
        feed(seeing, [b"SELECT 1 FROM "])
    after = spelled(seeing, feed(seeing, [b"SELECT 1 "]).mask_ids())
    assert b";" in after and b" (" not in after
    assert not {b"UPDATE", b" UPDATE"} & spelled(seeing, GridGuide(seeing).mask_ids())
    with pytest.raises(EmptyLanguageError, match="empty lexicon categories"):
        RoleProjection.compile(Role("x", frozenset({"UPDATE"}), ()), SQLITE, words=lexicon.words)
