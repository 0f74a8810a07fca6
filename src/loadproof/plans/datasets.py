"""What a run that sent a user's data set records about it: which file, read how, and which rows it sent,
so the run says exactly what it sent without storing a prompt (docs/scenarios.md, "Data sets").

Standard library and msgspec only.
"""

from __future__ import annotations

import msgspec


class DatasetRef(msgspec.Struct, kw_only=True):
    path: str  # as given on the command line
    format: str  # sharegpt | jsonl | parquet | arrow (resolved from auto)
    files: list[str] = []  # the files read (a folder: every data file in it, in order)
    sha256: str = ""  # of the files' bytes, concatenated in order
    columns: dict[str, str] = {}  # --dataset-columns
    sample: str = "random"  # random | first
    seed: int = 731
    repeat: bool = False
    min_input_tokens: int | None = None
    max_input_tokens: int | None = None  # as given (the served context also bounds it)
    output_from: str = "data"  # data: the row's own output length where it has one; option: --output-tokens
    rows: int = 0  # rows read
    bad_rows: int = 0  # rows that did not parse, skipped (--skip-bad-rows)
    no_prompt: int = 0
    too_short: int = 0
    too_long: int = 0
    usable: int = 0
    repeated: int = 0  # requests that reuse a row already sent
    rows_sent: list[int] = []  # the row of each request, in send order
    outputs_from_data: int = 0  # requests whose output length came from the row
    # requests whose input length was an estimate, not checked (multi-message chat, before every chat prompt
    # sent was counted as rendered): 0 now, kept so older plans still read
    estimated_inputs: int = 0
    messages_from_data: int = 0  # sessions: user messages taken from the conversations (the rest filler)

    def key(self) -> str:
        """What makes two runs' data the same workload."""
        return (
            f"{self.format}:{self.sha256[:16]}:{self.sample}:{self.seed}:{self.min_input_tokens}:"
            f"{self.max_input_tokens}:{self.output_from}"
        )
