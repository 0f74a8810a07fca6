"""The simulator on a virtual clock: whole scenarios in modeled time, without sleeping.

`VirtualRun` steps the scheduler (`sim.scheduler`) on a modeled clock, pipelining as vLLM's engine core does;
`open_loop` sends requests on a schedule through it (the schedule `run load` draws, a trace's, one request
at a time) and returns the records a run directory would hold, so a scenario's own formulas judge the
prediction (`predicted_run`). Each scenario's predictor drives it (predict/NAME.py, the catalog's `predict`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample, Event, Manifest
from loadproof.sim.config import SimConfig
from loadproof.sim.scheduler import Scheduler, SimRequest, Step
from loadproof.store.run_dir import Run
from loadproof.units import NS_PER_S


def salted_hashes(salt: str, num_tokens: int, block_size: int) -> list[int]:
    """Block hashes of a prompt whose content is unique to `salt` (a cold, unshared prompt)."""
    return [hash((salt, i)) for i in range(num_tokens // block_size)]


@dataclass
class VirtualRun:
    config: SimConfig
    scheduler: Scheduler = field(init=False)
    now_s: float = 0.0
    num_steps: int = 0
    token_times: dict[str, list[float]] = field(default_factory=dict)
    samples: list[EngineSample] = field(default_factory=list)
    sample_interval_s: float = 0.5
    _next_sample_s: float = 0.0
    _in_flight: deque[tuple[Step, float]] = field(default_factory=deque)
    _stage_free: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.scheduler = Scheduler(self.config)

    def add(
        self, request_id: str, prompt_tokens: int, max_tokens: int, salt: str, hashes: list[int] | None = None
    ) -> SimRequest:
        """A request arriving now; its prompt shares nothing (a salt of its own) unless `hashes` gives its full
        blocks' chained hashes (a replayed trace's shared blocks)."""
        request = SimRequest(
            request_id,
            prompt_tokens,
            max_tokens,
            hashes if hashes is not None else salted_hashes(salt, prompt_tokens, self.config.block_size),
            arrival_s=self.now_s,
        )
        self.scheduler.add(request)
        self.token_times[request_id] = []
        return request

    def sample(self) -> None:
        self.samples.append(EngineSample(t_ns=int(self.now_s * NS_PER_S), values=self.scheduler.gauges()))
        self._next_sample_s = self.now_s + self.sample_interval_s

    def advance(self, until: Callable[[], bool], max_s: float) -> bool:
        """Step until `until()` holds (True) or nothing can run / `max_s` of modeled time passes (False).

        With `pipeline_stages` P, as vLLM's engine core with a batch queue: a new step is scheduled while
        fewer than P are in flight; it enters stage 1 when stage 1 is free and each stage takes step_s / P
        (+ pp_transfer_s); when the queue is full or nothing can be scheduled, the oldest step's outputs
        are awaited. With P = 1 this is one step after another. With `pipeline_batching` one_batch, see
        `_gathering`.
        """
        while not until():
            if self.now_s >= max_s:
                return False
            if self.launch() == float("inf"):
                return False  # idle, or the waiting head can never be admitted
            self.finish_oldest()
        return True

    def launch(self) -> float:
        """Schedule steps now while the pipeline has room; when the oldest step in flight ends (inf: none is)."""
        stages = self.config.cost.pipeline_stages
        while len(self._in_flight) < stages and not self._gathering():
            step = self.scheduler.schedule()
            if step is None:
                break
            self._launch(step, stages)
        return self._in_flight[0][1] if self._in_flight else float("inf")

    def finish_oldest(self) -> None:
        """Await the oldest step in flight: the clock moves to its end and its tokens are out."""
        step, end = self._in_flight.popleft()
        self.now_s = max(self.now_s, end)
        for emitted in self.scheduler.complete(step, self.now_s):
            self.token_times[emitted.request.request_id].append(self.now_s)
        while self.now_s >= self._next_sample_s:
            self.sample()

    def _gathering(self) -> bool:
        """`pipeline_batching = "one_batch"`: once no prompt is prefilling, the steps in flight are awaited
        before the next is scheduled, so every decoding session joins one step (a token's round trip is the
        whole batch's step through every stage)."""
        if self.config.cost.pipeline_batching != "one_batch" or not self._in_flight:
            return False
        s = self.scheduler
        return not s.waiting and all(r.num_computed >= r.prompt_tokens for r in s.running)

    def _launch(self, step: Step, stages: int) -> None:
        duration = self.scheduler.step_duration_s(step)
        per_stage = duration / stages + (self.config.cost.pp_transfer_s if stages > 1 else 0.0)
        if len(self._stage_free) != stages:
            self._stage_free = [self.now_s] * stages
        t = self.now_s
        for s in range(stages):
            t = max(t, self._stage_free[s]) + per_stage
            self._stage_free[s] = t
        self._in_flight.append((step, t))
        self.num_steps += 1


def predicted_run(
    scenario: str,
    records: list[RequestRecord],
    samples: list[EngineSample] | None = None,
    events: list[Event] | None = None,
) -> Run:
    """A predicted run as the scenario's metrics read a stored one (no directory: its path names none)."""
    return Run(Path("predicted"), Manifest(scenario=scenario), records, samples or [], events or [])


@dataclass
class OpenLoopPrediction:
    records: list[RequestRecord]
    num_steps: int
    modeled_s: float
    prefix_cache_hits: int = 0  # the modeled engine's counters over the run
    prefix_cache_queries: int = 0


def open_loop(
    config: SimConfig,
    offsets_s: list[float],
    input_tokens: list[int],
    output_tokens: list[int],
    *,
    scenario: str,
    max_concurrency: int | None = None,
    hashes: list[list[int]] | None = None,
) -> OpenLoopPrediction:
    """Open-loop traffic on the modeled engine: request i is sent at offsets_s[i] (the schedule `run load`
    draws), reaches the engine after its request overhead, and decodes exactly output_tokens[i] tokens
    (ignore_eos). With `max_concurrency` a request waits for a free slot, as the client's cap does (1: one
    request at a time). The records, labelled `scenario` and named `SCENARIO-000000` on, carry what an
    open-loop run's records carry (intended, dispatch and send times, every token's time), so the scenario's
    own formulas read them."""
    n = len(offsets_s)
    if not (len(input_tokens) == len(output_tokens) == n):
        raise ValueError("one input and one output length per request")
    run = VirtualRun(config, sample_interval_s=float("inf"))
    cap = max_concurrency or n or 1
    pending = sorted(range(n), key=lambda i: offsets_s[i])
    sent: dict[int, float] = {}
    arrived: list[tuple[float, int]] = []  # (engine arrival, index), kept sorted
    requests: dict[int, SimRequest] = {}
    open_ids: set[int] = set()
    k = 0

    def release() -> None:  # the client sends while a slot is free and the request's time has come
        nonlocal k
        while k < n and len(open_ids) < cap and offsets_s[pending[k]] <= run.now_s + 1e-12:
            i = pending[k]
            k += 1
            sent[i] = max(offsets_s[i], run.now_s)
            open_ids.add(i)
            arrived.append((sent[i] + config.cost.request_overhead(input_tokens[i]), i))
            arrived.sort()

    def admit() -> None:
        while arrived and arrived[0][0] <= run.now_s + 1e-12:
            _, i = arrived.pop(0)
            requests[i] = run.add(
                f"{scenario}-{i:06d}",
                input_tokens[i],
                output_tokens[i],
                salt=f"{scenario}-{i}",
                hashes=hashes[i] if hashes is not None else None,
            )

    def next_event() -> float:
        times = [arrived[0][0]] if arrived else []
        if k < n and len(open_ids) < cap:
            times.append(offsets_s[pending[k]])
        return min(times) if times else float("inf")

    finished = run.scheduler.counters.finished

    def completions() -> int:
        return sum(finished.values())

    while True:
        for i in [i for i in open_ids if i in requests and requests[i].status == "finished"]:
            open_ids.discard(i)
        release()
        admit()
        target = next_event()
        seen = completions()
        if run.advance(partial(_reached, run, target, completions, seen if max_concurrency else None), float("inf")):
            continue
        # idle: nothing to schedule and nothing in flight
        if target == float("inf"):
            break  # every request sent has finished (or can never run)
        run.now_s = max(run.now_s, target)
    records = open_loop_records(scenario, offsets_s, input_tokens, output_tokens, sent, run.token_times, cap)
    counters = run.scheduler.counters
    return OpenLoopPrediction(
        records, run.num_steps, run.now_s, counters.prefix_cache_hits, counters.prefix_cache_queries
    )


def open_loop_records(
    scenario: str,
    offsets_s: list[float],
    input_tokens: list[int],
    output_tokens: list[int],
    sent: dict[int, float],
    token_times: dict[str, list[float]],
    concurrency: int,
) -> list[RequestRecord]:
    """The records of an open loop's requests (`SCENARIO-000000` on): each one's intended, dispatch and send
    times and every token's time; one that never got all its tokens failed, `never_scheduled`."""
    records = []
    for i in range(len(offsets_s)):
        request_id = f"{scenario}-{i:06d}"
        times = token_times.get(request_id, [])
        send_ns = int(sent.get(i, offsets_s[i]) * NS_PER_S)
        record = RequestRecord(
            request_id=request_id,
            endpoint="completions",
            scenario=scenario,
            family=scenario,
            prompt_id=request_id,
            concurrency=concurrency,
            send_ns=send_ns,
            prompt_tokens=input_tokens[i],
            output_tokens=len(times),
            chunk_ns=[int(t * NS_PER_S) for t in times],
            chunk_tokens=[1] * len(times),
            num_chunks=len(times),
        )
        record.intended_send_ns = int(offsets_s[i] * NS_PER_S)
        record.dispatch_ns = record.intended_send_ns
        record.planned_input_tokens, record.planned_output_tokens = input_tokens[i], output_tokens[i]
        if times and len(times) == output_tokens[i]:
            record.first_token_ns, record.last_token_ns = int(times[0] * NS_PER_S), int(times[-1] * NS_PER_S)
            record.ok, record.finish_reason, record.end_ns = True, "length", record.last_token_ns
        else:
            record.error_kind, record.error_message, record.end_ns = (
                "never_scheduled",
                "the engine never ran it",
                send_ns,
            )
        records.append(record)
    return records


def _reached(run: VirtualRun, target: float, completions: Callable[[], int], seen: int | None) -> bool:
    """The open loop's next event: the next send or arrival is due, or (`seen`: the client caps the requests in
    flight) a request finished and freed a slot."""
    return run.now_s >= target or (seen is not None and completions() != seen)
