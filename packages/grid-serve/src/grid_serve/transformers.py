"""GRID for Hugging Face transformers: the mode-2 logits processor and a mode-1 model callable.

Reference: DESIGN.md section 7 (mode 1 and mode 2 termination), section 9
(the audit chain) and STYLE.md's serving rule (a request's failure is sticky
state on the request, never an exception thrown into the batch).

**Mode 2** (:class:`GridLogitsProcessor`): ``model.generate`` owns the loop and
GRID only masks. The processor keeps one guide per batch row (the protocol of
:mod:`grid_core.protocol`; ``Engine.guide()`` gives the native session when
grid-kernels is installed). At each call it

1. *catches up*: the columns of ``input_ids`` past what it has seen are the
   tokens sampled since the last call (one per call; none on the first call,
   which only records the prompt length); each row's guide accepts its token
   and records the step itself (configuration hash and mask entry id of the
   mask it filled at the previous call, token, blocked count, kind
   ``sampled`` or ``eos``);
2. *masks*: the live rows' guides fill their exact masks (EOS only at
   ACCEPT) into their rows of one CPU ``[batch, words]`` int32 tensor, in one
   batch call (:func:`grid_core.protocol.fill_rows`: one native call with the
   GIL released when the guides are native), and the bitmask is applied in
   place (:func:`grid_serve.torch.apply_bitmask_`: one native pass over CPU
   float32 logits, else an unpack on the logits' device).

**Ahead of the forward pass** (:meth:`GridLogitsProcessor.ahead`, which
:func:`constrained_generate` passes): DESIGN section 10 runs mask work on
the CPU overlapped with the model's forward pass. ``generate`` calls its
stopping criteria after it samples a token and before the next forward pass;
the criterion ``ahead()`` returns (it never stops a row) reads the sampled
tokens there and hands steps 1 and 2 to the processor's worker thread, which
accepts and fills while the model computes the next logits. The next call
then waits for that work (usually long done), applies the mask and returns:
the same guide calls in the same order, so the same masks and audit records
(``tests/test_transformers.py`` holds them equal with and without it). Without
the criterion the call does both steps itself.

On CUDA the criterion must not read the sampled tokens (that would wait for the
GPU before the next forward pass is even launched): it queues their copy into
pinned host memory and records a CUDA event behind it, and the worker waits for
that event (the GIL released) before it accepts them. The bitmask rows live in
pinned memory too, so the mask's copy to the GPU is queued, not waited for.
The worker writes the next step's rows only after its event, which the stream
reaches after the previous rows' copy, so a copy in flight never reads rows
being written. Other accelerators get no work ahead (each call does it).

``generate`` samples the last token after the last call, so
:meth:`GridLogitsProcessor.finish` takes the returned sequences, catches up
once more and seals every row's audit log: stop reason ``eos`` (the row
emitted EOS, at ACCEPT), ``truncated`` (the budget ran out first, or a stopping
criterion ended the row: mode 2's weak termination, which the seal records with
``mode: 2``) or ``error``. ``generate`` pads a row that a per-row criterion (a
stop string) ends; :meth:`GridLogitsProcessor.watch` applies such criteria and
tells the processor, which then accepts none of that row's padding.

Row failure policy. Any exception while a row's guide accepts a token or
computes a mask (a :class:`~grid_core.errors.GridError`, or a bug) is caught and
stored on the row: the row is *sticky-failed*. From then on its mask admits
EOS only, so ``generate`` ends that row at its next token while the other rows
go on untouched; the forced EOS is not a guide step and is not audited. The
row's :class:`RowOutcome` has stop reason ``error`` and the error, its audit log
ends with the last step its guide accepted. A failed row's text is not a
sentence of L and must not be used. Rows that ended normally also get the
EOS-only mask (``generate`` pads them anyway). Errors that are not a row's
(a batch of the wrong size, a logits row narrower than the vocabulary, a call
after ``finish``, rows reordered or replaced between calls) raise
:class:`~grid_core.errors.ServingError`: they are set-up mistakes, raised
before any row's state exists, after it is sealed, or before a token of the
call is accepted.

Not supported: beam search and any generation mode that reorders or forks rows
between steps (``num_beams > 1``), assisted generation, and a processor used
for a second ``generate`` call; use one processor per ``generate`` call. On
the CPU each call checks that every column of ``input_ids`` consumed so far
(the prompt included) is unchanged, so a reorder or a new call is refused,
not served with the wrong row's guide (O(rows x width) compared per call: 1-2
µs at one row of 500 columns). On CUDA that read would wait for the GPU, and
only each row's last consumed column is checked (it travels with the new
ones): a reorder of rows whose last tokens are equal goes unseen there. A
batch multiplied by beams is refused at the first call by its size.
Pass ``eos_token_id=list(vocab.eos_ids)`` so that ``generate`` stops where GRID
admits EOS (:func:`constrained_generate` does).

**Exit-intent stop** (opt-in, ``stop_on_exit``; a sampling policy, not a
mask): at a step where EOS is legal (the output is a sentence of L), if the
model's own top token over the whole logits row is one the mask refuses, the
model is trying to leave the language (close a code fence, start prose), and
the step takes EOS. In mode 2 the step's applied mask is {EOS}, a subset of
the exact mask; the audit records the exact mask as always. Without it a chat
model that has written ``...;`` and wants to close its fence is steered into
what the grammar still admits after the statement (whitespace, comments) until
it happens to rank EOS first or the budget runs out.

**Mode 1** (:class:`CausalLMLogits`): the model as grid-core's ``LogitsFn``,
``logits(tokens so far) -> next-step logits``, with an incremental KV cache,
for :func:`grid_core.decode.decode` (GRID owns the loop, the reserve trigger
and jump-forward). :func:`decode_with_model` is the one-call form.

**Events beside text** (:class:`EventStreamer`): a ``generate(streamer=...)``
streamer for one constrained row that yields ``("text", str)`` pieces and
``("event", Event)`` parse events (``grid_core.events``) in generation order,
each event as soon as the tokens so far determine it. It reads the bytes of
the sampled tokens (events are a function of the output, so it needs no access
to the processor's guide); iterate it from another thread while ``generate``
runs, as with transformers' ``TextIteratorStreamer``.
"""

