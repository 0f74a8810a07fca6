"""An agent's conversation as `loadproof run sessions` sends it (scenarios.sessions): the generated tool
definitions a coding agent shares with every turn (a few tools, each a function of one enumerated argument,
so a forced call is short and always valid), the text the system message carries them in, and one user's
history, which each turn extends with the model's answer and, after a tool call, the tool's result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from loadproof.records import RequestRecord

# generated tool definitions: a coding agent's tools, each taking one argument from a short list (a forced
# call is then a few tokens, and always valid)
TOOL_NAMES = (
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "search_code",
    "run_shell",
    "run_tests",
    "git_diff",
    "fetch_url",
    "ask_user",
)
TOOL_ARGUMENT = {
    "type": "object",
    "properties": {"target": {"type": "string", "enum": ["a", "b", "c"]}},
    "required": ["target"],
    "additionalProperties": False,
}


def tool_names(n: int) -> list[str]:
    """The generated tools' names: a coding agent's, numbered past the list's end."""
    return [
        TOOL_NAMES[k % len(TOOL_NAMES)] + (f"_{k // len(TOOL_NAMES)}" if k >= len(TOOL_NAMES) else "") for k in range(n)
    ]


def tool_definitions(names: list[str], descriptions: list[str]) -> list[dict[str, Any]]:
    """OpenAI tool definitions: each a function of one enumerated argument, described by its text, `strict` (a
    forced call's arguments constrained to the schema too, not only its name: vLLM's structural tags leave a
    non-strict tool's arguments free)."""
    return [
        {
            "type": "function",
            "function": {"name": name, "description": text, "parameters": TOOL_ARGUMENT, "strict": True},
        }
        for name, text in zip(names, descriptions)
    ]


def tools_text(tools: list[dict[str, Any]]) -> str:
    """The definitions as the system message carries them: one JSON object a line in a <tools> block."""
    lines = "".join(
        json.dumps({k: v for k, v in t["function"].items() if k != "strict"}, ensure_ascii=False) + "\n" for t in tools
    )
    return f"# Tools\nCall one of these functions:\n<tools>\n{lines}</tools>\n"


def _json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@dataclass
class Conversation:
    """One user's history as the next turn sends it: chat messages, and the same as one text (completions)."""

    messages: list[dict[str, Any]]
    text: str

    @classmethod
    def opened(cls, system: str, first: str) -> Conversation:
        return cls(
            ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": first}],
            system + first,
        )

    def say(self, content: str) -> None:
        """The user's next message."""
        self.messages.append({"role": "user", "content": content})
        self.text += content

    def answered(self, record: RequestRecord, result: str | None, call_id: str) -> None:
        """The turn's answer, and for an agent turn (`result` given) the tool's result: the assistant's first
        call then a `tool` message answering it by id; where no call came back (the completions endpoint, an
        engine that answered in text) the answer text stands in for the call and the result follows as the
        user's message, as it does for a call whose arguments are no JSON (cut short by max_tokens: the engine
        would refuse it in the history). The text form: the answer, a newline, the result."""
        reply = record.output_text
        self.text += reply + "\n" + (result or "")
        if result is not None and record.tool_calls and _json(record.tool_calls[0].arguments):
            call = record.tool_calls[0]
            call_id = call.id or call_id
            self.messages.append(
                {
                    "role": "assistant",
                    "content": reply,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        }
                    ],
                }
            )
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
            return
        self.messages.append({"role": "assistant", "content": reply})
        if result is not None:
            self.messages.append({"role": "user", "content": result})
