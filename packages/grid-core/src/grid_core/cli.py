"""The ``grid`` command. Each installed layer adds its subcommands.

Subcommands are entry points of the group ``grid.commands``: each names a
function ``register(subparsers)`` that adds one subparser and sets its
``func``. grid-core registers ``grid audit``; grid-sql adds ``grid demo``; a
team that installs only grid-core still has ``grid audit``:

- ``grid audit verify LOG [--anchor HEX]``: check the chain and the seal (and
  that the seal's hash is the anchored one);
- ``grid audit replay LOG --grammar FILE [--start RULE] [--drop TERMINAL ...]
  [--lexicon JSON] --vocab NAME [--anchor HEX]``: verify, then re-derive every
  record from the artifacts (``grid_core.replay``). The projection is given by
  the terminals it drops (``Grammar.drop_terminals``); the lexicon is a JSON
  object mapping categories to lists of words; the vocabulary is one of the
  packaged ones. Without ``--grammar``, the artifacts come from a *replay
  source* of another layer (entry points of the group ``grid.replay``, each a
  :class:`ReplaySource`: grid-serve's rebuilds ``grid ask``'s engines from the
  log's seal and ``--db``/``--policy``); the first source that knows the log's
  seal gives them.

Both print one verdict line; on failure it names the first bad step and why.
Exit status: 0 valid, 1 invalid or divergent, 2 for an error from GRID (an
unreadable log, a grammar or vocabulary that cannot be loaded), printed as one
line on stderr.

Bad input never shows a traceback, in every subcommand (:func:`main`):

- a command line argparse refuses (an unknown option, a missing or malformed
  value) is one line ``grid CMD: error: ...`` and exit 2, without the usage
  text (``grid CMD --help`` prints it). Every error message is printed as one
  line (:func:`one_line`: control characters escaped);
- a text argument that is not valid UTF-8 (the operating system hands Python
  its bytes as lone surrogates) is refused the same way; paths may be any bytes;
- a :class:`~grid_core.errors.GridError` from the command is one line, exit 2;
  so is input nested too deeply for a recursive step (a ``RecursionError``);
- a closed standard output (``grid check ... | head``, or a process started
  with it closed, ``>&-``) ends the command quietly with exit 141, as a process
  killed by SIGPIPE; a process started with standard error closed (``2>&-``)
  says nothing on it. Either file descriptor is then held open on
  ``/dev/null`` (:func:`_closed_streams`), so that no file the command opens
  (a database, an audit log) takes its number;
- Ctrl-C ends it with one line and exit 130; SIGTERM, in a command that
  handles it (``grid ask``, which removes its temporary files: it raises
  :class:`Terminated`), with one line and exit 143.

Every file the commands here read (a log, a grammar, a lexicon) is read with
a bound, :data:`grid_core.files.MAX_FILE_BYTES`: a larger one (a wrong
file, ``/dev/zero``) is one line, exit 2, and never held in memory.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import os
import sys
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, NoReturn, Protocol

from grid_core import files, strict_json
from grid_core.audit import Verdict, read, read_lines, verify
from grid_core.errors import ArtifactsError, AuditError, GridError
from grid_core.grammar import load_grammar
from grid_core.guide import Engine
from grid_core.replay import ReplayGuide, ReplayVerdict, replay
from grid_core.vocab import Vocabulary, cl100k, llama3, qwen, smollm2

GROUP = "grid.commands"
#: Entry points naming a :class:`ReplaySource` for ``grid audit replay``.
REPLAY_GROUP = "grid.replay"

#: Exit status of a command whose standard output was closed (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141
#: Exit status of a command interrupted by Ctrl-C (128 + SIGINT).
EXIT_INTERRUPTED = 130
#: Exit status of a command ended by SIGTERM that handles it (128 + SIGTERM).
EXIT_TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised by a command's handler so that its cleanup runs as on Ctrl-C
    (``with`` blocks, ``finally``); :func:`main` ends with one line and exit 143."""


