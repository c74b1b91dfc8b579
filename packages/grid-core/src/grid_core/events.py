"""Parse events: the parser's completed units as a typed stream, each at the first
token that determines it (DESIGN.md section 8; docs/events.md).

Nouns:

- **event spec** (:class:`EventSpec`): which grammar symbols are events, each with
  a *kind*. A rule is named by its tree name (its alias, else its origin); a
  marked rule's reduction is an event. A terminal is named by its name; each
  lexeme shifted as that terminal is an event.
- **event** (:class:`Event`): kind, symbol name, byte span ``[start, end)`` of the
  output, and the token step that determined it (``guide.steps`` right after
  that token; EOS counts as a step).
- **post-hoc sequence** of a sentence: the events of parsing it whole
  (:meth:`EventTracker.parse`): marked reductions and lexemes in the LR parser's
  order, which is the post-order of its parse tree (``grid_spec`` computes it
  with lark, independently).
- **determined** at a prefix ``w``: the event is in the post-hoc sequence of
  every sentence of L that extends ``w``. The tracker emits, after each token,
  the events *forced* by ``w``:

  1. the reductions and lexemes of every emission so far (a lexeme is emitted
     when a byte that cannot extend it arrives, maximal munch);
  2. if the remainder is a complete lexeme that no byte can extend inside the
     language (``;``), its emission, which every continuation performs;
  3. then the reductions every possible next terminal performs: the common
     prefix of the reduce chains over the terminals the next lexeme can be
     (the allowed set, narrowed by the remainder's live terminals; ``$END``
     when the stack accepts). An LALR reduction is fixed by its lookahead, so
     when every possible lookahead reduces the same rule the reduction is
     determined before the lookahead is read.

  Forced events are determined (soundness: they are in every extension). The
  converse (zero tokens late) holds whenever the narrowing of step 3 is exact;
  it over-approximates (a terminal is counted possible if its language
  continues the remainder, even where a higher-priority terminal would win the
  pick), which can only make an event late, never early.
  ``tests/test_events.py`` checks both directions against the specification.

Speculation: the stream holds the events of the accepted tokens only. A
rollback removes the events its tokens determined (a consumer that has read
past the new end re-reads from it: :meth:`EventGuide.events` with ``since``);
a fork has its own stream. Events never change once emitted: a later token
only adds.

Two implementations, one stream (the project's two-implementations rule):
:class:`EventTracker` here is the reference, used by :class:`EventGuide` around
the Python guide (``GRID_KERNELS=0``); with the kernels loaded,
``Engine.guide(events=spec)`` returns the native session with the same tracker
in Rust (``grid_kernels`` ``events.rs``), whose stream is checked equal to this
one, event for event and step for step (``tests/test_events.py``). Both are an
:class:`EventStream`.

Cost: events are off unless the guide is made with an event spec
(``Engine.guide(events=...)``); off, nothing in the step changes. On, natively,
the token's scanner emissions are applied to a span stack, and what the
configuration forces is a plan memoized per configuration, applied only when it
holds an event (``bench/events.py`` measures the step with events on and off).
The Python tracker scans each accepted token again, in Python, beside the guide.
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from grid_core.errors import GrammarError, GuideError
from grid_core.lexer import START, ScanState
from grid_core.lexicon import NO_NODE
from grid_core.parser import Node

if TYPE_CHECKING:
    from grid_core.audit import AuditLog, Kind
    from grid_core.guide import Engine
    from grid_core.protocol import Guide

__all__ = [
    "Event",
    "EventGuide",
    "EventSpec",
    "EventSpecError",
    "EventStream",
    "EventTracker",
    "tracker",
]


class EventSpecError(GrammarError):
    """An event spec names a symbol the grammar lacks, or a rule that can be empty."""

    def __init__(self, symbol: str, problem: str) -> None:
        self.symbol = symbol
        self.problem = problem
        super().__init__(f"event symbol {symbol!r}: {problem}")


@dataclass(frozen=True)
class Event:
    """One parse event (see the module header). ``start <= end`` are byte offsets
    into the guide's output; ``step`` is the token step that determined it."""

    kind: str
    name: str
    start: int
    end: int
    step: int = field(compare=False)

    @property
    def key(self) -> tuple[str, str, int, int]:
        """(kind, name, start, end): the event without its step (what a post-hoc
        parse gives)."""
        return self.kind, self.name, self.start, self.end

    def mapping(self) -> dict[str, Any]:
        """The event as a JSON-ready mapping: ``kind``, ``name``, ``start``, ``end``,
        ``step`` (what every reader's mapping starts with)."""
        return {
            "kind": self.kind,
            "name": self.name,
            "start": self.start,
            "end": self.end,
            "step": self.step,
        }


