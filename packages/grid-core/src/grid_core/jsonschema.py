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
- ``oneOf`` object alternatives are told apart by required names
  (:meth:`_Compiler.told_apart`);
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
(the formats in :data:`FORMATS`), ``minimum``/``maximum`` (integers: any bound,
exclusive ones too; numbers: whole inclusive bounds), ``$ref`` to ``#...``
(``$defs``, ``definitions``, recursion), ``anyOf``, ``oneOf`` whose alternatives
have disjoint JSON types or are objects told apart by required names,
``patternProperties`` with disjoint patterns that match no declared name,
``minProperties``/``maxProperties`` where no counting is needed
(:meth:`_Compiler.member_counts`), ``allOf`` and the siblings of
``anyOf``/``oneOf`` merged into one schema where the merge is exact
(:meth:`_Compiler.merge`).
Annotations (``title``, ``description``, ``default``, ...) and keywords JSON
Schema does not define are ignored, as a validator ignores them. A grammar that
is not LALR(1) is refused by :func:`grid_core.compile.compile_grammar`
(:class:`~grid_core.errors.LALRConflictError`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from grid_core.errors import GrammarError
from grid_core.grammar import GrammarText, lark_literal, lark_regex
from grid_core.regex_bytes import compile_pattern

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


# -- byte-level pieces (patterns over the latin-1 view of UTF-8) ---------------

SAFE = r"[ !#-\[\]-~]"
"""Printable ASCII but ``"`` and ``\\``: a character that is its own JSON spelling."""
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
        self.ws = whitespace
        self.counter = 0
        self._wrapped: dict[tuple[str, str], str] = {}

    def new(self, prefix: str = "n") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def rule(
        self, alternatives: list[list[str]], name: str | None = None, alias: str | None = None
    ) -> str:
        name = name or self.new()
        self.rules[name] = alternatives
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

    def regex(self, pattern: str) -> str:
        return self.token(f"/{lark_regex(pattern)}/")

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
        return GrammarText("\n".join(lines) + "\n", terminals, rules)


class _Compiler:
    def __init__(self, root: Any, whitespace: int, strict: bool) -> None:
        self.root = root
        self.b = _Builder(whitespace)
        self.strict = strict
        self.refs: dict[str, str] = {}
        self._any: str | None = None

    # -- dispatch ---------------------------------------------------------------

    def value(self, schema: Any, pointer: str) -> str:
        """The symbol whose language is (a sound narrowing of) ``schema``'s instances."""
        if schema is True or schema == {}:
            return self.any_value()
        if schema is False:
            raise SchemaError("false", pointer, "the schema admits no instance")
        if not isinstance(schema, dict):
            raise SchemaError("schema", pointer, f"not a schema: {schema!r}")
        for key in schema:
            if key in _KNOWN and key not in _SUPPORTED:
                raise SchemaError(key, _ptr(pointer, key), "not supported by GRID")
        if "$ref" in schema:
            self.only(schema, pointer, {"$ref"})
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
                    parts = [
                        self.merge(rest, p, _ptr(pointer, key, i)) for i, p in enumerate(parts)
                    ]
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
        return target

    def merge(self, a: Any, b: Any, pointer: str, depth: int = 0) -> dict[str, Any]:
        """One schema whose instances are those of both ``a`` and ``b`` (exactly), or an error.

        Keys of one side are kept; on both sides they must be equal, except
        ``required`` (union), ``type`` (intersection) and ``properties`` (merged
        by name, a name on both sides merged recursively). A side that closes
        its object (``additionalProperties`` not true) must already name every
        property of the result.
        """
        if depth > 8:
            raise SchemaError("allOf", pointer, "references nest too deep to merge")
        sides = []
        for x in (a, b):
            if x is True:
                x = {}
            if not isinstance(x, dict):
                raise SchemaError("allOf", pointer, f"cannot merge {x!r}")
            if "$ref" in x:
                extra = {k: v for k, v in x.items() if k != "$ref"}
                x = self.merge(extra, self.resolve(x["$ref"], pointer), pointer, depth + 1)
            for k in ("allOf", "anyOf", "oneOf"):
                if k in x:
                    raise SchemaError(k, pointer, "nested inside a merged schema")
            sides.append(x)
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
                    raise SchemaError("type", pointer, "merged schemas share no type")
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
        if ref not in self.refs:
            target = self.resolve(ref, pointer)
            name = self.b.new("r")
            self.refs[ref] = name
            self.b.rule([[self.value(target, ref)]], name)
        return self.refs[ref]

    def union(self, key: str, parts: Any, pointer: str) -> str:
        if not isinstance(parts, list) or not parts:
            raise SchemaError(key, pointer, "must be a non-empty list")
        if key == "oneOf":
            kinds = [self.kinds(p, _ptr(pointer, i), set()) for i, p in enumerate(parts)]
            objects = [i for i, k in enumerate(kinds) if "object" in k]
            if len(objects) > 1:
                told = self.told_apart([parts[i] for i in objects], pointer)
                for i, part in zip(objects, told, strict=True):
                    parts[i], kinds[i] = part, set()  # disjoint among themselves
                kinds[objects[0]] = {"object"}
            seen: set[str] = set()
            for i, k in enumerate(kinds):
                if k & seen:
                    raise SchemaError(key, _ptr(pointer, i), "alternatives share a JSON type")
                seen |= k
        return self.b.rule([[self.value(p, _ptr(pointer, i))] for i, p in enumerate(parts)])

    def told_apart(self, parts: list[Any], pointer: str) -> list[dict[str, Any]]:
        """``oneOf`` object alternatives narrowed so that no instance satisfies two.

        Each alternative becomes an object schema (other types left out), and for
        every other alternative j it may not write one name j requires and it does
        not (``_FORBIDDEN``: left out of its properties and extra names). An
        instance of the narrowed i lacks that name, so it is no instance of j: the
        alternatives are disjoint and ``oneOf`` is their union. Refused when some
        alternative requires every name another requires, when an alternative is
        no plain object schema, or under ``patternProperties``."""
        objects = []
        for i, p in enumerate(parts):
            seen = set()
            while isinstance(p, dict) and list(p) == ["$ref"] and p["$ref"] not in seen:
                seen.add(p["$ref"])
                p = self.resolve(p["$ref"], _ptr(pointer, i))
            if p is True or p == {}:
                p = {}
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
                if j != i:
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
            raise SchemaError(key, _ptr(pointer, key), "no value has the schema's type")
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
        if t == "number" and not bounds:
            return self.b.regex(NUMBER)
        if t == "number":
            for key in ("exclusiveMinimum", "exclusiveMaximum"):
                if key in bounds and bounds[key] is not False:
                    raise SchemaError(key, _ptr(pointer, key), "exclusive bounds on a number")
            lo, hi = bounds.get("minimum"), bounds.get("maximum")
            for key, v in (("minimum", lo), ("maximum", hi)):
                if v is not None and not _is_int(v):
                    raise SchemaError(key, _ptr(pointer, key), "a bound on a number must be whole")
            return self.b.regex(_decimal_range(_whole(lo), _whole(hi)))
        lo, hi = _int_bounds(bounds, pointer)
        whole = INT if lo is None and hi is None else _int_range(lo, hi)
        return self.b.regex(whole + r"(?:\.0+)?")  # 1.0 is an integer too

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
        item = self.b.wrap(self.value(items, _ptr(pointer, "items")), VALUE)
        comma = self.b.punct(",")
        tail = self.b.new()
        if hi is None:  # tail_k: k items written; from max(lo, 1) on, a loop
            loop = self.b.rule([[comma, item, tail], []], tail)
        else:
            loop = self.b.rule([[]], tail)
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
            value = self.b.wrap(self.value(sub, _ptr(pointer, "properties", n)), VALUE)
            key = self.b.wrap(self.b.literal(_compact(n)), KEY)
            members.append((self.b.rule([[key, colon, value]]), n in required))
        comma = self.b.punct(",")
        # Extra members (after the declared ones) are a loop of the extra member
        # kinds: additionalProperties, or one per patternProperties pattern.
        kinds = []
        if extra not in (None, False):
            key = self.b.wrap(self.b.regex(f'"{_not_one_of(names + forbidden)}"'), KEY)
            value = self.b.wrap(self.value(extra, _ptr(pointer, "additionalProperties")), VALUE)
            kinds.append([key, colon, value])
        for p, key_regex, sub_pointer in keyed:
            if any(compile_pattern("K", key_regex).fullmatch(_compact(n)) for n in names):
                # Its members could repeat the declared name: refused, not merged.
                raise SchemaError(
                    "patternProperties", sub_pointer, "matches a declared property's name"
                )
            key = self.b.wrap(self.b.regex(key_regex), KEY)
            value = self.b.wrap(self.value(patterns[p], sub_pointer), VALUE)
            kinds.append([key, colon, value])
        # rest: what follows the declared members (the extra members' loop);
        # start: the extras when no declared member is written (None: there are none).
        rest = self.b.rule([[]])
        start: str | None = None
        if kinds:
            member = self.b.rule(kinds)
            loop = self.b.new()
            self.b.rule([[comma, member, loop], []], loop)
            rest = self.b.rule([[loop]])
            start = self.b.rule([[member, loop]])
        if len(members) <= ANY_ORDER:
            first = self.any_order(members, comma, rest, start)
        else:
            first = self.in_order(members, comma, rest, start)
        n_required = sum(r for _, r in members)
        most = len(members) if not kinds else None
        some, none = self.member_counts(schema, pointer, n_required, most)
        alts = []
        if first is not None and some:
            alts.append([self.b.punct("{"), first, self.b.punct("}")])
        if none:
            alts.append([self.b.empty("{}")])
        if not alts:
            raise SchemaError("properties", pointer, "the object can have no members")
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
        self, members: list[tuple[str, bool]], comma: str, rest: str, start: str | None
    ) -> str | None:
        """The members of a non-empty object in any order (each at most once, every
        required one written), then ``rest``: one rule per set of members written
        (2^n rules, so only for at most :data:`ANY_ORDER` members). The next key
        names the member, so the choice is LALR(1)."""
        required = frozenset(i for i, (_, req) in enumerate(members) if req)
        after: dict[frozenset[int], str] = {}

        def after_set(written: frozenset[int]) -> str:
            if written not in after:
                alts = [
                    [comma, m, after_set(written | {i})]
                    for i, (m, _) in enumerate(members)
                    if i not in written
                ]
                if required <= written:
                    alts.append([rest])
                after[written] = self.b.rule(alts)
            return after[written]

        alts = [[m, after_set(frozenset({i}))] for i, (m, _) in enumerate(members)]
        if not required and start is not None:
            alts.append([start])
        return self.b.rule(alts) if alts else None

    def member_counts(
        self, schema: dict[str, Any], pointer: str, n_required: int, most: int | None
    ) -> tuple[bool, bool]:
        """Check ``minProperties``/``maxProperties`` against an object that writes at
        least ``n_required`` members and at most ``most`` (None: unbounded), each
        non-empty alternative writing at least one; whether objects with members
        and whether ``{}`` stay admitted.

        Exact cases only: a lower bound of 1 drops ``{}``, an upper bound of 0
        keeps only ``{}``, and a bound the object's shape already satisfies is no
        constraint; any other bound needs counting and is refused.
        """
        lo, hi = schema.get("minProperties", 0), schema.get("maxProperties")
        if not isinstance(lo, int) or lo < 0:
            raise SchemaError("minProperties", _ptr(pointer, "minProperties"), "must be 0 or more")
        if hi is not None and (not isinstance(hi, int) or hi < lo):
            raise SchemaError(
                "maxProperties", _ptr(pointer, "maxProperties"), "must be at least minProperties"
            )
        if lo > max(n_required, 1):
            raise SchemaError(
                "minProperties",
                _ptr(pointer, "minProperties"),
                f"{lo} members, more than the {n_required} required (GRID does not count members)",
            )
        if hi is not None and hi != 0 and (most is None or most > hi):
            raise SchemaError(
                "maxProperties",
                _ptr(pointer, "maxProperties"),
                f"at most {hi} of {'unbounded' if most is None else most} members "
                "(GRID does not count members)",
            )
        if hi == 0 and n_required:
            raise SchemaError("maxProperties", _ptr(pointer, "maxProperties"), "below required")
        return hi != 0, n_required == 0 and lo == 0

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
            members = self.b.rule([[member]])
            self.b.rules[members].append([members, comma, member])
            items = self.b.rule([[written]])
            self.b.rules[items].append([items, comma, written])
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
}  # fmt: skip
_FORBIDDEN = "x-grid-forbidden"
"""Names an object alternative of ``oneOf`` may not write (:meth:`_Compiler.told_apart`)."""
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
        raise SchemaError("minimum", pointer, "the bounds admit no integer")
    return lo, hi


