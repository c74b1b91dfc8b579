"""The audit chain: every decode step as a hash-chained record, sealed at the end.

Reference: DESIGN.md section 9; theorem 6 (``proofs/HashChain.v``); the format
is specified in ``docs/audit.md``.

Format (JSON Lines, schema ``grid.audit/2``; ``grid.audit/1`` logs are still
verified and replayed): one JSON object per line.

- Record lines: ``{"step", "config_hash", "mask_entry_id", "token",
  "blocked_count", "kind", "prev_hash", "hash"}``. ``kind`` is one of
  ``sampled``, ``forced``, ``reserve``, ``eos``. ``config_hash`` is the rolling
  hash of the configuration the mask was computed at (16 hex digits);
  ``mask_entry_id`` the BLAKE2b-128 of the packed mask (32 hex digits).
- The last line is the seal: ``{"seal": {"schema", "stop_reason",
  "fingerprints", "mode", "record_count", "head_hash"}, "hash"}``.

Chaining. ``hash_i = BLAKE2b-256(enc_i)``, where the **record encoding**
``enc_i`` of step ``i`` depends on the schema:

- ``grid.audit/2`` (written): 85 bytes, ``bytes(prev_hash) || b"grid.audit/2"
  || u64(step) || bytes(config_hash) || bytes(mask_entry_id) || u32(token) ||
  u32(blocked_count) || u8(kind)`` (big-endian; ``kind`` is its index in
  :data:`KINDS`), one BLAKE2b block;
- ``grid.audit/1`` (read): ``bytes(prev_hash) || canonical([schema, step,
  config_hash, mask_entry_id, token, blocked_count, kind, prev_hash])``, with
  grid-core's injective, typed, length-prefixed encoding
  (``grid_core.fingerprint``), about 250 bytes.

``prev_hash_0`` is the schema's genesis constant ``BLAKE2b-256(b"grid.audit.genesis/N")``,
so the first record says which schema a log is in, and the seal's ``schema``
must agree. The seal hash chains the head over ``canonical`` of the six seal
fields in both schemas. Theorem 6's hypotheses are met as follows:

- ``enc`` is injective: :func:`parse_record_encoding` is its left inverse over
  both schemas (tests/test_audit.py checks ``parse(enc(r)) == r`` by
  hypothesis); a ``/1`` encoding has ``l`` at byte 32, a ``/2`` one ``g``;
- a genesis constant is the hash of a 20-byte preimage, which is no record
  encoding (every record encoding is longer than 32 and parses back), so
  tampering that keeps the head is a BLAKE2b collision;
- truncation: a prefix of a valid chain is a valid chain (``truncation_valid``),
  so only the seal, which carries the record count and the head, detects a tail
  cut; and only an **anchored** seal (its hash kept where the log's writer
  cannot rewrite it: ``verify(..., anchor=...)``) detects a forger who rewrites
  the chain and reseals it.

Verification is strict: exact key sets, JSON types (an integer is never a bool
or a float), lowercase hex digests of the documented lengths, no duplicate JSON
keys, nothing after the seal. Whatever the input, :func:`verify` returns a
:class:`Verdict`; it never raises on content.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from grid_core import files, strict_json
from grid_core.errors import AuditError
from grid_core.fingerprint import canonical

SCHEMA = "grid.audit/2"
"""The schema this version writes."""
SCHEMA_1 = "grid.audit/1"
"""The first schema: still verified and replayed, never written."""
SCHEMAS = (SCHEMA_1, SCHEMA)
GENESIS_PREIMAGES = {s: f"grid.audit.genesis/{s.rsplit('/', 1)[1]}".encode() for s in SCHEMAS}
GENESES = {s: hashlib.blake2b(p, digest_size=32).hexdigest() for s, p in GENESIS_PREIMAGES.items()}
GENESIS = GENESES[SCHEMA]
_SCHEMA_OF_GENESIS = {g: s for s, g in GENESES.items()}
KINDS = ("sampled", "forced", "reserve", "eos")
_SCHEMA_TAG = SCHEMA.encode()
ENCODING_2_LEN = 32 + len(_SCHEMA_TAG) + 8 + 8 + 16 + 4 + 4 + 1
"""The length of every ``grid.audit/2`` record encoding (85 bytes: one BLAKE2b block)."""

Kind = Literal["sampled", "forced", "reserve", "eos"]

RECORD_FIELDS = (
    "step",
    "config_hash",
    "mask_entry_id",
    "token",
    "blocked_count",
    "kind",
    "prev_hash",
)
SEAL_FIELDS = ("schema", "stop_reason", "fingerprints", "mode", "record_count", "head_hash")

_HEX16 = re.compile(r"[0-9a-f]{16}")
_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


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
        """The ``grid.audit/1`` canonical list (its encoding after the link)."""
        return (
            SCHEMA_1,
            self.step,
            self.config_hash,
            self.mask_entry_id,
            self.token,
            self.blocked_count,
            self.kind,
            self.prev_hash,
        )

    def encoding(self, schema: str = SCHEMA) -> bytes:
        """The hash input in ``schema`` (``enc`` of theorem 6; the module's docstring).

        Precondition: the record's fields are of ``schema``'s types
        (``_record_problem(self, schema) is None``)."""
        prev = bytes.fromhex(self.prev_hash)
        if schema == SCHEMA_1:
            return prev + canonical(self.fields())
        assert schema == SCHEMA, schema
        return b"".join(
            (
                prev,
                _SCHEMA_TAG,
                self.step.to_bytes(8, "big"),
                bytes.fromhex(self.config_hash),
                bytes.fromhex(self.mask_entry_id),
                self.token.to_bytes(4, "big"),
                self.blocked_count.to_bytes(4, "big"),
                bytes((KINDS.index(self.kind),)),
            )
        )

    def digest(self, schema: str = SCHEMA) -> str:
        return hashlib.blake2b(self.encoding(schema), digest_size=32).hexdigest()


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


def seal_digest(seal: Mapping[str, Any]) -> str:
    """The seal's hash: ``BLAKE2b-256(bytes(head_hash) || canonical(seal fields))``."""
    return _chain(seal["head_hash"], canonical(seal_fields(seal)))


# --------------------------------------------------------------------------
# The left inverse of the record encoding (injectivity, theorem 6).


def _parse_canonical(data: bytes, pos: int) -> tuple[object, int]:
    """One value of ``canonical``'s atom and list forms, strictly; ``ValueError`` otherwise."""
    tag = data[pos : pos + 1]
    pos += 1
    if tag == b"N":
        return None, pos
    if tag in (b"T", b"F"):
        return tag == b"T", pos
    if tag == b"i":
        if pos + 4 > len(data):
            raise ValueError("truncated length")
        n = int.from_bytes(data[pos : pos + 4], "big")
        body = data[pos + 4 : pos + 4 + n]
        if len(body) != n:
            raise ValueError("truncated integer")
        value = int(body)
        if str(value).encode() != body:
            raise ValueError("non-canonical integer")
        return value, pos + 4 + n
    if tag in (b"s", b"b", b"l"):
        if pos + 8 > len(data):
            raise ValueError("truncated length")
        n = int.from_bytes(data[pos : pos + 8], "big")
        pos += 8
        if tag == b"l":
            items: list[object] = []
            for _ in range(n):
                item, pos = _parse_canonical(data, pos)
                items.append(item)
            return items, pos
        body = data[pos : pos + n]
        if len(body) != n:
            raise ValueError("truncated string")
        return (body.decode("utf-8") if tag == b"s" else body), pos + n
    raise ValueError(f"tag {tag!r} is no record field form")


def parse_record_encoding(data: bytes) -> tuple[str, Record]:
    """The schema and record whose :meth:`Record.encoding` is ``data``;
    :class:`AuditError` if none is.

    A left inverse of the encoding over both schemas:
    ``parse_record_encoding(r.encoding(s)) == (s, r)`` for every record ``r``
    of schema ``s``'s types (every record a valid chain can hold), so the
    encoding is injective, across schemas too (byte 32 is ``l`` in ``/1``,
    ``g`` in ``/2``).
    """
    prefix, rest = data[:32], data[32:]
    if rest[:1] != b"l":
        return SCHEMA, _parse_encoding_2(data)
    try:
        fields, end = _parse_canonical(rest, 0)
    except (ValueError, RecursionError) as e:
        raise AuditError(f"not a record encoding: {e}") from None
    if end != len(rest) or not isinstance(fields, list) or len(fields) != 8:
        raise AuditError("not a record encoding: expected exactly one 8-field list")
    if fields[0] != SCHEMA_1:
        raise AuditError(f"not a record encoding: schema {fields[0]!r}")
    record = Record(**dict(zip(RECORD_FIELDS, fields[1:], strict=True)))
    if _record_problem(record, SCHEMA_1) is not None or prefix != bytes.fromhex(record.prev_hash):
        raise AuditError("not a record encoding: its fields are not a record's")
    return SCHEMA_1, record


def _parse_encoding_2(data: bytes) -> Record:
    """The ``grid.audit/2`` record encoded as ``data`` (fixed offsets)."""
    if len(data) != ENCODING_2_LEN or data[32:44] != _SCHEMA_TAG:
        raise AuditError(f"not a record encoding: neither {SCHEMA_1!r} nor {SCHEMA!r}")
    if data[84] >= len(KINDS):
        raise AuditError(f"not a record encoding: kind {data[84]}")
    return Record(
        step=int.from_bytes(data[44:52], "big"),
        config_hash=data[52:60].hex(),
        mask_entry_id=data[60:76].hex(),
        token=int.from_bytes(data[76:80], "big"),
        blocked_count=int.from_bytes(data[80:84], "big"),
        kind=KINDS[data[84]],
        prev_hash=data[:32].hex(),
    )


# --------------------------------------------------------------------------
# Writing.


def _is_text(x: object) -> bool:
    if not isinstance(x, str):
        return False
    try:
        x.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_count(x: object) -> bool:
    return type(x) is int and x >= 0


def _mode_problem(mode: object) -> str | None:
    if not isinstance(mode, dict) or not all(_is_text(k) for k in mode):
        return "mode must be an object"
    for k, v in mode.items():
        if not (v is None or type(v) in (bool, int) or _is_text(v)):
            return f"mode flag {k!r} must be an integer, a string, a boolean or null"
    return None


def _fingerprints_problem(fps: object) -> str | None:
    if not isinstance(fps, dict) or not all(_is_text(k) and _is_text(v) for k, v in fps.items()):
        return "fingerprints must map artifact names to strings"
    return None


class AuditLog:
    """An append-only chain of records, sealed once at the end.

    ``seal_hash`` is the log's **anchor**: store it apart from the log (a
    database row, a receipt) and pass it to :func:`verify` to detect a forger
    who rewrites the whole chain and reseals it. ``schema`` is the one its
    records are chained in: :data:`SCHEMA` for a log written here, the log's
    own for one :func:`read` (a ``grid.audit/1`` log is resealed in ``/1``).
    """

    def __init__(self, schema: str = SCHEMA) -> None:
        assert schema in SCHEMAS, schema
        self.schema = schema
        self._records: list[Record] = []
        self._hashes: list[str] = []
        self._text: bytes | None = None  # records not parsed yet (of_lines), joined by \n
        self._head = GENESES[schema]
        self.seal: dict[str, Any] | None = None
        self.seal_hash: str | None = None

    @classmethod
    def of_chain(cls, chain: Iterable[tuple[Record, str]], schema: str = SCHEMA) -> AuditLog:
        """An unsealed log of records already chained elsewhere in ``schema``,
        each with its hash. The links are checked (each record's ``prev_hash``
        is the previous hash, steps count from 0); the hashes themselves are
        the chainer's."""
        log = cls(schema)
        for record, digest in chain:
            if record.step != len(log._records) or record.prev_hash != log._head:
                raise AuditError(f"record {record.step} does not link to the chain before it")
            log._records.append(record)
            log._hashes.append(digest)
            log._head = digest
        return log

    @classmethod
    def of_lines(cls, lines: bytes, head: str) -> AuditLog:
        """An unsealed log of records chained elsewhere (the native guide's), as
        :meth:`lines` writes them joined by ``\\n`` (ASCII bytes), with the
        chain's head hash.
        Kept as the one text: :meth:`close` reads nothing more, :meth:`write`
        writes it as it is and :meth:`lines` splits it; the records are parsed
        (and their links checked, as :meth:`of_chain` does) on first use of
        :attr:`records` or :attr:`hashes`. The text is the chainer's
        (``tests/test_guide_protocol.py`` holds the native lines to the Python
        path's, byte for byte)."""
        log = cls()
        log._text = lines
        log._head = head
        return log

    @property
    def records(self) -> list[Record]:
        self._parse()
        return self._records

    @property
    def hashes(self) -> list[str]:
        self._parse()
        return self._hashes

    def _parse(self) -> None:
        if self._text is None:
            return
        lines, self._text = self._text_lines(), None
        parsed = AuditLog.of_chain(
            (Record(**{k: fields[k] for k in RECORD_FIELDS}), fields["hash"])
            for fields in map(json.loads, lines)
        )
        if parsed.head != self._head:
            raise AuditError("the records do not end at the chain's head")
        self._records, self._hashes = parsed._records, parsed._hashes

    def __len__(self) -> int:
        """How many records the log holds."""
        if self._text is not None:
            return self._text.count(b"\n") + 1 if self._text else 0
        return len(self._records)

    @property
    def head(self) -> str:
        return self._head

    def append(
        self, config_hash: int, entry_id: str, token: int, blocked: int, kind: Kind
    ) -> Record:
        if self.seal is not None:
            raise AuditError("the log is sealed; nothing can be appended")
        assert kind in KINDS
        assert 0 <= config_hash < 1 << 64, "a configuration hash is a low64 digest"
        record = Record(
            len(self.records), f"{config_hash:016x}", entry_id, token, blocked, kind, self.head
        )
        assert _record_problem(record, self.schema) is None, _record_problem(record, self.schema)
        self._records.append(record)
        self._head = record.digest(self.schema)
        self._hashes.append(self._head)
        return record

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` records (a rolled-back step leaves no record)."""
        if self.seal is not None:
            raise AuditError("the log is sealed; it cannot be truncated")
        del self.records[n:]
        del self.hashes[n:]
        self._head = self._hashes[-1] if self._hashes else GENESES[self.schema]

    def close(
        self, stop_reason: str, fingerprints: Mapping[str, str], mode: Mapping[str, object]
    ) -> None:
        if self.seal is not None:
            raise AuditError("the log is already sealed")
        seal = {
            "schema": self.schema,
            "stop_reason": stop_reason,
            "fingerprints": dict(fingerprints),
            "mode": dict(mode),
            "record_count": len(self),
            "head_hash": self.head,
        }
        problem = _seal_body_problem(seal)
        if problem is not None:
            raise AuditError(f"cannot seal the log: {problem}")
        self.seal = seal
        self.seal_hash = seal_digest(seal)

    def lines(self) -> list[str]:
        if self._text is not None:
            out = self._text_lines()
        else:
            out = [
                json.dumps({**asdict(r), "hash": h}, sort_keys=True)
                for r, h in zip(self._records, self._hashes, strict=True)
            ]
        if self.seal is not None:
            out.append(self._seal_line())
        return out

    def _text_lines(self) -> list[str]:
        assert self._text is not None
        return self._text.decode("ascii").split("\n") if self._text else []

    def _seal_line(self) -> str:
        return json.dumps({"seal": self.seal, "hash": self.seal_hash}, sort_keys=True)

    def write(self, path: Path, *, exclusive: bool = False) -> None:
        """The log as JSON Lines, each line ended by ``\n`` (text kept from
        :meth:`of_lines` is written as it is, never split). With ``exclusive``, a
        ``path`` that exists (made by anyone, another process included) is a
        ``FileExistsError`` and is left as it was."""
        if self._text is None:
            data = "".join(f"{p}\n" for p in self.lines()).encode()
        else:
            data = self._text + b"\n" if self._text else b""
            if self.seal is not None:
                data += f"{self._seal_line()}\n".encode()
        with open(path, "xb" if exclusive else "wb") as f:
            f.write(data)


# --------------------------------------------------------------------------
# Reading and verifying.


@dataclass(frozen=True)
class Verdict:
    """The outcome of verifying a log: ``ok``, or the first bad step and why.

    ``records`` counts the records that chained correctly before the first
    problem (all of them when ``ok``); ``first_bad_step`` is ``None`` when the
    problem is the seal (missing, malformed, wrong, or followed by a line).
    ``anchored`` says whether the seal was checked against an anchor.
    """

    ok: bool
    records: int
    first_bad_step: int | None = None
    reason: str = ""
    anchored: bool = False

    def __str__(self) -> str:
        if self.ok:
            anchor = ", anchor matches" if self.anchored else ""
            return f"VALID: {self.records} records, sealed{anchor}"
        where = "the seal" if self.first_bad_step is None else f"step {self.first_bad_step}"
        return f"INVALID at {where}: {self.reason}"


_RECORD_KEYS = frozenset({*RECORD_FIELDS, "hash"})


_U32, _U64 = 1 << 32, 1 << 64


def _record_problem(r: Record, schema: str) -> str | None:
    """Why a record's fields are not of ``schema``'s documented types, or ``None``."""
    if not _is_count(r.step):
        return "step must be a non-negative integer"
    if not (isinstance(r.config_hash, str) and _HEX16.fullmatch(r.config_hash)):
        return "config_hash must be 16 lowercase hex digits"
    if not (isinstance(r.mask_entry_id, str) and _HEX32.fullmatch(r.mask_entry_id)):
        return "mask_entry_id must be 32 lowercase hex digits"
    if not _is_count(r.token):
        return "token must be a non-negative integer"
    if not _is_count(r.blocked_count):
        return "blocked_count must be a non-negative integer"
    if r.kind not in KINDS:
        return f"unknown kind {r.kind!r}"
    if not (isinstance(r.prev_hash, str) and _HEX64.fullmatch(r.prev_hash)):
        return "prev_hash must be 64 lowercase hex digits"
    if schema == SCHEMA:
        for name, value, bound in (
            ("step", r.step, _U64),
            ("token", r.token, _U32),
            ("blocked_count", r.blocked_count, _U32),
        ):
            if value >= bound:
                return f"{name} must be below 2^{bound.bit_length() - 1} in {SCHEMA}"
    return None


def _seal_body_problem(body: Mapping[str, Any]) -> str | None:
    if set(body) != set(SEAL_FIELDS):
        return f"the seal has fields {sorted(body)}, expected {sorted(SEAL_FIELDS)}"
    if body["schema"] not in SCHEMAS:
        return f"unknown schema {body['schema']!r} (expected {SCHEMA_1!r} or {SCHEMA!r})"
    if not _is_text(body["stop_reason"]):
        return "stop_reason must be a string"
    problem = _fingerprints_problem(body["fingerprints"]) or _mode_problem(body["mode"])
    if problem is not None:
        return problem
    if not _is_count(body["record_count"]):
        return "record_count must be a non-negative integer"
    if not (isinstance(body["head_hash"], str) and _HEX64.fullmatch(body["head_hash"])):
        return "head_hash must be 64 lowercase hex digits"
    return None


def read(lines: Iterable[str], anchor: str | None = None) -> tuple[Verdict, AuditLog]:
    """Verify a JSON Lines log and return it parsed as far as it verified.

    The :class:`AuditLog` holds the records that chained correctly, and the
    seal only when the whole log is valid. The schema is the one whose genesis
    the first record links to (the seal's when there is none); the seal must
    name it.
    """
    log = AuditLog()
    head, count = GENESIS, 0
    schema: str | None = None  # known at the first record
    seal_line: dict[str, Any] | None = None

    def bad(step: int | None, reason: str) -> tuple[Verdict, AuditLog]:
        return Verdict(False, count, step, reason), log

    for n, line in enumerate(lines, start=1):
        if not line.strip(" \t\r\n"):  # JSON's whitespace: blank in any language
            continue
        if seal_line is not None:
            return bad(None, f"line {n} follows the seal")
        if not _is_text(line):
            return bad(count, f"line {n} is not UTF-8")
        try:
            obj = strict_json.loads(line)
        except strict_json.DuplicateKeyError as e:
            return bad(count, f"line {n} repeats the key {e.key!r}")
        except (ValueError, RecursionError) as e:
            return bad(count, f"line {n} is not JSON ({e})")
        if not isinstance(obj, dict):
            return bad(count, f"line {n} is not a JSON object")
        if "seal" in obj:
            seal_line = obj
            continue
        if set(obj) != _RECORD_KEYS:
            return bad(count, f"line {n} has fields {sorted(obj)}")
        record = Record(**{k: obj[k] for k in RECORD_FIELDS})
        if schema is None:
            link = record.prev_hash
            schema = _SCHEMA_OF_GENESIS.get(link, SCHEMA) if isinstance(link, str) else SCHEMA
            log = AuditLog(schema)
            head = log.head
        problem = _record_problem(record, schema)
        if problem is not None:
            return bad(count, problem)
        if record.step != count:
            return bad(count, f"expected step {count}, found {record.step}")
        if record.prev_hash != head:
            return bad(count, "prev_hash does not link to the previous record")
        if record.digest(schema) != obj["hash"]:
            return bad(count, "the record's hash does not match its fields")
        head = obj["hash"]
        log._records.append(record)
        log._hashes.append(head)
        log._head = head
        count += 1
    if seal_line is None:
        return bad(None, f"unsealed log ({count} records): it may be cut short")
    if set(seal_line) != {"seal", "hash"} or not isinstance(seal_line["seal"], dict):
        return bad(None, f"malformed seal line (fields {sorted(seal_line)})")
    body: dict[str, Any] = seal_line["seal"]
    problem = _seal_body_problem(body)
    if problem is not None:
        return bad(None, f"malformed seal: {problem}")
    if schema is not None and body["schema"] != schema:
        return bad(None, f"the seal's schema is {body['schema']!r}, its records are {schema!r}")
    if schema is None:  # no record: the seal's schema, and its genesis is the head
        log = AuditLog(body["schema"])
        head = log.head
    if body["record_count"] != count:
        return bad(None, f"the seal counts {body['record_count']} records, the log has {count}")
    if body["head_hash"] != head:
        return bad(None, "the seal's head hash is not the last record's")
    expected = seal_digest(body)
    if seal_line["hash"] != expected:
        return bad(None, "the seal's hash does not match its fields")
    if anchor is not None and expected != anchor.lower():  # hex, in either case
        return bad(None, "the seal's hash is not the anchored one (the log was rewritten)")
    log.seal, log.seal_hash = body, expected
    return Verdict(True, count, anchored=anchor is not None), log


def reseal(log: AuditLog, extra: Mapping[str, object]) -> AuditLog:
    """``log``'s records under a new seal whose mode flags add ``extra`` (same stop
    reason and fingerprints). For a caller that learns more about a run after its
    decode and before it publishes the log (``grid ask``: the role, the question's
    hash, the statement, the checker's verdict, how it ran): the old seal is
    dropped, never written. ``extra`` must not rename a flag the seal has."""
    if log.seal is None or log.seal_hash is None:
        raise AuditError("only a sealed log is resealed")
    clash = sorted(set(extra) & set(log.seal["mode"]))
    if clash:
        raise AuditError(f"the seal already has the mode flags {clash}")
    if log._text is not None:  # still as the native guide wrote it
        out = AuditLog.of_lines(log._text, log.head)
    else:
        out = AuditLog.of_chain(zip(log.records, log.hashes, strict=True), log.schema)
    out.close(log.seal["stop_reason"], log.seal["fingerprints"], {**log.seal["mode"], **extra})
    return out


def verify(lines: Iterable[str], anchor: str | None = None) -> Verdict:
    """Check a JSON Lines audit log: every record's hash and link, then the seal.

    With ``anchor`` (the seal hash kept apart from the log), the seal must also
    be that one: this is what detects a chain rewritten and resealed.
    """
    return read(lines, anchor)[0]


def read_lines(path: Path) -> list[str]:
    """The lines of a log file, at most :data:`grid_core.files.MAX_FILE_BYTES` read;
    :class:`AuditError` when it cannot be read or holds more (a wrong file,
    ``/dev/zero``).

    Bytes that are not UTF-8 are kept (as surrogate escapes) so that
    :func:`verify` reports them as an invalid line rather than an unreadable file.
    """
    try:
        data = files.read_bounded(path, files.MAX_FILE_BYTES)
    except OSError as e:
        raise AuditError(f"cannot read audit log {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise AuditError(f"cannot read audit log {path}: {e}") from None
    return data.decode("utf-8", "surrogateescape").split("\n")


def verify_file(path: Path, anchor: str | None = None) -> Verdict:
    return verify(read_lines(path), anchor)