@dataclass(frozen=True)
class EventSpec:
    """Which symbols are events: ``(symbol name, kind)`` pairs, a rule by its tree
    name or a terminal by its name. Hashable; one spec serves every engine whose
    grammar has its symbols."""

    symbols: tuple[tuple[str, str], ...]

    def compile(self, engine: Engine) -> tuple[dict[int, tuple[str, str]], dict[int, str]]:
        """Per rule index and per terminal id, the event it is: ``(kind, name)`` and
        ``kind``. Raises :class:`EventSpecError` for a name that is neither a rule
        of ``engine``'s grammar nor one of its terminals, or a rule that derives
        the empty string (an empty span has no place in the output)."""
        tables = engine.tables
        names = tables.rule_names
        assert names is not None, "the engine's tables carry rule names"
        terminals = {t.name: i for i, t in enumerate(engine.grammar.terminals)}
        nullable = _nullable(engine)
        rules: dict[int, tuple[str, str]] = {}
        lexemes: dict[int, str] = {}
        for symbol, kind in self.symbols:
            if symbol in terminals:
                lexemes[terminals[symbol]] = kind
                continue
            found = [r for r in range(1, len(names)) if names[r] == symbol]
            if not found:
                raise EventSpecError(
                    symbol, f"no rule or terminal of grammar {engine.grammar.name!r}"
                )
            for r in found:
                if nullable(r):
                    raise EventSpecError(symbol, "the rule can derive the empty string")
                rules[r] = (kind, symbol)
        return rules, lexemes


def _nullable(engine: Engine) -> Any:
    """``nullable(rule)``: the rule can derive the empty string."""
    tb = engine.tables
    n_rules, base = len(tb.rule_lhs), tb.n_terminals + 1
    bodies = [
        tb.rule_rhs[tb.rule_rhs_start[r] : tb.rule_rhs_start[r] + tb.rule_len[r]]
        for r in range(n_rules)
    ]
    empty: set[int] = set()
    changed = True
    while changed:
        changed = False
        for r in range(n_rules):
            lhs = tb.rule_lhs[r]
            if lhs not in empty and all(s >= base and s - base in empty for s in bodies[r]):
                empty.add(lhs)
                changed = True
    return lambda r: all(s >= base and s - base in empty for s in bodies[r])


Cell = tuple[Any, int, int, int]
"""One cell of the span stack, ``(parent, state, start, end)``: a parser stack
cell's LALR state with the byte span of the symbol it holds (the root: ``(None,
0, 0, 0)``). Plain tuples: a token makes several."""

ROOT: Cell = (None, 0, 0, 0)


@dataclass(frozen=True, eq=False)
class _Chain:
    """A persistent list of events (newest last)."""

    event: Event
    previous: _Chain | None
    count: int


@dataclass(frozen=True, eq=False)
class Track:
    """The tracker's persistent state after some tokens: the span stack and the
    interned parser node of the same stack (for its allowed set), the remainder
    (its start offset, bytes and scan state), the events emitted and those of
    them not yet realized by a parser action (``ahead``)."""

    stack: Cell
    node: Node
    pos: int
    remainder: bytes
    scan: ScanState
    events: _Chain | None
    ahead: tuple[Event, ...]
    step: int
    terminated: bool = False

    def event_list(self, since: int = 0) -> list[Event]:
        """The events emitted so far, from index ``since`` on."""
        out: list[Event] = []
        chain = self.events
        while chain is not None and chain.count > since:
            out.append(chain.event)
            chain = chain.previous
        return out[::-1]

    @property
    def count(self) -> int:
        return 0 if self.events is None else self.events.count


