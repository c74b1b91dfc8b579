"""The ``grid`` command. Each installed layer adds its subcommands.

Subcommands are entry points of the group ``grid.commands``: each names a
function ``register(subparsers)`` that adds one subparser and sets its
``func``. grid-core registers ``grid audit verify``; grid-sql adds
``grid demo``; a team that installs only grid-core still has ``grid audit``.
Errors from GRID print one line and exit with status 2; a failed verification
exits with status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path

from grid_core.audit import verify_file
from grid_core.errors import GridError

GROUP = "grid.commands"


def audit_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = subparsers.add_parser("audit", help="audit log tools")
    verbs = audit.add_subparsers(dest="verb", required=True)
    verify = verbs.add_parser("verify", help="verify a JSON Lines audit log")
    verify.add_argument("log", type=Path)
    verify.set_defaults(func=_verify)


def _verify(args: argparse.Namespace) -> int:
    verdict = verify_file(args.log)
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