def _whole(v: Any) -> int | None:
    return None if v is None else int(v)


def _decimal_range(lo: int | None, hi: int | None) -> str:
    """Decimals without exponent in [lo, hi] (None: unbounded), JSON spelling."""
    if lo is not None and hi is not None and lo > hi:
        raise SchemaError("minimum", "", "the bounds admit no number")
    parts = []
    if hi is None or hi >= 0:
        parts.append(_magnitude(max(lo, 0) if lo is not None else 0, hi))
    if lo is None or lo < 0:
        parts.append(
            "-" + _magnitude(-hi if hi is not None and hi < 0 else 0, None if lo is None else -lo)
        )
    return "(?:" + "|".join(parts) + ")"


def _magnitude(lo: int, hi: int | None) -> str:
    """Unsigned decimals whose value is in [lo, hi] (whole bounds)."""
    frac = r"(?:\.[0-9]+)?"
    if hi is None:
        return f"{_nat_range(lo, None)}{frac}"
    alts = [rf"{_nat_range(hi, hi)}(?:\.0+)?"]
    if lo < hi:
        alts.append(f"{_nat_range(lo, hi - 1)}{frac}")
    return "(?:" + "|".join(alts) + ")"


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
    """Regexes for the numbers between equal-width a <= b, digit by digit."""
    if not a:
        return [""]
    if a[0] == b[0]:
        return [a[0] + r for r in _same_width(a[1:], b[1:])]
    n = len(a) - 1
    out = [a[0] + r for r in _same_width(a[1:], "9" * n)]
    if int(a[0]) + 1 <= int(b[0]) - 1:
        out.append(f"[{int(a[0]) + 1}-{int(b[0]) - 1}]" + "[0-9]" * n)
    out += [b[0] + r for r in _same_width("0" * n, b[1:])]
    return out


