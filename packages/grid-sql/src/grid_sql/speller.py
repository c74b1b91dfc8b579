"""The RBAC speller: forbidden names spelled against a role's mask, token by token, no model.

Question: can a model that only ever picks tokens a role's mask admits write a
relation the role has no grant for, a statement verb it lacks, or a function
its policy does not list? The speller answers by exhausting the token paths of
a real vocabulary at every position of the role's grammar where a name, a verb
or a function call can stand (issue 5, "RBAC at mask level", and issue 15,
"function policy"; ``bench/rbac_speller.py`` runs it over Qwen's vocabulary).

Nouns (used in this sense throughout):

- **position**: a statement prefix, the *context*, whose last lexeme is still
  pending, with the *stack* (:class:`grid_core.parser.Node`) once that lexeme is
  emitted: the stack under which the next lexeme is read.
- **goal**: an (LALR state, terminal) pair of the role's tables in which the
  parser shifts an *identifier terminal* (one whose language holds a spelling
  of a schema relation: lexicon categories, free names, the qualifier, string
  literals) or a *keyword* of the dialect (verbs, statement openers, and the
  words beside which a verb could stand, such as ``INSERT OR``'s conflict
  actions), or the *function terminal* (``FUNCTION_NAME``). A position *hits*
  (s, t) when t is allowed on its stack and shifted in state s. Tables are
  spelled at positions where an identifier terminal is allowed, verbs where a
  keyword is, functions where the function terminal is.
- **target**: one name in one *form*, as the bytes of its lexeme: a relation
  bare, in each identifier quote of the dialect, as a string literal (SQLite
  reads ``FROM 'salaries'`` as the table) or as a qualifier (``salaries.``); a
  CTE name or a verb bare; a function as its call lexeme (form ``call``:
  ``randomblob(``, the only way the dialects' grammars call a function: a name
  and its parenthesis are one lexeme). Letter case is not a form: the search
  matches letters ASCII case-insensitively, so every case variant is one search.
- **reading**: the terminal the lexer reads a complete lexeme as at a position,
  the contextual pick among its candidates under the stack's allowed set
  (:mod:`grid_core.lexer`); -1 when there is none.
- **use terminals** of a target: the readings that name what the target names:
  the table and CTE categories for a relation, the keyword for a verb, the
  function terminal for a function. Its **home** is the one use terminal where
  an allowed target must be spellable.
- **bypass**: for a *forbidden* target (a relation without grant, a verb the
  role lacks, ``REPLACE`` without ``DELETE``: it deletes the rows it conflicts
  with, and a function the role's policy does not grant), a path the mask
  admits through every byte of the lexeme while its reading is a use terminal.
  The record says whether the mask also admits a token that ends the lexeme (a
  byte on which the union DFA dies) or EOS.
- **positive control**: an allowed target, bare (a function: its call), at a
  position whose allowed set holds its home: the same search must complete it
  with that reading, so that zero bypasses cannot come from a search that
  never spells anything. Allowed functions are controls at the first position
  where a call may stand, and one of them in turn at each later one
  (:func:`function_controls`); forbidden functions are searched at every one.

Search (:meth:`Speller.spell`, per position, glue and target): a depth-first
walk over the token paths that spell ``glue + target`` after the context. A path
starts at every byte boundary of the context's last ``TokenIndex.longest``
bytes (tokens such as ``" sal"`` or ``"(s"`` straddle the context and the
target), then goes token by token through the target; at each step it tries
every vocabulary token whose bytes are the next bytes of the target (any case),
and every token that spells the rest of the target and then bytes on which the
union DFA dies (the lexeme ends inside the token). Each token tried is checked
twice, against the mask (:meth:`grid_core.guide.Engine.compute_mask`, what is
under test) and against the reference lexer (``Lexer.advance``, then
``is_viable``), and the two must agree. Paths are memoized on the bytes spelled
(a configuration is a function of the bytes): each configuration is masked once,
and ``paths`` counts distinct token sequences.

A path is *cut* as soon as its remainder is live for no use terminal of the
allowed set: every reading the lexeme can then get is a free name or a literal,
because the lexer reads a lexeme only as a terminal of the allowed set, and a
lexicon category only as one of its words. Every path that could end in a
bypass is followed to its end; cut paths are counted. Not followed either: a
token that continues the target into a longer lexeme (``salaries_x``,
``salaries.``: another target), or that leaves it open past its end (a quoted
name followed by ``"``): such a lexeme, if the DFA dies before it closes, is
the target with the same reading as when a closer ends it. A function's
positive control stops at its first complete call (``until_reached``): only
forbidden targets need every path, and a complete search of an allowed call
costs about a second over Qwen's vocabulary.

Precondition (checked when a :class:`Speller` is made; a ``ValueError``
otherwise): the union DFA does not tell an ASCII letter from its other case, so
the bytes that end a target do not depend on its case variant.

Meaning (:class:`Oracle`): a forbidden name that the grammar places elsewhere
reads as something else (``FROM employees AS salaries``, ``'salaries'``,
``salaries.``). For each position and forbidden target whose reading there is
such a free terminal, a *witness* sentence (the context, a blank, the catalog
spelling, a delimiter, and the completion that grid-core's reserve table writes)
is compiled by SQLite (``EXPLAIN``) with an authorizer callback. Every witness
is a sentence of the role's language, so the mask admits it. The authorizer
must see no table without grant, no write with a verb the role lacks and no
call of a function without grant. Allowed tables, verbs and functions at their
home positions are witnessed too and must be seen (SQLite may reject such a
sentence, e.g. ``FROM t, t`` is ambiguous under ``*``; those are listed with
SQLite's message), so the oracle cannot pass vacuously. Known limit: SQLite
authorizes ``REPLACE`` as the insert or update it does, so only the mask-level
check sees its delete.

Positions (:func:`find_positions`): for every goal (s, t), a context is built
from a shortest path from state 0 to s in the LALR automaton (shifts and
gotos), each nonterminal replaced by a shortest terminal yield and each
terminal by a sample lexeme. Parsing the yield of a viable prefix of an
unambiguous LALR(1) grammar leaves exactly that prefix on the stack, so the
context's stack is in state s, where t is shifted. Each context is re-lexed and
the goals it really hits are recorded; the goals no position hits are returned
(expected: none).
"""