from __future__ import annotations

import bisect
import codecs
import contextlib
import inspect
import math
import queue
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import (
    LogitsProcessor,
    LogitsProcessorList,
    StoppingCriteria,
    StoppingCriteriaList,
    StopStringCriteria,
)
from transformers.generation.streamers import BaseStreamer

from grid_core import kernels
from grid_core.audit import AuditLog
from grid_core.decode import GREEDY, Generation, Sampling, decode
from grid_core.errors import ServingError
from grid_core.events import Event, EventSpec, tracker
from grid_core.guide import Engine
from grid_core.protocol import Guide, fill_rows
from grid_core.vocab import Vocabulary
from grid_serve.text2sql import Avoid
from grid_serve.torch import apply_bitmask_, unpack_bitmask

__all__ = [
    "CausalLMLogits",
    "EventStreamer",
    "ExitIntentLogits",
    "GridLogitsProcessor",
    "RowOutcome",
    "constrained_generate",
    "decode_with_model",
]


@dataclass(frozen=True)
class RowOutcome:
    """One batch row after :meth:`GridLogitsProcessor.finish`.

    ``tokens`` are the generated ids the row's guide accepted (EOS last when the
    row ended with it); ``text`` their spelling; ``complete`` whether the text
    is a sentence of L (it can be, and still be ``truncated``: EOS not emitted).
    """

    tokens: tuple[int, ...]
    text: bytes
    stop_reason: str
    complete: bool
    audit: AuditLog
    error: BaseException | None = None


@dataclass(eq=False)
class _Row:
    guide: Guide
    tokens: list[int] = field(default_factory=list)
    filled: bool = False
    """The guide filled the current step's mask (the one its next token is drawn under)."""
    error: BaseException | None = None
    stop_width: int | None = None
    """The width of ``input_ids`` at which a stopping criterion ended the row
    (:meth:`GridLogitsProcessor.watch`): its later columns are generate's padding."""

    @property
    def done(self) -> bool:
        return self.error is not None or self.guide.is_terminated()

    @property
    def ended(self) -> bool:
        """Done, or ended by a stopping criterion: no further mask is asked of it."""
        return self.done or self.stop_width is not None

    def fail(self, error: BaseException) -> None:
        self.error, self.filled = error, False


