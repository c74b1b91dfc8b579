"""A real Redis server for the shared-tier tests: Debian's ``redis-server``, a
temporary directory, 127.0.0.1 and a free port, no persistence; stopped and
removed afterwards. It can be killed and started again on the same port.

Without the binary the tests skip, saying so; with ``GRID_REQUIRE_REDIS=1``
(the nox ``tests`` session, which installs it) they fail instead.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def redis_binary() -> str:
    """The ``redis-server`` binary, or the test skips (fails with GRID_REQUIRE_REDIS=1)."""
    found = shutil.which("redis-server")
    if found is None:
        if os.environ.get("GRID_REQUIRE_REDIS") == "1":
            pytest.fail("redis-server not found (GRID_REQUIRE_REDIS=1)")
        pytest.skip("redis-server not found (apt-get install redis-server)")
    return found


class RedisServer:
    """One server process on a fixed loopback port; ``stop`` and ``start`` again."""

    def __init__(self, binary: str, base: Path, extra: tuple[str, ...] = ()) -> None:
        self.binary, self.base, self.port, self.extra = binary, base, _free_port(), extra
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert self.process is None
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.base), "--protected-mode", "no", *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(1000):  # until it answers PING (or exits)
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            if self.command("PING") in (b"+PONG\r\n", b"-NOAUTH Authentication required.\r\n"):
                return
            with suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=0.01)
        raise RuntimeError("redis-server did not answer PING")

    def stop(self) -> None:
        """Kill the server (SIGKILL: no shutdown, its data gone)."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        self.process = None

    def command(self, *args: bytes | str) -> bytes | None:
        """One command's raw reply, or None when nothing answers."""
        parts = [a.encode() if isinstance(a, str) else a for a in args]
        request = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
                s.sendall(request)
                reply = b""
                while not _complete(reply):
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        break
                    reply += chunk
                return reply
        except OSError:
            return None

    def get(self, key: bytes) -> bytes | None:
        reply = self.command("GET", key)
        assert reply is not None and reply[:1] == b"$", reply
        if reply.startswith(b"$-1"):
            return None
        head, _, rest = reply.partition(b"\r\n")
        return rest[: int(head[1:])]

    def keys(self, pattern: str) -> list[bytes]:
        reply = self.command("KEYS", pattern)
        assert reply is not None and reply[:1] == b"*", reply
        lines = reply.split(b"\r\n")
        return [lines[i] for i in range(2, len(lines) - 1, 2)]


def _complete(reply: bytes) -> bool:
    """Whether ``reply`` holds one whole RESP reply (of the kinds these tests read)."""
    if not reply.endswith(b"\r\n"):
        return False
    head, _, rest = reply.partition(b"\r\n")
    if head[:1] == b"$" and head != b"$-1":
        return len(rest) >= int(head[1:]) + 2
    if head[:1] == b"*":
        return rest.count(b"\r\n") >= 2 * int(head[1:])
    return True


@contextmanager
def running_redis(*extra: str) -> Iterator[RedisServer]:
    """A throw-away Redis server (``extra``: more server options); killed and its
    directory removed on exit."""
    binary = redis_binary()
    base = Path(tempfile.mkdtemp(prefix="grid-redis-"))
    server = RedisServer(binary, base, extra)
    try:
        server.start()
        yield server
    finally:
        if server.process is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
