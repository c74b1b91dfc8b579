"""Registration of the ``grid`` structured-output backend in vLLM (a general plugin).

vLLM has no registry of structured-output backends: the backend names are a
``Literal`` in its config, ``SamplingParams._validate_structured_outputs``
validates a request per backend name, and
``StructuredOutputManager.grammar_init`` builds the backend object by name.
:func:`register`, the ``vllm.general_plugins`` entry point ``grid`` of
grid-serve (vLLM calls it in every process it starts, before it builds its
engine), patches those three places, and installs the defer patch of the
scheduler (:mod:`grid_serve.vllm.defer`) unless ``GRID_VLLM_DEFER=0``:

1. the backend literal: ``"grid"`` is added to
   ``vllm.config.structured_outputs.StructuredOutputsBackend`` and to the
   ``backend`` field of ``StructuredOutputsConfig``, and the pydantic schemas of
   that class and of ``VllmConfig`` (which embeds it) are rebuilt, so
   ``structured_outputs_config={"backend": "grid"}`` and
   ``--structured-outputs-config '{"backend": "grid"}'`` validate;
2. request validation: with the engine's backend ``grid``, a request carries
   one constraint: ``json``, ``json_object``, ``regex``, ``choice`` or
   ``grammar`` (a GRID grammar spec, :meth:`grid_serve.vllm.spec.GridSpec.parse`,
   or a lark grammar); it must translate
   (:func:`grid_serve.vllm.spec.request_grammar`), else, as for
   ``structural_tag`` or two constraints at once, a ``VLLMValidationError``
   (an HTTP 400), checked before the request reaches the engine. vLLM's
   checks that apply to every backend run first (a diffusion model, no
   tokenizer, a request naming another backend); every other backend name goes to vLLM's own method;
3. backend construction: the first request resolved to ``grid`` makes the
   manager's backend a :class:`~grid_serve.vllm.backend.GridBackend`; vLLM's
   method then compiles the grammar on its pool as for any backend.

Each patch wraps vLLM's function and keeps it (attribute ``__grid_original__``);
:func:`register` is idempotent. In a process that builds a
``StructuredOutputsConfig`` before vLLM loads its plugins (``LLM(...,
structured_outputs_config={"backend": "grid"})`` does), call
``vllm.plugins.load_general_plugins()`` (or :func:`register`) first.

Supported vLLM versions: the ``grid-serve[vllm]`` extra's range (0.33.x).
"""

from __future__ import annotations

import functools
import os
import typing
from concurrent.futures import Future
from typing import Any, Literal

import pydantic  # type: ignore[import-not-found, unused-ignore]
from vllm.config import VllmConfig
from vllm.config import structured_outputs as so_config
from vllm.exceptions import VLLMValidationError
from vllm.sampling_params import SamplingParams
from vllm.v1.structured_output import StructuredOutputManager
from vllm.v1.structured_output.request import get_structured_output_key

from grid_core.errors import GridError
from grid_serve.vllm import defer
from grid_serve.vllm.backend import BACKEND, GridBackend, GridGrammar
from grid_serve.vllm.spec import REQUEST_KINDS, GridSpec, is_grid_spec, request_grammar

__all__ = ["register"]

_ORIGINAL = "__grid_original__"

#: ``StructuredOutputsParams`` fields that carry a constraint.
_CONSTRAINTS = ("json", "regex", "choice", "json_object", "grammar", "structural_tag")


def register() -> None:
    """The ``vllm.general_plugins`` entry point: make ``grid`` a backend (idempotent)."""
    _allow_backend_name()
    _patch(SamplingParams, "_validate_structured_outputs", _validate_structured_outputs)
    _patch(StructuredOutputManager, "grammar_init", _grammar_init)
    if os.environ.get("GRID_VLLM_DEFER", "1") != "0":
        defer.install()


def _patch(owner: type, name: str, wrapper: Any) -> None:
    current = getattr(owner, name)
    if hasattr(current, _ORIGINAL):
        return
    setattr(wrapper, _ORIGINAL, current)
    setattr(owner, name, wrapper)


