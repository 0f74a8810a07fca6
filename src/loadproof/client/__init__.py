"""The streaming load client: one shared HTTP session, one SSE codec, one flat record per request."""

from loadproof.client.record import RequestRecord
from loadproof.client.stream import RequestSpec, StreamingClient

__all__ = ["RequestRecord", "RequestSpec", "StreamingClient"]
