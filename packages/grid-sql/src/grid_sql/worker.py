"""Run one statement in a worker process that is killed at its limits.

A database engine checks its own limits only where it looks: SQLite's
progress handler runs between virtual-machine instructions, not inside one
function call (``x LIKE '%a____...b'`` over a long string, ``printf`` with
several ``%.1000000000c``); DuckDB's interrupt is not seen inside one
function over one vector of rows, nor while a statement is bound and
planned, and its ``memory_limit`` does not cover scalar values
(``repeat('x', 1000000000)``) or the conversion of a result to Python. A
statement a model wrote can so run for minutes or take gigabytes inside
one call.

:func:`run_isolated` runs the statement in a fresh Python process
(``python -m grid_sql.worker``) through a backend's in-process ``run``
(``grid_sql.database.Database.run``, where the engine's own limits stay in
force), and watches it from outside:

- **time**: the worker is killed once the statement has run ``wall_time``
  plus :data:`GRACE` seconds (the clock starts when the worker has imported
  its backend, before it connects); the worker's own ``SIGALRM`` ends it at
  ``wall_time`` plus twice that, should the caller's thread not get to run;
- **memory**: the worker's resident memory is read every
  :data:`POLL_SECONDS`; it is killed once it holds more than ``max_memory``
  plus :data:`MEMORY_SLACK` bytes past what it held at that start (the slack
  covers the engine's connection and the result's Python objects);
- rows and bytes are counted by the backend as before;
- the worker dies with its caller, even one killed outright (Linux's
  ``PR_SET_PDEATHSIG``), and what the engine prints goes to the worker's
  stderr, never into its reply.

A kill raises :class:`~grid_sql.limits.LimitExceededError` naming the limit,
as the engine's own check does. A refusal by the engine is raised as the
engine raised it (its exception class crosses the process boundary). Any
other failure inside the worker (an exception that is neither, or a worker
that dies) raises :class:`WorkerError` with the worker's own words.

Preconditions: Linux (``/proc/PID/statm``); the backend's ``run`` is a
module-level function importable by the same ``sys.path`` as the caller's.
The memory check is a poll: an allocation faster than the poll can overshoot
it by what the process allocates in :data:`POLL_SECONDS`, and the engine's
own limit remains the first line.
"""

from __future__ import annotations

import importlib
import os
import pickle
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from grid_core.errors import ExecutionError
from grid_sql.execute import Result
from grid_sql.limits import LimitExceededError, Limits

__all__ = ["GRACE", "MEMORY_SLACK", "POLL_SECONDS", "Runner", "WorkerError", "run_isolated"]

#: Seconds past ``wall_time`` before the worker is killed (the engine's own
#: deadline fires first when it can).
GRACE: Final = 0.5

#: Resident bytes a worker may grow by past ``max_memory``: the engine's
#: connection and the Python objects of the result.
MEMORY_SLACK: Final = 64 << 20

#: Seconds between two reads of the worker's resident memory.
POLL_SECONDS: Final = 0.01

#: Seconds a worker may take to start (import its backend) before it is given up.
START_SECONDS: Final = 60.0

_READY: Final = b"R"
_STDERR_KEPT: Final = 1 << 16
_PR_SET_PDEATHSIG: Final = 1
_PAGE: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class WorkerError(ExecutionError):
    """The statement's worker failed other than by a limit or an engine's refusal."""


Runner = Callable[[Path, str, Limits, int], Result]


def run_isolated(
    run: Runner,
    errors: tuple[type[Exception], ...],
    path: Path,
    sql: str,
    limits: Limits,
    keep: int,
) -> Result:
    """``run(path, sql, limits, keep)`` in a worker process killed at ``limits``
    (module header). Returns its :class:`~grid_sql.execute.Result`; raises
    :class:`~grid_sql.limits.LimitExceededError`, the engine's refusal (an instance
    of one of ``errors``, as ``run`` raised it), or :class:`WorkerError` (any other
    failure, with the worker's words)."""
    runner = f"{run.__module__}:{run.__qualname__}"
    # The caller's imports, as absolute paths (a later chdir changes nothing);
    # -P: the working directory is not on the worker's path (no `selectors.py`
    # lying there shadows the standard library).
    paths = os.pathsep.join(os.path.abspath(p) for p in sys.path if isinstance(p, str))
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "grid_sql.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=paths),
    )
    try:
        assert proc.stdin is not None
        try:
            proc.stdin.write(pickle.dumps((os.getpid(), runner, Path(path), sql, limits, keep)))
            proc.stdin.close()
        except BrokenPipeError:  # the worker died at its start: its stderr says why
            pass
        out, err, killed = _watch(proc, limits)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    if killed is not None:
        raise killed
    if proc.returncode == -signal.SIGALRM:  # the worker's own backstop (main)
        raise _too_long(limits)
    return _reply(out, err, proc.returncode, errors)


