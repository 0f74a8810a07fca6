"""The continuous-batching core: FIFO admission, chunked prefill under a per-step token budget,
preemption by recompute, prefix caching, abort. No clock and no I/O: a driver calls `schedule()`,
charges the step's modeled duration, then `complete(step, now_s)`.

The policy is vLLM v1's `Scheduler.schedule()` (read from vLLM 0.32's source):
1. Running requests first, in admission order. Each gets what it still lacks (its whole remaining
   prompt while prefilling, one token while decoding), capped by `long_prefill_token_threshold` (when
   more than one request is present) and by the remaining budget. So many long prompts sent together
   prefill one at a time, in arrival order: the head takes the whole budget step after step, and the
   next one only gets what the head's last chunk leaves.
2. When a running request cannot get KV blocks, the most recently admitted running request is preempted
   (its blocks freed, its progress reset to 0, put back at the head of the waiting queue); a step that
   preempted admits nobody.
3. Then waiting requests, strictly FIFO: the head is admitted only while fewer than `max_num_seqs` run,
   budget is left, and its blocks fit (its whole prompt with `reserve_full_sequence`, else only its first
   chunk); when the head does not fit, nobody behind it is tried.
"""

from __future__ import annotations

import bisect
import math
import random
from collections import deque
from dataclasses import dataclass, field

from loadproof.sim.blocks import BlockPool, CpuTier
from loadproof.sim.config import SimConfig

# vLLM's time_to_first_token_seconds buckets
TTFT_BUCKETS_S = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)


@dataclass(eq=False)
class SimRequest:
    request_id: str
    prompt_tokens: int
    max_tokens: int
    block_hashes: list[int] = field(default_factory=list)  # one per full prompt block
    arrival_s: float = 0.0
    status: str = "waiting"  # waiting | running | finished
    num_computed: int = 0
    in_flight: int = 0  # tokens scheduled in a step that has not completed yet (pipeline parallelism)
    num_output: int = 0
    block_ids: list[int] = field(default_factory=list)
    num_hashed: int = 0  # prompt blocks registered in the prefix cache
    first_token_s: float | None = None
    finish_reason: str | None = None
    num_preemptions: int = 0
    prefix_hit_tokens: int = 0
    cached_tokens: int | None = None  # the prefix hit when first scheduled (vLLM's num_cached_tokens)
    pooling: bool = False  # an input to embed: it ends with its prefill and, as in vLLM, generates no token

    @property
    def num_tokens(self) -> int:
        return self.prompt_tokens + self.num_output


@dataclass
class Step:
    scheduled: list[tuple[SimRequest, int]]  # (request, new tokens)
    prefill_chunks: list[tuple[int, int]]  # (context before the chunk, chunk tokens)
    decode_contexts: list[int]
    epochs: list[int] = field(default_factory=list)  # each request's preemption count when scheduled
    loaded_tokens: int = 0  # prompt tokens loaded back from the CPU tier for this step's admissions


@dataclass
class Emitted:
    request: SimRequest
    first: bool
    finished: bool


@dataclass
class Counters:
    """The engine's own /metrics figures. Durations are in the seconds a client of the engine measures:
    `seconds_per_modeled_s` converts the scheduler's modeled seconds (1 / time_scale behind the HTTP server,
    1 on a virtual clock, where the client's seconds are modeled too), so the engine's TTFT and the client's
    describe the same events on the same clock."""

    seconds_per_modeled_s: float = 1.0
    num_preemptions: int = 0
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    external_queries: int = 0  # tokens asked of the CPU tier (past the GPU's hit)
    external_hits: int = 0  # tokens it had (loaded back)
    prompt_tokens: int = 0
    generation_tokens: int = 0
    finished: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0, "abort": 0})
    ttft_bucket_counts: list[int] = field(default_factory=lambda: [0] * (len(TTFT_BUCKETS_S) + 1))
    ttft_sum_s: float = 0.0
    ttft_count: int = 0

    def observe_ttft(self, modeled_s: float) -> None:
        seconds = modeled_s * self.seconds_per_modeled_s
        self.ttft_bucket_counts[bisect.bisect_left(TTFT_BUCKETS_S, seconds)] += 1
        self.ttft_sum_s += seconds
        self.ttft_count += 1


