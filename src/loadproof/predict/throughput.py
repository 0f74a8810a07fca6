"""The throughput scenario as calibration input, its catalog entry's `calibrate`: what a throughput run gives
`sim calibrate` (each level's decode rate by concurrency, and its one-at-a-time requests' median TTFT:
`calibration_points`), and, with drafts, the speculative decoding it measured (`sim calibrate --spec-from
RUN`: `measured_drafts`): the draft length by batch size from the run's profile and the share of drafts
accepted at each position from its throughput levels' draft counters (metrics.spec_decode).

Position k's share pools the levels whose batch drafted that far: accepted at k / drafts, summed over the
levels whose concurrency the profile's schedule gives a draft length above k (so a K3 level does not dilute
positions 3 and 4 of a K5 schedule). The drafted share d is drafts / decode steps over the levels, the steps
being generated tokens - requests - accepted tokens (metrics.spec_decode's tokens per step). The simulator's
tokens per step at draft length k are then 1 + d (p_0 + ... + p_(k-1)) (sim.config.CostModel).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from loadproof.config.profile import Profile
from loadproof.errors import RunDirError, UsageError
from loadproof.metrics.throughput import level_spec_windows, level_started
from loadproof.predict.deployment import MeasuredDrafts, draft_by_batch
from loadproof.predict.points import RunPoints, request_points
from loadproof.store.run_dir import Run, load_run


def measured_drafts(path: Path) -> MeasuredDrafts:
    """The draft schedule and acceptance by position of a throughput run with drafts; UsageError, one line,
    when the run is not one."""
    try:
        run = load_run(path)
    except RunDirError as exc:
        raise UsageError(f"--spec-from: {exc}") from None
    if run.manifest.scenario != "throughput":
        raise UsageError(f"--spec-from {path}: a throughput run is needed (this is {run.manifest.scenario})")
    try:
        profile = Profile.model_validate(run.manifest.profile) if run.manifest.profile else None
    except ValidationError:
        profile = None
    spec = profile.speculative if profile is not None else None
    if spec is None:
        raise UsageError(f"--spec-from {path}: the run names no profile with [speculative] (run it with --profile)")
    windows = {level: w for level, w in level_spec_windows(run.records, run.samples).items() if w is not None}
    if not windows:
        raise UsageError(f"--spec-from {path}: the engine's counters show no drafts in any level")
    accepted: list[float] = []
    for k in range(spec.draft_tokens):
        covering = [w for (_, conc), w in windows.items() if spec.draft_length(conc) > k]
        drafts = sum(w.drafts for w in covering)
        if not drafts:
            break
        accepted.append(sum(w.accepted_by_pos[k] for w in covering if k < len(w.accepted_by_pos)) / drafts)
    started = level_started(run.records)
    counted = [(w, g, started.get(level, 0)) for level, w in windows.items() if (g := w.generated) is not None]
    steps = sum(g - n - w.accepted for w, g, n in counted)
    share = min(1.0, sum(w.drafts for w, _, _ in counted) / steps) if counted and steps > 0 else 1.0
    schedule = draft_by_batch(spec)
    shown = ", ".join(f"{100 * p:.1f}" for p in accepted)
    levels = ", ".join(f"{family} c{conc}" for family, conc in sorted(windows))
    return MeasuredDrafts(
        schedule,
        accepted,
        share,
        f"--spec-from {path.name}: {spec.method} drafts, accepted by "
        f"position {shown}% (levels {levels}); {100 * share:.1f}% of decode steps drafted; draft "
        f"length by batch {schedule}",
    )


def calibration_points(run: Run) -> RunPoints:
    return request_points(run, each_ttft=False, by_length=False)
