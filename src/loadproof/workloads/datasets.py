"""Users' own data sets as load prompts: one registry of readers, filters, seeded sampling, a token cache.

Formats (`--dataset-format`, `auto` by the file's extension):

| format | file | a row's prompt | a row's output length |
|---|---|---|---|
| `sharegpt` | one JSON array of `{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}` | the first human turn | the token count of the reply after it |
| `jsonl` | one JSON object a line | `prompt` (a string) or `messages` (OpenAI chat messages) | `output_tokens` (optional) |
| `parquet` | a Parquet file (pyarrow) | as `jsonl`, by column | as `jsonl` |
| `arrow` | an Arrow IPC file or stream (a Hugging Face `datasets` cache file) | as `jsonl` | as `jsonl` |

A folder is read as every file of the format inside it, in name order (a local copy of a hub data set).
`--dataset-columns prompt=question,output_tokens=n` maps the fields a reader looks for to the file's own
names (`conversations` too, for ShareGPT). Every reader streams (`workloads.dataset_readers`), so a file
of 100,000 rows is never held whole; only the rows sampled are kept.

Selection, in this order: rows that do not parse (not JSON, not an object, not valid UTF-8, nested too
deep to read, a field of the wrong type) are an error naming the file, the row and, for the text
formats, the line (or, with `skip_bad_rows`, counted and skipped); rows with no usable prompt are counted (`no_prompt`); the length
filters (`min_input_tokens`, `max_input_tokens`, on the prompt's tokens as the engine counts them) drop
rows and count them; of the rest, `first` keeps the first N in file order, `random` a uniform sample of
N drawn with `random.Random("<seed>:dataset")` (reservoir sampling, so memory is N rows) and shuffled
with the same stream; with fewer usable rows than N, `repeat` cycles them, else it is an error.
`check_readable` reads a data set up to its first usable row: what the options check, before any run
directory is made, so an empty or garbage file is one line and leaves nothing behind.

Token counts come from the model's tokenizer, cached by the text's BLAKE2b digest (a prompt repeated in
the file, or sampled again by a sweep's next run, is tokenized once per process).

Standard library only at import; pyarrow is imported when a Parquet or Arrow file is read.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Generator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from loadproof.config.base import split_pairs
from loadproof.protocol.media import MediaError
from loadproof.workloads.dataset_media import (
    MMMU_IMAGES,
    Media,
    conversation_text,
    kind_of,
    messages_media,
    mmmu_prompt,
    row_images,
)
from loadproof.workloads.dataset_readers import BATCH, FIELDS, READERS, BadRow, DatasetError
from loadproof.workloads.rows import TOO_DEEP

DatasetFormat = Literal["auto", "sharegpt", "jsonl", "parquet", "arrow"]
DatasetSample = Literal["random", "first"]
FORMATS: tuple[DatasetFormat, ...] = get_args(DatasetFormat)
SAMPLES: tuple[DatasetSample, ...] = get_args(DatasetSample)
_EXTENSIONS = {
    ".json": "sharegpt",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".arrow": "arrow",
    ".feather": "arrow",
    ".ipc": "arrow",
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(slots=True)
class Item:
    """One usable row: its prompt (text, or chat messages) and the output length it asks, if any."""

    row: int  # 0-based row number in the data set (across a folder's files, in order)
    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    output_tokens: int | None = None
    reply: str | None = None  # ShareGPT: the reply whose token count is the output length
    turns: list[str] | None = None  # ShareGPT: every human turn, in order (multi-turn sessions)
    input_tokens: int | None = None  # the prompt's tokens as the engine counts them (set when counted)
    media: dict[int, list[Media]] | None = None  # the media of each message (by index; a prompt's: 0), in order

    def media_kinds(self) -> set[str]:
        return {kind_of(p) for parts in (self.media or {}).values() for p in parts}

    def text(self) -> str:
        """The prompt as one text: the prompt, or the messages as `role: content` lines."""
        if self.prompt is not None:
            return self.prompt
        return "".join(f"{m.get('role', 'user')}: {content_text(m.get('content'))}\n" for m in self.messages or ())


def content_text(content: Any) -> str:
    """A message's content as text (content parts: their text ones joined)."""
    if isinstance(content, list):  # content parts: the text ones
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def parse_columns(value: object) -> dict[str, str]:
    """`prompt=question,output_tokens=n` -> {"prompt": "question", ...} (a dict passes through, checked)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        pairs = [(str(k), str(v)) for k, v in value.items()]
    elif str(value).strip() in ("", "{}", "none"):
        return {}
    else:
        pairs = split_pairs(str(value), "each mapping is FIELD=COLUMN, e.g. prompt=question", need_value=True)
    out: dict[str, str] = {}
    for key, name in pairs:
        if key not in FIELDS:
            raise ValueError(f"unknown field {key!r}: maps {', '.join(FIELDS)}")
        if key in out:
            raise ValueError(f"field {key} is mapped twice")
        out[key] = name
    return out


@dataclass
class TokenCache:
    """Token counts of texts, by the text's digest; `count_many` tokenizes only what it has not seen."""

    count_many_fn: Callable[[list[str]], list[int]]
    counts: dict[bytes, int] = field(default_factory=dict)
    tokenized: int = 0  # texts actually tokenized (the rest came from the cache)

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def count_many(self, texts: list[str]) -> list[int]:
        keys = [self.key(t) for t in texts]
        todo: dict[bytes, str] = {}
        for k, t in zip(keys, texts):
            if k not in self.counts and k not in todo:
                todo[k] = t
        if todo:
            got = self.count_many_fn(list(todo.values()))
            self.counts.update(zip(todo.keys(), got))
            self.tokenized += len(todo)
        return [self.counts[k] for k in keys]