from __future__ import annotations

import bisect
import heapq
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Literal

from grid_core.dfa import DEAD
from grid_core.errors import GridError
from grid_core.grammar import Grammar
from grid_core.guide import Engine
from grid_core.lexer import Config
from grid_core.lexicon import NO_NODE
from grid_core.parser import Node
from grid_core.reserve import reserve_table
from grid_core.vocab import Vocabulary
from grid_sql.dialect import Dialect
from grid_sql.generation import call_terminal, function_terminals
from grid_sql.policy import VERBS, RoleGrants
from grid_sql.schema import SchemaSnapshot, ascii_lower

__all__ = [
    "GLUES",
    "VERB_WORDS",
    "Goal",
    "Oracle",
    "Position",
    "RoleProbe",
    "Speller",
    "Spelling",
    "Target",
    "TokenIndex",
    "find_positions",
    "forbidden_verbs",
    "function_controls",
    "function_targets",
    "identifier_terminals",
    "keyword_terminals",
    "probe_role",
    "table_targets",
    "verb_targets",
]

Goal = tuple[int, int]
"""(LALR state, terminal id): the parser shifts the terminal in that state."""

GLUES: tuple[bytes, ...] = (b" ", b"", b"\n", b"\t", b"/**/")
"""What may separate the context from the target: blanks, a comment, or nothing
(used only where the target's first byte ends the context's last lexeme)."""

VERB_WORDS: tuple[str, ...] = (*VERBS, "REPLACE")
"""The statement verbs spelled at keyword positions (``REPLACE INTO`` is SQLite's
insert that deletes the rows it conflicts with)."""

_BINDINGS = re.compile(r"Incorrect number of bindings supplied\. The current statement uses (\d+)")

_SAMPLE_ORDER = bytes(
    sorted(range(0x21, 0x7F), key=lambda b: (not chr(b).islower(), not chr(b).isalnum(), b))
)
"""Byte order for sample lexemes: lower-case letters, other alphanumerics, punctuation."""

# ---------------------------------------------------------------- vocabulary index


@dataclass(frozen=True, eq=False)
class TokenIndex:
    """A vocabulary's spellings, ASCII-lower-cased and sorted, for prefix queries."""

    vocab: Vocabulary
    lowered: tuple[bytes, ...]
    """Sorted lower-cased spellings (one entry per non-special id)."""
    ids: tuple[int, ...]
    """The id of each entry of ``lowered``."""
    longest: int
    """The longest spelling, in bytes."""
    byte_ids: tuple[tuple[int, ...], ...]
    """Per byte value: the ids spelled by that byte alone."""

    @classmethod
    def build(cls, vocab: Vocabulary) -> TokenIndex:
        pairs = sorted(
            (b.lower(), i)
            for i, b in enumerate(vocab.token_bytes)
            if b and i not in vocab.special_ids
        )
        single: list[list[int]] = [[] for _ in range(256)]
        for i, b in enumerate(vocab.token_bytes):
            if len(b) == 1 and i not in vocab.special_ids:
                single[b[0]].append(i)
        return cls(
            vocab,
            tuple(p for p, _ in pairs),
            tuple(i for _, i in pairs),
            max(len(p) for p, _ in pairs),
            tuple(tuple(ids) for ids in single),
        )

    def starting(self, prefix: bytes) -> Iterator[int]:
        """Ids whose lower-cased spelling starts with ``prefix`` (lower case)."""
        k = bisect.bisect_left(self.lowered, prefix)
        while k < len(self.lowered) and self.lowered[k].startswith(prefix):
            yield self.ids[k]
            k += 1

    def spelled(self, lowered: bytes) -> Iterator[int]:
        """Ids whose lower-cased spelling is exactly ``lowered``."""
        k = bisect.bisect_left(self.lowered, lowered)
        while k < len(self.lowered) and self.lowered[k] == lowered:
            yield self.ids[k]
            k += 1


# ---------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """One name in one form, and the readings that would use it."""

    kind: Literal["table", "cte", "verb", "function"]
    name: str
    form: str
    lexeme: bytes
    uses: frozenset[str]
    home: str
    forbidden: bool

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name} ({self.form}: {self.lexeme.decode('utf-8', 'replace')})"


