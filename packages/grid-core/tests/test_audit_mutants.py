"""The audit chain's pieces by hand (issue 14's mutation campaign).

``test_audit.py`` checks theorem 6's hypotheses and verification by property;
these checks pin what it leaves loose, each to a value or a message worked out
by hand: the left inverse's byte-level forms and errors (every tag, every
length boundary), the exact reason of each rejection, the counters of a
verdict, and the log's writing API (links, seal, lines).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grid_core.audit import (
    GENESIS,
    SCHEMA,
    SCHEMA_1,
    AuditLog,
    Record,
    Verdict,
    _parse_canonical,
    mask_entry_id,
    parse_record_encoding,
    read,
    read_lines,
    reseal,
    seal_digest,
    verify,
    verify_file,
)
from grid_core.errors import AuditError
from grid_core.fingerprint import canonical

L4 = (1).to_bytes(4, "big")


def n4(n: int) -> bytes:
    return n.to_bytes(4, "big")


def n8(n: int) -> bytes:
    return n.to_bytes(8, "big")


# -------------------------------------------------------------- the left inverse


@pytest.mark.parametrize(
    ("data", "pos", "value", "end"),
    [
        (b"N", 0, None, 1),
        (b"T", 0, True, 1),
        (b"F", 0, False, 1),
        (b"xxN", 2, None, 3),
        (b"xT", 1, True, 2),
        (b"i" + n4(2) + b"42", 0, 42, 7),
        (b"i" + n4(1) + b"0", 0, 0, 6),
        (b"i" + n4(2) + b"-5", 0, -5, 7),
        (b"i" + n4(1) + b"7N", 0, 7, 6),
        (b"Ni" + n4(3) + b"123N", 1, 123, 9),
        (b"s" + n8(3) + b"abc", 0, "abc", 12),
        (b"s" + n8(2) + "é".encode(), 0, "é", 11),
        (b"s" + n8(0), 0, "", 9),
        (b"b" + n8(2) + b"\x00\xff", 0, b"\x00\xff", 11),
        (b"s" + n8(1) + b"ab", 0, "a", 10),
        (b"l" + n8(0), 0, [], 9),
        (b"l" + n8(2) + b"NT", 0, [None, True], 11),
        (b"l" + n8(2) + b"l" + n8(1) + b"Fi" + n4(1) + b"9", 0, [[False], 9], 25),
        (b"Nl" + n8(1) + b"s" + n8(1) + b"zN", 1, ["z"], 20),
    ],
)
def test_parse_canonical_forms(data: bytes, pos: int, value: object, end: int) -> None:
    got, got_end = _parse_canonical(data, pos)
    assert (got, got_end) == (value, end)
    assert type(got) is type(value)


def test_parse_canonical_round_trips_canonical() -> None:
    value = ["grid", 0, -12, 10**30, "é", b"\x01", [None, True, False, []]]
    data = canonical(value)
    assert _parse_canonical(data, 0) == (value, len(data))
    assert _parse_canonical(b"pad" + data, 3) == (value, 3 + len(data))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "tag b'' is no record field form"),
        (b"Z", "tag b'Z' is no record field form"),
        (b"S" + n8(0), "tag b'S' is no record field form"),
        (b"i", "truncated length"),
        (b"i\x00\x00\x00", "truncated length"),
        (b"i" + n4(1), "truncated integer"),
        (b"i" + n4(3) + b"12", "truncated integer"),
        (b"i" + n4(2) + b"01", "non-canonical integer"),
        (b"i" + n4(2) + b"+1", "non-canonical integer"),
        (b"i" + n4(3) + b"1_0", "non-canonical integer"),
        (b"s", "truncated length"),
        (b"s" + n8(0)[:7], "truncated length"),
        (b"b" + n8(0)[:7], "truncated length"),
        (b"l" + n8(0)[:7], "truncated length"),
        (b"s" + n8(1), "truncated string"),
        (b"b" + n8(4) + b"abc", "truncated string"),
        (b"l" + n8(2) + b"N", "tag b'' is no record field form"),
    ],
)
def test_parse_canonical_errors(data: bytes, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        _parse_canonical(data, 0)
    assert str(caught.value) == message


def test_parse_canonical_empty_int_body() -> None:
    with pytest.raises(ValueError, match="invalid literal"):
        _parse_canonical(b"i" + n4(0), 0)


REC = Record(3, "00000000000000ab", "0" * 31 + "1", 7, 2, "forced", GENESIS)


def test_parse_record_encoding_by_hand() -> None:
    enc = REC.encoding()
    assert enc == (
        bytes.fromhex(GENESIS)
        + b"grid.audit/2"
        + n8(3)
        + bytes.fromhex("00000000000000ab")
        + bytes(15)
        + b"\x01"
        + n4(7)
        + n4(2)
        + b"\x01"
    )
    assert parse_record_encoding(enc) == (SCHEMA, REC)
    enc_1 = REC.encoding(SCHEMA_1)
    assert enc_1[:32] == bytes.fromhex(GENESIS) and enc_1[32:33] == b"l"
    assert parse_record_encoding(enc_1) == (SCHEMA_1, REC)


REC_2 = REC.encoding()
NEITHER = "not a record encoding: neither 'grid.audit/1' nor 'grid.audit/2'"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (bytes(32) + b"Z", NEITHER),
        (bytes(32) + b"s" + n8(1), NEITHER),
        (bytes(32), NEITHER),
        (bytes(32) + b"N", NEITHER),
        (REC_2[:-1], NEITHER),
        (REC_2 + b"\x00", NEITHER),
        (REC_2[:43] + b"3" + REC_2[44:], NEITHER),
        (REC_2[:-1] + b"\x04", "not a record encoding: kind 4"),
        (REC_2[:-1] + b"\xff", "not a record encoding: kind 255"),
        (
            bytes(32) + b"l" + n8(1) + b"Z",
            "not a record encoding: tag b'Z' is no record field form",
        ),
        (
            bytes(32) + b"l" + n8(1) + b"s" + n8(1),
            "not a record encoding: truncated string",
        ),
        (bytes(32) + b"l", "not a record encoding: truncated length"),
        (
            bytes(32) + canonical([1] * 7),
            "not a record encoding: expected exactly one 8-field list",
        ),
        (
            bytes(32) + canonical([1] * 9),
            "not a record encoding: expected exactly one 8-field list",
        ),
        (
            REC.encoding(SCHEMA_1) + b"N",
            "not a record encoding: expected exactly one 8-field list",
        ),
        (
            bytes.fromhex(GENESIS) + canonical(["grid.audit/2", *REC.fields()[1:]]),
            "not a record encoding: schema 'grid.audit/2'",
        ),
        (
            bytes(32) + REC.encoding(SCHEMA_1)[32:],
            "not a record encoding: its fields are not a record's",
        ),
        (
            bytes.fromhex(GENESIS) + canonical([SCHEMA_1, -1, *REC.fields()[2:]]),
            "not a record encoding: its fields are not a record's",
        ),
    ],
)
def test_parse_record_encoding_errors(data: bytes, message: str) -> None:
    with pytest.raises(AuditError) as caught:
        parse_record_encoding(data)
    assert str(caught.value) == message


def test_mask_entry_id_is_blake2b_128() -> None:
    assert mask_entry_id(b"") == "cae66941d9efbd404e4d88758ea67670"
    assert mask_entry_id(b"\x01\x02") == hashlib.blake2b(b"\x01\x02", digest_size=16).hexdigest()
    assert mask_entry_id(b"\x01\x02") != mask_entry_id(b"")


# -------------------------------------------------------------- writing


def small_log(n: int = 3) -> AuditLog:
    log = AuditLog()
    for i in range(n):
        log.append(i + 1, f"{i:032x}", 10 + i, i, "sampled")
    return log


def test_append_links_records_by_hand() -> None:
    log = AuditLog()
    assert (log.records, log.hashes, log.seal, log.seal_hash) == ([], [], None, None)
    assert log.head == GENESIS
    r0 = log.append(0xFFFF_FFFF_FFFF_FFFF, "a" * 32, 0, 0, "sampled")
    assert r0 == Record(0, "f" * 16, "a" * 32, 0, 0, "sampled", GENESIS)
    assert log.hashes == [r0.digest()] and log.head == r0.digest()
    r1 = log.append(0, "b" * 32, 9, 4, "eos")
    assert r1 == Record(1, "0" * 16, "b" * 32, 9, 4, "eos", r0.digest())
    assert log.records == [r0, r1] and log.hashes == [r0.digest(), r1.digest()]


def test_truncate_keeps_a_prefix() -> None:
    log = small_log(3)
    records, hashes = list(log.records), list(log.hashes)
    log.truncate(2)
    assert (log.records, log.hashes) == (records[:2], hashes[:2])
    log.truncate(5)
    assert (log.records, log.hashes) == (records[:2], hashes[:2])
    log.truncate(0)
    assert (log.records, log.hashes, log.head) == ([], [], GENESIS)


def test_close_and_lines_by_hand() -> None:
    log = small_log(2)
    log.close("budget", {"grammar": "g1"}, {"k": 1})
    seal = {
        "schema": SCHEMA,
        "stop_reason": "budget",
        "fingerprints": {"grammar": "g1"},
        "mode": {"k": 1},
        "record_count": 2,
        "head_hash": log.hashes[-1],
    }
    assert log.seal == seal
    assert log.seal_hash == seal_digest(seal)
    lines = log.lines()
    assert len(lines) == 3
    for line, r, h in zip(lines, log.records, log.hashes, strict=False):
        assert json.loads(line) == {**r.__dict__, "hash": h}
        assert list(json.loads(line)) == sorted(json.loads(line))  # sort_keys
    assert json.loads(lines[2]) == {"seal": seal, "hash": log.seal_hash}
    assert lines[2] == json.dumps({"seal": seal, "hash": log.seal_hash}, sort_keys=True)
    assert small_log(2).lines() == lines[:2]  # unsealed: records only


def test_close_copies_its_arguments() -> None:
    fingerprints, mode = {"grammar": "g1"}, {"k": 1}
    log = small_log(1)
    log.close("eos", fingerprints, mode)
    fingerprints["x"], mode["y"] = "2", 2
    assert log.seal is not None
    assert log.seal["fingerprints"] == {"grammar": "g1"} and log.seal["mode"] == {"k": 1}


@pytest.mark.parametrize(
    ("fingerprints", "mode", "message"),
    [
        ({"g": 1}, {}, "fingerprints must map artifact names to strings"),
        ({1: "g"}, {}, "fingerprints must map artifact names to strings"),
        ({"g": "\ud800"}, {}, "fingerprints must map artifact names to strings"),
        ({}, {1: 1}, "mode must be an object"),
        ({}, {"\ud800": 1}, "mode must be an object"),
        ({}, {"t": 0.5}, "mode flag 't' must be an integer, a string, a boolean or null"),
        ({}, {"t": [1]}, "mode flag 't' must be an integer, a string, a boolean or null"),
        ({}, {"t": "\ud800"}, "mode flag 't' must be an integer, a string, a boolean or null"),
        ({}, {"a": 1, "t": b"x"}, "mode flag 't' must be an integer, a string, a boolean or null"),
    ],
)
def test_unsealable_arguments(fingerprints: Any, mode: Any, message: str) -> None:
    log = small_log(1)
    with pytest.raises(AuditError) as caught:
        log.close("eos", fingerprints, mode)
    assert str(caught.value) == f"cannot seal the log: {message}"
    assert log.seal is None and log.seal_hash is None


def test_sealable_flag_types() -> None:
    log = small_log(1)
    mode = {"n": None, "b": False, "i": -3, "s": "x", "t": True}
    log.close("\u00e9", {"grammar": "g", "lexicon": ""}, mode)
    assert log.seal is not None and log.seal["mode"] == mode
    assert verify(log.lines(), anchor=log.seal_hash) == Verdict(True, 1, anchored=True)


def test_unsealable_stop_reason() -> None:
    log = small_log(1)
    with pytest.raises(AuditError) as caught:
        log.close(3, {}, {})  # type: ignore[arg-type]
    assert str(caught.value) == "cannot seal the log: stop_reason must be a string"


def test_sealed_log_refuses_edits() -> None:
    log = small_log(1)
    log.close("eos", {}, {})
    calls: list[tuple[Callable[[], object], str]] = [
        (
            lambda: log.append(0, "0" * 32, 1, 1, "sampled"),
            "the log is sealed; nothing can be appended",
        ),
        (lambda: log.truncate(0), "the log is sealed; it cannot be truncated"),
        (lambda: log.close("eos", {}, {}), "the log is already sealed"),
    ]
    for call, message in calls:
        with pytest.raises(AuditError) as caught:
            call()
        assert str(caught.value) == message
    assert len(log.records) == 1


def test_of_chain_checks_links() -> None:
    log = small_log(3)
    again = AuditLog.of_chain(zip(log.records, log.hashes, strict=True))
    assert (again.records, again.hashes, again.seal) == (log.records, log.hashes, None)
    assert again.head == log.head
    with pytest.raises(AuditError) as caught:
        AuditLog.of_chain(zip(log.records[1:], log.hashes[1:], strict=True))
    assert str(caught.value) == "record 1 does not link to the chain before it"
    r1 = log.records[1]
    unlinked = Record(1, r1.config_hash, r1.mask_entry_id, r1.token, 0, r1.kind, GENESIS)
    with pytest.raises(AuditError) as caught:
        AuditLog.of_chain([(log.records[0], log.hashes[0]), (unlinked, "0" * 64)])
    assert str(caught.value) == "record 1 does not link to the chain before it"


def test_of_lines_keeps_the_text_and_parses_it_on_first_use(tmp_path: Path) -> None:
    """A log of record lines (the native guide's): its lines are the text it was
    given, its length and head need no parse, its seal is the eager log's, the
    file it writes is the eager log's, and its records, parsed on first use, are
    the eager log's; a line that does not link, or an end that is not the head,
    is an error then."""
    log = small_log(3)
    text = "\n".join(log.lines()).encode()
    lazy = AuditLog.of_lines(text, log.head)
    assert lazy._text is not None and (len(lazy), lazy.head) == (3, log.head)
    assert lazy.lines() == log.lines() and lazy._text is not None
    log.close("eos", {"grammar": "g"}, {"mode": 2})
    lazy.close("eos", {"grammar": "g"}, {"mode": 2})
    assert (lazy.seal, lazy.seal_hash, lazy.lines()) == (log.seal, log.seal_hash, log.lines())
    logs = {"eager": log, "lazy": lazy, "empty": AuditLog()}
    logs["lazy-empty"] = AuditLog.of_lines(b"", GENESIS)
    for name, each in logs.items():
        each.write(tmp_path / name)
        assert (tmp_path / name).read_text() == "".join(f"{line}\n" for line in each.lines())
    assert lazy._text is not None, "writing must not parse the records"
    again = reseal(lazy, {"role": "analyst"})
    assert again._text is not None and again.lines()[:3] == log.lines()[:3]
    assert (lazy.records, lazy.hashes) == (log.records, log.hashes) and lazy._text is None
    assert (
        AuditLog.of_lines(b"", GENESIS).records == [] and len(AuditLog.of_lines(b"", GENESIS)) == 0
    )
    skipped = "\n".join(log.lines()[1:3]).encode()
    with pytest.raises(AuditError, match="record 1 does not link"):
        _ = AuditLog.of_lines(skipped, log.head).records
    with pytest.raises(AuditError, match="do not end at the chain's head"):
        _ = AuditLog.of_lines(text, GENESIS).hashes
    cut = AuditLog.of_lines(text, log.head)
    cut.truncate(1)
    assert (cut.records, cut.head) == (log.records[:1], log.hashes[0])


def test_reseal_by_hand() -> None:
    log = small_log(2)
    log.close("eos", {"grammar": "g"}, {"a": 1})
    out = reseal(log, {"b": "x"})
    assert out.seal == {**log.seal, "mode": {"a": 1, "b": "x"}}  # type: ignore[dict-item]
    assert out.seal_hash == seal_digest(out.seal)
    assert log.seal["mode"] == {"a": 1}  # type: ignore[index]
    with pytest.raises(AuditError) as caught:
        reseal(log, {"a": 2, "b": 1, "0": 1})
    assert str(caught.value) == "the seal already has the mode flags ['a']"
    with pytest.raises(AuditError) as caught:
        reseal(small_log(1), {})
    assert str(caught.value) == "only a sealed log is resealed"
    assert reseal(log, {}).seal_hash == log.seal_hash


# -------------------------------------------------------------- reading


def sealed_lines(n: int = 2) -> list[str]:
    log = small_log(n)
    log.close("eos", {"grammar": "g"}, {"a": 1})
    return log.lines()


def objs(n: int = 2) -> list[dict[str, Any]]:
    return [json.loads(x) for x in sealed_lines(n)]


def test_read_returns_what_verified() -> None:
    lines = sealed_lines(3)
    verdict, log = read(["", *lines[:2], "  ", *lines[2:], "", "\t"])
    assert verdict == Verdict(True, 3)
    assert str(verdict) == "VALID: 3 records, sealed"
    assert log.lines() == lines
    verdict, log = read([*lines[:2], lines[0], *lines[3:]])
    assert verdict == Verdict(False, 2, 2, "expected step 2, found 0")
    assert str(verdict) == "INVALID at step 2: expected step 2, found 0"
    assert len(log.records) == 2 and log.seal is None and log.seal_hash is None


def test_anchored_verdict_text() -> None:
    lines = sealed_lines(1)
    seal_hash = json.loads(lines[-1])["hash"]
    assert str(verify(lines, anchor=seal_hash)) == "VALID: 1 records, sealed, anchor matches"
    verdict = verify(lines, anchor="0" * 64)
    assert verdict == Verdict(
        False, 1, None, "the seal's hash is not the anchored one (the log was rewritten)"
    )
    assert str(verdict).startswith("INVALID at the seal: ")


def dumps(objects: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(o) for o in objects]


def test_each_rejection_reason_by_hand() -> None:
    o = objs(2)
    cases: list[tuple[list[str], Verdict]] = []

    def case(lines: list[str], count: int, step: int | None, reason: str) -> None:
        cases.append((lines, Verdict(False, count, step, reason)))

    case(dumps(o[:2]), 2, None, "unsealed log (2 records): it may be cut short")
    case([*dumps(o), dumps(o)[0]], 2, None, "line 4 follows the seal")
    case(
        [dumps(o)[0], "{x"],
        1,
        1,
        "line 2 is not JSON (Expecting property name enclosed in "
        "double quotes: line 1 column 2 (char 1))",
    )
    case([dumps(o)[0], '{"a": 1, "a": 2}'], 1, 1, "line 2 repeats the key 'a'")
    case([dumps(o)[0], "[1]"], 1, 1, "line 2 is not a JSON object")
    case(["\udcff"], 0, 0, "line 1 is not UTF-8")
    bad = {**o[0], "extra": 1}
    case([json.dumps(bad)], 0, 0, f"line 1 has fields {sorted(bad)}")
    for name, value, reason in [
        ("step", -1, "step must be a non-negative integer"),
        ("step", True, "step must be a non-negative integer"),
        ("config_hash", "0" * 15, "config_hash must be 16 lowercase hex digits"),
        ("config_hash", 5, "config_hash must be 16 lowercase hex digits"),
        ("mask_entry_id", "A" * 32, "mask_entry_id must be 32 lowercase hex digits"),
        ("mask_entry_id", None, "mask_entry_id must be 32 lowercase hex digits"),
        ("token", 1.0, "token must be a non-negative integer"),
        ("blocked_count", -2, "blocked_count must be a non-negative integer"),
        ("kind", "other", "unknown kind 'other'"),
        ("prev_hash", "0" * 63, "prev_hash must be 64 lowercase hex digits"),
        ("prev_hash", 0, "prev_hash must be 64 lowercase hex digits"),
    ]:
        case(dumps([{**o[0], name: value}]), 0, 0, reason)
    case(dumps([{**o[0], "step": 1}]), 0, 0, "expected step 0, found 1")
    case(
        dumps([{**o[0], "prev_hash": "0" * 64}]),
        0,
        0,
        "prev_hash does not link to the previous record",
    )
    case(dumps([{**o[0], "hash": "0" * 64}]), 0, 0, "the record's hash does not match its fields")
    case(dumps([o[0], o[0]]), 1, 1, "expected step 1, found 0")
    seal = o[2]
    case(
        [*dumps(o[:2]), json.dumps({**seal, "x": 1})],
        2,
        None,
        "malformed seal line (fields ['hash', 'seal', 'x'])",
    )
    case(
        [*dumps(o[:2]), json.dumps({"seal": 1, "hash": seal["hash"]})],
        2,
        None,
        "malformed seal line (fields ['hash', 'seal'])",
    )
    body = seal["seal"]
    changes: list[tuple[dict[str, Any], str]] = [
        (
            {"x": 1},
            "the seal has fields ['fingerprints', 'head_hash', 'mode', 'record_count', "
            "'schema', 'stop_reason', 'x'], expected ['fingerprints', 'head_hash', 'mode', "
            "'record_count', 'schema', 'stop_reason']",
        ),
        (
            {"schema": "grid.audit/0"},
            "unknown schema 'grid.audit/0' (expected 'grid.audit/1' or 'grid.audit/2')",
        ),
        ({"stop_reason": None}, "stop_reason must be a string"),
        ({"fingerprints": []}, "fingerprints must map artifact names to strings"),
        ({"mode": {"a": 0.5}}, "mode flag 'a' must be an integer, a string, a boolean or null"),
        ({"record_count": -1}, "record_count must be a non-negative integer"),
        ({"record_count": False}, "record_count must be a non-negative integer"),
        ({"head_hash": "0" * 65}, "head_hash must be 64 lowercase hex digits"),
        ({"head_hash": 1}, "head_hash must be 64 lowercase hex digits"),
    ]
    for change, reason in changes:
        line = json.dumps({**seal, "seal": {**body, **change}})
        case([*dumps(o[:2]), line], 2, None, f"malformed seal: {reason}")
    line = json.dumps({**seal, "seal": {**body, "record_count": 3}})
    case([*dumps(o[:2]), line], 2, None, "the seal counts 3 records, the log has 2")
    line = json.dumps({**seal, "seal": {**body, "head_hash": GENESIS}})
    case([*dumps(o[:2]), line], 2, None, "the seal's head hash is not the last record's")
    line = json.dumps({**seal, "hash": "0" * 64})
    case([*dumps(o[:2]), line], 2, None, "the seal's hash does not match its fields")
    for lines, expected in cases:
        verdict, log = read(lines)
        assert verdict == expected, lines
        assert len(log.records) == expected.records and log.seal is None


def test_read_lines_and_verify_file(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    lines = sealed_lines(2)
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff")
    assert read_lines(path) == [*lines, "\udcff"]
    assert verify_file(path) == Verdict(False, 2, None, "line 4 follows the seal")
    path.write_text("\n".join(lines) + "\n")
    seal_hash = json.loads(lines[-1])["hash"]
    assert verify_file(path, seal_hash) == Verdict(True, 2, anchored=True)
    assert verify_file(path, "0" * 64).ok is False
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(AuditError) as caught:
        read_lines(missing)
    assert str(caught.value) == f"cannot read audit log {missing}: No such file or directory"


def test_append_checks_its_arguments() -> None:
    log = small_log(1)
    with pytest.raises(AssertionError, match="low64"):
        log.append(1 << 64, "0" * 32, 1, 1, "sampled")
    log.append((1 << 64) - 1, "0" * 32, 1, 1, "sampled")
    with pytest.raises(AssertionError, match=r"^mask_entry_id must be 32 lowercase hex digits$"):
        log.append(0, "XYZ", 1, 1, "sampled")
    assert len(log.records) == len(log.hashes) == 2


def test_records_and_hashes_must_pair_up() -> None:
    log = small_log(2)
    log.hashes.append("0" * 64)
    with pytest.raises(ValueError):
        log.lines()
    log = small_log(2)
    log.close("eos", {}, {})
    log.hashes.pop()
    with pytest.raises(ValueError):
        reseal(log, {"b": 1})


def test_reseal_needs_a_seal_hash() -> None:
    log = small_log(1)
    log.close("eos", {}, {})
    log.seal_hash = None
    with pytest.raises(AuditError, match=r"^only a sealed log is resealed$"):
        reseal(log, {"b": 1})


@pytest.mark.parametrize(
    ("field", "largest", "message"),
    [
        ("step", 2**64 - 1, "step must be below 2^64 in grid.audit/2"),
        ("token", 2**32 - 1, "token must be below 2^32 in grid.audit/2"),
        ("blocked_count", 2**32 - 1, "blocked_count must be below 2^32 in grid.audit/2"),
    ],
)
def test_version_2_bounds_by_hand(field: str, largest: int, message: str) -> None:
    """A /2 record holds each integer in its fixed width; /1 has no bound."""
    from dataclasses import replace

    from grid_core.audit import _record_problem

    at_most = replace(REC, **{field: largest})
    over = replace(REC, **{field: largest + 1})
    assert _record_problem(at_most, SCHEMA) is None
    assert _record_problem(over, SCHEMA) == message
    assert _record_problem(over, SCHEMA_1) is None
    assert parse_record_encoding(at_most.encoding()) == (SCHEMA, at_most)


def test_version_2_integers_are_big_endian_by_hand() -> None:
    r = Record(
        0x0102030405060708, "0a0b0c0d0e0f1011", "ab" * 16, 0x11223344, 0x55667788, "eos", GENESIS
    )
    enc = r.encoding()
    assert enc[44:52] == bytes.fromhex("0102030405060708")
    assert enc[52:60] == bytes.fromhex("0a0b0c0d0e0f1011")
    assert enc[76:80] == bytes.fromhex("11223344")
    assert enc[80:84] == bytes.fromhex("55667788")
    assert enc[84:] == b"\x03"
    assert parse_record_encoding(enc) == (SCHEMA, r)
    for kind, code in zip(("sampled", "forced", "reserve", "eos"), range(4), strict=True):
        assert Record(0, "0" * 16, "0" * 32, 0, 0, kind, GENESIS).encoding()[-1] == code


def test_read_refuses_a_version_2_integer_past_its_width() -> None:
    """A /2 line whose token needs 33 bits is a verdict naming the bound (not an
    OverflowError from encoding it): the bounds are the log's schema's."""
    lines = sealed_lines(1)
    record = json.loads(lines[0])
    record["token"] = 2**32
    verdict, _log = read([json.dumps(record), *lines[1:]])
    assert (verdict.ok, verdict.first_bad_step) == (False, 0)
    assert verdict.reason == "token must be below 2^32 in grid.audit/2"


def test_read_refuses_a_first_link_that_is_no_string() -> None:
    """The schema is read off the first link only when it is a string: a list
    there is a verdict on its type, not a TypeError from a lookup."""
    lines = sealed_lines(1)
    record = json.loads(lines[0])
    record["prev_hash"] = []
    verdict, _log = read([json.dumps(record), *lines[1:]])
    assert (verdict.ok, verdict.reason) == (False, "prev_hash must be 64 lowercase hex digits")


def test_a_read_log_ends_at_its_last_hash() -> None:
    lines = sealed_lines(3)
    verdict, got = read(lines)
    assert verdict.ok
    assert got.head == got.hashes[-1] == json.loads(lines[2])["hash"]


def test_lines_that_do_not_end_at_the_given_head_are_refused() -> None:
    log = small_log(2)
    text = "\n".join(log.lines()).encode()
    assert AuditLog.of_lines(text, log.head).records == log.records
    with pytest.raises(AuditError, match=r"^the records do not end at the chain's head$"):
        _ = AuditLog.of_lines(text, log.hashes[0]).records


def test_append_refuses_a_version_2_integer_past_its_width() -> None:
    """An internal assert, named: a token of 33 bits never reaches the encoding."""
    for schema, ok in ((SCHEMA, False), (SCHEMA_1, True)):
        log = AuditLog(schema)
        if ok:
            log.append(1, "0" * 32, 2**32, 0, "sampled")
            continue
        with pytest.raises(AssertionError, match=r"^token must be below 2\^32 in grid.audit/2$"):
            log.append(1, "0" * 32, 2**32, 0, "sampled")
