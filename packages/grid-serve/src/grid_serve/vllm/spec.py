"""GRID grammar specs for a serving engine, and the engines they compile to.

A *grammar spec* is the text a request passes as its structured-output grammar
(vLLM: ``StructuredOutputsParams(grammar=...)``): one JSON object naming what
to constrain the output to ::

    {"dialect": "sqlite", "role": "analyst", "schema": "example", "policy": "example"}

- ``dialect`` (required): a dialect of :func:`grid_sql.dialects.available_dialects`;
- ``role`` (required): a role of the policy;
- ``schema`` (required): ``"example"`` (grid-sql's example company schema) or
  the path of a schema snapshot file (``grid.schema/1`` JSON, written by
  :meth:`grid_sql.schema.SchemaSnapshot.save`); its dialect must be ``dialect``;
- ``policy`` (optional, default ``"example"``): ``"example"`` (grid-sql's
  example policy, for the example schema only, as ``grid ask``'s) or the path
  of a policy TOML file, checked against the schema;
- ``events`` (optional, default ``false``): ``true`` keeps the request's parse
  events (``grid_core.events``; how a server reads them: ``grid_serve.vllm.backend``).

Nothing else is accepted: an unknown key, a wrong type or an unknown dialect is
a :class:`GrammarSpecError` from :meth:`GridSpec.parse`, before anything is
read from disk.

**Trust.** A spec names the role whose language the output is held to: whoever
writes the spec chooses the privileges. A deployment builds the spec in its own
application from the caller's identity and never passes a caller's spec
through. With ``GRID_VLLM_ARTIFACTS`` (:data:`ARTIFACTS_ENV`) set to a
directory, the schema and policy paths a spec names must lie inside it (after
symbolic links), so a request cannot make the engine read any other file; the
example schema and policy stay available (grid-sql's own, read from the
package). Reading the schema and the policy and resolving the role happen
at compile time (:meth:`EngineCompiler.engine`) and raise grid-sql's own typed
errors (``SchemaError``, ``PolicyError``, ``UnknownRoleError``).

:class:`EngineCompiler` turns specs into :class:`~grid_core.guide.Engine`\\ s over
one vocabulary, the way :class:`grid_serve.text2sql.RoleEngines` does for one
schema: the role's projection (L2) and schema lexicon (L3) narrowed to the
generation profile the policy names for the role (``generation``, default
``narrow``: :mod:`grid_sql.generation`), the dialect's union DFA, one token trie
for every engine, one T2 cache per walk family. Builds
are single-flight (:class:`~grid_core.registry.GrammarRegistry`): the key is the
dialect, the role, the schema's fingerprint and the policy's, so requests that
name the same artifacts share one engine, and concurrent compiles of one key
build it once; a failed build is negatively cached for the registry's TTL.
Thread-safe: a serving engine compiles on a pool of threads.

The standard request types compile too (:func:`request_grammar`, then
:meth:`EngineCompiler.request_engine`, single-flight on the kind and the text):
``json`` (a JSON Schema, :func:`grid_core.jsonschema.schema_grammar`, compact),
``json_object``, ``regex``, ``choice`` (a JSON list of strings, as vLLM sends
it) and ``grammar`` (a lark grammar, :func:`grid_core.compile.compile_grammar`;
a ``grammar`` whose text is a JSON object is a GRID grammar spec, above). A
``json`` schema whose root has ``"x-grid-events": true`` (:data:`EVENTS_KEYWORD`,
removed before compiling) asks for the request's parse events
(:func:`events_requested`; docs/events.md). A request GRID cannot honour is
refused with a typed error naming the culprit
(``GrammarSpecError``, ``grid_core.jsonschema.SchemaError``,
``LALRConflictError``, ``PatternError``, ...).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grid_core import strict_json
from grid_core.cache import SharedCache
from grid_core.compile import compile_grammar
from grid_core.errors import ServingError
from grid_core.fingerprint import fingerprint
from grid_core.guide import Engine, family_of
from grid_core.jsonschema import (
    choice_grammar,
    json_object_grammar,
    regex_grammar,
    schema_grammar,
)
from grid_core.registry import GrammarRegistry
from grid_core.trie import TokenTrie, build_trie
from grid_core.vocab import Vocabulary
from grid_sql.dialects import available_dialects, get_dialect
from grid_sql.generation import generation_language
from grid_sql.lexicon import SchemaLexicon
from grid_sql.policy import PolicyBundle, example_policy
from grid_sql.projection import RoleProjection
from grid_sql.schema import SchemaSnapshot, example_schema

__all__ = [
    "EXAMPLE",
    "REQUEST_KINDS",
    "EngineCompiler",
    "GrammarSpecError",
    "GridSpec",
    "is_grid_spec",
    "request_grammar",
]

#: The request kinds :func:`request_grammar` compiles (vLLM's option names, lower case).
REQUEST_KINDS = ("json", "json_object", "regex", "choice", "grammar")

#: The spec value that names grid-sql's example schema or policy.
EXAMPLE = "example"

_REQUIRED = ("dialect", "role", "schema")
_KEYS = (*_REQUIRED, "policy", "events")
_SHAPE = '{"dialect": "sqlite", "role": "analyst", "schema": "example"}'


class GrammarSpecError(ServingError):
    """A grammar spec is malformed: ``field`` names the offending key ("" for the whole)."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        where = f" field {field!r}" if field else ""
        super().__init__(f"GRID grammar spec{where}: {reason}")


