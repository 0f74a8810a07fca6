"""`loadproof run quality`'s options (`QualityOptions`, the fields `cli/run.py` turns into flags), the load
beside the under-load asking composed from `run load`'s own (`LoadOptions`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from loadproof.scenarios.constraints import ConstraintOptions
from loadproof.scenarios.load.options import LoadOptions, TokenLengths
from loadproof.scenarios.options import Panel, among, cli
from loadproof.workloads.quality import MODES, SUITES, authored
from loadproof.workloads.synthetic import Lengths


class QualityOptions(ConstraintOptions):  # --tools, --response-format (scenarios/constraints.py)
    suites: Annotated[list[str], among(SUITES, "suites")] = Field(
        default_factory=lambda: list(SUITES),
        description="suites: " + ", ".join(SUITES),
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    gsm8k_items: int = Field(
        default=200,
        ge=0,
        le=200,
        description="the first N problems, 0 to 200, of the packaged GSM8K subset",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    gsm8k_max_tokens: int = Field(default=256, ge=16, json_schema_extra=cli(hidden=True))
    authored_modes: Annotated[list[str], among(MODES, "authored modes")] = Field(
        default_factory=lambda: list(MODES),
        description="authored-task modes: " + ", ".join(MODES),
        json_schema_extra=cli("--modes", panel=Panel.WORKLOAD),
    )
    authored_items: int | None = Field(
        default=None,
        ge=1,
        description=f"the first N authored tasks (default: all {len(authored.load_tasks())})",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    authored_max_tokens: int = Field(default=64, ge=8, json_schema_extra=cli(hidden=True))
    thinking_mode: bool = Field(
        default=False,
        description="the model has a thinking mode (enable_thinking; default: from the profile)",
        json_schema_extra=cli("--thinking-model", panel=Panel.TARGET),
    )
    thinking_max_tokens: int = Field(
        default=2048,
        ge=64,
        description="output budget of plain mode when the model thinks",
        json_schema_extra=cli(hidden=True),
    )
    retrieval_lengths: list[int] = Field(
        default_factory=lambda: [1024, 4096, 16384],
        description="retrieval prompt lengths in tokens; those over max_model_len are skipped",
        json_schema_extra=cli(panel=Panel.WORKLOAD, metavar="TOKENS,..."),
    )
    retrieval_depths: list[float] = Field(default_factory=lambda: [0.25, 0.75], json_schema_extra=cli(hidden=True))
    image_max_tokens: int = Field(default=16, ge=4, json_schema_extra=cli(hidden=True))
    concurrency: int = Field(
        default=4, ge=1, description="N requests in flight at once", json_schema_extra=cli(panel=Panel.ARRIVALS)
    )
    seed: int = Field(default=731, json_schema_extra=cli(hidden=True))
    deadline_s: float | None = Field(
        default=900.0, gt=0, description="per-request deadline in seconds", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    # --- under load (docs/quality.md, "Under load"): the load scenario's options, composed ---
    under_load_rate: float | None = Field(
        default=None,
        ge=0,
        description="also ask every item while an open-loop "
        "load of R requests/s runs on the same target, and count the answers that "
        "changed (0 or absent: off)",
        json_schema_extra=cli(panel=Panel.ARRIVALS, metavar="RPS"),
    )
    under_load_input_tokens: TokenLengths = Field(
        default=Lengths("fixed", 1024),
        description="the load's prompt tokens (as run load's --input-tokens)",
        json_schema_extra=cli(text=True, panel=Panel.WORKLOAD, metavar="N|DIST:A:B"),
    )
    under_load_output_tokens: TokenLengths = Field(
        default=Lengths("fixed", 128),
        description="the load's output tokens (as run load's --output-tokens)",
        json_schema_extra=cli(text=True, panel=Panel.WORKLOAD, metavar="N|DIST:A:B"),
    )
    under_load_arrival: Literal["poisson", "constant"] = Field(
        default="poisson",
        description="the gaps between the load's sends: poisson or constant",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    idle_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="with --under-load-rate: seconds to wait, "
        "before the idle asking, for the engine to report 0 running and 0 waiting; else "
        "fail with 'engine busy'",
        json_schema_extra=cli(panel=Panel.ENGINE),
    )
    under_load_max_s: float = Field(
        default=1800.0,
        gt=0,
        description="the load's schedule is drawn for this many "
        "seconds and cut where the last under-load item ends; if the items outlast it, "
        "the load stops first",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )

    @field_validator("retrieval_lengths")
    @classmethod
    def _lengths(cls, value: list[int]) -> list[int]:
        if any(v < 256 for v in value):
            raise ValueError("retrieval lengths must be at least 256 tokens")
        return value

    @field_validator("retrieval_depths")
    @classmethod
    def _depths(cls, value: list[float]) -> list[float]:
        if not value or any(not 0.0 <= d <= 1.0 for d in value):
            raise ValueError("retrieval depths must be numbers between 0 and 1")
        return value

    @model_validator(mode="after")
    def _load(self) -> QualityOptions:
        if self.under_load_rate:
            self.load_options()  # the load's options hold together, or one line now
        return self

    def load_options(self) -> LoadOptions:
        """The load beside the under-load asking, as `run load` would take it: one schedule drawn for
        `under_load_max_s` at `under_load_rate`, measured beside the items (no idle guard)."""
        try:
            return LoadOptions(
                rate=self.under_load_rate,
                arrival=self.under_load_arrival,
                duration_s=self.under_load_max_s,
                input_tokens=self.under_load_input_tokens,
                output_tokens=self.under_load_output_tokens,
                seed=self.seed,
                deadline_s=self.deadline_s or 600.0,
                idle_timeout_s=0.0,
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ValueError(f"the load beside the items: {first['msg'].removeprefix('Value error, ')}") from None
