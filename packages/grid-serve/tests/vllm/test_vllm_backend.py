"""The GRID backend driven by vLLM's own StructuredOutputManager, on CPU, over SmolLM2.

Every mask is checked bit for bit against a GridGuide of the same engine that
is driven alongside (the reference), on real statements tokenized by vLLM's
tokenizer. vLLM's stop ids for SmolLM2 are {2} (``<|im_end|>``, the tokenizer's
EOS); the GRID vocabulary read from its tokenizer.json also counts id 0
(``<|endoftext|>``) as EOS, which the backend therefore never admits.
"""

from __future__ import annotations

import array
import gc
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "vllm.v1.structured_output", reason="vllm is not installed (`nox -s vllm` runs these tests)"
)

import torch
from conftest import ANALYST, CLERK, INTERN
from vllm_harness import request, row_bytes, wait_grammar

from grid_core.audit import verify
from grid_core.errors import ServingError
from grid_core.guide import GridGuide
from grid_core.replay import replay
from grid_core.vocab import Vocabulary
from grid_serve.vllm.backend import GridBackend, GridGrammar, model_vocabulary

REPLAYS = {
    "analyst-join": (
        ANALYST,
        "SELECT e.name, d.name FROM employees AS e JOIN departments AS d ON e.dept_id = d.id;",
    ),
    "clerk-update": (CLERK, "UPDATE orders SET total = 12.5 WHERE id = 3;"),
    "intern-where": (INTERN, "SELECT name FROM departments WHERE budget > 1000;"),
}


def reference_row(guide: GridGuide, stops: set[int]) -> bytes:
    """What the backend must write for ``guide``'s configuration under ``stops``:
    the guide's mask with the EOS ids replaced by the stop ids (where EOS is legal)."""
    words = array.array("I")
    words.frombytes(guide.mask().tobytes())
    eos = guide.eos_allowed()
    for i in set(guide.engine.vocab.eos_ids) | stops:
        words[i >> 5] &= ~(1 << (i & 31))
        if eos and i in stops:
            words[i >> 5] |= 1 << (i & 31)
    return words.tobytes()


def compiled(manager: Any, config: Any, tokenizer: Any, rid: str, spec: Any, **kw: Any) -> Any:
    r = request(config, tokenizer, rid, spec, **kw)
    manager.grammar_init(r)
    grammar = wait_grammar(r)
    assert isinstance(grammar, GridGrammar), grammar
    return r, grammar


def test_vocabulary_from_the_engine_tokenizer_is_smollm2s(
    manager: Any, config: Any, tokenizer: Any, vocab: Vocabulary
) -> None:
    """vLLM's tokenizer gives GRID the GGUF vocabulary's spellings, as wide as the logits;
    fails if any id's spelling or the EOS differs."""
    grid = model_vocabulary(tokenizer, config.model_config.get_vocab_size())
    assert grid.n_vocab == vocab.n_vocab == config.model_config.get_vocab_size()
    assert grid.token_bytes == vocab.token_bytes
    assert grid.eos_ids[0] == tokenizer.eos_token_id == 2


def test_grammar_init_builds_the_backend_and_compiles_on_vllms_pool(
    manager: Any, config: Any, tokenizer: Any
) -> None:
    """The first GRID request makes the manager's backend GRID's and compiles on vLLM's
    executor (another thread); the first row is there before the request is scheduled.
    Fails if the backend is another one or the compile ran in the caller's thread."""
    caller = threading.get_ident()
    r = request(config, tokenizer, "r", ANALYST)
    manager.grammar_init(r)
    future = r.structured_output_request._grammar
    assert future is not None and hasattr(future, "result")
    grammar = wait_grammar(r)
    assert manager.backend_name == "grid" and isinstance(manager.backend, GridBackend)
    assert isinstance(grammar, GridGrammar) and grammar.mask_ready()
    assert manager.executor._threads and caller not in {t.ident for t in manager.executor._threads}
    assert grammar.stops.ids == {2}


