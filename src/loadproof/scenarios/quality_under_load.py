"""Quality under load (`--under-load-rate`, docs/quality.md "Under load"): the load's requests, drawn and built
as `run load` builds them; its schedule as the open-loop sender iterates it, cut where the last under-load
item ends; and each asked row's answer compared with the idle one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from loadproof.plans.quality import UnderLoadPlan
from loadproof.scenarios.load.schedule import Planned, schedule_offsets
from loadproof.scenarios.load.synthetic import synthetic_requests
from loadproof.scenarios.long_context import haystack_target
from loadproof.scenarios.quality_items import Job
from loadproof.scenarios.quality_options import QualityOptions
from loadproof.scenarios.target import Target
from loadproof.scenarios.token_counts import PROBE_LINE
from loadproof.workloads.quality import changes


def load_requests(target: Target, options: QualityOptions) -> tuple[UnderLoadPlan, list[Planned]]:
    """The load beside the under-load asking, every body built before the first send (as `run load`)."""
    opts = options.load_options()
    hs = haystack_target(target, opts.seed, PROBE_LINE)  # its prompts end with a line's newline
    plan, requests = synthetic_requests(opts, schedule_offsets(opts), hs, target.max_model_len)
    return UnderLoadPlan(
        rate_rps=float(options.under_load_rate or 0),
        max_s=options.under_load_max_s,
        drawn_requests=len(requests),
        load=plan,
    ), requests


def compared_with_idle(job: Job, text: str, ok: bool, idle_answers: dict[tuple[str, str, str], str]) -> dict[str, Any]:
    """An asked row's under-load fields: its answer's digest; idle, its answer kept for the second asking;
    under load, where it first differs from the idle answer and a window of both, when they differ."""
    fields: dict[str, Any] = {"answer_sha256": changes.digest(text)}
    if not job.row.get("under_load"):
        if ok:
            idle_answers[job.key] = text
        return fields
    idle = idle_answers.get(job.key)
    change = changes.change(idle, text) if idle is not None and ok else None
    if change is not None:
        fields.update(answer_diff_at=change.at, answer_text=change.under_load, idle_answer_text=change.idle)
    return fields


class CutSchedule(list[Planned]):
    """The load's requests as the open-loop sender iterates them, and their cut: `cut`, set once the last
    under-load item has ended, which the sender obeys at once (`OpenLoop`'s `cut`): the request it was waiting
    to send is never sent, and the requests still in flight are cancelled. `len` stays the drawn count; `started`
    is set once the first has been sent (the sender asks for the second)."""

    def __init__(self, requests: list[Planned]) -> None:
        super().__init__(requests)
        self.cut = asyncio.Event()
        self.taken = 0
        self.started = asyncio.Event()

    def __iter__(self) -> Iterator[Planned]:
        for item in super().__iter__():
            if self.cut.is_set():
                break
            if self.taken == 1:  # asked for the second: the first has been sent
                self.started.set()
            self.taken += 1
            yield item
        self.started.set()