class EventTracker:
    """Events of one engine under one spec (see the module header). Stateless
    apart from memos: :class:`Track` values carry each stream."""

    def __init__(self, engine: Engine, spec: EventSpec) -> None:
        self.engine = engine
        self.spec = spec
        self.rules, self.lexemes = spec.compile(engine)
        tb = engine.tables
        self.action, self.goto = tb.action, tb.goto
        self.lhs, self.length = tb.rule_lhs, tb.rule_len
        self.n_nt = tb.n_nonterminals
        self.end = engine.parser.end
        self.width = engine.parser.width
        self.base = self.end + 1
        self._common: dict[tuple[int, int], int] = {}
        self._extend: dict[int, int] = {}

    # -- the stream -------------------------------------------------------------

    def start(self) -> Track:
        root = self.engine.parser.root
        return self._settle(Track(ROOT, root, 0, b"", START, None, (), 0), [])

    def advance(self, track: Track, data: bytes) -> Track:
        """The state after one accepted token spelling ``data`` (the guide has
        accepted it, so it scans and shifts)."""
        step = track.step + 1
        realized: list[Event] = []
        stack, node, pos, buf, scan = self._scan(
            track.stack,
            track.node,
            track.pos,
            track.remainder + data,
            track.scan,
            len(track.remainder),
            realized,
            step,
        )
        moved = Track(stack, node, pos, buf, scan, track.events, track.ahead, step)
        return self._settle(moved, realized)

    def finish(self, track: Track) -> Track:
        """The state after EOS: the remainder finalized (as ``Lexer.finalize``),
        then ``$END`` reduced up to accept. EOS where the output is no sentence (a
        caller that forced it: a failed row ended with EOS) is a
        :class:`~grid_core.errors.GuideError`; the events end before it."""
        lexer = self.engine.lexer
        config = lexer.advance(lexer.config(track.node, b"", 0, START, 0), track.remainder)
        if config is None or not lexer.eos_allowed(config):
            raise GuideError(track.step, None, "EOS before the output is a sentence")
        step = track.step + 1
        stack, node, pos, buf, scan = (
            track.stack,
            track.node,
            track.pos,
            track.remainder,
            track.scan,
        )
        realized: list[Event] = []
        while buf:
            stack, node = self._emit(stack, node, pos, scan, realized, step)
            la_len = scan[2]
            stack, node, pos, buf, scan = self._scan(
                stack, node, pos + la_len, buf[la_len:], START, 0, realized, step
            )
        stack = self._reduce_all(stack, self.end, realized, step)
        done = Track(stack, node, pos, b"", START, track.events, track.ahead, step, True)
        return self._record(done, realized, [])

    def _scan(
        self,
        stack: Cell,
        node: Node,
        pos: int,
        buf: bytes,
        scan: ScanState,
        i: int,
        out: list[Event],
        step: int,
    ) -> tuple[Cell, Node, int, bytes, ScanState]:
        """Scan ``buf`` (a remainder at offset ``pos`` whose first ``i`` bytes are
        scanned to ``scan``) as ``Lexer.advance`` does: each byte that kills the
        automaton emits the longest accepted lexeme and the rest is scanned again."""
        step_byte = self.engine.scanner.step
        while i < len(buf):
            nxt = step_byte(scan, i + 1, buf[i])
            if nxt is not None:
                scan, i = nxt, i + 1
                continue
            stack, node = self._emit(stack, node, pos, scan, out, step)
            la_len = scan[2]
            pos, buf, i, scan = pos + la_len, buf[la_len:], 0, START
        return stack, node, pos, buf, scan

    def parse(self, data: bytes) -> list[Event]:
        """The post-hoc sequence of a sentence: ``data`` read whole, then EOS."""
        return self.finish(self.advance(self.start(), data)).event_list()

    # -- parser actions on the span stack ----------------------------------------

    def _emit(
        self, stack: Cell, node: Node, pos: int, scan: ScanState, out: list[Event], step: int
    ) -> tuple[Cell, Node]:
        """Emit the remainder's longest accepted lexeme at ``pos``: reductions, then its shift."""
        _, _, la_len, la_cands = scan
        t = self.engine.scanner.pick(la_cands, self.engine.parser.allowed(node))
        assert la_len > 0 and t >= 0, "the guide accepted a token the lexer cannot emit"
        if self.engine.scanner.ignored >> t & 1:
            return stack, node
        return self._shift(stack, node, t, pos, pos + la_len, out, step)

    def _shift(
        self, stack: Cell, node: Node, t: int, start: int, end: int, out: list[Event], step: int
    ) -> tuple[Cell, Node]:
        """Reduce, then shift terminal ``t`` spanning ``[start, end)``; the interned
        node follows by the parser's memoized shift."""
        stack = self._reduce_all(stack, t, out, step)
        a = self.action[stack[1] * self.width + t]
        assert a > 0, "the terminal shifts after its reductions"
        kind = self.lexemes.get(t)
        if kind is not None:
            out.append(Event(kind, self.engine.grammar.terminals[t].name, start, end, step))
        return (stack, a - 1, start, end), self.engine.parser.shift(node, t)

    def _reduce_all(self, stack: Cell, t: int, out: list[Event], step: int) -> Cell:
        """Every reduction lookahead ``t`` performs (``$END``: up to accept)."""
        action, row = self.action, self.width
        while True:
            a = action[stack[1] * row + t]
            if a >= 0 or a == -1:  # a shift, or ACCEPT (rule 0)
                return stack
            stack = self._reduce(stack, -a - 1, out, step)

    def _reduce(self, stack: Cell, rule: int, out: list[Event], step: int) -> Cell:
        n = self.length[rule]
        top = first = stack
        for _ in range(n):
            first = stack
            stack = stack[0]
            assert stack is not None, "reduce popped past the root"
        start, end = (first[2], top[3]) if n else (stack[3], stack[3])
        state = self.goto[stack[1] * self.n_nt + self.lhs[rule]]
        marked = self.rules.get(rule)
        if marked is not None:
            out.append(Event(marked[0], marked[1], start, end, step))
        return (stack, state, start, end)

    # -- what the prefix forces ------------------------------------------------------

    def _settle(self, track: Track, realized: list[Event]) -> Track:
        """Record the realized events and emit those the prefix now forces."""
        forced: list[Event] = []
        stack, node = track.stack, track.node
        parser, scanner = self.engine.parser, self.engine.scanner
        allowed = parser.allowed(node)
        if track.remainder:
            t = self._forced(track, allowed)
            if t is None:
                self._common_chain(stack, self._possible(track.scan, allowed), forced, track.step)
                return self._record(track, realized, forced)
            if not scanner.ignored >> t & 1:
                start = track.pos
                end = start + len(track.remainder)
                stack, node = self._shift(stack, node, t, start, end, forced, track.step)
                allowed = parser.allowed(node)
        self._common_chain(stack, allowed, forced, track.step)
        return self._record(track, realized, forced)

    def _record(self, track: Track, realized: list[Event], forced: list[Event]) -> Track:
        """Append the new events: realized ones not already emitted ahead, then the
        forced ones not yet emitted. Invariant: ``ahead`` is always a prefix of the
        events still to be realized."""
        if not (realized or forced or track.ahead):
            return track
        ahead = list(track.ahead)
        chain = track.events
        for event in realized:
            if ahead:
                assert ahead[0].key == event.key, f"forced {ahead[0]} but realized {event}"
                ahead.pop(0)
                continue
            chain = _Chain(event, chain, 1 if chain is None else chain.count + 1)
        for i, event in enumerate(forced):
            if i < len(ahead):
                assert ahead[i].key == event.key, f"forced {ahead[i]}, then {event}"
                continue
            chain = _Chain(event, chain, 1 if chain is None else chain.count + 1)
        new_ahead = tuple(forced) if len(forced) >= len(ahead) else tuple(ahead)
        return Track(
            track.stack,
            track.node,
            track.pos,
            track.remainder,
            track.scan,
            chain,
            new_ahead,
            track.step,
            track.terminated,
        )

    def _common_chain(self, stack: Cell, possible: int, out: list[Event], step: int) -> None:
        """The reductions every terminal of ``possible`` performs first (virtual:
        the span stack built here is dropped)."""
        while possible:
            rule = self._common_rule(stack[1], possible)
            if rule <= 0:
                return
            stack = self._reduce(stack, rule, out, step)

    def _common_rule(self, state: int, possible: int) -> int:
        """The rule every terminal of ``possible`` reduces first in ``state``; -1
        when they disagree or one shifts (0: ACCEPT)."""
        key = (state, possible)
        rule = self._common.get(key)
        if rule is None:
            row = state * self.width
            actions = {self.action[row + t] for t in range(self.width) if possible >> t & 1}
            only = actions.pop() if len(actions) == 1 else 0
            rule = -only - 1 if only < 0 else -1
            self._common[key] = rule
        return rule

    def _possible(self, scan: ScanState, allowed: int) -> int:
        """The terminals the next lexeme can be, given a non-empty remainder that
        may still grow (all of ``allowed`` when it may be skipped)."""
        scanner, lexicon = self.engine.scanner, self.engine.lexicon
        q, ln, la_len, la_cands = scan
        ok = allowed | scanner.ignored
        live = scanner.dfa.live[q] & ok
        cats = lexicon.categories
        if live & cats:
            words = lexicon.prefix_cats[ln] if ln != NO_NODE else 0
            live = (live & ~cats) | (live & cats & words)
        if la_len:
            t = scanner.pick(la_cands, allowed)
            if t >= 0:
                live |= 1 << t
        if live & scanner.ignored:
            return allowed
        return live & allowed & ~(1 << self.end)

    def _forced(self, track: Track, allowed: int) -> int | None:
        """The terminal picked for the remainder when it is a complete lexeme that
        no byte extends within the language (so every continuation emits it)."""
        scanner, lexicon = self.engine.scanner, self.engine.lexicon
        q, ln, la_len, la_cands = track.scan
        if la_len != len(track.remainder):
            return None
        ok = allowed | scanner.ignored
        cats = lexicon.categories
        grow = self._extensions(q) & ok
        if grow & ~cats:
            return None
        if (
            grow & cats
            and ln != NO_NODE
            and any(lexicon.prefix_cats[c] & ok & cats for c in lexicon.children[ln].values())
        ):
            return None
        t = scanner.pick(la_cands, allowed)
        return t if t >= 0 else None

    def _extensions(self, q: int) -> int:
        """The terminals live after one more byte from DFA state ``q``."""
        grow = self._extend.get(q)
        if grow is None:
            dfa = self.engine.scanner.dfa
            grow = 0
            for b in range(256):
                nxt = dfa.trans[q * 256 + b]
                if nxt >= 0:
                    grow |= dfa.live[nxt]
            self._extend[q] = grow
        return grow


