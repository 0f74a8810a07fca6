"""The readers of users' data sets, one a format, registered by name: each streams a file's rows as
`(row, line, value)`, the value a dict, or a `BadRow` saying why the row did not parse (`line`: the row's
1-based line in the file, for the text formats). `workloads.datasets` selects from what they yield.

Every reader streams: a ShareGPT array is decoded one object at a time, a JSONL file one line at a time,
Parquet and Arrow one record batch at a time. A row that is not valid UTF-8 or is nested too deep for
`json` is a `BadRow` like any other (`workloads.rows`). pyarrow is imported only when a Parquet or Arrow
file is read: loadproof runs without it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from loadproof.errors import UsageError
from loadproof.workloads.dataset_media import MEDIA_FIELDS, MMMU_IMAGES
from loadproof.workloads.rows import TOO_DEEP, open_text, parse_json, utf8_problem

# what a reader looks for (--dataset-columns): and a row's media, VisionArena's and MMMU's (workloads.dataset_media)
FIELDS = ("prompt", "messages", "output_tokens", "conversations", *MEDIA_FIELDS)
BATCH = 1024  # rows of a Parquet or Arrow batch (and rows tokenized together)
CHUNK = 1 << 20  # characters a streaming reader reads at a time
MAX_OBJECT = 64 << 20  # a ShareGPT object longer than this is taken as malformed


class DatasetError(UsageError):
    """A data set that cannot be read as asked: one line naming the file, the row and the problem."""


class BadRow(str):
    """A row that did not parse: the problem, as text."""


Row = tuple[int, int | None, Any]  # (0-based row, 1-based line or None, a dict or a BadRow)
RowReader = Callable[[Path, dict[str, str]], Iterator[Row]]
READERS: dict[str, RowReader] = {}


def reader(name: str) -> Callable[[RowReader], RowReader]:
    def register(fn: RowReader) -> RowReader:
        READERS[name] = fn
        return fn

    return register


def _object_or_bad(value: Any) -> Any:
    return value if isinstance(value, dict) else BadRow(f"not a JSON object ({type(value).__name__})")


@reader("jsonl")
def read_jsonl(path: Path, columns: dict[str, str]) -> Iterator[Row]:
    with open_text(path) as fh:
        row = -1
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            row += 1
            value, problem = parse_json(line)
            yield row, line_no, BadRow(problem) if problem is not None else _object_or_bad(value)


@reader("sharegpt")
def read_sharegpt(path: Path, columns: dict[str, str]) -> Iterator[Row]:
    """A JSON array of objects, decoded one object at a time (objects one after another are taken too)."""
    decoder = json.JSONDecoder()
    with open_text(path) as fh:
        buf, pos, eof = "", 0, False
        row, opened = 0, False
        line, counted = 1, 0  # the line of buf[counted]

        def more() -> None:
            nonlocal buf, pos, eof, counted
            chunk = fh.read(CHUNK)
            line_at(pos)  # count the lines of what is dropped
            buf, pos, eof, counted = buf[pos:] + chunk, 0, not chunk, 0

        def line_at(index: int) -> int:
            nonlocal line, counted
            line += buf.count("\n", counted, index)
            counted = index
            return line

        while True:
            while True:
                while pos < len(buf) and buf[pos] in " \t\r\n,":
                    pos += 1
                if pos < len(buf) or eof:
                    break
                more()
            if pos >= len(buf):
                if opened:
                    raise DatasetError(f"{path}: row {row}: the JSON array is not closed (a cut file?)")
                if row == 0:
                    raise DatasetError(f"{path}: empty: no ShareGPT rows")
                return
            if row == 0 and not opened and buf[pos] == "[":
                opened = True
                pos += 1
                continue
            if buf[pos] == "]":
                return
            try:
                value, end = decoder.raw_decode(buf, pos)
                problem = utf8_problem(buf[pos:end])
            except json.JSONDecodeError as exc:
                if not eof and len(buf) - pos < MAX_OBJECT:
                    more()
                    continue
                raise DatasetError(
                    f"{path}: row {row} (line {line_at(pos)}): not JSON ({exc.msg}); the rest of the "
                    "file cannot be read"
                ) from None
            except RecursionError:  # its end is still found, so the rows after it are read
                found = _value_end(buf, pos)
                if found is None:
                    if not eof and len(buf) - pos < MAX_OBJECT:
                        more()
                        continue
                    raise DatasetError(
                        f"{path}: row {row} (line {line_at(pos)}): {TOO_DEEP}; the rest of the file cannot be read"
                    ) from None
                value, end, problem = None, found, TOO_DEEP
            yield row, line_at(pos), BadRow(problem) if problem is not None else _object_or_bad(value)
            pos = end
            row += 1


_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


def _value_end(buf: str, pos: int) -> int | None:
    """Where the JSON array or object starting at `buf[pos]` ends (brackets counted outside strings); None
    when `buf` ends first. For a value too deeply nested for `json` to read."""
    depth = 0
    for match in _STRUCTURE.finditer(buf, pos):
        token = match.group()
        if token in "[{":
            depth += 1
        elif token in "]}":
            depth -= 1
            if depth == 0:
                return match.end()
    return None


def _pyarrow(fmt: str) -> Any:
    try:
        import pyarrow  # optional: the loadproof[parquet] extra
    except ImportError:
        raise DatasetError(f"reading {fmt} needs pyarrow: pip install 'loadproof[parquet]'") from None
    return pyarrow


@reader("parquet")
def read_parquet(path: Path, columns: dict[str, str]) -> Iterator[Row]:
    _pyarrow("Parquet")
    import pyarrow.parquet as pq  # optional: the loadproof[parquet] extra, found by _pyarrow

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises its own types
        raise DatasetError(f"{path}: not a Parquet file ({exc})") from None
    wanted = _present_columns(path, columns, pf.schema_arrow.names)
    row = 0
    for batch in pf.iter_batches(batch_size=BATCH, columns=wanted):
        for value in _batch_rows(batch):
            yield row, None, value
            row += 1


@reader("arrow")
def read_arrow(path: Path, columns: dict[str, str]) -> Iterator[Row]:
    pa = _pyarrow("Arrow")
    import pyarrow.ipc as ipc  # optional: the loadproof[parquet] extra, found by _pyarrow

    try:
        batches: Any = ipc.open_file(pa.memory_map(str(path), "r"))
        batch_list = (batches.get_batch(i) for i in range(batches.num_record_batches))
        schema = batches.schema
    except (pa.ArrowInvalid, OSError):  # pyarrow says OSError of some bytes that are no Arrow at all
        try:
            batches = ipc.open_stream(pa.memory_map(str(path), "r"))
            batch_list = iter(batches)
            schema = batches.schema
        except (pa.ArrowInvalid, OSError) as exc:
            raise DatasetError(f"{path}: not an Arrow IPC file or stream ({exc})") from None
    wanted = _present_columns(path, columns, schema.names)
    row = 0
    for batch in batch_list:
        for value in _batch_rows(batch.select(wanted)):
            yield row, None, value
            row += 1


def _batch_rows(batch: Any) -> list[Any]:
    """A record batch's rows as dicts; a row whose strings are not valid UTF-8 (Arrow does not check what
    a writer put in a string column) is a BadRow, found row by row once the batch fails to convert."""
    try:
        converted: list[Any] = batch.to_pylist()
        return converted
    except UnicodeDecodeError:
        pass
    rows: list[Any] = []
    for k in range(batch.num_rows):
        try:
            rows.extend(batch.slice(k, 1).to_pylist())
        except UnicodeDecodeError as exc:
            rows.append(BadRow(f"not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} in a string column)"))
    return rows


def wanted_columns(columns: dict[str, str]) -> list[str]:
    return [columns.get(f, f) for f in FIELDS]


def _present_columns(path: Path, columns: dict[str, str], names: list[str]) -> list[str]:
    """The columns of a table to read: those of `FIELDS` (as mapped) it has; DatasetError if none."""
    present = set(names)
    wanted = [c for c in wanted_columns(columns) if c in present]
    text = {columns.get(f, f) for f in (*FIELDS[:4], "conversation")}  # a prompt's; or MMMU's question and images
    mmmu = columns.get("question", "question") in present and any(columns.get(f, f) in present for f in MMMU_IMAGES)
    if not (text & present or mmmu):
        raise DatasetError(
            f"{path}: none of the columns {', '.join(wanted_columns(columns))} (its columns: "
            f"{', '.join(sorted(names))}); map them with --dataset-columns"
        )
    return wanted