_CACHES: dict[str, TokenCache] = {}


def token_cache(key: str, count_many: Callable[[list[str]], list[int]]) -> TokenCache:
    """The process's cache for one tokenizer (`key`: its file, size and mtime), kept across runs."""
    cache = _CACHES.get(key)
    if cache is None:
        if len(_CACHES) > 4:
            _CACHES.clear()
        cache = _CACHES[key] = TokenCache(count_many)
    return cache


@dataclass(frozen=True)
class DatasetSpec:
    path: str
    format: str = "auto"
    columns: dict[str, str] = field(default_factory=dict)
    min_input_tokens: int | None = None
    max_input_tokens: int | None = None
    sample: str = "random"
    seed: int = 731
    repeat: bool = False
    skip_bad_rows: bool = False


@dataclass
class Selection:
    """The items chosen for N requests, in send order, and what the reading counted."""

    items: list[Item]
    format: str
    files: list[str]
    sha256: str
    rows: int = 0  # rows read
    bad_rows: int = 0  # rows that did not parse (skipped with skip_bad_rows)
    no_prompt: int = 0  # rows with no usable prompt
    too_short: int = 0
    too_long: int = 0
    usable: int = 0
    repeated: int = 0  # requests that reuse an item already sent (repeat)
    first_bad: str = ""  # the first skipped row's problem


def resolve(path_text: str, fmt: str) -> tuple[list[Path], str]:
    """The files to read and their format; a missing path that looks like a hub id says so in one line."""
    path = Path(path_text).expanduser()
    if not path.exists():
        if _HUB_ID.match(path_text) and not path_text.endswith(tuple(_EXTENSIONS)):
            raise DatasetError(
                f"--dataset {path_text}: no such local file; it looks like a Hugging Face hub id, and "
                "loadproof downloads nothing at run time: download it first (e.g. `huggingface-cli "
                f"download {path_text} --repo-type dataset --local-dir DIR`) and pass the file or DIR"
            )
        raise DatasetError(f"--dataset {path_text}: no such file or folder")
    if fmt not in FORMATS:
        raise DatasetError(f"--dataset-format {fmt}: takes {', '.join(FORMATS)}")
    if path.is_dir():
        wanted = [fmt] if fmt != "auto" else ["parquet", "arrow", "jsonl", "sharegpt"]
        for kind in wanted:
            files = sorted(p for p in path.rglob("*") if p.is_file() and _EXTENSIONS.get(p.suffix.lower()) == kind)
            if files:
                return files, kind
        raise DatasetError(f"--dataset {path_text}: a folder with no data file ({', '.join(sorted(_EXTENSIONS))})")
    if fmt == "auto":
        fmt = _EXTENSIONS.get(path.suffix.lower(), "")
        if not fmt:
            raise DatasetError(
                f"--dataset {path_text}: cannot tell the format from the extension {path.suffix!r}: "
                "give --dataset-format sharegpt|jsonl|parquet|arrow"
            )
    return [path], fmt


