"""A dialect is a delta: `base.lark` + `dialects/<name>.lark` + generated terminals.

The composed grammars are the languages the whole-grammar files of before
(sqlite.lark and postgres.lark as they stood at c301390) defined: the recorded
digests below are of those files' compiled grammars in a canonical form, taken
before the files were cut into the base and the deltas. The canonical form names
every symbol by its content, not by lark's counters (an anonymous terminal by
its pattern, a generated helper nonterminal by its productions), and holds

- the terminals: (name, pattern, priority, ignored), sorted;
- the rules: (origin, expansion, alias), sorted;
- the LALR(1) tables: every state reached from state 0, numbered in the order a
  walk by canonical symbol name reaches it, with its ACTION row (shift to a
  state, reduce by a rule, accept) and its GOTO row.

Equal digests mean equal terminals (so one lexing), equal productions and
isomorphic tables (so equal masks at every configuration).

PostgreSQL's digest is recorded after one later change (the commit after
5227341, where the digest above still held): its delta renamed `table_ref` to
`table_or_subquery`, factored `join_type? JOIN` into `join_operator` and made
`assignments` an inlined rule, so that its trees meet the SemanticChecker's
contract. Renaming a nonterminal, factoring a sequence into a new nonterminal and
inlining are language-preserving; the corpus (test_dialect_postgres) and the
kit's mask differential hold on the result.

Both digests are recorded again after one more such change (issue 19's parse
events): DELETE's `FROM TABLE_NAME alias` is factored into `delete_from_clause`
and the UPDATE/DELETE target's alias into `target_alias`, so that events close
DELETE's FROM part and name the target's alias. The corpora, Spider's dev gold
(test_events) and the checker's tests hold on the result.
"""

from __future__ import annotations

import re

import pytest

from grid_core.fingerprint import fingerprint
from grid_core.grammar import Grammar, load_grammar
from grid_sql.dialect import Dialect
from grid_sql.dialects import POSTGRES, SQLITE

# Canonical digests of the compiled whole-grammar files at c301390 (after the later
# language-preserving refactors; see the header), then at 4049cf3: window frames
# narrowed to the ones SQLite, PostgreSQL and DuckDB take (a change of language).
BEFORE = {
    "sqlite": "c8c6f163947fa37d57ad06f546e4d1c2",
    "postgres": "81698134f616786f3a0bc3eaef05b981",
}


def _names(grammar: Grammar) -> dict[str, str]:
    """Canonical names for lark's generated symbols (see the module header)."""
    names = {t.name: f"<{t.pattern}>" for t in grammar.terminals if t.name.startswith("X__")}
    helpers: dict[str, list[tuple[str, ...]]] = {}
    for rule in grammar.rules:
        if rule.origin.startswith("x__"):
            helpers.setdefault(rule.origin, []).append(rule.expansion)

    def name(helper: str, seen: tuple[str, ...]) -> str:
        if helper in names:
            return names[helper]
        bodies = sorted(
            " ".join(
                "@"
                if s == helper
                else name(s, (*seen, helper))
                if s in helpers and s not in seen
                else names.get(s, s)
                for s in expansion
            )
            for expansion in helpers[helper]
        )
        names[helper] = f"{re.sub(r'_[0-9]+$', '', helper)}[{'|'.join(bodies)}]"
        return names[helper]

    for helper in helpers:
        name(helper, ())
    return names


def canonical_form(text: str) -> tuple[object, ...]:
    """The canonical form of a grammar text's compiled grammar (module header)."""
    grammar = load_grammar(text)
    names = _names(grammar)

    def nm(symbol: str) -> str:
        return names.get(symbol, symbol)

    terminals = sorted((nm(t.name), t.pattern, t.priority, t.ignored) for t in grammar.terminals)
    rules = sorted(
        (nm(r.origin), tuple(map(nm, r.expansion)), r.alias or "") for r in grammar.rules
    )
    tables = grammar.lalr()
    width, n_nt = tables.n_terminals + 1, tables.n_nonterminals
    symbol = [nm(tables.symbol_name(s)) for s in range(width + n_nt)]
    rule_key = [
        (symbol[width + tables.rule_lhs[r]], tuple(symbol[s] for s in tables.rhs(r)))
        for r in range(tables.n_rules)
    ]
    order, rows = {0: 0}, []
    todo = [0]
    while todo:
        state = todo.pop(0)
        action: list[tuple[str, object]] = []
        targets: list[tuple[str, int]] = []
        for t in range(width):
            cell = tables.action[state * width + t]
            if cell > 0:
                targets.append((symbol[t], cell - 1))
            elif cell < 0:
                action.append((symbol[t], rule_key[-cell - 1]))
        for a in range(n_nt):
            target = tables.goto[state * n_nt + a]
            if target >= 0:
                targets.append((symbol[width + a], target))
        for _, target in sorted(targets):
            if target not in order:
                order[target] = len(order)
                todo.append(target)
        shifts = sorted((name, order[target]) for name, target in targets)
        rows.append((sorted(action, key=repr), shifts))
    return (terminals, rules, rows)


@pytest.mark.parametrize("dialect", [SQLITE, POSTGRES], ids=lambda d: d.name)
def test_composed_grammar_is_the_language_of_before(dialect: Dialect) -> None:
    assert fingerprint(canonical_form(dialect.grammar_text)) == BEFORE[dialect.name]