@pytest.mark.parametrize(("spec", "sql"), REPLAYS.values(), ids=REPLAYS.keys())
def test_replay_masks_equal_the_guide_bit_for_bit(
    manager: Any, config: Any, tokenizer: Any, spec: Any, sql: str
) -> None:
    """grammar_bitmask along a real statement, then EOS: every row equals the reference
    guide's, under vLLM's stop ids {2} and under the vocabulary's own EOS ids (then the
    row is GridGuide.mask() itself). Fails on any differing bit or a refused token."""
    ids = tokenizer.encode(sql, add_special_tokens=False)
    a, grammar_a = compiled(manager, config, tokenizer, "a", spec)
    eos_ids = list(grammar_a.engine.vocab.eos_ids)
    b, _ = compiled(manager, config, tokenizer, "b", spec, stop_token_ids=eos_ids)
    reference = GridGuide(grammar_a.engine)
    requests = {"a": a, "b": b}
    for token in [*ids, 2]:
        bitmask = manager.grammar_bitmask(requests, ["a", "b"], {})
        assert row_bytes(bitmask, 0) == reference_row(reference, {2})
        assert row_bytes(bitmask, 1) == reference.mask().tobytes()
        for r in requests.values():
            assert manager.accept_tokens(r, [token])
        reference.accept_token(token)
    assert grammar_a.is_terminated() and reference.is_terminated()


def test_requests_run_on_the_native_guide_and_are_audited(
    manager: Any, config: Any, tokenizer: Any
) -> None:
    """Fails if a request's guide is the Python one while grid-kernels is installed, or
    if a request that ends (at EOS, or dropped before it) leaves no sealed log in
    GRID_AUDIT_DIR that ``grid audit verify`` and ``grid audit replay`` accept, or if
    a log is sealed and written in the engine's thread instead of the audit thread."""
    pytest.importorskip("grid_kernels._native")
    from grid_core.kernels import KernelGuide

    sql = REPLAYS["analyst-join"][1]
    ids = tokenizer.encode(sql, add_special_tokens=False)
    r, grammar = compiled(manager, config, tokenizer, "audited-eos", ANALYST)
    assert isinstance(grammar.guide, KernelGuide) and grammar.guide.audited
    backend = manager.backend
    sink, sealed_on = backend.audit_sink, []

    def recording(request_id: str, log: Any) -> None:
        sealed_on.append(threading.current_thread().name)
        sink(request_id, log)

    backend.audit_sink = recording
    engine = grammar.engine
    try:
        for token in [*ids, 2]:
            manager.grammar_bitmask({"audited-eos": r}, ["audited-eos"], {})
            assert manager.accept_tokens(r, [token])
        r.structured_output_request._grammar = None  # vLLM frees a finished request's grammar
        del grammar
        gc.collect()
        backend.flush_audit()
    finally:
        backend.audit_sink = sink
    assert len(sealed_on) == 1 and sealed_on[0].startswith("grid-audit")
    logs = Path(os.environ["GRID_AUDIT_DIR"])
    lines = (logs / "audited-eos.jsonl").read_text().splitlines()
    seal = json.loads(lines[-1])["seal"]
    assert (seal["stop_reason"], seal["record_count"]) == ("eos", len(ids) + 1)
    assert verify(lines).ok and replay(lines, engine).ok

    r2, dropped = compiled(manager, config, tokenizer, "audited-cut", ANALYST)
    engine = dropped.engine
    for token in ids[:3]:
        manager.grammar_bitmask({"audited-cut": r2}, ["audited-cut"], {})
        assert manager.accept_tokens(r2, [token])
    r2.structured_output_request._grammar = None  # vLLM frees a finished request's grammar
    del dropped
    gc.collect()
    manager.backend.flush_audit()
    lines = (logs / "audited-cut.jsonl").read_text().splitlines()
    seal = json.loads(lines[-1])["seal"]
    assert (seal["stop_reason"], seal["record_count"]) == ("truncated", 3)
    assert replay(lines, engine).ok

    # A token outside the mask, the request's last (vLLM ends it with an error): the
    # log says so (it said "truncated"). One the grammar rolls back past (a draft
    # refused while vLLM fills bitmasks) leaves the request going on.
    for name, rolled_back, stop in (
        ("refused", False, "error"),
        ("refused-draft", True, "truncated"),
    ):
        r3, refused = compiled(manager, config, tokenizer, name, ANALYST)
        engine = refused.engine
        manager.grammar_bitmask({name: r3}, [name], {})
        assert manager.accept_tokens(r3, [ids[0]])
        assert not manager.accept_tokens(r3, [ids[0]])  # SELECT SELECT
        if rolled_back:
            refused.rollback(1)
        assert refused.error is None  # vLLM decides what a refusal means
        r3.structured_output_request._grammar = None
        del refused
        gc.collect()
        manager.backend.flush_audit()
        lines = (logs / f"{name}.jsonl").read_text().splitlines()
        seal = json.loads(lines[-1])["seal"]
        assert (seal["stop_reason"], seal["record_count"]) == (stop, 0 if rolled_back else 1)
        assert replay(lines, engine).ok

    # A refusal then a reset: the reset attempt is sealed `reset`; the next attempt,
    # dropped without a token, is `truncated` (the refusal was carried over: `error`).
    r4, again = compiled(manager, config, tokenizer, "refused-reset", ANALYST)
    manager.grammar_bitmask({"refused-reset": r4}, ["refused-reset"], {})
    assert manager.accept_tokens(r4, [ids[0]])
    assert not manager.accept_tokens(r4, [ids[0]])
    again.reset()
    r4.structured_output_request._grammar = None
    del again
    gc.collect()
    manager.backend.flush_audit()
    seals = [
        json.loads((logs / name).read_text().splitlines()[-1])["seal"]
        for name in ("refused-reset.jsonl", "refused-reset~1.jsonl")
    ]
    assert [(x["stop_reason"], x["record_count"]) for x in seals] == [
        ("reset", 1),
        ("truncated", 0),
    ]


