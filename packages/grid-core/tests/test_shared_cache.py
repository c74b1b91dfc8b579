"""The shared tier of the mask cache on a real Redis server (grid_core.shared_cache).

Every test replays Spider dev gold statements (sqlite dialect, cl100k) through
the native guide and compares every mask row with a process-local engine's
(no shared tier): the tier may only change where an entry comes from, never a
mask. Around that:

- two processes share entries: the second's local misses are remote hits
  (counted), it walks and publishes nothing the first published;
- planted bad entries (no HMAC, another key's HMAC, a wrong payload or a wrong
  id under the right HMAC) are rejected, counted and logged;
- the server killed and restarted mid-replay, and a server that never
  answers, cost local walks only: failures counted and logged, reconnection
  automatic;
- a miss that finds another process's walker lock waits for it: it takes the
  entry that process publishes meanwhile (walking nothing), or, when the lock
  goes with no entry (its holder died), takes the lock, walks and publishes,
  or at ``wait_ms`` walks locally without publishing;
- a lock is released only by the acquisition that took it (its value is that
  acquisition's token): another process's lock is left alone;
- the walker's lock has a TTL (``lock_ms``), so a walker that dies holding it
  does not block the key for good.

The server is Debian's ``redis-server`` on a free loopback port
(``redis_server.py``); without it these tests skip, and with
``GRID_REQUIRE_REDIS=1`` (the nox ``tests`` session) they fail.
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import hmac
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grid_kernels._native")
pytest.importorskip("grid_sql")

import shared_replica
from redis_server import RedisServer, running_redis

from grid_core import shared_cache
from grid_core.cache import SharedCache
from grid_core.guide import Engine, GridGuide
from grid_core.shared_cache import SharedCacheConfig, SharedCacheError

KEY = b"test deployment key 0123456789"
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


@pytest.fixture(scope="module")
def reference() -> dict[bytes, list[bytes]]:
    """Mask rows of the statements every test replays, from a process-local engine."""
    assert shared_cache.SharedCacheConfig.from_env() is None, "the reference must be local"
    e = shared_replica.engine()
    return {s: shared_replica.replay(e, s) for s in shared_replica.statements(6, seed=20)}


def use_tier(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv(shared_cache.URL_ENV, url)
    monkeypatch.setenv(shared_cache.KEY_ENV, KEY.decode())


def replay_all(reference: dict[bytes, list[bytes]]) -> None:
    """Replay every statement on a new engine (an empty local tier), checking each
    row against the reference."""
    e = shared_replica.engine()
    for statement, rows in reference.items():
        assert shared_replica.replay(e, statement) == rows, statement


def tier_of(url: str) -> shared_cache.SharedTier:
    """The tier this process made for ``url`` (one family here)."""
    (tier,) = [t for t in shared_cache.tiers() if t.config.url == url]
    return tier


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


# ------------------------------------------------------------------ settings


def test_settings_come_from_the_environment(tmp_path: Path) -> None:
    assert SharedCacheConfig.from_env({}) is None
    url = "redis://127.0.0.1:6379/0"
    got = SharedCacheConfig.from_env({shared_cache.URL_ENV: url, shared_cache.KEY_ENV: "k" * 16})
    assert got == SharedCacheConfig(url, b"k" * 16)
    assert "k" * 16 not in repr(got)
    key_file = tmp_path / "key"
    key_file.write_bytes(b"from a file, 16+ bytes\n")
    got = SharedCacheConfig.from_env(
        {shared_cache.URL_ENV: url, shared_cache.KEY_FILE_ENV: str(key_file)}
    )
    assert got is not None and got.key == b"from a file, 16+ bytes"
    url_env, key_env, file_env = (
        shared_cache.URL_ENV,
        shared_cache.KEY_ENV,
        shared_cache.KEY_FILE_ENV,
    )
    for env, setting in [
        ({url_env: url}, key_env),
        ({key_env: "k" * 16}, url_env),
        ({url_env: url, file_env: str(tmp_path / "no")}, file_env),
        ({url_env: url, key_env: "x" * 16, file_env: str(key_file)}, key_env),
    ]:
        with pytest.raises(SharedCacheError) as raised:
            SharedCacheConfig.from_env(env)
        assert raised.value.setting == setting


@pytest.mark.parametrize(
    ("url", "key", "message"),
    [
        ("http://h", KEY, "must start with redis://"),
        ("redis://h:port", KEY, "port"),
        ("redis://h?wait_ms=soon", KEY, "wait_ms"),
        ("redis://h?color=1", KEY, "unknown shared cache setting"),
        ("redis://[::1]7000", KEY, "no :port"),
        ("redis://bob:s3cretpw@h:port", KEY, r'"redis://\*\*\*@h:port": port'),
    ],
)
def test_bad_settings_are_a_typed_error_naming_them(url: str, key: bytes, message: str) -> None:
    import grid_kernels

    with pytest.raises(SharedCacheError, match=message) as raised:
        shared_cache.SharedTier(grid_kernels, SharedCacheConfig(url, key), "family")
    assert raised.value.setting == shared_cache.URL_ENV
    assert "s3cretpw" not in str(raised.value) and "bob" not in str(raised.value)
    with pytest.raises(SharedCacheError, match="at least 16") as raised:
        SharedCacheConfig(url, b"short")
    assert raised.value.setting == shared_cache.KEY_ENV


def test_a_nan_event_timeout_is_a_value_error() -> None:
    """A NaN timeout once panicked in the binding (Duration of NaN seconds)."""
    import grid_kernels

    remote = grid_kernels.RemoteWalks("redis://127.0.0.1:1", KEY, "family")
    with pytest.raises(ValueError, match="NaN"):
        remote.next_event(float("nan"))


# ------------------------------------------------------------------ sharing


def run_replica(url: str | None, n: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_SHARED_CACHE")}
    if url is not None:
        env |= {shared_cache.URL_ENV: url, shared_cache.KEY_ENV: KEY.decode()}
    done = subprocess.run(
        [sys.executable, str(HERE / "shared_replica.py"), str(n), "20"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_two_processes_share_entries(redis: RedisServer) -> None:
    url = redis.url + "?wait_ms=0"
    redis.command("FLUSHALL")
    local = run_replica(None, 6)
    first = run_replica(url, 6)
    second = run_replica(url, 6)
    assert local["metrics"] == {}
    assert first["digest"] == second["digest"] == local["digest"]
    m1, m2 = first["metrics"], second["metrics"]
    # The first walked and published every miss; the second found them all.
    assert m1["lookups"] == m1["misses"] == m1["published"] > 0
    assert m1["hits"] == m1["rejected"] == m1["errors"] == 0
    assert m2["lookups"] == m2["hits"] == m1["published"]
    assert m2["misses"] == m2["published"] == m2["rejected"] == m2["errors"] == 0
    assert len(redis.keys("grid:*:e:*")) == m1["published"]
    assert redis.keys("grid:*:l:*") == []  # every walker's lock released


def test_masks_from_the_shared_tier_equal_the_uncached_python_reference(
    redis: RedisServer, reference: dict[bytes, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cache-on equals cache-off: every row of a replay whose root walks all come
    from Redis equals the pure-Python guide's with no cache at all."""
    url = redis.url + "?wait_ms=0"
    use_tier(monkeypatch, url)
    redis.command("FLUSHALL")
    statement = min(reference, key=len)
    replay_all({statement: reference[statement]})  # publishes its walks
    tier = tier_of(url)
    before = tier.metrics()
    rows = shared_replica.replay(shared_replica.engine(), statement)
    got = delta(tier.metrics(), before)
    assert got["hits"] == got["lookups"] > 0 and "misses" not in got
    monkeypatch.delenv(shared_cache.URL_ENV)
    monkeypatch.delenv(shared_cache.KEY_ENV)
    off = Engine(shared_replica.grammar(), shared_replica.vocabulary()[0], cache=False)
    off.kernel = None  # the Python walks, uncached
    guide, pos = GridGuide(off, audit=False), 0
    for i, row in enumerate(rows):
        want = off.pack_result(guide.compute())
        assert want.tobytes() == row, f"step {i} of {statement!r}"
        if pos < len(statement):
            token = shared_replica.next_token(want, statement, pos)
            guide.accept_token(token)
            pos += len(off.vocab.token_bytes[token])


