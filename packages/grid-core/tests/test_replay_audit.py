"""Replay of audit logs against their artifacts, and the tamper-detection campaign.

An honest log from ``grid_core.decode.generate`` replays to bit-identical
records against a fresh engine (cache off too, and across a cache-namespace
rollover); a log of other artifacts is refused naming the artifacts; each of
replay's checks fires, at the right step, on a log that a forger rewrote and
resealed (such a log passes ``verify``). Last, the campaign of
``bench/audit_tamper.py`` at a default-suite size: every in-log mutation is
detected by ``verify``, every forgery by replay or the anchored seal.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from bench_module import load_bench
from toy import ANALYST, CRUD, EOS, LEXICON, SPELLINGS, TOY, analyst_engine, token

from grid_core.audit import AuditLog, Record, mask_entry_id, read, verify
from grid_core.cache import SharedCache
from grid_core.decode import Generation, generate
from grid_core.grammar import load_grammar
from grid_core.guide import Engine, GridGuide
from grid_core.replay import ReplayVerdict, replay, replay_file
from grid_core.vocab import Vocabulary

ENGINE = analyst_engine()


def random_sampler(ids: Sequence[int], rng: random.Random) -> int:
    return rng.choice(ids)


def gen(seed: int, budget: int = 30, engine: Engine = ENGINE) -> Generation:
    return generate(GridGuide(engine), random_sampler, budget, random.Random(seed))


def drive(engine: Engine, tokens: Sequence[int], kinds: Sequence[str]) -> AuditLog:
    """A log written step by step the way the decode loop audits (DESIGN.md section 8)."""
    guide, log = GridGuide(engine), AuditLog()
    for t, kind in zip(tokens, kinds, strict=True):
        ids = guide.mask_ids()
        blocked = engine.vocab.n_vocab - len(ids)
        entry = mask_entry_id(engine.pack(ids).tobytes())
        log.append(guide.config.hash, entry, t, blocked, kind)  # type: ignore[arg-type]
        guide.accept_token(t)
    return log


def relog(records: Sequence[Record], seal: dict[str, Any], **changes: Any) -> list[str]:
    """What a forger who rewrites the chain and reseals it produces."""
    log = AuditLog()
    for r in records:
        kind: Any = r.kind
        log.append(int(r.config_hash, 16), r.mask_entry_id, r.token, r.blocked_count, kind)
    s = {**seal, **changes}
    log.close(s["stop_reason"], s["fingerprints"], s["mode"])
    assert verify(log.lines()).ok
    return log.lines()


def edited(r: Record, **changes: Any) -> Record:
    return dataclasses.replace(r, **changes)


SELECT = [token(b"select"), token(b" *"), token(b" from"), *b" orders;"]
SELECT_LOG = drive(ENGINE, [*SELECT, EOS], ["sampled"] * len(SELECT) + ["eos"])
SELECT_LOG.close("eos", ENGINE.fingerprints(), {"mode": 1, "budget": 20})


def reserve_generation() -> Generation:
    """A generation that ends with at least two reserve steps and EOS."""
    for seed in range(100):
        g = gen(seed, budget=28)
        if g.stop_reason == "reserve" and sum(r.kind == "reserve" for r in g.audit.records) >= 2:
            return g
    raise AssertionError("no seed gave a reserve tail")


RESERVE = reserve_generation()


# -------------------------------------------------------------- honest logs


@pytest.mark.parametrize("seed", range(6))
def test_generated_logs_replay_bit_identical(seed: int) -> None:
    g = gen(seed)
    verdict = replay(g.audit.lines(), analyst_engine(), anchor=g.audit.seal_hash)
    assert verdict.ok, verdict
    assert verdict.records == len(g.audit.records) == len(g.tokens)
    assert str(verdict) == f"REPLAYS: {verdict.records} records bit-identical against the artifacts"


def test_replay_does_not_depend_on_the_cache() -> None:
    """Logs written across a T2 namespace rollover replay against a cache-less engine."""
    base = Engine(ANALYST, TOY, LEXICON, cache=False)
    shared = SharedCache(base.family)
    writer = Engine(ANALYST, TOY, LEXICON, dfa=base.dfa, trie=base.trie, cache=shared)
    logs = []
    for seed in range(4):
        if seed == 2:
            assert shared.rollover() == 1
        logs.append(gen(seed, engine=writer).audit.lines())
    for lines in logs:
        assert replay(lines, base).ok
        assert replay(lines, ENGINE).ok


def test_hand_driven_log_replays(tmp_path: Path) -> None:
    path = tmp_path / "select.jsonl"
    SELECT_LOG.write(path)
    assert replay_file(path, ENGINE, SELECT_LOG.seal_hash).ok


TINY = Engine(
    load_grammar('start: "ab" NAME ";"\nNAME: /[xy]+/\n', "tiny"),
    Vocabulary.from_spellings("tiny", [b"a", b"b", b"x", b"y", b";", b""], frozenset({5}), (5,)),
)


def tiny_log(kinds: list[str], mode: dict[str, Any]) -> AuditLog:
    """``ab x ;`` EOS: the masks at steps 0 and 1 are singletons ({a}, then {b})."""
    log = drive(TINY, [0, 1, 2, 4, 5], [*kinds, "eos"])
    log.close("eos", TINY.fingerprints(), mode)
    return log


@pytest.mark.parametrize(
    ("kinds", "mode", "problem"),
    [
        pytest.param(
            ["forced", "forced", "sampled", "sampled"], {"jump_forward": 32}, None, id="span"
        ),
        pytest.param(
            ["forced", "sampled", "sampled", "sampled"], {"jump_forward": 1}, None, id="limit"
        ),
        pytest.param(
            ["sampled", "sampled", "sampled", "sampled"], {"jump_forward": 0}, None, id="off"
        ),
        pytest.param(["sampled", "forced", "sampled", "sampled"], {}, None, id="unknown-policy"),
        pytest.param(
            ["forced", "forced", "sampled", "sampled"],
            {"jump_forward": 1},
            (1, "a forced span longer than jump_forward 1"),
            id="span-too-long",
        ),
        pytest.param(
            ["forced", "sampled", "sampled", "sampled"],
            {"jump_forward": 32},
            (1, "kind 'sampled' at a singleton mask (jump_forward 32)"),
            id="singleton-sampled",
        ),
    ],
)
def test_jump_forward_is_rederived(
    kinds: list[str], mode: dict[str, Any], problem: tuple[int, str] | None
) -> None:
    """With ``jump_forward`` in the seal, forced vs sampled at singleton masks is re-derived."""
    verdict = replay(tiny_log(kinds, {"mode": 1, **mode}).lines(), TINY)
    if problem is None:
        assert verdict.ok, verdict
    else:
        assert (verdict.first_bad_step, verdict.field) == (problem[0], "kind")
        assert problem[1] in verdict.reason


def test_forced_steps_at_singleton_masks_replay() -> None:
    engine = TINY
    log = drive(engine, [0, 1, 2, 4, 5], ["forced", "forced", "sampled", "sampled", "eos"])
    log.close("eos", engine.fingerprints(), {"mode": 1})
    assert replay(log.lines(), engine).ok
    forged = list(log.records)
    forged[2] = edited(forged[2], kind="forced")  # the mask there is {x, y}
    verdict = replay(relog(forged, log.seal or {}), engine)
    assert (verdict.stage, verdict.first_bad_step, verdict.field) == ("replay", 2, "kind")
    assert "kind 'forced' at a mask of 2 tokens" in verdict.reason


# -------------------------------------------------------------- artifacts


@pytest.mark.parametrize(
    ("engine", "differs"),
    [
        pytest.param(
            lambda: Engine(ANALYST, TOY, {"TABLE_NAME": [b"orders"]}), ("lexicon",), id="lexicon"
        ),
        pytest.param(lambda: Engine(CRUD, TOY, LEXICON), ("grammar", "tables"), id="projection"),
        pytest.param(
            lambda: Engine(
                ANALYST,
                Vocabulary.from_spellings(
                    "other", [*SPELLINGS[:-2], b"xx", b"", b""], frozenset({271, 272}), (272,)
                ),
                LEXICON,
            ),
            ("tokenizer", "trie"),
            id="vocabulary",
        ),
    ],
)
def test_other_artifacts_are_named(engine: Any, differs: tuple[str, ...]) -> None:
    verdict = replay(SELECT_LOG.lines(), engine())
    assert not verdict.ok and verdict.stage == "artifacts"
    assert verdict.artifacts == differs
    assert verdict.first_bad_step is None
    for name in differs:
        assert name in verdict.reason
    assert str(verdict).startswith("DIVERGES at the artifacts (artifacts): ")


def test_missing_fingerprint_is_named() -> None:
    assert SELECT_LOG.seal is not None
    fps = {k: v for k, v in ENGINE.fingerprints().items() if k != "dfa"}
    verdict = replay(relog(SELECT_LOG.records, SELECT_LOG.seal, fingerprints=fps), ENGINE)
    assert verdict.artifacts == ("dfa",) and "log absent" in verdict.reason


# -------------------------------------------------------------- forgeries

R = SELECT_LOG.records
SEAL = SELECT_LOG.seal or {}
n = len(R)
FORGERIES: list[
    tuple[str, list[Record], dict[str, Any], tuple[str, int | None, str | None], str]
] = [
    (
        "config_hash",
        [*R[:2], edited(R[2], config_hash="0" * 16), *R[3:]],
        {},
        ("replay", 2, "config_hash"),
        "config_hash: log 0000000000000000, replay ",
    ),
    (
        "mask_entry_id",
        [*R[:3], edited(R[3], mask_entry_id="1" * 32), *R[4:]],
        {},
        ("replay", 3, "mask_entry_id"),
        "mask_entry_id: log 1111",
    ),
    (
        "token-outside-mask",
        [*R[:1], edited(R[1], token=token(b"insert")), *R[2:]],
        {},
        ("replay", 1, "token"),
        f"token {token(b'insert')} is not in the step's mask",
    ),
    (
        "token-substituted",
        [*R[:3], edited(R[3], token=ord("\t")), *R[4:]],
        {},
        ("replay", 4, "config_hash"),
        "config_hash",
    ),
    (
        "blocked_count",
        [*R[:4], edited(R[4], blocked_count=R[4].blocked_count + 1), *R[5:]],
        {},
        ("replay", 4, "blocked_count"),
        "blocked_count: log",
    ),
    (
        "eos-kind-off-eos",
        [*R[:2], edited(R[2], kind="eos"), *R[3:]],
        {},
        ("replay", 2, "kind"),
        "kind 'eos' at a token that is not EOS",
    ),
    (
        "eos-token-not-eos-kind",
        [*R[:-1], edited(R[-1], kind="reserve")],
        {},
        ("replay", n - 1, "kind"),
        "kind 'reserve' at an EOS token",
    ),
    (
        "sampled-after-reserve",
        [*R[:3], edited(R[3], kind="reserve"), *R[4:]],
        {"stop_reason": "reserve"},
        ("replay", 4, "kind"),
        "a sampled step after a reserve step",
    ),
    (
        "record-after-eos",
        [*R, R[-1]],
        {},
        ("replay", n, "token"),
        "a record follows EOS",
    ),
    (
        "truncated-claims-eos",
        R[:-1],
        {},
        ("seal", None, None),
        "stop reason 'eos' claims EOS, the log does not end in EOS",
    ),
    (
        "ended-denies-eos",
        R,
        {"stop_reason": "budget"},
        ("seal", None, None),
        "stop reason 'budget' denies EOS, the log ends in EOS",
    ),
    (
        "over-budget",
        R,
        {"mode": {"mode": 1, "budget": n - 1}},
        ("seal", None, None),
        f"{n} records exceed the budget of {n - 1}",
    ),
]


@pytest.mark.parametrize(
    ("records", "seal", "where", "reason"),
    [pytest.param(r, s, w, m, id=i) for i, r, s, w, m in FORGERIES],
)
def test_forgeries_pass_verify_but_not_replay(
    records: list[Record], seal: dict[str, Any], where: tuple[Any, ...], reason: str
) -> None:
    lines = relog(records, SEAL, **seal)
    assert verify(lines).ok
    assert not verify(lines, anchor=SELECT_LOG.seal_hash).ok
    verdict = replay(lines, ENGINE)
    assert not verdict.ok
    assert (verdict.stage, verdict.first_bad_step, verdict.field) == where, verdict
    assert reason in verdict.reason, verdict


def test_eos_stop_with_reserve_steps() -> None:
    seal = RESERVE.audit.seal or {}
    verdict = replay(relog(RESERVE.audit.records, seal, stop_reason="eos"), ENGINE)
    assert verdict.stage == "seal" and "reserve steps" in verdict.reason


def test_reserve_tail_replays_and_guards_sampled_steps() -> None:
    lines = RESERVE.audit.lines()
    assert replay(lines, ENGINE).ok
    records = list(RESERVE.audit.records)
    k = max(i for i, r in enumerate(records) if r.kind == "reserve")
    records[k] = edited(records[k], kind="sampled")
    first = min(i for i, r in enumerate(records) if r.kind == "reserve")
    verdict = replay(relog(records, RESERVE.audit.seal or {}), ENGINE)
    if first < k:
        assert (verdict.first_bad_step, verdict.field) == (k, "kind")
    else:  # the only reserve step became sampled: a legal log; only the anchor tells
        assert verdict.ok


def test_a_reserve_tail_must_be_the_reserve_completion() -> None:
    """The reserve's completion is the artifacts' (decode.py's write_completion):
    a tail labelled reserve that spells another legal ending, or swaps one token
    for an alias of the same bytes, does not replay (a review forged both)."""
    records = list(RESERVE.audit.records)
    first = min(i for i, r in enumerate(records) if r.kind == "reserve")
    seal = RESERVE.audit.seal or {}
    prefix = [r.token for r in records[:first]]
    guide = GridGuide(ENGINE)
    for t in prefix:
        guide.accept_token(t)
    written = b"".join(TOY.token_bytes[r.token] for r in records[first:-1])
    padded = list(written.replace(b" ", b"  "))  # a longer legal ending, byte by byte
    assert guide.validate_tokens(padded) == len(padded)
    kinds = [r.kind for r in records[:first]] + ["reserve"] * len(padded) + ["eos"]
    log = drive(ENGINE, [*prefix, *padded, EOS], kinds)
    log.close("reserve", seal["fingerprints"], seal["mode"])
    assert verify(log.lines()).ok
    verdict = replay(log.lines(), ENGINE)
    assert (verdict.stage, verdict.field) == ("replay", "token"), verdict
    assert "is not the reserve's completion" in verdict.reason
    by_bytes: dict[bytes, list[int]] = {}
    for i, spelling in enumerate(TOY.token_bytes):
        by_bytes.setdefault(spelling, []).append(i)
    for j in range(first, len(records) - 1):
        aliases = [t for t in by_bytes[TOY.token_bytes[records[j].token]] if t != records[j].token]
        if aliases:  # the same bytes, the same configuration after it: only the id differs
            forged = [*records[:j], edited(records[j], token=aliases[0]), *records[j + 1 :]]
            verdict = replay(relog(forged, seal), ENGINE)
            assert (verdict.first_bad_step, verdict.field) == (j, "token"), verdict
            break
    else:
        pytest.fail("no reserve token of the tail has an alias in the toy vocabulary")


def test_the_statement_in_the_seal_is_the_records_text() -> None:
    """``grid ask`` seals ``statement``, the decoded text (or ``decoded_from_first``);
    a reseal with another statement does not replay."""
    from grid_core.audit import reseal

    honest = gen(3)
    text = honest.text.decode("utf-8", "replace")
    flags = {"role": "r", "statement": text, "verdict": "accepted", "run": "ok: 1 rows"}
    assert replay(reseal(honest.audit, flags).lines(), ENGINE).ok
    seal = honest.audit.seal or {}
    for changed, why in (
        ({"statement": "delete from employees;"}, "the statement in the seal is not the rec"),
        ({"decoded_from_first": text + " "}, "the decoded from first in the seal is not"),
        ({"statement": None}, "the seal's statement None is not a string"),
        ({"decoded_from_first": None}, "the seal's decoded_from_first None is not a string"),
    ):
        mode = {**seal["mode"], **flags, **changed}
        verdict = replay(relog(honest.audit.records, seal, mode=mode), ENGINE)
        assert verdict.stage == "seal", verdict
        assert why in verdict.reason, verdict


def test_a_mode_1_seal_cannot_switch_its_checks_off() -> None:
    """A mode-1 log cut short and resealed with a stop reason that claims no EOS does
    not replay (the loop always finishes its statement); nor does a ``budget`` or
    ``jump_forward`` that is not an integer (each switched its check off)."""
    honest = gen(3)
    seal = honest.audit.seal or {}
    records = honest.audit.records
    assert seal["mode"]["mode"] == 1 and len(records) > 4
    for stop in ("length", "max_tokens", "no_statement_in_budget"):
        verdict = replay(relog(records[:4], seal, stop_reason=stop), ENGINE)
        assert verdict.stage == "seal" and "ends in EOS" in verdict.reason, (stop, verdict)
    empty = replay(relog((), seal, stop_reason="no_statement_in_budget"), ENGINE)
    assert empty.ok, empty  # a budget refusal: no record, no EOS
    for key, value in (("budget", "3"), ("budget", True), ("jump_forward", True)):
        mode = {**seal["mode"], key: value}
        verdict = replay(relog(records, seal, mode=mode), ENGINE)
        assert verdict.stage == "seal" and f"the seal's {key}" in verdict.reason, verdict


def test_chain_failure_is_reported_as_such() -> None:
    lines = SELECT_LOG.lines()
    verdict = replay([lines[0], lines[2], *lines[3:]], ENGINE)
    assert (verdict.stage, verdict.first_bad_step) == ("chain", 1)
    assert "expected step 1" in verdict.reason
    wrong = replay(lines, ENGINE, anchor="0" * 64)
    assert wrong.stage == "chain" and "anchored" in wrong.reason


def test_replay_verdict_strings() -> None:
    assert str(ReplayVerdict(False, 3, 3, "why", "replay", "token")) == (
        "DIVERGES at step 3 (replay): why"
    )
    assert str(ReplayVerdict(False, 3, None, "why", "seal")) == "DIVERGES at the seal (seal): why"


def test_read_of_replayed_log_matches() -> None:
    verdict, log = read(SELECT_LOG.lines())
    assert verdict.ok and log.records == SELECT_LOG.records


# -------------------------------------------------------------- the campaign


def test_tamper_campaign_small() -> None:
    """bench/audit_tamper.py at default-suite size: 50 generations, 200 mutations."""
    bench = load_bench("audit_tamper")
    report = bench.campaign(50, 200, seed=7)
    assert bench.failures(report) == []
    assert report["rollover"]["available"] and report["rollover"]["namespace_final"] == 1
    assert set(report["generations"]["stop_reasons"]) >= {"eos", "reserve"}
    for name, m in report["mutations"].items():
        assert m["injected"] >= 5, name
        assert m["detected"] == m["injected"], name
        if m["family"] == "in-log":
            assert m["by_verify"] == m["injected"], name
        else:
            assert m["by_verify"] == 0 and m["by_anchor"] == m["injected"], name
    print(bench.summary(report))
