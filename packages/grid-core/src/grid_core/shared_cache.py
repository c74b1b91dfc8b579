"""The shared tier of the mask cache: a walk family's T2 on Redis, shared by replicas.

Off by default: the embedded default stays process-local. Setting
``GRID_SHARED_CACHE_URL`` (``redis://[[user]:password@]host[:port][/db]``,
optionally ``?timeout_ms=&backoff_ms=&backoff_max_ms=&lock_ms=&wait_ms=&poll_us=``)
and the deployment key (``GRID_SHARED_CACHE_KEY``, or the file named by
``GRID_SHARED_CACHE_KEY_FILE``; at least 16 bytes) puts a shared tier behind
the native walk cache of every engine built from then on
(:func:`grid_core.kernels.engine_tables` calls :func:`attach`). The vLLM
backend reads the same variables in its engine process. A URL without a key,
a key without a URL, an unreadable key file, a short key or a URL that does
not parse is a :class:`SharedCacheError` naming the setting, raised when the
engine is built.

What it does is in ``grid_kernels``' ``remote`` module and ``docs/cache.md``
("The shared tier"): the local tier stays in front, Redis is read only on a
local miss, a miss in both is walked and published once (a walker's lock
across processes), an entry read is used only if its HMAC under the
deployment key and its recomputed entry id check out, and a server that is
down, slow or restarted costs local walks only. Each tier counts what
happens (:meth:`SharedTier.metrics`) and a daemon thread logs its events on
the ``grid_core.shared_cache`` logger (failures as warnings, reconnections
as info).

The Python path (``GRID_KERNELS=0``) has no shared tier: it is the
reference, and :func:`attach` is only called for native tables.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grid_core.errors import GridError

URL_ENV = "GRID_SHARED_CACHE_URL"
KEY_ENV = "GRID_SHARED_CACHE_KEY"
KEY_FILE_ENV = "GRID_SHARED_CACHE_KEY_FILE"

#: The shortest deployment key accepted, in bytes (grid_kernels' remote module agrees).
MIN_KEY_BYTES = 16

logger = logging.getLogger("grid_core.shared_cache")


class SharedCacheError(GridError):
    """The shared cache's settings are incomplete or invalid."""

    def __init__(self, setting: str, detail: str) -> None:
        self.setting, self.detail = setting, detail
        super().__init__(f"{setting}: {detail}")


@dataclass(frozen=True)
class SharedCacheConfig:
    """Where the shared tier is (``url``) and the deployment key that signs its entries."""

    url: str
    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.key) < MIN_KEY_BYTES:
            raise SharedCacheError(
                KEY_ENV, f"the deployment key has {len(self.key)} bytes; at least {MIN_KEY_BYTES}"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SharedCacheConfig | None:
        """The configuration the environment gives, or None when the tier is off
        (no URL, no key). Incomplete or unreadable settings raise
        :class:`SharedCacheError`."""
        env = os.environ if environ is None else environ
        url = env.get(URL_ENV, "").strip()
        key_text, key_file = env.get(KEY_ENV, ""), env.get(KEY_FILE_ENV, "").strip()
        if key_text and key_file:
            raise SharedCacheError(KEY_ENV, f"set {KEY_ENV} or {KEY_FILE_ENV}, not both")
        key = key_text.encode()
        if key_file:
            try:
                key = Path(key_file).read_bytes().strip()
            except OSError as e:
                raise SharedCacheError(KEY_FILE_ENV, f"cannot read {key_file!r}: {e}") from e
        if not url:
            if key:
                raise SharedCacheError(URL_ENV, "a deployment key is set but no URL")
            return None
        if not key:
            raise SharedCacheError(KEY_ENV, f"{URL_ENV} is set but no deployment key")
        return cls(url, key)


class SharedTier:
    """One family's shared tier in this process (the native ``RemoteWalks``),
    with the daemon thread that logs its events."""

    def __init__(self, native: Any, config: SharedCacheConfig, family: str) -> None:
        try:
            self.remote = native.RemoteWalks(config.url, config.key, family)
        except ValueError as e:
            raise SharedCacheError(URL_ENV, str(e)) from e
        self.config, self.family = config, family
        self._logger = threading.Thread(
            target=_log_events, args=(self.remote,), name="grid-shared-cache-log", daemon=True
        )
        self._logger.start()

    @property
    def prefix(self) -> str:
        """The prefix of every Redis key of this tier."""
        prefix: str = self.remote.prefix
        return prefix

    def metrics(self) -> dict[str, int]:
        """Counters: ``lookups`` (local misses asked of Redis), ``hits``, ``misses``,
        ``rejected`` (entries refused: HMAC, format, content or id), ``published``,
        ``waits`` / ``wait_hits`` / ``wait_timeouts`` / ``wait_takeovers`` (on
        another process's lock: its entry came, ``wait_ms`` passed, or the lock went
        with no entry and this process took it, walked and published),
        ``errors`` (failed commands or connections), ``skipped`` (commands not sent
        during a backoff), ``busy`` (commands not sent: another thread held the
        connection for a whole timeout), ``reconnects``."""
        metrics: dict[str, int] = self.remote.metrics()
        return metrics


#: Set at interpreter exit: the logging threads stop. A daemon thread must not be
#: inside a native wait when the interpreter finalizes (CPython then ends it with
#: ``pthread_exit``, which unwinds through Rust frames and aborts the process).
_stopping = threading.Event()

#: The longest a logging thread stays in one native wait, in seconds.
POLL_SECONDS = 0.2


def _log_events(remote: Any) -> None:
    while not _stopping.is_set():
        event = remote.next_event(POLL_SECONDS)
        if event is not None:
            level = logging.INFO if event.endswith("reconnected") else logging.WARNING
            logger.log(level, "%s", event)


@atexit.register
def _stop_logging() -> None:
    """Stop every logging thread before the interpreter finalizes (see ``_stopping``)."""
    _stopping.set()
    for found in tiers():
        found._logger.join(timeout=10 * POLL_SECONDS)


_tiers: dict[tuple[SharedCacheConfig, str], SharedTier] = {}
_lock = threading.Lock()


def tier(native: Any, config: SharedCacheConfig, family: str) -> SharedTier:
    """The process's tier of ``family`` under ``config`` (made once, then kept)."""
    with _lock:
        found = _tiers.get((config, family))
        if found is None:
            found = _tiers[(config, family)] = SharedTier(native, config, family)
        return found


def tiers() -> list[SharedTier]:
    """Every tier of this process, in order of creation."""
    with _lock:
        return list(_tiers.values())


def attach(
    native: Any, tables: Any, family: str, config: SharedCacheConfig | None = None
) -> SharedTier | None:
    """Put the shared tier of ``family`` behind the walk cache of native ``tables``
    (``config``: else the environment's); None when the tier is off. A walk cache
    shared by several engines of the family gets the tier once."""
    config = config if config is not None else SharedCacheConfig.from_env()
    if config is None:
        return None
    shared = tier(native, config, family)
    native.attach_remote(tables, shared.remote, family)
    return shared
