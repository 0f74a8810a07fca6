"""One generation's stream in the simulator: the tokens the engine loop hands over, and the answer they become.

The events themselves are the route's (`protocol.routes`, each adapter's `Writer`: chat chunks as vLLM 0.32's
`chat_completion/serving.py` sends them, Responses and Messages events, transcription chunks); the server
keeps the adapter's `Answer` up to date from the scheduler's request before each token's events are written.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from loadproof.protocol.routes.base import Answer
from loadproof.sim.scheduler import SimRequest


@dataclass
class Stream:
    """A request's answer: its text (one token a byte), where it would end by itself, and the tokens the engine
    loop has produced, each as (index in the output, whether it is the last)."""

    request: SimRequest
    text: str
    natural_end: int
    ignore_eos: bool
    reasoning: int = 0  # the first `reasoning` tokens of `text` are reasoning, streamed apart from the answer
    tokens: asyncio.Queue[tuple[int, bool]] = field(default_factory=asyncio.Queue)

    def piece(self, index: int) -> str:
        return self.text[index] if index < len(self.text) else " "

    def sync(self, answer: Answer, done: int, last: bool) -> None:
        """The answer as the engine has it once `done` tokens are out (the finish reason with the last)."""
        request = self.request
        answer.prompt_tokens = request.prompt_tokens
        answer.cached_tokens = request.cached_tokens
        answer.output_tokens = done
        answer.reasoning_tokens = min(done, self.reasoning)
        answer.finish_reason = request.finish_reason if last else None

    def whole(self, n: int) -> tuple[str, str]:
        """The answer of `n` tokens as (its text, its reasoning)."""
        content = self.text[:n] if n <= len(self.text) else self.text
        return content[self.reasoning :], content[: self.reasoning]


async def num_tokens(stream: Stream) -> int:
    """Waits for the stream's last token; how many tokens it had."""
    while True:
        index, last = await stream.tokens.get()
        if last:
            return index + 1
