"""A route adapter: how one API's body is written from a typed `Request`, and how its answer is read; and its
server side, which the simulator serves every route through: `parse` (a body back into its `Request`) and a
`Writer` (one answer's events in the API's own format), `whole` (a non-streamed answer) and `error`.

One adapter per route (`protocol/routes/<name>.py`), registered in `protocol.routes.ROUTES`. Nothing outside
the adapters branches on a route's name (tests/unit/protocol/test_routes.py greps `src/` for it): code that
needs to know what a route does asks its adapter's properties. docs/routes.md says how to add one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import msgspec

from loadproof.errors import StreamError
from loadproof.protocol.request import Request, Sampling
from loadproof.protocol.routes.reading import Reading
from loadproof.protocol.sse import encode_event
from loadproof.records import RequestRecord

encoder = msgspec.json.Encoder()
JSON = "application/json"


class PooledItems(msgspec.Struct, frozen=True):
    """What a pooling route's answer holds, as its claims name it: `load.<claim>.<unit>_per_s` and
    `..._per_request`, with their formulas."""

    claim: str  # "embeddings"
    unit: str  # "vectors"
    per_s_formula: str
    per_request_formula: str


class RouteTraits(msgspec.Struct, frozen=True, kw_only=True):
    """What a run's claims need to know of its route, kept in its plan: a bundle is verified from the plan
    alone, with no adapter registered for the route (a plug-in's, or a newer loadproof's)."""

    name: str
    streams: bool = True
    forces_length: bool = True
    items: PooledItems | None = None

    @property
    def pooling(self) -> bool:
        return not self.streams


class BadRequest(ValueError):
    """A body a route cannot read: the message says what is wrong, as a server's 400 does."""


@dataclass
class Answer:
    """What a server knows of one answer while it streams it, filled by the server before each call of its
    `Writer`: the counts so far (`output_tokens`, of them `reasoning_tokens` streamed as reasoning), the cached
    part of the prompt once known, and the finish reason ("stop", "length") once the last token is there."""

    id: str
    model: str
    created: int
    prompt_tokens: int
    cached_tokens: int | None = None
    output_tokens: int = 0
    reasoning_tokens: int = 0
    finish_reason: str | None = None
    reasoning_field: str = "reasoning"  # a chat delta's field for reasoning (vLLM's; `reasoning_content` before 0.10)


class Writer:
    """One streamed answer's SSE events, in its API's format. The server calls `open` as it takes the request,
    `piece` for each token (the `Answer` already counting it), `close` after the last, or `error` mid-stream."""

    def __init__(self, request: Request, answer: Answer) -> None:
        self.request = request
        self.answer = answer

    def open(self) -> bytes:
        return b""

    def piece(self, text: str, reasoning: bool) -> bytes:
        raise NotImplementedError

    def close(self) -> bytes:
        raise NotImplementedError

    def error(self, message: str) -> bytes:
        raise NotImplementedError


Embed = Callable[[str], list[float]]  # a pooling server's vector of one text