class Scheduler:
    def __init__(self, config: SimConfig, *, seconds_per_modeled_s: float = 1.0) -> None:
        self.config = config
        self.pool = BlockPool(config.num_gpu_blocks, config.block_size, config.enable_prefix_caching)
        self.cpu_tier = CpuTier(config.cpu_tier_blocks if config.enable_prefix_caching else 0)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.requests: dict[str, SimRequest] = {}
        self.counters = Counters(seconds_per_modeled_s=seconds_per_modeled_s)
        self.pipelined = config.cost.pipeline_stages > 1
        # `step_jitter`: each step's own draw, from the seed, in the order the steps run
        self.jitter = random.Random(f"step-jitter-{config.seed}") if config.step_jitter > 0 else None

    # -- requests in and out ------------------------------------------------------------------------
    def add(self, request: SimRequest) -> None:
        if request.request_id in self.requests:
            raise ValueError(f"request {request.request_id!r} is already in the engine")
        self.requests[request.request_id] = request
        self.waiting.append(request)

    def abort(self, request_id: str) -> bool:
        """Client gone: the request leaves at once and its blocks are free for the next step."""
        request = self.requests.get(request_id)
        if request is None or request.status == "finished":
            return False
        if request.status == "waiting":
            self.waiting.remove(request)
        self._finish(request, "abort")
        return True

    @property
    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    def resident_tokens(self) -> int:
        """Token slots held by running requests (a block shared through the prefix cache counts once)."""
        return len({b for r in self.running for b in r.block_ids}) * self.config.block_size

    # -- one step -------------------------------------------------------------------------------------
    def schedule(self) -> Step | None:
        cfg = self.config
        budget = cfg.max_num_batched_tokens
        threshold = cfg.long_prefill_token_threshold if len(self.running) + len(self.waiting) > 1 else 0
        scheduled: list[tuple[SimRequest, int]] = []
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            request = self.running[i]
            # With pipeline parallelism a request may have tokens in flight: as vLLM advances
            # num_computed_tokens at schedule time, a prefill's next chunk can be scheduled at once, while
            # a decode waits for its sampled token (nothing left to schedule).
            done = request.num_computed + request.in_flight
            n = request.num_tokens - done
            if 0 < threshold < n:
                n = threshold
            n = min(n, budget, cfg.max_model_len - 1 - done)
            if n <= 0:
                i += 1
                continue
            while not self._allocate(request, n):
                victim = self.running[-1]
                for k, (req, tokens) in enumerate(scheduled):
                    if req is victim:  # refund what the victim was given this step
                        budget += tokens
                        del scheduled[k]
                        break
                self._preempt(victim)
                preempted = True
                if victim is request:
                    break
            if request.status != "running":
                break
            scheduled.append((request, n))
            budget -= n
            i += 1

        loaded_tokens = 0
        if not preempted:
            while self.waiting and budget > 0 and len(self.running) < cfg.max_num_seqs:
                request = self.waiting[0]
                hit = self._prefix_hit(request) if request.num_computed == 0 else []
                loaded = self._cpu_hit(request, len(hit)) if request.num_computed == 0 else 0
                computed = (len(hit) + loaded) * cfg.block_size
                n = request.num_tokens - computed
                if 0 < threshold < n:
                    n = threshold
                n = min(n, budget)
                if cfg.reserve_full_sequence:
                    whole = -(-min(request.num_tokens, cfg.max_model_len) // cfg.block_size)
                    evictable_hits = sum(1 for b in hit if self.pool.blocks[b].ref_count == 0)
                    if whole - len(hit) > self.pool.num_free - evictable_hits:
                        break
                self.pool.touch(hit)
                request.block_ids = list(hit)
                request.num_computed = computed
                if not self._allocate(request, n):
                    self.pool.free(request.block_ids)
                    request.block_ids, request.num_computed = [], 0
                    break
                self.waiting.popleft()
                self.counters.prefix_cache_queries += request.num_tokens
                self.counters.prefix_cache_hits += len(hit) * cfg.block_size
                if self.cpu_tier.num_blocks:
                    self.counters.external_queries += request.num_tokens - len(hit) * cfg.block_size
                    self.counters.external_hits += loaded * cfg.block_size
                    loaded_tokens += loaded * cfg.block_size
                request.prefix_hit_tokens += computed
                if request.cached_tokens is None:
                    request.cached_tokens = computed
                request.num_hashed = len(hit)
                request.status = "running"
                self.running.append(request)
                scheduled.append((request, n))
                budget -= n

        if not scheduled:
            # A step that only preempted schedules again at once (the victims wait at the head);
            # otherwise there is nothing to run: idle, or the waiting head can never be admitted.
            return self.schedule() if preempted and (self.running or self.waiting) else None
        prefill: list[tuple[int, int]] = []
        decode: list[int] = []
        for request, n in scheduled:
            done = request.num_computed + request.in_flight
            if n == 1 and done == request.num_tokens - 1 and request.num_output > 0:
                decode.append(done + 1)
            else:
                prefill.append((done, n))
            if self.pipelined:  # one stage: every step completes before the next is scheduled
                request.in_flight += n
        return Step(scheduled, prefill, decode, [r.num_preemptions for r, _ in scheduled], loaded_tokens)

    def step_duration_s(self, step: Step) -> float:
        """The forward pass (times its `step_jitter` draw), and before it the loading of any prefix the CPU tier
        gave back."""
        forward = self.config.cost.step_s(step.prefill_chunks, step.decode_contexts)
        if self.jitter is not None:
            sigma = self.config.step_jitter
            forward *= math.exp(sigma * self.jitter.gauss(0.0, 1.0) - sigma * sigma / 2)
        return forward + step.loaded_tokens * self.config.cpu_tier_s_per_token

    def complete(self, step: Step, now_s: float) -> list[Emitted]:
        """The step's forward pass is done at `now_s`: advance progress, sample tokens, finish requests."""
        out: list[Emitted] = []
        bs = self.config.block_size
        epochs = step.epochs or [r.num_preemptions for r, _ in step.scheduled]
        for (request, n), epoch in zip(step.scheduled, epochs):
            if request.status != "running" or request.num_preemptions != epoch:  # aborted or preempted meanwhile
                continue
            request.in_flight = max(0, request.in_flight - n)
            request.num_computed += n
            if request.in_flight > 0:
                continue  # a later chunk of this prompt is still in the pipeline
            while (
                request.num_hashed < len(request.block_hashes) and (request.num_hashed + 1) * bs <= request.num_computed
            ):
                self.pool.cache(request.block_ids[request.num_hashed], request.block_hashes[request.num_hashed])
                self.cpu_tier.store(request.block_hashes[request.num_hashed])
                request.num_hashed += 1
            if request.num_computed < request.num_tokens:
                continue  # a prefill chunk that did not reach the end of the prompt
            request.num_output += 1
            self.counters.generation_tokens += not request.pooling
            first = request.first_token_s is None
            if first:
                request.first_token_s = now_s
                self.counters.prompt_tokens += request.prompt_tokens
                self.counters.observe_ttft(now_s - request.arrival_s)
            finished = request.num_output >= request.max_tokens or request.num_tokens >= self.config.max_model_len
            if finished:
                self._finish(request, "length")
            out.append(Emitted(request, first, finished))
        return out

    def finish_stop(self, request: SimRequest) -> None:
        """The answer ended by itself (an EOS) before max_tokens."""
        if request.status != "finished":
            self._finish(request, "stop")

    # -- internals ------------------------------------------------------------------------------------
    def _prefix_hit(self, request: SimRequest) -> list[int]:
        hit = self.pool.cached_prefix(request.block_hashes)
        # At least one token must be computed to produce logits (vLLM recomputes the last one).
        max_blocks = (request.num_tokens - 1) // self.config.block_size
        return hit[:max_blocks]

    def _cpu_hit(self, request: SimRequest, gpu_blocks: int) -> int:
        """Blocks the CPU tier continues the GPU's hit with (at least one token is still computed)."""
        if not self.cpu_tier.num_blocks:
            return 0
        max_blocks = (request.num_tokens - 1) // self.config.block_size
        return self.cpu_tier.continued_hit(request.block_hashes[gpu_blocks:max_blocks])

    def _allocate(self, request: SimRequest, num_new_tokens: int) -> bool:
        need = -(-(request.num_computed + request.in_flight + num_new_tokens) // self.config.block_size) - len(
            request.block_ids
        )
        if need <= 0:
            return True
        got = self.pool.allocate(need)
        if got is None:
            return False
        request.block_ids.extend(got)
        return True

    def _preempt(self, request: SimRequest) -> None:
        self.running.remove(request)
        self.pool.free(request.block_ids)
        request.block_ids = []
        request.num_computed = 0
        request.in_flight = 0
        request.num_hashed = 0
        request.status = "waiting"
        request.num_preemptions += 1
        self.counters.num_preemptions += 1
        self.waiting.appendleft(request)

    def _finish(self, request: SimRequest, reason: str) -> None:
        if request.status == "running":
            self.running.remove(request)
        self.pool.free(request.block_ids)
        request.block_ids = []
        request.status = "finished"
        request.finish_reason = reason
        self.counters.finished[reason] = self.counters.finished.get(reason, 0) + 1
        self.requests.pop(request.request_id, None)

    def gauges(self) -> dict[str, float]:
        """The engine-state part of /metrics, in loadproof's metric vocabulary."""
        c = self.counters
        return {
            "num_requests_running": float(len(self.running)),
            "num_requests_waiting": float(len(self.waiting)),
            "kv_cache_usage_perc": self.pool.usage,
            "num_preemptions_total": float(c.num_preemptions),
            "prefix_cache_queries_total": float(c.prefix_cache_queries),
            "prefix_cache_hits_total": float(c.prefix_cache_hits),
            **(
                {
                    "external_prefix_cache_queries_total": float(c.external_queries),
                    "external_prefix_cache_hits_total": float(c.external_hits),
                    "prompt_tokens_cached_by_source_total_device": float(c.prefix_cache_hits),
                    "prompt_tokens_cached_by_source_total_host": float(c.external_hits),
                }
                if self.cpu_tier.num_blocks
                else {}
            ),
            "prompt_tokens_total": float(c.prompt_tokens),
            "generation_tokens_total": float(c.generation_tokens),
        }
