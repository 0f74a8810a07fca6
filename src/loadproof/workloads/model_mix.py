"""A model mix (`--model-mix NAME=WEIGHT,...`): which model (a base model, a LoRA adapter, another model behind
the same endpoint) each request of a run asks for, drawn per request with the run's seed in proportion to the
weights (docs/scenarios.md, "load", "Model and adapter mixes").

The weights are relative (0.5,0.3,0.2 and 5,3,2 are the same mix); each is a finite number >= 0 and they sum
to more than 0. Request k's model is the first whose cumulative share exceeds a uniform draw of a generator
seeded with (seed, "model-mix"), so the same seed sends the same models in the same order. Standard library
only.
"""

from __future__ import annotations

import math
import random

from loadproof.config.base import split_pairs

MIX_SYNTAX = "NAME=WEIGHT,... e.g. base=0.5,adapter-a=0.3,adapter-b=0.2 (each a name /v1/models lists)"


def parse_mix(value: object) -> dict[str, float]:
    """`a=0.5,b=0.5` -> {"a": 0.5, "b": 0.5}, in order (a mapping passes through, checked)."""
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    else:
        items = split_pairs(str(value), f"each part is {MIX_SYNTAX}", need_value=True)
    if not items:
        raise ValueError(f"takes {MIX_SYNTAX}")
    mix: dict[str, float] = {}
    for name, raw in items:
        if not name:
            raise ValueError(f"a weight without a model name: takes {MIX_SYNTAX}")
        if name in mix:
            raise ValueError(f"model {name!r} is given twice")
        try:
            weight = float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"{name}={raw}: the weight is not a number") from None
        if not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"{name}={raw}: a weight is a finite number >= 0")
        mix[name] = weight
    if sum(mix.values()) <= 0:
        raise ValueError(f"the weights sum to {sum(mix.values()):g}: they must sum to more than 0")
    return mix


def mix_text(mix: dict[str, float]) -> str:
    return ",".join(f"{name}={weight:g}" for name, weight in mix.items())


def draw_models(mix: dict[str, float], n: int, seed: int) -> list[str]:
    """Each of `n` requests' model, seeded, in proportion to the weights."""
    names = [name for name, weight in mix.items() if weight > 0]
    total = sum(mix[name] for name in names)
    bounds, running = [], 0.0
    for name in names:
        running += mix[name] / total
        bounds.append(running)
    rng = random.Random(f"{seed}:model-mix")
    out = []
    for _ in range(n):
        u = rng.random()
        out.append(next((name for name, bound in zip(names, bounds) if u < bound), names[-1]))
    return out


__all__ = ["MIX_SYNTAX", "draw_models", "mix_text", "parse_mix"]