def _too_long(limits: Limits) -> LimitExceededError:
    return LimitExceededError(
        "wall_time",
        limits.wall_time,
        f"the statement ran past {limits.wall_time:g} s (its worker was stopped)",
    )


def _watch(
    proc: subprocess.Popen[bytes], limits: Limits
) -> tuple[bytes, bytes, LimitExceededError | WorkerError | None]:
    """Read the worker's output until it exits, killing it at its limits."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.fileno(), proc.stderr.fileno()
    chunks: dict[int, list[bytes]] = {out: [], err: []}
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    sel.register(proc.stderr, selectors.EVENT_READ)
    start = time.monotonic()
    deadline = start + START_SECONDS
    base = cap = 0
    open_pipes = 2
    killed: LimitExceededError | WorkerError | None = None
    while open_pipes:
        for key, _ in sel.select(POLL_SECONDS):
            data = os.read(key.fd, 1 << 16)
            if not data:
                sel.unregister(key.fileobj)
                open_pipes -= 1
            chunks[key.fd].append(data)
            if key.fd == err and len(chunks[err]) > 1:  # only its last words are kept
                chunks[err] = [(chunks[err][-2] + data)[-_STDERR_KEPT:]]
        if not cap and chunks[out] and chunks[out][0][:1] == _READY:
            base = _resident(proc.pid)
            cap = base + limits.max_memory + MEMORY_SLACK
            deadline = time.monotonic() + limits.wall_time + GRACE
        now = time.monotonic()
        if now > deadline:
            killed = (
                _too_long(limits)
                if cap
                else WorkerError(f"the statement's worker did not start in {START_SECONDS:g} s")
            )
        elif cap and _resident(proc.pid) > cap:
            killed = LimitExceededError(
                "max_memory",
                limits.max_memory,
                f"the statement's worker grew past {cap - base} bytes "
                f"(max_memory plus {MEMORY_SLACK >> 20} MiB; it was stopped)",
            )
        if killed is not None:
            proc.kill()
            break
    sel.close()
    return b"".join(chunks[out]), b"".join(chunks[err]), killed


def _resident(pid: int) -> int:
    """Resident bytes of process ``pid`` (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _reply(out: bytes, err: bytes, returncode: int, errors: tuple[type[Exception], ...]) -> Result:
    """The worker's reply, raised or returned."""
    try:
        kind, *rest = pickle.loads(out[len(_READY) :]) if out[:1] == _READY else (None,)
    except Exception:  # a worker killed or broken mid-reply
        kind, rest = None, []
    if kind == "ok":
        result: Result = rest[0]
        return result
    if kind == "limit":
        raise LimitExceededError(*rest)
    if kind == "error" and isinstance(rest[0], errors):
        raise rest[0]
    if kind == "error":
        words = rest[0] if isinstance(rest[0], str) else f"{type(rest[0]).__name__}: {rest[0]}"
        raise WorkerError(f"the statement's worker failed: {words}")
    last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
    raise WorkerError(f"the statement's worker exited with status {returncode}: {last[0]}")


def _portable(e: BaseException) -> BaseException | str:
    """``e`` if it survives pickling, else its type and words."""
    try:
        back = pickle.loads(pickle.dumps(e))
    except Exception:
        back = None
    if isinstance(back, type(e)) and str(back) == str(e):
        return e
    return f"{type(e).__name__}: {e}"


def _die_with(parent: int) -> None:
    """Have the kernel kill this process when ``parent`` exits (Linux's
    ``PR_SET_PDEATHSIG``), so a caller killed outright leaves no worker running;
    exit now if it is gone already."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the caller's kill is the only one
        pass
    if os.getppid() != parent:
        os._exit(1)


def main() -> None:
    """The worker: read one request from stdin, run it, write the reply to stdout."""
    # The reply goes to the pipe that was stdout; anything else prints (a module
    # at import, the engine's progress bar) goes to stderr, never into the reply.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    parent, runner, path, sql, limits, keep = pickle.load(sys.stdin.buffer)
    _die_with(parent)
    module, _, name = runner.partition(":")
    run: Any = importlib.import_module(module)
    for part in name.split("."):
        run = getattr(run, part)
    # A backstop the caller's clock does not need to run for (its thread may wait
    # on the GIL): SIGALRM, left at its default action, ends the process.
    signal.setitimer(signal.ITIMER_REAL, limits.wall_time + 2 * GRACE)
    out.write(_READY)
    out.flush()
    reply: tuple[Any, ...]
    try:
        reply = ("ok", run(path, sql, limits, keep))
    except LimitExceededError as e:
        reply = ("limit", e.limit, e.value, e.detail)
    except Exception as e:
        reply = ("error", _portable(e))
    out.write(pickle.dumps(reply))
    out.flush()


if __name__ == "__main__":
    main()
