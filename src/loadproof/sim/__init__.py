"""loadproof's simulated continuous-batching engine: a test instrument for failure paths, and the engine the
predictor (`loadproof.predict`: `plan --simulate`, `sim calibrate`) runs on a virtual clock. It never stands
in for the real engine in the demo. Low in the layers: it imports protocol, config and routing only.

- `config`: the sim profile (KV budget, scheduler limits, step cost model, faults); `assumptions`: what a
  calibration could not pin, each with its plausible values.
- `blocks`, `scheduler`: vLLM v1's paged KV with prefix caching and its scheduling policy.
- `server`, `stream`, `pooling`, `run`, `metrics`, `text`: the OpenAI-compatible HTTP server (`loadproof sim`).
- `fleet`: N of them behind a model of a router policy (`loadproof sim --replicas N --router-policy P`).
"""
