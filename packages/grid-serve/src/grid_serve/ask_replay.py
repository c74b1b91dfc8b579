"""``grid audit replay LOG [--db FILE --policy FILE] --vocab NAME``: ``grid ask``'s logs.

A :class:`~grid_core.cli.ReplaySource` (entry point ``ask`` of the group
``grid.replay``): grid-core's ``grid audit replay`` without ``--grammar`` asks it
for the artifacts of a log whose seal ``grid ask`` wrote (mode flags ``role`` and
``question_blake2b``, or the seal of a budget refusal, stop reason
:data:`grid_serve.text2sql.NO_STATEMENT`, with ``role``). It rebuilds them from
the seal and the command line, as ``grid ask`` built them:

- the schema of ``--db`` (default: the example database, rebuilt from
  ``examples/company.sql``) and the policy of ``--policy`` (default, without
  ``--db`` only: the example policy); ``--db`` needs ``--policy``, as in ``grid ask``;
- the vocabulary of ``--vocab`` (grid-core's option: ``smollm2`` for ``grid ask``'s
  default model);
- the seal's ``role`` and ``language``
  (:data:`grid_serve.text2sql.Language`; a seal without one is of the role's
  language, as ``grid ask`` wrote before it had languages): the covering or
  FROM-first language's engines (:meth:`~grid_serve.text2sql.RoleEngines.scoped`)
  and a fresh guide of them; or the role's engine, tightened as the repair pass
  tightened a retry's (the seal's ``removed``, the JSON list of column names its
  lexicon no longer spells, and ``star``, false when its guide had no ``*``
  result column: :meth:`~grid_serve.text2sql.RoleEngines.retry_engine`).

Replay then checks every artifact's fingerprint against the seal's, so artifacts
rebuilt from another database, policy or vocabulary are reported as such (exit 1),
never replayed against; so is a log whose role the policy does not have, and a
covering or FROM-first log whose language that database and policy cannot give
the role (say, the policy lets it INSERT). Logs of
a model with its own tokenizer (``--model gemma3-270m``, a GGUF file) are replayed
from Python (:func:`grid_core.replay.replay` with the model's vocabulary).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grid_core.errors import ArtifactsError, AuditError
from grid_core.guide import Engine
from grid_core.replay import ReplayGuide
from grid_core.vocab import Vocabulary

__all__ = ["SOURCE", "AskLogs"]


class AskLogs:
    """The artifacts of ``grid ask``'s logs, rebuilt from their seal (module header)."""

    title = "grid ask logs (grid-serve): the artifacts rebuilt from the seal"
    options = ("db", "policy")

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument(
            "--db", type=Path, help="the database grid ask ran on (default: the example one)"
        )
        group.add_argument(
            "--policy", type=Path, help="its policy (default, without --db: the example policy)"
        )

    def artifacts(
        self, args: argparse.Namespace, seal: Mapping[str, Any], vocab: Vocabulary
    ) -> tuple[Engine, ReplayGuide | None] | None:
        from grid_serve import text2sql

        mode = seal["mode"]
        refusal = seal["stop_reason"] == text2sql.NO_STATEMENT
        if not isinstance(mode.get("role"), str) or not (refusal or "question_blake2b" in mode):
            return None
        from grid_sql.database import database_for
        from grid_sql.policy import MissingPolicyError, PolicyBundle, example_policy
        from grid_sql.schema import require_file

        if args.db is not None and args.policy is None:
            raise MissingPolicyError(str(args.db))
        if args.db is not None:
            require_file(args.db)
        with tempfile.TemporaryDirectory(prefix="grid-replay-") as tmp:
            db = args.db if args.db is not None else text2sql.example_database(Path(tmp))
            schema = database_for(db).snapshot(db)
        policy = PolicyBundle.load(args.policy, schema) if args.policy else example_policy(schema)
        role, language = mode["role"], mode.get("language", "role")
        if role not in policy.roles:
            raise ArtifactsError(
                f"the log's role {role!r} is not in the policy {policy.path} (roles: "
                f"{', '.join(policy.roles)})"
            )
        engines = text2sql.RoleEngines(schema, policy, vocab)
        if language in ("covering", "from-first"):
            why = text2sql.scope_obstacle(schema, engines[role].grants)
            if why:
                raise ArtifactsError(
                    f"the log is in the {language} language, which this database and "
                    f"policy cannot give role {role!r}: {why}"
                )
            scoped = engines.scoped(role, covering=language == "covering")
            return scoped.base, scoped.guide(audit=False)
        if language != "role":
            raise AuditError(f"the seal's language {language!r} is none of grid ask's")
        removed = _removed(mode.get("removed"))
        star = mode.get("star", True)
        words = None
        if removed:
            from grid_sql.repair import tighten_lexicon

            words = tighten_lexicon(engines[role].lexicon.word_lists(), removed)
        return engines.retry_engine(role, words, star=star is not False), None


def _removed(flag: object) -> list[str]:
    """The seal's ``removed`` flag (a JSON list of column names, or absent)."""
    if flag is None:
        return []
    try:
        names = json.loads(flag) if isinstance(flag, str) else None
    except ValueError:
        names = None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise AuditError(f"the seal's removed flag {flag!r} is not a JSON list of column names")
    return names


#: The entry point's object.
SOURCE = AskLogs()
