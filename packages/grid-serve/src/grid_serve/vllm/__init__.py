"""GRID for vLLM: a structured-output backend, its plugin and the scheduler's defer patch.

Install with ``pip install 'grid-serve[vllm]'``; vLLM then loads the plugin
itself (entry point ``grid`` of the ``vllm.general_plugins`` group) and an
engine started with ``structured_outputs_config={"backend": "grid"}`` serves
requests whose ``structured_outputs.grammar`` is a GRID grammar spec. Modules:

- :mod:`grid_serve.vllm.spec`: grammar specs and the engines they compile to
  (no vLLM import);
- :mod:`grid_serve.vllm.rows`: a request's bitmask rows, its stop ids, rows
  computed ahead on a pool (no vLLM import);
- :mod:`grid_serve.vllm.backend`: ``GridBackend`` and ``GridGrammar``, vLLM's
  backend contract;
- :mod:`grid_serve.vllm.plugin`: the entry point that registers the backend;
- :mod:`grid_serve.vllm.defer`: the skip-a-round defer patch of the scheduler.

Importing this package imports none of them.
"""