def table_forms(dialect: Dialect, name: str) -> list[tuple[str, bytes]]:
    """(form, lexeme) of a relation name: bare, each identifier quote, string, qualifier."""
    forms = [("bare", name)]
    for q in dialect.identifier_quotes:
        quoted = q.quote(name)
        if quoted is not None:
            forms.append((f"quoted {q.open}{q.close}", quoted))
    forms += [("string", "'" + name.replace("'", "''") + "'"), ("qualifier", name + ".")]
    return [(f, s.encode("utf-8")) for f, s in forms]


def table_targets(dialect: Dialect, schema: SchemaSnapshot, grants: RoleGrants) -> list[Target]:
    """Every relation of ``schema`` in every form; forbidden unless ``grants`` has it."""
    uses = frozenset({dialect.table_category, dialect.cte_category})
    granted = {ascii_lower(t) for t in grants.columns}
    return [
        Target(
            "table", t, form, lexeme, uses, dialect.table_category, ascii_lower(t) not in granted
        )
        for t in sorted(schema.table_names)
        for form, lexeme in table_forms(dialect, t)
    ]


def cte_targets(dialect: Dialect, grants: RoleGrants) -> list[Target]:
    """The role's CTE names, bare: positive controls where a CTE name may stand."""
    if "cte" in grants.banned_clauses:
        return []
    uses = frozenset({dialect.cte_category})
    return [
        Target("cte", c, "bare", c.encode("utf-8"), uses, dialect.cte_category, False)
        for c in grants.cte_names
    ]


def granted_functions(dialect: Dialect, grants: RoleGrants) -> frozenset[str]:
    """The functions ``grants`` lets the role call (every one of the dialect's for None)."""
    return frozenset(dialect.functions if grants.functions is None else grants.functions)


def function_targets(
    dialect: Dialect, grants: RoleGrants, grammar: Grammar | None = None
) -> list[Target]:
    """Every function of the dialect as its call lexeme; forbidden unless granted.
    A call reads as any function terminal of ``grammar`` (``FUNCTION_NAME``, and
    the typed calls' terminals of a generation language,
    :func:`~grid_sql.generation.typed_calls`); its own is its typed terminal where
    the grammar has it."""
    granted = granted_functions(dialect, grants)
    category = dialect.function_category
    uses = frozenset({category}) if grammar is None else function_terminals(grammar, dialect)

    def home(name: str) -> str:
        typed = call_terminal(dialect, name)
        return typed if typed in uses else category

    return [
        Target("function", f, "call", f"{f}(".encode(), uses, home(f), f not in granted)
        for f in sorted(set(dialect.functions))
    ]


def function_controls(calls: Sequence[Target], k: int) -> list[Target]:
    """The function targets searched at the ``k``-th position (from 0) where a call may
    stand: every forbidden function; as positive controls, every allowed one at the
    first such position and one allowed function at each later one, in turn (each
    control costs a few masks of the whole vocabulary)."""
    allowed = [t for t in calls if not t.forbidden]
    if not allowed:
        return list(calls)
    i = k % len(allowed)
    return [*(t for t in calls if t.forbidden), *(allowed if k == 0 else allowed[i : i + 1])]


def forbidden_verbs(verbs: frozenset[str]) -> frozenset[str]:
    """The words of :data:`VERB_WORDS` a role with ``verbs`` may not write."""
    out = {v for v in VERBS if v not in verbs}
    if "DELETE" not in verbs or not {"INSERT", "UPDATE"} & verbs:
        out.add("REPLACE")
    return frozenset(out)


def verb_targets(grammar: Grammar, verbs: frozenset[str]) -> list[Target]:
    """Every statement verb, bare; forbidden per :func:`forbidden_verbs`."""
    banned = forbidden_verbs(verbs)
    out = []
    for v in VERB_WORDS:
        grammar.terminal_id(v)  # a GrammarError when the dialect lacks the keyword
        out.append(Target("verb", v, "bare", v.encode(), frozenset({v}), v, v in banned))
    return out


# ---------------------------------------------------------------- positions


@dataclass(frozen=True, eq=False)
class Position:
    """A context, the stack under which the next lexeme is read, and the goals it hits."""

    context: bytes
    node: Node
    goals: frozenset[Goal]


def _bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def identifier_terminals(engine: Engine, dialect: Dialect, schema: SchemaSnapshot) -> int:
    """Bitset of the terminals whose language holds a form of a relation of ``schema``."""
    dfa, out = engine.dfa, 0
    for t in schema.table_names:
        for _, lexeme in table_forms(dialect, t):
            q = dfa.run(0, lexeme)
            if q != DEAD:
                out |= dfa.accept[q]
    return out


def keyword_terminals(engine: Engine, dialect: Dialect) -> int:
    """Bitset of the dialect's keyword terminals (the verbs among them)."""
    return sum(1 << engine.grammar.terminal_id(k.upper()) for k in set(dialect.keywords))


def goals_of(engine: Engine, terminals: int) -> frozenset[Goal]:
    """Every (state, t) of the engine's tables where a terminal of ``terminals`` is shifted."""
    tb = engine.tables
    width = tb.n_terminals + 1
    return frozenset(
        (s, t) for s in range(tb.n_states) for t in _bits(terminals) if tb.action[s * width + t] > 0
    )


def hits(engine: Engine, node: Node, terminals: int) -> frozenset[Goal]:
    """The goals a stack hits: (the state that shifts t, t) for each allowed t of ``terminals``."""
    parser = engine.parser
    out = set()
    for t in _bits(parser.allowed(node) & terminals):
        shifted = parser.shift(node, t)
        assert shifted.parent is not None
        out.add((shifted.parent.state, t))
    return frozenset(out)