def test_speculative_fill_accept_rollback(spec_config: Any, tokenizer: Any) -> None:
    """With two draft tokens per step, grammar_bitmask fills the rows of the current
    configuration and after each draft (accepting drafts, then rolling them back); an
    invalid draft's row and those after it repeat the last valid row. Fails if a row
    differs from the reference guide's or the grammar is not back where it started."""
    from vllm.v1.structured_output import StructuredOutputManager

    manager = StructuredOutputManager(spec_config)
    try:
        r, grammar = compiled(manager, spec_config, tokenizer, "s", ANALYST)
        sql = "SELECT name, budget FROM departments;"
        ids = tokenizer.encode(sql, add_special_tokens=False)
        reference = GridGuide(grammar.engine)
        for step, token in enumerate(ids[:-2]):
            drafts = ids[step + 1 : step + 3]
            assert manager.accept_tokens(r, [token])
            reference.accept_token(token)
            bitmask = manager.grammar_bitmask({"s": r}, ["s"], {"s": drafts})
            expected = reference.fork()
            for row, draft in enumerate([None, *drafts]):
                if draft is not None:
                    expected.accept_token(draft)
                assert row_bytes(bitmask, row) == reference_row(expected, {2}), (step, row)
            assert grammar.guide.steps == reference.steps  # drafts rolled back
        bad = tokenizer.encode(")", add_special_tokens=False)
        bitmask = manager.grammar_bitmask({"s": r}, ["s"], {"s": [ids[-2], bad[0]]})
        after = reference.fork()
        after.accept_token(ids[-2])
        assert row_bytes(bitmask, 1) == reference_row(after, {2})
        assert row_bytes(bitmask, 2) == row_bytes(bitmask, 1)
        assert grammar.guide.steps == reference.steps
    finally:
        manager.clear_backend()


