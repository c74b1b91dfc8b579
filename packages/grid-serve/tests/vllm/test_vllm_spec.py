"""Grammar specs and their engines (grid_serve.vllm.spec): no vLLM needed."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from grid_core.errors import GridError
from grid_core.vocab import Vocabulary
from grid_serve.vllm.spec import EngineCompiler, GrammarSpecError, GridSpec
from grid_sql.policy import EXAMPLE as EXAMPLE_POLICY
from grid_sql.policy import PolicyError, UnknownRoleError
from grid_sql.schema import SchemaError, example_schema


def test_parse_reads_every_field_and_defaults_the_policy() -> None:
    """Fails if a field is dropped or the policy default changes."""
    spec = GridSpec.parse('{"dialect": "sqlite", "role": "clerk", "schema": "example"}')
    assert spec == GridSpec("sqlite", "clerk", "example", "example")
    full = GridSpec.parse(
        json.dumps({"dialect": "postgres", "role": "r", "schema": "/s.json", "policy": "/p.toml"})
    )
    assert full == GridSpec("postgres", "r", "/s.json", "/p.toml")
    text = '{"dialect": "sqlite", "role": "a", "schema": "example", "events": true}'
    events = GridSpec.parse(text)
    assert events == GridSpec("sqlite", "a", "example", "example", events=True)


BAD_SPECS = {
    "not-json": ("SELECT 1", "", "not JSON"),
    "not-an-object": ('["sqlite"]', "", "expected a JSON object"),
    "unknown-key": (
        '{"dialect": "sqlite", "role": "a", "schema": "example", "db": "x"}',
        "db",
        "unknown key",
    ),
    "missing-role": ('{"dialect": "sqlite", "schema": "example"}', "role", "missing"),
    "empty-schema": (
        '{"dialect": "sqlite", "role": "a", "schema": " "}',
        "schema",
        "non-empty string",
    ),
    "number-role": (
        '{"dialect": "sqlite", "role": 3, "schema": "example"}',
        "role",
        "non-empty string",
    ),
    "events-not-a-bool": (
        '{"dialect": "sqlite", "role": "a", "schema": "example", "events": "yes"}',
        "events",
        "true or false",
    ),
    "a-key-twice": (  # Python's json kept the last: a first-key-wins proxy was bypassed
        '{"dialect": "sqlite", "role": "analyst", "schema": "example", "role": "admin"}',
        "",
        "the key 'role' is given twice",
    ),
    "unknown-dialect": (
        '{"dialect": "oracle", "role": "a", "schema": "example"}',
        "dialect",
        "known: ",
    ),
}


@pytest.mark.parametrize(("text", "field", "message"), BAD_SPECS.values(), ids=BAD_SPECS.keys())
def test_parse_rejects_malformed_specs_naming_the_field(
    text: str, field: str, message: str
) -> None:
    """Fails if a malformed spec parses, or its error names the wrong field."""
    with pytest.raises(GrammarSpecError) as e:
        GridSpec.parse(text)
    assert e.value.field == field
    assert message in str(e.value)
    assert str(e.value).startswith("GRID grammar spec")


def test_a_json_schema_with_a_key_twice_or_nan_is_refused() -> None:
    """A schema read with Python's json kept the last of two keys
    (``additionalProperties`` false then true compiled an open object) and read NaN."""
    from grid_serve.vllm.spec import request_grammar

    twice = '{"type": "object", "additionalProperties": false, "additionalProperties": true}'
    with pytest.raises(GrammarSpecError, match="given twice"):
        request_grammar("json", twice)
    with pytest.raises(GrammarSpecError, match="NaN is not JSON"):
        request_grammar("json", '{"enum": [NaN, 1]}')


def test_the_example_policy_is_the_example_schemas_only() -> None:
    """A spec naming a schema file and no policy took grid-sql's example policy for
    it: a schema with an ``employees`` table then got the example roles' grants."""
    with pytest.raises(GrammarSpecError, match="example policy is the example schema's") as e:
        GridSpec.parse('{"dialect": "sqlite", "role": "admin", "schema": "/srv/s.json"}')
    assert e.value.field == "policy"


