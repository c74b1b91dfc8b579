"""JSON Schema, regex and choice requests as GRID grammars (lark text).

:func:`schema_grammar` turns a JSON Schema into a lark grammar whose language
is a set of JSON texts (UTF-8 bytes) every one of which is an instance of the
schema. **Soundness is the invariant**: the grammar never admits a text the
schema rejects. Where GRID narrows the schema's language (below) the text is
still valid; where it cannot honour a keyword exactly or by a sound
narrowing, the call raises :class:`SchemaError` naming the keyword and its JSON
pointer. A keyword is never dropped.

Narrowings (sound, listed in ``docs/json.md``):

- members are written in any order when there are at most :data:`ANY_ORDER`
  declared properties, else in the order of ``properties``; an optional one may
  be left out; extra members (``additionalProperties`` absent, true or a schema)
  follow the declared ones, their names written without ``\\u`` or ``\\/``
  escapes and different from every declared name (so no name repeats);
  ``strict=True`` reads an absent ``additionalProperties`` as false
  (xgrammar's default);
- a string under ``pattern`` or ``format`` is printable ASCII without ``"``
  and ``\\``; an unanchored pattern may be surrounded by such characters;
  ``format`` values are the subsets in :data:`FORMATS`;
- ``\\u`` escapes never spell a surrogate half;
- numbers have no leading zeros; a bounded number has no exponent; an integer
  has no exponent (``1.0`` is allowed, ``1e0`` is not);
- an ``enum``/``const`` value is written compactly;
- under ``patternProperties`` the extra members are those a pattern names, with
  its schema; names no pattern matches are left out;
- a ``maxLength`` over :data:`MAX_LENGTH` reads as :data:`MAX_LENGTH`, a
  ``maxItems`` over :data:`MAX_REPEAT` as :data:`MAX_REPEAT`;
- ``oneOf`` object alternatives are told apart by required names or tags
  (:meth:`_Compiler.told_apart`);
- the siblings of a ``$ref`` are merged with its target (2019-09 on they
  apply; drafts 4 to 7 ignore them, and the merge is a narrowing there);
- ``anyOf`` alternatives are tried by the LALR(1) parser without
  backtracking: where two alternatives' terminals overlap (an integer and a
  number item), the lexeme goes to one of them (``Terminal.tie_key``) and an
  instance only the other accepts is rejected.

Whitespace: none by default (compact, as ``json.dumps(..., separators=(",", ":"))``);
``whitespace=n`` lets each gap between two tokens hold a run of at most ``n``
blanks (space, tab, newline, carriage return). Each bracket, comma and colon is
one terminal that absorbs the run on its open side (after ``{ [ , :``, before
``} ] , :``); an empty object or array is one terminal, so no gap holds two runs.

Supported: ``type`` (one or a list), ``properties``, ``required``,
``additionalProperties``, ``items`` (a schema), ``prefixItems`` / ``items`` as a
list with ``additionalItems``/``items`` false (a closed tuple),
``minItems`` (up to :data:`MAX_REPEAT`), ``maxItems``, ``enum``, ``const``,
``minLength`` (up to :data:`MAX_LENGTH`), ``maxLength``, ``pattern``, ``format``
(the formats in :data:`FORMATS`; a name no specification defines, outside
:data:`_ASSERTED_FORMATS`, asserts nothing, as validators read it),
``minimum``/``maximum`` (integers: any bound, exclusive ones too, a fractional
one rounded inward; numbers: inclusive bounds, exact decimals), ``multipleOf``
(a whole step: 1, or the multiples between an integer's bounds spelled out, at
most :data:`MAX_MULTIPLES`), ``$ref`` to ``#...`` (``$defs``, ``definitions``,
recursion), ``anyOf``, ``oneOf`` whose alternatives have disjoint JSON types or
are objects told apart by required names or tags, ``patternProperties`` with
disjoint patterns that match no declared name, ``minProperties``/
``maxProperties`` where no counting is needed or the object is written in any
order without extra members (:meth:`_Compiler.member_counts`), ``allOf``, the
siblings of ``anyOf``/``oneOf`` and of ``$ref`` merged into one schema where
the merge is exact, an ``anyOf``/``oneOf`` inside a merged part distributed
over the merge (:meth:`_Compiler.merge`), ``anyOf`` object alternatives that
overlap joined into one object (:meth:`_Compiler.joined_objects`).
A place whose schema admits no instance (``false``, an ``enum`` none of whose
values has the ``type``, merged parts that share no type: :class:`_NoInstance`)
is left out where it can be: an optional member is never written, an
``anyOf``/``oneOf`` alternative dropped, an array's items leave it empty;
elsewhere it is the error.
Annotations (``title``, ``description``, ``default``, ...) and keywords JSON
Schema does not define are ignored, as a validator ignores them. Equal
sub-schemas share their grammar rules (:meth:`_Builder.rule` interns rules). A
grammar that is not LALR(1) is refused by
:func:`grid_core.compile.compile_grammar`
(:class:`~grid_core.errors.LALRConflictError`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from grid_core import regex_bytes as rx
from grid_core.errors import GrammarError
from grid_core.grammar import GrammarText, lark_literal, lark_regex, read_literal
from grid_core.regex_bytes import byteset, compile_pattern

__all__ = [
    "FORMATS",
    "JSON_EVENTS",
    "SchemaError",
    "choice_grammar",
    "json_object_grammar",
    "regex_grammar",
    "schema_grammar",
]


class SchemaError(GrammarError):
    """A JSON Schema keyword GRID cannot honour exactly: ``keyword`` at ``pointer``."""

    def __init__(self, keyword: str, pointer: str, reason: str) -> None:
        self.keyword = keyword
        self.pointer = pointer
        self.reason = reason
        super().__init__(f"JSON Schema keyword {keyword!r} at {pointer or '#'}: {reason}")


class _NoInstance(SchemaError):
    """``keyword`` at ``pointer`` leaves its schema no instance (``false``, an
    ``enum`` none of whose values has the ``type``, merged schemas that share no
    type). Where the schema is an optional member, an ``anyOf``/``oneOf``
    alternative or the items of an array that may be empty, the compiler leaves
    that place out, which is exact; anywhere else it is the error it names."""


# -- byte-level pieces (patterns over the latin-1 view of UTF-8) ---------------

SAFE = r"[ !#-\[\]-~]"
"""Printable ASCII but ``"`` and ``\\``: a character that is its own JSON spelling."""
_SAFE_BYTES = byteset(b for b in range(0x20, 0x7F) if b not in b'"\\')
_HEX = "[0-9a-fA-F]"
_ESCAPE = r'\\(?:["\\/bfnrt]|u(?:[0-9a-cA-CeEfF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))'
_UTF8 = (
    "[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}"
    "|\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}"
    "|\xf4[\x80-\x8f][\x80-\xbf]{2}"
)
CHAR = f"(?:{SAFE}|{_ESCAPE}|{_UTF8})"
"""One character of a JSON string as written: itself, an escape or a UTF-8 sequence."""
STRING = f'"{CHAR}*"'
INT = r"-?(?:0|[1-9][0-9]*)"
NUMBER = INT + r"(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"

DATE = (
    r"[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
TIME = (
    r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"
    r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)
FORMATS = {
    "date": DATE,
    "time": TIME,
    "date-time": DATE + "T" + TIME,
    "uuid": r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    "ipv4": r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}"
    r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])",
    "email": r"[a-z0-9]+(?:\.[a-z0-9]+)*@[a-z0-9]+(?:-[a-z0-9]+)*(?:\.[a-z0-9]+(?:-[a-z0-9]+)*)+",
    "hostname": r"[a-z0-9]{1,30}(?:\.[a-z0-9]{1,30}){0,3}",
    "uri": r"[a-z][a-z0-9+.-]*://[a-zA-Z0-9._~!$&'()*+,;=:@/?-]+",
    "uri-reference": r"(?:[a-z][a-z0-9+.-]*://[a-zA-Z0-9._~!$&'()*+,;=:@/?-]+"
    r"|[a-zA-Z0-9._~!$&'()*+,;=/-]*)",
    "byte": r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?",
}
"""Each format as a subset of its strings (February up to day 28; a
``uri-reference`` is a ``uri`` or a relative reference without ``:``, ``@``,
``?``, ``#`` or percent escapes; ``byte`` is OpenAPI's base64)."""

_ASSERTED_FORMATS = {
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname",
    "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template",
    "json-pointer", "relative-json-pointer", "regex", "byte", "binary", "int32", "int64",
    "float", "double", "password", "color",
}  # fmt: skip
"""The formats JSON Schema's drafts, OpenAPI and the reference validator define; one of
them GRID does not implement (not in :data:`FORMATS`) is refused. Any other name is an
annotation no validator checks, so it constrains nothing."""
_KNOWN = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems",
    "additionalItems", "minItems", "maxItems", "enum", "const", "minLength", "maxLength",
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "$ref", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "multipleOf",
    "uniqueItems", "contains", "minContains", "maxContains", "minProperties",
    "maxProperties", "patternProperties", "propertyNames", "dependencies",
    "dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
    "$dynamicRef", "$recursiveRef",
}  # fmt: skip
_TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
MAX_REPEAT = 128
"""The largest minItems/maxItems spelled out (one rule per item); a larger ``maxItems``
reads as this one (a sound narrowing)."""
ANY_ORDER = 6
"""Objects with at most this many declared properties take them in any order (one rule
per subset written); larger ones in the order of ``properties``."""
MAX_LENGTH = 256
"""The largest minLength/maxLength spelled out (a counted repetition of :data:`CHAR`,
about 14 DFA states a character); a larger ``maxLength`` reads as this one (a sound
narrowing: no string in MaskBench's valid instances is longer than 178 characters)."""


def _ptr(pointer: str, *parts: object) -> str:
    return pointer + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


