"""A route adapter: how one API's body is written from a typed `Request`, and how its answer is read.

One adapter per route (`protocol/routes/<name>.py`), registered in `protocol.routes.ROUTES`. Nothing outside
the adapters branches on a route's name (tests/unit/protocol/test_routes.py greps `src/` for it): code that
needs to know what a route does asks its adapter's properties. docs/routes.md says how to add one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import msgspec

from loadproof.errors import StreamError
from loadproof.protocol.request import Request
from loadproof.protocol.routes.reading import Reading
from loadproof.records import RequestRecord

encoder = msgspec.json.Encoder()
JSON = "application/json"


@dataclass(frozen=True)
class PooledItems:
    """What a pooling route's answer holds, as its claims name it: `load.<claim>.<unit>_per_s` and
    `..._per_request`, with their formulas."""

    claim: str  # "embeddings"
    unit: str  # "vectors"
    per_s_formula: str
    per_request_formula: str


class Route:
    """Subclass, set the class variables, write `encode`, and either `feed` (a streamed answer) or `answer`
    (one JSON body)."""

    name: ClassVar[str]
    path: ClassVar[str]  # under the server's /v1 root: "/v1/chat/completions"
    streams: ClassVar[bool] = True  # its answer is an SSE stream of generated tokens
    conversational: ClassVar[bool] = True  # carries messages (a chat template applies), else a raw prompt
    media: ClassVar[frozenset[str]] = frozenset()  # the media parts it carries: "image", "audio", "video"
    done_payload: ClassVar[bytes | None] = b"[DONE]"  # the payload that ends its stream (None: an event does)
    forces_length: ClassVar[bool] = True  # takes vLLM's `ignore_eos`: an answer runs to its max_tokens
    constraints: ClassVar[frozenset[str]] = frozenset()  # what it can ask of an answer: "tools", "response_format"
    extra_inputs: ClassVar[int] = 0  # a pooling request's texts beyond its items (a rerank's query)
    takes_dataset: ClassVar[bool] = True  # a data set's row can be one of its requests
    switches_thinking: ClassVar[bool] = False  # takes the engine's thinking switch (`chat_template_kwargs`)
    verb: ClassVar[str] = "generate"  # what a server that serves it does, for messages ("embed", "rerank")
    prompt_usage: ClassVar[str] = "prompt_tokens"  # the usage field of the prompt's tokens in an answer
    items: ClassVar[PooledItems | None] = None  # a pooling route's: what its answer returns
    content_type: ClassVar[str] = JSON
    headers: ClassVar[dict[str, str]] = {}  # beyond Content-Type and the API key

    @property
    def pooling(self) -> bool:
        """A pooling model's route: one JSON answer, no generated token."""
        return not self.streams

    @property
    def generates(self) -> bool:
        return self.streams

    def encode(self, request: Request) -> bytes:
        raise NotImplementedError

    def feed(self, reading: Reading, payload: bytes, now: int) -> None:
        """One SSE data payload of the answer, arrived at `now`."""
        raise NotImplementedError

    def answer(self, record: RequestRecord, body: bytes) -> None:
        """A one-body answer (a pooling route's): its usage and items into the record."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "streams": self.streams}


def decode_error(exc: msgspec.DecodeError) -> StreamError:
    return StreamError(f"undecodable event: {exc}")


def sampling_fields(request: Request, max_name: str = "max_tokens") -> dict[str, Any]:
    """The sampling fields every generating API takes, under its own name for the output budget."""
    s = request.sampling
    body: dict[str, Any] = {max_name: s.max_tokens, "temperature": s.temperature}
    if s.seed is not None:
        body["seed"] = s.seed
    if s.ignore_eos:
        body["ignore_eos"] = True
    return body
