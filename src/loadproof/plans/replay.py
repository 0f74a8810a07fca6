"""The replay plan: the trace (file, format, digest), how it was selected, scaled and capped, and per request
the text tokens and the Mooncake hash ids its prompt was built from, so the expected prefix-cache hit
rate, like every claim, is recomputed from the run directory alone (docs/scenarios.md, "replay"); and the
engine's KV cache size (blocks, tokens per block, where they came from), for the expectation at its size.

Each request's intended send time is in its record (`intended_send_ns`; `batch` is its index here). A recorded
agent (`--format otel`) keeps what it planned beyond this in `agent` (`plans.agent_replay`); a trace of sessions
(Bailian, otel) keeps each request's session id in `sessions`, and `session_header` names the HTTP header that
carried it. Standard library and msgspec only.
"""

from __future__ import annotations

from typing import Any

from loadproof.plans import Plan
from loadproof.plans.agent_replay import AgentReplay
from loadproof.plans.load import MixedModel, route_traits
from loadproof.protocol.routes.base import RouteTraits


class ReplayPlan(Plan, kw_only=True):
    trace: str  # the file as given
    format: str  # mooncake | bailian | azure | csv | otel
    sha256: str = ""
    trace_rows: int = 0  # data rows read
    bad_rows: int = 0  # skipped with --skip-bad-rows
    before_offset: int = 0  # rows before --start-offset-s
    time_scale: float = 1.0  # offsets = (t - t_first) / time_scale
    start_offset_s: float = 0.0
    max_requests: int | None = None
    trace_span_s: float = 0.0  # last replayed timestamp - first, in the trace's own seconds
    block_tokens: int = 512  # tokens per hash id (Mooncake's 512, or a scaled-down B)
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    capped_inputs: int = 0  # requests whose input was cut to the cap or the context
    planned_requests: int
    schedule_span_s: float  # the last intended send, seconds after the start
    max_concurrency: int | None = None
    ignore_eos: bool = True
    deadline_s: float | None = None
    slo: dict[str, float] = {}
    client_lag_growth_s: float = 0.025
    client_lag_floor_s: float = 0.05
    endpoint: str | None = None
    route: RouteTraits | None = None  # what the claims need of the endpoint's route (None: before it was kept)
    max_model_len: int | None = None
    overhead_tokens: int = 0
    overhead_source: str | None = None
    haystack_additive: bool | None = None
    lines: list[int] = []  # each request's line in the trace
    text_tokens: list[int] = []  # each request's prompt text tokens (the engine adds overhead_tokens)
    hash_ids: list[list[int]] = []  # each request's blocks' hash ids (Mooncake; [] for formats without)
    model_mix: list[MixedModel] = []  # --model-mix: each model's weight
    models: list[str] = []  # with a mix, each request's model: its blocks are shared only within that model
    # the engine's KV cache, for the expectation at its size (metrics.prefix_cache); None: not known
    kv_blocks: int | None = None  # blocks in its pool (vLLM's num_gpu_blocks, its null block included)
    kv_block_tokens: int | None = None  # tokens per KV block
    kv_source: str | None = None  # where they came from: "options" or "metrics" (its cache_config_info)
    sessions: list[str] = []  # each request's session (Bailian: its chain's first chat_id; otel: its copy's)
    session_header: str | None = None  # the HTTP header each request carried its session in (None: none)
    agent: AgentReplay | None = None  # --format otel: the recorded agent's requests, order and waits

    def traits(self) -> RouteTraits:
        return route_traits(self.endpoint, self.route)

    def workload(self) -> dict[str, Any]:
        return {
            "trace": self.sha256[:16],
            "format": self.format,
            "time_scale": self.time_scale,
            "start_offset_s": self.start_offset_s,
            "max_requests": self.max_requests,
            "block_tokens": self.block_tokens,
            "max_input_tokens": self.max_input_tokens,
            "max_output_tokens": self.max_output_tokens,
            "max_concurrency": self.max_concurrency,
            "ignore_eos": self.ignore_eos,
            **({"session_header": self.session_header} if self.session_header else {}),
            **(
                {
                    "pace": self.agent.pace,
                    "copies": self.agent.copies,
                    "copy_interval_s": self.agent.copy_interval_s,
                    "input_scale": self.agent.input_scale,
                }
                if self.agent is not None
                else {}
            ),
        }
