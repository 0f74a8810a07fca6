"""Per-request SLOs (`--slo ttft=2s,tpot=50ms`): their syntax, parsed once into seconds by name.

The SLOs themselves (what each measures of a request) are `metrics.load.SLO_DEFINITIONS`; `run load` and
`run replay` take them as this `Slo` type.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BeforeValidator

from loadproof.config.base import split_pairs
from loadproof.metrics.slo import SLO_DEFINITIONS

SLO_SYNTAX = "NAME=VALUE with a unit (s or ms), comma-separated, e.g. ttft=2s,tpot=50ms,itl_p99=200ms,e2el=30s"


def parse_slo(value: object) -> dict[str, float]:
    """`ttft=2s,tpot=50ms,itl_p99=200ms,e2el=30s` -> seconds by SLO name (a dict of seconds passes through)."""
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    else:
        items = split_pairs(str(value), f"each SLO is {SLO_SYNTAX}")
    if not items:
        raise ValueError(f"takes {SLO_SYNTAX}")
    slo: dict[str, float] = {}
    for name, raw in items:
        if name not in SLO_DEFINITIONS:
            raise ValueError(f"unknown SLO {name!r}: takes {', '.join(SLO_DEFINITIONS)}")
        if name in slo:
            raise ValueError(f"SLO {name} is given twice")
        seconds = raw if isinstance(raw, (int, float)) and not isinstance(raw, bool) else _duration(name, str(raw))
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"{name} must be a duration > 0 (got {raw!r})")
        slo[name] = float(seconds)
    return slo


def _duration(name: str, text: str) -> float:
    for unit, scale in (("ms", 1e-3), ("s", 1.0)):
        if text.endswith(unit):
            number = text[: -len(unit)].strip()
            try:
                return float(number) * scale
            except ValueError:
                break
    else:
        raise ValueError(f"{name}={text}: give a unit, s or ms (e.g. {name}=2s or {name}=500ms)")
    raise ValueError(f"{name}={text}: not a duration; takes {SLO_SYNTAX}")


Slo = Annotated[dict[str, float], BeforeValidator(parse_slo)]