@dataclass(frozen=True)
class GridSpec:
    """A parsed grammar spec (see the module header)."""

    dialect: str
    role: str
    schema: str
    policy: str = EXAMPLE
    events: bool = False

    @classmethod
    def parse(cls, text: str) -> GridSpec:
        """Parse and check a spec's JSON text; raises :class:`GrammarSpecError`."""
        try:
            data: Any = strict_json.loads(text)
        except (TypeError, ValueError) as e:
            raise GrammarSpecError(
                "", f"not JSON ({e}); expected an object such as {_SHAPE}"
            ) from None
        if not isinstance(data, Mapping):
            raise GrammarSpecError("", f"expected a JSON object such as {_SHAPE}")
        unknown = sorted(set(data) - set(_KEYS))
        if unknown:
            raise GrammarSpecError(unknown[0], f"unknown key (known: {', '.join(_KEYS)})")
        for key in _REQUIRED:
            if key not in data:
                raise GrammarSpecError(key, "missing")
        events = data.get("events", False)
        if not isinstance(events, bool):
            raise GrammarSpecError("events", f"must be true or false, not {events!r}")
        for key, value in data.items():
            if key != "events" and (not isinstance(value, str) or not value.strip()):
                raise GrammarSpecError(key, f"must be a non-empty string, not {value!r}")
        known = available_dialects()
        if data["dialect"] not in known:
            raise GrammarSpecError(
                "dialect", f"unknown dialect {data['dialect']!r} (known: {', '.join(known)})"
            )
        policy = data.get("policy", EXAMPLE)
        if policy == EXAMPLE and data["schema"] != EXAMPLE:
            raise GrammarSpecError(
                "policy", "the example policy is the example schema's: name a policy file"
            )
        for key in ("schema", "policy"):
            if data.get(key, EXAMPLE) != EXAMPLE:
                _check_served(key, data[key])
        return cls(data["dialect"], data["role"], data["schema"], policy, events)

    def load_schema(self) -> SchemaSnapshot:
        """The schema snapshot the spec names, checked to be of the spec's dialect."""
        schema = example_schema() if self.schema == EXAMPLE else SchemaSnapshot.load(self.schema)
        if schema.dialect != self.dialect:
            raise GrammarSpecError(
                "schema",
                f"{schema.label} is a {schema.dialect} schema; the spec's dialect: {self.dialect}",
            )
        return schema

    def load_policy(self, schema: SchemaSnapshot) -> PolicyBundle:
        """The policy the spec names, validated against ``schema``."""
        if self.policy == EXAMPLE:
            return example_policy(schema)
        return PolicyBundle.load(Path(self.policy), schema)


ARTIFACTS_ENV = "GRID_VLLM_ARTIFACTS"
"""The environment variable naming the directory a spec's files must lie in."""


def _check_served(key: str, value: str) -> None:
    """Refuse a spec's file outside ``GRID_VLLM_ARTIFACTS`` when it is set."""
    root = os.environ.get(ARTIFACTS_ENV)
    if not root:
        return
    inside = Path(root).resolve()
    if not Path(value).resolve().is_relative_to(inside):
        raise GrammarSpecError(key, f"{value!r} is not inside {ARTIFACTS_ENV} ({inside})")


def is_grid_spec(text: str) -> bool:
    """A ``grammar`` request's text is a GRID grammar spec (a JSON object), not lark."""
    return text.lstrip().startswith("{")


