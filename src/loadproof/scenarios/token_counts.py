"""Where an exact-length prompt counts the tokens the engine adds around its text (BOS, the chat template).

A haystack prompt of L tokens is L as the engine counts it: the text's own tokens (the model's tokenizer,
here) plus what the engine adds around it. The target's `token_counts` says where that overhead comes from:

- `engine`: the engine's own `/tokenize` (vLLM, SGLang and the simulator have one; so does
  `loadproof relay`, which forwards it), asked for a short probe text in the request's shape;
- `local`: the model's tokenizer and chat template rendered here, from the tokenizer's folder
  (`chat_template.jinja`, or `chat_template` in `tokenizer_config.json`, with jinja2 as transformers and
  vLLM render it); for completions, the special tokens the tokenizer adds. Nothing local is trusted
  unchecked: before the run, the first request sends the probe text for one token, and the engine's
  `usage.prompt_tokens` must equal the count planned here, else the run stops, naming both numbers.

The probe text begins as every haystack prompt does (`Archive ...`) and ends as its question does (a
period, no newline), so the boundaries between the template and the text tokenize the same way in both:
a probe ending in a newline once measured Gemma's chat template a token short (`\n` + the template's
`\nAssistant:` is one `\n\n` token), and every chat prompt came out one token long. Prompts that end
otherwise (a line, with its newline) pass a probe that ends as they do (`PROBE_LINE`).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from loadproof.errors import EnvironmentFailure, UsageError
from loadproof.protocol.openai import request_body
from loadproof.scenarios.base import Target

PROBE_TEXT = "Archive calibration line."  # for texts that end as the haystack question does: a period
PROBE_LINE = PROBE_TEXT + "\n"  # for texts that end with a newline
CHECK_TIMEOUT_S = 120.0  # the check request is one token; it may queue behind someone else's work


def load_tokenizer(target: Target):
    from tokenizers import Tokenizer

    if target.tokenizer_path is None:
        raise UsageError("long-context scenarios build exact-length prompts: give the model's tokenizer "
                         "with --tokenizer PATH (tokenizer.json or its folder)")
    file = tokenizer_file(target.tokenizer_path)
    return Tokenizer.from_file(str(file))


def tokenizer_file(path: Path) -> Path:
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise UsageError(f"no tokenizer.json at {path}")
    return file


def engine_overhead_tokens(target: Target, tokenizer, probe: str = PROBE_TEXT) -> tuple[int, str]:
    """Tokens the engine adds around a prompt text that begins and ends as `probe` does, and how that was
    measured (as the plan records it)."""
    if target.token_counts == "local":
        return local_overhead_tokens(target, tokenizer, probe)
    return tokenize_overhead_tokens(target, tokenizer, probe)


def tokenize_overhead_tokens(target: Target, tokenizer, probe: str = PROBE_TEXT) -> tuple[int, str]:
    """The overhead measured on the engine's own /tokenize."""
    from loadproof.engines import engines

    local = len(tokenizer.encode(probe, add_special_tokens=False).ids)
    body: dict[str, Any] = {"model": target.model}
    if target.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": probe}]
        body.update({k: v for k, v in target.extra_body.items() if k == "chat_template_kwargs"})
    else:
        body["prompt"] = probe
    url = target.url.rstrip("/") + engines.get(target.engine).tokenize_path
    try:
        answer = _post_json(url, body, target.api_key, timeout_s=30)
        count = int(answer["count"])
    except _Unanswered as exc:
        raise UsageError(f"{url} is not available ({exc}): the tokens the engine adds around a prompt cannot be "
                         "measured there; pass --token-counts local to count them with the model's tokenizer and "
                         "chat template here (checked against the engine's usage.prompt_tokens)") from None
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"{url} answered without a token count: pass --token-counts local") from None
    return count - local, "engine /tokenize"


def chat_prompt_counter(target: Target, tokenizer) -> tuple[Any, str]:
    """(count, how): count(messages) is the exact prompt length of a chat request of those messages, the
    template's text included: the engine's /tokenize with the messages (`engine`), or the chat template
    rendered here and tokenized (`local`). A text's tokens plus a fixed overhead is not exact on chat:
    where the template's text meets the prompt's, tokens can merge differently from prompt to prompt."""
    kwargs = target.extra_body.get("chat_template_kwargs") or {}
    if target.token_counts == "local":
        assert target.tokenizer_path is not None  # load_tokenizer came first
        template = ChatTemplate.load(target.tokenizer_path)

        def local(messages: list[dict[str, Any]]) -> int:
            return len(tokenizer.encode(template.render(messages, **kwargs), add_special_tokens=False).ids)

        return local, f"the chat template ({template.origin}) rendered locally, each prompt"
    from loadproof.engines import engines

    url = target.url.rstrip("/") + engines.get(target.engine).tokenize_path

    def remote(messages: list[dict[str, Any]]) -> int:
        body: dict[str, Any] = {"model": target.model, "messages": messages}
        if kwargs:
            body["chat_template_kwargs"] = kwargs
        try:
            return int(_post_json(url, body, target.api_key, timeout_s=30)["count"])
        except _Unanswered as exc:
            raise UsageError(f"{url} is not available ({exc}): chat prompts cannot be counted there; pass "
                             "--token-counts local") from None
        except (KeyError, TypeError, ValueError):
            raise UsageError(f"{url} answered without a token count: pass --token-counts local") from None

    return remote, "engine /tokenize, each prompt's messages"