def _pattern(pattern: Any, pointer: str) -> str:
    """A JSON string in ``pattern`` (search semantics): its characters are :data:`SAFE`."""
    from grid_core.dfa import build_union_dfa

    if not isinstance(pattern, str):
        raise SchemaError("pattern", pointer, "must be a string")
    body = pattern
    head = "" if body.startswith("^") else f"{SAFE}*"
    body = body[1:] if body.startswith("^") else body
    tail = "" if body.endswith("$") and not body.endswith("\\$") else f"{SAFE}*"
    body = body[:-1] if not tail else body
    body = _rewrite(body)
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
    return f'"{head}(?:{body}){tail}"'


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
    out, i, in_class = [], 0, False
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            pair = body[i : i + 2]
            if not in_class and pair == "\\S":
                out.append(r"[!#-\[\]-~]")
            elif not in_class and pair == "\\s":
                out.append(" ")
            else:
                out.append(pair)
            i += 2
            continue
        if in_class:
            if c == "]" and body[i - 1] not in "[^":
                in_class = False
            out.append(c)
        elif c == "[":
            in_class = True
            if body[i + 1 : i + 2] == "^":
                out.append('[^\\x00-\\x1f"\\\\\\x7f-\\xff')
                i += 2
                continue
            out.append(c)
        elif c == ".":
            out.append(SAFE)
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
    c = _Compiler(schema, whitespace, strict)
    return c.b.text(c.b.wrap(c.value(schema, ""), VALUE))