OBJECT_OPEN, ARRAY_OPEN = "LBRACE", "LSQB"
"""The terminals of ``{`` and ``[`` (with the blanks after them under ``whitespace``)."""
KEY, VALUE, OBJECT, ARRAY = "json_key", "json_value", "json_object", "json_array"
"""The tree names (lark aliases) of the rules that wrap a member name, wrap a value
where it is written (a member's value, an item, the root), and write an object
or an array (each alternative, the empty one included)."""
JSON_EVENTS: tuple[tuple[str, str], ...] = (
    (OBJECT_OPEN, "object_open"),
    (ARRAY_OPEN, "array_open"),
    (KEY, "key"),
    (OBJECT, "object_close"),
    (ARRAY, "array_close"),
    (VALUE, "value"),
)
"""The event symbols of a JSON grammar, ``(symbol, kind)`` pairs as in
``grid_core.events.EventSpec`` (``grid_core.json_events``; docs/events.md)."""


_SELF = "$self"
"""In :meth:`_Builder.rule`'s alternatives, the rule being built (a loop)."""


class _Builder:
    """Rules and terminals of one grammar; each distinct pattern is one terminal.

    Event symbols (:data:`JSON_EVENTS`): every place a value is written holds
    the value's *wrapper*, a rule ``vN: X -> json_value`` (one per value symbol
    ``X``), and every member name is a wrapper ``kN: T -> json_key``, so a key
    and a value with the same spelling (``"a"`` as a name and as an enum value)
    are told apart; object and array rules carry the aliases ``json_object`` and
    ``json_array``. Inside a value (the alternatives of ``anyOf``, a ``$ref``'s
    rule, a type list) nothing is wrapped, so each value is one ``json_value``."""

    def __init__(self, whitespace: int) -> None:
        self.rules: dict[str, list[list[str]]] = {}
        self.aliases: dict[str, str] = {}  # rule name -> the alias of its alternatives
        self.terminals: dict[str, str] = {}  # lark spelling -> name
        self.patterns: dict[str, str] = {}  # lark spelling -> its reading (written ones)
        self.ws = whitespace
        self.counter = 0
        self._wrapped: dict[tuple[str, str], str] = {}
        self._interned: dict[tuple[frozenset[tuple[str, ...]], str | None], str] = {}

    def new(self, prefix: str = "n") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def rule(
        self, alternatives: list[list[str]], name: str | None = None, alias: str | None = None
    ) -> str:
        """A rule of ``alternatives`` (:data:`_SELF` in one names the rule itself).

        Without ``name`` the rule is interned: equal alternatives (as a set, the
        alias too) give the rule already built, so two equal sub-schemas compiled
        at two places share their nonterminals. Without it, the LALR(1) parser
        meets two rules with one right-hand side in one state (the alternatives
        of an ``anyOf``) and reports a reduce/reduce conflict the language does not
        have. ``name`` is for a rule referred to before it is built (a ``$ref``)."""
        if name is None:
            key = (frozenset(map(tuple, alternatives)), alias)
            found = self._interned.get(key)
            if found is not None:
                return found
            name = self._interned[key] = self.new()
        self.rules[name] = [[name if s == _SELF else s for s in alt] for alt in alternatives]
        if alias is not None:
            self.aliases[name] = alias
        return name

    def wrap(self, symbol: str, alias: str) -> str:
        """The rule ``symbol -> alias`` (one per symbol and alias): a value where it
        is written (:data:`VALUE`) or a member name (:data:`KEY`)."""
        found = self._wrapped.get((symbol, alias))
        if found is None:
            found = self.rule([[symbol]], self.new("k" if alias == KEY else "v"), alias)
            self._wrapped[(symbol, alias)] = found
        return found

    def token(self, spelling: str, name: str | None = None) -> str:
        if spelling not in self.terminals:
            self.terminals[spelling] = name or f"T{len(self.terminals)}"
        return self.terminals[spelling]

    def literal(self, text: bytes) -> str:
        """A terminal for fixed bytes."""
        return self.token(lark_literal(re.escape(text.decode("latin-1"))))

    def regex(self, pattern: str | rx.Written) -> str:
        """A terminal for ``pattern``. A written one is spelled leaf by leaf, as
        lark writes it and as lark reads it back (each leaf's spelling memoized),
        and compiled from its program."""
        if not isinstance(pattern, rx.Written):
            return self.token(f"/{lark_regex(pattern)}/")
        lark, read = pattern.render(lark_regex, _read_back)
        spelling = f"/{lark}/"
        if spelling not in self.patterns:
            self.patterns[spelling] = read
            rx.remember(read, pattern)
        return self.token(spelling)

    def punct(self, char: str) -> str:
        """A bracket, comma or colon with the whitespace run on its open side."""
        name = {"{": OBJECT_OPEN, "[": ARRAY_OPEN}.get(char)
        if not self.ws:
            return self.token(lark_literal(re.escape(char)), name)
        run = f"[ \\t\\n\\r]{{0,{self.ws}}}"
        before = run if char in "}],:" else ""
        after = run if char in "{[,:" else ""
        return self.token(f"/{lark_regex(before + re.escape(char) + after)}/", name)

    def empty(self, pair: str) -> str:
        if not self.ws:
            return self.literal(pair.encode())
        return self.regex(f"{re.escape(pair[0])}[ \\t\\n\\r]{{0,{self.ws}}}{re.escape(pair[1])}")

    def text(self, start: str) -> GrammarText:
        """The lark text, carrying its IR (:class:`~grid_core.grammar.GrammarText`)."""
        lines = [f"start: {start}"]
        for name, alts in self.rules.items():
            alias = f" -> {self.aliases[name]}" if name in self.aliases else ""
            lines.append(f"{name}: " + "\n    | ".join(" ".join(a) + alias for a in alts))
        lines += [f"{name}: {spelling}" for spelling, name in self.terminals.items()]
        rules = (
            ("start", ((start,),), None),
            *(
                (name, tuple(map(tuple, alts)), self.aliases.get(name))
                for name, alts in self.rules.items()
            ),
        )
        terminals = tuple((name, spelling) for spelling, name in self.terminals.items())
        return GrammarText("\n".join(lines) + "\n", terminals, rules, self.patterns)


