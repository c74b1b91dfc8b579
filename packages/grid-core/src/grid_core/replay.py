"""Replay: re-derive an audit log from its archived artifacts, record by record.

Reference: DESIGN.md section 9 ("a log replays against its archived artifacts
to bit-identical records"); the format and the checks are in ``docs/audit.md``.

Verification (:func:`grid_core.audit.verify`) checks that a log is internally
consistent: the chain links and the seal matches. Replay checks that it is
*true of the artifacts*: given the :class:`~grid_core.guide.Engine` built from
the same grammar, lexicon and vocabulary, it

1. verifies the log (with the anchor, when one is given);
2. compares the seal's artifact fingerprints with ``engine.fingerprints()``
   and names every artifact that differs;
3. drives a fresh guide with the logged tokens and recomputes every record:
   the configuration hash before the step, the content address of the step's
   mask, that the token is in the mask, the blocked count, and the chaining
   (``prev_hash``, ``hash``). The kind is an input, not a result (a sampled
   and a reserve step look the same to the mask), but it is checked where the
   artifacts decide it: ``eos`` exactly at an EOS token, ``forced`` only at a
   singleton mask, only ``reserve`` steps and EOS after a ``reserve`` step
   (the reserve writes the end: the loop never samples again), and that tail
   is exactly the reserve's completion from the configuration where it
   starts, then the vocabulary's first EOS id (``decode._Loop.write_completion``:
   the artifacts decide it token by token); nothing after EOS; when the
   seal's mode has ``jump_forward`` (decode.py's forced spans), a singleton
   mask outside the reserve tail is ``forced`` unless the ``jump_forward``
   steps before it were all forced, and no forced span is longer;
4. checks the seal against the replay: a stop reason that claims EOS (``eos``,
   ``reserve``) iff the last record is EOS, ``eos`` without reserve steps, the
   record count within ``mode.budget`` when the seal has one, and the
   statement ``grid ask`` wrote (``mode.decoded_from_first``, else
   ``mode.statement``) equal to the replayed tokens' text (UTF-8, errors
   replaced).

It reports the first step that differs and why. Replay re-derives what the
artifacts decide; it cannot tell one legal generation from another (swap a
sampled token for another admitted one and rewrite the chain, and the forgery
is a legal log): that is the anchor's job.

A log written by a guide whose language is not its engine's (grid-sql's
column-scoped guide, :mod:`grid_sql.column_scope`) replays against a fresh
guide of that language (``replay(..., guide=...)``): any :class:`ReplayGuide`,
whose ``fingerprints()`` the seal's are compared with.

The masks a replay recomputes do not depend on any cache or its namespace:
``mask_entry_id`` addresses the packed mask itself, so a log replays across a
cache rollover and against an engine with its cache off.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal, Protocol

from grid_core.audit import GENESES, Kind, Record, read, read_lines
from grid_core.decode import reserve_source
from grid_core.guide import Engine, GridGuide

Stage = Literal["chain", "artifacts", "replay", "seal"]

#: Stop reasons that say the output ended with EOS (decode.py's ``eos``, ``reserve`` and ``exit``).
EOS_STOPS = frozenset({"eos", "reserve", "exit"})


@dataclass(frozen=True)
class ReplayVerdict:
    """The outcome of a replay.

    ``stage`` names the check that failed: ``chain`` (verification),
    ``artifacts`` (fingerprints), ``replay`` (a record differs) or ``seal``
    (the seal disagrees with the replay). ``first_bad_step`` is ``None`` for a
    problem of the seal or of the artifacts; ``field`` names the record field
    that differs; ``artifacts`` the artifacts whose fingerprints differ.
    """

    ok: bool
    records: int
    first_bad_step: int | None = None
    reason: str = ""
    stage: Stage | None = None
    field: str | None = None
    artifacts: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.ok:
            return f"REPLAYS: {self.records} records bit-identical against the artifacts"
        where = "the seal" if self.first_bad_step is None else f"step {self.first_bad_step}"
        if self.stage == "artifacts":
            where = "the artifacts"
        return f"DIVERGES at {where} ({self.stage}): {self.reason}"


class ReplayGuide(Protocol):
    """What a replay drives: a fresh guide of the log's language, audit fields per step."""

    def fingerprints(self) -> dict[str, str]: ...

    def step_audit(self) -> tuple[int, str, int]: ...

    def mask_ids(self) -> list[int]: ...

    def accept_token(self, token_id: int, kind: Kind = "sampled") -> None: ...

    def is_terminated(self) -> bool: ...


