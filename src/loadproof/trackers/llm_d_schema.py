"""llm-d-benchmark's benchmark report, version 0.2.1, as types: the part of it loadproof writes, re-implemented from
its published description (llm-d/llm-d-benchmark, `llmdbenchmark/analysis/benchmark_report/`: the pydantic models
`schema_v0_2.py` and `schema_v0_2_1.py`, and the JSON Schema generated from them, `br_v0_2_1_json_schema.json`;
Apache-2.0). The schema file itself is not copied into loadproof; these types follow it field for field where
loadproof fills a section, and take the sections it never fills (observability, session performance, component
health, profiling, time series, multi-modal payloads) as opaque JSON.

What is checked, as the schema checks it: every object closed (no field it does not name: `additionalProperties:
false`, pydantic's `extra="forbid"`), the required fields, the enumerations (`units`, `role`, `distribution`,
`source`, a component's `kind`), the minimums (counts at least 0, replicas and parallelisms at least 1 where the
schema says so), and, as the pydantic models' validators do, each statistic's units within its category (a
latency in s or ms, a time per token in s/token or ms/token, a token rate in tokens/s, a request rate in
queries/s, a length in count or pixels). `check(report)` raises ValueError naming the first field that does not
fit; `decode(bytes)` reads a report back through the same types.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

VERSION = "0.2.1"

Units = Literal[
    "count", "pixels", "percent", "fraction", "ratio", "ms", "s", "bytes", "MB", "GB", "TB", "MiB", "GiB", "TiB",
    "Mbit/s", "Gbit/s", "Tbit/s", "GiB/s", "MB/s", "GB/s", "TB/s", "ms/token", "s/token", "tokens/s", "queries/s",
    "images/s", "videos/s", "audios/s", "Watts",
]  # fmt: skip
QUANTITY = ("count", "pixels")
TIME = ("ms", "s")
PER_TOKEN = ("ms/token", "s/token")
TOKEN_RATE = ("tokens/s",)
REQUEST_RATE = ("queries/s",)
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[int, msgspec.Meta(ge=1)]


class _Closed(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    pass


class Statistics(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A distribution's summary; `units` and `mean` required (the schema leaves this object open)."""

    units: Units
    mean: float
    mode: float | None = None
    stddev: Annotated[float, msgspec.Meta(ge=0)] | None = None
    min: float | None = None
    p0p1: float | None = None
    p1: float | None = None
    p5: float | None = None
    p10: float | None = None
    p25: float | None = None
    p50: float | None = None
    p75: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p99p9: float | None = None
    max: float | None = None


class RunTime(_Closed, kw_only=True):
    start: str | None = None  # ISO-8601 date-time
    end: str | None = None
    duration: str | None = None  # ISO-8601 duration, PT<seconds>S


class Run(_Closed, kw_only=True):
    uid: str
    eid: str | None = None
    cid: str | None = None
    pid: str | None = None
    time: RunTime | None = None
    user: str | None = None
    description: str | None = None
    keywords: list[str] | None = None


class ComponentMetadata(_Closed, kw_only=True):
    schema_version: str = "0.0.1"
    label: str
    cfg_id: str
    description: str | None = None


class Native(_Closed, kw_only=True):
    args: dict[str, Any] | None = None
    envars: dict[str, Any] | None = None
    config: Any = None


class Parallelism(_Closed, kw_only=True):
    tp: NonNegative = 1
    dp: NonNegative = 1
    dp_local: NonNegative = 1
    workers: NonNegative = 1
    ep: Positive = 1
    pp: Positive = 1


class Accelerator(_Closed, kw_only=True):
    model: str
    count: NonNegative
    parallelism: Parallelism


class Model(_Closed, kw_only=True):
    name: str


class InferenceEngine(_Closed, kw_only=True, tag_field="kind", tag="inference_engine"):
    tool: str
    tool_version: str
    role: Literal["replica", "prefill", "decode"]
    replicas: Positive
    model: Model
    accelerator: Accelerator


class Component(_Closed, kw_only=True):
    metadata: ComponentMetadata
    standardized: InferenceEngine
    native: Native


class SequenceLength(_Closed, kw_only=True):
    distribution: Literal["fixed", "gaussian", "uniform", "other"]
    value: Annotated[float, msgspec.Meta(ge=0)]
    std_dev: Annotated[float, msgspec.Meta(ge=0)] | None = None
    min: NonNegative | None = None
    max: Positive | None = None


