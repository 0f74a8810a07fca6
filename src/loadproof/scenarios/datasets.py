"""The options of a user's own data set (`--dataset FILE`, docs/scenarios.md, "Data sets"): `DatasetOptions`
(`run load` takes them in; `load.dataset` sends the rows), and the `--dataset-columns` type that
`run sessions` shares. The reading itself is `workloads.datasets`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, model_validator

from loadproof.config.base import StrictModel
from loadproof.errors import UsageError
from loadproof.scenarios.options import Panel, cli
from loadproof.workloads.datasets import DatasetFormat, DatasetSample, check_readable, parse_columns

Columns = Annotated[dict[str, str], BeforeValidator(parse_columns)]
_DEFAULTS = {
    "dataset_format": "auto",
    "dataset_columns": {},
    "dataset_sample": "random",
    "dataset_repeat": False,
    "dataset_min_input_tokens": None,
    "dataset_max_input_tokens": None,
    "dataset_output": "data",
}


class DatasetOptions(StrictModel):
    dataset: str | None = Field(
        default=None,
        description="send the prompts of this data set file or folder instead "
        "of synthetic ones (ShareGPT JSON, JSONL, Parquet, Arrow; local only)",
        json_schema_extra=cli(panel=Panel.DATA_SET, metavar="PATH"),
    )
    dataset_format: DatasetFormat = Field(
        default="auto",
        description="the data set's format: auto (by its extension: .json sharegpt, .jsonl, .parquet, .arrow), "
        "sharegpt, jsonl, parquet or arrow",
        json_schema_extra=cli(panel=Panel.DATA_SET),
    )
    dataset_columns: Columns = Field(
        default={},
        description="FIELD=COLUMN,... maps prompt, messages, output_tokens "
        "or conversations to the data set's own names",
        json_schema_extra=cli(text=True, panel=Panel.DATA_SET, metavar="FIELD=COL,..."),
    )
    dataset_sample: DatasetSample = Field(
        default="random",
        description="random: a seeded uniform sample of the usable rows, shuffled; first: the first rows in file order",
        json_schema_extra=cli(panel=Panel.DATA_SET),
    )
    dataset_repeat: bool = Field(
        default=False,
        description="with fewer usable rows than requests, send them again in the same order",
        json_schema_extra=cli(panel=Panel.DATA_SET),
    )
    dataset_min_input_tokens: int | None = Field(
        default=None,
        ge=1,
        description="drop rows whose prompt is shorter than this many tokens (as the engine counts them)",
        json_schema_extra=cli(panel=Panel.DATA_SET),
    )
    dataset_max_input_tokens: int | None = Field(
        default=None,
        ge=1,
        description="drop rows whose prompt is longer than this many tokens (the served context drops them too)",
        json_schema_extra=cli(panel=Panel.DATA_SET),
    )
    dataset_output: Literal["data", "option"] = Field(
        default="data",
        description="data: each row's own output "
        "length where it has one (ShareGPT: its reply's tokens), else "
        "--output-tokens; option: always --output-tokens",
        json_schema_extra=cli(panel=Panel.DATA_SET),
    )
    skip_bad_rows: bool = Field(
        default=False,
        description="skip rows that do not parse, counting them, instead of stopping at the first",
        json_schema_extra=cli(panel=Panel.DATA_SET),
    )

    @model_validator(mode="after")
    def _dataset_options(self) -> DatasetOptions:
        if self.dataset is None:
            given = [k for k, v in _DEFAULTS.items() if getattr(self, k) != v]
            if given:
                raise ValueError(f"--{given[0].replace('_', '-')} applies with --dataset FILE")
        else:
            try:  # the file is there (a hub id says so), of a known format, with a prompt to send: an empty or
                # garbage file is one line before any run directory is made
                check_readable(self.dataset, self.dataset_format, self.dataset_columns, self.skip_bad_rows)
            except UsageError as exc:
                raise ValueError(str(exc)) from None
        if (
            self.dataset is not None
            and self.dataset_min_input_tokens
            and self.dataset_max_input_tokens
            and self.dataset_min_input_tokens > self.dataset_max_input_tokens
        ):
            raise ValueError("--dataset-min-input-tokens is above --dataset-max-input-tokens")
        return self