def test_speculative_drafts_write_no_events(
    spec_config: Any, tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM's bitmask fill accepts each draft token and rolls them back: their events
    were written, then retracted, every round. With the defer patch the fill marks the
    backend drafting: the file holds the real tokens' events only, no retract line,
    and each round's events are there before the next round (a follower sees the
    table before the statement ends). Fails if a draft's event or a retract is
    written, or the events differ from the guide's."""
    from vllm.v1.structured_output import StructuredOutputManager

    from grid_serve.vllm import defer

    defer.install()  # the plugin's default (GRID_VLLM_DEFER unset); idempotent
    monkeypatch.setenv("GRID_EVENTS_DIR", str(tmp_path))
    manager = StructuredOutputManager(spec_config)
    try:
        r, grammar = compiled(manager, spec_config, tokenizer, "sd", {**ANALYST, "events": True})
        sql = "SELECT name FROM departments WHERE budget > 1000;"
        ids = tokenizer.encode(sql, add_special_tokens=False)
        path = tmp_path / "sd.events.jsonl"
        table_seen = None
        for step, token in enumerate([*ids, 2]):
            assert manager.accept_tokens(r, [token])
            written = path.read_text().splitlines() if path.exists() else []
            assert len(written) == grammar.guide.event_count  # none late, none a draft's
            if table_seen is None and any('"kind": "table"' in x for x in written):
                table_seen = step
            if token != 2:
                drafts = [*ids, 2][step + 1 : step + 3]
                manager.grammar_bitmask({"sd": r}, ["sd"], {"sd": drafts})
                assert not grammar.backend.drafting
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert "retract" not in {x["kind"] for x in lines}
        events = grammar.guide.events()
        assert [(x["kind"], x["start"], x["end"]) for x in lines] == [
            (e.kind, e.start, e.end) for e in events
        ]
        assert table_seen is not None and table_seen < len(ids) - 1
    finally:
        manager.clear_backend()


def test_a_draft_stop_id_leaves_the_log_open(spec_config: Any, tokenizer: Any) -> None:
    """vLLM's bitmask fill accepts draft tokens and rolls them back: a draft stop id
    (after a complete statement) must not seal the request's log. The request then
    goes on, ends at a real stop id, and its one log holds exactly its real tokens.
    Fails if the draft writes a log, or the final log differs from the real tokens."""
    from vllm.v1.structured_output import StructuredOutputManager

    manager = StructuredOutputManager(spec_config)
    try:
        r, grammar = compiled(manager, spec_config, tokenizer, "draft-eos", ANALYST)
        ids = tokenizer.encode("SELECT name FROM departments;", add_special_tokens=False)
        assert manager.accept_tokens(r, ids[:-1])
        manager.grammar_bitmask({"draft-eos": r}, ["draft-eos"], {"draft-eos": [ids[-1], 2]})
        assert grammar.guide.steps == len(ids) - 1 and not grammar.is_terminated()
        backend = manager.backend
        backend.flush_audit()
        logs = Path(os.environ["GRID_AUDIT_DIR"])
        assert not (logs / "draft-eos.jsonl").exists()
        assert manager.accept_tokens(r, [ids[-1], 2]) and grammar.is_terminated()
        engine = grammar.engine
        r.structured_output_request._grammar = None  # vLLM frees a finished request's grammar
        del grammar
        gc.collect()
        backend.flush_audit()
        lines = (logs / "draft-eos.jsonl").read_text().splitlines()
        assert not (logs / "draft-eos~1.jsonl").exists()
        seal = json.loads(lines[-1])["seal"]
        assert (seal["stop_reason"], seal["record_count"]) == ("eos", len(ids) + 1)
        assert [json.loads(line)["token"] for line in lines[:-1]] == [*ids, 2]
        assert verify(lines).ok and replay(lines, engine).ok
    finally:
        manager.clear_backend()


def test_a_refused_first_draft_is_no_failure(spec_config: Any, tokenizer: Any) -> None:
    """vLLM's bitmask fill accepts a request's draft tokens and rolls back what it
    took; a refused first draft leaves nothing to roll back. The request did not
    fail: aborted then, its log is sealed ``truncated`` (it was ``error``)."""
    from vllm.v1.structured_output import StructuredOutputManager

    manager = StructuredOutputManager(spec_config)
    try:
        r, grammar = compiled(manager, spec_config, tokenizer, "draft-refused", ANALYST)
        select = tokenizer.encode("SELECT", add_special_tokens=False)
        assert manager.accept_tokens(r, select)
        manager.grammar_bitmask({"draft-refused": r}, ["draft-refused"], {"draft-refused": select})
        assert grammar.guide.steps == len(select) and grammar.error is None
        r.structured_output_request._grammar = None  # vLLM frees an aborted request's grammar
        del grammar
        gc.collect()
        manager.backend.flush_audit()
        lines = (
            (Path(os.environ["GRID_AUDIT_DIR"]) / "draft-refused.jsonl").read_text().splitlines()
        )
        seal = json.loads(lines[-1])["seal"]
        assert (seal["stop_reason"], seal["record_count"]) == ("truncated", len(select))
    finally:
        manager.clear_backend()


