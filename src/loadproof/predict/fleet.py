"""A fleet on the virtual clock: N modeled engines (`predict.virtual.VirtualRun`, each its own KV cache and
scheduler) behind a model of a router policy (`routing.Router`), for `plan --simulate replay --replicas N
--policy A,B`.

The client sends each request at its time (or when a slot frees, with `max_concurrency`); with a `Chain` (a recorded
agent's, `run replay --format otel`'s dependency-driven sender) a request is sent once every request it depends on has
ended on the virtual clock and its wait after the last of them has passed, never before its time (its floor), as
`scenarios.load.chained.Chained` sends it. The router decides
then, online, with each replica's load: its requests sent and not yet ended (vllm-router's in-flight counter);
the request reaches its replica after the request overhead, and joins the replica's next step. Events are
taken in time order: a step's end before an arrival before a send at the same instant, so a request that
ends at t no longer loads its replica when the router decides at t. The router walks a request's chained KV
block hashes, which name a block and everything before it, as its prefix tree walks the prompt's text.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from loadproof.metrics.prefix_cache import PrefixRequest
from loadproof.metrics.prefix_checkpoints import checkpointed_hits
from loadproof.predict.virtual import VirtualRun, open_loop_records
from loadproof.records import RequestRecord
from loadproof.routing import Router
from loadproof.sim.config import SimConfig
from loadproof.sim.scheduler import SimRequest

INF = float("inf")


@dataclass(frozen=True)
class Chain:
    """Each request's dependencies (indexes of requests) and its wait (s) after the last of them ends."""

    deps: list[list[int]]
    waits_s: list[float]

    def dependents(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.deps]
        for i, deps in enumerate(self.deps):
            for j in deps:
                out[j].append(i)
        return out


@dataclass(frozen=True)
class FleetPrediction:
    records: list[RequestRecord]
    replica_of: list[int]  # each request's replica (-1: never sent)
    num_steps: int
    modeled_s: float
    hits: list[int]  # each replica's prefix-cache hits and queries, in tokens (its engine's counters)
    queries: list[int]
    decisions: list[int]  # requests the router sent to each replica
    cached: list[int]  # each request's prefix hit in tokens when its replica first scheduled it (-1: never)

    @property
    def hit_pct(self) -> float:
        """The fleet's prefix-cache hit rate: every replica's hits over every replica's queries."""
        return 100 * sum(self.hits) / sum(self.queries) if sum(self.queries) else 0.0

    def replica_hit_pct(self, replica: int) -> float:
        queries = self.queries[replica]
        return 100 * self.hits[replica] / queries if queries else 0.0

    @property
    def imbalance_pct(self) -> float:
        """How much more the busiest replica got than an even share: 100 * (max / mean - 1) of requests."""
        total = sum(self.decisions)
        return 100 * (max(self.decisions) * len(self.decisions) / total - 1) if total else 0.0


