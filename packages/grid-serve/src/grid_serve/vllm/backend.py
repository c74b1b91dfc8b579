"""GRID as a vLLM structured-output backend (vLLM's ``backend_types`` contract).

Reference: vLLM 0.33's ``vllm/v1/structured_output/backend_types.py``
(``StructuredOutputBackend``: one per engine; ``StructuredOutputGrammar``: one
per request), DESIGN.md section 10 (the serving contract) and STYLE.md's
serving rule (a request's failure is sticky state on the request, never an
exception thrown into the engine's batch loop).

:class:`GridBackend` (one per engine, built by vLLM's
``StructuredOutputManager`` on the first GRID request, see
:mod:`grid_serve.vllm.plugin`):

- its GRID vocabulary comes from the engine's tokenizer: the Hugging Face fast
  tokenizer's own ``tokenizer.json`` (:func:`model_vocabulary`), padded to the
  model's logits width and checked on probe strings;
- ``compile_grammar`` takes ``GRAMMAR`` requests whose text is a GRID grammar
  spec (:mod:`grid_serve.vllm.spec`), and the standard request types ``JSON``,
  ``JSON_OBJECT``, ``REGEX``, ``CHOICE`` and ``GRAMMAR`` as lark text
  (:func:`grid_serve.vllm.spec.request_grammar`, the same audit, single-flight
  compile and failure isolation); ``STRUCTURAL_TAG`` is refused by name;
  vLLM calls it on its compile pool, and an error there fails that request
  only (vLLM stores it on the request's future and finishes the request with
  the message). The engine is built once per spec key (single-flight) and the request's first row is
  computed there too, so a new request is never scheduled before its first
  mask exists (vLLM holds it in ``WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR``);
- ``allocate_token_bitmask`` gives the ``[rows, ceil(V / 32)]`` int32 tensor
  vLLM fills (all ones: no constraint);
- rows after the first are computed when vLLM fills the bitmask (a warm
  request's) or ahead on the backend's mask pool (a slow request's,
  :class:`~grid_serve.vllm.rows.RowsAhead`), :data:`MASK_WORKERS` threads;
  its :class:`~grid_serve.vllm.rows.RoundClock` is driven by the defer patch.

:class:`GridGrammar` (one per request) holds a guide from ``Engine.guide()``
(:mod:`grid_core.protocol`: the native session whenever grid-kernels is
installed), with audit on:

- ``accept_tokens`` advances it (tokens after termination are ignored, as
  vLLM's other backends do) and, for a slow request, submits the next row to
  the pool (:class:`~grid_serve.vllm.rows.RowsAhead`); a refused
  token returns False with the guide unchanged at that token, and the log
  of a request whose last token was refused (vLLM ends it with an error) is
  sealed ``error``, unless an accept or a rollback came after;
- ``validate_tokens`` advances a fork (O(1)) and returns the accepted prefix;
- ``rollback(n)`` undoes n tokens (termination included);
- ``fill_bitmask`` writes the request's row whole (for a request the defer
  patch has made skip this round, a placeholder: its sampled token is dropped);
- any exception while the grammar computes a row or rolls back makes the
  request *failed*: from then on its row admits the stop ids only and
  ``accept_tokens`` returns False, which makes vLLM finish the request with an
  error at its next token, while the rest of the batch goes on.

**Audit.** Every request's guide records each accepted token (DESIGN.md
section 9); the log is sealed once, with ``mode: 2``, when the request's
grammar ends: when vLLM drops it (the request finished or was aborted), at
``reset``, or when the request fails. Its stop reason is ``eos`` if the guide
has accepted a stop id by then, ``error`` for a failed request, else
``truncated`` (a length limit, a stop string, an abort). A stop id does not
seal the log when it is accepted: vLLM's speculative decoding accepts draft
tokens through ``accept_tokens`` and rolls them back, and a draft stop id
must leave the log open. The log is sealed on the backend's
audit thread (:attr:`GridBackend.audit_pool`, one thread, in the order the
requests ended), not in the engine's round: sealing and writing a log cost
tens of microseconds, which every co-tenant of the batch would wait for. It
is in the sink within moments of the request's end; ``flush_audit()`` waits
for every log handed over so far, and ``destroy()`` (the engine's shutdown)
writes them all before it returns. The sealed log goes to the backend's
audit sink (:attr:`GridBackend.audit_sink`, a callable ``(request_id, log)``):
by default :class:`AuditDirectory` over ``GRID_AUDIT_DIR``, else
``$XDG_STATE_HOME/grid/audit`` (``~/.local/state/grid/audit``), one
``<request_id>.jsonl`` per request, which ``grid audit verify`` and ``grid
audit replay`` read. A sink that fails is logged, never raised into vLLM.

**Parse events.** A request whose grammar spec says ``"events": true`` gets a
guide with the dialect's parse events (``Engine.guide(events=...)``,
docs/events.md); so does a ``json`` request whose schema has ``"x-grid-events":
true`` at its root (the JSON events, ``grid_core.json_events``). The backend
keeps them per request and writes them as JSON lines
(:class:`grid_serve.event_lines.EventLines`: the resolved meaning, the role's
grants or the JSON pointer included) to ``<request_id>.events.jsonl`` in ``GRID_EVENTS_DIR``
(default ``$XDG_STATE_HOME/grid/events``), flushed after every
``accept_tokens`` and ``rollback``: a rollback past written events writes a
``retract`` line. The draft tokens vLLM's bitmask fill accepts and rolls back
(speculative decoding) write nothing, while the defer patch marks the fill
(:attr:`GridBackend.drafting`; with ``GRID_VLLM_DEFER=0`` their events are
written and then retracted). vLLM runs its engine core in another process than
its API server, so a server reads a request's events by following that file
(one complete line per event, appended as each is determined; the file is
complete once the request's audit log is written). The events of a request
are in memory while it runs (:attr:`GridGrammar.event_lines`). A ``reset()``
seals the attempt so far (stop reason ``reset``) and starts a fresh guide and
log; the next attempt's lines are appended to the same file with ``attempt``
one higher.

**Shared mask cache.** Like ``GRID_AUDIT_DIR``, the shared tier is configured
by the environment of the engine process: ``GRID_SHARED_CACHE_URL`` and
``GRID_SHARED_CACHE_KEY`` (or ``GRID_SHARED_CACHE_KEY_FILE``) put every
compiled engine's family walk cache in front of a Redis server shared by the
replicas (:mod:`grid_core.shared_cache`; off by default). A bad setting fails
the first request's grammar compilation with a ``SharedCacheError``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch
from vllm.v1.structured_output.backend_types import (
    StructuredOutputBackend,
    StructuredOutputGrammar,
    StructuredOutputOptions,
)

from grid_core.audit import AuditLog
from grid_core.errors import ServingError, TokenizerError
from grid_core.events import EventSpec, EventStream
from grid_core.guide import Engine
from grid_core.json_events import JsonEventReader, json_event_spec
from grid_core.protocol import Guide
from grid_core.vocab import Vocabulary, from_hf_tokenizer_json
from grid_serve.event_lines import EventLines, EventReader
from grid_serve.model import PROBES
from grid_serve.torch import bitmask_tensor
from grid_serve.vllm.rows import RoundClock, RowsAhead, StopSet
from grid_serve.vllm.spec import EngineCompiler, GridSpec, events_requested, is_grid_spec
from grid_sql.dialects import get_dialect
from grid_sql.events import SqlEventReader, event_spec

__all__ = [
    "BACKEND",
    "MASK_WORKERS",
    "AuditDirectory",
    "AuditSink",
    "GridBackend",
    "GridGrammar",
    "model_vocabulary",
]

AuditSink = Callable[[str, AuditLog], None]
"""Where a request's sealed audit log goes: ``sink(request_id, log)``."""

