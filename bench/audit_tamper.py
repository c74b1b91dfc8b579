"""Tamper-detection campaign for the audit chain (DESIGN.md section 9, theorem 6).

Purpose. Show, by injection, that every mutation of an audit log is detected:

1. **Generations.** ``--generations`` audited generations with
   ``grid_core.decode.generate`` on the analyst projection of the CRUD grammar
   (``packages/grid-core/tests/grammars/crud.lark`` without INSERT, UPDATE,
   DELETE; lexicon TABLE_NAME = employees, employees_public, orders) over the
   byte-complete toy vocabulary of ``packages/grid-core/tests/toy.py``. The
   sampler is seeded and draws from each mask; a generation is one of three
   shapes, so that both stop reasons and every record kind occur: a *writer*
   that follows a statement of a small corpus (longest admitted prefix token,
   with a 1% chance per step of a random admitted token, which may derail it;
   it samples EOS at the end: stop ``eos``), a *random* sampler under a budget
   of 12 to 40 tokens (multi-byte tokens preferred, EOS taken half the time
   it is offered; the reserve usually writes the end: stop ``reserve``), and a
   *tight* budget of 1 to 12 tokens, raised until the loop accepts it (no
   shorter than the shortest completion): mostly reserve steps.
   The generating engine shares a T2 mask cache (``grid_core.cache.
   SharedCache``) whose namespace is rolled over halfway through, so the
   campaign spans a cache-namespace rollover. Every log must verify, verify
   against its anchor (the seal hash) and replay against a *fresh* engine
   built from the same artifacts (its own cache, no shared tier): the
   baseline, zero false alarms.
2. **Mutations.** ``--mutations`` mutations, round-robin over the kinds below,
   each on a log drawn at random (one that has enough records for the kind),
   each checked to change the log. Two families:

   - *in-log* edits, as someone who edits the file without recomputing any
     hash: every record field (``record.<field>``), an admitted token
     substituted for the logged one (``token.substitute``), two records
     swapped, a record deleted, truncation with and without the seal, every
     seal field (``seal.<field>``) and an extra seal field, and a well-formed
     record that continues the chain appended after the seal. **Must be
     detected by** ``verify`` **alone.**
   - *forgeries* (``forge.*``), as a forger who edits records, then renumbers
     the steps, recomputes every ``prev_hash`` and ``hash`` and reseals the
     log: ``verify`` without an anchor passes them by construction. **Must be
     detected by replay against the artifacts or by the anchored seal**
     (``verify(lines, anchor=original seal hash)``); the table shows how many
     replay catches on its own.

Output: a per-kind table (injected / detected, and by which check) printed,
and the raw numbers in ``--out`` (JSON). The exit status is 1 when anything
escapes or a baseline log fails, else 0.

Run: ``cd /work/main && uv run python bench/audit_tamper.py`` (``--help``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "packages" / "grid-core" / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from host import host_description  # noqa: E402
from toy import ANALYST, EOS, LEXICON, TOY  # noqa: E402

from grid_core.audit import (  # noqa: E402
    GENESIS,
    KINDS,
    RECORD_FIELDS,
    SEAL_FIELDS,
    Record,
    seal_digest,
    verify,
)
from grid_core.decode import generate  # noqa: E402
from grid_core.errors import GuideError  # noqa: E402
from grid_core.guide import Engine  # noqa: E402
from grid_core.replay import replay  # noqa: E402

try:
    from grid_core.cache import SharedCache
except ImportError:  # the cache is not there yet: the campaign runs without a rollover
    SharedCache = None  # type: ignore[assignment,misc]

CORPUS = (
    b"select * from employees;",
    b"select * from orders where id = 1;",
    b"select name, salary from employees where salary > 100 and dept <> 'sales';",
    b"select id from employees_public where name = 'o''brien';",
    b"select a,b,c from orders -- recent\n;",
    b"select\t*\tfrom\temployees\twhere\tsal >= 10.5;",
)

Log = list[dict[str, Any]]  # record objects, then the seal object (when there is one)


# ------------------------------------------------------------------ generations


def random_sampler(ids: Sequence[int], rng: random.Random) -> int:
    """Any admitted token; multi-byte tokens preferred, EOS taken half the time."""
    if EOS in ids and rng.random() < 0.5:
        return EOS
    pool = [i for i in ids if i != EOS]
    multi = [i for i in pool if len(TOY.token_bytes[i]) > 1]
    return rng.choice(multi if multi and rng.random() < 0.9 else pool)


def writer(target: bytes) -> Callable[[Sequence[int], random.Random], int]:
    """A sampler that writes ``target`` (longest admitted prefix token), with 1% noise.

    Forced spans bypass the sampler, so at each call the writer first skips the
    bytes they wrote: the shortest skip after which an admitted token fits the
    rest (a forced token is the only admitted one, hence on the path). A noisy
    token that leaves the path derails the writer: from then on it samples at
    random.
    """
    state: list[bytes | None] = [target]

    def sample(ids: Sequence[int], rng: random.Random) -> int:
        rest = state[0]
        if rest is not None:
            for k in range(len(rest) + 1):
                tail = rest[k:]
                fits = [i for i in ids if i != EOS and tail and tail.startswith(TOY.token_bytes[i])]
                if fits or (not tail and EOS in ids):
                    break
            if not tail and EOS in ids:
                return EOS
            if fits and rng.random() >= 0.01:
                t = max(fits, key=lambda i: (len(TOY.token_bytes[i]), -i))
                state[0] = tail[len(TOY.token_bytes[t]) :]
                return t
            rest = tail
        t = random_sampler(ids, rng)
        on_path = rest and t != EOS and rest.startswith(TOY.token_bytes[t])
        state[0] = rest[len(TOY.token_bytes[t]) :] if rest and on_path else None
        return t

    return sample


@dataclass
class Generated:
    lines: list[str]
    anchor: str
    stop_reason: str
    shape: str
    namespace: int | None


def build_engines() -> tuple[Engine, Engine, Any]:
    """The generating engine (with a shared T2 cache when there is one) and a fresh replayer."""
    base = Engine(ANALYST, TOY, LEXICON, cache=False)
    shared = SharedCache(base.family) if SharedCache is not None else None
    gen = Engine(ANALYST, TOY, LEXICON, dfa=base.dfa, trie=base.trie, cache=shared or True)
    fresh = Engine(ANALYST, TOY, LEXICON)
    assert gen.fingerprints() == fresh.fingerprints()
    return gen, fresh, shared


def run_generations(
    engine: Engine, shared: Any, count: int, rng: random.Random
) -> tuple[list[Generated], dict[str, Any]]:
    out: list[Generated] = []
    rollover: dict[str, Any] = {"available": shared is not None}
    for n in range(count):
        if shared is not None and n == count // 2:
            before = (shared.namespace, len(shared.table))
            shared.rollover()
            rollover.update(
                at_generation=n,
                namespace_before=before[0],
                entries_before=before[1],
                namespace_after=shared.namespace,
            )
        shape = rng.choices(("writer", "random", "tight"), (5, 4, 1))[0]
        if shape == "writer":
            sampler, budget = writer(rng.choice(CORPUS)), 128
        elif shape == "random":
            sampler, budget = random_sampler, rng.randint(12, 40)
        else:
            sampler, budget = random_sampler, rng.randint(1, 12)
        while True:
            try:
                g = generate(engine.guide(), sampler, budget, rng)
                break
            except GuideError:  # the budget cannot hold the shortest completion
                budget += 1
        assert g.audit.seal_hash is not None
        out.append(
            Generated(
                g.audit.lines(),
                g.audit.seal_hash,
                g.stop_reason,
                shape,
                None if shared is None else shared.namespace,
            )
        )
    if shared is not None:
        rollover.update(entries_after=len(shared.table), namespace_final=shared.namespace)
    return out, rollover


# ------------------------------------------------------------------ mutations


def parse(lines: list[str]) -> Log:
    return [json.loads(line) for line in lines if line.strip()]


def dump(log: Log) -> list[str]:
    return [json.dumps(obj, sort_keys=True) for obj in log]


def split(log: Log) -> tuple[Log, dict[str, Any] | None]:
    if log and "seal" in log[-1]:
        return log[:-1], log[-1]
    return log, None


def forge(records: Log, seal: dict[str, Any]) -> Log:
    """Renumber, rechain and reseal: what a forger who can rewrite the file does."""
    head, out = GENESIS, []
    for i, obj in enumerate(records):
        r = Record(**{**{k: obj[k] for k in RECORD_FIELDS}, "step": i, "prev_hash": head})
        head = r.digest()
        out.append({**asdict(r), "hash": head})
    body = {**seal["seal"], "record_count": len(out), "head_hash": head}
    return [*out, {"seal": body, "hash": seal_digest(body)}]


def other_hex(rng: random.Random, old: str) -> str:
    while True:
        new = _hex(rng, len(old))
        if new != old:
            return new


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def other_int(rng: random.Random, old: int, hi: int) -> int:
    while True:
        new = rng.choice([old + 1, max(0, old - 1), rng.randrange(hi)])
        if new != old:
            return new


def masks_along(engine: Engine, records: Log, upto: int) -> list[int]:
    """The mask ids at step ``upto`` of a log (re-driven from its tokens)."""
    guide = engine.guide()
    for obj in records[:upto]:
        guide.accept_token(obj["token"])
    return guide.mask_ids()


def substitute(engine: Engine, records: Log, i: int, rng: random.Random) -> int:
    """Another token admitted at step ``i`` (any other id if the mask is a singleton)."""
    ids = [t for t in masks_along(engine, records, i) if t != records[i]["token"]]
    return rng.choice(ids) if ids else (records[i]["token"] + 1) % TOY.n_vocab


def edit_field(obj: dict[str, Any], name: str, rng: random.Random) -> None:
    old = obj[name]
    if name in ("step", "token", "blocked_count", "record_count"):
        obj[name] = other_int(rng, old, TOY.n_vocab)
    elif name == "kind":
        obj[name] = rng.choice([k for k in KINDS if k != old])
    else:
        obj[name] = other_hex(rng, old)


def edit_seal(body: dict[str, Any], name: str, rng: random.Random) -> None:
    if name == "schema":
        body[name] = rng.choice(["grid.audit/1", "grid.audit/0", "GRID.AUDIT/2"])
    elif name == "stop_reason":
        body[name] = rng.choice(
            [s for s in ("eos", "reserve", "budget", "no-completion") if s != body[name]]
        )
    elif name == "fingerprints":
        k = rng.choice(sorted(body[name]))
        body[name] = {**body[name], k: other_hex(rng, body[name][k])}
    elif name == "mode":
        k = rng.choice(sorted(body[name]))
        body[name] = {**body[name], k: other_int(rng, body[name][k], 64)}
    elif name == "record_count":
        body[name] = other_int(rng, body[name], body[name] + 3)
    else:
        body[name] = other_hex(rng, body[name])


@dataclass(frozen=True)
class Mutation:
    name: str
    family: str  # "in-log" or "forge"
    min_records: int
    apply: Callable[[Engine, Log, random.Random], Log]


def _record_edit(name: str) -> Callable[[Engine, Log, random.Random], Log]:
    def apply(engine: Engine, log: Log, rng: random.Random) -> Log:
        records, seal = split(log)
        i = rng.randrange(len(records))
        edit_field(records[i], name, rng)
        return [*records, *([seal] if seal else [])]

    return apply


def _seal_edit(name: str) -> Callable[[Engine, Log, random.Random], Log]:
    def apply(engine: Engine, log: Log, rng: random.Random) -> Log:
        records, seal = split(log)
        assert seal is not None
        if name == "hash":
            seal["hash"] = other_hex(rng, seal["hash"])
        elif name == "extra_field":
            seal["seal"]["note"] = rng.choice(["ok", "checked", ""])
        else:
            edit_seal(seal["seal"], name, rng)
        return [*records, seal]

    return apply


def _substitute(engine: Engine, log: Log, rng: random.Random) -> Log:
    records, seal = split(log)
    i = rng.randrange(len(records))
    records[i]["token"] = substitute(engine, records, i, rng)
    return [*records, *([seal] if seal else [])]


def _reorder(engine: Engine, log: Log, rng: random.Random) -> Log:
    records, seal = split(log)
    i, j = sorted(rng.sample(range(len(records)), 2))
    records[i], records[j] = records[j], records[i]
    return [*records, *([seal] if seal else [])]


def _delete(engine: Engine, log: Log, rng: random.Random) -> Log:
    records, seal = split(log)
    del records[rng.randrange(len(records))]
    return [*records, *([seal] if seal else [])]


def _truncate_keep_seal(engine: Engine, log: Log, rng: random.Random) -> Log:
    records, seal = split(log)
    keep = rng.randrange(len(records))
    return [*records[:keep], *([seal] if seal else [])]


def _truncate_drop_seal(engine: Engine, log: Log, rng: random.Random) -> Log:
    records, _ = split(log)
    return records[: rng.randint(0, len(records))]


def _append_after_seal(engine: Engine, log: Log, rng: random.Random) -> Log:
    records, seal = split(log)
    assert seal is not None
    head = records[-1]["hash"]
    r = Record(
        len(records), _hex(rng, 16), _hex(rng, 32), rng.randrange(TOY.n_vocab), 0, "sampled", head
    )
    return [*records, seal, {**asdict(r), "hash": r.digest()}]


def _forged(
    edit: Callable[[Engine, Log, random.Random], Log],
) -> Callable[[Engine, Log, random.Random], Log]:
    def apply(engine: Engine, log: Log, rng: random.Random) -> Log:
        _, seal = split(log)
        assert seal is not None
        records, _ = split(edit(engine, log, rng))
        return forge(records, seal)

    return apply


def _forge_seal(engine: Engine, log: Log, rng: random.Random) -> Log:
    records, seal = split(log)
    assert seal is not None
    edit_seal(seal["seal"], rng.choice(["stop_reason", "fingerprints", "mode"]), rng)
    return forge(records, seal)


def _forge_append(engine: Engine, log: Log, rng: random.Random) -> Log:
    records, seal = split(log)
    assert seal is not None
    last = records[-1]
    extra = {**last, "token": rng.randrange(TOY.n_vocab), "kind": rng.choice(KINDS)}
    return forge([*records, extra], seal)


def _forge_truncate(engine: Engine, log: Log, rng: random.Random) -> Log:
    records, seal = split(log)
    assert seal is not None
    return forge(records[: rng.randrange(len(records))], seal)


KINDS_OF_MUTATION: tuple[Mutation, ...] = (
    *(Mutation(f"record.{f}", "in-log", 1, _record_edit(f)) for f in (*RECORD_FIELDS, "hash")),
    Mutation("token.substitute", "in-log", 1, _substitute),
    Mutation("records.reorder", "in-log", 2, _reorder),
    Mutation("records.delete", "in-log", 1, _delete),
    Mutation("truncate.keep_seal", "in-log", 1, _truncate_keep_seal),
    Mutation("truncate.drop_seal", "in-log", 1, _truncate_drop_seal),
    *(
        Mutation(f"seal.{f}", "in-log", 1, _seal_edit(f))
        for f in (*SEAL_FIELDS, "hash", "extra_field")
    ),
    Mutation("append.after_seal", "in-log", 1, _append_after_seal),
    *(
        Mutation(f"forge.{f}", "forge", 1, _forged(_record_edit(f)))
        for f in ("config_hash", "mask_entry_id", "blocked_count", "kind")
    ),
    Mutation("forge.token", "forge", 1, _forged(_substitute)),
    Mutation("forge.reorder", "forge", 2, _forged(_reorder)),
    Mutation("forge.delete", "forge", 1, _forged(_delete)),
    Mutation("forge.truncate", "forge", 1, _forge_truncate),
    Mutation("forge.append", "forge", 1, _forge_append),
    Mutation("forge.seal", "forge", 1, _forge_seal),
)


def difference(before: Log, after: Log) -> str:
    """The first record (or the seal) where two logs differ, chain fields left out."""
    chain = {"hash", "prev_hash", "head_hash", "record_count"}
    (r1, s1), (r2, s2) = split(before), split(after)
    for i, (a, b) in enumerate(zip(r1, r2, strict=False)):
        changed = sorted(k for k in a if k not in chain and a[k] != b.get(k))
        if changed:
            return f"step {i}: " + ", ".join(f"{k} {a[k]!r} -> {b.get(k)!r}" for k in changed)
    if len(r1) != len(r2):
        return f"{len(r1)} -> {len(r2)} records"
    body1, body2 = (s1 or {}).get("seal", {}), (s2 or {}).get("seal", {})
    changed = sorted(k for k in body1 if k not in chain and body1[k] != body2.get(k))
    return "seal: " + ", ".join(f"{k} {body1[k]!r} -> {body2.get(k)!r}" for k in changed)


@dataclass
class Tally:
    family: str
    injected: int = 0
    detected: int = 0
    by_verify: int = 0
    by_anchor: int = 0
    by_replay: int = 0
    escaped: list[str] = field(default_factory=list)
    replay_missed: list[str] = field(default_factory=list)
    reasons: collections.Counter[str] = field(default_factory=collections.Counter)


def run_mutations(
    engine: Engine, gens: list[Generated], count: int, rng: random.Random
) -> dict[str, Tally]:
    tallies = {k.name: Tally(k.family) for k in KINDS_OF_MUTATION}
    for n in range(count):
        kind = KINDS_OF_MUTATION[n % len(KINDS_OF_MUTATION)]
        while True:
            g = rng.choice(gens)
            original = parse(g.lines)
            if len(original) - 1 < kind.min_records:
                continue
            mutated = dump(kind.apply(engine, parse(g.lines), rng))
            if mutated != dump(original):
                break
        t = tallies[kind.name]
        t.injected += 1
        v = verify(mutated)
        a = verify(mutated, anchor=g.anchor)
        r = replay(mutated, engine)
        t.by_verify += not v.ok
        t.by_anchor += not a.ok
        t.by_replay += not r.ok
        caught = not v.ok if kind.family == "in-log" else not (r.ok and a.ok)
        t.detected += caught
        if not caught:
            t.escaped.append("\n".join(mutated))
        if r.ok:
            t.replay_missed.append(difference(original, parse(mutated)))
        t.reasons[(v if not v.ok else r if not r.ok else a).reason.split(":")[0][:60]] += 1
    return tallies


# ------------------------------------------------------------------ report


def campaign(generations: int, mutations: int, seed: int) -> dict[str, Any]:
    """Run both phases; return the report (see the module header)."""
    t0 = time.perf_counter()
    gen_engine, fresh, shared = build_engines()
    gens, rollover = run_generations(gen_engine, shared, generations, random.Random(seed))
    t1 = time.perf_counter()
    baseline = collections.Counter[str]()
    for g in gens:
        baseline["verify_ok"] += verify(g.lines).ok
        baseline["anchor_ok"] += verify(g.lines, anchor=g.anchor).ok
        baseline["replay_ok"] += replay(g.lines, fresh).ok
    t2 = time.perf_counter()
    tallies = run_mutations(fresh, gens, mutations, random.Random(seed + 1))
    t3 = time.perf_counter()
    records = [parse(g.lines)[:-1] for g in gens]
    return {
        "schema": "grid.bench.audit_tamper/1",
        "seed": seed,
        "artifacts": gen_engine.fingerprints(),
        "generations": {
            "count": len(gens),
            "shapes": dict(collections.Counter(g.shape for g in gens)),
            "stop_reasons": dict(collections.Counter(g.stop_reason for g in gens)),
            "records": sum(len(r) for r in records),
            "record_kinds": dict(collections.Counter(o["kind"] for r in records for o in r)),
            "max_records": max((len(r) for r in records), default=0),
            "by_namespace": dict(collections.Counter(str(g.namespace) for g in gens)),
        },
        "rollover": rollover,
        "baseline": {"logs": len(gens), **baseline},
        "mutations": {
            name: {
                "family": t.family,
                "injected": t.injected,
                "detected": t.detected,
                "by_verify": t.by_verify,
                "by_anchor": t.by_anchor,
                "by_replay": t.by_replay,
                "first_reasons": dict(t.reasons.most_common(3)),
                "escaped": t.escaped[:3],
                "replay_missed": t.replay_missed if t.family == "forge" else [],
            }
            for name, t in tallies.items()
        },
        "totals": {
            fam: {
                "injected": sum(t.injected for t in tallies.values() if t.family == fam),
                "detected": sum(t.detected for t in tallies.values() if t.family == fam),
                "by_replay": sum(t.by_replay for t in tallies.values() if t.family == fam),
            }
            for fam in ("in-log", "forge")
        },
        "runtime_s": {
            "generations": round(t1 - t0, 2),
            "baseline": round(t2 - t1, 2),
            "mutations": round(t3 - t2, 2),
            "total": round(t3 - t0, 2),
        },
    }


def failures(report: dict[str, Any]) -> list[str]:
    out = []
    b = report["baseline"]
    for k in ("verify_ok", "anchor_ok", "replay_ok"):
        if b[k] != b["logs"]:
            out.append(f"baseline: {b['logs'] - b[k]} honest logs fail {k}")
    for name, m in report["mutations"].items():
        if m["detected"] != m["injected"]:
            out.append(f"{name}: {m['injected'] - m['detected']} mutations escaped")
    return out


def summary(report: dict[str, Any]) -> str:
    g, rt = report["generations"], report["runtime_s"]
    lines = [
        f"{g['count']} generations ({g['records']} records; stops {g['stop_reasons']}; "
        f"kinds {g['record_kinds']}) in {rt['generations']} s",
        f"cache rollover: {report['rollover']}",
        f"baseline: {report['baseline']} in {rt['baseline']} s",
        "",
        f"{'mutation':<22} {'family':<7} {'injected':>8} {'detected':>8} "
        f"{'verify':>7} {'anchor':>7} {'replay':>7}",
    ]
    for name, m in report["mutations"].items():
        lines.append(
            f"{name:<22} {m['family']:<7} {m['injected']:>8} {m['detected']:>8} "
            f"{m['by_verify']:>7} {m['by_anchor']:>7} {m['by_replay']:>7}"
        )
    for fam, t in report["totals"].items():
        lines.append(
            f"{'total ' + fam:<30} {t['injected']:>8} {t['detected']:>8} "
            f"{'':>7} {'':>7} {t['by_replay']:>7}"
        )
    lines.append(f"mutations checked in {rt['mutations']} s; total {rt['total']} s")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--generations", type=int, default=1000)
    p.add_argument("--mutations", type=int, default=1000)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "audit_tamper.json")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    host = host_description()
    report = campaign(args.generations, args.mutations, args.seed)
    host["loadavg_end"] = os.getloadavg()
    report = {
        "command": " ".join(["uv run python bench/audit_tamper.py", *(argv or sys.argv[1:])]),
        "date": time.strftime("%Y-%m-%d"),
        "host": host,
        **report,
    }
    print(summary(report))
    bad = failures(report)
    for line in bad:
        print("FAIL", line)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"results: {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
