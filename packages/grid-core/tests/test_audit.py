"""The audit chain: record encoding (theorem 6's hypotheses), verification, the seal.

Theorem 6 (proofs/HashChain.v) assumes that the record encoding is injective,
the step number included, and that the genesis constant is the hash of an input
that is no record encoding. Both are checked here, the first through a left
inverse (:func:`parse_record_encoding`): ``parse(enc(r)) == r`` for every
record, and ``parse`` accepts nothing but encodings. Then verification: an
honest log is valid, every kind of edit is reported at the right step with the
right reason, strict prefixes are caught only through the seal
(``truncation_valid`` / ``seal_detects_truncation``), a resealed log only
through the anchor, and no input makes :func:`verify` raise.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toy import analyst_engine

from grid_core.audit import (
    ENCODING_2_LEN,
    GENESES,
    GENESIS,
    GENESIS_PREIMAGES,
    KINDS,
    RECORD_FIELDS,
    SCHEMA,
    SCHEMA_1,
    SCHEMAS,
    SEAL_FIELDS,
    AuditLog,
    Record,
    _record_problem,
    parse_record_encoding,
    read,
    read_lines,
    reseal,
    seal_digest,
    verify,
    verify_file,
)
from grid_core.decode import generate
from grid_core.errors import AuditError
from grid_core.fingerprint import canonical
from grid_core.guide import GridGuide

ENGINE = analyst_engine()


def honest_log(seed: int = 3, budget: int = 30) -> AuditLog:
    rng = random.Random(seed)
    return generate(GridGuide(ENGINE), lambda ids, r: r.choice(ids), budget, rng).audit


LOG = honest_log()
LINES = LOG.lines()
N = len(LOG.records)

# -------------------------------------------------------------- record encoding


def hex_of(n: int) -> st.SearchStrategy[str]:
    return st.binary(min_size=n // 2, max_size=n // 2).map(bytes.hex)


#: Each schema's integer bounds: ``grid.audit/2`` encodes the step in 8 bytes,
#: the token and the blocked count in 4; ``/1`` writes decimals of any length.
BOUNDS = {SCHEMA_1: (2**70, 2**40), SCHEMA: (2**64 - 1, 2**32 - 1)}


def field_strategies(schema: str) -> dict[str, st.SearchStrategy[Any]]:
    steps, ints = BOUNDS[schema]
    return {
        "step": st.integers(0, steps),
        "config_hash": hex_of(16),
        "mask_entry_id": hex_of(32),
        "token": st.integers(0, ints),
        "blocked_count": st.integers(0, ints),
        "kind": st.sampled_from(KINDS),
        "prev_hash": st.one_of(st.sampled_from(sorted(GENESES.values())), hex_of(64)),
    }


def records(schema: str) -> st.SearchStrategy[Record]:
    return st.builds(Record, **field_strategies(schema))


def edit_one_field(data: st.DataObject, r: Record, schema: str) -> Record:
    name = data.draw(st.sampled_from(RECORD_FIELDS))
    strategy = field_strategies(schema)[name]
    value = data.draw(strategy.filter(lambda v: v != getattr(r, name)))
    return Record(**{**{f: getattr(r, f) for f in RECORD_FIELDS}, name: value})


@pytest.mark.parametrize("schema", SCHEMAS)
@settings(derandomize=True, max_examples=300, deadline=None)
@given(data=st.data())
def test_record_encoding_is_injective(schema: str, data: st.DataObject) -> None:
    """Distinct records have distinct encodings and hashes, in each schema and
    across the two: the left inverse recovers the schema and the record."""
    r1 = data.draw(records(schema))
    # Half the time a record that differs from r1 in exactly one field (the hard
    # case), else an independent one.
    r2 = (
        edit_one_field(data, r1, schema) if data.draw(st.booleans()) else data.draw(records(schema))
    )
    if r1 != r2:
        assert r1.encoding(schema) != r2.encoding(schema)
        assert r1.digest(schema) != r2.digest(schema)
    assert parse_record_encoding(r1.encoding(schema)) == (schema, r1)
    assert parse_record_encoding(r2.encoding(schema)) == (schema, r2)
    other = SCHEMA_1 if schema == SCHEMA else SCHEMA
    if _record_problem(r2, other) is None:  # the same record in the other schema
        assert r1.encoding(schema) != r2.encoding(other)


def test_a_version_2_encoding_is_one_blake2b_block_at_fixed_offsets() -> None:
    r = Record(2**64 - 1, "0123456789abcdef", "ab" * 16, 2**32 - 1, 7, "reserve", GENESIS)
    enc = r.encoding()
    assert len(enc) == ENCODING_2_LEN == 85 <= 128
    assert enc == (
        bytes.fromhex(GENESIS)
        + b"grid.audit/2"
        + b"\xff" * 8
        + bytes.fromhex("0123456789abcdef")
        + b"\xab" * 16
        + b"\xff\xff\xff\xff"
        + b"\x00\x00\x00\x07"
        + b"\x02"
    )
    # The version-1 encoding of the same record is the canonical list (twice as long).
    assert r.encoding(SCHEMA_1) == bytes.fromhex(GENESIS) + canonical(r.fields())
    assert len(r.encoding(SCHEMA_1)) > 2 * 128 - 32


@pytest.mark.parametrize("schema", SCHEMAS)
@settings(derandomize=True, max_examples=200, deadline=None)
@given(data=st.data())
def test_parse_accepts_only_encodings(schema: str, data: st.DataObject) -> None:
    """Whatever parses re-encodes to itself: 'does not parse' means 'is no encoding'."""
    enc = bytearray(data.draw(records(schema)).encoding(schema))
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        at = data.draw(st.integers(0, len(enc) - 1))
        if op == "flip":
            enc[at] ^= data.draw(st.integers(1, 255))
        elif op == "cut":
            del enc[at]
        else:
            enc.insert(at, data.draw(st.integers(0, 255)))
    try:
        parsed_schema, parsed = parse_record_encoding(bytes(enc))
    except AuditError:
        return
    assert parsed.encoding(parsed_schema) == bytes(enc)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        st.binary(min_size=53, max_size=53).map(
            lambda b: b[:32] + b"grid.audit/2" + b[32:] + b"\x04"
        ),
    )
)
def test_parse_never_crashes(data: bytes) -> None:
    try:
        schema, parsed = parse_record_encoding(data)
    except AuditError:
        return
    assert parsed.encoding(schema) == data


@pytest.mark.parametrize("schema", SCHEMAS)
def test_step_number_is_inside_the_hash(schema: str) -> None:
    """chain_length_mismatch_collision needs the step inside: same fields, other step."""
    r = LOG.records[0]
    moved = Record(r.step + 1, r.config_hash, r.mask_entry_id, r.token, 0, r.kind, r.prev_hash)
    same = Record(r.step, r.config_hash, r.mask_entry_id, r.token, 0, r.kind, r.prev_hash)
    assert moved.encoding(schema) != same.encoding(schema)
    assert moved.digest(schema) != same.digest(schema)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_genesis_is_no_record_encoding(schema: str) -> None:
    """chain_tamper_collision: genesis = H(g0) for a g0 that is no record encoding."""
    preimage, genesis = GENESIS_PREIMAGES[schema], GENESES[schema]
    assert hashlib.blake2b(preimage, digest_size=32).hexdigest() == genesis
    assert preimage == f"grid.audit.genesis/{schema[-1]}".encode()
    with pytest.raises(AuditError):
        parse_record_encoding(preimage)
    # Shorter than any record encoding: 32 bytes of prev_hash and more.
    shortest = Record(0, "0" * 16, "0" * 32, 0, 0, "eos", "0" * 64).encoding(schema)
    assert len(preimage) < 32 < len(shortest)
    # The seal's hash input is no record encoding either (a 6-field list).
    log = AuditLog(schema)
    log.close("eos", {"grammar": "g"}, {"mode": 1})
    assert log.seal is not None
    seal_input = bytes.fromhex(log.head) + canonical(tuple(log.seal[k] for k in SEAL_FIELDS))
    with pytest.raises(AuditError):
        parse_record_encoding(seal_input)
    assert hashlib.blake2b(seal_input, digest_size=32).hexdigest() == log.seal_hash
    assert log.head == genesis


def test_every_logged_record_parses_back() -> None:
    assert LOG.schema == SCHEMA and LOG.records[0].prev_hash == GENESIS
    for r, h in zip(LOG.records, LOG.hashes, strict=True):
        assert parse_record_encoding(r.encoding()) == (SCHEMA, r)
        assert hashlib.blake2b(r.encoding(), digest_size=32).hexdigest() == h


# -------------------------------------------------------------- verification


def test_honest_log_is_valid() -> None:
    assert N >= 5
    verdict = verify(LINES)
    assert verdict.ok and verdict.records == N and verdict.first_bad_step is None
    assert str(verdict) == f"VALID: {N} records, sealed"
    anchored = verify(LINES, anchor=LOG.seal_hash)
    assert anchored.ok and anchored.anchored
    assert str(anchored).endswith("anchor matches")


def test_blank_lines_are_json_whitespace_only() -> None:
    """Blank lines are skipped; a line of other Unicode whitespace (U+2028, NBSP,
    U+001C) is a line a verifier in another language may not skip: refused."""
    assert verify([LINES[0], "", " \t\r", *LINES[1:], "\n"]).ok
    for odd in ("\u2028", "\u00a0", "\x1c"):
        assert not verify([*LINES, odd]).ok, repr(odd)
        assert not verify([LINES[0], odd, *LINES[1:]]).ok, repr(odd)


def test_written_file_verifies(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    LOG.write(path)
    assert verify_file(path).ok
    assert verify_file(path, LOG.seal_hash).ok


def test_read_returns_the_log() -> None:
    verdict, log = read(LINES)
    assert verdict.ok
    assert log.records == LOG.records and log.hashes == LOG.hashes
    assert log.seal == LOG.seal and log.seal_hash == LOG.seal_hash


Edit = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


def objs() -> list[dict[str, Any]]:
    return [json.loads(line) for line in LINES]


def set_field(i: int, name: str, value: object) -> Edit:
    def edit(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
        log[i][name] = value
        return log

    return edit


def set_seal(name: str, value: object) -> Edit:
    def edit(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
        log[-1]["seal"][name] = value
        return log

    return edit


def swap(i: int, j: int) -> Edit:
    def edit(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
        log[i], log[j] = log[j], log[i]
        return log

    return edit


# (id, edit, first bad step (None: the seal), words in the reason)
TAMPER: list[tuple[str, Edit, int | None, str]] = [
    ("step", set_field(2, "step", 7), 2, "expected step 2"),
    ("config_hash", set_field(2, "config_hash", "f" * 16), 2, "hash does not match"),
    ("mask_entry_id", set_field(3, "mask_entry_id", "0" * 32), 3, "hash does not match"),
    ("token", set_field(1, "token", 33), 1, "hash does not match"),
    ("blocked_count", set_field(4, "blocked_count", 1), 4, "hash does not match"),
    ("kind", set_field(0, "kind", "forced"), 0, "hash does not match"),
    ("prev_hash", set_field(2, "prev_hash", "a" * 64), 2, "does not link"),
    ("hash", set_field(2, "hash", "a" * 64), 2, "hash does not match"),
    ("last-hash", set_field(N - 1, "hash", "a" * 64), N - 1, "hash does not match"),
    ("unknown-kind", set_field(1, "kind", "guessed"), 1, "unknown kind"),
    ("bool-token", set_field(1, "token", True), 1, "token must be"),
    ("float-token", set_field(1, "token", 5.0), 1, "token must be"),
    ("negative-blocked", set_field(1, "blocked_count", -1), 1, "blocked_count must be"),
    ("uppercase-hex", set_field(1, "config_hash", "A" * 16), 1, "config_hash must be"),
    ("extra-field", set_field(1, "note", "x"), 1, "has fields"),
    ("reorder", swap(1, 3), 1, "expected step 1"),
    ("delete", lambda log: log[:2] + log[3:], 2, "expected step 2"),
    ("truncate-keep-seal", lambda log: [*log[: N - 2], log[-1]], None, f"counts {N} records"),
    ("truncate-drop-seal", lambda log: log[: N - 2], None, "unsealed log"),
    ("drop-seal", lambda log: log[:N], None, "unsealed log"),
    ("empty", lambda log: [], None, "unsealed log (0 records)"),
    ("seal-schema", set_seal("schema", "grid.audit/3"), None, "unknown schema"),
    ("seal-schema-1", set_seal("schema", SCHEMA_1), None, "the seal's schema is 'grid.audit/1'"),
    ("seal-stop", set_seal("stop_reason", "eos!"), None, "seal's hash does not match"),
    ("seal-fingerprints", set_seal("fingerprints", {}), None, "seal's hash does not match"),
    ("seal-mode", set_seal("mode", {"mode": 2}), None, "seal's hash does not match"),
    ("seal-mode-float", set_seal("mode", {"budget": 1.5}), None, "mode flag"),
    ("seal-count", set_seal("record_count", N + 1), None, f"counts {N + 1}"),
    ("seal-head", set_seal("head_hash", GENESIS), None, "head hash"),
    ("seal-extra", set_seal("note", "ok"), None, "malformed seal"),
    ("seal-hash", set_field(N, "hash", "0" * 64), None, "seal's hash does not match"),
    ("seal-line-extra", set_field(N, "note", 1), None, "malformed seal line"),
    ("after-seal", lambda log: [*log, log[0]], None, f"line {N + 2} follows the seal"),
    ("seal-first", lambda log: [log[-1], *log[:-1]], None, "line 2 follows the seal"),
]


@pytest.mark.parametrize(
    ("edit", "step", "reason"), [pytest.param(e, s, r, id=i) for i, e, s, r in TAMPER]
)
def test_tampering_is_reported(edit: Edit, step: int | None, reason: str) -> None:
    lines = [json.dumps(o, sort_keys=True) for o in edit(objs())]
    verdict = verify(lines)
    assert not verdict.ok
    assert verdict.first_bad_step == step, verdict
    assert reason in verdict.reason, verdict
    assert str(verdict).startswith("INVALID at " + ("the seal" if step is None else f"step {step}"))


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        pytest.param("{not json", "is not JSON", id="not-json"),
        pytest.param("[1, 2]", "not a JSON object", id="array"),
        pytest.param('"text"', "not a JSON object", id="string"),
        pytest.param('{"step": 0, "step": 0}', "repeats the key", id="duplicate-key"),
        pytest.param("[" * 100_000 + "]" * 100_000, "not JSON", id="deep-nesting"),
        pytest.param('{"token": ' + "9" * 5000 + "}", "not JSON", id="huge-int"),
        pytest.param('{"kind": "\udcff"}', "not UTF-8", id="surrogate"),
    ],
)
def test_malformed_lines_are_invalid_not_errors(line: str, reason: str) -> None:
    verdict = verify([LINES[0], line, *LINES[1:]])
    assert not verdict.ok and verdict.first_bad_step == 1
    assert reason in verdict.reason


def test_lone_surrogate_escape_in_seal_is_invalid() -> None:
    log = objs()
    log[-1]["seal"]["stop_reason"] = "\ud800"
    verdict = verify([json.dumps(o) for o in log])
    assert not verdict.ok and "stop_reason must be a string" in verdict.reason


def test_non_utf8_file_is_invalid_not_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(line.encode() for line in LINES[:2]) + b"\n\xff\xfe\n")
    verdict = verify_file(path)
    assert not verdict.ok and verdict.first_bad_step == 2 and "not UTF-8" in verdict.reason


def test_unreadable_file_raises(tmp_path: Path) -> None:
    with pytest.raises(AuditError, match="cannot read audit log"):
        verify_file(tmp_path / "missing.jsonl")


def test_every_strict_prefix_is_caught_only_by_the_seal() -> None:
    """truncation_valid and seal_detects_truncation (theorem 6, row 3 of the table)."""
    for k in range(N):
        chain_only = verify(LINES[:k])  # a prefix of the chain is a valid chain ...
        assert chain_only.records == k and chain_only.first_bad_step is None
        assert "unsealed" in chain_only.reason  # ... rejected only for want of a seal
        with_seal = verify([*LINES[:k], LINES[-1]])
        assert not with_seal.ok and with_seal.first_bad_step is None
        assert f"counts {N} records, the log has {k}" in with_seal.reason


def test_resealed_truncation_passes_verify_but_not_the_anchor() -> None:
    """A re-sealed truncated log passes: only an anchored seal detects it."""
    assert LOG.seal is not None
    forged = AuditLog()
    for r in LOG.records[:-2]:
        kind: Any = r.kind
        forged.append(int(r.config_hash, 16), r.mask_entry_id, r.token, r.blocked_count, kind)
    forged.close(LOG.seal["stop_reason"], LOG.seal["fingerprints"], LOG.seal["mode"])
    assert verify(forged.lines()).ok
    verdict = verify(forged.lines(), anchor=LOG.seal_hash)
    assert not verdict.ok and "anchored" in verdict.reason
    assert verdict.first_bad_step is None


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.data())
def test_any_accepted_edit_is_semantically_void(data: st.DataObject) -> None:
    """Edit characters anywhere: either verify rejects, or the JSON content is unchanged.

    And verify never raises, whatever the edit.
    """
    text = bytearray("\n".join(LINES).encode())
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(text) - 1))
        op = data.draw(st.sampled_from(["set", "delete", "insert"]))
        byte = data.draw(st.sampled_from(b' 0123456789abcdef"{}[],:.-etrunl\n\\\xff'))
        if op == "set":
            text[at] = byte
        elif op == "delete":
            del text[at]
        else:
            text.insert(at, byte)
    lines = bytes(text).decode("utf-8", "surrogateescape").split("\n")
    verdict = verify(lines)
    if verdict.ok:
        assert [json.loads(x) for x in lines if x.strip()] == objs()


# -------------------------------------------------------------- writing


def test_log_api_contract() -> None:
    log = AuditLog()
    assert log.head == GENESIS
    r = log.append(0xABC, "0" * 32, 5, 10, "sampled")
    assert r.config_hash == "0000000000000abc" and r.prev_hash == GENESIS and r.step == 0
    log.append(0xDEF, "1" * 32, 6, 10, "eos")
    log.truncate(1)
    assert len(log.records) == 1 and log.head == log.hashes[0]
    log.close("eos", {"grammar": "g"}, {"mode": 1, "budget": 3, "note": None, "strict": True})
    assert log.seal is not None and log.seal["schema"] == SCHEMA
    assert log.seal_hash == seal_digest(log.seal)
    assert verify(log.lines(), anchor=log.seal_hash).ok
    with pytest.raises(AuditError, match="sealed"):
        log.append(0, "0" * 32, 1, 1, "sampled")
    with pytest.raises(AuditError, match="sealed"):
        log.truncate(0)
    with pytest.raises(AuditError, match="already sealed"):
        log.close("eos", {}, {})


def test_unsealable_mode_is_a_user_error() -> None:
    log = AuditLog()
    with pytest.raises(AuditError, match="mode flag 'temperature'"):
        log.close("eos", {}, {"temperature": 0.7})
    with pytest.raises(AuditError, match="fingerprints"):
        log.close("eos", {"grammar": 3}, {})  # type: ignore[dict-item]
    assert log.seal is None


def test_reseal_adds_outcome_flags_and_keeps_the_chain() -> None:
    """``reseal`` keeps every record and hash, changes only the seal (which still
    verifies and replays), refuses an unsealed log and a flag that would rename one."""
    from grid_core.audit import reseal
    from grid_core.errors import AuditError
    from grid_core.replay import replay

    log = honest_log(5)
    out = reseal(log, {"role": "analyst", "run": "ok: 3 rows"})
    assert out.records == log.records and out.hashes == log.hashes
    assert out.seal is not None and out.seal["mode"]["run"] == "ok: 3 rows"
    assert out.seal_hash != log.seal_hash
    assert verify(out.lines(), anchor=out.seal_hash).ok
    assert replay(out.lines(), ENGINE).ok
    with pytest.raises(AuditError, match="already has"):
        reseal(log, {"mode": 2})
    with pytest.raises(AuditError, match="sealed"):
        reseal(AuditLog(), {"x": 1})


# -------------------------------------------------------------- grid.audit/1 logs

V1_LOGS = sorted((Path(__file__).parent / "data" / "audit_v1").glob("*.jsonl"))


@pytest.mark.parametrize("path", V1_LOGS, ids=lambda p: p.stem)
def test_a_version_1_log_still_verifies_and_replays(path: Path) -> None:
    """Logs written before ``grid.audit/2`` (the old writer's own output) verify,
    replay against their artifacts, keep their schema when resealed, and every
    edit is still caught."""
    from grid_core.replay import replay

    lines = read_lines(path)
    verdict, log = read(lines)
    assert verdict.ok and verdict.records == len(log.records) > 10, verdict
    assert log.schema == SCHEMA_1 and log.records[0].prev_hash == GENESES[SCHEMA_1]
    assert log.seal is not None and log.seal["schema"] == SCHEMA_1
    assert verify(lines, anchor=log.seal_hash).ok
    assert replay(lines, ENGINE, anchor=log.seal_hash).ok
    for r, h in zip(log.records, log.hashes, strict=True):
        assert parse_record_encoding(r.encoding(SCHEMA_1)) == (SCHEMA_1, r)
        assert r.digest(SCHEMA_1) == h != r.digest()
    resealed = reseal(log, {"role": "analyst"})
    assert resealed.schema == SCHEMA_1 and verify(resealed.lines()).ok
    # An edited record, a /2 seal over /1 records, and /1 records re-hashed as
    # /2 from the /2 genesis are each refused.
    objs = [json.loads(line) for line in lines if line.strip()]
    objs[3]["token"] += 1
    assert verify([json.dumps(o) for o in objs]).first_bad_step == 3
    objs[3]["token"] -= 1
    objs[-1]["seal"]["schema"] = SCHEMA
    bad = verify([json.dumps(o) for o in objs])
    assert not bad.ok and "its records are 'grid.audit/1'" in bad.reason
    mixed = AuditLog()
    for r in log.records:
        mixed.append(int(r.config_hash, 16), r.mask_entry_id, r.token, r.blocked_count, r.kind)  # type: ignore[arg-type]
    mixed.close(log.seal["stop_reason"], log.seal["fingerprints"], log.seal["mode"])
    assert mixed.schema == SCHEMA and verify(mixed.lines()).ok
    assert replay(mixed.lines(), ENGINE).ok
    assert mixed.hashes != log.hashes


def test_an_empty_log_takes_its_seals_schema() -> None:
    for schema in SCHEMAS:
        log = AuditLog(schema)
        log.close("eos", {"grammar": "g"}, {})
        verdict, back = read(log.lines())
        assert verdict.ok and back.schema == schema and back.head == GENESES[schema]
    log = AuditLog(SCHEMA_1)
    log.close("eos", {"grammar": "g"}, {})
    objs = [json.loads(line) for line in log.lines()]
    objs[0]["seal"]["schema"] = SCHEMA  # a /2 seal must close on /2's genesis
    objs[0]["hash"] = seal_digest(objs[0]["seal"])
    bad = verify([json.dumps(o) for o in objs])
    assert not bad.ok and "head hash" in bad.reason
