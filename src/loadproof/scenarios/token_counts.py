"""Where an exact-length prompt counts the tokens the engine adds around its text (BOS, the chat template).

A haystack prompt of L tokens is L as the engine counts it: the text's own tokens plus what the engine adds
around it. The text's own tokens come from the model's tokenizer here (`--tokenizer`, which always wins), or,
where none is given, from the engine's own `/tokenize` (`EngineTokens`: the prompts are sized with the
engine's tokenizer; the manifest's target says which, `tokenizer_source`). A target with neither is one
error line asking for `--tokenizer`. The target's `token_counts` says where the overhead comes from:

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
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import TemplateError, nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from loadproof.errors import EnvironmentFailure, UsageError
from loadproof.protocol.routes import request_body
from loadproof.scenarios.target import Target, Unanswered, fetch_json
from loadproof.workloads.tokens import LocalTokens, Source, Tokens

PROBE_TEXT = "Archive calibration line."  # for texts that end as the haystack question does: a period
PROBE_LINE = PROBE_TEXT + "\n"  # for texts that end with a newline
CHECK_TIMEOUT_S = 120.0  # the check request is one token; it may queue behind someone else's work
TOKENIZE_WORKERS = 8  # /tokenize requests in flight while a builder counts its filler pool


def tokens_for(target: Target) -> Tokens:
    """Where `target`'s prompt texts are counted: its `--tokenizer` here, else the engine's /tokenize where it
    answered when the target was resolved; else UsageError, one line asking for `--tokenizer`."""
    require_token_source(target)
    if target.tokenizer_path is not None:
        return LocalTokens.load(target.tokenizer_path)
    return EngineTokens(target)


def require_token_source(target: Target) -> None:
    """UsageError, one line asking for `--tokenizer`, when `target` has no source of token counts for
    exact-length prompts (or `--token-counts local` has no tokenizer folder to read)."""
    if target.tokenizer_path is not None:
        return
    if target.token_counts == "local":
        raise UsageError(
            "--token-counts local counts with the model's tokenizer and chat template here: give "
            "--tokenizer PATH (the tokenizer's folder)"
        )
    if target.tokenizer_source == "engine":
        return
    why = f" ({target.tokenize_url} answered {target.served.tokenize_error})" if target.served.tokenize_error else ""
    raise UsageError(
        f"exact-length prompts need the model's tokenizer: the target does not count tokens for us"
        f"{why}; give --tokenizer PATH (tokenizer.json or its folder)"
    )


class EngineTokens:
    """The engine's own /tokenize as the tokenizer: a text's tokens, no special tokens unless asked (vLLM,
    SGLang, the simulator and `loadproof relay` take `add_special_tokens`). Counts are kept, since a
    builder asks the same short texts again; many texts go as concurrent requests."""

    source: Source = "engine"

    def __init__(self, target: Target) -> None:
        self.url = target.tokenize_url
        self.model = target.model
        self.api_key = target.api_key
        self.key = f"engine:{self.url}:{self.model}"
        self._known: dict[tuple[str, bool], int] = {}

    def count(self, text: str, special: bool = False) -> int:
        known = self._known.get((text, special))
        if known is not None:
            return known
        body = {"model": self.model, "prompt": text, "add_special_tokens": special}
        try:
            count = fetch_json(self.url, self.api_key, body, timeout_s=30)["count"]
        except Unanswered as exc:
            raise UsageError(
                f"{self.url} did not count a prompt's tokens ({exc}): give the model's tokenizer with --tokenizer PATH"
            ) from None
        except (KeyError, TypeError):
            count = None
        if not isinstance(count, int) or isinstance(count, bool):
            raise UsageError(
                f"{self.url} answered without a token count: give the model's tokenizer with --tokenizer PATH"
            )
        self._known[(text, special)] = count
        return count

    def count_many(self, texts: list[str]) -> list[int]:
        if len(texts) <= 1:
            return [self.count(t) for t in texts]
        with ThreadPoolExecutor(TOKENIZE_WORKERS) as pool:
            return list(pool.map(self.count, texts))


def engine_overhead_tokens(target: Target, tokens: Tokens, probe: str = PROBE_TEXT) -> tuple[int, str]:
    """Tokens the engine adds around a prompt text that begins and ends as `probe` does, and how that was
    measured (as the plan records it)."""
    if target.token_counts == "local":
        return local_overhead_tokens(target, tokens, probe)
    return tokenize_overhead_tokens(target, tokens, probe)


def tokenize_overhead_tokens(target: Target, tokens: Tokens, probe: str = PROBE_TEXT) -> tuple[int, str]:
    """The overhead measured on the engine's own /tokenize; on a route /tokenize does not render as the route
    does (the Responses API's input renders one token longer than the same chat message on vLLM 0.32), on one
    request of one output token on the route itself."""
    local = tokens.count(probe)
    if target.route.probed:
        return engine_prompt_tokens(target, probe) - local, f"the engine's usage on {target.route.path}"
    body: dict[str, Any] = {"model": target.model}
    if target.route.conversational:  # rendered through the chat template, as the engine renders a conversation
        body["messages"] = [{"role": "user", "content": probe}]
        body.update({k: v for k, v in target.extra_body.items() if k == "chat_template_kwargs"})
    else:
        body["prompt"] = probe
    count = _tokenize(
        target,
        body,
        "the tokens the engine adds around a prompt cannot be measured there; pass "
        "--token-counts local to count them with the model's tokenizer and chat template here "
        "(checked against the engine's usage.prompt_tokens)",
    )
    return count - local, "engine /tokenize"


def chat_prompt_counter(target: Target, tokens: Tokens) -> tuple[Any, str]:
    """(count, how): count(messages) is the exact prompt length of a chat request of those messages, the
    template's text included: the engine's /tokenize with the messages (`engine`), or the chat template
    rendered here and tokenized (`local`). A text's tokens plus a fixed overhead is not exact on chat:
    where the template's text meets the prompt's, tokens can merge differently from prompt to prompt."""
    kwargs = target.extra_body.get("chat_template_kwargs") or {}
    if target.token_counts == "local":
        template = ChatTemplate.load(_tokenizer_path(target))

        def local(messages: list[dict[str, Any]]) -> int:
            return tokens.count(template.render(messages, **kwargs))

        return local, f"the chat template ({template.origin}) rendered locally, each prompt"

    def remote(messages: list[dict[str, Any]]) -> int:
        body: dict[str, Any] = {"model": target.model, "messages": messages}
        if kwargs:
            body["chat_template_kwargs"] = kwargs
        return _tokenize(target, body, "chat prompts cannot be counted there; pass --token-counts local")

    return remote, "engine /tokenize, each prompt's messages"


def _tokenize(target: Target, body: dict[str, Any], otherwise: str) -> int:
    """The count the engine's /tokenize answers for `body`; UsageError saying what to do `otherwise`."""
    url = target.tokenize_url
    try:
        count = fetch_json(url, target.api_key, body, timeout_s=30)["count"]
    except Unanswered as exc:
        raise UsageError(f"{url} is not available ({exc}): {otherwise}") from None
    except (KeyError, TypeError):
        count = None
    if not isinstance(count, int) or isinstance(count, bool):
        raise UsageError(f"{url} answered without a token count: pass --token-counts local")
    return count


def _tokenizer_path(target: Target) -> Path:
    if target.tokenizer_path is None:  # tokens_for refuses --token-counts local without one, first
        raise UsageError("--token-counts local needs --tokenizer PATH (the tokenizer's folder)")
    return target.tokenizer_path


def local_overhead_tokens(target: Target, tokens: Tokens, probe: str = PROBE_TEXT) -> tuple[int, str]:
    """The overhead counted here (the chat template rendered, or the tokenizer's special tokens), then
    checked on the engine: one request of the probe text, whose usage.prompt_tokens must be the count
    planned here. UsageError with both numbers when it is not."""
    text_tokens = tokens.count(probe)
    if target.route.conversational:
        template = ChatTemplate.load(_tokenizer_path(target))
        kwargs = target.extra_body.get("chat_template_kwargs") or {}
        rendered = template.render([{"role": "user", "content": probe}], **kwargs)
        planned = tokens.count(rendered)
        how = f"the chat template ({template.origin}) rendered locally"
    else:
        planned = tokens.count(probe, special=True)
        how = "the tokenizer's special tokens, counted locally"
    counted = engine_prompt_tokens(target, probe)
    if counted != planned:
        raise UsageError(
            f"--token-counts local: {how} makes the check prompt {planned} tokens, but the engine counted "
            f"{counted} (usage.prompt_tokens): its tokenizer or chat template is not the one at "
            f"{target.tokenizer_path}; nothing else was sent"
        )
    return planned - text_tokens, f"local: {how}; checked on the engine (usage.prompt_tokens {counted} == {planned})"


def engine_prompt_tokens(target: Target, text: str) -> int:
    """usage.prompt_tokens of one non-streamed, one-token request of `text` in the target's shape."""
    extra = {k: v for k, v in target.extra_body.items() if k == "chat_template_kwargs"}
    body = json.loads(
        request_body(target.endpoint, target.model, text, max_tokens=1, temperature=0.0, stream=False, extra=extra)
    )
    url = target.request_url
    try:
        answer = fetch_json(url, target.api_key, body, timeout_s=CHECK_TIMEOUT_S)
        return target.route.prompt_tokens_of(answer)
    except Unanswered as exc:
        if exc.status == 200:
            raise EnvironmentFailure(f"{url} answered the token-count check without usage.prompt_tokens") from None
        raise EnvironmentFailure(f"the token-count check request to {url} failed ({exc})") from None
    except (KeyError, TypeError, ValueError):
        raise EnvironmentFailure(f"{url} answered the token-count check without usage.prompt_tokens") from None


class ChatTemplate:
    """A model's chat template, rendered as transformers' `apply_chat_template` renders it (what vLLM
    runs): a sandboxed jinja2 environment with `trim_blocks` and `lstrip_blocks`, loop controls, the
    `tojson` filter, `raise_exception` and `strftime_now`, and the tokenizer's special tokens as variables."""

    def __init__(self, source: str, origin: str, special: dict[str, str]) -> None:
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, _Generation]
        )
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
        raise UsageError(
            f"--token-counts local with the chat endpoint needs the model's chat template: {folder} "
            "has no chat_template.jinja, nor a chat_template in tokenizer_config.json"
        )

    def render(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **kwargs: Any) -> str:
        try:
            return self.template.render(
                {**self.special, **kwargs, "messages": messages, "add_generation_prompt": add_generation_prompt}
            )
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


def _tojson(
    value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None, sort_keys: bool = False
) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


class _Generation(Extension):
    """transformers' `{% generation %}...{% endgeneration %}` (it marks assistant text for training
    masks): rendered as its body."""

    tags = {"generation"}

    def parse(self, parser: Any) -> Any:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)