# ------------------------------------------------------------------ integrity


def mac(key: bytes, redis_key: bytes, body: bytes) -> bytes:
    """The tier's HMAC of a value (grid_kernels' remote module: HMAC-SHA256 of
    u32 len(key) | key | body)."""
    return hmac.new(
        key, len(redis_key).to_bytes(4, "little") + redis_key + body, hashlib.sha256
    ).digest()


def tamper(kind: str, redis_key: bytes, value: bytes) -> bytes:
    body = value[:-32]
    if kind == "no-hmac":
        return body
    if kind == "other-key":
        return body + mac(b"another deployment's key", redis_key, body)
    if kind == "wrong-id":  # the id is bytes 4..20
        body = body[:4] + bytes(16) + body[20:]
    elif kind == "wrong-payload":  # payload: after magic, id, encoding and its u32 length
        encoding, n = body[20:21], int.from_bytes(body[21:25], "little")
        payload, rest = body[25 : 25 + n], body[25 + n :]
        if encoding == b"D":  # one more or one fewer token
            payload = bytes([payload[0] ^ 1]) + payload[1:]
        else:  # one token fewer, or token 0 where there were none: still canonical
            payload = payload[:-4] if payload else bytes(4)
        body = body[:21] + len(payload).to_bytes(4, "little") + payload + rest
    return body + mac(KEY, redis_key, body)


