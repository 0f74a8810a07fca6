"""The streaming load client: one shared HTTP session, one SSE codec, one flat record per request
(`loadproof.records.RequestRecord`)."""

from loadproof.client.stream import RequestSpec, StreamingClient

__all__ = ["RequestSpec", "StreamingClient"]