class ReplaySource(Protocol):
    """Artifacts for ``grid audit replay`` from another layer: a log whose seal the
    source knows is replayed against the engine (and fresh guide) it rebuilds.

    ``title`` heads its options in ``--help``; ``options`` are the ``dest`` names
    of the options :meth:`add_arguments` adds (each None when not given); they may
    not be combined with ``--grammar``.
    :meth:`artifacts` returns None for a seal it does not know, else the engine
    and a fresh, unaudited guide of the log's language (None: the engine's own
    reference guide). It raises :class:`~grid_core.errors.ArtifactsError` when the
    command line's artifacts cannot be the log's (the replay diverges at the
    artifacts, exit 1), and another :class:`~grid_core.errors.GridError` naming what
    is wrong when the command line itself is (exit 2)."""

    title: str
    options: tuple[str, ...]

    def add_arguments(self, group: argparse._ArgumentGroup) -> None: ...

    def artifacts(
        self, args: argparse.Namespace, seal: Mapping[str, Any], vocab: Vocabulary
    ) -> tuple[Engine, ReplayGuide | None] | None: ...


def replay_sources() -> list[ReplaySource]:
    """The installed :class:`ReplaySource` objects, by entry point name."""
    eps = sorted(entry_points(group=REPLAY_GROUP), key=lambda e: e.name)
    return [ep.load() for ep in eps]


class UsageError(Exception):
    """A command line argparse (or :func:`main`) refuses; ``prog`` names the command."""

    def __init__(self, prog: str, message: str) -> None:
        self.prog = prog
        self.message = message
        super().__init__(f"{prog}: error: {message}")


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise :class:`UsageError` (one line, no usage text)
    instead of printing and exiting; subparsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, message)