def shortest_yields(grammar: Grammar) -> dict[str, tuple[int, ...]]:
    """Nonterminal -> a terminal string (ids) it derives with the fewest terminals."""
    ids = {t.name: i for i, t in enumerate(grammar.terminals)}
    best: dict[str, tuple[int, ...]] = {}
    changed = True
    while changed:
        changed = False
        for rule in grammar.rules:
            out: list[int] = []
            for s in rule.expansion:
                if s in ids:
                    out.append(ids[s])
                elif s in best:
                    out += best[s]
                else:
                    break
            else:
                if rule.origin not in best or len(out) < len(best[rule.origin]):
                    best[rule.origin] = tuple(out)
                    changed = True
    return best


def sample_lexeme(engine: Engine, t: int) -> bytes:
    """A short readable lexeme of terminal ``t``: its shortest word for a lexicon
    category, else the shortest printable string of its language (letters first)."""
    words = engine.lexicon.words.get(t)
    if words:
        return min(words, key=lambda w: (len(w), w))
    dfa = engine.dfa
    seen = {0}
    frontier: list[tuple[int, bytes]] = [(0, b"")]
    while frontier:
        deeper: list[tuple[int, bytes]] = []
        for q, s in frontier:
            for b in _SAMPLE_ORDER:
                r = dfa.trans[q * 256 + b]
                if r == DEAD or r in seen or not dfa.live[r] >> t & 1:
                    continue
                if dfa.accept[r] >> t & 1:
                    return s + bytes([b])
                seen.add(r)
                deeper.append((r, s + bytes([b])))
        frontier = deeper
    raise AssertionError(f"terminal {engine.grammar.terminals[t].name} has no printable lexeme")


def _state_paths(engine: Engine) -> dict[int, list[int]]:
    """State -> the shortest terminal string (in lexemes) whose parse ends in that state."""
    tb = engine.tables
    yields = shortest_yields(engine.grammar)
    width, n_nt = tb.n_terminals + 1, tb.n_nonterminals
    edges: list[list[tuple[int, tuple[int, ...]]]] = [[] for _ in range(tb.n_states)]
    for s in range(tb.n_states):
        for t in range(tb.n_terminals):
            a = tb.action[s * width + t]
            if a > 0:
                edges[s].append((a - 1, (t,)))
        for nt in range(n_nt):
            g = tb.goto[s * n_nt + nt]
            name = tb.nonterminal_names[nt]
            if g >= 0 and name in yields:
                edges[s].append((g, yields[name]))
    best: dict[int, list[int]] = {0: []}
    heap: list[tuple[int, int]] = [(0, 0)]
    done: set[int] = set()
    while heap:
        _, s = heapq.heappop(heap)
        if s in done:
            continue
        done.add(s)
        for r, y in edges[s]:
            path = best[s] + list(y)
            if r not in best or len(path) < len(best[r]):
                best[r] = path
                heapq.heappush(heap, (len(path), r))
    return best


def find_positions(
    engine: Engine, terminals: int
) -> tuple[list[Position], frozenset[Goal], frozenset[Goal]]:
    """Positions that hit every goal over ``terminals`` (a bitset of terminal ids).

    Returns (positions, every goal, the goals no position hits).
    """
    goals = goals_of(engine, terminals)
    paths = _state_paths(engine)
    samples: dict[int, bytes] = {}
    lexer = engine.lexer
    positions: list[Position] = []
    seen: set[bytes] = set()
    hit: set[Goal] = set()
    for state in sorted({s for s, _ in goals}):
        if all(g in hit for g in goals if g[0] == state) or state not in paths:
            continue
        for t in paths[state]:
            if t not in samples:
                samples[t] = sample_lexeme(engine, t)
        context = b" ".join(samples[t] for t in paths[state])
        if context in seen:
            continue
        seen.add(context)
        config = lexer.advance(lexer.initial, context)
        node = None if config is None else lexer.finalize(config)
        if node is None:
            continue
        got = hits(engine, node, terminals)
        hit |= got
        positions.append(Position(context, node, got))
    return positions, goals, goals - hit


# ---------------------------------------------------------------- the search


@dataclass
class Spelling:
    """What one (position, glue, target) search found."""

    trials: int = 0
    """(configuration, token) pairs checked against the mask."""
    paths: int = 0
    """Distinct token sequences examined (each ends refused, cut, or at the lexeme's end)."""
    cut: int = 0
    """Configurations where paths were cut (no use terminal can read the lexeme any more)."""
    spelled: dict[bytes, tuple[int, bool]] = field(default_factory=dict)
    """Each spelling admitted through its last byte -> (reading, ending admitted)."""
    disagreements: list[str] = field(default_factory=list)
    """Tokens on which the mask and the reference lexer disagree (expected: none)."""


class _Reached(Exception):
    """A positive control's search found what it looked for (``until_reached``)."""