EVENTS_KEYWORD = "x-grid-events"
"""The root keyword of a ``json`` request's schema that turns its parse events on."""


def _json_schema(text: str) -> Any:
    """A ``json`` request's schema, without :data:`EVENTS_KEYWORD`."""
    try:
        schema = strict_json.loads(text)
    except ValueError as e:
        raise GrammarSpecError("json", f"not a JSON Schema ({e})") from None
    if isinstance(schema, dict) and EVENTS_KEYWORD in schema:
        flag = schema[EVENTS_KEYWORD]
        if not isinstance(flag, bool):
            raise GrammarSpecError(EVENTS_KEYWORD, f"must be true or false, not {flag!r}")
        schema = {k: v for k, v in schema.items() if k != EVENTS_KEYWORD}
    return schema


def events_requested(kind: str, text: str) -> bool:
    """A standard request asks for parse events: a ``json`` schema with
    ``"x-grid-events": true`` at its root."""
    if kind != "json":
        return False
    try:
        schema = strict_json.loads(text)
    except ValueError:
        return False
    return isinstance(schema, dict) and schema.get(EVENTS_KEYWORD) is True


def request_grammar(kind: str, text: str) -> str:
    """The lark grammar of a standard request (module header); raises a ``GridError``.

    ``kind`` is one of :data:`REQUEST_KINDS`; ``text`` is what vLLM passes
    (``get_structured_output_key``): the schema's JSON, ``""``, the regex, the
    choices' JSON list, the grammar.
    """
    if kind == "json":
        return schema_grammar(_json_schema(text))
    if kind == "json_object":
        return json_object_grammar()
    if kind == "regex":
        return regex_grammar(text)
    if kind == "choice":
        try:
            choices = strict_json.loads(text)
        except ValueError as e:
            raise GrammarSpecError("choice", f"not a JSON list of strings ({e})") from None
        if not isinstance(choices, list):
            raise GrammarSpecError("choice", f"not a list of strings: {choices!r}")
        return choice_grammar(choices)
    if kind == "grammar":
        return text
    raise GrammarSpecError("", f"the GRID backend does not serve {kind!r} requests")


class EngineCompiler:
    """Engines of grammar specs over one vocabulary (see the module header)."""

    def __init__(self, vocab: Vocabulary, failure_ttl: float = 30.0) -> None:
        self.vocab = vocab
        self.engines: GrammarRegistry[Engine] = GrammarRegistry(failure_ttl)
        self._tries: GrammarRegistry[TokenTrie] = GrammarRegistry(failure_ttl)
        self._shared: dict[str, SharedCache] = {}
        self._lock = threading.Lock()

    @property
    def trie(self) -> TokenTrie:
        """The vocabulary's token trie, built once on first use."""
        return self._tries.get(self.vocab.fingerprint, lambda: build_trie(self.vocab))

    def engine(self, spec: GridSpec) -> Engine:
        """The engine of ``spec``: built once per (dialect, role, schema, policy)."""
        schema = spec.load_schema()
        policy = spec.load_policy(schema)
        key = fingerprint(
            ("grid.vllm.engine/1", spec.dialect, spec.role, schema.fingerprint, policy.fingerprint)
        )
        return self.engines.get(key, lambda: self._build(spec, schema, policy))

    def request_engine(self, kind: str, text: str) -> Engine:
        """The engine of a standard request: built once per (kind, text), single-flight."""
        key = fingerprint(("grid.vllm.request/1", kind, text))
        return self.engines.get(
            key, lambda: compile_grammar(request_grammar(kind, text), self.vocab, trie=self.trie)
        )

    def _build(self, spec: GridSpec, schema: SchemaSnapshot, policy: PolicyBundle) -> Engine:
        dialect = get_dialect(spec.dialect)
        grants = policy.grants(spec.role, schema)  # UnknownRoleError names the known roles
        lexicon = SchemaLexicon.build(dialect, schema, grants)
        role = policy.role(spec.role)
        projection = RoleProjection.compile(role, dialect, words=lexicon.words)
        grammar, words, dfa = generation_language(
            role.generation, projection.grammar, dialect, lexicon.words, spec.role
        )
        trie = self.trie
        family = family_of(grammar, dfa, trie)
        with self._lock:
            shared = self._shared.setdefault(family, SharedCache(family))
        return Engine(grammar, self.vocab, words, dfa=dfa, trie=trie, cache=shared)