# Without torch installed (a lint-only environment) LogitsProcessor is Any.
class GridLogitsProcessor(LogitsProcessor):  # type: ignore[misc, unused-ignore]
    """Mode-2 masking for ``model.generate``: one guide per batch row (see the module header).

    ``guides`` must share one vocabulary (their engines may differ: one role per
    row is fine). ``budget`` (usually ``max_new_tokens``) is recorded in the seals.
    ``stop_on_exit`` turns on the exit-intent stop (module header); off, the
    applied mask is exactly the guide's.
    """

    def __init__(
        self,
        guides: Sequence[Guide],
        *,
        budget: int | None = None,
        stop_on_exit: bool = False,
    ) -> None:
        if not guides:
            raise ServingError("a GridLogitsProcessor needs at least one guide")
        vocabs = {g.engine.vocab.fingerprint for g in guides}
        if len(vocabs) != 1:
            raise ServingError("the guides of one batch must share one vocabulary")
        if not all(g.audited for g in guides):
            raise ServingError("every row is audited: build the guides with audit on")
        if any(g.steps for g in guides):  # the seal's budget counts the row's every record
            raise ServingError("every row starts from a fresh guide (no token accepted yet)")
        if len({id(g) for g in guides}) != len(guides):
            raise ServingError("every row has a guide of its own: one guide is given twice")
        self.vocab = guides[0].engine.vocab
        self.vocab.check_byte_complete()  # warns: completeness (never soundness) is void
        self.budget = budget
        self.stop_on_exit = stop_on_exit
        self._rows = [_Row(g) for g in guides]
        self._eos = frozenset(self.vocab.eos_ids)
        self._eos_id = self.vocab.eos_ids[0]  # the EOS the exit intent asks the mask about
        engine = guides[0].engine
        self._bitmask = torch.zeros((len(guides), engine.n_words), dtype=torch.int32)
        """The CPU rows the guides fill, reused at every call."""
        self._words = self._bitmask.numpy()
        """The same memory, as numpy (cheap reads and row writes)."""
        self._eos_words = torch.frombuffer(
            bytearray(engine.pack(self.vocab.eos_ids).tobytes()), dtype=torch.int32
        ).numpy()
        self._seen: int | None = None  # columns of input_ids already consumed
        self._start = 0  # the prompt's width (input_ids' at the first call)
        self._last: list[int] = []
        """Each row's last consumed column of ``input_ids``: the next call's
        ``input_ids`` must still hold it there (rows neither reordered nor replaced)."""
        self._consumed: Any = None
        """On the CPU, a copy of the ``input_ids`` columns consumed so far (numpy,
        rows x width): each call's must begin with them (:meth:`_check_history`)."""
        self._device = ""  # the batch's device type, input_ids' and logits' (first call)
        native = kernels.load()
        self._applier = None
        """The kernels' masking of CPU float32 logits with these rows (the exit
        intent included when ``stop_on_exit``), or None without the kernels."""
        self._logits_error: type[Exception] = TypeError  # the kernels' LogitsError
        if native is not None:
            exit_args = (self._eos_id, self._eos_words) if stop_on_exit else ()
            self._applier = native.BitmaskApplier(self._words, *exit_args)
            self._logits_error = native.LogitsError
        self._finished = False
        self.mask_seconds = 0.0
        """Wall time the calls spent computing and applying masks (what
        ``generate`` waits for), waits for work done ahead included."""
        self.ahead_seconds = 0.0
        """Wall time of the work done ahead, in the forward pass's shadow (:meth:`ahead`)."""
        self._filled_at: int | None = None  # the input width the rows were filled for
        self._ahead_of: tuple[torch.Tensor, int] | None = None
        """The ``input_ids`` handed ahead and the width they were filled for: the
        next call is given the same tensor object, and finding it there costs no
        torch call (each runs cold after a forward pass, about 20 µs)."""
        self._pending: Future[None] | None = None  # work handed ahead, not yet waited for
        self._ahead_done = False  # the worker finished the pending work without error
        self._pool: ThreadPoolExecutor | None = None

    @classmethod
    def for_engine(
        cls, engine: Engine, batch_size: int, *, budget: int | None = None
    ) -> GridLogitsProcessor:
        """A processor with ``batch_size`` fresh guides of one engine."""
        return cls([engine.guide() for _ in range(batch_size)], budget=budget)

    @property
    def guides(self) -> tuple[Guide, ...]:
        return tuple(r.guide for r in self._rows)

    @property
    def errors(self) -> tuple[BaseException | None, ...]:
        """Each row's sticky error (None while the row is healthy)."""
        return tuple(r.error for r in self._rows)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        t0 = time.perf_counter()
        if self._finished:
            raise ServingError("the processor is finished; use a new one per generate call")
        if self._seen is None:
            if input_ids.shape[0] != len(self._rows):
                raise ServingError(
                    f"batch of {input_ids.shape[0]} rows for {len(self._rows)} guides "
                    "(beam search and num_return_sequences > 1 are not supported)"
                )
            if scores.shape[-1] < self.vocab.n_vocab:
                raise ServingError(
                    f"logits of width {scores.shape[-1]} for a vocabulary of "
                    f"{self.vocab.n_vocab} ids"
                )
            self._seen = self._start = input_ids.shape[1]
            self._device = input_ids.device.type
            self._last = input_ids[:, -1].tolist()  # one sync on CUDA, before any step
            if self._device == "cpu":
                self._consumed = input_ids.numpy().copy()
            if self._device == "cuda":  # the rows' copy to the GPU is queued
                self._bitmask = self._bitmask.pin_memory()
                self._words = self._bitmask.numpy()
                self._applier = None  # it holds the old rows
        ahead, self._ahead_of = self._ahead_of, None
        self._settle()
        done = ahead is not None and ahead[0] is input_ids and self._filled_at == ahead[1]
        if not done and self._filled_at != input_ids.shape[1]:  # nothing was done ahead
            self._catch_up(input_ids)
            self._fill()
            self._filled_at = input_ids.shape[1]
        elif not done and self._device == "cpu":  # the width filled for, nothing ahead:
            # a new call given the same processor? The columns must be unchanged
            # (on CUDA this read would wait for the GPU: not checked there).
            self._check_history(input_ids.numpy())
        if not (self._device == "cpu" and self._apply_native(scores)):
            if self.stop_on_exit:
                self._exit_intent(scores)
            apply_bitmask_(scores, self._bitmask)
        self.mask_seconds += time.perf_counter() - t0
        return scores

    def watch(self, criteria: Sequence[StoppingCriteria]) -> StoppingCriteria:
        """A stopping criterion for ``generate(stopping_criteria=...)`` that applies
        ``criteria`` (a stop string's ``StopStringCriteria``, a caller's own) and
        tells the processor which rows they end. ``generate`` pads a row a
        criterion ends; without this the padding would reach the row's guide as
        sampled tokens (an EOS pad recorded as an ``eos`` step the model never
        chose, or a refused one failing the row). A row it ends is sealed
        ``truncated``. :func:`constrained_generate` wraps the criteria and stop
        strings it is given; a caller of ``model.generate`` with per-row criteria
        passes them through this. On CUDA each step reads the criteria's answer
        (one device sync)."""
        return _Watched(self, criteria)

    def _stopped(self, done: list[bool], width: int) -> None:
        """Rows ``done`` marks end at ``width`` (the first to say so wins)."""
        for row, stop in zip(self._rows, done, strict=True):
            if stop and row.stop_width is None and not row.done:
                row.stop_width = width

    def ahead(self) -> StoppingCriteria:
        """A stopping criterion for ``generate(stopping_criteria=...)`` that does
        each step's catch-up and fill during the next forward pass (module
        header). It never stops a row. Inert on ``input_ids`` neither on the CPU
        nor on CUDA, and after :meth:`finish`."""
        return _Ahead(self)

    def _prefetch(self, input_ids: torch.Tensor) -> None:
        """Hand the catch-up with ``input_ids`` and the next fill to the worker
        (called between sampling and the next forward pass). At the budget's
        last token only the catch-up: no further mask will be asked for."""
        if self._finished or self._seen is None or self._device not in ("cpu", "cuda"):
            return
        self._settle()
        width = input_ids.shape[1]
        start = self._check_width(width)
        columns = input_ids[:, start:]
        new: list[list[int]] | torch.Tensor
        ready = None
        if self._device == "cpu":
            self._check_history(input_ids.numpy())
            new = columns.numpy().tolist()  # read here: generate goes on
        else:  # queued behind the sampling; the worker waits for it (module header)
            new = torch.empty(columns.shape, dtype=columns.dtype, pin_memory=True)
            new.copy_(columns, non_blocking=True)
            ready = torch.cuda.Event()  # type: ignore[no-untyped-call, unused-ignore]
            ready.record()
        self._seen = width
        last = self.budget is not None and width - self._start >= self.budget
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="grid-ahead")
        self._ahead_done = False
        self._pending = self._pool.submit(self._advance, new, start, ready, None if last else width)
        self._ahead_of = (input_ids, width)

    def _advance(
        self,
        new: list[list[int]] | torch.Tensor,
        start: int,
        ready: Any | None,
        width: int | None,
    ) -> None:
        """The worker's part of a step: accept ``new`` (from column ``start``, once
        ``ready``, a CUDA event, has passed), then fill for ``width``."""
        if ready is not None:
            ready.synchronize()
        t0 = time.perf_counter()
        self._accept_new(new if isinstance(new, list) else new.tolist(), start)
        if width is not None:
            self._fill()
            self._filled_at = width
        self.ahead_seconds += time.perf_counter() - t0
        self._ahead_done = True  # last: _settle then skips the future's lock

    def _settle(self) -> None:
        """Wait for the work handed ahead; its error (a bug: row errors are
        sticky on their rows) is raised here, on the caller's thread."""
        pending, self._pending = self._pending, None
        if pending is not None and not self._ahead_done:  # usually done: no lock taken
            pending.result()

    def _catch_up(self, input_ids: torch.Tensor) -> None:
        ids = input_ids.numpy() if self._device == "cpu" else input_ids  # a view: no torch op
        start = self._check_width(input_ids.shape[1])
        if self._device == "cpu":
            self._check_history(ids)
        new = ids[:, start:].tolist()
        self._accept_new(new, start)
        self._seen = input_ids.shape[1]

    def _check_width(self, width: int) -> int:
        """The first column to read of ``input_ids`` ``width`` wide: the last
        one consumed (checked again by :meth:`_accept_new`), then the new ones."""
        assert self._seen is not None
        if width < self._seen:
            raise ServingError(
                f"input_ids of width {width} after width {self._seen}: a processor serves "
                "one generate call (assisted generation is not supported)"
            )
        return self._seen - 1

    def _check_history(self, ids: Any) -> None:
        """CPU: ``ids`` (this call's ``input_ids`` as numpy, at least as wide as
        what was consumed) begin with the consumed columns, row by row; then they
        are the consumed columns. Raises ServingError naming the first row that
        changed (nothing accepted)."""
        seen = self._consumed.shape[1]
        same = (ids[:, :seen] == self._consumed).all(axis=1)
        if not same.all():
            row = int((~same).argmax())
            raise ServingError(
                f"row {row}'s consumed tokens changed between calls: rows were reordered "
                "(beam search) or replaced (a new generate call); a processor serves one "
                "generate call without beams"
            )
        self._consumed = ids.copy()

    def _accept_new(self, new: list[list[int]], start: int) -> None:
        """Accept each row's new tokens; ``new[i][0]`` is row i's last consumed
        column (column ``start`` of ``input_ids``), which must be unchanged (else a
        set-up mistake: nothing accepted). A row's columns from its ``stop_width``
        on are generate's padding, as are those after its EOS or its failure."""
        moved = [
            i for i, (old, now) in enumerate(zip(self._last, new, strict=True)) if old != now[0]
        ]
        if moved:
            raise ServingError(
                f"row {moved[0]}'s last token changed between calls: rows were reordered "
                "(beam search) or replaced (a new generate call); a processor serves one "
                "generate call without beams"
            )
        for i, (row, columns) in enumerate(zip(self._rows, new, strict=True)):
            self._last[i] = columns[-1]
            end = len(columns) if row.stop_width is None else row.stop_width - start
            for token in columns[1:end]:
                if row.done:
                    break  # generate pads a finished row; its tokens are not the guide's
                self._accept(row, int(token))

    def _accept(self, row: _Row, token: int) -> None:
        if not row.filled:
            row.fail(ServingError(f"token {token} arrived before its step's mask"))
            return
        try:
            row.guide.accept_token(token)  # records the step (EOS as eos)
        except Exception as e:  # sticky: the row fails, the batch goes on
            row.fail(e)
            return
        row.tokens.append(token)
        row.filled = False

    def _fill(self) -> None:
        """Fill every row: a live row's exact mask (its guides in one batch call),
        EOS only for a row that is done or whose fill fails."""
        live = [i for i, row in enumerate(self._rows) if not row.ended]
        errors = fill_rows([self._rows[i].guide for i in live], self._words, rows=live)
        for i, error in zip(live, errors, strict=True):
            if error is None:
                self._rows[i].filled = True
            else:  # sticky: the row fails, the batch goes on
                self._rows[i].fail(error)
        for i, row in enumerate(self._rows):
            if not row.filled:
                self._words[i] = self._eos_words

    def _apply_native(self, scores: torch.Tensor) -> bool:
        """Mask ``scores`` in place with the kernels, the exit intent included, in
        one call that reads a CPU float32 tensor's memory directly (no torch op,
        no numpy view: each costs about 20 µs cold after a forward pass). False,
        nothing done, without the kernels or for logits they do not read (another
        dtype, a tensor needing grad)."""
        if self._applier is None:
            return False
        try:
            self._applier.apply(scores)
        except self._logits_error:  # logits the kernels do not read
            return False
        return True

    def _exit_intent(self, scores: torch.Tensor) -> None:
        """EOS only on each filled row where EOS is legal and the model's own top
        token (before masking) is one the mask refuses (module header). The
        kernels' fast path (``apply_token_bitmask`` with ``exit_token``) decides
        the same for every row: a row not filled holds the EOS-only row already,
        which that rule leaves as it is."""
        eos = self._eos_id
        words = self._words
        for i, row in enumerate(self._rows):
            if not row.filled or not _admits(words[i], eos):
                continue
            top = int(scores[i].argmax())
            if not _admits(words[i], top):
                words[i] = self._eos_words

    def finish(self, sequences: torch.Tensor) -> list[RowOutcome]:
        """Catch up with ``generate``'s output (``[batch, prompt + new]``) and seal
        every row. If that fails (sequences that are not this call's rows: a
        ``ServingError``), every row is sealed as :meth:`abort` seals it and the
        error is raised with those outcomes as its ``grid_outcomes``."""
        self._check_unfinished()
        try:
            self._stop_work(raising=True)
            if self._seen is not None:
                self._catch_up(sequences)
        except BaseException as error:
            why = "finish failed before this row ended"
            error.grid_outcomes = self._seal_rows(why)  # type: ignore[attr-defined]
            raise
        return self._seal_rows(None)

    def abort(self) -> list[RowOutcome]:
        """Seal every row after ``generate`` raised (no sequences to catch up
        with): the work handed ahead is waited for (its own error dropped: the
        one ``generate`` raised is the one to report), and each row's log ends
        with the last step its guide accepted, sealed ``eos`` if that step was
        EOS, ``truncated`` if a stopping criterion had ended the row
        (:meth:`watch`), else ``error`` (the row's outcome then carries its own
        error, or a :class:`~grid_core.errors.ServingError` saying that
        ``generate`` raised). Call it instead of :meth:`finish`;
        :func:`constrained_generate` does, then raises ``generate``'s error; the
        sealed logs stay on the guides (``guide.audit_log()``)."""
        self._check_unfinished()
        self._stop_work(raising=False)
        return self._seal_rows("generate raised before this row ended")

    def _check_unfinished(self) -> None:
        if self._finished:
            raise ServingError("the processor is already finished")

    def _stop_work(self, raising: bool) -> None:
        """Wait for the work handed ahead (its error raised if ``raising``) and
        end the worker; the processor is finished from here on."""
        self._finished = True
        self._ahead_of = None
        try:
            self._settle()
        except Exception:
            if raising:
                raise
        finally:
            if self._pool is not None:
                self._pool.shutdown()

    def _seal_rows(self, aborted: str | None) -> list[RowOutcome]:
        """Seal every row's log (see :meth:`finish` and :meth:`abort`);
        ``aborted`` says why a row still running was cut short (None: finished)."""
        mode: dict[str, object] = {"mode": 2}
        if self.budget is not None:
            mode["budget"] = self.budget
        outcomes = []
        for row in self._rows:
            guide, error = row.guide, row.error
            if guide.is_terminated():
                stop = "eos"
            elif error is not None:
                stop = "error"
            elif aborted is None or row.stop_width is not None:
                stop = "truncated"
            else:
                stop, error = "error", ServingError(aborted)
            audit = guide.seal(stop, mode)
            spell = self.vocab.token_bytes
            text = b"".join(spell[t] for t in row.tokens if t not in self._eos)
            complete = guide.is_terminated() or (stop == "truncated" and _complete(guide))
            outcomes.append(RowOutcome(tuple(row.tokens), text, stop, complete, audit, error))
        return outcomes