def replay(
    lines: Iterable[str],
    engine: Engine,
    anchor: str | None = None,
    *,
    guide: ReplayGuide | None = None,
) -> ReplayVerdict:
    """Verify ``lines`` and re-derive every record from ``engine`` (see the module header)
    with ``guide``, a fresh guide of the log's language (default: the Python
    reference guide of ``engine``)."""
    if guide is None:
        guide = GridGuide(engine)  # the Python reference re-derives each record
    verdict, log = read(lines, anchor)
    if not verdict.ok:
        return ReplayVerdict(
            False, verdict.records, verdict.first_bad_step, verdict.reason, "chain"
        )
    seal = log.seal
    assert seal is not None

    logged, actual = seal["fingerprints"], guide.fingerprints()
    differs = tuple(sorted(k for k in {*logged, *actual} if logged.get(k) != actual.get(k)))
    if differs:
        detail = "; ".join(
            f"{k}: log {logged.get(k, 'absent')}, engine {actual.get(k, 'absent')}" for k in differs
        )
        return ReplayVerdict(
            False, 0, None, f"artifact fingerprints differ ({detail})", "artifacts", None, differs
        )

    vocab = engine.vocab
    eos_ids = frozenset(vocab.eos_ids)
    head, in_reserve, forced_run = GENESES[log.schema], False, 0
    tail: list[int] = []  # what the reserve writes from here, once it has begun
    jump = seal["mode"].get("jump_forward")
    for i, (rec, logged_hash) in enumerate(zip(log.records, log.hashes, strict=True)):
        diverges = partial(_diverges, i)
        if guide.is_terminated():
            return diverges("token", "a record follows EOS")
        hashed, entry, blocked = guide.step_audit()
        ids = guide.mask_ids()
        config_hash = f"{hashed:016x}"
        if rec.config_hash != config_hash:
            return diverges(
                "config_hash", f"config_hash: log {rec.config_hash}, replay {config_hash}"
            )
        if rec.mask_entry_id != entry:
            return diverges(
                "mask_entry_id", f"mask_entry_id: log {rec.mask_entry_id}, replay {entry}"
            )
        if rec.token not in set(ids):
            return diverges("token", f"token {rec.token} is not in the step's mask")
        if rec.blocked_count != blocked:
            return diverges(
                "blocked_count", f"blocked_count: log {rec.blocked_count}, replay {blocked}"
            )
        is_eos = rec.token in eos_ids
        if is_eos != (rec.kind == "eos"):
            why = "an EOS token" if is_eos else "a token that is not EOS"
            return diverges("kind", f"kind {rec.kind!r} at {why}")
        if rec.kind == "forced" and len(ids) != 1:
            return diverges("kind", f"kind 'forced' at a mask of {len(ids)} tokens")
        if in_reserve and rec.kind not in ("reserve", "eos"):
            return diverges("kind", f"a {rec.kind} step after a reserve step")
        if rec.kind == "reserve" and not in_reserve:
            source = reserve_source(guide)  # type: ignore[arg-type]
            tail = [*source.completion(source.start()), vocab.eos_ids[0]]
        written = tail.pop(0) if (in_reserve or rec.kind == "reserve") and tail else None
        if (in_reserve or rec.kind == "reserve") and rec.token != written:
            return diverges("token", f"token {rec.token} is not the reserve's completion")
        if type(jump) is int and rec.kind in ("sampled", "forced"):
            # decode.py's jump-forward: a singleton mask is forced unless the
            # span already holds ``jump_forward`` forced steps.
            if rec.kind == "forced" and forced_run >= jump:
                return diverges("kind", f"a forced span longer than jump_forward {jump}")
            if rec.kind == "sampled" and len(ids) == 1 and forced_run < jump:
                return diverges("kind", f"kind 'sampled' at a singleton mask (jump_forward {jump})")
        forced_run = forced_run + 1 if rec.kind == "forced" else 0
        in_reserve = in_reserve or rec.kind == "reserve"
        expected = Record(i, config_hash, entry, rec.token, blocked, rec.kind, head)
        if expected != rec or expected.digest(log.schema) != logged_hash:
            return diverges("hash", "the record does not chain as recomputed")
        head = logged_hash
        guide.accept_token(rec.token)

    n = len(log.records)

    def seal_bad(reason: str) -> ReplayVerdict:
        return ReplayVerdict(False, n, None, reason, "seal", None)

    stop = seal["stop_reason"]
    ended = guide.is_terminated()
    if (stop in EOS_STOPS) != ended:
        said = "claims" if stop in EOS_STOPS else "denies"
        return seal_bad(
            f"stop reason {stop!r} {said} EOS, the log {'ends' if ended else 'does not end'} in EOS"
        )
    if stop == "eos" and any(r.kind == "reserve" for r in log.records):
        return seal_bad("stop reason 'eos' but the log has reserve steps")
    mode = seal["mode"]
    for key in ("budget", "jump_forward"):  # what replay checks against: ints or absent
        if key in mode and type(mode[key]) is not int:
            return seal_bad(f"the seal's {key} {mode[key]!r} is not an integer")
    budget = mode.get("budget")
    if budget is not None and n > budget:
        return seal_bad(f"{n} records exceed the budget of {budget}")
    if mode.get("mode") == 1 and n and not ended:
        return seal_bad(
            f"a mode-1 log ends in EOS (the loop always finishes its statement), "
            f"this one stops {stop!r} after {n} records"
        )
    if seal["head_hash"] != head or seal["record_count"] != n:
        return seal_bad("the seal does not close the replayed chain")
    text = b"".join(vocab.token_bytes[r.token] for r in log.records if r.token not in eos_ids)
    decoded = text.decode("utf-8", "replace")
    for key in ("decoded_from_first", "statement"):
        if key not in mode:
            continue
        flag = mode[key]
        if not isinstance(flag, str):
            return seal_bad(f"the seal's {key} {flag!r} is not a string")
        if key == "statement" and "decoded_from_first" in mode:
            continue  # the SELECT-first rewrite of the decoded text (grid-sql's), checked above
        if flag != decoded:
            return seal_bad(f"the {key.replace('_', ' ')} in the seal is not the records' text")
    return ReplayVerdict(True, n)


def _diverges(step: int, field: str, reason: str) -> ReplayVerdict:
    return ReplayVerdict(False, step, step, reason, "replay", field)


def replay_file(
    path: Path, engine: Engine, anchor: str | None = None, *, guide: ReplayGuide | None = None
) -> ReplayVerdict:
    return replay(read_lines(path), engine, anchor, guide=guide)