class Speller:
    """The depth-first search of the module header, over one engine and a vocabulary index.

    Masks are memoized per configuration until :meth:`forget` (call it between
    positions: the mask of a large vocabulary is a large set).
    """

    def __init__(self, engine: Engine, index: TokenIndex) -> None:
        assert index.vocab.fingerprint == engine.vocab.fingerprint, "one vocabulary"
        trans = engine.dfa.trans
        for q in range(engine.dfa.n_states):
            for a in range(ord("a"), ord("z") + 1):
                if trans[q * 256 + a] != trans[q * 256 + a - 32]:
                    raise ValueError(
                        f"grammar {engine.grammar.name!r}: the union DFA tells {chr(a)!r} "
                        f"from {chr(a - 32)!r} in state {q}, so the speller's "
                        "case-insensitive search does not apply"
                    )
        self.engine = engine
        self.index = index
        self.masks = 0
        """Masks computed so far."""
        self._masks: dict[tuple[Node, bytes], tuple[frozenset[int], bool]] = {}
        self._configs: dict[bytes, Config | None] = {}

    def forget(self) -> None:
        self._masks.clear()
        self._configs.clear()

    def mask(self, config: Config) -> tuple[frozenset[int], bool]:
        """The admitted ids (EOS aside) and the EOS verdict of ``config``."""
        key = (config.node, config.remainder)
        got = self._masks.get(key)
        if got is None:
            result = self.engine.compute_mask(config)
            got = (frozenset(result.ci_ids) | frozenset(result.cd_ids), result.eos)
            self._masks[key] = got
            self.masks += 1
        return got

    def config(self, text: bytes) -> Config | None:
        """The configuration after ``text`` from the start (None if it leaves L)."""
        if text not in self._configs:
            lexer = self.engine.lexer
            c = lexer.advance(lexer.initial, text)
            self._configs[text] = c if c is not None and lexer.is_viable(c) else None
        return self._configs[text]

    def spell(
        self, position: Position, glue: bytes, target: Target, *, until_reached: bool = False
    ) -> Spelling | None:
        """Search every token path for ``glue + target`` after the position's context.

        None when ``glue`` does not separate them: the target's first byte would
        continue the context's last lexeme (``FROM`` + ``salaries``), or the glue
        itself leaves L (a comment, in a language without comments). With
        ``until_reached`` (for a positive control) the search stops at its first
        spelling read as a use terminal with an ending admitted.
        """
        engine, lexer, index = self.engine, self.engine.lexer, self.index
        dfa, scanner = engine.dfa, engine.scanner
        pre = position.context + glue
        word, low = target.lexeme, target.lexeme.lower()
        start = self.config(pre)
        if start is None:
            assert self.config(position.context) is not None, "a position's context is in L"
            return None  # the glue leaves L
        first = lexer.advance(start, word[:1])
        if first is None or first.remainder != word[:1]:
            return None
        allowed = engine.parser.allowed(first.node)
        uses = allowed & sum(1 << engine.grammar.terminal_id(u) for u in target.uses)
        cats, prefix_cats = engine.lexicon.categories, engine.lexicon.prefix_cats
        token_bytes = index.vocab.token_bytes
        end = dfa.run(0, low)
        assert end != DEAD and dfa.accept[end], f"{target.label} is not a lexeme"
        after = [dfa.trans[end * 256 + b] for b in range(256)]
        kills = [b for b in range(256) if after[b] == DEAD]
        closers = sorted(
            {bytes([b]).lower() for b in range(256) if after[b] == DEAD or not dfa.accept[after[b]]}
        )
        out = Spelling()
        memo: dict[bytes, int] = {}

        def live_for_use(c: Config) -> bool:
            q, ln, _, _ = c.scan
            if dfa.live[q] & uses & ~cats:
                return True
            return ln != NO_NODE and bool(prefix_cats[ln] & uses & cats)

        def reading(spelled: bytes) -> int:
            scan = scanner.scan(spelled)
            if scan is None or scan[2] != len(spelled):
                return -1
            return scanner.pick(scan[3], allowed)

        def ends_within(rest: bytes) -> bool:
            """``rest`` after the whole target makes the lexer emit the target."""
            q = end
            for b in rest:
                q = dfa.trans[q * 256 + b]
                if q == DEAD:
                    return True
                if dfa.accept[q]:
                    return False
            return False

        def check(c: Config, tid: int) -> Config | None:
            """Try one token: the mask's verdict, cross-checked with the reference lexer."""
            out.trials += 1
            admitted = tid in self.mask(c)[0]
            nxt = lexer.advance(c, token_bytes[tid])
            viable = nxt is not None and lexer.is_viable(nxt)
            if admitted != viable:
                out.disagreements.append(
                    f"{target.label} after {position.context + glue!r}, remainder "
                    f"{c.remainder!r}: token {tid} {token_bytes[tid]!r} mask={admitted} "
                    f"lexer={viable}"
                )
            return nxt if admitted and viable else None

        def tokens(prefix: bytes, done: int) -> Iterator[tuple[int, bytes]]:
            """Tokens spelling ``prefix`` exactly, then target bytes from ``done`` on (any
            case): inside the target, or through its end and on with a byte that does not
            make a longer lexeme at once. Yields (id, the bytes after ``prefix``)."""
            lp, n = prefix.lower(), len(prefix)
            for k in range(done + 1, len(word) + 1):
                for tid in index.spelled(lp + low[done:k]):
                    if token_bytes[tid][:n] == prefix:
                        yield tid, token_bytes[tid][n:]
            for closer in closers:
                for tid in index.starting(lp + low[done:] + closer):
                    if token_bytes[tid][:n] == prefix:
                        yield tid, token_bytes[tid][n:]

        def finish(c: Config, spelled: bytes) -> int:
            ids, eos = self.mask(c)
            ends = eos or any(i in ids for b in kills for i in index.byte_ids[b])
            if not ends:  # no single-byte ending: look at every admitted token
                ends = any(after[token_bytes[i][0]] == DEAD for i in ids)
            record(spelled, reading(spelled), ends)
            return 1

        def visit(c: Config, spelled: bytes) -> int:
            if spelled not in memo:
                assert not spelled or c.remainder == spelled, "the target is a fresh lexeme"
                if len(spelled) == len(word):
                    memo[spelled] = finish(c, spelled)
                elif spelled and not live_for_use(c):
                    out.cut += 1
                    memo[spelled] = 1
                else:
                    memo[spelled] = step(c, b"", spelled)
            return memo[spelled]

        def step(c: Config, prefix: bytes, spelled: bytes) -> int:
            paths, done = 0, len(spelled)
            for tid, part in tokens(prefix, done):
                inside = len(part) <= len(word) - done
                if not inside and not ends_within(part[len(word) - done :]):
                    continue  # a longer lexeme, not the target
                paths += 1
                nxt = check(c, tid)
                if nxt is None:
                    continue
                if inside:
                    paths += visit(nxt, spelled + part) - 1
                else:
                    whole = spelled + part[: len(word) - done]
                    record(whole, reading(whole), True)
            return paths

        def record(spelled: bytes, r: int, ends: bool) -> None:
            out.spelled[spelled] = (r, ends)
            if until_reached and ends and r >= 0 and uses >> r & 1:
                raise _Reached

        try:  # every path: from each byte boundary of the context's tail, then from its end
            for j in range(max(0, len(pre) - index.longest), len(pre)):
                if next(index.starting(pre[j:].lower() + low[:1]), None) is None:
                    continue
                straddle = self.config(pre[:j])
                assert straddle is not None, "a prefix of a viable prefix is viable"
                out.paths += step(straddle, pre[j:], b"")
            out.paths += visit(start, b"")
        except _Reached:
            pass
        return out


