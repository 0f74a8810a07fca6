"""`loadproof run load`, by noun (docs/scenarios.md, "load"):

- `options`: `LoadOptions`, every option of the command, typed and validated once (the rate is
  `workloads.arrivals.RequestRate`: a number of requests/s or `ALL_AT_ONCE`); `slo`: the `--slo` type;
- `schedule`: the intended send times and the stored plan (`plans.load.LoadPlan`);
- `synthetic`, `dataset`: the requests of a schedule, built before the first send;
- `sender`: the open-loop sender (`OpenLoop`) and `send_schedule` (shared with `run replay`); `chained`: the
  dependency-driven sender (`Chained`, a recorded agent's calls each after those it waited for: `run replay
  --format otel`);
- `scenario`: `LoadScenario` (the catalog's entry) and `run_load`, one run;
- `series`, `rate_search`: `--sweep` and `--search rate`, many runs;
- `scaleout/`: `--workers N` and `--ray-address`: the clock, the worker protocol, processes, Ray tasks.

Nothing is imported here: a worker process imports only what it runs.
"""
