"""`--until-precision ttft_p99=5%,itl_p50=2%`: its syntax, parsed once into percents by figure, and the watch
that ends a load level once every figure named is known that precisely (docs/scenarios.md, "Until a
precision").

The figures, their intervals and the stopping rule are `metrics.precision`'s, the functions the claims use,
so the decision taken here is the one `verify` recomputes. While the open-loop schedule keeps sending at its
rate, `PrecisionWatch` reads the records ended so far about once a second (in a thread, so the sender's loop
is not held up by the arithmetic); once the rule holds it writes the `precision_stop` event (its time and how
many records it read) and sets `stop`: the sender sends nothing more, and the requests in flight finish as at a
schedule's end. --duration-s and --num-requests stay the ceiling.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, TypeVar

from pydantic import BeforeValidator, PlainSerializer

from loadproof.config.base import split_pairs
from loadproof.metrics.precision import ATTAINMENT, FIGURES, STOP_EVENT, estimates
from loadproof.records import RequestRecord
from loadproof.store.run_dir import RunWriter

PRECISION_SYNTAX = (
    "FIGURE=PERCENT, comma-separated: the 95% interval's half-width over the value, e.g. ttft_p99=5%,itl_p50=2%; "
    "a figure is LATENCY_STAT (ttft, itl, tpot, e2el; p50, p90, p95, p99, mean) or attainment (with --slo)"
)
CHECK_S = 1.0  # how often the watch reads the records


def parse_precision(value: object) -> dict[str, float]:
    """`ttft_p99=5%,itl_p50=2` -> percent by figure (a dict of numbers passes through); each figure one of
    `metrics.precision.FIGURES`, once, its percent in (0, 100)."""
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    else:
        items = split_pairs(str(value), f"each part is {PRECISION_SYNTAX}", need_value=True)
    if not items:
        raise ValueError(f"takes {PRECISION_SYNTAX}")
    asked: dict[str, float] = {}
    for name, raw in items:
        if name not in FIGURES:
            raise ValueError(f"unknown figure {name!r}: takes {', '.join(FIGURES)}")
        if name in asked:
            raise ValueError(f"{name} is given twice")
        pct = _percent(name, raw)
        if not (math.isfinite(pct) and 0 < pct < 100):
            raise ValueError(f"{name}={raw}: a half-width is a percent between 0 and 100, e.g. {name}=5%")
        asked[name] = pct
    return asked


def _percent(name: str, raw: object) -> float:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    text = str(raw).strip().removesuffix("%").strip()
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{name}={raw}: not a percent; e.g. {name}=5%") from None


def precision_text(asked: Mapping[str, float]) -> str:
    return ",".join(f"{name}={pct:g}%" for name, pct in asked.items())


Precision = Annotated[dict[str, float], BeforeValidator(parse_precision), PlainSerializer(precision_text)]


def check_precision(
    asked: Mapping[str, float], slo: Mapping[str, float] | None, all_at_once: bool, scaled_out: bool
) -> None:
    """What --until-precision needs of the run's other options (a ValueError, LoadOptions' one line): an SLO for
    attainment, a schedule sent over time (not --rate inf, nor --sweep auto's runs), by one process."""
    if ATTAINMENT in asked and not slo:
        raise ValueError("--until-precision attainment=...: SLO attainment needs --slo, e.g. --slo ttft=2s")
    if all_at_once:
        raise ValueError(
            "--until-precision stops a schedule sent over time: --rate inf (and --sweep auto's first runs) send "
            "every request at once"
        )
    if scaled_out:
        raise ValueError(
            "--until-precision reads every record as it ends, in one process: not with --workers or --ray-address"
        )


class PrecisionWatch:
    """Reads the records as they end (`add`, in the order requests.jsonl gets them) and sets `stop` once every
    figure asked is precise enough, writing the `precision_stop` event first."""

    def __init__(
        self,
        asked: Mapping[str, float],
        slo: Mapping[str, float],
        writer: RunWriter,
        status: Callable[[str], None],
        *,
        every_s: float = CHECK_S,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.asked = dict(asked)
        self.slo = dict(slo)
        self.writer = writer
        self.status = status
        self.every_s = every_s
        self.clock = clock
        self.records: list[RequestRecord] = []
        self.stop = asyncio.Event()
        self.sending: Callable[[], bool] = lambda: True  # whether a stop would still end anything (the sender's)

    def add(self, record: RequestRecord) -> None:
        self.records.append(record)

    async def check(self) -> bool:
        """Whether the records so far meet every precision asked; if so, the event is written and `stop` set."""
        read = len(self.records)
        found = await asyncio.to_thread(estimates, self.records[:read], self.asked, self.slo)
        if not self.sending() or not all(e.reached(self.asked[e.figure]) for e in found):
            return False
        self.writer.event(STOP_EVENT, t_ns=self.clock(), records=read)
        self.stop.set()
        reached = ", ".join(f"{e.figure} +/-{e.relative_pct:.2f}%" for e in found)
        self.status(f"precision reached after {read} requests ({reached}): sending stops, those in flight finish")
        return True

    async def run(self) -> None:
        checked = 0
        while not self.stop.is_set():
            await asyncio.sleep(self.every_s)
            if self.records and not self.sending():
                return  # the schedule ended before the precision was reached: nothing left to stop
            if len(self.records) > checked:
                checked = len(self.records)
                if await self.check():
                    return


T = TypeVar("T")


async def watched(watch: PrecisionWatch | None, work: Awaitable[T]) -> T:
    """`work` (the schedule's sending) with `watch` running beside it until it ends."""
    if watch is None:
        return await work
    task = asyncio.create_task(watch.run())
    try:
        return await work
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
