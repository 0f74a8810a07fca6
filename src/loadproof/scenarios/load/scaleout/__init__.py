"""Scale-out of `loadproof run load`: `--workers N` (processes on this host) and `--ray-address ADDR` (Ray
tasks spread over a Ray cluster's nodes, the `loadproof[ray]` extra). docs/scenarios.md, "load", "Scale-out".

The parent plans the run as a single process would (the schedule drawn from the seed, every prompt and
body built), then:

1. splits the schedule round-robin by index (`split_schedule`): worker k of N sends requests k, k+N,
   k+2N, ... Round-robin, not contiguous blocks, because every worker then covers the whole span at 1/N of
   the rate (ramps and stages included), so the load is spread over the workers at every moment; blocks
   would hand the first worker the start of the run and the last one its end, one busy at a time.
   `--max-concurrency C` is split too (C // N each, the first C mod N one more), so at most C are in
   flight in all (a cap per worker, not one shared semaphore);
2. starts the workers (`python -m loadproof.scenarios.load.scaleout.worker SPOOL`, or the same `run_worker` as a
   Ray task pinned to a node), waits until every one is ready (imported, job loaded), then picks the start
   t0 = now + a margin on the wall clock and hands it to all: the start barrier. Each worker measures its
   own offset between the wall clock and its monotonic clock (`measure_offset`), turns t0 into its own
   `perf_counter_ns` and its sender (`load.sender.OpenLoop`) starts the schedule there;
3. each worker writes its records (with its worker id, on its own clock) to its spool, and the parent
   merges them into the run directory's `requests.jsonl` and `chunks.jsonl`, every time mapped onto the
   parent's clock: t_parent = t_worker + (offset_worker - offset_parent).

Clock alignment and its error: an offset is time_ns() read between two perf_counter_ns() readings a and b;
the wall reading happened at a monotonic time in [a, b], so the offset is known to within the bracket
b - a, and the tightest of `OFFSET_SAMPLES` brackets is kept (a few hundred ns). The midpoint estimate is
within ceil(bracket / 2), so a mapped time is within ceil(bracket_worker / 2) + ceil(bracket_parent / 2)
of the parent's clock: the manifest's `workers.alignment_error_bound_ns` (the largest over the workers).
It holds while the wall clocks agree: on one host there is one wall clock (and on Linux one monotonic
clock, so the measured shift is within that bound of 0); across Ray nodes on several hosts the hosts'
wall-clock disagreement (NTP, chrony, PTP) adds to it, which a run cannot see, and which also shifts the
start barrier. Each worker measures its offset again at its end: `drift_ns` shows a wall clock stepped
during the run. Send lag, TTFT and every latency are differences within one worker's clock, exact whatever
the alignment; what the alignment affects is how the workers' times line up (the schedule's start, the
achieved rate, the duration, the engine samples' window).

The engine metrics scraper, the live view and the report stay in the parent; the claims are computed
from the merged records exactly as for one process.

Modules: `clock` (the offsets, the mapping and its bound, the merge), `protocol` (what a worker gets and
gives back: the job, its spool folder, its result), `worker` (one worker: a process or a Ray task),
`processes` and `ray_tasks` (the two ways to start them), `parent` (split, start, merge).
"""
