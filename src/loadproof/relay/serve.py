"""Running the relay: keys from a file or the environment, uvicorn on one port, JSON access logs."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import uvicorn

from loadproof.errors import UsageError
from loadproof.relay.app import Relay, RelayConfig

KEYS_ENV = "LOADPROOF_RELAY_KEYS"
UPSTREAM_KEY_ENV = "LOADPROOF_UPSTREAM_API_KEY"


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


def configure_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("loadproof.relay")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False


def server(relay: Relay, host: str, port: int) -> uvicorn.Server:
    # uvicorn's own access log would print client addresses and paths with query strings: ours replaces it
    config = uvicorn.Config(relay.app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_keep_alive=75, lifespan="on")
    return uvicorn.Server(config)


def run(config: RelayConfig, host: str, port: int) -> None:
    configure_logging()
    relay = Relay(config)
    print(f"relay listening on http://{host}:{port} (upstream from config; "
          f"{len(config.api_keys)} API key(s); pool {config.max_in_flight})", flush=True)
    server(relay, host, port).run()
