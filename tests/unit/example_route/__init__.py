"""A small example route, added as a contributor adds one: one adapter file (`route.py`: an invented "echo" API
at /v1/echo, its body, its stream and its answer, both sides) and its docs section (`docs.md`), registered with
`ROUTES.register` before loadproof's command line is imported (`__main__.py`).

`python -m tests.unit.example_route run load --endpoint echo ...` is `loadproof run load` with the route known, and
`python -m tests.unit.example_route sim ...` the simulator serving it through the adapter's server side;
`report`, `publish` and `verify` work on its runs without knowing it (tests/integration/test_example_route.py).
"""

from __future__ import annotations

from pathlib import Path

NAME = "echo"
TARGET = "tests.unit.example_route.route:ROUTE"
DOCS = Path(__file__).with_name("docs.md")
