"""Claim: one published result with its unit, its printed form, its formula, and its meaning.

Meaning is set where the claim is computed, never guessed from its name afterwards:

- `kind`: `figure` (a measured or derived number), `count` (a whole number of things: requests,
  sessions, tokens counted, items), `fact` (a yes/no or a text, e.g. why a suite was skipped),
  `verdict` (an acceptance: PASS or FAIL) or `criterion` (one criterion of that acceptance: PASS,
  FAIL or SKIPPED, its evidence as the formula);
- `direction`: which way is better, `higher`, `lower` or `neither` (settings, plan echoes, engine
  agreement, and every fact, verdict and criterion).

Both go to claims.json beside name, value, unit, printed and formula, and a measured figure's `interval`
(low, high, confidence, method; metrics/intervals.py) where it has one; `compare`, `report` and `verify`
read them. `pattern` is the claim's name with its variable parts as placeholders
(`throughput.<family>.c<N>.decode_tokens_per_s`), exactly as docs/ documents it; it stays in memory
(the docs-formula test reads it), not in claims.json.

Constructors: `number` (figures), `count`, `fact`, `acceptance_claims` (a verdict and its criteria).
A name may hold `<part>` placeholders, filled from `parts`; the unfilled name is the pattern.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from loadproof.metrics.intervals import Interval

Kind = Literal["figure", "count", "fact", "verdict", "criterion"]
Direction = Literal["higher", "lower", "neither"]
KINDS: tuple[str, ...] = ("figure", "count", "fact", "verdict", "criterion")
DIRECTIONS: tuple[str, ...] = ("higher", "lower", "neither")
ACCEPTANCE = ("verdict", "criterion")  # kinds that say PASS or FAIL rather than measure
SERIALIZED = ("name", "value", "unit", "printed", "formula", "kind", "direction")  # a claims.json entry

_PLACEHOLDER = re.compile(r"<([A-Za-z_][A-Za-z0-9_]*)>")


@dataclass(frozen=True)
class Claim:
    name: str
    value: float | int | str | bool
    unit: str
    printed: str
    formula: str
    kind: Kind
    direction: Direction
    pattern: str = field(default="", compare=False, repr=False)  # the documented name; `name` when fixed
    interval: Interval | None = None  # a measured figure's confidence interval (metrics/intervals.py), if any

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.name}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"claim {self.name}: direction {self.direction!r} is not one of {', '.join(DIRECTIONS)}")
        if self.kind not in ("figure", "count") and self.direction != "neither":
            raise ValueError(f"claim {self.name}: a {self.kind} has no better direction")
        if not self.pattern:
            object.__setattr__(self, "pattern", self.name)

    @property
    def is_number(self) -> bool:
        return self.kind in ("figure", "count")

    def as_dict(self) -> dict[str, Any]:
        out = {key: getattr(self, key) for key in SERIALIZED}
        if self.interval is not None:
            out["interval"] = interval_dict(self.interval)
        return out


def interval_dict(interval: Interval) -> dict[str, Any]:
    """A claim's interval as claims.json keeps it: low, high, confidence and method."""
    return {"low": interval.low, "high": interval.high, "confidence": interval.confidence, "method": interval.method}


def fill(pattern: str, parts: Mapping[str, object] | None) -> str:
    """`pattern` with each `<part>` replaced by str(parts[part]); every placeholder and part must meet."""
    parts = parts or {}
    wanted = set(_PLACEHOLDER.findall(pattern))
    if wanted != set(parts):
        raise ValueError(f"claim pattern {pattern!r} has placeholders {sorted(wanted)}, given parts {sorted(parts)}")
    return _PLACEHOLDER.sub(lambda m: str(parts[m.group(1)]), pattern)


def number(
    name: str,
    value: float | int,
    unit: str,
    formula: str,
    decimals: int = 1,
    *,
    direction: Direction,
    parts: Mapping[str, object] | None = None,
    interval: Interval | None = None,
) -> Claim:
    """A figure printed with `decimals` places (an int as itself); `verify` compares at that precision, its
    `interval` (if any) too."""
    printed = f"{value:.{decimals}f}" if isinstance(value, float) else str(value)
    return Claim(fill(name, parts), value, unit, printed, formula, "figure", direction, name, interval)


def count(
    name: str, value: int, unit: str, formula: str, *, direction: Direction, parts: Mapping[str, object] | None = None
) -> Claim:
    """A whole number of things (requests, sessions, items, tokens counted)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"claim {name}: a count is a whole number (got {type(value).__name__})")
    return Claim(fill(name, parts), value, unit, str(value), formula, "count", direction, name)


def fact(name: str, value: bool | str, formula: str, parts: Mapping[str, object] | None = None) -> Claim:
    """A yes/no (printed yes or no) or a text (printed as itself); never judged better or worse."""
    printed = ("yes" if value else "no") if isinstance(value, bool) else value
    return Claim(fill(name, parts), value, "", printed, formula, "fact", "neither", name)


@dataclass(frozen=True)
class Criterion:
    """One acceptance criterion: PASS, FAIL or SKIPPED, with its evidence in words."""

    name: str
    status: str  # PASS | FAIL | SKIPPED
    evidence: str

    @property
    def failed(self) -> bool:
        return self.status == "FAIL"


def acceptance_claims(prefix: str, criteria: list[Criterion]) -> list[Claim]:
    """`<prefix>.verdict` (PASS only if no criterion failed) and one `<prefix>.criteria.<name>` per criterion."""
    verdict = "FAIL" if any(c.failed for c in criteria) else "PASS"
    out = [
        Claim(f"{prefix}.verdict", verdict, "", verdict, "PASS only if every criterion passed", "verdict", "neither")
    ]
    out += [
        Claim(f"{prefix}.criteria.{c.name}", c.status, "", c.status, c.evidence, "criterion", "neither")
        for c in criteria
    ]
    return out


def verdict_of(claims: list[Claim]) -> Claim | None:
    """The acceptance verdict among a run's claims, if its scenario has one."""
    return next((c for c in claims if c.kind == "verdict"), None)


def criteria_of(claims: list[Claim]) -> list[Claim]:
    """Every acceptance criterion among a run's claims, in order."""
    return [c for c in claims if c.kind == "criterion"]


def criterion_name(claim: Claim) -> str:
    """`running` of `capacity.criteria.running`."""
    return claim.name.rsplit(".", 1)[-1]


def claims_payload(run_id: str, claims: list[Claim]) -> dict[str, Any]:
    return {"run_id": run_id, "claims": [c.as_dict() for c in claims]}