#: The backend's name in vLLM's ``structured_outputs_config.backend``.
BACKEND = "grid"

#: Threads of a backend's mask pool: half the CPUs, at least one (vLLM sizes
#: its grammar-compile pool the same way).
MASK_WORKERS = max(1, (os.cpu_count() or 1) // 2)

logger = logging.getLogger(__name__)


def model_vocabulary(tokenizer: Any, vocab_size: int) -> Vocabulary:
    """The GRID vocabulary of a Hugging Face fast tokenizer, ``vocab_size`` ids wide.

    The tokenizer's ``tokenizer.json`` (``backend_tokenizer.to_str()``) is read
    by :func:`grid_core.vocab.from_hf_tokenizer_json`, with the tokenizer's
    ``eos_token`` as EOS. Raises :class:`TokenizerError` for a tokenizer that is
    not a fast one, a vocabulary wider than ``vocab_size``, or token ids whose
    spellings do not give back the probe strings.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TokenizerError(
            f"the GRID backend needs a Hugging Face fast tokenizer (a tokenizer.json); "
            f"{type(tokenizer).__name__} is not one"
        )
    name = Path(str(getattr(tokenizer, "name_or_path", "") or "model")).name
    with tempfile.TemporaryDirectory(prefix="grid-vocab-") as tmp:
        path = Path(tmp) / "tokenizer.json"
        path.write_text(backend.to_str(), encoding="utf-8")
        if tokenizer.eos_token:
            config = json.dumps({"eos_token": str(tokenizer.eos_token)})
            (Path(tmp) / "tokenizer_config.json").write_text(config, encoding="utf-8")
        vocab = from_hf_tokenizer_json(path, name, n_vocab=vocab_size)
    for probe in PROBES:
        ids = tokenizer.encode(probe, add_special_tokens=False)
        spelled = b"".join(vocab.token_bytes[i] if 0 <= i < vocab.n_vocab else b"?" for i in ids)
        if spelled != probe.encode("utf-8"):
            raise TokenizerError(
                f"{name}: token ids disagree with the GRID vocabulary: {probe!r} "
                f"tokenizes to {ids}, which spell {spelled!r}"
            )
    return vocab


def file_stem(request_id: str) -> str:
    """A request's file name stem: the id itself when it is made of
    ``[A-Za-z0-9._-]``, is neither empty, ``.`` nor ``..``, and ends neither in
    ``-`` and 16 hex digits nor in ``.events``; else the id with every other
    character as ``_``, then ``-`` and 16 hex digits of BLAKE2b of the id. So
    two ids that read alike (``tenant/a``, ``tenant_a``, an id spelled as
    another's stem, ``x.events`` beside ``x``'s events file) never share a file,
    and a follower can still derive it. No stem holds ``~``: a repeated id's
    suffix (:class:`AuditDirectory`) is never another id's name. On a
    case-insensitive file system ``A`` and ``a`` still share a name."""
    plain = re.fullmatch(r"[A-Za-z0-9._-]+", request_id) and request_id not in (".", "..")
    if plain and not re.search(r"-[0-9a-f]{16}\Z|\.events\Z", request_id):
        return request_id
    digest = hashlib.blake2b(request_id.encode("utf-8", "surrogatepass"), digest_size=8)
    return re.sub(r"[^A-Za-z0-9._-]", "_", request_id) + "-" + digest.hexdigest()


class AuditDirectory:
    """The default audit sink: one ``<request_id>.jsonl`` per request in ``path``
    (created on first use; the name is :func:`file_stem`'s; a second log of one id
    gets a ``~N`` suffix, ``<stem>~1.jsonl``, which no id's stem is; never an
    overwrite: a file is created exclusively, so engine processes sharing the
    directory never write over each other's logs)."""

    def __init__(self, path: Path | str | None = None) -> None:
        if path is None:
            path = os.environ.get("GRID_AUDIT_DIR") or (
                Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local/state")
                / "grid/audit"
            )
        self.path = Path(path)

    def __call__(self, request_id: str, log: AuditLog) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        stem = file_stem(request_id)
        target, n = self.path / f"{stem}.jsonl", 1
        while True:
            try:
                log.write(target, exclusive=True)
                return
            except FileExistsError:
                target, n = self.path / f"{stem}~{n}.jsonl", n + 1


@dataclass(frozen=True)
class RequestEvents:
    """A request's event settings: the spec, a maker of its reader (SQL or JSON),
    and where its lines go."""

    spec: EventSpec
    reader: Callable[[], EventReader]

    def open(self, request_id: str) -> TextIO:
        """``<request_id>.events.jsonl`` in ``GRID_EVENTS_DIR`` (module header),
        created; the name is :func:`file_stem`'s."""
        path = Path(
            os.environ.get("GRID_EVENTS_DIR")
            or Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local/state")
            / "grid/events"
        )
        path.mkdir(parents=True, exist_ok=True)
        return open(path / f"{file_stem(request_id)}.events.jsonl", "a", encoding="utf-8")


@dataclass
class _Request:
    """What the sealing of a request's log reads besides its guide."""

    id: str = ""
    refused: int | None = None
    """A token vLLM gave that the mask refused, with no accept or rollback since."""


@dataclass
class GridBackend(StructuredOutputBackend):  # type: ignore[misc, unused-ignore]
    """GRID's engine-level backend (see the module header)."""

    def __post_init__(self) -> None:
        self.grid_vocab = model_vocabulary(self.tokenizer, self.vocab_size)
        self.compiler = EngineCompiler(self.grid_vocab)
        self.mask_pool = ThreadPoolExecutor(MASK_WORKERS, thread_name_prefix="grid-masks")
        self.audit_pool = ThreadPoolExecutor(1, thread_name_prefix="grid-audit")
        """The thread that seals finished requests' logs and hands them to the sink."""
        for pool in (self.mask_pool, self.audit_pool):
            # Started now: a pool starts its thread at its first task, which would
            # then hold the GIL for milliseconds inside an engine round.
            pool.submit(int).result()
        self.clock = RoundClock()
        self.drafting = False
        """True while vLLM fills the round's bitmasks (set by the defer patch,
        :mod:`grid_serve.vllm.defer`): every ``accept_tokens`` then takes a
        speculative draft, rolled back before the fill returns, and no events
        are written for it (module header)."""
        self.audit_sink: AuditSink = AuditDirectory()
        """Where each request's sealed audit log goes (module header)."""

    def compile_grammar(
        self,
        request_type: StructuredOutputOptions,
        grammar_spec: str,
        stop_token_ids: set[int] | None = None,
    ) -> GridGrammar:
        stops = StopSet(self.grid_vocab, stop_token_ids)
        kind = request_type.name.lower()
        if kind != "grammar" or not is_grid_spec(grammar_spec):
            engine = self.compiler.request_engine(kind, grammar_spec)
            json_events = None
            if events_requested(kind, grammar_spec):
                json_events = RequestEvents(json_event_spec(engine.grammar), JsonEventReader)
            grammar = GridGrammar(self, engine, stops, json_events)
            grammar.prime()
            return grammar
        spec = GridSpec.parse(grammar_spec)
        engine = self.compiler.engine(spec)
        events = None
        if spec.events:
            schema = spec.load_schema()
            grants = spec.load_policy(schema).grants(spec.role, schema)
            dialect = get_dialect(spec.dialect)
            events = RequestEvents(
                event_spec(dialect, engine.grammar), partial(SqlEventReader, dialect, grants)
            )
        grammar = GridGrammar(self, engine, stops, events)
        grammar.prime()
        return grammar

    def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
        words = (self.grid_vocab.n_vocab + 31) // 32
        return torch.full((max_num_seqs, words), -1, dtype=torch.int32)

    def flush_audit(self) -> None:
        """Wait until every log handed to the audit thread so far is in the sink."""
        self.audit_pool.submit(lambda: None).result()

    def destroy(self) -> None:
        self.mask_pool.shutdown(wait=False, cancel_futures=True)
        self.audit_pool.shutdown(wait=True)  # every finished request's log is written


class GridGrammar(StructuredOutputGrammar):  # type: ignore[misc, unused-ignore]
    """GRID's request-level grammar (see the module header)."""

    def __init__(
        self,
        backend: GridBackend,
        engine: Engine,
        stops: StopSet,
        events: RequestEvents | None = None,
    ) -> None:
        self.backend = backend
        self.engine = engine
        self.stops = stops
        self.events = events
        self.event_lines: EventLines | None = None
        """The request's event stream once its id is known (``"events": true`` only)."""
        self._request = _Request()
        """The id vLLM names the request by (known from its first accepted token) and
        a token it gave that the mask refuses, in a cell the sealing finalizer shares
        (it must not hold the grammar itself)."""
        self._events_out: list[TextIO] = []
        """The request's events file once open, in a cell the finalizer closes."""
        self.attempt = 0
        """How many times the grammar was reset: the ``attempt`` of its event lines."""
        self.rows = RowsAhead(stops, backend.mask_pool)
        self._start()
        self.error: BaseException | None = None
        """Why the request failed (sticky), or None."""
        self.deferred = False
        """Set by the defer patch: this round's row is a placeholder, its token dropped."""
        self.skipped = 0
        """Rounds skipped in a row (the defer patch), back to 0 when a token is accepted."""

    def prime(self) -> None:
        """Compute the current row in this thread (a new request's first row)."""
        self._row()

    def name(self, request_id: str) -> None:
        """The id vLLM names the request by, told when its grammar is made (the plugin's
        ``grammar_init``): its log and events files are named by it even when no
        token is ever accepted."""
        self._request.id = request_id

    def _start(self) -> None:
        """A fresh guide, whose log is sealed and sent to the sink once, when the
        grammar ends: dropped by vLLM (a finished or aborted request), reset, or
        failed (module header)."""
        spec = None if self.events is None else self.events.spec
        self.guide = self.engine.guide(audit=True, events=spec)
        self._sealer = weakref.finalize(
            self, _hand_off, self.backend, self.guide, self._request, None, self._events_out
        )
        self._sealer.atexit = True

    def _end(self, stop: str | None) -> None:
        """Seal now (a no-op if already sealed); ``stop`` as :func:`_seal`'s."""
        if self._sealer.alive:
            self._sealer.detach()
            self._flush_events()
            _hand_off(self.backend, self.guide, self._request, stop, self._events_out)

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        self._request.id = request_id
        if self.error is not None:
            return False
        self.skipped = 0
        for token in tokens:
            if self.guide.is_terminated():
                return True
            try:
                took = self.stops.accept(self.guide, token)
            except Exception as e:  # a bug while accepting (its audit step included)
                self._fail(e)
                return False
            if not took:
                logger.error(
                    "GRID: request %s: token %d is not admitted after %d tokens",
                    request_id,
                    token,
                    self.guide.steps,
                )
                # A sampled token: vLLM ends the request with an error, and the log
                # is sealed `error` unless a later accept or rollback shows the
                # request went on. A draft (while vLLM fills bitmasks) is no failure:
                # vLLM rolls back what it took, and a refused first draft took nothing.
                if not self.backend.drafting:
                    self._request.refused = token
                return False
        self._request.refused = None
        # A stop id does not seal the log here: vLLM accepts draft tokens through this
        # method and rolls them back, so a request has ended only when its grammar
        # is dropped (or reset, or failed), and the seal's stop reason is read then.
        if not self.backend.drafting:  # a draft's events are never written
            self._flush_events()
        if not self.guide.is_terminated():
            self.rows.ahead(self.guide)
        return True

    def _flush_events(self) -> None:
        """Write the events determined since the last flush (``"events": true``)."""
        if self.events is None or (self.event_lines and self.event_lines.out.closed):
            return
        try:
            if self.event_lines is None:
                assert isinstance(self.guide, EventStream)
                out = self.events.open(self._request.id or "request")
                self._events_out.append(out)
                self.event_lines = EventLines(self.guide, self.events.reader, out, self.attempt)
            self.event_lines.flush()
        except Exception:
            logger.exception("GRID: request %s: events could not be written", self._request.id)

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        if self.error is not None or self.guide.is_terminated():
            return []
        accepted: list[int] = []
        try:
            fork = self.guide.fork()
            for token in tokens:
                if not self.stops.accept(fork, token):
                    break
                accepted.append(token)
                if fork.is_terminated():
                    break
        except Exception as e:  # a bug while validating fails the request, not the batch
            self._fail(e)
            return []
        return accepted

    def rollback(self, num_tokens: int) -> None:
        self._request.refused = None
        if self.error is None:
            try:
                self.guide.rollback(num_tokens)
            except Exception as e:
                self._fail(e)
            else:
                if not self.backend.drafting:
                    self._flush_events()

    def fill_bitmask(self, bitmask: torch.Tensor, batch_index: int) -> None:
        row = self.stops.stop_row() if self.deferred else self._row()
        words = _words_of(bitmask)
        width = len(row) // 4
        if (bitmask.shape[-1] if words is None else words.shape[-1]) != width:
            raise ServingError(
                f"a bitmask of {bitmask.shape[-1]} words per row, not GridBackend's "
                f"{width}: allocate it with allocate_token_bitmask"
            )
        if words is None:  # not the CPU int32 tensor GridBackend allocates: copy through torch
            bitmask[batch_index].copy_(bitmask_tensor([row])[0])
            return
        words[batch_index] = np.frombuffer(row, dtype=np.int32)

    def is_terminated(self) -> bool:
        return self.guide.is_terminated()

    def reset(self) -> None:
        """Start the request over: the attempt so far is sealed (stop reason
        ``reset``, or ``eos``/``error`` if it had ended so) and its events file
        closed; the next attempt gets a fresh guide and log, and its event lines
        are appended to the same file with ``attempt`` one higher."""
        if self.error is not None:
            self._end("error")
        else:
            self._end(None if self.guide.is_terminated() else "reset")
        self.rows.clear()
        self.attempt += 1
        self.event_lines = None
        self._events_out = []
        self._request = _Request(self._request.id)  # the sealed attempt keeps its own
        self._start()
        self.error = None
        self.rows.ahead(self.guide)

    def mask_ready(self) -> bool:
        """Whether the row of the current configuration is computed (submitted if not).

        A terminated or failed request needs no computation: always ready.
        """
        if self.error is not None or self.guide.is_terminated():
            return True
        return self.rows.ready(self.guide)

    def wait_row(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for the current row; whether it is ready.

        A terminated or failed request needs no row: always ready.
        """
        if self.error is not None or self.guide.is_terminated():
            return True
        return self.rows.wait(self.guide, timeout)

    def _row(self) -> bytes:
        if self.error is None and not self.guide.is_terminated():
            try:
                return self.rows.row(self.guide)
            except Exception as e:
                self._fail(e)
        return self.stops.stop_row()

    def _fail(self, error: BaseException) -> None:
        self.error = error
        logger.error("GRID: request failed after %d tokens: %s", self.guide.steps, error)
        self._end("error")


_VIEW: list[tuple[Any, Any]] = [(None, None)]
"""The last bitmask ``fill_bitmask`` wrote into and its numpy view, as one pair
(read and replaced whole, so threads never mix two tensors' views); vLLM reuses
one tensor for every round, and holding it here keeps the view valid."""


def _words_of(bitmask: torch.Tensor) -> Any:
    """A numpy view of a contiguous CPU int32 bitmask (one ``fill_bitmask`` row is
    then one slice assignment, not a tensor built per row), or None."""
    tensor, view = _VIEW[0]
    if bitmask is not tensor:
        usable = (
            bitmask.device.type == "cpu"
            and bitmask.dtype == torch.int32
            and bitmask.dim() == 2
            and bitmask.is_contiguous()
        )
        view = bitmask.numpy() if usable else None
        _VIEW[0] = (bitmask, view)
    return view


def _hand_off(
    backend: GridBackend,
    guide: Guide,
    request: _Request,
    stop: str | None,
    events_out: list[TextIO],
) -> None:
    """Close the request's events file, then seal ``guide``'s log on the backend's audit
    thread, off the engine's round (module header); in this thread once that is shut
    down (interpreter exit)."""
    for out in events_out:
        out.close()  # its lines are complete before the log is written
    try:
        backend.audit_pool.submit(_seal, backend, guide, request, stop)
    except RuntimeError:
        _seal(backend, guide, request, stop)


def _seal(backend: GridBackend, guide: Guide, request: _Request, stop: str | None) -> None:
    """Seal ``guide``'s records (``mode: 2``) with ``stop``, or (None) ``eos`` if the
    guide has accepted EOS, ``error`` if its last token from vLLM was refused (vLLM
    ends such a request with an error), and ``truncated`` if not; and hand them to
    the backend's sink; a failure is logged, never raised."""
    request_id = request.id
    if stop is None:
        ended = "error" if request.refused is not None else "truncated"
        stop = "eos" if guide.is_terminated() else ended
    try:
        backend.audit_sink(request_id or "request", guide.seal(stop, {"mode": 2}))
    except Exception:
        logger.exception("GRID: request %s: the audit log could not be written", request_id)
