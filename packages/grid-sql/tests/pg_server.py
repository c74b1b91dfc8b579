"""A real PostgreSQL server for the grid-sql tests: Debian's binaries, a temporary
data directory, 127.0.0.1 and a free port; stopped and removed afterwards.

Shared by the dialect tests (PREPARE of the corpus) and the schema tests
(information_schema snapshots); each passes the DDL it needs.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Server:
    psql: str
    port: int

    def run(self, sql: str, *extra: str) -> subprocess.CompletedProcess[str]:
        """Run `sql` (a script) through psql; errors do not stop the script."""
        return subprocess.run(
            [self.psql, "-X", "-q", "-t", "-A", "-h", "127.0.0.1", "-p", str(self.port),
             "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=0", *extra],
            input=sql, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip


def _pg_bin() -> Path | None:
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: (len(p), p))
    candidates = [os.environ.get("GRID_PG_BIN", ""), *reversed(versions)]
    for c in candidates:
        if c and (Path(c) / "initdb").exists() and (Path(c) / "pg_ctl").exists():
            return Path(c)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def running_server(ddl: str) -> Iterator[Server]:
    """A throw-away PostgreSQL server with ``ddl`` run; stopped and removed on exit."""
    bindir = _pg_bin()
    if bindir is None:
        if os.environ.get("GRID_REQUIRE_POSTGRES") == "1":
            pytest.fail("PostgreSQL server binaries not found (GRID_REQUIRE_POSTGRES=1)")
        pytest.skip("PostgreSQL server binaries not found (apt-get install postgresql)")
    psql = str(bindir / "psql") if (bindir / "psql").exists() else shutil.which("psql")
    assert psql, "psql not found"
    as_server: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="grid-pg-"))
    if os.geteuid() == 0:  # the server refuses to run as root
        as_server = ["runuser", "-u", "postgres", "--"]
        shutil.chown(base, "postgres", "postgres")
    data, port = base / "data", _free_port()
    try:
        subprocess.run(
            [*as_server, str(bindir / "initdb"), "-D", str(data), "-A", "trust",
             "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale", "C"],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        subprocess.run(
            [*as_server, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"),
             "-w", "-t", "60", "-o", f"-h 127.0.0.1 -p {port} -k {base} -F", "start"],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        server = Server(psql, port)
        created = server.run(ddl, "-v", "ON_ERROR_STOP=1")
        assert created.returncode == 0, created.stderr
        yield server
    finally:
        subprocess.run(
            [*as_server, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True, timeout=60, check=False,
        )  # fmt: skip
        shutil.rmtree(base, ignore_errors=True)