def test_validate_tokens_returns_the_valid_prefix(
    manager: Any, config: Any, tokenizer: Any
) -> None:
    """vLLM's validate_tokens on drafts: the prefix up to the first invalid token, and up
    to a stop id; the grammar does not move. Fails if an invalid draft passes."""
    r, grammar = compiled(manager, config, tokenizer, "v", ANALYST)
    select, name = (tokenizer.encode(t, add_special_tokens=False)[0] for t in ("SELECT", " name"))
    close = tokenizer.encode(")", add_special_tokens=False)[0]
    assert manager.validate_tokens(r, [select, name, close, name]) == [select, name]
    assert manager.validate_tokens(r, [close, select]) == []
    assert manager.validate_tokens(r, [2]) == []  # EOS before a statement
    done = tokenizer.encode("SELECT name FROM departments;", add_special_tokens=False)
    assert manager.validate_tokens(r, [*done, 2, select]) == [*done, 2]
    assert manager.validate_tokens(r, [*done, 0]) == done  # an EOS id that does not stop
    assert grammar.guide.steps == 0


def test_a_grammar_failure_is_sticky_on_its_request(
    manager: Any, config: Any, tokenizer: Any
) -> None:
    """A grammar that fails (here: asked to roll back tokens it never took) admits the
    stop ids only and refuses every token, without raising into the batch; the other
    request's row is untouched. Fails if the failure raises or leaks into the other row."""
    a, failing = compiled(manager, config, tokenizer, "a", ANALYST)
    b, healthy = compiled(manager, config, tokenizer, "b", ANALYST)
    failing.rollback(3)
    assert failing.error is not None and "roll back 3" in str(failing.error)
    bitmask = manager.grammar_bitmask({"a": a, "b": b}, ["a", "b"], {})
    stop_only = array.array("I", bytes(len(row_bytes(bitmask, 0))))
    stop_only[0] = 1 << 2
    assert row_bytes(bitmask, 0) == stop_only.tobytes()
    assert row_bytes(bitmask, 1) == reference_row(GridGuide(healthy.engine), {2})
    select = tokenizer.encode("SELECT", add_special_tokens=False)
    assert not manager.accept_tokens(a, select)
    assert manager.accept_tokens(b, select)


