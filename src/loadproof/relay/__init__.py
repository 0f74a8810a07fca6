"""The streaming relay in front of an engine (see relay.app for what it guarantees)."""

from loadproof.relay.app import Relay, RelayConfig

__all__ = ["Relay", "RelayConfig"]
