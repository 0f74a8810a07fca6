"""Claim: one published number with its unit, its printed form and its formula (DESIGN.md contract)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Claim:
    name: str
    value: float | int | str | bool
    unit: str
    printed: str
    formula: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def number(name: str, value: float | int, unit: str, formula: str, decimals: int = 1) -> Claim:
    """A numeric claim printed with `decimals` places; `verify` compares at that precision."""
    printed = f"{value:.{decimals}f}" if isinstance(value, float) else str(value)
    return Claim(name=name, value=value, unit=unit, printed=printed, formula=formula)


def claims_payload(run_id: str, claims: list[Claim]) -> dict[str, Any]:
    return {"run_id": run_id, "claims": [c.as_dict() for c in claims]}