@pytest.mark.parametrize("verb", ["accept", "validate"])
def test_a_bug_while_accepting_fails_its_request_only(
    manager: Any, config: Any, tokenizer: Any, verb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception other than a refusal while a grammar accepts or validates tokens
    (a bug, its audit step's mask included) fails that request, sealed ``error``,
    instead of rising into vLLM's scheduler; the other request goes on."""
    rid = f"bug-{verb}"
    a, failing = compiled(manager, config, tokenizer, rid, ANALYST)
    b, _other = compiled(manager, config, tokenizer, f"{rid}-other", ANALYST)
    select = tokenizer.encode("SELECT", add_special_tokens=False)

    def boom(guide: Any, token: int) -> bool:
        raise RuntimeError("a bug while accepting")

    monkeypatch.setattr(failing.stops, "accept", boom)
    if verb == "accept":
        assert not manager.accept_tokens(a, select)
    else:
        assert failing.validate_tokens(select) == []
    assert isinstance(failing.error, RuntimeError)
    assert not manager.accept_tokens(a, select)  # sticky
    assert manager.accept_tokens(b, select)
    manager.backend.flush_audit()
    lines = (Path(os.environ["GRID_AUDIT_DIR"]) / f"{rid}.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["seal"]["stop_reason"] == "error"


def test_a_request_with_events_writes_them_as_json_lines(
    manager: Any,
    config: Any,
    tokenizer: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``"events": true``: the request's guide keeps parse events and the backend writes
    them to GRID_EVENTS_DIR as they are determined; a rollback past written events
    writes a retract line; at EOS the file holds the statement's post-hoc events.
    Fails if a line is late (the table not written before the statement ends) or the
    sequence differs from parsing the final statement."""
    from grid_core.events import EventStream, tracker

    monkeypatch.setenv("GRID_EVENTS_DIR", str(tmp_path))
    sql = "SELECT name FROM departments WHERE budget > 1000;"
    ids = tokenizer.encode(sql, add_special_tokens=False)
    r, grammar = compiled(manager, config, tokenizer, "ev", {**ANALYST, "events": True})
    assert isinstance(grammar.guide, EventStream)
    path = tmp_path / "ev.events.jsonl"
    seen_table_at = None
    for n, token in enumerate(ids):
        manager.grammar_bitmask({"ev": r}, ["ev"], {})
        assert manager.accept_tokens(r, [token])
        kinds = [json.loads(line)["kind"] for line in path.read_text().splitlines()]
        if seen_table_at is None and "table" in kinds:
            seen_table_at = n
    assert seen_table_at is not None and seen_table_at < len(ids) - 1
    written = len(path.read_text().splitlines())
    manager.grammar_bitmask({"ev": r}, ["ev"], {})
    grammar.rollback(4)  # back into the WHERE clause: its events are retracted
    retract = json.loads(path.read_text().splitlines()[-1])
    assert retract["kind"] == "retract" and 0 < retract["count"] <= written
    for token in [*ids[-4:], 2]:
        manager.grammar_bitmask({"ev": r}, ["ev"], {})
        assert manager.accept_tokens(r, [token])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    kept: list[tuple[str, str, int, int]] = []
    for line in lines:
        if line["kind"] == "retract":
            del kept[len(kept) - line["count"] :]
        else:
            kept.append((line["kind"], line["name"], line["start"], line["end"]))
    spec = grammar.events.spec
    assert kept == [e.key for e in tracker(grammar.engine, spec).parse(sql.encode())]
    table = next(line for line in lines if line["kind"] == "table")
    assert (table["table"], table["granted"]) == ("departments", True)


def test_a_reset_seals_the_attempt_and_streams_the_next(
    manager: Any,
    config: Any,
    tokenizer: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``reset()`` starts a request over. The attempt so far is sealed with stop
    reason ``reset`` and replays; the next attempt has its own log (``.1``) and its
    event lines follow the first attempt's in the same file with ``attempt`` 1, equal
    to the post-hoc events of the statement. Fails if the second attempt's events
    are lost (the file was closed at the reset and never reopened), if the two
    attempts share a log, or if a seal misstates how its attempt ended."""
    from grid_core.events import tracker

    monkeypatch.setenv("GRID_EVENTS_DIR", str(tmp_path))
    sql = "SELECT name FROM departments WHERE budget > 1000;"
    ids = tokenizer.encode(sql, add_special_tokens=False)
    r, grammar = compiled(manager, config, tokenizer, "rs", {**ANALYST, "events": True})
    engine, spec = grammar.engine, grammar.events.spec
    first = ids[:5]  # "SELECT name FROM departments" and a little more: a table event
    for token in first:
        manager.grammar_bitmask({"rs": r}, ["rs"], {})
        assert manager.accept_tokens(r, [token])
    path = tmp_path / "rs.events.jsonl"
    before = [json.loads(line) for line in path.read_text().splitlines()]
    assert before and {line["attempt"] for line in before} == {0}
    grammar.reset()
    for token in [*ids, 2]:
        manager.grammar_bitmask({"rs": r}, ["rs"], {})
        assert manager.accept_tokens(r, [token])
    r.structured_output_request._grammar = None  # vLLM frees a finished request's grammar
    del grammar
    gc.collect()
    manager.backend.flush_audit()

    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[: len(before)] == before
    again = [line for line in lines[len(before) :] if line["attempt"] == 1]
    assert len(again) == len(lines) - len(before) and "retract" not in {x["kind"] for x in again}
    keys = [(x["kind"], x["name"], x["start"], x["end"]) for x in again]
    assert keys == [e.key for e in tracker(engine, spec).parse(sql.encode())]

    logs = Path(os.environ["GRID_AUDIT_DIR"])
    ends = (("rs.jsonl", "reset", len(first)), ("rs~1.jsonl", "eos", len(ids) + 1))
    for name, stop, count in ends:
        log = (logs / name).read_text().splitlines()
        seal = json.loads(log[-1])["seal"]
        assert (seal["stop_reason"], seal["record_count"]) == (stop, count), name
        assert verify(log).ok and replay(log, engine).ok, name


def test_a_json_schema_request_runs_on_the_native_guide_and_is_audited(
    manager: Any, config: Any, tokenizer: Any
) -> None:
    """A JSON request (vLLM's ``json``) compiles through grid_core.jsonschema: its answer's
    tokens are in every row, EOS ends it, its sealed log verifies and replays. Fails if
    the standard request path lost the SQL path's guide, rows or audit."""
    pytest.importorskip("grid_kernels._native")
    from vllm.sampling_params import StructuredOutputsParams

    from grid_core.kernels import KernelGuide

    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "n": {"type": "integer", "minimum": 0}},
        "required": ["name", "n"],
        "additionalProperties": False,
    }
    params = StructuredOutputsParams(json=schema)
    ids = tokenizer.encode('{"name":"ab c","n":42}', add_special_tokens=False)
    r, grammar = compiled(manager, config, tokenizer, "json-eos", params)
    assert isinstance(grammar.guide, KernelGuide) and grammar.guide.audited
    for token in [*ids, 2]:
        manager.grammar_bitmask({"json-eos": r}, ["json-eos"], {})
        assert manager.accept_tokens(r, [token])
    engine = grammar.engine
    r.structured_output_request._grammar = None  # vLLM frees a finished request's grammar
    del grammar
    gc.collect()
    manager.backend.flush_audit()
    lines = (Path(os.environ["GRID_AUDIT_DIR"]) / "json-eos.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["seal"]["stop_reason"] == "eos"
    assert verify(lines).ok and replay(lines, engine).ok
    _, again = compiled(manager, config, tokenizer, "json-again", params)
    assert again.engine is engine  # single-flight: one engine per (kind, text)


def test_a_json_request_with_events_writes_pointers(
    manager: Any, config: Any, tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``json`` request whose schema root says ``"x-grid-events": true`` streams its
    JSON parse events (key, value with its JSON pointer, object closed) to
    GRID_EVENTS_DIR as they are determined; the keyword is not part of the language
    (the same answer is accepted), and at EOS the lines equal the post-hoc events of
    the answer, read by a fresh JsonEventReader. Fails if JSON requests lost their
    events or the pointers were wrong."""
    from vllm.sampling_params import StructuredOutputsParams

    from grid_core.events import EventStream, tracker
    from grid_core.json_events import JsonEventReader, json_event_spec

    monkeypatch.setenv("GRID_EVENTS_DIR", str(tmp_path))
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["name", "tags"],
        "additionalProperties": False,
        "x-grid-events": True,
    }
    answer = '{"name":"a/b","tags":[3,4]}'
    ids = tokenizer.encode(answer, add_special_tokens=False)
    r, grammar = compiled(manager, config, tokenizer, "jev", StructuredOutputsParams(json=schema))
    assert isinstance(grammar.guide, EventStream) and grammar.guide.spec is not None
    path = tmp_path / "jev.events.jsonl"
    for token in [*ids, 2]:
        manager.grammar_bitmask({"jev": r}, ["jev"], {})
        assert manager.accept_tokens(r, [token])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    keys = [(x["pointer"], x["key"]) for x in lines if x["kind"] == "key"]
    assert keys == [("/name", "name"), ("/tags", "tags")]
    values = {x["pointer"]: x for x in lines if x["kind"] == "value"}
    assert values["/name"]["value"] == "a/b" and values["/tags/1"]["value"] == 4
    assert values[""]["type"] == "object"
    spec = json_event_spec(grammar.engine.grammar)
    reader = JsonEventReader()
    data = answer.encode()
    post_hoc = [reader.read(e, data) for e in tracker(grammar.engine, spec).parse(data)]
    assert [{k: v for k, v in x.items() if k not in ("step", "attempt")} for x in lines] == [
        {k: v for k, v in x.items() if k != "step"} for x in post_hoc
    ]
    plain = dict(schema)
    del plain["x-grid-events"]
    r2, other = compiled(manager, config, tokenizer, "jplain", StructuredOutputsParams(json=plain))
    assert getattr(other.guide, "spec", None) is None  # no keyword: no events
    for token in [*ids, 2]:
        manager.grammar_bitmask({"jplain": r2}, ["jplain"], {})
        assert manager.accept_tokens(r2, [token])


def test_a_request_dropped_before_its_first_token_is_logged_under_its_id(
    manager: Any, config: Any, tokenizer: Any
) -> None:
    """The grammar learns its request's id when it is made (the plugin's
    ``grammar_init``), not at its first token: a request aborted in prefill seals an
    empty log ``truncated`` under ``<request_id>.jsonl`` (it was ``request.jsonl``,
    then ``request~1.jsonl``, ...: no id)."""
    r, grammar = compiled(manager, config, tokenizer, "aborted-in-prefill", ANALYST)
    engine = grammar.engine
    r.structured_output_request._grammar = None  # vLLM frees an aborted request's grammar
    del grammar
    gc.collect()
    manager.backend.flush_audit()
    logs = Path(os.environ["GRID_AUDIT_DIR"])
    assert not (logs / "request.jsonl").exists()
    lines = (logs / "aborted-in-prefill.jsonl").read_text().splitlines()
    seal = json.loads(lines[-1])["seal"]
    assert (seal["stop_reason"], seal["record_count"]) == ("truncated", 0)
    assert replay(lines, engine).ok


def test_engines_sharing_an_audit_directory_never_overwrite_a_log(tmp_path: Path) -> None:
    """The sink creates each file exclusively: a log another process wrote under the
    same name (after this one looked) is kept, and this one takes the next ``~N``."""
    from grid_core.audit import AuditLog
    from grid_serve.vllm.backend import AuditDirectory

    sink = AuditDirectory(tmp_path)
    (tmp_path / "a.jsonl").write_text("another engine's log\n")
    sink("a", AuditLog())
    assert (tmp_path / "a.jsonl").read_text() == "another engine's log\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "a~1.jsonl"]
    with pytest.raises(FileExistsError):
        AuditLog().write(tmp_path / "a.jsonl", exclusive=True)


def test_a_bitmask_of_another_width_is_refused(manager: Any, config: Any, tokenizer: Any) -> None:
    """A bitmask GridBackend did not allocate (rows of another width, on the numpy path
    and through torch) is a ServingError naming the widths, also under ``python -O``
    (it was an ``assert``); nothing is written."""
    _, grammar = compiled(manager, config, tokenizer, "odd-width", ANALYST)
    words = manager.backend.allocate_token_bitmask(2).shape[-1]
    for bitmask in (
        torch.zeros((2, words + 1), dtype=torch.int32),
        torch.zeros((2, words - 1), dtype=torch.int64),
    ):
        with pytest.raises(ServingError, match=f"not GridBackend's {words}"):
            grammar.fill_bitmask(bitmask, 0)
        assert not bitmask.any()


def test_request_ids_that_read_alike_get_files_of_their_own(tmp_path: Path) -> None:
    """Ids were written with ``_`` for each character outside ``[A-Za-z0-9._-]``, so
    ``tenant/a`` and ``tenant_a`` appended to one events file (and their audit logs
    told apart only by arrival order)."""
    from grid_core.audit import AuditLog
    from grid_serve.vllm.backend import AuditDirectory, file_stem

    assert file_stem("cmpl-3f2a.x_y") == "cmpl-3f2a.x_y"  # as before
    slash, underscore = file_stem("tenant/a"), file_stem("tenant_a")
    assert underscore == "tenant_a" and slash.startswith("tenant_a-") and slash != underscore
    assert file_stem("tenant/a") == slash  # a follower derives it from the id
    assert len({file_stem(i) for i in ("a/b", "a\\b", "a b", "a_b", "..", ".")}) == 6
    assert file_stem(slash) != slash  # an id spelled as another's stem is hashed too
    assert all("/" not in file_stem(i) and file_stem(i) not in (".", "..") for i in ("..", "."))
    # x.events's audit log is not x's events file (one directory for both is allowed)
    assert file_stem("x.events") != "x.events" and file_stem("x.eventsy") == "x.eventsy"
    # a second log of id a is a~1.jsonl: never the file of id a.1 (a.1.jsonl)
    sink = AuditDirectory(tmp_path)
    log = AuditLog()
    for request_id in ("a", "a", "a.1"):
        sink(request_id, log)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.1.jsonl", "a.jsonl", "a~1.jsonl"]