class _Compiler:
    def __init__(self, root: Any, whitespace: int, strict: bool) -> None:
        self.root = root
        self.b = _Builder(whitespace)
        self.strict = strict
        self.refs: dict[str, str] = {}  # a $ref target (canonical JSON) -> its symbol
        self._open: dict[str, bool] = {}  # a $ref rule being built -> whether it recurs
        self._ref_keys: dict[str, str] = {}  # a $ref -> its target's canonical JSON
        self._checked_refs: set[int] = set()  # $ref targets checked (_check_tree)
        self.merges = 0
        self._any: str | None = None

    # -- dispatch ---------------------------------------------------------------

    def value(self, schema: Any, pointer: str) -> str:
        """The symbol whose language is (a sound narrowing of) ``schema``'s instances."""
        if schema is True or schema == {}:
            return self.any_value()
        if schema is False:
            raise _NoInstance("false", pointer, "the schema admits no instance")
        if not isinstance(schema, dict):
            raise SchemaError("schema", pointer, f"not a schema: {schema!r}")
        for key in schema:
            if key in _KNOWN and key not in _SUPPORTED:
                raise SchemaError(key, _ptr(pointer, key), "not supported by GRID")
        if "$ref" in schema:
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            if any(k in _KNOWN for k in rest):  # 2019-09 on: the siblings apply too
                return self.value(self.merge(rest, {"$ref": schema["$ref"]}, pointer), pointer)
            return self.ref(schema["$ref"], _ptr(pointer, "$ref"))
        if "allOf" in schema:
            parts = schema["allOf"]
            if not isinstance(parts, list) or not parts:
                raise SchemaError("allOf", _ptr(pointer, "allOf"), "must be a non-empty list")
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            merged = rest
            for i, part in enumerate(parts):
                merged = self.merge(merged, part, _ptr(pointer, "allOf", i))
            return self.value(merged, pointer)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                rest = {k: v for k, v in schema.items() if k != key}
                parts = schema[key]
                if not isinstance(parts, list) or not parts:
                    raise SchemaError(key, _ptr(pointer, key), "must be a non-empty list")
                if any(k in _KNOWN for k in rest):
                    kept: list[Any] = []
                    for i, p in enumerate(parts):
                        try:
                            kept.append(self.merge(rest, p, _ptr(pointer, key, i)))
                        except _NoInstance:
                            continue  # an alternative no instance satisfies: left out
                    if not kept:
                        raise _NoInstance(
                            key, _ptr(pointer, key), "no alternative admits an instance"
                        )
                    parts = kept
                return self.union(key, parts, _ptr(pointer, key))
        if "const" in schema or "enum" in schema:
            return self.choice(schema, pointer)
        types = schema.get("type", list(_TYPES))
        types = [types] if isinstance(types, str) else types
        for t in types:
            if t not in _TYPES:
                raise SchemaError("type", _ptr(pointer, "type"), f"unknown type {t!r}")
        if "integer" in types and "number" in types:
            types = [t for t in types if t != "integer"]
        alts = [[self.typed(t, schema, pointer)] for t in types]
        return alts[0][0] if len(alts) == 1 else self.b.rule(alts)

    def only(self, schema: dict[str, Any], pointer: str, allowed: set[str]) -> None:
        for key in schema:
            if key in _KNOWN and key not in allowed:
                raise SchemaError(key, _ptr(pointer, key), f"beside {sorted(allowed)[0]!r}")

    def resolve(self, ref: Any, pointer: str) -> Any:
        """The schema a local ``$ref`` names."""
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaError("$ref", pointer, f"only local references are supported: {ref!r}")
        target: Any = self.root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            try:
                target = target[int(part) if isinstance(target, list) else part]
            except (KeyError, IndexError, ValueError, TypeError):
                raise SchemaError("$ref", pointer, f"{ref!r} resolves to nothing") from None
        if isinstance(target, dict) and id(target) not in self._checked_refs:
            self._checked_refs.add(id(target))  # under an unknown keyword: not checked yet
            _check_tree(target, ref[1:], refs=True)
        return target

    def merge(self, a: Any, b: Any, pointer: str, depth: int = 0) -> dict[str, Any]:
        """One schema whose instances are those of both ``a`` and ``b`` (exactly), or an error.

        Keys of one side are kept; on both sides they must be equal, except
        ``required`` (union), ``type`` (intersection) and ``properties`` (merged
        by name, a name on both sides merged recursively). A side that closes
        its object (``additionalProperties`` not true) must already name every
        property of the result. A side's own ``allOf`` is merged first; a side's
        ``anyOf`` (``oneOf``) is distributed: the result is the ``anyOf``
        (``oneOf``) of each alternative merged with the rest of both sides, which
        is exact (an instance of ``A`` is an instance of exactly one ``Bi`` iff it
        is an instance of exactly one ``A and Bi``).
        """
        if depth > 8:
            raise SchemaError("allOf", pointer, "references nest too deep to merge")
        self.merges += 1
        if self.merges > MAX_MERGES:
            raise SchemaError("allOf", pointer, f"more than {MAX_MERGES} merges")
        sides = []
        for x in (a, b):
            if x is True:
                x = {}
            if not isinstance(x, dict):
                raise SchemaError("allOf", pointer, f"cannot merge {x!r}")
            if "$ref" in x:
                extra = {k: v for k, v in x.items() if k != "$ref"}
                x = self.merge(extra, self.resolve(x["$ref"], pointer), pointer, depth + 1)
            if "allOf" in x:
                parts = x["allOf"]
                if not isinstance(parts, list) or not parts:
                    raise SchemaError("allOf", pointer, "must be a non-empty list")
                x = {k: v for k, v in x.items() if k != "allOf"}
                for part in parts:
                    x = self.merge(x, part, pointer, depth + 1)
            sides.append(x)
        for i, x in enumerate(sides):
            for k in ("anyOf", "oneOf"):
                if k in x:  # A and (B1 or .. Bn) is (A and B1) or .. (A and Bn); so for oneOf
                    alts = x[k]
                    if not isinstance(alts, list) or not alts:
                        raise SchemaError(k, pointer, "must be a non-empty list")
                    if len(alts) > MAX_MERGED:
                        raise SchemaError(k, pointer, f"more than {MAX_MERGED} merged alternatives")
                    rest = {key: v for key, v in x.items() if key != k}
                    other = sides[1 - i]
                    merged = []
                    for j, alt in enumerate(alts):
                        p = _ptr(pointer, k, j)
                        try:
                            merged.append(
                                self.merge(self.merge(rest, alt, p, depth + 1), other, p, depth + 1)
                            )
                        except _NoInstance:
                            continue  # an alternative no instance satisfies: left out
                    if not merged:
                        raise _NoInstance(k, pointer, "no merged alternative admits an instance")
                    return {k: merged}
        a, b = sides
        out = dict(a)
        for k, v in b.items():
            if k not in out or out[k] == v:
                out[k] = v
            elif k == "required":
                out[k] = list(dict.fromkeys([*out[k], *v]))
            elif k == "type":
                ta = {out[k]} if isinstance(out[k], str) else set(out[k])
                tb = {v} if isinstance(v, str) else set(v)
                both = ta & tb | (
                    {"integer"} if "number" in ta | tb and "integer" in ta | tb else set()
                )
                if not both:
                    raise _NoInstance("type", pointer, "merged schemas share no type")
                out[k] = sorted(both)
            elif k == "properties":
                props = dict(out[k])
                for n, sub in v.items():
                    props[n] = (
                        self.merge(props[n], sub, _ptr(pointer, k, n), depth + 1)
                        if n in props
                        else sub
                    )
                out[k] = props
            elif k in _KNOWN:
                raise SchemaError(k, _ptr(pointer, k), "differs between merged schemas")
        names = set(out.get("properties", {}))
        for side in (a, b):
            if (
                side.get("additionalProperties", True) is not True
                and set(side.get("properties", {})) != names
            ):
                raise SchemaError(
                    "additionalProperties", pointer, "a merged schema closes its object"
                )
        return out

    def ref(self, ref: Any, pointer: str) -> str:
        """The symbol of a ``$ref``'s target, one per distinct target (equal
        definitions under two names share it). A target that refers to itself
        gets a rule named before it is built; any other is its value's symbol."""
        target = self.resolve(ref, pointer)
        if ref not in self._ref_keys:
            self._ref_keys[ref] = json.dumps(target, sort_keys=True)
        key = self._ref_keys[ref]
        if key not in self.refs:
            name = self.refs[key] = self.b.new("r")
            self._open[name] = False
            try:
                symbol = self.value(target, ref)
            except SchemaError:
                del self.refs[key]
                raise
            finally:
                recursive = self._open.pop(name)
            if recursive:
                self.b.rule([[symbol]], name)
            else:
                self.refs[key] = symbol
        found = self.refs[key]
        if found in self._open:
            self._open[found] = True
        return found

    def union(self, key: str, parts: Any, pointer: str) -> str:
        """``anyOf``/``oneOf``: one rule whose alternatives are the parts' symbols; a
        part that admits no instance (:class:`_NoInstance`) is left out."""
        if not isinstance(parts, list) or not parts:
            raise SchemaError(key, pointer, "must be a non-empty list")
        parts = list(parts)
        if key == "oneOf":
            kinds = [self.kinds(p, _ptr(pointer, i), set()) for i, p in enumerate(parts)]
            objects = [i for i, k in enumerate(kinds) if "object" in k]
            if len(objects) > 1:
                # Disjoint among themselves once told apart, each narrowed to its
                # objects (a value of another type two of them admit satisfies both,
                # so it is no instance); any other alternative must share no type
                # with any of them as written (or its instances might satisfy two).
                told = self.told_apart([parts[i] for i in objects], pointer)
                for i, part in zip(objects, told, strict=True):
                    parts[i] = part
            for i, k in enumerate(kinds):
                for j in range(i):
                    if kinds[j] & k and not (i in objects and j in objects):
                        raise SchemaError(key, _ptr(pointer, i), "alternatives share a JSON type")
        alts = []
        if key == "anyOf":
            joined = self.joined_objects(parts, pointer)
            if joined is not None:
                alts.append([joined[0]])
                parts = joined[1]
        for i, p in enumerate(parts):
            try:
                alts.append([self.value(p, _ptr(pointer, i))])
            except _NoInstance:
                continue
        if not alts:
            raise _NoInstance(key, pointer, "no alternative admits an instance")
        return self.b.rule(alts)

    def joined_objects(self, parts: list[Any], pointer: str) -> tuple[str, list[Any]] | None:
        """``anyOf`` alternatives that are plain object schemas and overlap (an object
        two of them admit, as ``{}`` where every member is optional), written as one
        object, exactly: the symbol of their objects and the parts left (the others,
        and the other types of the joined ones). None where they do not overlap
        (the alternatives stay apart) or cannot be joined.

        Each name any of them declares is one member, whose value must compile to
        one symbol in every alternative that admits the name (declared, or through
        open extra members). The rule of a set ``W`` of names written goes on with
        any name some alternative admitting ``W`` admits, and may end where such an
        alternative has all its required names in ``W`` (then take extra members
        where it takes them). Members in any order; refused (None) past
        :data:`MAX_JOINED` sets."""
        plain, rest = [], []
        for i, p in enumerate(parts):
            q = p
            seen = set()
            while isinstance(q, dict) and list(q) == ["$ref"] and q["$ref"] not in seen:
                seen.add(q["$ref"])
                q = self.resolve(q["$ref"], _ptr(pointer, i))
            types = q.get("type", list(_TYPES)) if isinstance(q, dict) else []
            types = [types] if isinstance(types, str) else types
            if (
                isinstance(q, dict)
                and isinstance(types, list)
                and "object" in types
                and all(k in _JOINABLE for k in q if k in _KNOWN or k == _FORBIDDEN)
                and isinstance(q.get("properties", {}), dict)
                and isinstance(q.get("required", []), list)
            ):
                plain.append((i, q))
                others = [t for t in types if t != "object"]
                if others:
                    rest.append({**q, "type": others})
            else:
                rest.append(p)
        if len(plain) < 2:
            return None
        closed = [
            set(q.get("properties", {}))
            if q.get("additionalProperties", None if self.strict else True) in (None, False)
            else None
            for _, q in plain
        ]
        required = [set(q.get("required", [])) for _, q in plain]
        if not any(
            all(c is None or (required[a] | required[b]) <= c for c in (closed[a], closed[b]))
            for a in range(len(plain))
            for b in range(a)
        ):
            return None
        names = list(
            dict.fromkeys(
                n for _, q in plain for n in [*q.get("properties", {}), *q.get("required", [])]
            )
        )
        colon, comma = self.b.punct(":"), self.b.punct(",")
        member: dict[str, str] = {}
        admits: list[set[str]] = []  # per alternative kept: the names it admits,
        needs: list[set[str]] = []  # those it requires,
        extras: list[bool] = []  # whether it takes extra members
        extra_value: str | None = None
        for (i, q), req in zip(plain, required, strict=True):
            extra = q.get("additionalProperties", None if self.strict else True)
            props = q.get("properties", {})
            sub_pointer = _ptr(pointer, i)
            extra_symbol = None
            if extra not in (None, False):
                with contextlib.suppress(_NoInstance):
                    extra_symbol = self.value(extra, _ptr(sub_pointer, "additionalProperties"))
            if extra_symbol is not None:
                if extra_value not in (None, extra_symbol):
                    return None
                extra_value = extra_symbol
            admitted = set()
            for n in names:
                if n in props:
                    try:
                        symbol = self.value(props[n], _ptr(sub_pointer, "properties", n))
                    except _NoInstance:
                        continue
                elif extra_symbol is not None:
                    symbol = extra_symbol
                else:
                    continue
                rule = self.b.rule(
                    [
                        [
                            self.b.wrap(self.b.literal(_compact(n)), KEY),
                            colon,
                            self.b.wrap(symbol, VALUE),
                        ]
                    ]
                )
                if member.setdefault(n, rule) != rule:
                    return None  # the name's value differs between alternatives
                admitted.add(n)
            if req <= admitted:  # else no object satisfies it: left out
                admits.append(admitted)
                needs.append(req)
                extras.append(extra_symbol is not None)
        extra_member = None
        loop = self.b.rule([[]])
        if extra_value is not None:
            key = self.b.wrap(self.b.regex(_quoted(_not_one_of(names))), KEY)
            extra_member = self.b.rule([[key, colon, self.b.wrap(extra_value, VALUE)]])
            loop = self.b.rule([[comma, extra_member, _SELF], []])
        after: dict[frozenset[str], str] = {}

        def alive(written: frozenset[str]) -> list[int]:
            return [k for k, a in enumerate(admits) if written <= a]

        def after_set(written: frozenset[str]) -> str:
            if written not in after:
                if len(after) >= MAX_JOINED:
                    raise _TooMany
                live = alive(written)
                alts = [
                    [comma, member[n], after_set(written | {n})]
                    for n in names
                    if n not in written and alive(written | {n})
                ]
                done = [k for k in live if needs[k] <= written]
                if done:
                    alts.append([])
                if extra_member is not None and any(extras[k] for k in done):
                    alts.append([comma, extra_member, loop])
                after[written] = self.b.rule(alts)
            return after[written]

        try:
            first = [[member[n], after_set(frozenset({n}))] for n in names if alive(frozenset({n}))]
        except _TooMany:
            return None
        if extra_member is not None and any(extras[k] and not needs[k] for k in range(len(admits))):
            first.append([extra_member, loop])
        body = []
        if first:
            body.append([self.b.punct("{"), self.b.rule(first), self.b.punct("}")])
        if any(not r for r in needs):
            body.append([self.b.empty("{}")])
        if not body:
            return None
        return self.b.rule(body, alias=OBJECT), rest

    def told_apart(self, parts: list[Any], pointer: str) -> list[dict[str, Any]]:
        """``oneOf`` object alternatives narrowed so that no instance satisfies two.

        Each alternative becomes an object schema (other types left out), and for
        every other alternative j it may not write one name j requires and it does
        not (``_FORBIDDEN``: left out of its properties and extra names). An
        instance of the narrowed i lacks that name, so it is no instance of j: the
        alternatives are disjoint and ``oneOf`` is their union. Two alternatives
        that both require a name whose values (``const``/``enum`` strings, booleans
        or null) are disjoint are disjoint already (a tagged union) and need no
        such name, as are two where one requires a name the other, closed, does
        not declare. Refused when some alternative requires every name another
        requires and no tag tells them apart, when an alternative is no plain
        object schema (after merging its ``allOf`` and ``$ref``), or under
        ``patternProperties``."""
        objects = []
        for i, p in enumerate(parts):
            seen = set()
            while isinstance(p, dict) and list(p) == ["$ref"] and p["$ref"] not in seen:
                seen.add(p["$ref"])
                p = self.resolve(p["$ref"], _ptr(pointer, i))
            if p is True or p == {}:
                p = {}
            if isinstance(p, dict) and ("allOf" in p or "$ref" in p):
                p = self.merge(p, {}, _ptr(pointer, i))
            types = p.get("type", "object") if isinstance(p, dict) else None
            if (
                not isinstance(p, dict)
                or any(k in p for k in ("$ref", "anyOf", "oneOf", "allOf", "patternProperties"))
                or "object" not in ([types] if isinstance(types, str) else list(types or ()))
            ):
                raise SchemaError("oneOf", _ptr(pointer, i), "alternatives share a JSON type")
            objects.append(p)
        required = [set(p.get("required", [])) for p in objects]
        out = []
        for i, p in enumerate(objects):
            forbidden = set()
            for j, needs in enumerate(required):
                if j != i and not self.tagged(objects[i], objects[j], required[i] & needs):
                    if needs <= required[i]:
                        raise SchemaError(
                            "oneOf",
                            _ptr(pointer, max(i, j)),
                            "alternatives share a JSON type and no required member tells "
                            f"alternative {j} from {i}",
                        )
                    forbidden.add(min(needs - required[i]))
            props = {n: v for n, v in p.get("properties", {}).items() if n not in forbidden}
            out.append({**p, "type": "object", "properties": props, _FORBIDDEN: sorted(forbidden)})
        return out

    def tagged(self, a: dict[str, Any], b: dict[str, Any], names: set[str]) -> bool:
        """Whether no instance satisfies both ``a`` and ``b``: one requires a name the
        other, closed, does not declare, or one of ``names`` (required by both) has
        disjoint values in them (a tag)."""
        for x, y in ((a, b), (b, a)):
            closed = x.get("additionalProperties", None if self.strict else True) in (None, False)
            if closed and set(y.get("required", [])) - set(x.get("properties", {})):
                return True
        for n in sorted(names):
            va, vb = self.tag_values(a, n), self.tag_values(b, n)
            if va is not None and vb is not None and not va & vb:
                return True
        return False

    def tag_values(self, schema: dict[str, Any], name: str) -> set[tuple[str, Any]] | None:
        """The values ``schema`` allows its member ``name`` (None: not a finite set of
        strings, booleans and nulls), each with its JSON type (``true`` is not ``1``)."""
        sub = schema.get("properties", {}).get(name)
        seen = set()
        while isinstance(sub, dict) and list(sub) == ["$ref"] and sub["$ref"] not in seen:
            seen.add(sub["$ref"])
            sub = self.resolve(sub["$ref"], "")
        if not isinstance(sub, dict) or not ("const" in sub or "enum" in sub):
            return None
        values = [sub["const"]] if "const" in sub else sub["enum"]
        if not isinstance(values, list) or not all(
            v is None or isinstance(v, (str, bool)) for v in values
        ):
            return None
        return {(_kind(v), v) for v in values}

    def kinds(self, schema: Any, pointer: str, visiting: set[str]) -> set[str]:
        """The JSON types ``schema``'s instances can have (integer counted as number)."""
        if not isinstance(schema, dict) or schema == {}:
            return set(_TYPES) - {"integer"}
        if "$ref" in schema and isinstance(schema["$ref"], str):
            ref = schema["$ref"]
            if ref in visiting:
                return set()
            target: Any = self.root
            for part in ref[1:].split("/")[1:]:
                target = target.get(part.replace("~1", "/").replace("~0", "~"), {})
            return self.kinds(target, ref, visiting | {ref})
        if "const" in schema or "enum" in schema:
            values = [schema["const"]] if "const" in schema else schema["enum"]
            return {_kind(v) for v in values}
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return set().union(*(self.kinds(p, pointer, visiting) for p in schema[key]))
        types = schema.get("type", list(_TYPES))
        types = [types] if isinstance(types, str) else types
        return {"number" if t == "integer" else t for t in types}

    # -- values -------------------------------------------------------------------

    def choice(self, schema: dict[str, Any], pointer: str) -> str:
        key = "const" if "const" in schema else "enum"
        self.only(schema, pointer, {key, "type"})
        values = [schema["const"]] if key == "const" else schema[key]
        if not isinstance(values, list):
            raise SchemaError(key, _ptr(pointer, key), "must be a list")
        types = schema.get("type")
        if types is not None:
            types = {types} if isinstance(types, str) else set(types)
            values = [v for v in values if _kind(v) in types or (_is_int(v) and "integer" in types)]
        if not values:
            raise _NoInstance(key, _ptr(pointer, key), "no value has the schema's type")
        return self.b.rule([[self.b.literal(_compact(v))] for v in values])

    def typed(self, t: str, schema: dict[str, Any], pointer: str) -> str:
        if t == "null":
            return self.b.literal(b"null")
        if t == "boolean":
            return self.b.rule([[self.b.literal(b"true")], [self.b.literal(b"false")]])
        if t == "string":
            return self.string(schema, pointer)
        if t in ("number", "integer"):
            return self.number(t, schema, pointer)
        if t == "array":
            return self.array(schema, pointer)
        return self.object(schema, pointer)

    def string(self, schema: dict[str, Any], pointer: str) -> str:
        lo, hi = schema.get("minLength", 0), schema.get("maxLength")
        if "format" in schema and schema["format"] not in {*FORMATS, *_ASSERTED_FORMATS}:
            # A format no draft (nor OpenAPI) defines asserts nothing: validators pass it.
            schema = {k: v for k, v in schema.items() if k != "format"}
        if "pattern" in schema or "format" in schema:
            regex = ""
            if "format" in schema:
                fmt = schema["format"]
                if fmt not in FORMATS:
                    raise SchemaError("format", _ptr(pointer, "format"), f"unknown format {fmt!r}")
                regex = f'"{FORMATS[fmt]}"'
            if "pattern" in schema:
                pattern = _pattern(schema["pattern"], _ptr(pointer, "pattern"))
                regex = _included(regex, pattern, pointer) if regex else pattern
            if lo or hi is not None:
                _lengths_implied(regex, lo, hi, pointer)
            return self.b.regex(regex)
        if not isinstance(lo, int) or lo < 0 or lo > MAX_LENGTH:
            raise SchemaError("minLength", _ptr(pointer, "minLength"), f"must be 0..{MAX_LENGTH}")
        if hi is not None and (not isinstance(hi, int) or hi < lo):
            raise SchemaError("maxLength", _ptr(pointer, "maxLength"), "must be at least minLength")
        if hi is not None:
            hi = min(hi, MAX_LENGTH)
        if lo == 0 and hi is None:
            return self.b.regex(STRING)
        count = f"{{{lo},}}" if hi is None else f"{{{lo},{hi}}}"
        return self.b.regex(f'"{CHAR}{count}"')

    def number(self, t: str, schema: dict[str, Any], pointer: str) -> str:
        bounds = {k: schema[k] for k in _BOUNDS if k in schema}
        if "multipleOf" in schema:
            return self.multiples(schema["multipleOf"], bounds, _ptr(pointer, "multipleOf"))
        if t == "number" and not bounds:
            return self.b.regex(NUMBER)
        if t == "number":
            for key in ("exclusiveMinimum", "exclusiveMaximum"):
                if key in bounds and bounds[key] is not False:
                    raise SchemaError(key, _ptr(pointer, key), "exclusive bounds on a number")
            lo, hi = bounds.get("minimum"), bounds.get("maximum")
            for key, v in (("minimum", lo), ("maximum", hi)):
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                    raise SchemaError(key, _ptr(pointer, key), "must be a number")
                if isinstance(v, float) and not math.isfinite(v):
                    raise SchemaError(key, _ptr(pointer, key), "must be finite")
            return self.b.regex(_decimal_range(_exact(lo), _exact(hi), pointer))
        lo, hi = _int_bounds(bounds, pointer)
        whole = INT if lo is None and hi is None else _int_range(lo, hi)
        return self.b.regex(whole + r"(?:\.0+)?")  # 1.0 is an integer too

    def multiples(self, step: Any, bounds: dict[str, Any], pointer: str) -> str:
        """Numbers (or integers) that are ``step`` times an integer, ``step`` whole: any
        integer for a step of 1, else each multiple within the bounds spelled out (at
        most :data:`MAX_MULTIPLES`); a fractional step is refused."""
        if isinstance(step, bool) or not isinstance(step, (int, float)) or step <= 0:
            raise SchemaError("multipleOf", pointer, "must be a number above 0")
        if not _is_int(step):
            raise SchemaError("multipleOf", pointer, "a fractional step is not supported")
        step = int(step)
        lo, hi = _int_bounds(bounds, pointer.rpartition("/")[0])
        if step == 1:
            whole = INT if lo is None and hi is None else _int_range(lo, hi)
        elif lo is None or hi is None or (hi // step - -(-lo // step)) >= MAX_MULTIPLES:
            raise SchemaError(
                "multipleOf", pointer, f"more than {MAX_MULTIPLES} multiples within the bounds"
            )
        else:
            first = -(-lo // step) * step
            values = range(first, hi + 1, step)
            if not values:
                raise _NoInstance("multipleOf", pointer, "no multiple within the bounds")
            whole = "(?:" + "|".join(str(v) for v in values) + ")"
        return self.b.regex(whole + r"(?:\.0+)?")

    def array(self, schema: dict[str, Any], pointer: str) -> str:
        lo, hi = schema.get("minItems", 0), schema.get("maxItems")
        if not isinstance(lo, int) or lo < 0 or lo > MAX_REPEAT:
            raise SchemaError("minItems", _ptr(pointer, "minItems"), f"must be 0..{MAX_REPEAT}")
        if hi is not None and (not isinstance(hi, int) or hi < lo):
            raise SchemaError("maxItems", _ptr(pointer, "maxItems"), "must be at least minItems")
        if hi is not None:
            hi = min(hi, MAX_REPEAT)
        prefix: list[Any] = schema.get("prefixItems", [])
        items = schema.get("items", True)
        if isinstance(items, list):  # draft 4 tuple form
            prefix, items = items, schema.get("additionalItems", True)
        elif "additionalItems" in schema and "prefixItems" in schema:
            # Ignored beside a single ``items`` schema (drafts 4 to 2019-09; 2020-12 has
            # no such keyword), but meaningless beside 2020-12's ``prefixItems``.
            raise SchemaError(
                "additionalItems", _ptr(pointer, "additionalItems"), "beside prefixItems"
            )
        if prefix:
            if items is not False or lo > len(prefix) or hi is not None:
                raise SchemaError("prefixItems", pointer, "only a closed tuple is supported")
            syms = [
                self.b.wrap(self.value(s, _ptr(pointer, "items", i)), VALUE)
                for i, s in enumerate(prefix)
            ]
            comma = self.b.punct(",")
            body = [x for i, s in enumerate(syms) for x in ([comma, s] if i else [s])]
            return self.b.rule([[self.b.punct("["), *body, self.b.punct("]")]], alias=ARRAY)
        try:
            item = self.b.wrap(self.value(items, _ptr(pointer, "items")), VALUE)
        except _NoInstance:  # no item can be written: only the empty array
            if lo > 0:
                raise
            return self.b.rule([[self.b.empty("[]")]], alias=ARRAY)
        comma = self.b.punct(",")
        # tail_k: k items written; from max(lo, 1) on, a loop
        loop = self.b.rule([[comma, item, _SELF], []] if hi is None else [[]])
        cur = loop
        for k in range(max(hi if hi is not None else max(lo, 1), 1) - 1, 0, -1):
            alts: list[list[str]] = [[comma, item, cur]]
            if k >= lo:
                alts.append([])
            cur = self.b.rule(alts)
        body_alts = [[self.b.punct("["), item, cur, self.b.punct("]")]]
        if hi == 0:
            body_alts = []
        if lo == 0:
            body_alts.append([self.b.empty("[]")])
        return self.b.rule(body_alts, alias=ARRAY)

    def object(self, schema: dict[str, Any], pointer: str) -> str:
        props = schema.get("properties", {})
        required = schema.get("required", [])
        extra = schema.get("additionalProperties", None if self.strict else True)
        patterns = schema.get("patternProperties", {})
        if not isinstance(props, dict) or not isinstance(required, list):
            raise SchemaError("properties", pointer, "malformed properties or required")
        if not isinstance(patterns, dict):
            raise SchemaError("patternProperties", pointer, "must be an object")
        keyed = self.pattern_keys(patterns, _ptr(pointer, "patternProperties"))
        if keyed:
            extra = None  # names no pattern matches: left out (a narrowing)
        names = list(props)
        forbidden = schema.get(_FORBIDDEN, [])
        for r in required:
            if r not in props:
                if extra is None or extra is False:
                    raise SchemaError(
                        "required", _ptr(pointer, "required"), f"{r!r} cannot be written"
                    )
                names.append(r)
        members = []
        colon = self.b.punct(":")
        for n in names:
            sub = props.get(n, extra)
            try:
                value = self.b.wrap(self.value(sub, _ptr(pointer, "properties", n)), VALUE)
            except _NoInstance as e:
                if n in required:
                    raise _NoInstance(
                        "required", _ptr(pointer, "required"), f"{n!r} can have no value ({e})"
                    ) from None
                continue  # the name can never be written (still kept out of the extras)
            key = self.b.wrap(self.b.literal(_compact(n)), KEY)
            members.append((self.b.rule([[key, colon, value]]), n in required))
        comma = self.b.punct(",")
        # Extra members (after the declared ones) are a loop of the extra member
        # kinds: additionalProperties, or one per patternProperties pattern.
        kinds = []
        if extra not in (None, False):
            key = self.b.wrap(self.b.regex(_quoted(_not_one_of(names + forbidden))), KEY)
            try:
                value = self.value(extra, _ptr(pointer, "additionalProperties"))
                kinds.append([key, colon, self.b.wrap(value, VALUE)])
            except _NoInstance:
                pass  # as additionalProperties false
        for p, key_regex, sub_pointer in keyed:
            if any(compile_pattern("K", key_regex).fullmatch(_compact(n)) for n in names):
                # Its members could repeat the declared name: refused, not merged.
                raise SchemaError(
                    "patternProperties", sub_pointer, "matches a declared property's name"
                )
            key = self.b.wrap(self.b.regex(key_regex), KEY)
            try:
                value = self.value(patterns[p], sub_pointer)
                kinds.append([key, colon, self.b.wrap(value, VALUE)])
            except _NoInstance:
                pass  # names it matches can never be written
        # rest: what follows the declared members (the extra members' loop);
        # start: the extras when no declared member is written (None: there are none).
        rest = self.b.rule([[]])
        start: str | None = None
        if kinds:
            member = self.b.rule(kinds)
            loop = self.b.rule([[comma, member, _SELF], []])
            rest = self.b.rule([[loop]])
            start = self.b.rule([[member, loop]])
        n_required = sum(r for _, r in members)
        most = len(members) if not kinds else None
        some, none, counts = self.member_counts(schema, pointer, n_required, most)
        if len(members) <= ANY_ORDER:
            first = self.any_order(members, comma, rest, start, counts)
        elif counts is not None:
            key = "minProperties" if "minProperties" in schema else "maxProperties"
            raise SchemaError(
                key,
                _ptr(pointer, key),
                f"counted over {len(members)} members, more than the {ANY_ORDER} "
                "GRID writes in any order",
            )
        else:
            first = self.in_order(members, comma, rest, start)
        alts = []
        if first is not None and some:
            alts.append([self.b.punct("{"), first, self.b.punct("}")])
        if none:
            alts.append([self.b.empty("{}")])
        if not alts:
            raise _NoInstance("properties", pointer, "the object can have no members")
        return self.b.rule(alts, alias=OBJECT)

    def in_order(
        self, members: list[tuple[str, bool]], comma: str, rest: str, start: str | None
    ) -> str | None:
        """The members of a non-empty object in declared order (each optional one may
        be left out), then ``rest``; None when the object can have no member."""
        # after_i: members i.. once one is written; first_i: none written yet, one must be.
        after, first = rest, start
        for m, req in reversed(members):
            alts = [[m, after]] + ([[first]] if not req and first is not None else [])
            first = self.b.rule(alts)
            after = self.b.rule([[comma, m, after]] + ([] if req else [[after]]))
        return first

    def any_order(
        self,
        members: list[tuple[str, bool]],
        comma: str,
        rest: str,
        start: str | None,
        counts: tuple[int, int] | None = None,
    ) -> str | None:
        """The members of a non-empty object in any order (each at most once, every
        required one written), then ``rest``: one rule per set of members written
        (2^n rules, so only for at most :data:`ANY_ORDER` members). The next key
        names the member, so the choice is LALR(1). ``counts``: the number of
        members written must lie in it (no extra members then); a set from which
        no admitted object is reachable is left out."""
        required = frozenset(i for i, (_, req) in enumerate(members) if req)
        lo, hi = counts if counts is not None else (0, len(members))
        after: dict[frozenset[int], str] = {}

        def viable(written: frozenset[int]) -> bool:
            return len(written | required) <= hi and max(lo, len(written | required)) <= len(
                members
            )

        def after_set(written: frozenset[int]) -> str:
            if written not in after:
                alts = [
                    [comma, m, after_set(written | {i})]
                    for i, (m, _) in enumerate(members)
                    if i not in written and viable(written | {i})
                ]
                if required <= written and len(written) >= lo:
                    alts.append([rest])
                after[written] = self.b.rule(alts)
            return after[written]

        alts = [
            [m, after_set(frozenset({i}))]
            for i, (m, _) in enumerate(members)
            if viable(frozenset({i}))
        ]
        if not required and start is not None:
            alts.append([start])
        return self.b.rule(alts) if alts else None

    def member_counts(
        self, schema: dict[str, Any], pointer: str, n_required: int, most: int | None
    ) -> tuple[bool, bool, tuple[int, int] | None]:
        """Check ``minProperties``/``maxProperties`` against an object that writes at
        least ``n_required`` members and at most ``most`` (None: unbounded), each
        non-empty alternative writing at least one; whether objects with members
        and whether ``{}`` stay admitted, and the member counts the non-empty
        alternatives must count (None: no counting needed).

        A lower bound of 1 drops ``{}``, an upper bound of 0 keeps only ``{}``,
        and a bound the object's shape already satisfies is no constraint. Any
        other bound is counted when the object has no extra members (``most``
        known) and is written in any order (:meth:`any_order`: the set written
        gives the count); elsewhere it is refused.
        """
        lo, hi = schema.get("minProperties", 0), schema.get("maxProperties")
        if not isinstance(lo, int) or lo < 0:
            raise SchemaError("minProperties", _ptr(pointer, "minProperties"), "must be 0 or more")
        if hi is not None and (not isinstance(hi, int) or hi < lo):
            raise SchemaError(
                "maxProperties", _ptr(pointer, "maxProperties"), "must be at least minProperties"
            )
        if hi == 0 and n_required:
            raise _NoInstance("maxProperties", _ptr(pointer, "maxProperties"), "below required")
        if most is not None and lo > most:
            raise _NoInstance("minProperties", _ptr(pointer, "minProperties"), "above the members")
        if most is not None and (lo > max(n_required, 1) or (hi is not None and 0 < hi < most)):
            return hi != 0, n_required == 0 and lo == 0, (max(lo, 1), most if hi is None else hi)
        if lo > max(n_required, 1):
            raise SchemaError(
                "minProperties",
                _ptr(pointer, "minProperties"),
                f"{lo} members, more than the {n_required} required, beside extra members "
                "(GRID does not count them)",
            )
        if hi is not None and hi != 0 and (most is None or most > hi):
            raise SchemaError(
                "maxProperties",
                _ptr(pointer, "maxProperties"),
                f"at most {hi} of unbounded members (GRID does not count extra members)",
            )
        return hi != 0, n_required == 0 and lo == 0, None

    def pattern_keys(self, patterns: dict[str, Any], pointer: str) -> list[tuple[str, str, str]]:
        """Per ``patternProperties`` pattern: (pattern, the regex of its member names
        as written, the pointer of its schema). The names of two patterns must not
        overlap (a name both match would need both schemas)."""
        keyed = []
        for p in patterns:
            sub_pointer = _ptr(pointer, p)
            keyed.append((p, _pattern(p, sub_pointer), sub_pointer))
        if len(keyed) > 1:
            from grid_core.dfa import build_union_dfa

            dfa = build_union_dfa([(f"K{i}", k) for i, (_, k, _) in enumerate(keyed)])
            for accept in dfa.accept:
                if accept & (accept - 1):
                    both = [keyed[i][0] for i in range(len(keyed)) if accept >> i & 1]
                    raise SchemaError("patternProperties", pointer, f"patterns {both} overlap")
        return keyed

    def any_value(self) -> str:
        """Any JSON value (members in any order, any names)."""
        if self._any is None:
            v = self._any = self.b.new("any")
            string = self.b.regex(STRING)
            comma, colon = self.b.punct(","), self.b.punct(":")
            written = self.b.wrap(v, VALUE)
            member = self.b.rule([[self.b.wrap(string, KEY), colon, written]])
            members = self.b.rule([[member], [_SELF, comma, member]])
            items = self.b.rule([[written], [_SELF, comma, written]])
            obj = self.b.rule(
                [[self.b.empty("{}")], [self.b.punct("{"), members, self.b.punct("}")]],
                alias=OBJECT,
            )
            arr = self.b.rule(
                [[self.b.empty("[]")], [self.b.punct("["), items, self.b.punct("]")]],
                alias=ARRAY,
            )
            self.b.rule(
                [
                    [self.b.literal(b"null")],
                    [self.b.literal(b"true")],
                    [self.b.literal(b"false")],
                    [self.b.regex(NUMBER)],
                    [string],
                    [obj],
                    [arr],
                ],
                v,
            )
        return self._any


_SUPPORTED = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems",
    "additionalItems", "minItems", "maxItems", "enum", "const", "minLength", "maxLength",
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "$ref", "anyOf", "oneOf", "allOf", "minProperties", "maxProperties", "patternProperties",
    "multipleOf",
}  # fmt: skip
_FORBIDDEN = "x-grid-forbidden"
"""Names an object alternative of ``oneOf`` may not write (:meth:`_Compiler.told_apart`)."""
MAX_MULTIPLES = 512
"""The most multiples of a ``multipleOf`` step spelled out between an integer's bounds."""
MAX_JOINED = 512
"""The most sets of written names :meth:`_Compiler.joined_objects` spells out."""
_JOINABLE = {
    "type", "properties", "required", "additionalProperties",
    # keywords of other types (the joined object is the objects only):
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
    "contains", "minContains", "maxContains", "unevaluatedItems", "minLength", "maxLength",
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf",
}  # fmt: skip
"""The keywords an object alternative of :meth:`_Compiler.joined_objects` may carry."""
MAX_MERGES = 20000
"""The most schema merges one compile may make (distributing nested ``anyOf`` over
an ``allOf`` multiplies them)."""


class _TooMany(Exception):
    """More than :data:`MAX_JOINED` sets of written names."""


MAX_MERGED = 64
"""The most alternatives an ``anyOf``/``oneOf`` distributed over a merge may have."""
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _is_int(v: Any) -> bool:
    return not isinstance(v, bool) and (
        isinstance(v, int) or (isinstance(v, float) and v.is_integer())
    )


def _compact(v: Any) -> bytes:
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode()


def _int_bounds(bounds: dict[str, Any], pointer: str) -> tuple[int | None, int | None]:
    """Inclusive integer bounds from draft 4 (boolean exclusive) or later keywords."""
    lo = hi = None
    for key, v in bounds.items():
        if isinstance(v, bool):
            continue
        if not isinstance(v, (int, float)):
            raise SchemaError(key, _ptr(pointer, key), "must be a number")
        if key == "minimum":
            n = -int(-v // 1)  # ceil
            if bounds.get("exclusiveMinimum") is True:
                n = int(v // 1) + 1
        elif key == "exclusiveMinimum":
            n = int(v // 1) + 1
        elif key == "maximum":
            n = int(v // 1)
            if bounds.get("exclusiveMaximum") is True:
                n = -int(-v // 1) - 1
        else:
            n = -int(-v // 1) - 1
        if key.endswith("inimum"):
            lo = n if lo is None else max(lo, n)
        else:
            hi = n if hi is None else min(hi, n)
    if lo is not None and hi is not None and lo > hi:
        raise _NoInstance("minimum", pointer, "the bounds admit no integer")
    return lo, hi


def _exact(v: int | float | None) -> Decimal | None:
    """A bound as the decimal it is written as (a float's shortest spelling, which
    reads back to the same float): an instance at least (at most) that decimal
    reads to a float at least (at most) the bound, rounding being monotone."""
    return None if v is None else Decimal(repr(v))


def _decimal_range(lo: Decimal | None, hi: Decimal | None, pointer: str = "") -> str:
    """Decimals without exponent in [lo, hi] (None: unbounded), JSON spelling."""
    if lo is not None and hi is not None and lo > hi:
        raise _NoInstance("minimum", pointer, "the bounds admit no number")
    parts = []
    if hi is None or hi >= 0:
        parts.append(_magnitude(max(lo, Decimal(0)) if lo is not None else Decimal(0), hi))
    if lo is None or lo < 0:
        least = -hi if hi is not None and hi < 0 else Decimal(0)
        parts.append("-" + _magnitude(least, None if lo is None else -lo))
    return "(?:" + "|".join(parts) + ")"


def _magnitude(lo: Decimal, hi: Decimal | None) -> str:
    """Unsigned decimals (no exponent, no leading zeros) whose value is in [lo, hi]:
    the whole part compared first, the fraction digit by digit where the whole
    part equals a bound's (:func:`_fraction`)."""
    a, fa = _split(lo)
    if hi is None:
        alts = [
            _nat_range(a, a) + _fraction(fa, None),
            _nat_range(a + 1, None) + _fraction("", None),
        ]
        return "(?:" + "|".join(alts) + ")"
    b, fb = _split(hi)
    if a == b:
        return _nat_range(a, a) + _fraction(fa, fb)
    alts = [_nat_range(a, a) + _fraction(fa, None)]
    if a + 1 <= b - 1:
        alts.append(_nat_range(a + 1, b - 1) + _fraction("", None))
    alts.append(_nat_range(b, b) + _fraction("", fb))
    return "(?:" + "|".join(alts) + ")"


def _split(v: Decimal) -> tuple[int, str]:
    """A non-negative decimal as its whole part and its fraction's digits (no
    trailing zeros: ``2.50`` is ``(2, "5")``)."""
    whole = int(v)
    digits = format(v - whole, "f").partition(".")[2].rstrip("0")
    return whole, digits


def _fraction(lo: str, hi: str | None) -> str:
    """The optional ``.digits`` of a decimal whose fraction ``0.d`` is in
    [``0.lo``, ``0.hi``] (digit strings without trailing zeros; ``hi`` None: below 1)."""
    empty, digits = _fraction_digits(lo, hi)
    if digits is None:
        return ""
    return f"(?:\\.{digits})?" if empty else f"\\.{digits}"


def _fraction_digits(lo: str, hi: str | None) -> tuple[bool, str | None]:
    """Digit strings ``d`` with ``0.lo <= 0.d <= 0.hi``: whether the empty one is
    (``lo`` is zero), and a regex of the non-empty ones (None: there are none)."""
    if hi == "":  # 0.d <= 0: zeros only
        return True, "0+"
    if not lo and hi is None:
        return True, "[0-9]+"
    first, last = (int(lo[0]) if lo else 0), (int(hi[0]) if hi is not None else 9)
    alts = []

    def then(c: int, low: str, high: str | None) -> str:
        empty, rest = _fraction_digits(low, high)
        if rest is None:
            return str(c)
        return f"{c}(?:{rest})?" if empty else f"{c}{rest}"

    if first == last:
        alts.append(then(first, lo[1:], None if hi is None else hi[1:]))
    else:
        alts.append(then(first, lo[1:], None))
        if first + 1 <= last - 1:
            alts.append(f"[{first + 1}-{last - 1}][0-9]*")
        alts.append(then(last, "", None if hi is None else hi[1:]))
    return not lo, "(?:" + "|".join(alts) + ")"


def _int_range(lo: int | None, hi: int | None) -> str:
    """A regex for the decimal integers in [lo, hi] (None: unbounded), JSON spelling."""
    parts = []
    if lo is None or lo < 0:
        # negatives: -n for n in [max(1, -hi), -lo]
        nlo = 1 if hi is None or hi >= 0 else -hi
        nhi = None if lo is None else -lo
        parts.append("-" + _nat_range(nlo, nhi))
    if hi is None or hi >= 0:
        parts.append(_nat_range(max(lo or 0, 0), hi))
    return "(?:" + "|".join(parts) + ")"


def _nat_range(lo: int, hi: int | None) -> str:
    """Naturals in [lo, hi] without leading zeros."""
    if hi is None:
        width = len(str(lo))
        tail = f"[1-9][0-9]{{{width},}}"
        return f"(?:{_nat_range(lo, 10**width - 1)}|{tail})"
    alts = []
    for width in range(len(str(lo)), len(str(hi)) + 1):
        a, b = max(lo, 10 ** (width - 1) if width > 1 else 0), min(hi, 10**width - 1)
        if a <= b:
            alts += _same_width(str(a), str(b))
    return "(?:" + "|".join(alts) + ")"


def _same_width(a: str, b: str) -> list[str]:
    """Regexes for the numbers between equal-width a <= b, digit by digit.

    A first digit's whole span (every tail from ``0...0`` to ``9...9``) is one
    class, so the result has at most two alternatives per digit: linear in the
    width, not exponential (``0...0`` to ``9...9`` is ``[0-9]{n}``).
    """
    if not a:
        return [""]
    n = len(a) - 1
    low, high = a[1:] == "0" * n, b[1:] == "9" * n
    if a[0] == b[0] and not (low and high):
        return [a[0] + r for r in _same_width(a[1:], b[1:])]
    out, first, last = [], int(a[0]), int(b[0])
    if not low:
        out += [a[0] + r for r in _same_width(a[1:], "9" * n)]
        first += 1
    tail = [] if high else [b[0] + r for r in _same_width("0" * n, b[1:])]
    last -= not high
    if first <= last:
        digits = str(first) if first == last else f"[{first}-{last}]"
        out.append(digits + "[0-9]" * n)
    return out + tail


def _pattern(pattern: Any, pointer: str) -> str:
    """A JSON string in ``pattern`` (search semantics): its characters are :data:`SAFE`."""
    from grid_core.dfa import build_union_dfa

    if not isinstance(pattern, str):
        raise SchemaError("pattern", pointer, "must be a string")
    anchored = []
    for alt in _alternatives(pattern):  # each top-level alternative anchored on its own
        head = "" if alt.startswith("^") else f"{SAFE}*"
        alt = alt[1:] if alt.startswith("^") else alt
        tail = "" if alt.endswith("$") and not alt.endswith("\\$") else f"{SAFE}*"
        alt = alt[:-1] if not tail else alt
        anchored.append(f"{head}(?:{_rewrite(alt)}){tail}")
    body = "|".join(anchored)
    try:
        dfa = build_union_dfa([("P", f"(?:{body})X")])  # X: the automaton must read bytes
    except GrammarError as e:
        raise SchemaError("pattern", pointer, str(e)) from None
    safe = {ord(c) for c in " !" + "".join(chr(x) for x in range(0x23, 0x7F) if x != 0x5C)}
    for s in range(len(dfa.accept)):
        for byte in range(256):
            if dfa.trans[s * 256 + byte] != -1 and byte not in safe and byte != ord("X"):
                raise SchemaError(
                    "pattern", pointer, f"matches byte {byte:#04x}, which GRID cannot spell exactly"
                )
    return f'"(?:{body})"'


def _alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of a regex, a group that is a whole alternative
    opened (``(^a$)|b`` is ``^a$`` or ``b``), so that each can carry its anchors."""
    parts, depth, start, i, opened, first = [], 0, 0, 0, 0, -1
    spans: list[tuple[int, int]] = []  # the top-level groups: (open, close)
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if first >= 0:  # in a class; a ``]`` first in it is a member
            if c == "]" and i != first:
                first = -1
        elif c == "[":
            first = i + 2 if pattern[i + 1 : i + 2] == "^" else i + 1
        elif c == "(":
            if depth == 0:
                opened = i
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                spans.append((opened, i))
        elif c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    parts.append(pattern[start:])
    if len(parts) > 1:
        return [a for p in parts for a in _alternatives(p)]
    if spans == [(0, len(pattern) - 1)]:  # one group, the whole pattern
        inner = pattern[1:-1]
        if inner.startswith("?:"):
            inner = inner[2:]
        elif inner.startswith("?"):  # a lookaround or a named group: left as it is
            return [pattern]
        return _alternatives(inner)
    return [pattern]


def _included(a: str, b: str, pointer: str) -> str:
    """Whichever of two string regexes (a format's and a pattern's) is included
    in the other, exactly their intersection; refused when neither is."""
    from grid_core.dfa import build_union_dfa

    dfa = build_union_dfa([("A", a), ("B", b)])
    if all(acc != 1 for acc in dfa.accept):  # no string that A accepts and B does not
        return a
    if all(acc != 2 for acc in dfa.accept):
        return b
    raise SchemaError(
        "format", _ptr(pointer, "format"), "beside a 'pattern' it neither implies nor is implied by"
    )


def _lengths_implied(regex: str, lo: Any, hi: Any, pointer: str) -> None:
    """Check that every string of ``regex`` (a quoted JSON string of ASCII
    characters: a pattern's or a format's) already has between ``lo`` and ``hi``
    characters, so the bounds need no spelling; else refuse them."""
    from grid_core.dfa import DEAD, build_union_dfa

    dfa = build_union_dfa([("S", regex)])
    succ = [
        {t for t in dfa.trans[q * 256 : q * 256 + 256] if t != DEAD} for q in range(dfa.n_states)
    ]
    shortest: dict[int, int] = {0: 0}
    frontier = [0]
    while frontier:  # breadth first: the first visit is the shortest
        nxt = []
        for q in frontier:
            for t in succ[q] - shortest.keys():
                shortest[t] = shortest[q] + 1
                nxt.append(t)
        frontier = nxt
    least = min(d for q, d in shortest.items() if dfa.accept[q]) - 2
    most = _longest(succ, [bool(a) for a in dfa.accept])
    most = None if most is None else most - 2
    if (isinstance(lo, int) and least < lo) or (
        hi is not None and (most is None or not isinstance(hi, int) or most > hi)
    ):
        span = f"{least}..{'unbounded' if most is None else most}"
        raise SchemaError(
            "minLength" if isinstance(lo, int) and least < lo else "maxLength",
            pointer,
            f"length bounds beside a pattern or format whose strings have {span} characters",
        )


def _longest(succ: list[set[int]], accept: list[bool]) -> int | None:
    """The longest path from state 0 to an accepting state; None if unbounded (every
    state of a trimmed DFA reaches acceptance, so any cycle makes it so)."""
    memo: dict[int, int | None] = {}
    on_path: set[int] = set()

    def visit(q: int) -> int | None:
        if q in on_path:
            return None
        if q not in memo:
            on_path.add(q)
            best: int | None = 0 if accept[q] else -1
            for t in succ[q]:
                below = visit(t)
                if below is None:
                    best = None
                    break
                if below >= 0 and best is not None:
                    best = max(best, below + 1)
            on_path.discard(q)
            memo[q] = best
        return memo[q]

    return visit(0)


def _rewrite(body: str) -> str:
    """``.``, ``\\S`` and negated classes narrowed to :data:`SAFE` characters."""
    return _narrowed(
        body, SAFE, '[^\\x00-\\x1f"\\\\\\x7f-\\xff', {"\\S": r"[!#-\[\]-~]", "\\s": " "}
    )


def _narrowed(body: str, dot: str, negated: str, escapes: Mapping[str, str]) -> str:
    """``body`` (a pattern) with ``.`` written ``dot``, each negated class opened with
    ``negated`` (``[^`` and the characters it also excludes) and each escape outside a
    class that ``escapes`` names written as its value."""
    out, i, in_class = [], 0, False
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            pair = body[i : i + 2]
            out.append(escapes.get(pair, pair) if not in_class else pair)
            i += 2
            continue
        if in_class:
            if c == "]" and body[i - 1] not in "[^":
                in_class = False
            out.append(c)
        elif c == "[":
            in_class = True
            if body[i + 1 : i + 2] == "^":
                out.append(negated)
                i += 2
                continue
            out.append(c)
        elif c == ".":
            out.append(dot)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def schema_grammar(schema: Any, *, whitespace: int = 0, strict: bool = False) -> GrammarText:
    """The lark grammar of ``schema`` (a parsed JSON Schema); see the module header.

    Raises :class:`SchemaError` naming the keyword and JSON pointer it cannot honour.
    """
    if not isinstance(whitespace, int) or whitespace < 0:
        raise ValueError(f"whitespace must be a non-negative int, not {whitespace!r}")
    schema = _checked(schema)
    try:
        c = _Compiler(schema, whitespace, strict)
        return c.b.text(c.b.wrap(c.value(schema, ""), VALUE))
    except RecursionError:
        raise SchemaError("", "", "the schema nests too deeply to compile") from None


def _is_json(value: Any) -> bool:
    """No float in ``value`` is NaN or infinite (JSON has neither)."""
    todo = [value]
    while todo:
        x = todo.pop()
        if isinstance(x, float) and not math.isfinite(x):
            return False
        if isinstance(x, dict):
            todo.extend(x.values())
        elif isinstance(x, list):
            todo.extend(x)
    return True


_COUNTS = (
    "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
    "minContains", "maxContains",
)  # fmt: skip
_NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_SCHEMA_ONE = (
    "items", "additionalItems", "additionalProperties", "contains", "not", "if", "then",
    "else", "propertyNames", "unevaluatedItems", "unevaluatedProperties",
)  # fmt: skip


def _checked(schema: Any) -> Any:
    """``schema`` with its keywords' values checked before anything is built (a copy:
    an integral float count, valid since 2020-12, is made an int): :func:`_check_tree`
    from the root. A subschema only a ``$ref`` reaches (under an unknown keyword) is
    checked when the reference is resolved."""
    schema = copy.deepcopy(schema)
    _check_tree(schema, "", refs=_has_ref(schema))
    return schema


def _subschemas(node: dict[str, Any], pointer: str) -> Iterator[tuple[Any, str]]:
    """The subschemas of one schema object, by the keywords whose values are schemas
    (an unknown keyword's value is data, an annotation: not walked)."""
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            yield from ((v, _ptr(pointer, key, k)) for k, v in value.items())
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            yield from ((v, _ptr(pointer, key, i)) for i, v in enumerate(value))
        elif key in _SCHEMA_ONE:
            yield value, _ptr(pointer, key)
        elif key == "dependencies" and isinstance(value, dict):
            yield from ((v, _ptr(pointer, key, k)) for k, v in value.items() if isinstance(v, dict))


def _has_ref(schema: Any) -> bool:
    """Some subschema of ``schema`` has a ``$ref``."""
    todo = [schema]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            if "$ref" in node:
                return True
            todo.extend(v for v, _ in _subschemas(node, ""))
    return False


def _check_tree(root: Any, at: str, *, refs: bool) -> None:
    """Check every schema object of ``root`` (at JSON pointer ``at``; the whole
    schema's root when ``at`` is empty), refused with a :class:`SchemaError` naming the
    keyword: a count or bound of the wrong type (a boolean is no number), a number
    that is not finite, a ``type`` that is not a type name or a non-empty list of
    them, a ``required`` that is not a list of names, ``NaN`` or an infinity in
    ``enum`` or ``const``, a ``$ref`` that is not a JSON pointer (``#/...``), an
    anchor, and, where the schema has a ``$ref`` (``refs``), an ``$id`` below the
    root or with a fragment (each changes what a ``$ref`` names, which GRID does not
    follow). Integral float counts become ints, in place. Iterative: any depth costs
    no stack."""
    todo: list[tuple[Any, str]] = [(root, at)]
    while todo:
        node, pointer = todo.pop()
        if not isinstance(node, dict):
            continue

        def bad(key: str, reason: str) -> SchemaError:
            return SchemaError(key, _ptr(pointer, key), reason)  # noqa: B023

        for key in ("$anchor", "$dynamicAnchor"):
            if key in node:
                raise bad(key, "anchors are not supported: refer with a JSON pointer (#/...)")
        if "$id" in node and refs:
            ident = node["$id"]
            if pointer or not isinstance(ident, str) or "#" in ident.rstrip("#"):
                raise bad("$id", "an $id below the root, or one with a fragment, changes what "
                          "a $ref names, which GRID does not follow")  # fmt: skip
        ref = node.get("$ref")
        if ref is not None and not (isinstance(ref, str) and (ref == "#" or ref.startswith("#/"))):
            raise bad("$ref", f"only JSON-pointer references (#/...) are supported: {ref!r}")
        for key in _COUNTS:
            value = node.get(key)
            if isinstance(value, float) and value.is_integer():
                node[key] = value = int(value)
            if key in node and (type(value) is not int or value < 0):
                raise bad(key, f"must be a non-negative integer, not {value!r}")
        for key in _NUMBERS:
            value = node.get(key)
            if key in node and not (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and math.isfinite(value)
            ):
                raise bad(key, f"must be a finite number, not {value!r}")
        if "type" in node:
            kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
            if not kinds or not all(isinstance(k, str) and k in _TYPES for k in kinds):
                raise bad("type", f"must be one of {', '.join(_TYPES)} or a non-empty list of "
                          f"them, not {node['type']!r}")  # fmt: skip
        required = node.get("required")
        if required is not None and not (
            isinstance(required, list) and all(isinstance(r, str) for r in required)
        ):
            raise bad("required", f"must be a list of property names, not {required!r}")
        for key in ("enum", "const"):
            if key in node and not _is_json(node[key]):
                raise bad(key, "holds a value JSON has not (NaN or an infinity)")
        todo.extend(_subschemas(node, pointer))


def json_object_grammar(*, whitespace: int = 0) -> GrammarText:
    """Any JSON object (vLLM's ``json_object``)."""
    return schema_grammar({"type": "object", "additionalProperties": True}, whitespace=whitespace)


def regex_grammar(pattern: str) -> str:
    """The ASCII texts ``pattern`` matches in full (Python ``re`` syntax, no anchors): a
    regex request's language (vLLM's ``regex``), a text regex served over bytes.

    ``.``, ``\\S``, ``\\W``, ``\\D`` and negated classes are read as ASCII
    characters (a sound narrowing: read over bytes they matched any byte, so an
    output could be a byte string that is no UTF-8 text, and one "character" a
    byte of one). A pattern that still matches a byte above 0x7F (a non-ASCII
    character, ``\\xe9``, a class such as ``[\\S]``) is a
    :class:`~grid_core.errors.PatternError`: a non-ASCII character is several
    bytes, which a byte pattern cannot count as one. The pattern is compiled
    here, so any construct it cannot have (an anchor, a lookaround) is refused
    by this call too.
    """
    from grid_core.dfa import build_union_dfa
    from grid_core.errors import PatternError

    compile_pattern("REGEX", pattern)
    ascii_pattern = _ascii_text(pattern)
    dfa = build_union_dfa([("REGEX", ascii_pattern)])
    for s in range(len(dfa.accept)):
        for byte in range(0x80, 0x100):
            if dfa.trans[s * 256 + byte] != -1:
                raise PatternError(
                    "REGEX",
                    pattern,
                    f"matches byte {byte:#04x}: a regex request is served over ASCII text "
                    "(a non-ASCII character is several bytes, which a byte pattern cannot "
                    "count as one character)",
                )
    return f"start: T0\nT0: /{lark_regex(ascii_pattern)}/\n"


def _ascii_text(body: str) -> str:
    """``.``, ``\\S``, ``\\W``, ``\\D`` and negated classes of ``body`` narrowed to
    ASCII characters (:func:`regex_grammar`)."""
    wide = {
        # not \x1c-\x1f either: Unicode's \s, a text regex's, has them
        "\\S": r"[\x00-\x08\x0e-\x1b!-\x7f]",
        "\\W": r"[^\w\x80-\xff]",
        "\\D": r"[^\d\x80-\xff]",
    }
    return _narrowed(body, r"[\x00-\x09\x0b-\x7f]", "[^\\x80-\\xff", wide)


def choice_grammar(choices: Sequence[str]) -> GrammarText:
    """Exactly one of ``choices`` (UTF-8), as written."""
    if not choices or not all(isinstance(c, str) and c for c in choices):
        raise GrammarError(f"a choice request needs non-empty strings, not {choices!r}")
    b = _Builder(0)
    return b.text(b.rule([[b.literal(c.encode())] for c in dict.fromkeys(choices)]))


_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _read_back(leaf: str) -> str:
    """The pattern lark reads ``leaf`` (a piece of a regex) back to from its spelling."""
    return read_literal(f"/{lark_regex(leaf)}/")


def _quoted(contents: rx.Written) -> rx.Written:
    """A JSON string of ``contents``: ``"contents"``."""
    return rx.seq(rx.literal('"'), contents, rx.literal('"'))


def _not_one_of(names: Sequence[str]) -> rx.Written:
    """JSON string contents that decode to none of ``names``, as a regex written
    with its pattern program (:class:`~grid_core.regex_bytes.Written`: the text
    of a few hundred names runs to thousands of characters, which ``re`` would
    parse back one at a time).

    The contents are written without ``\\u`` and ``\\/`` escapes, so every
    string has one spelling. A trie of the names, character by character: at
    each node the text may end (unless a name ends there), follow a child (in
    its one spelling), or leave the trie with any other character and go on
    freely. A non-ASCII child leaves only through ASCII characters and escapes
    (a sound narrowing: a regex cannot subtract one UTF-8 sequence cheaply).
    """
    trie: dict[str, Any] = {}
    for n in names:
        node = trie
        for ch in n:
            node = node.setdefault(ch, {})
        node[""] = {}
    escapes = [rx.literal(e) for e in _SHORT_ESCAPES.values()]
    free = rx.star(rx.alt(rx.parsed(SAFE), *escapes, rx.parsed(_UTF8)))

    spellings: dict[str, rx.Written] = {}

    def spelled(k: str) -> rx.Written:
        found = spellings.get(k)
        if found is None:
            json_spelling = json.dumps(k, ensure_ascii=False)[1:-1]
            found = spellings[k] = rx.literal(json_spelling.encode().decode("latin-1"))
        return found

    def reaching(node: dict[str, Any], keep: Callable[[dict[str, Any]], bool]) -> rx.Written | None:
        """The paths from ``node`` to the nodes ``keep`` holds for (None: none)."""
        alts = [rx.seq()] if keep(node) else []
        for k, child in node.items():
            if k and (tail := reaching(child, keep)) is not None:
                alts.append(rx.seq(spelled(k), tail))
        return rx.alt(*alts) if alts else None

    def escaped_kid(node: dict[str, Any]) -> bool:
        return any(k in _SHORT_ESCAPES for k in node if k)

    def exits(node: dict[str, Any]) -> rx.Written:
        """A path in the trie from ``node``, then one character no child continues:
        the exits that depend on the node (a printable ASCII character, and an
        escape where a child is an escaped character)."""
        kids = [k for k in node if k]
        safe_kids = "".join(k for k in kids if " " <= k <= "~")
        other = rx.chars(
            _SAFE_BYTES & ~byteset(map(ord, safe_kids)),
            f'[^\\x00-\\x1f"\\\\\\x7f-\\xff{"".join(map(re.escape, safe_kids))}]',
        )
        alts = [other]
        if escaped_kid(node):
            alts += [rx.literal(e) for c, e in _SHORT_ESCAPES.items() if c not in kids]
        alts += [rx.seq(spelled(k), exits(node[k])) for k in kids]
        return rx.alt(*alts)

    # The exits every node shares are written once, after the paths that reach
    # the nodes taking them: any escape (where no child is an escaped
    # character) and any multi-byte character (where every child is ASCII).
    leave = [exits(trie)]
    if (path := reaching(trie, lambda node: not escaped_kid(node))) is not None:
        leave.append(rx.seq(path, rx.alt(*escapes)))
    if (path := reaching(trie, lambda node: all(k < "\x80" for k in node if k))) is not None:
        leave.append(rx.seq(path, rx.alt(rx.parsed(_UTF8))))
    leaving = rx.alt(*leave)

    left = reaching(trie, lambda node: "" not in node)  # a prefix of names, not a name
    return rx.seq(leaving, free) if left is None else rx.alt(left, rx.seq(leaving, free))