def file_digest(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()


# --- rows -> items ----------------------------------------------------------------------------------------


def to_item(
    row: int, value: dict[str, Any], fmt: str, columns: dict[str, str], base: Path | None = None
) -> Item | str | None:
    """An item, a problem (str: the row is malformed, or a media file in it: the field named) or None (a
    well-formed row with no prompt). `base`: the data set's folder, where a row's media files are named from."""

    def col(name: str) -> str:
        return columns.get(name, name)

    try:
        got = _to_item(row, value, fmt, col, base)
    except MediaError as exc:
        return str(exc)
    if isinstance(got, Item) and fmt != "sharegpt":
        images = row_images(value, col, base)  # `images`, MMMU's image_N: before the first message's text
        if images:
            got.media = got.media or {}
            got.media[0] = images + got.media.get(0, [])
    return got


def _to_item(row: int, value: dict[str, Any], fmt: str, col: Any, base: Path | None) -> Item | str | None:
    if fmt == "sharegpt":
        turns = value.get(col("conversations"))
        if turns is None:
            return f"no {col('conversations')!r} field"
        if not isinstance(turns, list):
            return f"{col('conversations')!r} is not a list"
        for i, turn in enumerate(turns):
            if not isinstance(turn, dict):
                return f"turn {i} is not an object"
            if turn.get("from") in ("human", "user") and isinstance(turn.get("value"), str) and turn["value"].strip():
                reply = turns[i + 1] if i + 1 < len(turns) and isinstance(turns[i + 1], dict) else {}
                text = reply.get("value") if reply.get("from") in ("gpt", "assistant", "chatgpt", "bard") else None
                humans = [
                    t["value"]
                    for t in turns[i:]
                    if isinstance(t, dict)
                    and t.get("from") in ("human", "user")
                    and isinstance(t.get("value"), str)
                    and t["value"].strip()
                ]
                return Item(
                    row, prompt=turn["value"], reply=text if isinstance(text, str) and text else None, turns=humans
                )
        return None
    prompt, messages = value.get(col("prompt")), value.get(col("messages"))
    output = value.get(col("output_tokens"))
    if output is not None:
        if isinstance(output, bool) or not isinstance(output, (int, float)) or output != int(output) or output < 1:
            return f"{col('output_tokens')} must be a whole number >= 1 (got {output!r})"
        output = int(output)
    if isinstance(prompt, str):
        return Item(row, prompt=prompt, output_tokens=output) if prompt.strip() else None
    if prompt is not None:
        return f"{col('prompt')} is not a string ({type(prompt).__name__})"
    if messages is None and value.get(col("conversation")) is not None:  # VisionArena
        text = conversation_text(value.get(col("conversation")))
        return Item(row, prompt=text, output_tokens=output) if text and text.strip() else None
    question = value.get(col("question"))
    mmmu = any(value.get(col(name)) is not None for name in MMMU_IMAGES)
    if messages is None and mmmu and isinstance(question, str) and question.strip():  # MMMU: with its images
        return Item(row, prompt=mmmu_prompt(question, value.get(col("options"))), output_tokens=output)
    if messages is not None:
        if isinstance(messages, str):
            try:
                messages = json.loads(messages)
            except json.JSONDecodeError:
                return f"{col('messages')} is a string that is not JSON"
        if not isinstance(messages, list) or not all(isinstance(m, dict) and "content" in m for m in messages):
            return f"{col('messages')} is not a list of messages with role and content"
        media = messages_media(messages, col("messages"), base)
        if not messages or not (media or any(content_text(m.get("content")).strip() for m in messages)):
            return None
        clean = [{"role": str(m.get("role", "user")), "content": content_text(m.get("content"))} for m in messages]
        return Item(row, messages=clean, output_tokens=output, media=media or None)
    return None


def check_readable(path_text: str, fmt: str, columns: dict[str, str], skip_bad_rows: bool = False) -> None:
    """That a run can draw a prompt from the data set, checked with the options, before any run directory
    exists: its rows are read up to the first usable one. DatasetError, one line naming the file and what is
    wrong: an empty file, a file that is not of its format (a binary file, not JSON, not Parquet), a row
    that does not parse (unless `skip_bad_rows`), or no row with a prompt at all."""
    files, kind = resolve(path_text, fmt)
    sel = Selection([], kind, [f.name for f in files], "")
    with closing(_items(DatasetSpec(path_text, kind, columns, skip_bad_rows=skip_bad_rows), files, sel)) as usable:
        if next(usable, None) is None:
            raise DatasetError(_no_usable(path_text, sel))


def media_kinds(spec: DatasetSpec) -> dict[str, tuple[str, int]]:
    """Every row read with its media decoded and checked (a bad file is the DatasetError naming its file, row and
    field, as `select` would raise mid-run): each media kind the rows carry, with the file and row it is first in."""
    files, kind = resolve(spec.path, spec.format)
    sel = Selection([], kind, [f.name for f in files], "")
    found: dict[str, tuple[str, int]] = {}
    with closing(_items(spec, files, sel)) as usable:
        for item in usable:
            for k in item.media_kinds():
                found.setdefault(k, (str(files[0] if len(files) == 1 else spec.path), item.row))
    return found


def _items(spec: DatasetSpec, files: list[Path], sel: Selection) -> Generator[Item, None, None]:
    """The usable items of the files in order, counting in `sel` the rows read, those without a prompt and,
    with `skip_bad_rows`, those that do not parse (else the first of them is a DatasetError)."""
    read = READERS[sel.format]
    base = 0
    for f in files:
        last = -1
        for row, line, value in read(f, spec.columns):
            last = row
            sel.rows += 1
            problem: str | None = value if isinstance(value, BadRow) else None
            if problem is None:
                try:
                    got = to_item(base + row, value, sel.format, spec.columns, f.parent)
                except RecursionError:  # a field nested just short of what json reads, too deep to walk here
                    got = TOO_DEEP
                if isinstance(got, str):
                    problem = got
                elif got is None:
                    sel.no_prompt += 1
                else:
                    yield got
            if problem is not None:
                where = f"{f}: row {row}" + (f" (line {line})" if line is not None else "")
                if not spec.skip_bad_rows:
                    raise DatasetError(f"{where}: {problem} (--skip-bad-rows skips such rows, counting them)")
                sel.bad_rows += 1
                sel.first_bad = sel.first_bad or f"{where}: {problem}"
        base += last + 1


def select(spec: DatasetSpec, n: int, count: Callable[[list[Item]], list[int]]) -> Selection:
    """`n` items of the data set, filtered and sampled as `spec` says; `count(items)` gives each item's
    input tokens as the engine counts them (called in batches, only when a length filter needs them or
    for the items chosen)."""
    files, fmt = resolve(spec.path, spec.format)
    sel = Selection([], fmt, [f.name for f in files], file_digest(files))
    rng = random.Random(f"{spec.seed}:dataset")
    reservoir: list[Item] = []
    seen = 0  # usable items offered to the sample
    filtering = spec.min_input_tokens is not None or spec.max_input_tokens is not None

    def offer(items: list[Item]) -> bool:
        """Take usable items; False once `first` has all it needs."""
        nonlocal seen
        if filtering:
            counted = count(items)  # one count per item
            for item, tokens in zip(items, counted):
                item.input_tokens = tokens
            kept = []
            for item, tokens in zip(items, counted):
                if spec.min_input_tokens is not None and tokens < spec.min_input_tokens:
                    sel.too_short += 1
                elif spec.max_input_tokens is not None and tokens > spec.max_input_tokens:
                    sel.too_long += 1
                else:
                    kept.append(item)
            items = kept
        for item in items:
            sel.usable += 1
            if spec.sample == "first":
                if len(reservoir) < n:
                    reservoir.append(item)
                continue
            seen += 1
            if len(reservoir) < n:
                reservoir.append(item)
            else:
                j = rng.randrange(seen)
                if j < n:
                    reservoir[j] = item
        return not (spec.sample == "first" and len(reservoir) >= n)

    pending: list[Item] = []
    with closing(_items(spec, files, sel)) as usable:
        for item in usable:
            pending.append(item)
            if len(pending) >= BATCH:
                going, pending = offer(pending), []
                if not going:
                    break
        else:
            if pending:
                offer(pending)
    if not reservoir:
        raise DatasetError(_no_usable(spec.path, sel))
    if spec.sample == "random":
        rng.shuffle(reservoir)
    items = reservoir
    if len(items) < n:
        if not spec.repeat:
            raise DatasetError(
                f"--dataset {spec.path}: {len(items)} usable prompts for {n} requests ({_why(sel)}): "
                "send fewer requests, loosen the filters, or pass --dataset-repeat"
            )
        sel.repeated = n - len(items)
        items = [items[i % len(items)] for i in range(n)]
    unique = {id(i): i for i in items}  # each item once, in order
    uncounted = [i for i in unique.values() if i.input_tokens is None]
    for start in range(0, len(uncounted), BATCH):
        chunk = uncounted[start : start + BATCH]
        for item, tokens in zip(chunk, count(chunk)):
            item.input_tokens = tokens
    sel.items = items
    return sel


def _no_usable(path_text: str, sel: Selection) -> str:
    if not sel.rows:
        return f"--dataset {path_text}: empty: no rows" + (
            f" in its {len(sel.files)} files" if len(sel.files) > 1 else ""
        )
    return f"--dataset {path_text}: no usable prompt among {sel.rows} rows ({_why(sel)})"


def _why(sel: Selection) -> str:
    parts = [f"{sel.no_prompt} without a prompt"]
    if sel.bad_rows:
        parts.append(f"{sel.bad_rows} malformed, skipped")
    if sel.too_short:
        parts.append(f"{sel.too_short} under --dataset-min-input-tokens")
    if sel.too_long:
        parts.append(f"{sel.too_long} over --dataset-max-input-tokens")
    return ", ".join(parts)