@pytest.mark.parametrize("kind", ["no-hmac", "other-key", "wrong-id", "wrong-payload"])
def test_planted_bad_entries_are_rejected(
    redis: RedisServer,
    reference: dict[bytes, list[bytes]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    kind: str,
) -> None:
    url = redis.url + "?wait_ms=0&lock_ms=60000"
    use_tier(monkeypatch, url)
    redis.command("FLUSHALL")
    replay_all(reference)  # publishes every walk
    keys = redis.keys("grid:*:e:*")
    assert keys
    for k in keys:
        value = redis.get(k)
        assert value is not None
        assert redis.command("SET", k, tamper(kind, k, value)) == b"+OK\r\n"
        # Hold every walker's lock: a rejected entry is walked locally, not republished.
        redis.command("SET", k.replace(b":e:", b":l:"), b"test")
    tier = tier_of(url)
    before = tier.metrics()
    caplog.set_level(logging.WARNING, logger="grid_core.shared_cache")
    replay_all(reference)
    got = delta(tier.metrics(), before)
    assert got["rejected"] == got["lookups"] == len(keys)
    assert "hits" not in got and "published" not in got
    why = "entry id" if kind.startswith("wrong") else "HMAC"
    wait_for(lambda: any(why in r.getMessage() for r in caplog.records))


def test_a_rejected_entry_is_replaced_by_the_walkers(
    redis: RedisServer, reference: dict[bytes, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = redis.url + "?wait_ms=0&backoff_ms=0"
    use_tier(monkeypatch, url)
    redis.command("FLUSHALL")
    replay_all(reference)
    keys = redis.keys("grid:*:e:*")
    for k in keys:
        value = redis.get(k)
        assert value is not None
        redis.command("SET", k, tamper("other-key", k, value))
    tier = tier_of(url)
    before = tier.metrics()
    replay_all(reference)  # rejects each, walks it and publishes it again
    got = delta(tier.metrics(), before)
    assert got["rejected"] == got["published"] == got["lookups"] == len(keys)
    before = tier.metrics()
    replay_all(reference)
    got = delta(tier.metrics(), before)
    assert got["hits"] == got["lookups"] == len(keys) and "rejected" not in got


def wait_for(condition: Any, what: str = "the expected log record") -> None:
    """Wait (with a generous bound, only a failure bound) until ``condition()``:
    what another thread (the logging thread, a waiting fill) is expected to do."""
    done = threading.Event()
    for _ in range(2400):
        if condition():
            return
        done.wait(0.05)
    raise AssertionError(f"{what} never came")


# ------------------------------------------------------------------ faults


def test_a_server_killed_and_restarted_mid_replay_costs_local_walks_only(
    redis: RedisServer,
    reference: dict[bytes, list[bytes]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # backoff_ms=0: the first miss after the restart reconnects (no clock involved).
    url = redis.url + "?wait_ms=0&backoff_ms=0&backoff_max_ms=0"
    use_tier(monkeypatch, url)
    caplog.set_level(logging.INFO, logger="grid_core.shared_cache")
    redis.command("FLUSHALL")
    statements = list(reference)
    e = shared_replica.engine()
    tier = tier_of(url)
    before = tier.metrics()
    third = len(statements) // 3
    for s in statements[:third]:
        assert shared_replica.replay(e, s) == reference[s]
    redis.stop()
    try:
        for s in statements[third : 2 * third]:
            assert shared_replica.replay(e, s) == reference[s]
    finally:
        redis.start()
    for s in statements[2 * third :]:
        assert shared_replica.replay(e, s) == reference[s]
    got = delta(tier.metrics(), before)
    assert got["errors"] >= 1 and got["reconnects"] >= 1
    assert got["published"] >= 1  # published again after the restart
    assert len(redis.keys("grid:*:e:*")) >= 1
    wait_for(lambda: any("failed" in r.getMessage() for r in caplog.records))
    wait_for(lambda: any(r.getMessage().endswith("reconnected") for r in caplog.records))


def replay_one(
    reference: dict[bytes, list[bytes]],
    monkeypatch: pytest.MonkeyPatch,
    port: int,
    query: str,
    threads: int = 1,
) -> dict[str, int]:
    """Replay the first reference statement through a tier on ``127.0.0.1:port`` with
    the URL's ``query``, on ``threads`` threads at once (daemons, each given 60 s: a
    thread held without end must not hold the test run); every replay's masks must be
    the reference's. The tier's metrics' delta."""
    url = f"redis://127.0.0.1:{port}/0?{query}"
    use_tier(monkeypatch, url)
    e = shared_replica.engine()
    tier = tier_of(url)
    before = tier.metrics()
    statement = next(iter(reference))
    results: list[bool] = []
    runs = [
        threading.Thread(
            target=lambda: results.append(
                shared_replica.replay(e, statement) == reference[statement]
            ),
            daemon=True,
        )
        for _ in range(threads)
    ]
    t0 = time.perf_counter()
    for t in runs:
        t.start()
    for t in runs:
        t.join(timeout=60)
    elapsed = time.perf_counter() - t0
    assert results == [True] * threads, f"{len(results)} of {threads} done in {elapsed:.1f} s"
    return delta(tier.metrics(), before)


def test_a_server_that_never_answers_costs_local_walks_only(
    reference: dict[bytes, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog) and never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        got = replay_one(reference, monkeypatch, port, "timeout_ms=20&backoff_ms=0")
    assert got["errors"] >= 1 and "hits" not in got and "published" not in got


@contextlib.contextmanager
def fake_server(handle: Any) -> Iterator[tuple[int, list[socket.socket], threading.Event]]:
    """A TCP server on 127.0.0.1 that runs ``handle(conn, stop)`` on a thread per
    connection: yields its port, the connections accepted so far and the stop event
    (set on exit)."""
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def run(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            handle(conn, stop)

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        server.settimeout(0.1)

        def serve() -> None:
            while not stop.is_set():
                with contextlib.suppress(OSError):
                    conn, _ = server.accept()
                    accepted.append(conn)
                    threading.Thread(target=run, args=(conn,), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()
        try:
            yield server.getsockname()[1], accepted, stop
        finally:
            stop.set()


def test_a_server_that_answers_a_byte_at_a_time_costs_a_timeout_per_command(
    reference: dict[bytes, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each read returned within the timeout, so a reply trickled a byte every 20 ms
    never timed out: masks on every thread waited without end behind the one
    connection. Now a command's whole exchange has one deadline, and a thread that
    finds the connection busy for a timeout walks locally."""

    def trickle(conn: socket.socket, stop: threading.Event) -> None:
        conn.recv(65536)
        conn.sendall(b"$")  # a bulk header whose length never ends
        while not stop.is_set():
            conn.sendall(b"1")
            time.sleep(0.02)

    with fake_server(trickle) as (port, _, _):
        got = replay_one(reference, monkeypatch, port, "timeout_ms=100&backoff_ms=0", threads=2)
    assert got["errors"] >= 1 and "hits" not in got and "published" not in got


def test_a_command_that_timed_out_is_not_sent_again(
    reference: dict[bytes, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reused connection whose command timed out was reopened and the command sent
    again: a server that stalls cost each command two timeouts (and a SET NX the
    server may have run was sent twice). The server here answers each connection's
    first command and then nothing: after the timeout the tier backs off, on the
    one connection it opened (there were 128 in this replay)."""

    def answer_once(conn: socket.socket, stop: threading.Event) -> None:
        conn.recv(65536)
        conn.sendall(b"$-1\r\n")  # nil: a GET's miss
        while not stop.is_set() and conn.recv(65536):
            pass  # read on, answer nothing

    with fake_server(answer_once) as (port, accepted, _):
        settings = "timeout_ms=50&backoff_ms=60000&backoff_max_ms=60000"
        got = replay_one(reference, monkeypatch, port, settings)
    assert len(accepted) == 1, f"{len(accepted)} connections"
    assert got["errors"] == 1 and got["skipped"] >= 1, got


EXIT_SCRIPT = """
import os, sys, socket
sys.path.insert(0, sys.argv[1])
import shared_replica
from grid_core import shared_cache
silent = socket.socket(); silent.bind(("127.0.0.1", 0)); silent.listen(16)
url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0?timeout_ms=5&backoff_ms=0"
os.environ[shared_cache.URL_ENV] = url
os.environ[shared_cache.KEY_ENV] = "test deployment key 0123456789"
e = shared_replica.engine()
for statement in shared_replica.statements(3, 0):
    shared_replica.replay(e, statement)  # every miss an error event, the last ones unlogged
(tier,) = shared_cache.tiers()
shared_cache._stop_logging()
assert not tier._logger.is_alive(), "the logging thread outlived the exit hook"
shared_cache._stopping.clear()  # the hook runs again at exit, with events still coming
"""


def test_a_process_with_a_tier_exits_cleanly() -> None:
    """The exit hook stops the event-logging thread before the interpreter finalizes: a
    daemon thread woken inside its native wait during finalization is ended with
    pthread_exit, which unwinds through Rust frames and aborts the process (CI saw exit
    code 134 after every grid-core test had passed). Fails if the thread outlives the
    hook, or the process does not exit 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_SHARED_CACHE")}
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", EXIT_SCRIPT, str(HERE)],
            env=env, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]


def test_a_password_and_a_database_in_the_url(
    reference: dict[bytes, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """AUTH and SELECT as the URL says; a wrong password is a counted failure and
    local walks, with the same masks."""
    statement = min(reference, key=len)
    with running_redis("--requirepass", "s3cret") as server:
        for password, works in [("s3cret", True), ("wrong", False)]:
            url = f"redis://:{password}@127.0.0.1:{server.port}/3?backoff_ms=0&wait_ms=0"
            use_tier(monkeypatch, url)
            for _ in range(2):  # the second engine reads what the first published
                replay_all({statement: reference[statement]})
            m = tier_of(url).metrics()
            if works:
                assert m["published"] == m["hits"] > 0 and m["errors"] == 0
            else:
                assert m["errors"] == m["lookups"] > 0 and m["hits"] == m["published"] == 0


# ------------------------------------------------------------------ single flight


def test_a_miss_behind_another_walkers_lock_waits_then_walks_unpublished(
    redis: RedisServer, reference: dict[bytes, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = redis.url + "?wait_ms=1&lock_ms=60000"
    use_tier(monkeypatch, url)
    redis.command("FLUSHALL")
    replay_all(reference)
    keys = redis.keys("grid:*:e:*")
    for k in keys:  # the entries gone, every lock held by "another process"
        redis.command("DEL", k)
        redis.command("SET", k.replace(b":e:", b":l:"), b"another")
    tier = tier_of(url)
    before = tier.metrics()
    replay_all(reference)
    got = delta(tier.metrics(), before)
    assert got["waits"] == got["wait_timeouts"] == got["misses"] == len(keys)
    assert "published" not in got and "wait_hits" not in got
    assert redis.keys("grid:*:e:*") == []


def first_row(e: Engine) -> bytes:
    """The mask row of ``e``'s initial configuration (a fresh guide's first fill)."""
    row = array.array("i", bytes(4 * e.n_words))
    e.guide(audit=False).fill_next_token_bitmask(row)
    return row.tobytes()


def test_a_miss_behind_another_walkers_lock_reads_the_entry_it_publishes(
    redis: RedisServer, reference: dict[bytes, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waiter's side of cross-process single flight: a miss that finds the lock
    held polls Redis and uses the entry the lock's holder publishes (a wait hit),
    walking nothing. The holder is this test: it takes the lock as a walker would,
    sees the fill waiting (``waits``), then publishes the entry (the value a first
    engine published, checked like any entry read) and releases the lock. Only
    failure bounds are timed: ``wait_ms`` is ten minutes."""
    url = redis.url + "?wait_ms=600000&lock_ms=600000&poll_us=1000"
    use_tier(monkeypatch, url)
    redis.command("FLUSHALL")
    want = next(iter(reference.values()))[0]  # every statement's first row: the initial mask
    assert first_row(shared_replica.engine()) == want  # walks and publishes it
    saved = {k: redis.get(k) for k in redis.keys("grid:*:e:*")}
    assert len(saved) == 1, "the initial fill walks one entry: its root's"
    ((entry_key, value),) = saved.items()
    lock_key = entry_key.replace(b":e:", b":l:")
    assert value is not None
    assert redis.command("DEL", entry_key) == b":1\r\n"
    assert redis.command("SET", lock_key, b"another", "NX", "PX", "600000") == b"+OK\r\n"
    tier = tier_of(url)
    before = tier.metrics()
    waiter = shared_replica.engine()  # an empty local tier
    got: list[bytes | BaseException] = []

    def fill() -> None:
        try:
            got.append(first_row(waiter))
        except BaseException as e:  # reported by the test thread
            got.append(e)

    thread = threading.Thread(target=fill, name="waiting-fill", daemon=True)
    thread.start()
    try:
        wait_for(
            lambda: tier.metrics()["waits"] > before["waits"] or not thread.is_alive(),
            "the fill waiting on the held lock",
        )
        assert thread.is_alive(), f"the fill ended without waiting: {got}"
        assert redis.get(entry_key) is None  # it still waits: nothing published yet
    finally:  # the holder publishes and releases (also on failure: the fill ends)
        assert redis.command("SET", entry_key, value) == b"+OK\r\n"
        assert redis.command("DEL", lock_key) == b":1\r\n"
        thread.join(timeout=600)
    assert not thread.is_alive(), "the fill never ended"
    assert got == [want]
    # One lookup, missed, waited and hit: no walk, nothing published, no timeout.
    assert delta(tier.metrics(), before) == {
        "lookups": 1, "misses": 1, "waits": 1, "wait_hits": 1,
    }  # fmt: skip
    assert redis.get(entry_key) == value
    assert redis.keys("grid:*:l:*") == []


def held_root_entry(
    redis: RedisServer, reference: dict[bytes, list[bytes]]
) -> tuple[bytes, bytes, bytes, bytes]:
    """The initial mask, its entry's Redis key and value (walked and published by a
    first engine, whose lock is then gone), and its lock's key; the entry deleted
    and the lock held by "another" process (token ``other``, ten minutes)."""
    want = next(iter(reference.values()))[0]  # every statement's first row: the initial mask
    assert first_row(shared_replica.engine()) == want  # walks and publishes it
    assert redis.keys("grid:*:l:*") == [], "the walker released its own lock"
    ((entry_key, value),) = [(k, redis.get(k)) for k in redis.keys("grid:*:e:*")]
    assert value is not None
    lock_key = entry_key.replace(b":e:", b":l:")
    assert redis.command("DEL", entry_key) == b":1\r\n"
    assert redis.command("SET", lock_key, b"other", "NX", "PX", "600000") == b"+OK\r\n"
    return want, entry_key, value, lock_key


def test_a_walker_that_could_not_take_the_lock_leaves_it(
    redis: RedisServer, reference: dict[bytes, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock is released only by the acquisition whose token it holds: a miss
    behind another process's lock (token ``other``) waits, walks unpublished at
    ``wait_ms`` and leaves that lock as it was. (The late walker whose own lock
    expired and was taken by another is the crate's
    ``a_lock_is_released_only_by_the_acquisition_that_holds_it``.)"""
    url = redis.url + "?wait_ms=1&lock_ms=600000&poll_us=1000"
    use_tier(monkeypatch, url)
    redis.command("FLUSHALL")
    want, entry_key, _, lock_key = held_root_entry(redis, reference)
    tier = tier_of(url)
    before = tier.metrics()
    assert first_row(shared_replica.engine()) == want
    assert delta(tier.metrics(), before) == {
        "lookups": 1, "misses": 1, "waits": 1, "wait_timeouts": 1,
    }  # fmt: skip
    assert redis.get(lock_key) == b"other"
    assert redis.get(entry_key) is None


def test_a_waiter_whose_lock_holder_vanishes_walks_and_publishes(
    redis: RedisServer, reference: dict[bytes, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A miss waiting on a lock that goes with no entry published (its holder died,
    or outlived ``lock_ms`` unpublished) stops waiting: it takes the lock, walks,
    publishes and releases its own lock. The holder is this test: it holds the
    lock, sees the fill waiting (``waits``), then deletes the lock without
    publishing. ``wait_ms`` is ten minutes, so the fill ending at all shows it did
    not wait it out; only failure bounds are timed."""
    url = redis.url + "?wait_ms=600000&lock_ms=600000&poll_us=1000"
    use_tier(monkeypatch, url)
    redis.command("FLUSHALL")
    want, entry_key, value, lock_key = held_root_entry(redis, reference)
    tier = tier_of(url)
    before = tier.metrics()
    waiter = shared_replica.engine()  # an empty local tier
    got: list[bytes | BaseException] = []

    def fill() -> None:
        try:
            got.append(first_row(waiter))
        except BaseException as e:  # reported by the test thread
            got.append(e)

    thread = threading.Thread(target=fill, name="waiting-fill", daemon=True)
    thread.start()
    try:
        wait_for(
            lambda: tier.metrics()["waits"] > before["waits"] or not thread.is_alive(),
            "the fill waiting on the held lock",
        )
        assert thread.is_alive(), f"the fill ended without waiting: {got}"
        assert redis.get(lock_key) == b"other"  # it still waits: the lock is there
    finally:  # the holder vanishes unpublished (also on failure: the fill ends)
        assert redis.command("DEL", lock_key) == b":1\r\n"
        thread.join(timeout=600)
    assert not thread.is_alive(), "the fill never ended"
    assert got == [want]
    # One lookup, missed, waited, took the lock over, walked and published.
    assert delta(tier.metrics(), before) == {
        "lookups": 1, "misses": 1, "waits": 1, "wait_takeovers": 1, "published": 1,
    }  # fmt: skip
    assert redis.get(entry_key) == value
    assert redis.keys("grid:*:l:*") == []


def test_the_walkers_lock_lives_lock_ms_at_most(
    redis: RedisServer, reference: dict[bytes, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walker's lock is taken with a TTL of ``lock_ms``: a walker that dies
    holding it blocks its key for ``lock_ms`` at most. Made visible by a walker
    whose ACL refuses DEL, so its lock outlives its walk: the refused release is
    a counted error, the entry is published and the mask unchanged."""
    redis.command("FLUSHALL")
    user = ["ACL", "SETUSER", "no-del", "reset", "on", ">pw", "~*", "+@all", "-del"]
    assert redis.command(*user) == b"+OK\r\n"
    lock_ms = 600000
    url = f"redis://no-del:pw@127.0.0.1:{redis.port}/0?wait_ms=0&lock_ms={lock_ms}"
    use_tier(monkeypatch, url)
    want = next(iter(reference.values()))[0]
    assert first_row(shared_replica.engine()) == want
    assert tier_of(url).metrics()["published"] == 1
    (lock_key,) = redis.keys("grid:*:l:*")
    assert lock_key.replace(b":l:", b":e:") in redis.keys("grid:*:e:*")
    reply = redis.command("PTTL", lock_key)
    assert reply is not None and reply.startswith(b":"), reply
    assert 0 < int(reply[1:]) <= lock_ms  # -1 would be a lock without a TTL
    assert tier_of(url).metrics()["errors"] == 1  # the refused DEL


# ------------------------------------------------------------------ families

# Two grammars over the same terminals (one union DFA), lexed differently: the
# blank is ignored in one and a token in the other; NAME outranks KW in the third.
IGNORING = 'start: A B\nA: "a"\nB: "b"\nWS: " "\n%ignore WS\n'
BLANK_TOKEN = 'start: A B | A B WS\nA: "a"\nB: "b"\nWS: " "\n'
KEYWORD_FIRST = 'start: (KW | NAME)+\nKW: "if"\nNAME: /[a-z]+/\n'
NAME_FIRST = 'start: (KW | NAME)+\nKW: "if"\nNAME.5: /[a-z]+/\n'


def test_grammars_that_lex_differently_are_different_walk_families(
    redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Walks are shared on Redis by family. Grammars with one DFA and trie whose
    ignored terminals or pick order differ walk differently under the same keys:
    the second served the first's mask (a blank it then refused, or a blank it
    admits lost), when the family named only the DFA and the trie."""
    from grid_core.compile import compile_grammar
    from grid_core.trie import build_trie
    from grid_core.vocab import Vocabulary

    spellings = [bytes([i]) for i in range(256)] + [b" b", b"ab", b"if", b" if", b""]
    eos = len(spellings) - 1
    vocab = Vocabulary.from_spellings("v", spellings, frozenset({eos}), (eos,))
    trie = build_trie(vocab)

    def first_mask(text: str) -> list[bytes]:
        guide = compile_grammar(text, vocab, trie=trie).guide(audit=False)
        return [vocab.token_bytes[i] for i in guide.mask_ids()]

    pairs = ((IGNORING, BLANK_TOKEN), (BLANK_TOKEN, IGNORING), (KEYWORD_FIRST, NAME_FIRST))
    for one, other in pairs:
        monkeypatch.delenv(shared_cache.URL_ENV, raising=False)
        monkeypatch.delenv(shared_cache.KEY_ENV, raising=False)
        local = first_mask(other)
        use_tier(monkeypatch, redis.url + "?wait_ms=0")
        redis.command("FLUSHALL")
        first_mask(one)  # publishes its walks
        assert first_mask(other) == local
        a, b = compile_grammar(one, vocab, trie=trie), compile_grammar(other, vocab, trie=trie)
        assert a.dfa.fingerprint == b.dfa.fingerprint and a.family != b.family
        with pytest.raises(ValueError, match="a shared cache serves one walk family"):
            Engine(b.grammar, vocab, dfa=b.dfa, trie=trie, cache=SharedCache(a.family))
