"""The live view's renderer: plain lines at a bounded cadence without a terminal, a redrawn region with one
final line per phase on a terminal."""

from __future__ import annotations

import io
import re

from rich.console import Console

from loadproof.cli.ui import LiveView
from loadproof.records import RequestRecord
from loadproof.scenarios.live import LiveStatus
from loadproof.units import NS_PER_S as NS
from tests.polling import wait_until

ANSI = re.compile(r"\x1b\[")


class Clock:
    """One fake time for the status (ns) and the view (s)."""

    def __init__(self) -> None:
        self.s = 0.0

    def ns(self) -> int:
        return int((100.0 + self.s) * NS)

    def seconds(self) -> float:
        return self.s


def plain_console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=60, force_terminal=False, color_system=None), buffer


def test_without_a_terminal_plain_lines_come_at_phase_changes_and_at_most_every_n_seconds():
    clock = Clock()
    console, buffer = plain_console()
    assert not console.is_terminal
    status = LiveStatus("capacity", clock=clock.ns)
    view = LiveView(status, console, every_s=10.0, clock=clock.seconds)
    printed_at: list[float] = []

    def run_until(seconds: float) -> None:
        while clock.s < seconds:
            clock.s = round(clock.s + 0.25, 2)
            before = buffer.getvalue().count("\n")
            view.tick()
            printed_at.extend([clock.s] * (buffer.getvalue().count("\n") - before))

    records = [RequestRecord(request_id=f"s{i}", endpoint="chat") for i in range(2)]
    run_until(3.0)
    assert buffer.getvalue() == ""  # preparing: the scenario's own status lines say what happens
    status.cold_phase(sessions=2, input_tokens=1000)
    for record in records:
        status.started(record)
        record.send_ns = clock.ns()
    run_until(25.0)
    for record in records:
        record.first_token_ns = clock.ns()
        record.chunk_ns.append(clock.ns())
        record.chunk_tokens.append(1)
        record.output_tokens = 1
    status.window("window", clock.ns(), clock.ns() + 60 * NS, records)
    run_until(40.0)
    status.drain()
    run_until(41.0)
    status.finish()
    view.tick()
    printed_at.append(clock.s)
    text = buffer.getvalue()
    lines = text.splitlines()
    assert not ANSI.search(text)
    assert printed_at[:-1] == [10.0, 20.0, 25.25, 35.25, 40.25]  # every 10 s, and at once when a phase ends
    assert lines[0].startswith("capacity cold phase 0:07: sessions sent 2/2, first tokens 0/2 (client); ETA")
    assert lines[2].startswith("capacity cold phase ended after 0:22: sessions sent 2/2, first tokens 2/2")
    assert lines[3].startswith("capacity window 0:10: 0:50 left of 1:00")
    assert lines[4].startswith("capacity window ended after 0:15: 0:15 measured")
    assert lines[5] == "capacity drain ended after 0:01: (no engine /metrics)"
    assert len(lines) == 6  # whole lines: none wrapped at the console's 60 columns
    assert max(len(line) for line in lines) > 60


def test_on_a_terminal_the_region_is_redrawn_and_each_phase_leaves_its_final_line():
    buffer = io.StringIO()
    console = Console(file=buffer, width=120, force_terminal=True, color_system="standard")
    status = LiveStatus("throughput")
    status.planned = 2
    with LiveView(status, console, refresh_s=0.01):
        status.phase("requests")
        # the live region, redrawn by the view's own timer
        wait_until(lambda: "throughput requests 0:00" in ANSI.sub("", buffer.getvalue()), 10, "the live region")
        record = RequestRecord(request_id="r", endpoint="chat", ok=True)
        status.started(record)
        status.ended(record)
        status.finish()
    text = ANSI.sub("", buffer.getvalue())
    assert re.search(r"throughput requests ended after 0:00: 1/2 done, 0 errors", text)
