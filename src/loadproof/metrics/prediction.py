"""A run judged against its prediction contract (`run ... --prediction FILE`; `rundir.prediction`).

For each predicted figure (a claim of the run's own scenario, by name):

- `prediction.<claim>.predicted`: the point value promised; `.low` and `.high`: its range;
- `prediction.<claim>.error_pct` = (measured - predicted) / predicted x 100;
- `prediction.<claim>.in_range`: low <= measured <= high;
- `prediction.criteria.<claim with dots as _>`: PASS when |error_pct| <= the contract's tolerance_pct, else
  FAIL (also FAIL when the run has no such claim: nothing measured it);

and `prediction.verdict`: PASS only if every figure held, `prediction.tolerance_pct` its tolerance. The
measured value is the scenario's claim itself, so `verify` recomputes the judgement from the records
and the manifest's contract alone.
"""

from __future__ import annotations

from loadproof.metrics.claims import Claim, Criterion, acceptance_claims, fact, number
from loadproof.rundir.prediction import Prediction


def prediction_claims(prediction: Prediction | None, measured: list[Claim]) -> list[Claim]:
    if prediction is None:
        return []
    by_name = {c.name: c for c in measured}
    out: list[Claim] = [
        number(
            "prediction.tolerance_pct",
            float(prediction.tolerance_pct),
            "%",
            "the contract's tolerance on each figure's error",
            1,
            direction="neither",
        )
    ]
    criteria = []
    tol = prediction.tolerance_pct
    for f in prediction.figures:
        parts = {"claim": f.claim}
        out += [
            number(
                "prediction.<claim>.predicted",
                f.point,
                "",
                "the contract's point value",
                4,
                direction="neither",
                parts=parts,
            ),
            number(
                "prediction.<claim>.low",
                f.low,
                "",
                "the contract's range, low end",
                4,
                direction="neither",
                parts=parts,
            ),
            number(
                "prediction.<claim>.high",
                f.high,
                "",
                "the contract's range, high end",
                4,
                direction="neither",
                parts=parts,
            ),
        ]
        claim = by_name.get(f.claim)
        name = f.claim.replace(".", "_")
        if claim is None or not claim.is_number:
            criteria.append(Criterion(name, "FAIL", f"{f.claim}: the run has no such figure to compare"))
            continue
        value = float(claim.value)
        error = 100 * (value - f.point) / f.point if f.point else (0.0 if value == 0 else float("inf"))
        inside = f.low <= value <= f.high
        out += [
            number(
                "prediction.<claim>.error_pct",
                error,
                "%",
                "(measured - predicted) / predicted x 100",
                1,
                direction="neither",
                parts=parts,
            ),
            fact("prediction.<claim>.in_range", inside, "low <= measured <= high", parts=parts),
        ]
        status = "PASS" if abs(error) <= tol else "FAIL"
        criteria.append(
            Criterion(
                name,
                status,
                f"{f.claim}: measured {claim.printed}, predicted {f.point:.6g} "
                f"[{f.low:.6g}, {f.high:.6g}], error {error:+.1f}% (tolerance {tol:g}%), "
                f"{'inside' if inside else 'outside'} the range"
                + (f"; its width is driven by {f.driver}" if f.driver else ""),
            )
        )
    return acceptance_claims("prediction", criteria) + out
