"""What a calibration cannot pin: each scheduler or hardware assumption as an explicit part of the sim
profile, with its plausible values (docs/simulator.md, "Ranges").

An `Assumption` names one thing the inputs do not determine, its point value (what the profile's costs
and limits already say), and its `variants`: every plausible value with the changes it makes to the
profile (`overrides`, a field of `SimConfig` or `cost.FIELD` of its cost model). The calibration computes
the overrides, re-fitting the inputs under each value where the value changes the fit (the KV-read
efficiency changes the long-context acceptance the relay's rate implies; the front-end overhead changes
the prefill left to the engine), so every variant still reproduces the inputs. Where an input pins an
assumption (a capacity run's spacing of first tokens pins the front-end overhead; a run's profile states
the scheduler's limits) it has one variant and `pinned_by` names the input.

`sim.ranges` predicts under each variant and reports the range.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from loadproof.config.base import StrictModel

WHAT = {
    "concurrent_long_prefills": "how many long prompts the scheduler prefills at once (vLLM's "
    "long_prefill_token_threshold = budget / k; 1: no threshold, one at a time)",
    "pipeline_batching": "how the pipeline stages run the decoding sessions: alternating micro-batches, one per "
    "stage (vLLM's batch queue), or one batch",
    "kv_read_efficiency": "the share of the GPU's memory bandwidth a decode step reads the KV cache at",
    "draft_acceptance": "the speculative drafts' acceptance on the scenario's own text",
    "frontend_s_per_token": "upload and tokenization per prompt token, which a batch overlaps with other prefills",
    "prefill_attention_share": "the share of a prompt's prefill that is attention (quadratic in its length)",
    "decode_context_share": "the share of a decode step that grows with the resident context",
}
PREFILL_WAYS = (1, 2, 4)  # concurrent long prefills a deployment plausibly runs
BATCHING = ("alternating", "one_batch")


class Variant(StrictModel):
    """One plausible value and what it changes in the profile (nothing, for the point)."""

    value: int | float | str
    overrides: dict[str, float | int | str] = Field(default_factory=dict)


class Assumption(StrictModel):
    name: str
    point: int | float | str
    variants: list[Variant] = Field(min_length=1)
    pinned_by: str = Field(default="", description="the input that pinned it (then one variant, the point)")

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in WHAT:
            raise ValueError(f"unknown assumption {value!r}; known: {', '.join(WHAT)}")
        return value

    @model_validator(mode="after")
    def _point_is_a_variant(self) -> Assumption:
        if not any(v.value == self.point for v in self.variants):
            raise ValueError(f"assumption {self.name}: its point {self.point!r} is not among its values")
        if self.pinned_by and len(self.variants) != 1:
            raise ValueError(f"assumption {self.name}: pinned by {self.pinned_by}, so one value")
        return self

    @property
    def what(self) -> str:
        return WHAT[self.name]

    @property
    def values(self) -> list[float | str]:
        return [v.value for v in self.variants]

    @property
    def open(self) -> bool:
        """Not pinned, and more than one value to try."""
        return not self.pinned_by and len(self.variants) > 1


def with_overrides(config: Any, overrides: dict[str, Any]) -> Any:
    """`config` (a SimConfig) with `overrides` applied (`FIELD` or `cost.FIELD`), validated."""
    if not overrides:
        return config
    top = {k: v for k, v in overrides.items() if not k.startswith("cost.")}
    cost = {k.removeprefix("cost."): v for k, v in overrides.items() if k.startswith("cost.")}
    data = config.model_dump()
    data.update(top)
    data["cost"].update(cost)
    return type(config).model_validate(data)


def differences(point: Any, other: Any) -> dict[str, Any]:
    """The overrides that turn SimConfig `point` into `other` (cost fields as `cost.FIELD`), the
    provenance fields (source, inputs, assumptions) left out."""
    a, b = point.model_dump(), other.model_dump()
    out: dict[str, Any] = {}
    for key, value in b.items():
        if key in ("source", "inputs", "assumptions"):
            continue
        if key == "cost":
            out.update({f"cost.{k}": v for k, v in value.items() if a["cost"].get(k) != v and _scalar(v)})
        elif a.get(key) != value and _scalar(value):
            out[key] = value
    return out


def _scalar(value: Any) -> bool:
    return isinstance(value, (int, float, str)) and not isinstance(value, bool)


def pinned(name: str, value: float | str, by: str) -> Assumption:
    return Assumption(name=name, point=value, variants=[Variant(value=value)], pinned_by=by)


def from_fits(name: str, point: float | str, fits: dict[float | str, Any], point_config: Any) -> Assumption:
    """An assumption whose every value re-fitted the inputs: `fits` maps each value to its SimConfig."""
    variants = [Variant(value=v, overrides={} if v == point else differences(point_config, c)) for v, c in fits.items()]
    return Assumption(name=name, point=point, variants=variants)


def scheduler_assumptions(config: Any, *, prefills_pinned_by: str = "") -> list[Assumption]:
    """The scheduler's: concurrent long prefills (vLLM's long_prefill_token_threshold, pinned where the
    engine's settings are known) and, with pipeline stages, how the stages batch the decoding sessions."""
    budget = config.max_num_batched_tokens
    current = config.long_prefill_token_threshold
    k_now = max(1, budget // current) if current else 1
    out = []
    if prefills_pinned_by:
        out.append(pinned("concurrent_long_prefills", k_now, prefills_pinned_by))
    else:
        ways = sorted({*PREFILL_WAYS, k_now})
        out.append(
            Assumption(
                name="concurrent_long_prefills",
                point=k_now,
                variants=[
                    Variant(
                        value=k,
                        overrides={} if k == k_now else {"long_prefill_token_threshold": 0 if k == 1 else budget // k},
                    )
                    for k in ways
                ],
            )
        )
    if config.cost.pipeline_stages > 1:
        now = config.cost.pipeline_batching
        out.append(
            Assumption(
                name="pipeline_batching",
                point=now,
                variants=[
                    Variant(value=b, overrides={} if b == now else {"cost.pipeline_batching": b}) for b in BATCHING
                ],
            )
        )
    return out
