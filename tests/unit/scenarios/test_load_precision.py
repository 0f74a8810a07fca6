"""`--until-precision`: parsed once (a bad figure or percent is one line naming the valid ones), refused where
nothing could stop, kept by every level of a sweep or search; the watch stops the open loop once the records
meet the rule, writing the event the claims read, and the requests in flight then finish."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest

from loadproof.errors import ConfigError
from loadproof.metrics.precision import FIGURES, STOP_EVENT
from loadproof.records import RequestRecord
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.load.precision import PrecisionWatch, parse_precision
from loadproof.scenarios.load.sender import OpenLoop
from loadproof.scenarios.options import from_cli
from tests.unit.metrics.test_precision import records
from tests.unit.scenarios.test_load_options import BASE
from tests.unit.scenarios.test_load_sender import FakeClient, ScriptedClock, planned


def test_figures_and_percents_parse_once():
    assert parse_precision("ttft_p99=5%, itl_p50=2") == {"ttft_p99": 5.0, "itl_p50": 2.0}
    assert parse_precision({"attainment": 1}) == {"attainment": 1.0}
    options = from_cli(LoadOptions, {"rate": "2", "duration_s": 60.0, "until_precision": "ttft_p50=5%"}, "load")
    assert options.until_precision == {"ttft_p50": 5.0}
    dumped = options.model_dump()  # the manifest's options: as typed
    assert dumped["until_precision"] == "ttft_p50=5%" and LoadOptions.model_validate(dumped) == options
    assert options.one_run(4.0).until_precision == {"ttft_p50": 5.0}  # a sweep's point, a search's trial


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ttft_p98=5%", "unknown figure 'ttft_p98': takes ttft_p50, "),
        ("ttft_std=5%", "unknown figure 'ttft_std'"),
        ("ttft_p99", "each part is FIGURE=PERCENT"),
        ("ttft_p99=", "each part is FIGURE=PERCENT"),
        ("ttft_p99=fine", "ttft_p99=fine: not a percent"),
        ("ttft_p99=0%", "a half-width is a percent between 0 and 100"),
        ("ttft_p99=100", "a half-width is a percent between 0 and 100"),
        ("ttft_p50=5%,ttft_p50=3%", "ttft_p50 is given twice"),
        (",", "takes FIGURE=PERCENT"),
    ],
)
def test_a_bad_precision_says_what_it_takes(text, message):
    with pytest.raises(ValueError) as err:
        parse_precision(text)
    assert message in str(err.value)


def test_every_figure_is_named_in_the_error():
    with pytest.raises(ValueError) as err:
        parse_precision("p99=1%")
    assert all(figure in str(err.value) for figure in FIGURES)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"rate": "2", "duration_s": 9.0, "until_precision": "attainment=5%"}, "SLO attainment needs --slo"),
        ({"rate": "inf", "num_requests": 9, "until_precision": "ttft_p50=5%"}, "send every request at once"),
        ({"sweep": "auto", "num_requests": 9, "until_precision": "ttft_p50=5%"}, "send every request at once"),
        ({"rate": "2", "duration_s": 9.0, "workers": 2, "until_precision": "ttft_p50=5%"}, "not with --workers"),
        ({"rate": "2", "until_precision": "ttft_p50=5%"}, "bound the run with --num-requests N or --duration-s D"),
    ],
)
def test_where_nothing_could_stop_it_is_refused(values, message):
    with pytest.raises(ConfigError) as err:
        from_cli(LoadOptions, values, "load options")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_bad_figure_on_the_command_line_is_one_line_and_exit_2():
    args = [*BASE, "--rate", "2", "--duration-s", "5", "--until-precision", "ttft_p98=5%"]
    result = subprocess.run([sys.executable, "-m", "loadproof", *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "unknown figure 'ttft_p98'" in result.stderr and len(result.stderr.strip().splitlines()) == 1


class Writer:
    """RunWriter.event's contract: the events written, in order."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def event(self, kind: str, **fields: Any) -> None:
        self.events.append({"kind": kind, **fields})


def watch(asked: dict[str, float], sending: bool = True) -> tuple[PrecisionWatch, Writer, list[str]]:
    writer, said = Writer(), []
    w = PrecisionWatch(asked, {}, writer, said.append, clock=lambda: 42)  # type: ignore[arg-type]  # Writer stands in for RunWriter: only event() is called
    w.sending = lambda: sending
    return w, writer, said


def test_the_watch_stops_once_the_records_meet_the_rule_and_says_how_many_it_read():
    w, writer, said = watch({"ttft_p50": 5.0})
    rs = records(400)
    for r in rs[:20]:
        w.add(r)
    assert asyncio.run(w.check()) is False and not w.stop.is_set() and writer.events == []  # under MIN_REQUESTS
    for r in rs[20:]:
        w.add(r)
    assert asyncio.run(w.check()) is True and w.stop.is_set()
    assert writer.events == [{"kind": STOP_EVENT, "t_ns": 42, "records": 400}]
    assert "precision reached after 400 requests (ttft_p50 +/-" in said[0]


def test_a_schedule_that_already_sent_everything_is_not_said_to_have_stopped():
    w, writer, _ = watch({"ttft_p50": 50.0}, sending=False)
    for r in records(100):
        w.add(r)
    assert asyncio.run(w.check()) is False and writer.events == []


def test_the_open_loop_stops_sending_at_the_stop_and_lets_those_in_flight_finish():
    async def go() -> tuple[OpenLoop, FakeClient, list[RequestRecord]]:
        clock = ScriptedClock()
        hold = asyncio.Event()
        client = FakeClient(clock, hold=hold)
        stop = asyncio.Event()
        loop = OpenLoop(
            client, planned([0.0, 0.001, 5.0, 6.0]), max_concurrency=None, clock=clock, sleep=clock.sleep, stop=stop
        )  # type: ignore[arg-type]  # FakeClient stands in for StreamingClient: the same stream(), no HTTP
        run = asyncio.create_task(loop.run())
        while loop.dispatched < 2:
            await asyncio.sleep(0)  # sleep: a turn of the event loop, on a virtual clock: nothing real to wait for
        assert loop.sending
        stop.set()
        hold.set()  # the two in flight answer
        await asyncio.wait_for(run, 5.0)
        return loop, client, client.records

    loop, client, done = asyncio.run(go())
    assert loop.dispatched == 2 and not loop.sending
    assert sorted(r.request_id for r in done) == ["load-0", "load-1"]
    assert all(r.ok and r.error_kind is None for r in done)  # finished, not cancelled
