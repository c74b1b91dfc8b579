"""The audit chain: every decode step as a hash-chained record, sealed at the end.

Format (JSON Lines, schema ``grid.audit/1``): one JSON object per line.

- Record lines: ``{"step", "config_hash", "mask_entry_id", "token",
  "blocked_count", "kind", "prev_hash", "hash"}``. ``kind`` is one of
  ``sampled``, ``forced``, ``reserve``, ``eos``. ``config_hash`` is the rolling
  hash of the configuration the mask was computed at (16 hex digits);
  ``mask_entry_id`` the BLAKE2b-128 of the packed mask (32 hex digits).
- The last line is the seal: ``{"seal": {"schema", "stop_reason",
  "fingerprints", "mode", "record_count", "head_hash"}, "hash"}``.

Chaining: ``hash_i = BLAKE2b-256(prev_hash_i || canonical(record_i))`` where
``canonical`` is grid-core's injective encoding of the record's fields in a
fixed order, the step number included, and ``prev_hash_0`` is the genesis
constant ``BLAKE2b-256("grid.audit.genesis/1")``. The seal hash chains the
head the same way. Because the seal carries the record count and the head
hash, a log cut short (its seal lost, or records dropped before the seal) is
reported as such, never as valid: a prefix of a valid chain is itself a valid
chain (proofs/HashChain.v, ``truncation_valid``), so only the seal anchors the
tail.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from grid_core.errors import AuditError
from grid_core.fingerprint import canonical

SCHEMA = "grid.audit/1"
GENESIS = hashlib.blake2b(b"grid.audit.genesis/1", digest_size=32).hexdigest()
KINDS = ("sampled", "forced", "reserve", "eos")

Kind = Literal["sampled", "forced", "reserve", "eos"]


@dataclass(frozen=True)
class Record:
    """One audited step (DESIGN.md section 9)."""

    step: int
    config_hash: str
    mask_entry_id: str
    token: int
    blocked_count: int
    kind: str
    prev_hash: str

    def fields(self) -> tuple[object, ...]:
        return (
            SCHEMA,
            self.step,
            self.config_hash,
            self.mask_entry_id,
            self.token,
            self.blocked_count,
            self.kind,
            self.prev_hash,
        )

    def digest(self) -> str:
        return _chain(self.prev_hash, canonical(self.fields()))


def _chain(prev: str, payload: bytes) -> str:
    return hashlib.blake2b(bytes.fromhex(prev) + payload, digest_size=32).hexdigest()


def mask_entry_id(packed: bytes) -> str:
    """Content address of a packed mask."""
    return hashlib.blake2b(packed, digest_size=16).hexdigest()


def seal_fields(seal: Mapping[str, Any]) -> tuple[object, ...]:
    return (
        seal["schema"],
        seal["stop_reason"],
        dict(seal["fingerprints"]),
        dict(seal["mode"]),
        seal["record_count"],
        seal["head_hash"],
    )


class AuditLog:
    """An append-only chain of records, sealed once at the end."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.hashes: list[str] = []
        self.seal: dict[str, Any] | None = None
        self.seal_hash: str | None = None

    @property
    def head(self) -> str:
        return self.hashes[-1] if self.hashes else GENESIS

    def append(
        self, config_hash: int, entry_id: str, token: int, blocked: int, kind: Kind
    ) -> Record:
        if self.seal is not None:
            raise AuditError("the log is sealed; nothing can be appended")
        assert kind in KINDS
        record = Record(
            len(self.records), f"{config_hash:016x}", entry_id, token, blocked, kind, self.head
        )
        self.records.append(record)
        self.hashes.append(record.digest())
        return record

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` records (a rolled-back step leaves no record)."""
        if self.seal is not None:
            raise AuditError("the log is sealed; it cannot be truncated")
        del self.records[n:]
        del self.hashes[n:]

    def close(
        self, stop_reason: str, fingerprints: Mapping[str, str], mode: Mapping[str, object]
    ) -> None:
        if self.seal is not None:
            raise AuditError("the log is already sealed")
        self.seal = {
            "schema": SCHEMA,
            "stop_reason": stop_reason,
            "fingerprints": dict(fingerprints),
            "mode": dict(mode),
            "record_count": len(self.records),
            "head_hash": self.head,
        }
        self.seal_hash = _chain(self.head, canonical(seal_fields(self.seal)))

    def lines(self) -> list[str]:
        out = [
            json.dumps({**asdict(r), "hash": h}, sort_keys=True)
            for r, h in zip(self.records, self.hashes, strict=True)
        ]
        if self.seal is not None:
            out.append(json.dumps({"seal": self.seal, "hash": self.seal_hash}, sort_keys=True))
        return out

    def write(self, path: Path) -> None:
        path.write_text("\n".join(self.lines()) + "\n")


@dataclass(frozen=True)
class Verdict:
    """The outcome of verifying a log: ``ok``, or the first bad step and why."""

    ok: bool
    records: int
    first_bad_step: int | None = None
    reason: str = ""

    def __str__(self) -> str:
        if self.ok:
            return f"VALID: {self.records} records, sealed"
        where = "the seal" if self.first_bad_step is None else f"step {self.first_bad_step}"
        return f"INVALID at {where}: {self.reason}"


_RECORD_KEYS = {
    "step",
    "config_hash",
    "mask_entry_id",
    "token",
    "blocked_count",
    "kind",
    "prev_hash",
    "hash",
}


def verify(lines: Iterable[str]) -> Verdict:
    """Check a JSON Lines audit log: every record's hash and link, then the seal."""
    head, count = GENESIS, 0
    seal: dict[str, Any] | None = None
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            return Verdict(False, count, count, f"line {n + 1} is not JSON ({e.msg})")
        if seal is not None:
            return Verdict(False, count, None, f"line {n + 1} follows the seal")
        if "seal" in obj:
            seal = obj
            continue
        if set(obj) != _RECORD_KEYS:
            return Verdict(False, count, count, f"line {n + 1} has fields {sorted(obj)}")
        if obj["step"] != count:
            return Verdict(False, count, count, f"expected step {count}, found {obj['step']}")
        if obj["prev_hash"] != head:
            return Verdict(False, count, count, "prev_hash does not link to the previous record")
        if obj["kind"] not in KINDS:
            return Verdict(False, count, count, f"unknown kind {obj['kind']!r}")
        record = Record(**{k: v for k, v in obj.items() if k != "hash"})
        if record.digest() != obj["hash"]:
            return Verdict(False, count, count, "the record's hash does not match its fields")
        head = obj["hash"]
        count += 1
    if seal is None:
        return Verdict(False, count, None, f"unsealed log ({count} records): it may be cut short")
    body = seal.get("seal")
    if not isinstance(body, dict):
        return Verdict(False, count, None, "malformed seal")
    try:
        expected = _chain(head, canonical(seal_fields(body)))
    except (KeyError, TypeError):
        return Verdict(False, count, None, "malformed seal")
    if body["schema"] != SCHEMA:
        return Verdict(False, count, None, "malformed seal")
    if body["record_count"] != count:
        return Verdict(
            False,
            count,
            None,
            f"the seal counts {body['record_count']} records, the log has {count}",
        )
    if body["head_hash"] != head:
        return Verdict(False, count, None, "the seal's head hash is not the last record's")
    if seal.get("hash") != expected:
        return Verdict(False, count, None, "the seal's hash does not match its fields")
    return Verdict(True, count)


def verify_file(path: Path) -> Verdict:
    try:
        text = path.read_text()
    except OSError as e:
        raise AuditError(f"cannot read audit log {path}: {e.strerror}") from None
    return verify(text.splitlines())
