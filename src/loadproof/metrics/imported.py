"""An imported run's claims where its file had no per-request data (docs/import.md): the figures the file states,
each under the name of the loadproof claim of the same meaning, so `compare` and `history` line them up with a
load run's, and none invented.

`loadproof import` (`ingest/`) keeps each figure the file states as a `rundir.source.StatedFigure` of the
manifest's `source`: its `figure` is one of the names below (a latency of `metrics.latency`, a rate or a count
of `metrics.load`), its statistic, its value in loadproof's unit and the file's key. A stated figure carries no
interval: the file gives no values to draw one from. Where the file has per-request data, the run's records
carry it and the load scenario's own claims are recomputed from them as for any run; this module is not used.
"""

from __future__ import annotations

from loadproof.metrics.claims import Claim, Direction, count, number
from loadproof.metrics.latency import LATENCIES
from loadproof.rundir.source import Source, StatedFigure

PREFIX = "load"  # the scenario an imported run is: an open-loop (or concurrency-capped) load
# the latencies a file may state, by the name of their load claim's middle part (`load.ttft_s.p50`)
TTFT, ITL, TPOT, E2EL = "ttft_s", "itl_s", "tpot_s", "e2el_s"
STATED_LATENCIES = {latency.name: latency for latency in LATENCIES if latency.name in (TTFT, ITL, TPOT, E2EL)}
# rates and totals: (unit, decimals, direction, what it is in a load run)
REQUEST_RATE, OUTPUT_RATE, INPUT_RATE, DURATION = (
    "request_throughput_rps",
    "output_tokens_per_s",
    "input_tokens_per_s",
    "duration_s",
)
STATED_RATES: dict[str, tuple[str, int, Direction, str]] = {
    REQUEST_RATE: ("requests/s", 3, "higher", "successful requests / duration"),
    OUTPUT_RATE: ("tokens/s", 1, "higher", "output tokens of successful requests / duration"),
    INPUT_RATE: ("tokens/s", 1, "higher", "prompt tokens of successful requests / duration"),
    DURATION: ("s", 3, "neither", "the benchmark's duration"),
}
REQUESTS, FAILED = "requests", "failed_requests"
STATED_COUNTS: dict[str, tuple[str, Direction, str]] = {
    REQUESTS: ("requests", "neither", "requests the benchmark sent"),
    FAILED: ("requests", "lower", "requests that failed"),
}
STATISTICS = ("mean", "std", "min", "max")  # besides percentiles, pNN (p99_9 for the 99.9th)


def stat_name(percentile: float) -> str:
    """A percentile's statistic as loadproof names it: 50 -> p50, 99.9 -> p99_9."""
    return "p" + f"{percentile:g}".replace(".", "_")


def known(figure: StatedFigure) -> bool:
    """Whether a stated figure is one this module names a claim for."""
    if figure.figure in STATED_LATENCIES:
        return figure.stat in STATISTICS or (figure.stat.startswith("p") and figure.stat[1:].replace("_", "").isdigit())
    return figure.figure in STATED_RATES or figure.figure in STATED_COUNTS


def stated_claims(source: Source) -> list[Claim]:
    """The claims of what `source`'s file states, in its order (each figure once; see the module doc)."""
    said = f"stated by {source.tool} {source.version} in {source.file}"
    claims: list[Claim] = []
    for figure in source.stated:
        if not known(figure):
            continue
        where = f"{said}, {figure.where}; not recomputed: the file holds no per-request data"
        if figure.figure in STATED_LATENCIES:
            latency = STATED_LATENCIES[figure.figure]
            claims.append(
                number(
                    f"{PREFIX}.{latency.name}.<stat>",
                    figure.value,
                    "s",
                    f"{figure.stat} of {latency.formula}: {where}",
                    latency.decimals,
                    direction="lower" if figure.stat != "std" else "neither",
                    parts={"stat": figure.stat},
                )
            )
        elif figure.figure in STATED_RATES:
            unit, decimals, direction, what = STATED_RATES[figure.figure]
            claims.append(
                number(
                    f"{PREFIX}.{figure.figure}", figure.value, unit, f"{what}: {where}", decimals, direction=direction
                )
            )
        else:
            unit, direction, what = STATED_COUNTS[figure.figure]
            claims.append(
                count(f"{PREFIX}.{figure.figure}", round(figure.value), unit, f"{what}: {where}", direction=direction)
            )
    return _once(claims)


def _once(claims: list[Claim]) -> list[Claim]:
    seen: set[str] = set()
    out = []
    for claim in claims:
        if claim.name not in seen:
            seen.add(claim.name)
            out.append(claim)
    return out


__all__ = ["known", "stat_name", "stated_claims"]