def text_argument(value: str) -> str:
    """``value`` if it is valid UTF-8 text, else ValueError. The operating system hands
    Python argument bytes that are not UTF-8 as lone surrogates (PEP 383)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        at = len(value[: e.start].encode("utf-8", "surrogateescape"))
        raise ValueError(f"is not valid UTF-8 (byte {at} of the argument)") from None
    return value


def _check_text(args: argparse.Namespace, prog: str) -> None:
    """Refuse any str argument (or str in a list argument) that is not valid UTF-8."""
    for dest, value in vars(args).items():
        values: list[Any] = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, str):
                try:
                    text_argument(item)
                except ValueError as e:
                    shown = dest.upper() if dest in ("sql", "question") else f"--{dest}"
                    raise UsageError(prog, f"{shown.replace('_', '-')} {e}") from None


#: The vocabularies ``grid audit replay --vocab`` can name.
VOCABULARIES: dict[str, Callable[[], Vocabulary]] = {
    "cl100k": cl100k,
    "qwen": qwen,
    "llama3": llama3,
    "smollm2": smollm2,
}


def audit_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = subparsers.add_parser("audit", help="audit log tools")
    verbs = audit.add_subparsers(dest="verb", required=True)
    verify = verbs.add_parser("verify", help="verify a JSON Lines audit log")
    verify.add_argument("log", type=Path)
    verify.add_argument("--anchor", help="the seal hash kept apart from the log")
    verify.set_defaults(func=_verify)

    replay = verbs.add_parser("replay", help="verify a log, then re-derive it from its artifacts")
    replay.add_argument("log", type=Path)
    replay.add_argument(
        "--grammar",
        type=Path,
        help="the L1 grammar (lark); without it, an installed replay source rebuilds the "
        "artifacts from the log's seal (grid ask's logs: --db, --policy)",
    )
    replay.add_argument("--start", default="start", help="the start rule (default: start)")
    replay.add_argument(
        "--drop",
        action="append",
        default=[],
        metavar="TERMINAL",
        help="project away every rule using TERMINAL (repeatable)",
    )
    replay.add_argument("--lexicon", type=Path, help='JSON: {"CATEGORY": ["word", ...], ...}')
    replay.add_argument("--vocab", required=True, choices=sorted(VOCABULARIES))
    replay.add_argument("--anchor", help="the seal hash kept apart from the log")
    for source in replay_sources():
        source.add_arguments(replay.add_argument_group(source.title))
    replay.set_defaults(func=_replay)


def _verify(args: argparse.Namespace) -> int:
    verdict = verify(read_lines(args.log), args.anchor)
    print(one_line(f"{_shown(args.log)}: {verdict}"))
    return 0 if verdict.ok else 1


def _shown(path: Path) -> str:
    """A path as text any stdout can take: bytes that are not UTF-8 (argv's
    surrogate escapes) shown as ``\\udcff``, control characters escaped."""
    return one_line(str(path).encode("utf-8", "backslashreplace").decode("utf-8"))


def _read_text(path: Path, what: str) -> str:
    """The UTF-8 text of ``path`` (:func:`read_bounded`); :class:`AuditError` naming
    ``what`` when it cannot be read."""
    try:
        return files.read_bounded(path, files.MAX_FILE_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise AuditError(f"cannot read {what} {path}: {e}") from None


def load_lexicon(path: Path) -> dict[str, list[bytes]]:
    """A lexicon file: a JSON object mapping category names to lists of words (UTF-8)."""
    try:
        raw = strict_json.loads(_read_text(path, "lexicon"))
    except strict_json.DuplicateKeyError as e:
        raise AuditError(f"lexicon {path}: {e}") from None
    except ValueError as e:
        raise AuditError(f"lexicon {path} is not JSON: {e}") from None
    if not isinstance(raw, dict) or not all(
        isinstance(ws, list) and all(isinstance(w, str) for w in ws) for ws in raw.values()
    ):
        raise AuditError(f"lexicon {path} must map category names to lists of strings")
    words: dict[str, list[bytes]] = {}
    for category, ws in raw.items():
        try:
            words[str(category)] = [w.encode() for w in ws]
        except UnicodeEncodeError as e:  # a lone surrogate escape ("\ud800")
            word = e.object if isinstance(e.object, str) else ""
            raise AuditError(
                f"lexicon {path}: the {category} word {word!r} holds a lone surrogate; "
                "words are Unicode text"
            ) from None
    return words


def engine_from_args(args: argparse.Namespace) -> Engine:
    """The engine of ``--grammar/--start/--drop/--lexicon/--vocab``."""
    grammar = load_grammar(_read_text(args.grammar, "grammar"), args.grammar.stem, args.start)
    if args.drop:
        grammar = grammar.drop_terminals(args.drop, "replay")
    lexicon = load_lexicon(args.lexicon) if args.lexicon else None
    return Engine(grammar, VOCABULARIES[args.vocab](), lexicon)


def _replay(args: argparse.Namespace) -> int:
    sources = replay_sources()
    verdict: Verdict | ReplayVerdict
    if args.grammar is not None:
        given = [o for s in sources for o in s.options if getattr(args, o) is not None]
        if given:
            flags = ", ".join(f"--{o.replace('_', '-')}" for o in given)
            raise AuditError(f"{flags}: not with --grammar (the log's artifacts are given)")
        verdict = replay(read_lines(args.log), engine_from_args(args), args.anchor)
    else:
        verdict = _replay_from_source(args, sources)
    print(one_line(f"{_shown(args.log)}: {verdict}"))
    return 0 if verdict.ok else 1


def _replay_from_source(
    args: argparse.Namespace, sources: Sequence[ReplaySource]
) -> Verdict | ReplayVerdict:
    """The verdict of ``args.log`` replayed against the artifacts of the first source
    that knows its seal (the log's verdict when it does not verify: no seal to go by)."""
    if args.drop or args.lexicon is not None or args.start != "start":
        raise AuditError("--start, --drop and --lexicon go with --grammar")
    lines = read_lines(args.log)
    checked, log = read(lines, args.anchor)
    if not checked.ok or log.seal is None:
        return checked
    vocab = VOCABULARIES[args.vocab]()
    for source in sources:
        try:
            got = source.artifacts(args, log.seal, vocab)
        except ArtifactsError as e:
            return ReplayVerdict(False, checked.records, None, str(e), "artifacts")
        if got is not None:
            engine, guide = got
            return replay(lines, engine, args.anchor, guide=guide)
    raise AuditError(
        "no --grammar, and no installed replay source knows this log's seal "
        "(grid-serve's replays grid ask's logs)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``grid ARGV``; return the exit status. Never raises for bad input (module header)."""
    parser = Parser(prog="grid", description="GRID: grammar-railed decoding")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        ep.load()(subparsers)
    prog = "grid"
    _closed_streams()
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help, --version: argparse printed what was asked
            return e.code if isinstance(e.code, int) else 0
        prog = f"grid {args.command}"
        _check_text(args, prog)
        code: int = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
    except UsageError as e:
        _say(f"{e.prog}: error: {e.message}")
        return 2
    except GridError as e:
        _say(f"{prog}: error: {e}")
        return 2
    except RecursionError:
        _say(f"{prog}: error: the input nests too deeply to be read")
        return 2
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as e:  # a path the system refuses (too long, unreadable, no space)
        where = f": {e.filename}" if e.filename is not None else ""
        _say(f"{prog}: error: {e.strerror or e}{where}")
        return 2
    except Terminated:
        _say(f"{prog}: terminated")
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        _say(f"{prog}: interrupted")
        return EXIT_INTERRUPTED
    return code


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high] (every command's bounded counts)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in [{low}, {high}], not {value}")
        return value

    return parse


def one_line(text: str) -> str:
    """``text`` as one line: control characters (newlines included), line separators and
    lone surrogates escaped, as ``repr`` writes them. A message that quotes user input (an
    argument with a newline, a log's JSON key) or spans lines (an LALR conflict) stays one
    line, no terminal escape sequence reaches the terminal, and any stdout encodes it."""
    return "".join(
        repr(c)[1:-1] if unicodedata.category(c) in ("Cc", "Zl", "Zp", "Cs") else c for c in text
    )


def _say(line: str) -> None:
    """One line on stderr (a closed stderr is ignored: there is nobody left to tell)."""
    with contextlib.suppress(BrokenPipeError, ValueError):
        print(one_line(line), file=sys.stderr)


class _ClosedStderr(io.TextIOBase):
    """``sys.stderr`` of a process started with file descriptor 2 closed (``2>&-``;
    Python leaves it None, and ``print(file=None)`` would write to stdout): what it is
    told is dropped, there is nobody to tell."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return len(text)


class _ClosedStdout(_ClosedStderr):
    """``sys.stdout`` of a process started with file descriptor 1 closed (``>&-``;
    Python leaves it None): every write is a ``BrokenPipeError``, as into a closed
    pipe, so the command ends as :func:`main` ends it there (exit 141)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, "standard output is closed")


def _closed_streams() -> None:
    """Stand-ins for the standard streams the process started without (``>&-``,
    ``2>&-``: ``sys.stdout`` or ``sys.stderr`` None): stdout as a closed pipe
    (:class:`_ClosedStdout`), stderr dropping what it is told. The file descriptor
    is held open on ``/dev/null``, so that no file opened later (a database, an
    audit log) takes its number and gets what a library or child writes there."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        setattr(sys, name, _ClosedStdout() if fd == 1 else _ClosedStderr())


def _silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null, so that the interpreter's last flush of a
    closed pipe raises nothing (the recipe of Python's ``signal`` documentation)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test's capture): nothing will flush to a pipe
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
