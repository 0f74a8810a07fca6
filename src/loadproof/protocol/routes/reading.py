"""What a route's reader collects from one answer while it streams, and how it lands in the RequestRecord.

Every route reads into the same `Reading`: the time of each token-bearing event and the tokens it added
(where the server's usage runs per event), the answer's text, its reasoning, its tool calls, the usage and the
finish reason. A route's `feed` calls `usage` and `piece`; the client calls `into` once the answer ends, so the
record of a Messages stream is filled exactly as a chat one is (docs/routes.md).
"""

from __future__ import annotations

from loadproof.records import RequestRecord, ToolCall


class Reading:
    __slots__ = (
        "keep_text",
        "texts",
        "reasoning_texts",
        "calls",
        "chunk_ns",
        "chunk_tokens",
        "prev_tokens",
        "reasoning_tokens",
        "num_events",
        "first_ns",
        "answer_ns",
        "last_ns",
        "per_event_usage",
        "done",
        "finish_reason",
        "prompt_tokens",
        "cached_tokens",
        "engine_reasoning_tokens",
        "has_usage",
    )

    def __init__(self, keep_text: bool = True) -> None:
        self.keep_text = keep_text
        self.texts: list[str] = []
        self.reasoning_texts: list[str] = []
        self.calls: dict[int, ToolCall] = {}
        self.chunk_ns: list[int] = []
        self.chunk_tokens: list[int] = []
        self.prev_tokens = 0
        self.reasoning_tokens = 0
        self.num_events = 0
        self.first_ns: int | None = None
        self.answer_ns: int | None = None
        self.last_ns: int | None = None
        self.per_event_usage = True
        self.done = False
        self.finish_reason: str | None = None
        self.prompt_tokens: int | None = None
        self.cached_tokens: int | None = None
        self.engine_reasoning_tokens: int | None = None
        self.has_usage = False

    def usage(
        self,
        prompt: int | None,
        completion: int | None,
        cached: int | None = None,
        reasoning: int | None = None,
    ) -> int:
        """The server's usage so far; returns the output tokens it adds to the last count."""
        self.has_usage = True
        if prompt is not None:
            self.prompt_tokens = prompt
        if cached is not None:
            self.cached_tokens = cached
        if reasoning is not None:
            self.engine_reasoning_tokens = reasoning
        if completion is None:
            return 0
        added = completion - self.prev_tokens
        self.prev_tokens = completion
        return added

    def piece(self, now: int, text: str | None, reasoning: str | None, called: bool, tokens: int) -> None:
        """One event of the answer: its text, reasoning or a tool call's piece, and the tokens it added."""
        if text or reasoning or called:
            if self.first_ns is None:
                self.first_ns = now
            if text or called:
                if self.answer_ns is None:
                    self.answer_ns = now
                if text and self.keep_text:
                    self.texts.append(text)
            else:
                self.reasoning_tokens += tokens
            if reasoning and self.keep_text:
                self.reasoning_texts.append(reasoning)
        elif tokens <= 0:
            return
        self.last_ns = now
        self.chunk_ns.append(now)
        self.chunk_tokens.append(tokens)

    def call(self, index: int, call_id: str | None, name: str | None, arguments: str | None) -> None:
        """A piece of the answer's tool call `index` (the id and name come once, the arguments in pieces)."""
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = ToolCall()
        if call_id:
            call.id = call_id
        if name:
            call.name += name
        if arguments:
            call.arguments += arguments

    def live(self, record: RequestRecord) -> None:
        """What a live view reads while the answer streams (`output_tokens` is the usage so far)."""
        record.last_token_ns, record.num_chunks, record.output_tokens = self.last_ns, self.num_events, self.prev_tokens
        record.first_token_ns = self.first_ns

    def into(self, record: RequestRecord) -> None:
        record.first_token_ns = self.first_ns
        record.num_chunks = self.num_events
        record.last_token_ns = self.last_ns
        record.chunk_ns = self.chunk_ns
        record.chunk_tokens = self.chunk_tokens
        record.chunk_usage = self.per_event_usage
        record.output_text = "".join(self.texts)
        if self.prompt_tokens is not None:
            record.prompt_tokens = self.prompt_tokens
        if self.cached_tokens is not None:
            record.cached_tokens = self.cached_tokens
        if self.engine_reasoning_tokens is not None:
            record.engine_reasoning_tokens = self.engine_reasoning_tokens
        record.output_tokens = self.prev_tokens if self.has_usage else None
        record.first_answer_ns = self.answer_ns
        if self.finish_reason is not None:
            record.finish_reason = self.finish_reason
        if self.reasoning_texts or self.reasoning_tokens:
            record.reasoning_text = "".join(self.reasoning_texts)
            record.reasoning_tokens = self.reasoning_tokens if self.per_event_usage else None
        if self.calls:
            record.tool_calls = [self.calls[i] for i in sorted(self.calls)]