_trackers: weakref.WeakKeyDictionary[Engine, dict[EventSpec, EventTracker]] = (
    weakref.WeakKeyDictionary()
)


def tracker(engine: Engine, spec: EventSpec) -> EventTracker:
    """The engine's tracker for ``spec`` (built once, memos shared by its guides)."""
    per_engine = _trackers.setdefault(engine, {})
    found = per_engine.get(spec)
    if found is None:
        found = per_engine.setdefault(spec, EventTracker(engine, spec))
    return found


@runtime_checkable
class EventStream(Protocol):
    """A guide with a parse event stream: the native session made with an event
    spec, or an :class:`EventGuide` (see the module header)."""

    @property
    def spec(self) -> EventSpec | None: ...

    @property
    def event_count(self) -> int: ...

    def events(self, since: int = 0) -> list[Event]: ...

    def output(self) -> bytes: ...


@dataclass(frozen=True, eq=False)
class _History:
    """A persistent list of tracker states, one per step."""

    track: Track
    previous: _History | None


class EventGuide:
    """A guide with an event stream: every verb of :class:`grid_core.protocol.Guide`
    is the inner guide's; accepts feed the tracker, rollback and fork keep one
    stream per guide (see the module header). Made by ``Engine.guide(events=spec)``.

    Precondition: ``inner`` is at the start of a statement (no token accepted): the
    stream starts there; a guide already underway is a ``ValueError``, since its
    tracker would read the rest of a statement from its middle."""

    def __init__(
        self, inner: Guide, events: EventTracker, _history: _History | None = None
    ) -> None:
        if _history is None and inner.steps:
            raise ValueError(
                f"an event stream starts at the start of a statement: the guide has "
                f"accepted {inner.steps} tokens"
            )
        self.inner = inner
        self.engine = inner.engine
        self.tracker = events
        self._history = _history or _History(events.start(), None)

    # -- events ------------------------------------------------------------------

    @property
    def spec(self) -> EventSpec:
        """The event spec of this guide's stream."""
        return self.tracker.spec

    def events(self, since: int = 0) -> list[Event]:
        """The events determined by the accepted tokens, in stream order, from index
        ``since`` (a consumer's count of events already read) on; a negative index
        is a ``ValueError`` (as the native guide's)."""
        since = operator.index(since)
        if since < 0:
            raise ValueError(f"events from index {since}: an index is not negative")
        return self._history.track.event_list(since)

    @property
    def event_count(self) -> int:
        return self._history.track.count

    # -- the protocol ------------------------------------------------------------

    def reserve_source(self) -> Any:
        """The inner guide's reserve source (``grid_core.decode.reserve_source``): the
        events change nothing a reserve reads, and a guide whose language is not its
        engine's (a column-scoped guide) brings its own."""
        from grid_core.decode import reserve_source

        return reserve_source(self.inner)

    @property
    def steps(self) -> int:
        return self.inner.steps

    @property
    def audited(self) -> bool:
        return self.inner.audited

    def fill_next_token_bitmask(self, bitmask: Any, row: int = 0) -> None:
        self.inner.fill_next_token_bitmask(bitmask, row)

    def mask_ids(self) -> list[int]:
        return self.inner.mask_ids()

    def accept_token(self, token: int, kind: Kind = "sampled") -> None:
        self.inner.accept_token(token, kind)
        track = self._history.track
        if self.inner.is_terminated():
            track = self.tracker.finish(track)
        else:
            track = self.tracker.advance(track, self.engine.vocab.token_bytes[token])
        self._history = _History(track, self._history)

    def accept_tokens(self, tokens: Sequence[int], kind: Kind = "sampled") -> int:
        from grid_core.protocol import accept_in_order

        return accept_in_order(self, tokens, kind)

    def validate_tokens(self, tokens: Sequence[int]) -> int:
        return self.inner.validate_tokens(tokens)

    def rollback(self, n: int = 1) -> None:
        self.inner.rollback(n)
        history = self._history
        for _ in range(n):
            assert history.previous is not None
            history = history.previous
        self._history = history

    def fork(self) -> EventGuide:
        return EventGuide(self.inner.fork(), self.tracker, self._history)

    def is_terminated(self) -> bool:
        return self.inner.is_terminated()

    def eos_allowed(self) -> bool:
        return self.inner.eos_allowed()

    def step_audit(self) -> tuple[int, str, int]:
        return self.inner.step_audit()

    def audit_log(self) -> AuditLog:
        return self.inner.audit_log()

    def seal(self, stop_reason: str, mode: Mapping[str, object]) -> AuditLog:
        return self.inner.seal(stop_reason, mode)

    def output(self) -> bytes:
        return self.inner.output()

    def config_key(self) -> Hashable:
        return self.inner.config_key()