class _Ahead(StoppingCriteria):  # type: ignore[misc, unused-ignore]
    """:meth:`GridLogitsProcessor.ahead`'s criterion: it never stops a row."""

    def __init__(self, processor: GridLogitsProcessor) -> None:
        self.processor = processor
        self._never: torch.Tensor | None = None  # the all-False answer, made once

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        self.processor._prefetch(input_ids)
        never = self._never
        if never is None or never.shape[0] != input_ids.shape[0]:
            # generate only reads a criterion's answer (``is_done | answer``): one
            # tensor serves every step, no allocation and fill on the device each time.
            never = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
            self._never = never
        return never


class _Watched(StoppingCriteria):  # type: ignore[misc, unused-ignore]
    """:meth:`GridLogitsProcessor.watch`'s criterion: ``criteria``'s answer, each
    row it ends told to the processor."""

    def __init__(self, processor: GridLogitsProcessor, criteria: Sequence[StoppingCriteria]):
        self.processor = processor
        self.criteria = StoppingCriteriaList(list(criteria))

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        done: torch.Tensor = self.criteria(input_ids, scores, **kwargs)
        self.processor._stopped(done.tolist(), input_ids.shape[1])
        return done


def _admits(words: Any, token: int) -> bool:
    """Whether a filled bitmask row (a numpy view of its words) admits ``token``;
    a column past the row's words (a logits row wider than the vocabulary) never is."""
    return token >> 5 < len(words) and bool(int(words[token >> 5]) >> (token & 31) & 1)


