"""Quality under load, the scenario's side: the options (composed from the load's), each asked row's digest
and the window of a changed answer, and the load's schedule cut where the items end."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from loadproof.errors import ConfigError
from loadproof.scenarios.base import Target
from loadproof.scenarios.options import from_cli
from loadproof.scenarios.quality_items import Job, QualityItems
from loadproof.scenarios.quality_options import QualityOptions
from loadproof.scenarios.quality_under_load import CutSchedule, compared_with_idle
from loadproof.workloads.quality import authored
from loadproof.workloads.quality.changes import digest


def job(item: str, under_load: bool = False) -> Job:
    row = {"suite": "authored", "item_id": item, "mode": "plain", **({"under_load": True} if under_load else {})}
    return Job(row=row, prompt="p", max_tokens=8)


def test_an_idle_answer_is_kept_and_the_under_load_one_compared_with_it():
    idle: dict = {}
    assert compared_with_idle(job("a"), " 42", True, idle) == {"answer_sha256": digest(" 42")}
    assert compared_with_idle(job("b"), "", False, idle) == {"answer_sha256": digest("")}
    assert idle == {("authored", "a", "plain"): " 42"}  # a failed idle request leaves nothing to compare
    assert compared_with_idle(job("a", True), " 42", True, idle) == {"answer_sha256": digest(" 42")}
    changed = compared_with_idle(job("a", True), " 41", True, idle)
    assert changed == {
        "answer_sha256": digest(" 41"),
        "answer_diff_at": 2,
        "answer_text": " 41",
        "idle_answer_text": " 42",
    }
    assert "answer_diff_at" not in compared_with_idle(job("b", True), " x", True, idle)
    assert job("a", True).request_id == "a.plain.under-load" and job("a").request_id == "a.plain"


def test_the_schedule_is_cut_once_done_and_says_when_the_first_was_sent():
    async def go():
        schedule = CutSchedule(list(range(10)))  # type: ignore[arg-type]  # ints stand in for requests: the schedule only hands its items on
        taken = []
        for item in schedule:
            taken.append(item)
            if item == 0:
                assert not schedule.started.is_set()
            if item == 1:
                assert schedule.started.is_set()
            if item == 3:
                schedule.cut.set()
        assert taken == [0, 1, 2, 3] and schedule.taken == 4 and len(schedule) == 10

    asyncio.run(go())


def test_options_compose_the_load_scenarios_and_off_by_default():
    assert QualityOptions().under_load_rate is None
    opts = QualityOptions(under_load_rate=2, under_load_input_tokens="128", under_load_output_tokens="16")
    load = opts.load_options()
    assert (load.rate, load.duration_s, str(load.input_tokens), str(load.output_tokens)) == (2.0, 1800.0, "128", "16")
    assert load.idle_timeout_s == 0 and load.seed == opts.seed
    with pytest.raises(ValueError, match="the load beside the items: the schedule would plan"):
        QualityOptions(under_load_rate=1e6, under_load_max_s=1e6)
    with pytest.raises(ValueError):
        QualityOptions(under_load_rate=-1)


@pytest.mark.parametrize(
    "values, says",
    [
        ({"under_load_rate": "-2"}, "--under-load-rate -2"),
        ({"under_load_rate": "2", "under_load_input_tokens": "zipf:1:2"}, "--under-load-input-tokens zipf:1:2"),
        (
            {"under_load_rate": "5000", "under_load_max_s": "100000"},
            "the load beside the items: the schedule would plan",
        ),
    ],
)
def test_a_bad_under_load_option_is_one_line(values, says):
    with pytest.raises(ConfigError) as caught:
        from_cli(QualityOptions, values, "quality options")
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_bad_under_load_option_exits_2_before_anything_is_sent():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadproof",
            "run",
            "quality",
            "--url",
            "http://127.0.0.1:9",
            "--under-load-rate",
            "2",
            "--under-load-output-tokens",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "--under-load-output-tokens" in result.stderr


def test_authored_items_takes_the_first_n_tasks():
    items = QualityItems(
        Target(url="http://127.0.0.1:9", model="m", endpoint="completions"),
        QualityOptions(authored_items=3, authored_modes=["plain"]),
    )
    jobs: list[Job] = []
    plan = items.authored_jobs(jobs, [])
    assert [j.row["item_id"] for j in jobs] == [t.id for t in authored.load_tasks()[:3]] and plan.tasks == 3
    with pytest.raises(ValueError):
        QualityOptions(authored_items=0)
