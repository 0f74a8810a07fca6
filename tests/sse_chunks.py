"""Builders of OpenAI-style streamed chunks, as vLLM sends them, for scripted servers in tests."""

import json

from loadproof.protocol.sse import encode_data


def completion_chunk(text: str, completion_tokens: int | None, prompt_tokens: int = 7, finish=None) -> bytes:
    chunk = {"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    if completion_tokens is not None:
        chunk["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return encode_data(json.dumps(chunk).encode())


def chat_chunk(content=None, reasoning=None, completion_tokens=None, tool_calls=None) -> bytes:
    delta = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    if tool_calls is not None:  # [{"index": 0, "id": ..., "function": {"name": ..., "arguments": ...}}]
        delta["tool_calls"] = tool_calls
    chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    if completion_tokens is not None:
        chunk["usage"] = {"prompt_tokens": 5, "completion_tokens": completion_tokens}
    return encode_data(json.dumps(chunk).encode())


def usage_only(completion_tokens: int, prompt_tokens: int = 7, cached_tokens: int | None = None) -> bytes:
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    if cached_tokens is not None:  # vLLM with --enable-prompt-tokens-details
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return encode_data(json.dumps({"choices": [], "usage": usage}).encode())
