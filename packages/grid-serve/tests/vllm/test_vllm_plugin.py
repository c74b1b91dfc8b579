"""Registration of the ``grid`` backend through vLLM's plugin loader and its patches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "vllm.v1.structured_output", reason="vllm is not installed (`nox -s vllm` runs these tests)"
)

from conftest import ANALYST
from vllm.config import StructuredOutputsConfig, VllmConfig
from vllm.exceptions import VLLMValidationError
from vllm.sampling_params import SamplingParams, StructuredOutputsParams
from vllm_harness import request

from grid_serve.vllm import defer, plugin


def test_vllms_plugin_loader_finds_the_entry_point() -> None:
    """Fails if grid-serve's ``vllm.general_plugins`` entry point is missing or wrong."""
    from vllm.plugins import load_plugins_by_group

    assert load_plugins_by_group("vllm.general_plugins")["grid"] is plugin.register


def test_register_is_idempotent(registered: None) -> None:
    """Fails if a second registration wraps vLLM's methods twice."""
    from vllm.v1.structured_output import StructuredOutputManager

    plugin.register()
    for owner, name in (
        (SamplingParams, "_validate_structured_outputs"),
        (StructuredOutputManager, "grammar_init"),
    ):
        original = getattr(owner, name).__grid_original__
        assert not hasattr(original, "__grid_original__")


def test_grid_is_a_backend_name_of_the_configs(config: Any, model_dir: Path) -> None:
    """``grid`` validates where vLLM's own names do: the config class, the engine config
    from a dict, and the CLI's --structured-outputs-config; fails if any path rejects it."""
    assert StructuredOutputsConfig(backend="grid").backend == "grid"
    with pytest.raises(ValueError, match="grid"):
        StructuredOutputsConfig(backend="gird")
    engine = VllmConfig(
        model_config=config.model_config, structured_outputs_config={"backend": "grid"}
    )
    assert engine.structured_outputs_config.backend == "grid"
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
    args = parser.parse_args(
        ["--model", str(model_dir), "--structured-outputs-config", '{"backend": "grid"}']
    )
    assert EngineArgs.from_cli_args(args).structured_outputs_config.backend == "grid"


def verify(params: SamplingParams, config: Any, tokenizer: Any, backend: str = "grid") -> None:
    so_config = StructuredOutputsConfig(backend=backend)
    params.verify(config.model_config, None, so_config, tokenizer)


def test_validation_takes_grid_specs_as_grammar(config: Any, tokenizer: Any) -> None:
    """A spec passes and the request resolves to ``grid``; fails if it does not."""
    r = request(config, tokenizer, "ok", ANALYST)
    assert r.sampling_params.structured_outputs._backend == "grid"


BAD = {
    "json-schema": ({"json": {"type": "array", "uniqueItems": True}}, "uniqueItems"),
    "regex": ({"regex": "^SELECT .*"}, "anchor"),
    "structural-tag": ({"structural_tag": "{}"}, "got structural_tag"),
    "malformed-spec": ({"grammar": "{SELECT 1"}, "GRID grammar spec: not JSON"),
    "unknown-key": (
        {"grammar": '{"dialect": "sqlite", "role": "a", "schema": "example", "x": 1}'},
        "field 'x'",
    ),
}


STANDARD = {
    "json": {"json": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    "json-object": {"json_object": True},
    "regex": {"regex": "SELECT [a-z]+;"},
    "choice": {"choice": ["yes", "no"]},
    "lark": {"grammar": 'start: "a"+\n'},
}


@pytest.mark.parametrize("constraint", STANDARD.values(), ids=STANDARD.keys())
def test_validation_takes_the_standard_request_types(
    config: Any, tokenizer: Any, constraint: dict[str, Any]
) -> None:
    """JSON, JSON_OBJECT, REGEX, CHOICE and a lark GRAMMAR resolve to ``grid``; fails if
    one is refused."""
    params = SamplingParams(structured_outputs=StructuredOutputsParams(**constraint))
    verify(params, config, tokenizer)
    assert params.structured_outputs._backend == "grid"


@pytest.mark.parametrize(("constraint", "message"), BAD.values(), ids=BAD.keys())
def test_validation_refuses_what_grid_cannot_serve(
    config: Any, tokenizer: Any, constraint: dict[str, Any], message: str
) -> None:
    """Fails if a non-GRID constraint or a malformed spec reaches the engine."""
    params = SamplingParams(structured_outputs=StructuredOutputsParams(**constraint))
    with pytest.raises(VLLMValidationError, match=message):
        verify(params, config, tokenizer)


def test_validation_refuses_ignore_eos(config: Any, tokenizer: Any) -> None:
    """With ``ignore_eos`` vLLM does not stop at the stop id GRID admits where its
    language ends: the guide terminates, the rows after it admit everything, and the
    log is sealed ``eos`` over text written past it. Refused at the front door."""
    params = SamplingParams(
        structured_outputs=StructuredOutputsParams(json_object=True), ignore_eos=True
    )
    with pytest.raises(VLLMValidationError, match="remove ignore_eos"):
        verify(params, config, tokenizer)


def test_validation_refuses_a_request_naming_another_backend(config: Any, tokenizer: Any) -> None:
    """Fails if a request-level backend other than the engine's is accepted."""
    params = SamplingParams(structured_outputs=StructuredOutputsParams(grammar=json.dumps(ANALYST)))
    params.structured_outputs._backend = "xgrammar"
    with pytest.raises(VLLMValidationError, match="remove `_backend`"):
        verify(params, config, tokenizer)


def test_other_backends_keep_vllms_validation(config: Any, tokenizer: Any) -> None:
    """With the engine on xgrammar, vLLM's own validation runs: a regex resolves to
    xgrammar and a GRID spec is not an EBNF grammar. Fails if GRID's wrapper takes over."""
    regex = SamplingParams(structured_outputs=StructuredOutputsParams(regex="SELECT [a-z]+;"))
    verify(regex, config, tokenizer, backend="xgrammar")
    assert regex.structured_outputs._backend == "xgrammar"
    spec = SamplingParams(structured_outputs=StructuredOutputsParams(grammar=json.dumps(ANALYST)))
    with pytest.raises(VLLMValidationError, match="Invalid grammar specification"):
        verify(spec, config, tokenizer, backend="xgrammar")


def test_grid_vllm_defer_0_leaves_the_scheduler_alone(
    registered: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails if GRID_VLLM_DEFER=0 still installs the defer patch, or registration without
    it does not."""
    defer.remove()
    try:
        monkeypatch.setenv("GRID_VLLM_DEFER", "0")
        plugin.register()
        assert not defer.installed()
        monkeypatch.delenv("GRID_VLLM_DEFER")
        plugin.register()
        assert defer.installed()
    finally:
        defer.install()