class LoadMetadata(_Closed, kw_only=True):
    schema_version: str = "0.0.1"
    cfg_id: str | None = None
    description: str | None = None


class LoadStandardized(_Closed, kw_only=True):
    tool: str
    tool_version: str
    parallelism: Positive = 1
    source: Literal["random", "sampled", "unknown"]
    stage: NonNegative = 0
    input_seq_len: SequenceLength
    output_seq_len: SequenceLength | None = None
    prefix: dict[str, Any] | None = None
    multi_turn: dict[str, Any] | None = None
    rate_qps: Annotated[float, msgspec.Meta(gt=0)] | None = None
    concurrency: Positive | None = None


class Load(_Closed, kw_only=True):
    metadata: LoadMetadata
    standardized: LoadStandardized
    native: Native


class Scenario(_Closed, kw_only=True):
    stack: list[Component] | None = None
    load: Load | None = None


class AggregateRequests(_Closed, kw_only=True):
    total: NonNegative
    failures: NonNegative | None = None
    incomplete: NonNegative | None = None
    input_length: Statistics | None = None
    output_length: Statistics | None = None
    request_size: Statistics | None = None
    multimodal: dict[str, Any] | None = None


class AggregateLatency(_Closed, kw_only=True):
    time_to_first_token: Statistics | None = None
    normalized_time_per_output_token: Statistics | None = None
    time_per_output_token: Statistics | None = None
    inter_token_latency: Statistics | None = None
    request_latency: Statistics | None = None


class AggregateThroughput(_Closed, kw_only=True):
    input_token_rate: Statistics | None = None
    output_token_rate: Statistics | None = None
    total_token_rate: Statistics | None = None
    request_rate: Statistics | None = None
    image_rate: Statistics | None = None
    video_rate: Statistics | None = None
    audio_rate: Statistics | None = None


class AggregateRequestPerformance(_Closed, kw_only=True):
    requests: AggregateRequests | None = None
    latency: AggregateLatency | None = None
    throughput: AggregateThroughput | None = None


class RequestPerformance(_Closed, kw_only=True):
    aggregate: AggregateRequestPerformance | None = None
    time_series: dict[str, Any] | None = None


class Results(_Closed, kw_only=True):
    request_performance: RequestPerformance | None = None
    session_performance: dict[str, Any] | None = None
    observability: dict[str, Any] | None = None
    profiling: Any = None
    component_health: list[dict[str, Any]] | None = None


class BenchmarkReport(_Closed, kw_only=True):
    version: str = VERSION
    run: Run
    scenario: Scenario | None = None
    results: Results


# each statistic's units, by category, as the pydantic models' validators check them
UNIT_RULES: dict[type, dict[str, tuple[str, ...]]] = {
    AggregateRequests: {"input_length": QUANTITY, "output_length": QUANTITY},
    AggregateLatency: {
        "time_to_first_token": TIME,
        "normalized_time_per_output_token": PER_TOKEN,
        "time_per_output_token": PER_TOKEN,
        "inter_token_latency": PER_TOKEN,
        "request_latency": TIME,
    },
    AggregateThroughput: {
        "input_token_rate": TOKEN_RATE,
        "output_token_rate": TOKEN_RATE,
        "total_token_rate": TOKEN_RATE,
        "request_rate": REQUEST_RATE,
    },
}


def check(report: BenchmarkReport) -> None:
    """`report` fits the schema (types, enumerations, minimums, closed objects, each statistic's units); else a
    ValueError naming the first field that does not."""
    encoded = msgspec.json.encode(report)
    try:
        decode(encoded)
    except msgspec.ValidationError as exc:
        raise ValueError(f"not an llm-d benchmark report {VERSION}: {exc}") from None


def decode(data: bytes) -> BenchmarkReport:
    """A report read back through the types, its units checked (msgspec.ValidationError naming the field)."""
    report = msgspec.json.decode(data, type=BenchmarkReport)
    performance = report.results.request_performance
    aggregate = performance.aggregate if performance is not None else None
    if aggregate is not None:
        for section_name in ("requests", "latency", "throughput"):
            section = getattr(aggregate, section_name)
            for name, allowed in UNIT_RULES.get(type(section), {}).items():
                stat = getattr(section, name, None)
                if stat is not None and stat.units not in allowed:
                    where = f"results.request_performance.aggregate.{section_name}.{name}.units"
                    raise msgspec.ValidationError(f"{stat.units!r} is not one of {', '.join(allowed)} - at `$.{where}`")
    return report
