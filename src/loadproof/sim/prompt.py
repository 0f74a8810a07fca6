"""What the simulator prefills for a request, whatever its route: the prompt's text under the chat template (one
token a byte, `text.CHAT_TEMPLATE` around each user message of a conversational route; a raw prompt otherwise)
and each media item's tokens where it stands, as the architecture counts them (`protocol.media.MediaTokens`:
the sim profile's `image_tokens` for an image and each frame of a video, `audio_tokens` for audio). A media item's
tokens are a run of bytes drawn from its content's hash, so the same image in the same place hits the prefix
cache and another does not, as vLLM keys a block by the media it holds.

The multimodal processor cache (`MediaCache`): each item of a request is a query, and a hit where its content
was seen before among the last `mm_cache_items` items (vLLM's `vllm:mm_cache_queries` and `vllm:mm_cache_hits`).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field

from loadproof.protocol.media import MediaError, MediaTokens
from loadproof.protocol.request import Audio, Image, Message, Request, Text, ToolResult, Video
from loadproof.sim.config import SimConfig
from loadproof.sim.text import CHAT_TEMPLATE

USER_HEAD, USER_TAIL = CHAT_TEMPLATE.split("{content}")


@dataclass
class Prompt:
    text: str  # its text alone (what the answer is drawn from)
    tokens: bytes  # one byte a token: the text and each media item's run
    media: list[str] = field(default_factory=list)  # each media item's content hash, in order
    media_tokens: int = 0


class MediaRules:
    """The sim profile's rules: the tokens of each media item, or the refusal of a model that has none."""

    def __init__(self, config: SimConfig) -> None:
        self.model = config.model
        self.image = MediaTokens.parse(config.image_tokens) if config.image_tokens else None
        self.audio = MediaTokens.parse(config.audio_tokens) if config.audio_tokens else None

    def tokens(self, part: Image | Audio | Video) -> int:
        if isinstance(part, Audio):
            if self.audio is None:
                raise MediaError(f"{self.model} is not a multimodal model (no audio_tokens in its sim profile)")
            return self.audio.audio(part.seconds)
        if self.image is None:
            raise MediaError(f"{self.model} is not a multimodal model (no image_tokens in its sim profile)")
        rule = self.image
        frames = part.frames if isinstance(part, Video) else [part]
        return sum(rule.image(f.width, f.height) for f in frames)


def content_hash(part: Image | Audio | Video) -> str:
    h = hashlib.sha256()
    for data in [f.data for f in part.frames] if isinstance(part, Video) else [part.data]:
        h.update(data)
    return h.hexdigest()


def prompt_of(request: Request, conversational: bool, rules: MediaRules) -> Prompt:
    """The prompt a request's route makes of it: its messages under the template where the route is
    conversational, else its raw prompt (or its messages' parts joined by newlines)."""
    if request.prompt is not None:
        return Prompt(request.prompt, request.prompt.encode("utf-8"))
    out = Prompt("", b"")
    texts: list[str] = []
    chunks: list[bytes] = []
    for k, message in enumerate(request.messages):
        user = conversational and message.role == "user"
        if user:
            texts.append(USER_HEAD)
            chunks.append(USER_HEAD.encode())
        elif not conversational and k:
            texts.append("\n")
            chunks.append(b"\n")
        _parts(message, texts, chunks, out, rules)
        if user:
            texts.append(USER_TAIL)
            chunks.append(USER_TAIL.encode())
    out.text = "".join(texts)
    out.tokens = b"".join(chunks)
    return out


def _parts(message: Message, texts: list[str], chunks: list[bytes], out: Prompt, rules: MediaRules) -> None:
    for part in message.parts:
        if isinstance(part, (Text, ToolResult)):
            texts.append(part.text)
            chunks.append(part.text.encode("utf-8"))
        elif isinstance(part, (Image, Audio, Video)):
            n = rules.tokens(part)
            digest = content_hash(part)
            seed = bytes.fromhex(digest)
            chunks.append((seed * (n // len(seed) + 1))[:n])
            out.media.append(digest)
            out.media_tokens += n


class MediaCache:
    """vLLM's multimodal processor cache, counted in items: least recently used out past `capacity`."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.items: OrderedDict[str, None] = OrderedDict()
        self.queries = 0
        self.hits = 0

    def query(self, digest: str) -> bool:
        self.queries += 1
        if digest in self.items:
            self.items.move_to_end(digest)
            self.hits += 1
            return True
        if self.capacity:
            self.items[digest] = None
            if len(self.items) > self.capacity:
                self.items.popitem(last=False)
        return False