def local_overhead_tokens(target: Target, tokenizer, probe: str = PROBE_TEXT) -> tuple[int, str]:
    """The overhead counted here (the chat template rendered, or the tokenizer's special tokens), then
    checked on the engine: one request of the probe text, whose usage.prompt_tokens must be the count
    planned here. UsageError with both numbers when it is not."""
    text_tokens = len(tokenizer.encode(probe, add_special_tokens=False).ids)
    if target.endpoint == "chat":
        assert target.tokenizer_path is not None  # load_tokenizer came first
        template = ChatTemplate.load(target.tokenizer_path)
        kwargs = target.extra_body.get("chat_template_kwargs") or {}
        rendered = template.render([{"role": "user", "content": probe}], **kwargs)
        planned = len(tokenizer.encode(rendered, add_special_tokens=False).ids)
        how = f"the chat template ({template.origin}) rendered locally"
    else:
        planned = len(tokenizer.encode(probe, add_special_tokens=True).ids)
        how = "the tokenizer's special tokens, counted locally"
    counted = engine_prompt_tokens(target, probe)
    if counted != planned:
        raise UsageError(
            f"--token-counts local: {how} makes the check prompt {planned} tokens, but the engine counted "
            f"{counted} (usage.prompt_tokens): its tokenizer or chat template is not the one at "
            f"{target.tokenizer_path}; nothing else was sent")
    return planned - text_tokens, f"local: {how}; checked on the engine (usage.prompt_tokens {counted} == {planned})"


def engine_prompt_tokens(target: Target, text: str) -> int:
    """usage.prompt_tokens of one non-streamed, one-token request of `text` in the target's shape."""
    extra = {k: v for k, v in target.extra_body.items() if k == "chat_template_kwargs"}
    body = json.loads(request_body(target.endpoint, target.model, text, max_tokens=1, temperature=0.0, stream=False,
                                   extra=extra))
    path = "/v1/chat/completions" if target.endpoint == "chat" else "/v1/completions"
    url = target.url.rstrip("/") + path
    try:
        answer = _post_json(url, body, target.api_key, timeout_s=CHECK_TIMEOUT_S)
        return int(answer["usage"]["prompt_tokens"])
    except _Unanswered as exc:
        raise EnvironmentFailure(f"the token-count check request to {url} failed ({exc})") from None
    except (KeyError, TypeError, ValueError):
        raise EnvironmentFailure(f"{url} answered the token-count check without usage.prompt_tokens") from None


class _Unanswered(Exception):
    """No JSON answer: a status, or a connection error (the reason, never a key)."""


def _post_json(url: str, body: dict[str, Any], api_key: str | None, timeout_s: float) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise _Unanswered(f"HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise _Unanswered(str(getattr(exc, "reason", exc))) from None


class ChatTemplate:
    """A model's chat template, rendered as transformers' `apply_chat_template` renders it (what vLLM
    runs): a sandboxed jinja2 environment with `trim_blocks` and `lstrip_blocks`, loop controls, the
    `tojson` filter, `raise_exception` and `strftime_now`, and the tokenizer's special tokens as variables."""

    def __init__(self, source: str, origin: str, special: dict[str, str]) -> None:
        from jinja2 import TemplateError
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[loopcontrols, _generation_tag()])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        try:
            self.template = env.from_string(source)
        except TemplateError as exc:
            raise UsageError(f"the chat template in {origin} does not parse: {exc}") from None
        self.origin = origin
        self.special = special

    @classmethod
    def load(cls, tokenizer_path: Path) -> ChatTemplate:
        """The template of the tokenizer's folder: `chat_template.jinja`, else `chat_template` in
        `tokenizer_config.json` (its `default` when it names several), else `chat_template.json`."""
        folder = tokenizer_path if tokenizer_path.is_dir() else tokenizer_path.parent
        config = _json_file(folder / "tokenizer_config.json")
        special = {**_special_tokens(_json_file(folder / "special_tokens_map.json")), **_special_tokens(config)}
        jinja_file = folder / "chat_template.jinja"
        if jinja_file.is_file():
            return cls(jinja_file.read_text(encoding="utf-8"), jinja_file.name, special)
        template = config.get("chat_template")
        if isinstance(template, list):  # named templates: [{"name": "default", "template": "..."}, ...]
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default")
        if isinstance(template, str):
            return cls(template, "tokenizer_config.json", special)
        template = _json_file(folder / "chat_template.json").get("chat_template")
        if isinstance(template, str):
            return cls(template, "chat_template.json", special)
        raise UsageError(f"--token-counts local with the chat endpoint needs the model's chat template: {folder} "
                         "has no chat_template.jinja, nor a chat_template in tokenizer_config.json")

    def render(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **kwargs: Any) -> str:
        from jinja2 import TemplateError

        try:
            return self.template.render({**self.special, **kwargs, "messages": messages,
                                         "add_generation_prompt": add_generation_prompt})
        except TemplateError as exc:
            raise UsageError(f"the chat template in {self.origin} failed to render: {exc}") from None


def _json_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UsageError(f"{path} is not readable JSON") from None
    return data if isinstance(data, dict) else {}


def _special_tokens(config: dict[str, Any]) -> dict[str, str]:
    """`bos_token`, `eos_token`, ... as strings (a config may hold them as {"content": ...})."""
    tokens = {}
    for key, value in config.items():
        if key.endswith("_token"):
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str):
                tokens[key] = value
    return tokens


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: str) -> None:
    from jinja2 import TemplateError

    raise TemplateError(message)


def _generation_tag() -> Any:
    """transformers' `{% generation %}...{% endgeneration %}` (it marks assistant text for training
    masks): rendered as its body."""
    from jinja2 import nodes
    from jinja2.ext import Extension

    class Generation(Extension):
        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body, lineno=lineno)

    return Generation
