"""loadproof's simulator of a continuous-batching engine: a test instrument for failure paths and a
what-if planner for deployments larger than any machine at hand. It never stands in for the real
engine in the demo.

- `config`: the sim profile (KV budget, scheduler limits, step cost model, faults).
- `blocks`, `scheduler`: vLLM v1's paged KV with prefix caching and its scheduling policy.
- `virtual`: scenarios on a virtual clock; `predict`: what a scenario's run would measure, from its own
  options and judged by its own metrics (`loadproof plan --simulate`, `sim predict-load|predict-replay`).
- `server`, `run`, `metrics`, `text`: the OpenAI-compatible HTTP server (`loadproof sim`).
- `calibrate`: fitting the cost model to measured runs; `calibration`: the command's inputs, base profile,
  grid and output (`loadproof sim calibrate`).
"""
