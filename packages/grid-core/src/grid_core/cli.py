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
  packaged ones.

Both print one verdict line; on failure it names the first bad step and why.
Exit status: 0 valid, 1 invalid or divergent, 2 for an error from GRID (an
unreadable log, a grammar or vocabulary that cannot be loaded), printed as one
line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path

from grid_core.audit import verify_file
from grid_core.errors import AuditError, GridError
from grid_core.grammar import load_grammar
from grid_core.guide import Engine
from grid_core.replay import replay_file
from grid_core.vocab import Vocabulary, cl100k, llama3, qwen, smollm2

GROUP = "grid.commands"

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
    replay.add_argument("--grammar", type=Path, required=True, help="the L1 grammar (lark)")
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
    replay.set_defaults(func=_replay)


def _verify(args: argparse.Namespace) -> int:
    verdict = verify_file(args.log, args.anchor)
    print(f"{args.log}: {verdict}")
    return 0 if verdict.ok else 1


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise AuditError(f"cannot read {what} {path}: {e}") from None


def load_lexicon(path: Path) -> dict[str, list[bytes]]:
    """A lexicon file: a JSON object mapping category names to lists of words (UTF-8)."""
    try:
        raw = json.loads(_read_text(path, "lexicon"))
    except ValueError as e:
        raise AuditError(f"lexicon {path} is not JSON: {e}") from None
    if not isinstance(raw, dict) or not all(
        isinstance(ws, list) and all(isinstance(w, str) for w in ws) for ws in raw.values()
    ):
        raise AuditError(f"lexicon {path} must map category names to lists of strings")
    return {str(c): [w.encode() for w in ws] for c, ws in raw.items()}


def engine_from_args(args: argparse.Namespace) -> Engine:
    """The engine of ``--grammar/--start/--drop/--lexicon/--vocab``."""
    grammar = load_grammar(_read_text(args.grammar, "grammar"), args.grammar.stem, args.start)
    if args.drop:
        grammar = grammar.drop_terminals(args.drop, "replay")
    lexicon = load_lexicon(args.lexicon) if args.lexicon else None
    return Engine(grammar, VOCABULARIES[args.vocab](), lexicon)


def _replay(args: argparse.Namespace) -> int:
    verdict = replay_file(args.log, engine_from_args(args), args.anchor)
    print(f"{args.log}: {verdict}")
    return 0 if verdict.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grid", description="GRID: grammar-railed decoding")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        ep.load()(subparsers)
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except GridError as e:
        print(f"grid {args.command}: error: {e}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
