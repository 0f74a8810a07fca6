"""A trace shaped as `run replay` sends it, for the simulator's predictions of it (`predict.replay` on one engine,
`predict.replay_fleet` on a fleet): its plan, each request's send offset and lengths, its shared blocks as the
engine's chained KV block hashes (`trace_block_hashes`), and its session; a recorded agent's (`--format otel`,
`predict.replay_agent`) with each request's dependencies and waits.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from loadproof.config.base import StrictModel
from loadproof.metrics.replay import expected_hits
from loadproof.plans.replay import ReplayPlan
from loadproof.predict.fleet import Chain
from loadproof.predict.replay_agent import agent_requests
from loadproof.scenarios.options import Panel, cli
from loadproof.scenarios.replay_options import ReplayOptions
from loadproof.scenarios.sliding_window import hybrid_window, model_config
from loadproof.sim.config import SimConfig
from loadproof.workloads.traces import HASHED, shape


class ReplayEngine(StrictModel):
    """What a replay on a real engine measures and the simulator must be told."""

    overhead_tokens: int = Field(default=1, ge=0, description="tokens the engine adds to each prompt (template, BOS)")
    tokenizer: Path | None = Field(
        default=None,
        description="otel: the model's tokenizer folder (tokenizer.json and its chat template) the synthetic "
        "messages are counted with, as the scenario counts them; default: the profile's model's, else the "
        "simulator's own counts",
        json_schema_extra=cli(panel=Panel.ENGINE, metavar="PATH"),
    )
    engine_sliding_window: int | None = Field(
        default=None,
        ge=0,
        description="with --replicas: a hybrid model's sliding window in tokens that each replica keeps only at "
        "checkpoints (vLLM 0.32's default), for the fleet's checkpointed hit rate beside the modelled one; 0: every "
        "block kept (default: the model's config.json beside --tokenizer)",
        json_schema_extra=cli(panel=Panel.ENGINE),
    )

    def checkpoint_window(self) -> tuple[int | None, str]:
        """(the window each replica keeps at checkpoints, where that came from); None where every block is kept."""
        if self.engine_sliding_window is not None:
            return self.engine_sliding_window or None, "--engine-sliding-window"
        config = model_config(self.tokenizer)
        window = hybrid_window(config) if config is not None else None
        return window, "the model's config.json (sliding_window), kept at checkpoints as vLLM 0.32 keeps it"


@dataclass(frozen=True)
class ReplayRequests:
    """A trace shaped as `run replay` sends it: its plan, and each request's send offset, lengths, chained KV
    block hashes and session (the one `run replay --session-header` sends: Bailian's, else the row's own)."""

    plan: ReplayPlan
    offsets_s: list[float]
    inputs: list[int]
    outputs: list[int]
    hashes: list[list[int]]
    sessions: list[str | None]
    expected_hit_pct: float  # from the trace's shared blocks (an unbounded cache)
    chain: Chain | None = None  # a recorded agent's: each request after its dependencies (offsets_s its floors)
    sizing: str = ""  # a recorded agent's: how its messages were sized


def replay_requests(config: SimConfig, options: ReplayOptions, engine: ReplayEngine) -> ReplayRequests:
    """Read and shape the trace as `run replay` does (see the module doc)."""
    if options.format == "otel":
        agent = agent_requests(config, options, engine.tokenizer)
        sizing = f"{agent.tokens_per_char:.4f} tokens a character, {agent.counted_by}"
        return ReplayRequests(
            agent.plan,
            agent.offsets_s,
            agent.inputs,
            agent.outputs,
            agent.hashes,
            agent.sessions,
            agent.expected_hit_pct,
            agent.chain,
            sizing,
        )
    overhead = engine.overhead_tokens
    read = options.read()
    shaped = shape(
        read.rows,
        block_tokens=options.block,
        overhead_tokens=overhead,
        max_input_tokens=options.max_input_tokens,
        max_output_tokens=options.max_output_tokens,
        max_model_len=config.max_model_len,
    )
    first = read.rows[0].t_s
    offsets = [(row.t_s - first) / options.time_scale for row in read.rows]
    inputs = [s.text_tokens + overhead for s in shaped]
    hashes = [trace_block_hashes(s.blocks, s.text_tokens, overhead, options.block, config.block_size) for s in shaped]
    blocks = [list(s.blocks) for s in shaped] if options.format in HASHED else [[] for _ in shaped]
    # the replay's claims are the load scenario's, computed on its plan (metrics.replay names them replay.*)
    plan = ReplayPlan(
        **options.plan_fields(read, shaped),
        planned_requests=len(shaped),
        schedule_span_s=round(offsets[-1], 9),
        max_model_len=config.max_model_len,
        overhead_tokens=overhead,
    )
    hits = expected_hits(plan.text_tokens, blocks, options.block)
    # as `run replay --session-header` names them: the trace's session, else the row's own
    sessions: list[str | None] = [row.session or f"line-{row.line}" for row in read.rows]
    outputs = [s.output_tokens for s in shaped]
    return ReplayRequests(plan, offsets, inputs, outputs, hashes, sessions, 100 * sum(hits) / sum(inputs))


def trace_block_hashes(
    blocks: list[Any], text_tokens: int, overhead_tokens: int, block_tokens: int, block_size: int
) -> list[int]:
    """The chained hashes of the engine's full KV blocks (`block_size`) of a replayed prompt: the engine's
    overhead (the same for every prompt), then the trace's blocks of `block_tokens`, each named by its id, the
    last cut to the text. Two prompts share a KV block exactly when they share every token up to its end, as
    the prompts `run replay` builds do (a block is a function of its id; the head names the id)."""
    total = overhead_tokens + text_tokens
    out: list[int] = []
    parent = b"replay"
    for start in range(0, total - block_size + 1, block_size):
        end = start + block_size
        pieces = []
        p = start
        while p < end:  # the segments of this KV block: overhead, then (trace block, from, to)
            if p < overhead_tokens:
                q = min(end, overhead_tokens)
                pieces.append(f"o{p}-{q}")
            else:
                k, at = divmod(p - overhead_tokens, block_tokens)
                q = min(end, overhead_tokens + (k + 1) * block_tokens)
                pieces.append(f"{blocks[k]!r}:{at}-{at + q - p}")
            p = q
        parent = hashlib.blake2b(parent + "|".join(pieces).encode(), digest_size=8).digest()
        out.append(int.from_bytes(parent, "big"))
    return out