class Route:
    """Subclass, set the class variables, write `encode`, and either `feed` (a streamed answer) or `answer`
    (one JSON body); for a server (the simulator) `parse`, and `writer` and `whole` (generating) or `pooled`."""

    name: ClassVar[str]
    path: ClassVar[str]  # under the server's /v1 root: "/v1/chat/completions"
    streams: ClassVar[bool] = True  # its answer is an SSE stream of generated tokens
    conversational: ClassVar[bool] = True  # carries messages (a chat template applies), else a raw prompt
    # its requests are sized by their text (a prompt of exact length needs the model's tokenizer); False: a
    # request is its media alone (a transcription's file; its text at most the decoder's context)
    takes_text: ClassVar[bool] = True
    media: ClassVar[frozenset[str]] = frozenset()  # the media parts it carries: "image", "audio", "video"
    done_payload: ClassVar[bytes | None] = b"[DONE]"  # the payload that ends its stream (None: an event does)
    # where an event ends its stream: the SSE `event:` names that do (the relay's clients stop reading there)
    end_events: ClassVar[frozenset[str]] = frozenset()
    forces_length: ClassVar[bool] = True  # takes vLLM's `ignore_eos`: an answer runs to its max_tokens
    constraints: ClassVar[frozenset[str]] = frozenset()  # what it can ask of an answer: "tools", "response_format"
    extra_inputs: ClassVar[int] = 0  # a pooling request's texts beyond its items (a rerank's query)
    takes_dataset: ClassVar[bool] = True  # a data set's row can be one of its requests
    probed: ClassVar[bool] = False  # asked once before a run (one short request): many servers do not serve it
    switches_thinking: ClassVar[bool] = False  # takes the engine's thinking switch (`chat_template_kwargs`)
    verb: ClassVar[str] = "generate"  # what a server that serves it does, for messages ("embed", "rerank")
    prompt_usage: ClassVar[str] = "prompt_tokens"  # the usage field of the prompt's tokens in an answer
    # whether that usage counts the prompt as the engine's prompt-token counter does (vLLM's
    # `vllm:prompt_tokens`); False: the usage counts more (a transcription's: the audio's encoder frames beside
    # the decoder's tokens, the counter the decoder's alone), and the crosscheck of prompt tokens leaves it out
    prompt_usage_counted_by_engine: ClassVar[bool] = True
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

    def prompt_tokens_of(self, answer: Any) -> int:
        """The prompt's tokens in a whole (non-streamed) answer's usage; KeyError, TypeError or ValueError where
        it says none."""
        return int(answer["usage"][self.prompt_usage])

    def traits(self) -> RouteTraits:
        return RouteTraits(name=self.name, streams=self.streams, forces_length=self.forces_length, items=self.items)

    def encode(self, request: Request) -> bytes:
        raise NotImplementedError

    def feed(self, reading: Reading, payload: bytes, now: int) -> None:
        """One SSE data payload of the answer, arrived at `now`."""
        raise NotImplementedError

    def feed_all(self, reading: Reading, payloads: list[bytes], now: int) -> None:
        """The events of one read of the answer, all arrived at `now` (the client's hot loop calls this once a
        read; a route may read them in one pass of its own, as the chat-shaped routes do)."""
        done, feed = self.done_payload, self.feed
        for payload in payloads:
            if payload == done:
                reading.done = True
            else:
                feed(reading, payload, now)

    def answer(self, record: RequestRecord, body: bytes) -> None:
        """A one-body answer (a pooling route's): its usage and items into the record."""
        raise NotImplementedError

    # -- the server's side ---------------------------------------------------------------------------------
    def parse(self, body: bytes, content_type: str) -> Request:
        """The inverse of `encode`: the typed request a body holds (media decoded by `protocol.media`).
        BadRequest for a body it cannot read, MediaError for media that is not what it says."""
        raise NotImplementedError

    def writer(self, request: Request, answer: Answer) -> Writer:
        """The events of a streamed answer to `request`."""
        raise NotImplementedError

    def whole(self, request: Request, answer: Answer, text: str, reasoning: str) -> dict[str, Any]:
        """A non-streamed answer's body: its `text`, after its `reasoning`."""
        raise NotImplementedError

    def pooled(self, request: Request, answer: Answer, embed: Embed) -> dict[str, Any]:
        """A pooling route's answer body: its inputs' vectors (`embed`) as the API returns them."""
        raise NotImplementedError

    def error(self, status: int, message: str, kind: str = "BadRequestError") -> dict[str, Any]:
        """An error answer's body in the API's shape (OpenAI's, as vLLM answers, unless the API has its own)."""
        return {"error": {"message": message, "type": kind, "code": status}}

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


def json_object(body: bytes) -> dict[str, Any]:
    """A JSON body that must be an object (BadRequest otherwise)."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        raise BadRequest("the body is not valid JSON") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data


def pop_sampling(data: dict[str, Any], *max_names: str) -> Sampling:
    """The sampling fields `sampling_fields` writes, taken out of a body (the output budget under any of
    `max_names`, the first given wins); BadRequest for one of the wrong type."""
    default = Sampling()
    try:
        budget = None
        for name in max_names:
            value = data.pop(name, None)
            budget = budget or value
        seed = data.pop("seed", None)
        return Sampling(
            max_tokens=int(budget or default.max_tokens),
            temperature=float(data.pop("temperature", default.temperature)),
            seed=None if seed is None else int(seed),
            ignore_eos=_flag(data.pop("ignore_eos", False)),
        )
    except (TypeError, ValueError):
        raise BadRequest(f"{'/'.join(max_names)}, temperature and seed must be numbers") from None


def pop_stream(data: dict[str, Any]) -> bool:
    return _flag(data.pop("stream", False))


def _flag(value: Any) -> bool:
    return value in (True, "true", "True", 1)


def model_of(data: dict[str, Any]) -> str:
    model = data.pop("model", "")
    if not isinstance(model, str):
        raise BadRequest("model must be a string")
    return model


def usage_of(answer: Answer, completion: int | None = None) -> dict[str, Any]:
    """The chat API's usage of an answer: the whole (with `prompt_tokens_details` where the cached part is
    known, as vLLM with --enable-prompt-tokens-details), or, given `completion`, a stream chunk's counts so far
    (without the details, as vLLM sends them)."""
    done = answer.output_tokens if completion is None else completion
    out: dict[str, Any] = {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": done,
        "total_tokens": answer.prompt_tokens + done,
    }
    if completion is None and answer.cached_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": answer.cached_tokens}
    return out


def event(kind: str, data: dict[str, Any]) -> bytes:
    """One SSE event with its `event:` line, as the Responses and Messages APIs send theirs."""
    return encode_event(kind, encoder.encode(data))