def fleet_open_loop(
    config: SimConfig,
    router: Router,
    offsets_s: list[float],
    input_tokens: list[int],
    output_tokens: list[int],
    hashes: list[list[int]],
    sessions: Sequence[str | None],
    *,
    scenario: str,
    max_concurrency: int | None = None,
    chain: Chain | None = None,
) -> FleetPrediction:
    """Traffic on `router.replicas` modeled engines of `config`, open loop or, with `chain`, each request after its
    dependencies (see the module doc); the records as `predict.virtual.open_loop` writes them for one engine, each
    one's intended send the time it was allowed."""
    n = len(offsets_s)
    if not (len(input_tokens) == len(output_tokens) == len(hashes) == len(sessions) == n):
        raise ValueError("one input, output, hash list and session per request")
    if chain is not None and not (len(chain.deps) == len(chain.waits_s) == n):
        raise ValueError("one list of dependencies and one wait per request")
    replicas = router.replicas
    runs = [VirtualRun(config, sample_interval_s=INF) for _ in range(replicas)]
    cap = max_concurrency or n or 1
    allowed = list(offsets_s)  # when each request may be sent: its time, or after its dependencies
    waiting = [len(chain.deps[i]) if chain else 0 for i in range(n)]  # dependencies not yet ended
    dependents = chain.dependents() if chain else [[] for _ in range(n)]
    ready = [(offsets_s[i], i) for i in range(n) if not waiting[i]]  # a heap of (allowed, index)
    heapq.heapify(ready)
    arrivals: list[list[tuple[float, int]]] = [[] for _ in range(replicas)]  # per replica, a heap
    loads = [0] * replicas
    replica_of = [-1] * n
    sent: dict[int, float] = {}
    requests: dict[int, SimRequest] = {}
    open_ids: set[int] = set()
    clock = 0.0

    def admit(r: int) -> None:  # the replica's arrivals due by its clock join its queue
        run = runs[r]
        while arrivals[r] and arrivals[r][0][0] <= run.now_s + 1e-12:
            i = heapq.heappop(arrivals[r])[1]
            requests[i] = run.add(f"{scenario}-{i:06d}", input_tokens[i], output_tokens[i], salt="", hashes=hashes[i])

    while True:
        for i in sorted(i for i in open_ids if i in requests and requests[i].status == "finished"):
            open_ids.discard(i)
            loads[replica_of[i]] -= 1
            for d in dependents[i]:
                waiting[d] -= 1
                if not waiting[d] and chain is not None:
                    ends = [runs[replica_of[j]].token_times[f"{scenario}-{j:06d}"][-1] for j in chain.deps[d]]
                    allowed[d] = max(offsets_s[d], max(ends) + chain.waits_s[d])
                    heapq.heappush(ready, (allowed[d], d))
        # the next event: (time, kind, replica): 0 a step's end, 1 an idle replica's arrival, 2 a send
        events = []
        for r, run in enumerate(runs):
            end = run.launch()
            if end < INF:
                events.append((end, 0, r))
            elif arrivals[r]:
                events.append((arrivals[r][0][0], 1, r))
        if ready and len(open_ids) < cap:
            events.append((ready[0][0], 2, -1))
        if not events:
            break  # every request sent has ended, or waits for a cache it can never fit (or for one that does)
        t, kind, r = min(events)
        clock = max(clock, t)
        if kind == 0:
            runs[r].finish_oldest()
            admit(r)
        elif kind == 1:
            runs[r].now_s = max(runs[r].now_s, t)
            admit(r)
        else:
            i = heapq.heappop(ready)[1]
            sent[i] = clock
            r = replica_of[i] = router.pick(hashes[i], sessions[i], loads)
            loads[r] += 1
            open_ids.add(i)
            heapq.heappush(arrivals[r], (clock + config.cost.request_overhead(input_tokens[i]), i))
    token_times = {rid: times for run in runs for rid, times in run.token_times.items()}
    counters = [run.scheduler.counters for run in runs]
    return FleetPrediction(
        open_loop_records(scenario, allowed, input_tokens, output_tokens, sent, token_times, cap),
        replica_of,
        sum(run.num_steps for run in runs),
        max((run.now_s for run in runs), default=0.0),
        [c.prefix_cache_hits for c in counters],
        [c.prefix_cache_queries for c in counters],
        list(router.decisions),
        [_cached(requests.get(i)) for i in range(n)],
    )


def _cached(request: SimRequest | None) -> int:
    """The request's prefix hit when first scheduled, in tokens; -1 where it never was."""
    if request is None or request.cached_tokens is None:
        return -1
    return request.cached_tokens


def checkpointed_hit_pct(
    pred: FleetPrediction, hashes: Sequence[Sequence[int]], inputs: Sequence[int], block_size: int, window_tokens: int
) -> float:
    """The fleet's prefix-cache hit rate where each replica keeps a hybrid model's sliding window only at
    checkpoints (`metrics.prefix_checkpoints`: vLLM 0.32's hybrid KV cache manager, retention interval 0), on each
    replica's requests in the order they were sent, their modelled hits (every block kept) as the full-attention
    hits; requests never scheduled count nothing. The modelled TTFTs are not changed by it."""
    kept = queried = 0
    for replica in range(len(pred.hits)):
        mine = [i for i in range(len(inputs)) if pred.replica_of[i] == replica and pred.cached[i] >= 0]
        mine.sort(key=lambda i: (pred.records[i].send_ns, i))
        requests = [PrefixRequest(pred.records[i].send_ns, 0, hashes[i], inputs[i]) for i in mine]
        kept += sum(checkpointed_hits(requests, [pred.cached[i] for i in mine], block_size, window_tokens))
        queried += sum(inputs[i] for i in mine)
    return 100 * kept / queried if queried else 0.0