def test_files_outside_the_served_artifacts_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``GRID_VLLM_ARTIFACTS`` set, a spec may name schema and policy files inside
    that directory only (symbolic links resolved), refused before anything is read;
    the example schema and policy stay available."""
    served = tmp_path / "served"
    served.mkdir()
    (tmp_path / "p.toml").write_text("")
    (served / "link.toml").symlink_to(tmp_path / "p.toml")
    monkeypatch.setenv("GRID_VLLM_ARTIFACTS", str(served))

    def spec(schema: str, policy: str) -> str:
        return json.dumps({"dialect": "sqlite", "role": "r", "schema": schema, "policy": policy})

    ok = GridSpec.parse(spec(str(served / "s.json"), str(served / "p.toml")))
    assert ok.policy == str(served / "p.toml")
    assert GridSpec.parse(spec("example", "example")).schema == "example"
    for schema, policy, field in (
        ("/etc/passwd", str(served / "p.toml"), "schema"),
        (str(served / "s.json"), str(served / ".." / "p.toml"), "policy"),
        (str(served / "s.json"), str(served / "link.toml"), "policy"),
    ):
        with pytest.raises(GrammarSpecError, match="is not inside GRID_VLLM_ARTIFACTS") as e:
            GridSpec.parse(spec(schema, policy))
        assert e.value.field == field


def test_one_engine_per_key_and_roles_share_trie_and_t2(vocab: Vocabulary) -> None:
    """Fails if equal specs build twice, or two roles do not share the trie and T2."""
    compiler = EngineCompiler(vocab)
    analyst = compiler.engine(GridSpec("sqlite", "analyst", "example"))
    again = compiler.engine(
        GridSpec.parse('{"dialect": "sqlite", "role": "analyst", "schema": "example"}')
    )
    clerk = compiler.engine(GridSpec("sqlite", "clerk", "example"))
    assert again is analyst and clerk is not analyst
    assert compiler.engines.builds == 2
    assert clerk.trie is analyst.trie and clerk.shared is analyst.shared is not None


def test_a_role_engine_is_the_generation_profile_its_policy_names(
    vocab: Vocabulary, tmp_path: Path, writes: Callable[[Any, bytes], bool]
) -> None:
    """Fails if the backend serves a role outside its policy's generation profile: the
    default (narrow) refuses a bare alias and a comment, ``generation = "full"`` admits
    them; both write ``AS T1``."""
    compiler = EngineCompiler(vocab)
    narrow = compiler.engine(GridSpec("sqlite", "analyst", "example"))
    policy = tmp_path / "full.policy.toml"
    policy.write_text(
        (resources.files("grid_sql.examples") / EXAMPLE_POLICY)
        .read_text()
        .replace("[roles.analyst]\n", '[roles.analyst]\ngeneration = "full"\n', 1)
    )
    full = compiler.engine(GridSpec("sqlite", "analyst", "example", str(policy)))
    for sql in (b"SELECT e.name FROM employees e;", b"SELECT name FROM employees -- x\n;"):
        assert writes(full, sql) and not writes(narrow, sql), sql
    good = b"SELECT T1.name FROM employees AS T1;"
    assert writes(narrow, good) and writes(full, good)


def test_concurrent_compiles_of_one_spec_build_once(vocab: Vocabulary) -> None:
    """Fails if compile is not single-flight: 8 threads released together ask for one spec."""
    compiler = EngineCompiler(vocab)
    spec = GridSpec("sqlite", "intern", "example")
    start = threading.Barrier(8)
    engines = []

    def compile_one() -> None:
        start.wait()
        engines.append(compiler.engine(spec))

    threads = [threading.Thread(target=compile_one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(engines) == 8 and all(e is engines[0] for e in engines)
    assert compiler.engines.builds == 1


def test_schema_and_policy_files(vocab: Vocabulary, tmp_path: Path) -> None:
    """A snapshot file and a policy file give the example's engine fingerprints; fails if a
    path is read differently from the built-in example."""
    from importlib import resources

    schema_path = tmp_path / "company.schema.json"
    example_schema().save(schema_path)
    policy_path = tmp_path / "company.policy.toml"
    text = resources.files("grid_sql.examples").joinpath(EXAMPLE_POLICY).read_text()
    policy_path.write_text(text)
    compiler = EngineCompiler(vocab)
    built_in = compiler.engine(GridSpec("sqlite", "clerk", "example"))
    from_files = compiler.engine(GridSpec("sqlite", "clerk", str(schema_path), str(policy_path)))
    assert from_files is built_in  # one key: same schema and policy fingerprints


def test_compile_errors_name_what_is_wrong(vocab: Vocabulary, tmp_path: Path) -> None:
    """Fails if an unknown role, a dialect mismatch, a missing file or a bad policy compiles."""
    compiler = EngineCompiler(vocab)
    with pytest.raises(UnknownRoleError, match="roles: admin, analyst, clerk, intern"):
        compiler.engine(GridSpec("sqlite", "nobody", "example"))
    with pytest.raises(GrammarSpecError, match="is a sqlite schema; the spec's dialect: postgres"):
        compiler.engine(GridSpec("postgres", "analyst", "example"))
    with pytest.raises(SchemaError):
        compiler.engine(GridSpec("sqlite", "analyst", str(tmp_path / "missing.json")))
    bad = tmp_path / "bad.policy.toml"
    bad.write_text('version = 1\n[roles.analyst]\nverbs = ["SELECT"]\ntables = ["payroll"]\n')
    with pytest.raises(PolicyError, match="payroll"):
        compiler.engine(GridSpec("sqlite", "analyst", "example", str(bad)))


@pytest.mark.parametrize(
    "module", ["grid_serve.vllm", "grid_serve.vllm.spec", "grid_serve.vllm.rows"]
)
def test_the_vllm_free_modules_import_neither_vllm_nor_torch(module: str) -> None:
    """Fails if the spec or row modules (or the package) start importing a framework."""
    import subprocess
    import sys

    code = f"import sys, {module}; print('vllm' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


STANDARD = {
    "json": (
        json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        b'{"n":12}',
        b'{"n":"x"}',
    ),
    "json_object": ("", b'{"a":[1,{}]}', b"[1]"),
    "regex": ("[0-9]{2}-[a-z]+", b"12-ab", b"123-ab"),
    "choice": (json.dumps(["yes", "no"]), b"no", b"nope"),
    "grammar": ('start: "a"+ "b"\n', b"aab", b"ba"),
}


@pytest.mark.parametrize("kind", sorted(STANDARD))
def test_standard_requests_compile_to_engines(vocab: Vocabulary, kind: str) -> None:
    """JSON, JSON_OBJECT, REGEX, CHOICE and a lark GRAMMAR: one engine per (kind, text),
    accepting what the request means. Fails if a kind is refused or misread."""
    text, good, bad = STANDARD[kind]
    compiler = EngineCompiler(vocab)
    engine = compiler.request_engine(kind, text)
    assert compiler.request_engine(kind, text) is engine
    lx = engine.lexer
    after = lx.advance(lx.initial, good)
    assert after is not None and lx.eos_allowed(after)
    after = lx.advance(lx.initial, bad)
    assert after is None or not lx.eos_allowed(after)


@pytest.mark.parametrize(
    ("kind", "text", "error"),
    [
        ("json", "{not json", "not a JSON Schema"),
        ("json", json.dumps({"type": "array", "uniqueItems": True}), "uniqueItems"),
        ("choice", '"yes"', "not a list"),
        ("regex", "^a", "anchor"),
        ("grammar", "start: a\na: a\n", "start"),
        ("structural_tag", "{}", "does not serve"),
    ],
)
def test_standard_requests_grid_cannot_serve_are_refused_by_name(
    vocab: Vocabulary, kind: str, text: str, error: str
) -> None:
    compiler = EngineCompiler(vocab)
    with pytest.raises(GridError, match=error):
        compiler.request_engine(kind, text)