# ---------------------------------------------------------------- meaning: SQLite


class Oracle:
    """SQLite's authorizer over a schema: which tables a statement reads or writes.

    :meth:`accesses` compiles ``EXPLAIN sql`` on an in-memory copy of the schema
    and returns the (action, table) pairs the authorizer was asked about
    (``READ``, ``INSERT``, ``UPDATE``, ``DELETE``, ``SELECT`` with the table
    ``""``, and ``FUNCTION`` with the function's name in place of a table;
    SQLite's own tables aside), and SQLite's error when the statement does not
    compile. The callbacks of such a statement are kept: they are what SQLite
    resolved before giving up.
    """

    ACTIONS: Mapping[int, str] = {
        sqlite3.SQLITE_SELECT: "SELECT",
        sqlite3.SQLITE_READ: "READ",
        sqlite3.SQLITE_INSERT: "INSERT",
        sqlite3.SQLITE_UPDATE: "UPDATE",
        sqlite3.SQLITE_DELETE: "DELETE",
        sqlite3.SQLITE_FUNCTION: "FUNCTION",
    }

    def __init__(self, ddl: str) -> None:
        self._db = sqlite3.connect(":memory:")
        self._db.executescript(ddl)
        self._seen: set[tuple[str, str]] = set()
        self._db.set_authorizer(self._authorize)

    @classmethod
    def example(cls) -> Oracle:
        """The oracle over grid-sql's example schema (``examples/company.sql``)."""
        ddl = resources.files("grid_sql.examples").joinpath("company.sql").read_text("utf-8")
        return cls(ddl)

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, src: str | None
    ) -> int:
        name = self.ACTIONS.get(action)
        if action == sqlite3.SQLITE_FUNCTION:  # arg2 is the function's name
            if arg2 is not None:
                self._seen.add(("FUNCTION", arg2.lower()))
            return sqlite3.SQLITE_OK
        table = "" if action == sqlite3.SQLITE_SELECT else (arg1 or "")
        if name is not None and not table.lower().startswith("sqlite_"):
            self._seen.add((name, table))
        return sqlite3.SQLITE_OK

    def accesses(self, sql: str) -> tuple[frozenset[tuple[str, str]], str | None]:
        """(action, table) pairs, and SQLite's error message (None when it compiled)."""
        self._seen = set()
        error: str | None = None
        bindings: list[None] = []
        for _ in range(2):
            try:
                self._db.execute("EXPLAIN " + sql, bindings)
                error = None
                break
            except sqlite3.Error as e:
                error = str(e)
                # Python's sqlite3 wants one value per parameter; NULL is SQLite's own default.
                wanted = _BINDINGS.search(error)
                if wanted is None:
                    break
                bindings = [None] * int(wanted.group(1))
        return frozenset(self._seen), error


# ---------------------------------------------------------------- one role


