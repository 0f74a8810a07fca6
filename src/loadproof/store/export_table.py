"""One table of `loadproof export` (store/export.py): its typed columns, its rows, and the CSV and Parquet
writers that stream it to a file.

Types: int64, float64, bool, string, and json (a string column holding JSON text: nested values). In CSV a null
is an empty cell and a bool is `true`/`false`; Parquet keeps nulls apart from empty strings and each column's
unit and description in its field metadata. Rows are streamed: CSV row by row, Parquet in batches of
`BATCH_ROWS` through pyarrow's ParquetWriter (the optional extra `loadproof[parquet]`).
"""

from __future__ import annotations

import csv
import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BATCH_ROWS = 65_536
INT, FLOAT, BOOL, STR, JSON = "int64", "float64", "bool", "string", "json"


@dataclass(frozen=True)
class Column:
    """A column: its name, type (INT, FLOAT, BOOL, STR, JSON), unit and meaning."""

    name: str
    type: str
    unit: str | None = None
    description: str = ""
    derived: str | None = None  # how a derived column is computed from the others

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.unit is not None:
            out["unit"] = self.unit
        if self.description:
            out["description"] = self.description
        if self.derived is not None:
            out["derived"] = self.derived
        return out


@dataclass
class Table:
    """A table to write: its name (the file is `<name>.<format>`), what it holds, its columns and its rows."""

    name: str
    description: str
    columns: list[Column]
    rows: Callable[[], Iterator[list[Any]]]  # values already of their column's type (json as text)
    # the same rows as columns, about BATCH_ROWS at a time, where that is much cheaper (chunks)
    column_batches: Callable[[], Iterator[list[list[Any]]]] | None = None


def write_csv(path: Path, table: Table) -> int:
    """Header, then one line per row; a null is an empty cell, a bool `true`/`false`, a float its repr."""
    bools = [i for i, c in enumerate(table.columns) if c.type == BOOL]
    count = 0
    with open(path, "x", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow([c.name for c in table.columns])
        for row in table.rows():
            for i in bools:
                if row[i] is not None:
                    row[i] = "true" if row[i] else "false"
            writer.writerow(row)
            count += 1
    return count


def write_parquet(path: Path, table: Table) -> int:
    """Batches of BATCH_ROWS rows through one ParquetWriter; each column's unit and description are
    kept in its field metadata."""
    import pyarrow as pa  # optional (the loadproof[parquet] extra): only a Parquet export needs it
    import pyarrow.parquet as pq  # the same extra

    arrow_types = {INT: pa.int64(), FLOAT: pa.float64(), BOOL: pa.bool_(), STR: pa.string(), JSON: pa.string()}
    schema = pa.schema(
        [
            pa.field(c.name, arrow_types[c.type], metadata={k: str(v) for k, v in c.describe().items() if k != "name"})
            for c in table.columns
        ]
    )
    count = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # like open(path, "x")
    with os.fdopen(fd, "wb") as handle, pq.ParquetWriter(handle, schema) as writer:
        for columns in _column_batches(table):
            writer.write_batch(
                pa.RecordBatch.from_arrays(
                    [pa.array(col, type=f.type) for col, f in zip(columns, schema)], schema=schema
                )
            )
            count += len(columns[0])
    return count


def _column_batches(table: Table) -> Iterator[list[Any]]:
    """The table's rows as columns (non-empty ones), at most about BATCH_ROWS rows at a time."""
    if table.column_batches is not None:
        yield from (batch for batch in table.column_batches() if batch[0])
        return
    rows = table.rows()
    while batch := list(itertools.islice(rows, BATCH_ROWS)):
        yield list(zip(*batch))
