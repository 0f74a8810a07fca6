"""A deployment on the sim profile's step costs: what `plan PROFILE --sim SIM --simulate NAME` and `tune` predict.

`deployment_config`: a deployment profile's context, block size, KV cache (the engine's reported count where a
startup log gave one, else the planner's), scheduler limits, drafts (`[speculative]`'s draft length by
batch size, `draft_by_batch`) and its model's media rules (`[model] image_tokens`, `audio_tokens`, where stated)
on the sim profile's costs; `simulator_deployment_config`: a deployment whose
engine is the simulator itself (`engine = "sim"`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadproof.config.profile import SpeculativeSpec
from loadproof.errors import UsageError
from loadproof.sim.assumptions import scheduler_assumptions
from loadproof.sim.config import SimConfig

UNBOUNDED = 1 << 20  # a batch-size bound past any engine's max_num_seqs: the last length holds beyond the schedule


@dataclass(frozen=True)
class MeasuredDrafts:
    draft_by_batch: list[list[int]]  # [[largest batch size, draft length], ...], CostModel.spec_draft_by_batch
    accepted_by_pos: list[float]  # CostModel.spec_accepted_by_pos
    drafted_share: float  # CostModel.spec_drafted_share
    source: str  # for the calibration's "used" lines


def draft_by_batch(spec: SpeculativeSpec) -> list[list[int]]:
    """A profile's `[speculative]` draft length by batch size as CostModel.spec_draft_by_batch: each range's
    largest batch and length, the last range's length holding beyond it (draft_tokens throughout without
    a schedule)."""
    schedule = [[last, length] for _, last, length in spec.schedule] or [[UNBOUNDED, spec.draft_tokens]]
    schedule[-1][0] = UNBOUNDED
    return schedule


def deployment_config(profile: Any, planned: Any, base: SimConfig) -> SimConfig:
    """The sim profile's step costs on a deployment (`planner.profile_plan.plan_profile`'s result): its
    context, block size, KV cache tokens (the engine's reported count where a startup log gave one, else the
    planner's) and scheduler limits."""
    dep, sched = planned.deployment, profile.scheduler
    reported = planned.reported.kv_cache_tokens if planned.reported is not None else None
    kv_tokens = reported or planned.plan.kv_cache_tokens
    return _drafting(
        profile,
        _scheduled(
            profile,
            base.model_copy(
                update={
                    "max_model_len": dep.max_model_len,
                    "block_size": dep.block_size,
                    "num_gpu_blocks": max(1, kv_tokens // dep.block_size),
                    "long_prefill_token_threshold": sched.long_prefill_threshold(dep.max_model_len),
                    **media_tokens_of(profile, base),
                }
            ),
        ),
    )


def media_tokens_of(profile: Any, base: SimConfig) -> dict[str, Any]:
    """The deployment's model's own media rules (`[model] image_tokens`, `audio_tokens`), each in place of the
    sim profile's, as `run load --profile` expects them; `media_tokens_from` names the profile for the output.
    Empty where the profile states none (the sim profile's rules stand)."""
    update: dict[str, Any] = {}
    origin = dict(base.media_tokens_from)
    model = getattr(profile, "model", None)  # a profile's [model] (a hand-made deployment may have none)
    for field in ("image_tokens", "audio_tokens"):
        stated = getattr(model, field, None)
        if stated is not None:
            update[field] = stated
            origin[field] = f"profile {profile.name} [model] {field}"
    return {**update, "media_tokens_from": origin} if update else {}


def _drafting(profile: Any, config: SimConfig) -> SimConfig:
    """The profile's drafts on the sim profile's costs: its draft length by batch size (`[speculative]`'s
    draft_tokens and draft_schedule) as spec_draft_by_batch, none without `[speculative]`; the acceptance is
    the sim profile's, which a drafting profile needs (without it every draft would cost and none pay)."""
    spec, cost = profile.speculative, config.cost
    if spec is None:
        return config.model_copy(update={"cost": cost.model_copy(update={"spec_draft_by_batch": []})})
    if cost.spec_acceptance <= 0 and not cost.spec_accepted_by_pos:
        raise UsageError(
            f"{profile.name} drafts ({spec.method}, {spec.draft_tokens} tokens) but the sim profile "
            "has no draft acceptance: calibrate it with --spec-from RUN (a throughput run with drafts) "
            "or --acceptance A"
        )
    return config.model_copy(update={"cost": cost.model_copy(update={"spec_draft_by_batch": draft_by_batch(spec)})})


def simulator_deployment_config(profile: Any, base: SimConfig) -> SimConfig:
    """A deployment whose engine is the simulator itself (`engine = "sim"`, model.path a sim profile): the
    sim profile's KV and costs, the deployment's context and scheduler limits, as `loadproof sim` takes them
    from the flags the sim engine renders (the long-prefill threshold only where the profile sets one)."""
    sched = profile.scheduler
    length = profile.model.max_model_len
    given = sched.long_prefill_token_threshold is not None or sched.max_num_partial_prefills is not None
    return _scheduled(
        profile,
        base.model_copy(
            update={
                "max_model_len": length,
                "long_prefill_token_threshold": sched.long_prefill_threshold(length)
                if given
                else base.long_prefill_token_threshold,
            }
        ),
    )


def _scheduled(profile: Any, config: SimConfig) -> SimConfig:
    """`config` with the profile's max_num_seqs and token budget, and its concurrent long prefills known."""
    sched = profile.scheduler
    config = config.model_copy(
        update={
            "max_num_seqs": sched.max_num_seqs or config.max_num_seqs,
            "max_num_batched_tokens": sched.max_num_batched_tokens or config.max_num_batched_tokens,
        }
    )
    # the profile states the scheduler's settings: concurrent long prefills are known, not assumed
    assumptions = [a for a in config.assumptions if a.name != "concurrent_long_prefills"]
    return config.model_copy(
        update={
            "assumptions": scheduler_assumptions(
                config, prefills_pinned_by=f"the profile's scheduler ({profile.name})"
            )[:1]
            + assumptions
        }
    )