@dataclass
class RoleProbe:
    """The counts of one role (the JSON record of ``bench/rbac_speller.py``)."""

    role: str
    verbs: list[str]
    tables: list[str]
    functions: list[str]
    """The functions the role may call."""
    lalr_states: int
    identifier_terminals: list[str]
    """The identifier terminals some state shifts."""
    keyword_terminals: int
    """How many keywords some state shifts."""
    identifier_goals: int
    keyword_goals: int
    goals_missed: list[str]
    forbidden_verb_goals: list[str]
    """Goals of a forbidden verb's keyword in the role's tables (expected: none)."""
    positions: int = 0
    relation_positions: int = 0
    keyword_positions: int = 0
    function_positions: int = 0
    targets_forbidden: list[str] = field(default_factory=list)
    targets_allowed: list[str] = field(default_factory=list)
    searches: int = 0
    trials: int = 0
    paths: int = 0
    cut: int = 0
    masks: int = 0
    bypasses: list[str] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    controls_expected: int = 0
    controls_reached: int = 0
    controls_missing: list[str] = field(default_factory=list)
    control_spellings: int = 0
    """Distinct (position, glue, spelling) completions of allowed targets with a use reading."""
    control_forms: dict[str, int] = field(default_factory=dict)
    """Allowed targets' forms completed with a use reading, per form (any position)."""
    witnesses: int = 0
    witness_readings: dict[str, int] = field(default_factory=dict)
    witnesses_compiled: int = 0
    witness_violations: list[str] = field(default_factory=list)
    oracle_controls_expected: int = 0
    oracle_controls_seen: int = 0
    oracle_controls_unseen: list[str] = field(default_factory=list)
    """Control witnesses whose table or verb SQLite did not report, with its reason."""
    seconds: float = 0.0


def probe_role(
    engine: Engine,
    dialect: Dialect,
    schema: SchemaSnapshot,
    grants: RoleGrants,
    index: TokenIndex,
    *,
    glues: Sequence[bytes] = GLUES,
    oracle: Oracle | None = None,
    positions: Iterable[Position] | None = None,
    functions: bool = True,
) -> RoleProbe:
    """Run the speller (and the oracle, if given) for one role (see the module header).

    ``positions`` defaults to :func:`find_positions` over the identifier terminals,
    the keywords and the function terminal; a subset may be passed for a reduced
    probe (goal counts still describe the full set). ``functions=False`` leaves
    the function targets out.
    """
    t0 = time.perf_counter()
    grammar = engine.grammar
    ident, keyword = (
        identifier_terminals(engine, dialect, schema),
        keyword_terminals(engine, dialect),
    )
    call = sum(1 << grammar.terminal_id(t) for t in function_terminals(grammar, dialect))
    found, goals, missed = find_positions(engine, ident | keyword | call)
    shifted = {t for _, t in goals}
    banned = sum(1 << grammar.terminal_id(v) for v in forbidden_verbs(grants.verbs))
    probe = RoleProbe(
        grants.role,
        sorted(grants.verbs),
        sorted(grants.columns),
        sorted(granted_functions(dialect, grants)),
        engine.tables.n_states,
        [grammar.terminals[t].name for t in _bits(ident | call) if t in shifted],
        sum(1 for t in _bits(keyword) if t in shifted),
        sum(1 for g in goals if (ident | call) >> g[1] & 1),
        sum(1 for g in goals if keyword >> g[1] & 1),
        [f"state {s} shifting {grammar.terminals[t].name}" for s, t in sorted(missed)],
        [
            f"state {s} shifting {grammar.terminals[t].name}"
            for s, t in sorted(goals_of(engine, banned))
        ],
    )
    tables = table_targets(dialect, schema, grants) + cte_targets(dialect, grants)
    verbs = verb_targets(grammar, grants.verbs)
    calls = function_targets(dialect, grants, grammar) if functions else []
    every = tables + verbs + calls
    probe.targets_forbidden = [t.label for t in every if t.forbidden]
    probe.targets_allowed = [t.label for t in every if not t.forbidden]
    relation = sum(
        1 << grammar.terminal_id(c) for c in (dialect.table_category, dialect.cte_category)
    )
    speller = Speller(engine, index)
    witness = _Witness(engine, dialect, grants, oracle, probe) if oracle is not None else None
    for position in found if positions is None else positions:
        allowed = engine.parser.allowed(position.node)
        probe.positions += 1
        probe.relation_positions += bool(allowed & relation)
        probe.keyword_positions += bool(allowed & keyword)
        here = [*(tables if allowed & ident else ()), *(verbs if allowed & keyword else ())]
        if allowed & call:
            here += function_controls(calls, probe.function_positions)
            probe.function_positions += 1
        for target in here:
            _search(speller, position, target, glues, probe)
            if witness is not None:
                witness.check(position, target)
        speller.forget()
    probe.masks = speller.masks
    probe.seconds = round(time.perf_counter() - t0, 2)
    return probe


def _search(
    speller: Speller,
    position: Position,
    target: Target,
    glues: Sequence[bytes],
    probe: RoleProbe,
) -> None:
    """Spell one target at one position after every glue; tally into ``probe``."""
    grammar = speller.engine.grammar
    allowed = speller.engine.parser.allowed(position.node)
    use = allowed & sum(1 << grammar.terminal_id(u) for u in target.uses)
    reached = False
    # A function's positive control stops at its first complete call (a control's
    # exhaustive search costs about a second per function over Qwen's vocabulary).
    quick = target.kind == "function" and not target.forbidden
    for glue in glues:
        if quick and reached:
            break
        spelling = speller.spell(position, glue, target, until_reached=quick)
        if spelling is None:
            continue
        probe.searches += 1
        probe.trials += spelling.trials
        probe.paths += spelling.paths
        probe.cut += spelling.cut
        probe.disagreements += spelling.disagreements
        for spelled, (r, ends) in spelling.spelled.items():
            if r < 0 or not use >> r & 1:
                continue
            if target.forbidden:
                probe.bypasses.append(
                    f"{target.label} spelled {spelled!r} after {position.context + glue!r} "
                    f"reads as {grammar.terminals[r].name} (ending admitted: {ends})"
                )
            elif ends:
                reached = True
                probe.control_spellings += 1
                probe.control_forms[target.form] = probe.control_forms.get(target.form, 0) + 1
    if (
        not target.forbidden
        and target.form in ("bare", "call")
        and allowed >> grammar.terminal_id(target.home) & 1
    ):
        probe.controls_expected += 1
        probe.controls_reached += reached
        if not reached:
            probe.controls_missing.append(f"{target.label} after {position.context!r}")


