"""`/v1/completions`: one raw prompt (no chat template), a stream of `choices[].text` chunks.

A request given as messages is sent as their text joined (media cannot be carried: the route takes none).
"""

from __future__ import annotations

from typing import Any

import msgspec

from loadproof.protocol.openai import chunk_decoder
from loadproof.protocol.request import Request
from loadproof.protocol.routes.base import Route, decode_error, encoder
from loadproof.protocol.routes.chat import feed_chunk, generation_fields
from loadproof.protocol.routes.reading import Reading


class CompletionsRoute(Route):
    name = "completions"
    path = "/v1/completions"
    conversational = False

    def encode(self, request: Request) -> bytes:
        body: dict[str, Any] = {"model": request.model, "prompt": request.text}
        body.update(generation_fields(request))
        body.update(request.extra)
        return encoder.encode(body)

    def feed(self, reading: Reading, payload: bytes, now: int) -> None:
        try:
            chunk = chunk_decoder.decode(payload)
        except msgspec.DecodeError as exc:
            raise decode_error(exc) from None
        feed_chunk(reading, chunk, now)


ROUTE = CompletionsRoute()
