"""grid-serve: logits processors, the vLLM backend and the serving contract.

One module per framework adapter; importing this package imports none of them
(torch and transformers are extras, loaded only by the modules that need them):

- ``grid_serve.torch``: packed token bitmasks as torch tensors (torch);
- ``grid_serve.transformers``: the mode-2 ``GridLogitsProcessor`` and the mode-1
  model callable for grid-core's decode loop (torch, transformers);
- ``grid_serve.model``: SmolLM2-135M-Instruct (or another model) and its GRID
  vocabulary, checked for alignment (torch, transformers);
- ``grid_serve.text2sql``: role engines, prompts, verdicts over a SQLite database;
- ``grid_serve.ask``: the ``grid ask`` command;
- ``grid_serve.vllm``: the vLLM structured-output backend, its plugin and the
  skip-a-round defer patch (vllm, installed by the ``vllm`` nox session).
"""
