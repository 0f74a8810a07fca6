"""`/v1/echo`: an invented API (not any real one), the tests' example of a route added in one file, both sides:
the client's `encode` and `feed`, and the server's `parse`, `writer` and `whole` the simulator serves it with
(docs.md)."""

from __future__ import annotations

from typing import Any

import msgspec

from loadproof.errors import StreamError
from loadproof.protocol.request import Request, Sampling
from loadproof.protocol.routes.base import Answer, BadRequest, Route, Writer, decode_error, encoder, json_object
from loadproof.protocol.routes.reading import Reading
from loadproof.protocol.sse import encode_data

WHY = {"length": "budget", "stop": "quiet"}
FINISH = {v: k for k, v in WHY.items()}


class Event(msgspec.Struct):
    echo: str = ""
    bit: str | None = None
    said: int | None = None
    heard: int | None = None
    cached: int | None = None
    why: str | None = None
    problem: str | None = None


decoder = msgspec.json.Decoder(Event)


class EchoRoute(Route):
    name = "echo"
    path = "/v1/echo"
    conversational = False
    done_payload = None  # its end event ends it

    def encode(self, request: Request) -> bytes:
        s = request.sampling
        body: dict[str, Any] = {"model": request.model, "say": request.text, "budget": s.max_tokens}
        body.update(warmth=s.temperature, drone=s.ignore_eos, live=request.stream)
        body.update(request.extra)
        return encoder.encode(body)

    def feed(self, reading: Reading, payload: bytes, now: int) -> None:
        try:
            e = decoder.decode(payload)
        except msgspec.DecodeError as exc:
            raise decode_error(exc) from None
        reading.num_events += 1
        if e.echo == "bit":
            reading.piece(now, e.bit, None, False, reading.usage(None, e.said))
        elif e.echo == "end":
            reading.usage(e.heard, e.said, e.cached)
            reading.finish_reason = FINISH.get(e.why or "", e.why)
            reading.done = True
        elif e.echo == "oops":
            raise StreamError(e.problem or "echo failed")

    def parse(self, body: bytes, content_type: str) -> Request:
        data = json_object(body)
        say, budget = data.pop("say", None), data.pop("budget", 16)
        if not isinstance(say, str) or not isinstance(budget, int):
            raise BadRequest("echo needs `say` (a string) and `budget` (an integer)")
        sampling = Sampling(budget, float(data.pop("warmth", 0.0)), None, bool(data.pop("drone", False)))
        stream = bool(data.pop("live", False))
        model = str(data.pop("model", ""))
        return Request(
            route=self.name, model=model, prompt=say, inputs=(say,), sampling=sampling, stream=stream, extra=data
        )

    def writer(self, request: Request, answer: Answer) -> Writer:
        return EchoWriter(request, answer)

    def whole(self, request: Request, answer: Answer, text: str, reasoning: str) -> dict[str, Any]:
        a = answer
        why = WHY.get(a.finish_reason or "", a.finish_reason)
        return {"echo": "whole", "text": text, "why": why, "heard": a.prompt_tokens, "said": a.output_tokens}

    def error(self, status: int, message: str, kind: str = "BadRequestError") -> dict[str, Any]:
        return {"problem": message, "status": status}


class EchoWriter(Writer):
    def piece(self, text: str, reasoning: bool) -> bytes:
        return encode_data(encoder.encode({"echo": "bit", "bit": text, "said": self.answer.output_tokens}))

    def close(self) -> bytes:
        a = self.answer
        end = {"echo": "end", "why": WHY.get(a.finish_reason or "", a.finish_reason), "heard": a.prompt_tokens}
        end.update(said=a.output_tokens, cached=a.cached_tokens)
        return encode_data(encoder.encode(end))

    def error(self, message: str) -> bytes:
        return encode_data(encoder.encode({"echo": "oops", "problem": message}))


ROUTE = EchoRoute()