def _complete(guide: Guide) -> bool:
    """The guide's output is a sentence of L (a failed guide's verdict is no)."""
    try:
        return guide.eos_allowed()
    except Exception:
        return False


#: The ``generate`` arguments :func:`constrained_generate` sets itself.
_OWNED_GENERATE_ARGS = frozenset(
    {
        "input_ids",
        "attention_mask",
        "max_new_tokens",
        "logits_processor",
        "eos_token_id",
        "pad_token_id",
    }
)


def constrained_generate(
    model: Any,
    guides: Sequence[Guide],
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    *,
    processors: Sequence[LogitsProcessor] = (),
    after: Sequence[LogitsProcessor] = (),
    stop_on_exit: bool = False,
    **generate_kwargs: Any,
) -> tuple[list[RowOutcome], GridLogitsProcessor]:
    """Mode 2 in one call: ``model.generate`` over left-padded prompts with GRID's processor.

    Greedy unless ``generate_kwargs`` say otherwise. GRID's mask is applied last of
    the logits processors, so it stays hard: ``processors`` run before it, as do
    transformers' own from ``generate_kwargs`` (``repetition_penalty=1.2``, say);
    only the sampling warpers (temperature, top-k, top-p) come after, and they never
    raise a -inf logit. ``after`` processors see the masked scores (observers); one
    that changes them cannot slip a token past GRID: a row that samples a token
    outside its mask fails with a ``GuideError`` (sticky; the batch goes on).
    The processor's :meth:`~GridLogitsProcessor.ahead` criterion is added to any
    ``stopping_criteria`` given, so that each step's guide work overlaps the
    forward pass. ``stopping_criteria`` and ``stop_strings`` (with
    ``tokenizer=``; the model's own ``generation_config.stop_strings`` too) are
    applied through :meth:`~GridLogitsProcessor.watch`: a row they end is sealed
    ``truncated``, and generate's padding after it never reaches its guide.
    Returns the outcomes and the processor. If ``generate`` raises, every row is
    sealed first (:meth:`~GridLogitsProcessor.abort`) and its error is raised
    with those outcomes as its ``grid_outcomes`` attribute.
    """
    if len(guides) != len(prompts):
        raise ServingError(f"{len(guides)} guides for {len(prompts)} prompts")
    owned = sorted(set(generate_kwargs) & _OWNED_GENERATE_ARGS)
    if owned:  # a raw TypeError ("multiple values for keyword argument") otherwise
        raise ServingError(
            f"constrained_generate sets {', '.join(owned)} itself (the guides' EOS ids, "
            "left padding, the budget, GRID's processor): leave them out"
        )
    vocab = guides[0].engine.vocab
    pad = vocab.eos_ids[0]
    width = max(len(p) for p in prompts)
    device = model.device
    ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], device=device)
    attention = torch.tensor(
        [[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device
    )
    processor = GridLogitsProcessor(guides, budget=max_new_tokens, stop_on_exit=stop_on_exit)
    kwargs: dict[str, Any] = {"do_sample": False, **generate_kwargs}
    watched = list(kwargs.get("stopping_criteria", ()))
    config = getattr(model, "generation_config", None)
    stop_strings = kwargs.pop("stop_strings", None) or getattr(config, "stop_strings", None)
    if stop_strings:
        if kwargs.get("tokenizer") is None:
            raise ServingError("stop_strings need the model's tokenizer: pass tokenizer=...")
        watched.append(StopStringCriteria(tokenizer=kwargs["tokenizer"], stop_strings=stop_strings))
    kwargs["stop_strings"] = None  # applied by the watched criteria, not by generate
    kwargs["stopping_criteria"] = StoppingCriteriaList(
        [*([processor.watch(watched)] if watched else []), processor.ahead()]
    )
    try:
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=attention,
                max_new_tokens=max_new_tokens,
                logits_processor=LogitsProcessorList([*processors, processor, *after]),
                eos_token_id=list(vocab.eos_ids),
                pad_token_id=pad,
                **kwargs,
            )
    except BaseException as error:  # every row's log is sealed, then generate's error goes on
        error.grid_outcomes = processor.abort()  # type: ignore[attr-defined]
        error.add_note("grid: every row's audit log is sealed (the error's grid_outcomes)")
        raise
    # return_dict_in_generate=True gives a ModelOutput whose ids are its sequences
    return processor.finish(getattr(out, "sequences", out)), processor


class CausalLMLogits:
    """A causal LM as grid-core's ``LogitsFn``: ``self(tokens) -> logits`` after prompt + tokens.

    Keeps the KV cache of the last sequence it was asked about; a call whose
    tokens extend it feeds only the new ones (forced and reserve steps, which
    do not call the model, arrive as several new tokens at once). Any other
    sequence (a rollback) is recomputed from the prompt. Returns a 1-D float
    tensor of the logits width. ``calls``, ``forwarded`` and ``seconds`` count
    the model work; ``on_call(len(tokens))`` is told of every call (progress).
    With ``n_vocab``, logits narrower than that many ids raise
    :class:`~grid_core.errors.ServingError` (mode 2's check: a greedy decode
    would never score the ids past the width, EOS among them).
    """

    def __init__(
        self,
        model: Any,
        prompt_ids: Sequence[int],
        on_call: Callable[[int], None] | None = None,
        n_vocab: int | None = None,
    ) -> None:
        if not prompt_ids:
            raise ServingError("a model prompt needs at least one token")
        self.model = model
        self.prompt = tuple(int(i) for i in prompt_ids)
        # transformers >= 5.x names the KV cache ``cache``; earlier, ``past_key_values``.
        params = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self._ids: tuple[int, ...] = ()
        self._cache: Any = None
        self._logits: torch.Tensor | None = None
        self.on_call = on_call
        self.n_vocab = n_vocab
        self.calls = 0
        self.forwarded = 0
        self.seconds = 0.0

    def __call__(self, tokens: Sequence[int]) -> torch.Tensor:
        if self.on_call is not None:
            self.on_call(len(tokens))
        want = self.prompt + tuple(tokens)
        if want == self._ids and self._logits is not None:
            return self._logits
        t0 = time.perf_counter()
        known = len(self._ids)
        if not (self._cache is not None and known < len(want) and want[:known] == self._ids):
            self._cache, known = None, 0  # not an extension: start again from the prompt
        new = torch.tensor([want[known:]], device=self.model.device)
        with torch.inference_mode():
            out = self.model(input_ids=new, use_cache=True, **{self._cache_arg: self._cache})
        self._cache, self._ids = getattr(out, self._cache_arg), want
        self._logits = out.logits[0, -1].float()
        if self.n_vocab is not None and self._logits.shape[-1] < self.n_vocab:
            raise ServingError(
                f"logits of width {self._logits.shape[-1]} for a vocabulary of {self.n_vocab} ids"
            )
        self.calls += 1
        self.forwarded += len(want) - known
        self.seconds += time.perf_counter() - t0
        return self._logits


class RepetitionPenaltyLogits:
    """Repetition control for mode 1, before the mask: wraps a ``LogitsFn``.

    Every token id the decode has written so far (prompt excluded) has its logit
    divided by ``penalty`` when positive and multiplied by it when negative (the
    CTRL rule transformers' ``repetition_penalty`` applies in mode 2), so a model
    caught in ``Name, Name, Name`` or ``_LONG_LONG_LONG`` prefers something new.
    It only reweighs what the mask will then filter: the mask is applied after it,
    exact and hard. ``penalty`` 1 is off.
    """

    def __init__(self, inner: Callable[[Sequence[int]], torch.Tensor], penalty: float) -> None:
        if not (math.isfinite(penalty) and penalty >= 1):
            raise ServingError(f"the repetition penalty must be a number >= 1, not {penalty}")
        self.inner, self.penalty = inner, penalty

    def __call__(self, tokens: Sequence[int]) -> torch.Tensor:
        logits = self.inner(tokens)
        if self.penalty == 1 or not tokens:
            return logits
        seen = torch.tensor(sorted(set(tokens)), dtype=torch.long, device=logits.device)
        logits = logits.clone()
        row = logits.reshape(-1)
        values = row[seen]
        row[seen] = torch.where(values > 0, values / self.penalty, values * self.penalty)
        return logits


class ExitIntentLogits:
    """The exit-intent stop for mode 1: wraps a ``LogitsFn`` of one guide's decode.

    The model's own top token (over the whole row) signals the end of its answer
    when the mask refuses it, or when it is a closing code fence (`````` ``` ``````:
    the prompt opens the answer with a fence). A fence counts even where the mask
    admits it: in SQLite a backtick opens a quoted identifier, and a model that
    closes its answer there goes on writing its explanation inside a quoted alias.

    - At a step where EOS is legal and the model signals the end, the returned
      logits make EOS the top choice by a margin of 1e4 (under any temperature up
      to hundreds, EOS is taken). The mask is untouched: EOS is a member of it.
    - Where EOS is not yet legal, :meth:`finish` (``decode``'s ``finish``) is
      True when the top token is an EOS id or a fence and signals the end. The
      loop then writes the reserve's shortest completion and EOS (stop reason
      ``exit``) instead of letting the model write on inside the statement with
      the answer it has ended (the loops issue #16 found).
    """

    def __init__(self, inner: Callable[[Sequence[int]], torch.Tensor], guide: Guide) -> None:
        self.inner, self.guide = inner, guide
        self.exits = 0
        self.finishes = 0
        self.ends = answer_ends(guide.engine.vocab)
        self.fences = self.ends - set(guide.engine.vocab.eos_ids)

    def _ends_answer(self, top: int) -> bool:
        return top in self.fences or not _admissible(self.guide, top)

    def finish(self, logits: torch.Tensor) -> bool:
        """True when EOS is not legal yet and the model's top token (over the whole
        row) is an EOS id or a fence that signals the end: the answer ends here."""
        if self.guide.eos_allowed():  # __call__ has decided this step (and read the top)
            return False
        top = _top(logits)
        if top not in self.ends or not self._ends_answer(top):
            return False
        self.finishes += 1
        return True

    def __call__(self, tokens: Sequence[int]) -> torch.Tensor:
        logits = self.inner(tokens)
        guide = self.guide
        if not guide.eos_allowed():
            return logits
        top = _top(logits)
        if not self._ends_answer(top):
            return logits
        self.exits += 1
        out = logits.clone()
        row = out.reshape(-1)  # (V,) or (1, V): one row, a view of ``out``
        finite = torch.isfinite(row)
        high = float(row[finite].max()) if bool(finite.any()) else 0.0
        row[~finite] = -math.inf  # a NaN or +inf elsewhere would outrank EOS
        row[list(guide.engine.vocab.eos_ids)] = high + 1e4
        return out


class DivergeLogits:
    """A retry's divergence from a rejected statement, as logits: wraps a ``LogitsFn`` of
    one guide's decode (``decode_with_model(..., avoid=...)``).

    While the guide's output is ``avoid.statement[:k]`` with ``k <= avoid.at`` (the
    byte where the statement's first violation starts), every token whose spelling
    starts with ``statement[k : at + 1]`` gets logit -inf: a sampled step never
    writes the rejected statement's bytes through the point where it went wrong.
    The mask is untouched (applied after, as always). Steps the model does not
    choose (jump-forward's singleton masks, the reserve's completion) are the
    grammar's: a retry reproduces the statement only if the grammar forces its
    byte at ``at``, which no violation's span is (a name, a ``*``).
    """

    def __init__(
        self, inner: Callable[[Sequence[int]], torch.Tensor], guide: Guide, avoid: Avoid
    ) -> None:
        self.inner, self.guide, self.avoid = inner, guide, avoid
        self.spellings, self.ids = spelling_index(guide.engine.vocab)
        self.blocked = 0

    def __call__(self, tokens: Sequence[int]) -> torch.Tensor:
        logits = self.inner(tokens)
        out, (statement, at) = self.guide.output(), (self.avoid.statement, self.avoid.at)
        if len(out) > at or not statement.startswith(out):
            return logits  # diverged already, or past the violation without its byte
        prefix = statement[len(out) : at + 1]
        lo = bisect.bisect_left(self.spellings, prefix)
        hi = lo
        while hi < len(self.spellings) and self.spellings[hi].startswith(prefix):
            hi += 1
        if lo == hi:
            return logits
        self.blocked += 1
        logits = logits.clone()
        logits[..., list(self.ids[lo:hi])] = float("-inf")
        return logits


_SPELLINGS: dict[str, tuple[list[bytes], tuple[int, ...]]] = {}


def spelling_index(vocab: Vocabulary) -> tuple[list[bytes], tuple[int, ...]]:
    """The vocabulary's non-empty spellings in byte order and their ids, aligned: the
    ids of the tokens spelled from a prefix are one contiguous run (cached)."""
    index = _SPELLINGS.get(vocab.fingerprint)
    if index is None:
        pairs = sorted((b, i) for i, b in enumerate(vocab.token_bytes) if b)
        index = _SPELLINGS.setdefault(
            vocab.fingerprint, ([b for b, _ in pairs], tuple(i for _, i in pairs))
        )
    return index


_ANSWER_ENDS: dict[str, frozenset[int]] = {}


def answer_ends(vocab: Vocabulary) -> frozenset[int]:
    """Token ids that end a model's answer: its EOS ids, and every token spelled from a
    closing code fence (leading whitespace allowed). Computed once per vocabulary."""
    ends = _ANSWER_ENDS.get(vocab.fingerprint)
    if ends is None:
        fences = (i for i, b in enumerate(vocab.token_bytes) if b.lstrip().startswith(b"```"))
        ends = _ANSWER_ENDS.setdefault(vocab.fingerprint, frozenset(vocab.eos_ids).union(fences))
    return ends


def _admissible(guide: Guide, token: int) -> bool:
    """Whether the guide's mask admits ``token`` (the guide unchanged)."""
    return guide.validate_tokens([token]) == 1


def decode_with_model(
    model: Any,
    guide: Guide,
    prompt_ids: Sequence[int],
    budget: int,
    sampling: Sampling = GREEDY,
    rng: random.Random | None = None,
    *,
    stop_on_exit: bool = False,
    on_call: Callable[[int], None] | None = None,
    avoid: Avoid | None = None,
    repetition_penalty: float = 1.0,
    **decode_kwargs: Any,
) -> tuple[Generation, CausalLMLogits]:
    """Mode 1 with a transformers model: :func:`grid_core.decode.decode` over its logits.

    ``stop_on_exit`` turns on the exit-intent stop (:class:`ExitIntentLogits`: EOS
    where it is legal, the shortest completion where it is not); ``avoid`` makes a
    retry diverge from a rejected statement (:class:`DivergeLogits`);
    ``repetition_penalty`` reweighs the tokens written so far
    (:class:`RepetitionPenaltyLogits`; 1 is off); all of them act on the logits
    before the mask, which is applied last;
    ``decode_kwargs`` go to ``decode`` (``safety``, ``jump_forward``).
    """
    guide.engine.vocab.check_byte_complete()
    logits = CausalLMLogits(model, prompt_ids, on_call, guide.engine.vocab.n_vocab)
    fn: Callable[[Sequence[int]], torch.Tensor] = logits
    if repetition_penalty != 1:
        fn = RepetitionPenaltyLogits(fn, repetition_penalty)
    if avoid is not None:
        fn = DivergeLogits(fn, guide, avoid)
    finish = None
    if stop_on_exit:
        fn = exit_intent = ExitIntentLogits(fn, guide)
        finish = exit_intent.finish
    pick = masked_argmax if sampling.temperature == 0 else None
    gen = decode(guide, fn, budget, sampling, rng, pick=pick, finish=finish, **decode_kwargs)
    return gen, logits


def _top(logits: torch.Tensor) -> int:
    """The model's own top token over the whole row: the first maximum, NaN
    counting as the maximum (torch's and numpy's argmax agree on both). CPU
    float32 logits go to the kernels, read in place: a torch op costs about
    0.1 ms cold after a CPU forward pass."""
    native = kernels.load()
    if native is not None:
        try:
            top: int | None = native.first_argmax(logits)  # over all its elements: one row
        except native.LogitsError:  # logits the kernels do not read (another device or dtype)
            top = None
        if top is not None:
            return top
    return int(logits.argmax())


def masked_argmax(logits: torch.Tensor, row: Any) -> int | None:
    """Greedy choice under a packed mask row (``array('i')``), the logits
    untouched: the admitted token of the highest logit, the lowest id among ties
    (as ``Sampling.choose`` at temperature 0), NaN never chosen. None when no
    admitted logit is finite (then ``Sampling`` decides, as it would without
    this). CPU float32 logits go to the kernels, read in place (one pass over
    the admitted ids, no torch op: 0.65 ms of torch ops per token before); any
    other on their device, by an unpack and ``masked_fill``, decision for
    decision the same (``test_masked_argmax_is_the_same_on_both_paths``)."""
    native = kernels.load()
    if native is not None:
        try:
            choice: int | None = native.masked_argmax(logits, row)
            return choice
        except native.LogitsError:  # logits the kernels do not read (another device or dtype)
            pass
    words = torch.frombuffer(row, dtype=torch.int32)
    row_logits = logits.reshape(-1)
    allowed = unpack_bitmask(words.to(row_logits.device), row_logits.shape[-1])
    masked = row_logits.masked_fill(~allowed | row_logits.isnan(), float("-inf"))
    best = int(masked.argmax())
    if not torch.isfinite(masked[best]):
        return None
    return best


StreamItem = tuple[str, str | Event]
"""``("text", piece)`` or ``("event", event)``."""


class EventStreamer(BaseStreamer):  # type: ignore[misc, unused-ignore]
    """Text and parse events of one generated row (see the module header).

    Precondition: the row is constrained by GRID with ``engine`` (its tokens are
    in the mask), and ``generate`` has batch size 1. The first ``put`` is the
    prompt and is skipped; tokens after EOS (padding) are ignored. Iterating
    yields the items until ``generate`` calls :meth:`end`; with ``timeout``
    (seconds), a wait longer than that raises ``queue.Empty`` (as transformers'
    ``TextIteratorStreamer``), so a consumer is not left waiting when
    ``generate`` raises before it ends the stream. :meth:`end` also resets the
    streamer for the next ``generate`` call (the next ``put`` is a prompt). A
    ``generate`` that raised never called it: call :meth:`end` yourself before
    the streamer serves another call, or that call's prompt is read as output
    (nothing in a ``put`` tells a prompt from tokens: assisted decoding puts
    rows of several tokens too). When a consumer gave up on a call (its wait
    timed out), what it left unread of that call is dropped at the next call's
    prompt, up to that call's end; a consumer that is only slow loses nothing.
    A consumer of the next call should start iterating after ``generate`` has
    begun, or it may still read the abandoned items.

    A row whose output cannot be read on (an EOS where it is no sentence: what
    :class:`GridLogitsProcessor` writes to end a failed row) stops its events
    there and keeps the error in :attr:`error`; it never raises into
    ``generate``, whose other rows and stopping it would break.
    """

    def __init__(self, engine: Engine, spec: EventSpec, *, timeout: float | None = None) -> None:
        self.engine = engine
        self.tracker = tracker(engine, spec)
        self.items: queue.Queue[StreamItem | None] = queue.Queue()
        self.timeout = timeout
        self._start()
        self._prompt_seen = False
        self._calls = 0  # the generate calls begun (prompts seen)
        self._abandoned: int | None = None
        """The call (1-based) a consumer gave up on (its wait timed out), whose
        unread items are dropped when a later call begins."""

    def _start(self) -> None:
        """A fresh row (at each ``generate`` call's prompt)."""
        self.track = self.tracker.start()
        self._text = codecs.getincrementaldecoder("utf-8")("replace")
        self.error: BaseException | None = None
        """Why the events stopped before the output ended (None: they did not);
        kept after :meth:`end`, until the next call's prompt."""

    def put(self, value: Any) -> None:
        ids = value.tolist() if hasattr(value, "tolist") else list(value)
        if ids and isinstance(ids[0], list):
            if len(ids) != 1:
                raise ServingError(f"EventStreamer streams one row, not a batch of {len(ids)}")
            ids = ids[0]
        if not self._prompt_seen:
            self._start()
            self._calls += 1
            if self._abandoned is not None and self._abandoned < self._calls:
                self._drop_unread()
            self._prompt_seen = True
            return
        for token in ids:
            try:
                self._take(int(token))
            except Exception as e:  # sticky: the events stop, generate goes on
                self.error = e

    def _drop_unread(self) -> None:
        """Drop what is left of the call a consumer gave up on (the queue's head:
        the consumer had read all before it), its end marker included."""
        self._abandoned = None
        with contextlib.suppress(queue.Empty):
            while self.items.get_nowait() is not None:
                pass

    def end(self) -> None:
        tail = self._text.decode(b"", final=True)
        if tail:
            self.items.put(("text", tail))
        self.items.put(None)
        self._prompt_seen = False  # the next put is the next call's prompt

    def __iter__(self) -> Any:
        while True:
            try:
                item = self.items.get(timeout=self.timeout)
            except queue.Empty:  # the consumer gives up on the call it waits for
                self._abandoned = self._calls + (not self._prompt_seen)
                raise
            if item is None:
                self._abandoned = None  # a consumer read the abandoned call to its end
                return
            yield item

    def _take(self, token: int) -> None:
        if self.track.terminated or self.error is not None:
            return
        before = self.track.count
        vocab = self.engine.vocab
        if token in vocab.eos_ids:
            self.track = self.tracker.finish(self.track)
        else:
            data = vocab.token_bytes[token]
            self.track = self.tracker.advance(self.track, data)
            piece = self._text.decode(data)
            if piece:
                self.items.put(("text", piece))
        for event in self.track.event_list(since=before):
            self.items.put(("event", event))
