"""Running the relay: keys from a file or the environment, one port (a port another process holds is one line
naming it, exit 2), JSON access logs, a clean stop (Ctrl-C: exit 130, saying the relay stopped)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from loadproof.errors import Interrupted, UsageError
from loadproof.protocol.ports import refusal
from loadproof.protocol.urls import base_url
from loadproof.relay.app import Relay, RelayConfig
from loadproof.relay.prefill import KV_CONNECTORS, PrefillConfig

KEYS_ENV = "LOADPROOF_RELAY_KEYS"
UPSTREAM_KEY_ENV = "LOADPROOF_UPSTREAM_API_KEY"
DRAIN_S = 10.0  # `loadproof relay` on Ctrl-C or SIGTERM: how long requests in flight may go on


def load_keys(keys_file: Path | None) -> tuple[str, ...]:
    """Keys from a file (one a line, `#` comments) and/or `LOADPROOF_RELAY_KEYS` (comma-separated)."""
    keys: list[str] = []
    if keys_file is not None:
        try:
            lines = keys_file.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise UsageError(f"no keys file at {keys_file}") from None
        keys += [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
        if not keys:
            raise UsageError(f"{keys_file} holds no key")
    keys += [k.strip() for k in os.environ.get(KEYS_ENV, "").split(",") if k.strip()]
    return tuple(keys)


def relay_config(
    upstream: str,
    *,
    max_in_flight: int,
    deadline_s: float,
    heartbeat_s: float,
    max_body_mib: float,
    body_timeout_s: float,
    keys_file: Path | None,
    prefill_upstream: str | None = None,
    kv_connector: str = "ExampleConnector",
    kv_storage: Path | None = None,
    kv_block_size: int | None = None,
) -> RelayConfig:
    """`loadproof relay`'s options, checked once, as a RelayConfig (API keys from the file or
    LOADPROOF_RELAY_KEYS; the key to the upstream from LOADPROOF_UPSTREAM_API_KEY)."""
    for option, url in (("--upstream", upstream), ("--prefill-upstream", prefill_upstream)):
        if url is not None and not url.startswith(("http://", "https://")):
            raise UsageError(f"{option} must be an http(s) URL (got {url!r})")
    if prefill_upstream is None and kv_storage is not None:
        raise UsageError("--kv-storage is the prefill/decode pair's shared folder: give --prefill-upstream too")
    if kv_connector not in KV_CONNECTORS:
        raise UsageError(f"--kv-connector {kv_connector!r}: the relay knows {', '.join(KV_CONNECTORS)}")
    if kv_block_size is not None and (kv_storage is None or kv_block_size < 1):
        raise UsageError("--kv-block-size is the engines' block size (>= 1), which names --kv-storage's folders")
    prefill = (
        PrefillConfig(prefill_upstream, kv_connector, str(kv_storage) if kv_storage else None, kv_block_size)
        if prefill_upstream is not None
        else None
    )
    if max_in_flight < 1 or deadline_s <= 0 or heartbeat_s <= 0 or max_body_mib <= 0 or body_timeout_s <= 0:
        raise UsageError(
            "--max-in-flight, --deadline-s, --heartbeat-s, --max-body-mib and --body-timeout-s must be positive"
        )
    return RelayConfig(
        upstream=upstream,
        max_in_flight=max_in_flight,
        deadline_s=deadline_s,
        heartbeat_s=heartbeat_s,
        body_timeout_s=body_timeout_s,
        max_body_bytes=int(max_body_mib * 1024 * 1024),
        api_keys=load_keys(keys_file),
        upstream_api_key=os.environ.get(UPSTREAM_KEY_ENV),
        prefill=prefill,
    )


class BatchedLineHandler(logging.Handler):
    """Log lines kept in memory and written together: the relay flushes its handlers on every tick of its
    timer (at most 0.1 s apart), and logging flushes them at exit. Written one by one, with a flush each,
    the access log took a third of the relay's time under load (a write per request)."""

    def __init__(self, stream: Any, limit: int = 512) -> None:
        super().__init__()
        self.stream = stream
        self.limit = limit
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(self.format(record))
        except Exception:
            self.handleError(record)
        if len(self.lines) >= self.limit:
            self.flush()

    def flush(self) -> None:
        if not self.lines:
            return
        self.acquire()
        try:
            lines, self.lines = self.lines, []
            self.stream.write("\n".join(lines) + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # stderr closed under us: nothing to tell it
            pass
        finally:
            self.release()


def configure_logging() -> None:
    handler = BatchedLineHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("loadproof.relay")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False


class RelayServer:
    """The relay on one port until `should_exit` (settable from any thread) or SIGINT/SIGTERM (in the main
    thread: `handle_exit`). Then it stops accepting, lets requests in flight end for `drain_s` (None: as
    long as they take; a second Ctrl-C cuts it short), closes what is left, and re-raises the signal it
    caught, so the caller's own handling (Ctrl-C -> exit 130) still happens."""

    def __init__(
        self,
        relay: Relay,
        host: str,
        port: int,
        drain_s: float | None = DRAIN_S,
        on_ready: Callable[[], None] | None = None,
        remedy: str = "pass --port",
    ) -> None:
        self.relay, self.host, self.port, self.drain_s, self.on_ready = relay, host, port, drain_s, on_ready
        self.remedy = remedy  # what to do when the port is taken, as the command that runs the relay spells it
        self._should_exit = False
        self.force_exit = False
        self._captured: list[int] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        loop, wake = self._loop, self._wake
        if value and loop is not None and wake is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the loop closed meanwhile
                pass

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._captured.append(sig)
        if self._should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.should_exit = True

    def run(self) -> None:
        in_main = threading.current_thread() is threading.main_thread()
        signals = (signal.SIGINT, signal.SIGTERM) if in_main else ()
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in signals}
        try:
            asyncio.run(self.serve())
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        for caught in reversed(self._captured):
            signal.raise_signal(caught)

    async def serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.set_exception_handler(_quiet_exception_handler)
        self._wake = asyncio.Event()
        try:
            await self.relay.start(self.host, self.port)
        except OSError as exc:  # the port in use (exit 2, named), or an address this host does not have
            raise refusal(exc, self.host, self.port, self.remedy, "another relay or engine?") from None
        if self.on_ready is not None:
            self.on_ready()
        try:
            while not self._should_exit:
                await self._wake.wait()
            stopping = asyncio.ensure_future(self.relay.stop(self.drain_s))
            while not stopping.done():
                await asyncio.wait({stopping}, timeout=0.1)
                if self.force_exit:
                    stopping.cancel()
                    await self.relay.stop(0)
                    break
        finally:
            self.relay.pool.close_all()


def _quiet_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio's report of an unhandled error, by type only: its message may hold an address or a prompt."""
    exc = context.get("exception")
    logging.getLogger("loadproof.relay").error(
        json.dumps(
            {
                "event": "internal_error",
                "error": type(exc).__name__ if exc is not None else "unknown",
                "where": str(context.get("message", "")).split("(", 1)[0][:80],
            }
        )
    )  # no callback arguments: data


def run(config: RelayConfig, host: str, port: int) -> None:
    """`loadproof relay`: prints its address once it listens, serves until Ctrl-C or SIGTERM (then Interrupted,
    exit 130, once it stopped: it keeps no run directory)."""
    configure_logging()
    relay = Relay(config)

    def ready() -> None:
        print(
            f"relay listening on {base_url(host, port)} (upstream from config; "
            f"{len(config.api_keys)} API key(s); pool {config.max_in_flight})",
            flush=True,
        )

    try:
        RelayServer(relay, host, port, on_ready=ready).run()
    except KeyboardInterrupt:
        raise Interrupted("interrupted; the relay stopped") from None