def _original(owner: type, name: str) -> Any:
    return getattr(getattr(owner, name), _ORIGINAL)


def _allow_backend_name() -> None:
    names = typing.get_args(so_config.StructuredOutputsBackend)
    if BACKEND in names:
        return
    literal: Any = Literal  # built at run time: the names are vLLM's
    backends = literal[(*names, BACKEND)]
    config: Any = so_config.StructuredOutputsConfig
    engine_config: Any = VllmConfig
    so_config.StructuredOutputsBackend = backends
    config.__annotations__["backend"] = backends
    config.__dataclass_fields__["backend"].type = backends
    pydantic.dataclasses.rebuild_dataclass(config, force=True)
    # VllmConfig's own validator holds a copy of the field's schema.
    pydantic.dataclasses.rebuild_dataclass(engine_config, force=True)


def _validate_structured_outputs(
    self: SamplingParams, model_config: Any, structured_outputs_config: Any, tokenizer: Any
) -> None:
    params = self.structured_outputs
    if structured_outputs_config is None or params is None:
        return
    if structured_outputs_config.backend != BACKEND:
        _original(SamplingParams, "_validate_structured_outputs")(
            self, model_config, structured_outputs_config, tokenizer
        )
        return
    if model_config.is_diffusion:
        raise VLLMValidationError("the GRID backend does not serve diffusion language models")
    if tokenizer is None:
        raise VLLMValidationError("structured outputs need a tokenizer (not skip_tokenizer_init)")
    if getattr(tokenizer, "backend_tokenizer", None) is None:
        raise VLLMValidationError("the GRID backend needs a Hugging Face fast tokenizer")
    if params._backend not in (None, BACKEND):
        raise VLLMValidationError(
            f"the request names the structured-output backend {params._backend!r}, "
            f"the engine runs {BACKEND!r}: remove `_backend` from the request"
        )
    if self.ignore_eos:
        raise VLLMValidationError(
            "the GRID backend ends the output where its language does, at a stop id: "
            "with ignore_eos vLLM would write on past it unconstrained; remove ignore_eos"
        )
    given = [f for f in _CONSTRAINTS if getattr(params, f) not in (None, False)]
    if len(given) != 1 or given == ["structural_tag"]:
        raise VLLMValidationError(
            f"the GRID backend takes one of {', '.join(REQUEST_KINDS)} (grammar: a GRID "
            f"grammar spec or a lark grammar); got {', '.join(given) or 'nothing'}"
        )
    kind, text = get_structured_output_key(params)
    try:
        if kind.name.lower() == "grammar" and is_grid_spec(text):
            GridSpec.parse(text)
        else:
            request_grammar(kind.name.lower(), text)
    except GridError as e:
        raise VLLMValidationError(str(e)) from None
    params._backend = BACKEND
    params.__post_init__()  # type: ignore[no-untyped-call, unused-ignore]


def _grammar_init(self: StructuredOutputManager, request: Any) -> None:
    structured = request.structured_output_request
    if structured is not None and self.backend is None and structured.params._backend == BACKEND:
        self.backend = GridBackend(
            self.vllm_config,
            tokenizer=self.tokenizer,
            vocab_size=self.vllm_config.model_config.get_vocab_size(),
        )
        self.backend_name = BACKEND
    _original(StructuredOutputManager, "grammar_init")(self, request)
    if structured is not None and isinstance(self.backend, GridBackend):
        # The grammar learns its request's id now, not at its first token: a request
        # aborted in prefill, or failed before it, seals its log under its own id.
        grammar = structured._grammar
        if isinstance(grammar, Future):
            grammar.add_done_callback(functools.partial(_name_compiled, request.request_id))
        elif isinstance(grammar, GridGrammar):
            grammar.name(request.request_id)


def _name_compiled(request_id: str, done: Future[Any]) -> None:
    """Tell a grammar compiled on vLLM's pool its request's id (a failed compile has
    no grammar: vLLM fails the request with the error)."""
    if not done.cancelled() and done.exception() is None:
        grammar = done.result()
        if isinstance(grammar, GridGrammar):
            grammar.name(request_id)