_ARGUMENTS = (b"1", b"'a'", b"1, 1", b"'a', 1, 1", b"")
"""Argument lists a call's witness tries, in turn (SQLite checks their number)."""


class _Witness:
    """The meaning-level check of (position, target) pairs, in catalog spelling."""

    def __init__(
        self,
        engine: Engine,
        dialect: Dialect,
        grants: RoleGrants,
        oracle: Oracle,
        probe: RoleProbe,
    ) -> None:
        self.engine = engine
        self.reserve = reserve_table(engine)
        self.oracle = oracle
        self.probe = probe
        self.granted = {ascii_lower(t) for t in grants.columns}
        self.verbs = grants.verbs
        # Keywords SQLite runs as functions (count, sum, like, glob, ...) are grammar.
        self.functions = granted_functions(dialect, grants) | {k.lower() for k in dialect.keywords}
        self._completions: dict[tuple[Node, bytes], bytes | None] = {}

    def sentence(self, text: bytes) -> bytes | None:
        """``text`` (ending in a whole lexeme), a delimiter, and the reserve table's
        completion; None when no delimiter keeps it in L."""
        lexer = self.engine.lexer
        c = lexer.advance(lexer.initial, text)
        if c is None:
            return None
        for delimiter in (b" ", b";", b")", b","):
            d = lexer.advance(c, delimiter)
            if d is None or not lexer.is_viable(d):
                continue
            key = (d.node, d.remainder)
            if key not in self._completions:
                try:
                    ids = self.reserve.completion(d)
                except GridError:
                    self._completions[key] = None
                else:
                    spell = self.engine.vocab.token_bytes
                    self._completions[key] = b"".join(spell[i] for i in ids)
            rest = self._completions[key]
            if rest is not None:
                full = lexer.advance(d, rest)
                assert full is not None and lexer.eos_allowed(full), "a completion ends in L"
                return text + delimiter + rest
        return None

    def check(self, position: Position, target: Target) -> None:
        engine, probe = self.engine, self.probe
        grammar, scanner = engine.grammar, engine.scanner
        scan = scanner.scan(target.lexeme)
        if scan is None or scan[2] != len(target.lexeme):
            return
        r = scanner.pick(scan[3], engine.parser.allowed(position.node))
        if r < 0:
            return
        uses = {grammar.terminal_id(u) for u in target.uses}
        if target.forbidden == (r in uses):
            return  # a forbidden use is the search's to report; an allowed free name proves nothing
        if not target.forbidden and (target.kind == "cte" or r != grammar.terminal_id(target.home)):
            return
        # A call is witnessed with arguments until SQLite takes their number.
        arguments = _ARGUMENTS if target.kind == "function" else (b"",)
        tried: list[tuple[str, frozenset[tuple[str, str]], str | None]] = []
        for args in arguments:
            sentence = self.sentence(position.context + b" " + target.lexeme + args)
            if sentence is not None:
                sql = sentence.decode("utf-8", "replace")
                tried.append((sql, *self.oracle.accesses(sql)))
                if tried[-1][2] is None:
                    break
        if not tried:
            return
        sql, seen, error = next((t for t in tried if t[2] is None), tried[0])
        if not target.forbidden:
            probe.oracle_controls_expected += 1
            if target.kind == "table":
                ok = any(
                    ascii_lower(t) == ascii_lower(target.name) for a, t in seen if a != "FUNCTION"
                )
            elif target.kind == "function":
                ok = ("FUNCTION", target.name) in seen
            else:  # SQLite authorizes a REPLACE as the insert or update it does
                writes = {"INSERT", "UPDATE"} if target.name == "REPLACE" else {target.name}
                ok = any(a in writes for a, _ in seen)
            probe.oracle_controls_seen += ok
            if not ok:
                why = f"SQLite: {error}" if error else "compiled, not seen"
                probe.oracle_controls_unseen.append(f"{target.label}: {sql!r} ({why})")
            return
        name = grammar.terminals[r].name
        probe.witnesses += 1
        probe.witness_readings[name] = probe.witness_readings.get(name, 0) + 1
        probe.witnesses_compiled += error is None
        bad = sorted(
            f"{a} {t}"
            for a, t in seen
            if (a == "FUNCTION" and t not in self.functions)
            or (a != "FUNCTION" and t and ascii_lower(t) not in self.granted)
            or (a in VERBS and a not in self.verbs)
        )
        if bad:
            probe.witness_violations.append(
                f"{target.label} read as {name}: {sql!r} -> {', '.join(bad)}"
            )
