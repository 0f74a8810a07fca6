"""The simulator on a virtual clock: whole scenarios in modeled time, without sleeping.

`predict_capacity` replays the capacity scenario's shape (N sessions of L tokens sent together, a W-second
window from the last first token, then cancellation) through the scheduler and returns what a run
directory would hold (plan, records, /metrics samples, events), so the prediction is judged by the same
`evaluate_capacity` that judges a measured run. `predict_load` replays open-loop traffic (the `run load`
scenario's schedule) and returns records the load scenario's formulas read.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loadproof.plans.capacity import CapacityPlan, CapacitySession
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample, Event
from loadproof.sim.config import SimConfig
from loadproof.sim.scheduler import Scheduler, SimRequest, Step
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
    _in_flight: deque = field(default_factory=deque)
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
        stages = self.config.cost.pipeline_stages
        while not until():
            if self.now_s >= max_s:
                return False
            if len(self._in_flight) < stages and not self._gathering():
                step = self.scheduler.schedule()
                if step is not None:
                    self._launch(step, stages)
                    continue
            if not self._in_flight:
                return False  # idle, or the waiting head can never be admitted
            step, end = self._in_flight.popleft()
            self.now_s = max(self.now_s, end)
            for emitted in self.scheduler.complete(step, self.now_s):
                self.token_times[emitted.request.request_id].append(self.now_s)
            while self.now_s >= self._next_sample_s:
                self.sample()
        return True

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


@dataclass
class CapacityPrediction:
    plan: CapacityPlan
    records: list[RequestRecord]
    samples: list[EngineSample]
    events: list[Event]
    num_steps: int
    modeled_s: float


def predict_capacity(
    config: SimConfig,
    sessions: int,
    input_tokens: int,
    window_s: float,
    *,
    max_tokens: int | None = None,
    max_gap_s: float = 5.0,
    sample_interval_s: float = 0.5,
    first_token_timeout_s: float = 7200.0,
    admission_stall_s: float = 10.0,
) -> CapacityPrediction:
    """The capacity scenario of `sessions` x `input_tokens` on the modeled engine (see the module doc)."""
    if max_tokens is None:  # as the scenario does: what the context window leaves, at most 100,000
        max_tokens = min(config.max_model_len - input_tokens, 100_000)
    run = VirtualRun(config, sample_interval_s=sample_interval_s)
    run.sample()
    # sent at 0; the engine has them once upload and tokenization are done, which requests do concurrently
    run.now_s = config.cost.request_overhead(input_tokens)
    ids = [f"cap-s{i:03d}" for i in range(sessions)]
    requests = [run.add(rid, input_tokens, max_tokens, salt=f"salt-{rid}") for rid in ids]

    stall = {"since": None}

    def all_started() -> bool:
        # The scenario's admission-stall rule: requests wait while every running session is decoding
        # for `admission_stall_s`, so they will only get in when someone leaves: stop the cold phase.
        s = run.scheduler
        if s.waiting and s.running and all(r.num_computed >= r.prompt_tokens for r in s.running):
            stall["since"] = run.now_s if stall["since"] is None else stall["since"]
            if run.now_s - stall["since"] >= admission_stall_s:
                return True
        else:
            stall["since"] = None
        return all(r.first_token_s is not None or r.status == "finished" for r in requests)

    run.advance(all_started, first_token_timeout_s)
    events: list[Event] = []
    if stall["since"] is not None:
        events.append(
            Event(
                kind="admission_stalled",
                t_ns=int(run.now_s * NS_PER_S),
                evidence=f"{len(run.scheduler.waiting)} request(s) waited {admission_stall_s:g} s while "
                f"all {len(run.scheduler.running)} running sessions were decoding",
            )
        )
    started = [r for r in requests if r.first_token_s is not None]
    if len(started) == sessions:
        window_start = max(r.first_token_s for r in started)  # type: ignore[type-var]
        events.append(Event(kind="window_start", t_ns=int(window_start * NS_PER_S)))
        end = window_start + window_s
        run.advance(lambda: run.now_s >= end or not run.scheduler.running, end)
    cancel_s = run.now_s + 1e-6  # the client cancels just after the window's last step
    events.append(Event(kind="cancel", t_ns=int(cancel_s * NS_PER_S)))
    for rid in ids:
        run.scheduler.abort(rid)
    run.now_s = cancel_s + 1e-3
    run.sample()

    records = []
    for rid, request in zip(ids, requests):
        times = run.token_times[rid]
        record = RequestRecord(
            request_id=rid,
            endpoint="completions",
            scenario="capacity",
            family="capacity",
            prompt_id=rid,
            concurrency=sessions,
            send_ns=0,
            prompt_tokens=input_tokens,
            output_tokens=len(times),
            chunk_ns=[int(t * NS_PER_S) for t in times],
            chunk_tokens=[1] * len(times),
            num_chunks=len(times),
        )
        if times:
            record.first_token_ns, record.last_token_ns = int(times[0] * NS_PER_S), int(times[-1] * NS_PER_S)
            record.output_text = "predicted"  # the simulator answers every probe right
        if request.finish_reason == "length":
            record.ok, record.finish_reason, record.end_ns = True, "length", int(times[-1] * NS_PER_S)
        else:
            record.error_kind, record.error_message, record.end_ns = (
                "cancelled",
                "cancelled by the client",
                int(cancel_s * NS_PER_S),
            )
        records.append(record)
    plan = CapacityPlan(
        sessions=[CapacitySession(request_id=rid, session_id=rid, expected="predicted") for rid in ids],
        input_tokens=input_tokens,
        max_tokens=max_tokens,
        window_s=window_s,
        max_gap_s=max_gap_s,
        drain_timeout_s=30.0,
        kv_idle_bound=0.02,
        check_probes=True,
        max_model_len=config.max_model_len,
        engine_kv_cache_tokens=config.kv_cache_tokens,
        theoretical_full_windows=round(config.kv_cache_tokens / config.max_model_len, 4),
    )
    return CapacityPrediction(plan, records, run.samples, events, run.num_steps, run.now_s)


@dataclass
class LoadPrediction:
    records: list[RequestRecord]
    num_steps: int
    modeled_s: float
    prefix_cache_hits: int = 0  # the modeled engine's counters over the run
    prefix_cache_queries: int = 0


def predict_load(
    config: SimConfig,
    offsets_s: list[float],
    input_tokens: list[int],
    output_tokens: list[int],
    *,
    max_concurrency: int | None = None,
    hashes: list[list[int]] | None = None,
) -> LoadPrediction:
    """Open-loop traffic on the modeled engine: request i is sent at offsets_s[i] (the schedule `run load`
    draws), reaches the engine after its request overhead, and decodes exactly output_tokens[i] tokens
    (ignore_eos). With `max_concurrency` a request waits for a free slot, as the client's cap does. The
    records carry what a `run load` run's records carry (intended, dispatch and send times, every token's
    time), so the load scenario's own formulas read them."""
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
                f"load-{i:06d}",
                input_tokens[i],
                output_tokens[i],
                salt=f"load-{i}",
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
        if max_concurrency:  # a finished request frees a slot: stop there too
            until = lambda target=target, seen=seen: run.now_s >= target or completions() != seen  # noqa: E731
        else:
            until = lambda target=target: run.now_s >= target  # noqa: E731
        if run.advance(until, float("inf")):
            continue
        # idle: nothing to schedule and nothing in flight
        if target == float("inf"):
            break  # every request sent has finished (or can never run)
        run.now_s = max(run.now_s, target)
    records = []
    for i in range(n):
        times = run.token_times.get(f"load-{i:06d}", [])
        send_ns = int(sent.get(i, offsets_s[i]) * NS_PER_S)
        record = RequestRecord(
            request_id=f"load-{i:06d}",
            endpoint="completions",
            scenario="load",
            family="load",
            prompt_id=f"load-{i:06d}",
            concurrency=cap,
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
    counters = run.scheduler.counters
    return LoadPrediction(records, run.num_steps, run.now_s, counters.prefix_cache_hits, counters.prefix_cache_queries)


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
