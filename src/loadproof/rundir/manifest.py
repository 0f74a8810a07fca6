"""`manifest.json`: what was run, against what, with which versions, and the plan (docs/architecture.md,
"The run directory").

Typed here is what the generic code reads (the scenario's name, the target's model and endpoint, the
clock anchor, the engine's startup report, the telemetry description, the schedule a load run reached,
where a trial sits in a search or sweep, how a scaled-out load run split its schedule, the publication's
provenance). The open-ended parts stay JSON objects, typed by whoever owns their shape: `options` (the
scenario's resolved options), `plan` (typed by its scenario's schema through `plans.load_plan`),
`profile`/`profiles` (the deployment profile), and `extra` (any top-level key this loadproof has no field
for: an older or newer file's; written back at the top level).

A run fills this type from its first line to its last, never a dict: `scenarios.recording` builds it
(`common_manifest`), the scenario sets its fields (`plans.attach_plan`: the plan; the load sender: the
`schedule`), `RunWriter.write_manifest` writes it, and `publish` adds the `publication`.

Version 1: the shape every run wrote before manifests recorded a schema version; runs written since
record theirs in `schema`.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec
from msgspec import UNSET, UnsetType

from loadproof.rundir.json_value import JSONObject
from loadproof.rundir.prediction import Prediction
from loadproof.rundir.source import Source


class SchemaVersions(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The schema version of each file kind of the run directory (1: the shape before versions)."""

    manifest: int = 1
    metrics: int = 1
    events: int = 1
    telemetry: int = 1
    answers: int = 1