def json_object_grammar(*, whitespace: int = 0) -> GrammarText:
    """Any JSON object (vLLM's ``json_object``)."""
    return schema_grammar({"type": "object", "additionalProperties": True}, whitespace=whitespace)


def regex_grammar(pattern: str) -> str:
    """Exactly the byte strings ``pattern`` matches in full (Python ``re`` syntax, no anchors).

    The pattern is compiled here, so a construct it cannot have (an anchor, a
    lookaround) is a :class:`~grid_core.errors.PatternError` from this call.
    """
    compile_pattern("REGEX", pattern)
    return f"start: T0\nT0: /{lark_regex(pattern)}/\n"


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


def _not_one_of(names: Sequence[str]) -> str:
    """JSON string contents that decode to none of ``names``, as a regex.

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
    escapes = "|".join(re.escape(e) for e in _SHORT_ESCAPES.values())
    free = f"(?:{SAFE}|{escapes}|{_UTF8})*"

    def spelled(k: str) -> str:
        return re.escape(json.dumps(k, ensure_ascii=False)[1:-1].encode().decode("latin-1"))

    def ends(node: dict[str, Any]) -> str | None:
        """The prefixes of names, from ``node`` on, that are not names (None: none)."""
        alts = [] if "" in node else [""]
        for k, child in node.items():
            if k and (tail := ends(child)) is not None:
                alts.append(spelled(k) + tail)
        return "(?:" + "|".join(alts) + ")" if alts else None

    def leaves(node: dict[str, Any]) -> str:
        """A path in the trie from ``node``, then one character no child continues."""
        kids = [k for k in node if k]
        safe_kids = "".join(re.escape(k) for k in kids if " " <= k <= "~")
        alts = [f'[^\\x00-\\x1f"\\\\\\x7f-\\xff{safe_kids}]']
        alts += [re.escape(e) for c, e in _SHORT_ESCAPES.items() if c not in kids]
        if all(k < "\x80" for k in kids):
            alts.append(_UTF8)
        alts += [spelled(k) + leaves(node[k]) for k in kids]
        return "(?:" + "|".join(alts) + ")"

    left = ends(trie)
    return f"(?:{left}|{leaves(trie)}{free})" if left is not None else f"{leaves(trie)}{free}"
