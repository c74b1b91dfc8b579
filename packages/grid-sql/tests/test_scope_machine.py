"""The native column scope machine against ScopedEngines' own, step for step.

``grid_kernels._native.ScopeMachine`` is :class:`grid_sql.column_scope.ScopedEngines`'
scope machine (its steps and the words each scope admits) in Rust, built from
``ScopedEngines.scope_spec()``. Here every step the Python machine takes while
statements are read or decoded (``ScopedEngines.after``, wrapped) is taken by
the native machine too, and the two must agree on everything the masks read of
a scope: its ``COLUMN_NAME`` and ``QUALIFIER`` words, its ``TABLE_NAME`` words
and its ``ALIAS_NAME`` words; and the scopes must correspond one to one (equal
Python scopes, equal native ids, and the converse).

Driven over concert_singer (vendored) in the covering language (``grid ask
--covering``, the one language the machine takes: its aliases are a finite
set): the Spider dev gold statements of the database read token by token (each
up to where the language refuses it), and steered mode-1 decodes that leave the
gold anywhere.
"""

from __future__ import annotations

import random

import pytest
from test_column_scope import (
    covering_engines,
    engines,
    generation_engines,
    gold,
    run,
    steered,
    tokens,
)

from grid_core.decode import generate
from grid_core.parser import Node
from grid_sql.column_scope import ScopedEngines, ScopedGuide, ScopeState

native = pytest.importorskip("grid_kernels._native", reason="grid-kernels is not installed")


class Shadow:
    """The native machine taking every step ``engines`` takes, checked at each."""

    def __init__(self, engines: ScopedEngines, monkeypatch: pytest.MonkeyPatch) -> None:
        self.engines = engines
        self.machine = native.ScopeMachine(engines.scope_spec())
        self.ids: dict[ScopeState, int] = {ScopeState(): 0}
        self.states: dict[int, ScopeState] = {0: ScopeState()}
        self.checked = 0
        original = engines.after

        def after(state: ScopeState, t: int, text: bytes, node: Node) -> ScopeState:
            got = original(state, t, text, node)
            want = self.machine.after(self.ids[state], t, text, node.state)
            assert self.ids.setdefault(got, want) == want, (got, want)
            assert self.states.setdefault(want, got) == got, (got, want)
            self.check(got, want)
            return got

        monkeypatch.setattr(engines, "after", after)

    def check(self, state: ScopeState, scope: int) -> None:
        e, m = self.engines, self.machine
        columns, qualifiers = m.words(scope)
        assert (frozenset(columns), frozenset(qualifiers)) == e.words(state), state
        assert frozenset(m.tables(scope)) == e.tables(state), state
        aliases, want = m.aliases(scope), e.aliases(state)
        assert (None if aliases is None else frozenset(aliases)) == want, state
        self.checked += 1


def test_gold_statements_step_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    e = covering_engines()
    shadow = Shadow(e, monkeypatch)
    read = 0
    for select_first, _ in gold("concert_singer"):
        read += run(ScopedGuide(e, audit=False), tokens(select_first))
    assert read > 0
    assert shadow.checked > 200, shadow.checked
    assert shadow.machine.n_scopes == len(shadow.ids) > 20


@pytest.mark.parametrize("seed", range(8))
def test_steered_decodes_step_alike(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    e = covering_engines()
    shadow = Shadow(e, monkeypatch)
    rng = random.Random(seed)
    target = rng.choice(gold("concert_singer"))[0].encode()
    guide = ScopedGuide(e)  # the reference: its steps are the Python machine's
    gen = generate(guide, steered(guide, target, rng), 40, rng)
    assert gen.stop_reason in ("eos", "reserve")
    assert shadow.checked > 0


@pytest.mark.parametrize("language", ["scoped", "generation"])
def test_only_the_covering_language_has_a_native_spec(language: str) -> None:
    """The others alias with any identifier; the machine reads aliases from a finite table."""
    e = engines("concert_singer") if language == "scoped" else generation_engines()
    with pytest.raises(ValueError, match="the covering language only"):
        e.scope_spec()