class MetricsSourceInfo(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    kind: str | None = None  # exposition (an engine's /metrics) or prometheus
    url: str | None = None


class ReplicaInfo(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """One replica of a fleet: where its metrics were read, and its KV cache as its /metrics described it when the
    run began (vLLM's `cache_config_info`; None where it did not say)."""

    url: str | None = None
    block_tokens: int | None = None
    num_blocks: int | None = None  # its pool, the null block included
    kv_tokens: int | None = None  # the engine's own count of the cache in tokens, where it gives one


class FleetInfo(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """A fleet measured (docs/fleet.md, "Measuring a fleet"): its replicas in order (metrics.jsonl's `replica-<i>`),
    the router's metrics URL, whether the replicas were read from the router's /workers, the router's policy."""

    replicas: list[ReplicaInfo] = []
    router_metrics: str | None = None
    discovered: bool = False
    policy: str | None = None  # --router-policy; None: not given (the router's rows name it, where scraped)


class TargetInfo(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The server measured, as the manifest stores it under `target` (never its API key: only whether one was
    used); the live target a run sends to is `scenarios.target.Target`."""

    url: str | None = None
    model: str | None = None
    endpoint: str | None = None
    api_key_used: bool = False
    extra_body: JSONObject = {}
    tokenizer: str | None = None
    tokenizer_source: str | None = None  # local (--tokenizer) or engine (its /tokenize); None: none used or older run
    metrics: MetricsSourceInfo | None = None
    token_counts: str | None = None
    thinking: str | None = None  # off, low or on (--thinking); None: the model's default, or a run before it
    reasoning_effort: str | None = None  # the reasoning_effort sent; None: none
    fleet: FleetInfo | None = None  # replicas behind a router; None: one engine


class ClockAnchor(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One wall-clock reading paired with the run's monotonic clock, to place record times in real time."""

    wall_time_ns: int
    perf_counter_ns: int


class StartupReport(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """The engine's own startup figures, parsed from its log (engines.base.StartupReport)."""

    kv_cache_tokens: int | None = None
    kv_memory_gib: float | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens_per_request: int | None = None
    line: str = ""


class EngineInfo(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    kind: str | None = None
    launch: list[str] | None = None
    env: dict[str, str] | None = None  # the environment the profile gives the engine (publish: config kind)
    startup_report: StartupReport | None = None
    ready_after_s: float | None = None


class TelemetryInfo(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """What telemetry.sampler could see: the GPUs (none: `note` says why) and the driver."""

    gpus: int = 0
    names: list[str | None] | None = None  # per GPU; None where NVML refused the name
    driver: str | None = None
    note: str | None = None
    sampled: bool = True  # False: sampling switched off (--sample-interval-s 0): no telemetry, no NVML
    # why the run has no GPU energy figures (no GPU, a GPU without NVML's energy counter, sampling off);
    # None: every GPU's counter was read, or a run recorded before loadproof read it (its telemetry version 1)
    energy_note: str | None = None


class Price(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """What the user said compute costs (`--price-per-gpu-hour`, `--price-per-kwh`), in their currency."""

    per_gpu_hour: float | None = None
    per_kwh: float | None = None


class Schedule(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How far a load run's schedule got."""

    planned: int
    dispatched: int
    recorded: int
    failed: int
    interrupted: bool
    last_intended_offset_s: float
    elapsed_s: float


class ParentClock(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The parent's clock offset (wall - monotonic) a scaled-out run mapped its workers' times onto."""

    offset_ns: int
    bracket_ns: int
    drift_ns: int  # how far the offset moved by the end of the run


class WorkerInfo(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One worker of a scaled-out load run: its share of the schedule; what it reported (unset: it ended
    without a result); how its clock was mapped onto the parent's (unset: its clock was never read). An
    unset field is absent from the file, None is written as null."""

    worker: int
    requests: int
    recorded: int
    max_concurrency: int | None
    pid: int | UnsetType = UNSET
    node: str | None | UnsetType = UNSET  # the Ray node id (None: a process on this host)
    dispatched: int | UnsetType = UNSET
    failed: int | UnsetType = UNSET
    interrupted: bool | UnsetType = UNSET
    error: str | None | UnsetType = UNSET
    late_start_ms: float | UnsetType = UNSET
    offset_ns: int | UnsetType = UNSET
    bracket_ns: int | UnsetType = UNSET
    shift_ns: int | UnsetType = UNSET
    alignment_error_bound_ns: int | UnsetType = UNSET
    drift_ns: int | UnsetType = UNSET  # unset: the worker's clock was not read again at its end


class WorkersInfo(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How a scaled-out load run (`--workers N`, `--ray-address`) split its schedule, and, once the workers'
    records are merged (unset before), how their clocks were aligned and within what bound."""

    count: int
    how: str  # processes or ray
    ray_address: str | None
    split: str
    max_concurrency: list[int | None]  # each worker's share of --max-concurrency
    start_ns: int | None | UnsetType = UNSET  # the schedule's start on the parent's clock (None: never started)
    clock: str | UnsetType = UNSET  # how a worker's time is mapped onto the parent's
    alignment_error_bound_ns: int | None | UnsetType = UNSET  # the largest of the workers' (None: none read)
    parent_clock: ParentClock | UnsetType = UNSET
    per_worker: list[WorkerInfo] | UnsetType = UNSET


class SeriesPoint(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """Where a trial sits in a rate search or sweep (its folder in the series, its order, its rate)."""

    folder: str | None = None
    index: int | None = None
    rate_rps: float | None = None
    attainment: float | None = None
    point: str | None = None  # sweep: the point's kind


class Publication(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Provenance `publish` adds to a bundle's manifest (and to the run's entry in bundle.json): every field
    written, None as null, as publish always has."""

    published_by: str | None = None
    loadproof: str | None = None
    git: str | None = None
    python: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    engine_image: str | None = None
    torch: str | None = None
    driver: str | None = None
    gpu_models: list[str] = []
    num_gpus: int | None = None
    model: str | None = None
    num_torn_lines_dropped: int = 0
    raw_data: str | None = None


class Manifest(msgspec.Struct, kw_only=True, omit_defaults=True):
    version: ClassVar[int] = 1

    run_id: str | None = None
    scenario: str | None = None
    options: JSONObject = {}
    target: TargetInfo = msgspec.field(default_factory=TargetInfo)
    engine_version: str | None = None
    versions: dict[str, str | None] = {}
    git: str | None = None
    start_wall_time: str | None = None
    clock_anchor: ClockAnchor | None = None
    profile: JSONObject | None = None
    profiles: dict[str, JSONObject | None] | None = None  # ab: each arm's profile
    engine: EngineInfo | None = None
    telemetry: TelemetryInfo | None = None
    price: Price | None = None
    prediction: Prediction | None = None  # `run --prediction FILE`: the contract the run is judged against
    plan: JSONObject | None = None  # None: interrupted before the plan was written (or a version-1 throughput run)
    plan_version: int | None = None  # None: version 1 (before plans were versioned)
    schedule: Schedule | None = None
    workers: WorkersInfo | None = None  # a scaled-out load run's split and clock alignment
    search: SeriesPoint | None = None
    sweep: SeriesPoint | None = None
    end_wall_time: str | None = None
    num_records: int | None = None
    schema: SchemaVersions | None = None  # None: a version-1 run directory (before versions were recorded)
    crosscheck: int | None = None  # the version of the crosscheck's claims (metrics.engine_agreement); None: 1
    source: Source | None = None  # `loadproof import`: the other tool's file the run was read from; None: measured here
    publication: Publication | None = None  # publish's provenance; last, where publish has always put it
    extra: JSONObject = {}  # top-level keys without a field here, kept and written back as they were

    @property
    def engine_startup(self) -> StartupReport | None:
        return self.engine.startup_report if self.engine is not None else None


__all__ = [
    "ClockAnchor",
    "EngineInfo",
    "FleetInfo",
    "Manifest",
    "MetricsSourceInfo",
    "ParentClock",
    "Price",
    "Publication",
    "ReplicaInfo",
    "Schedule",
    "SchemaVersions",
    "SeriesPoint",
    "StartupReport",
    "TargetInfo",
    "TelemetryInfo",
    "WorkerInfo",
    "WorkersInfo",
]
