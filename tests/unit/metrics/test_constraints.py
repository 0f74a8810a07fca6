"""Claims of constrained answers, from the stored verdicts and tool calls: by hand beside each; none without
a constraint; and `docs_runs`, a load and a throughput run that reach every one of them."""

from __future__ import annotations

from pathlib import Path

import msgspec

from loadproof.metrics import compute_claims
from loadproof.metrics.constraints import constraint_claims
from loadproof.records import RequestRecord, ToolCall
from loadproof.store.run_dir import Run
from tests import rundir_values as rv
from tests.unit.metrics import test_load
from tests.unit.publish.synthetic import throughput_manifest, throughput_records

OPTIONS = {"tools": "tools.json", "tool_choice": "required", "response_format": None}


def checked(record: RequestRecord, valid: bool | None, calls: int = 1, reason: str | None = None) -> RequestRecord:
    return msgspec.structs.replace(
        record,
        output_valid=valid,
        output_invalid_reason=reason,
        tool_calls=[ToolCall(name="get_weather", arguments="{}") for _ in range(calls)],
    )


def by_name(claims) -> dict:
    return {c.name: c for c in claims}


def test_the_claims_by_hand():
    base = RequestRecord(request_id="r", endpoint="chat", ok=True)
    records = [
        checked(base, True),
        checked(base, True, calls=2),
        checked(base, False, 0, "no tool call (tool_choice required)"),
        checked(base, False, 1, "tool call 0 (get_weather) arguments: $: required"),
        checked(base, False, 0, "no tool call (tool_choice required)"),
        msgspec.structs.replace(base, ok=False),
    ]  # failed: not checked, not counted
    claims = by_name(constraint_claims("load", records, OPTIONS))
    assert claims["load.output_checked"].value == 5 and claims["load.output_invalid"].value == 3
    assert claims["load.output_valid_pct"].printed == "40.0"  # 2 of 5
    assert claims["load.tool_calls_per_request"].value == (1 + 2 + 0 + 1 + 0) / 5
    assert claims["load.output_invalid_reason"].value == "no tool call (tool_choice required) (2 of 3)"
    assert claims["load.output_valid_pct"].pattern == "<scenario>.output_valid_pct"
    assert claims["load.output_invalid"].direction == "lower"


def test_no_constraint_no_claims_and_a_schema_alone_has_no_calls_per_request():
    record = checked(RequestRecord(request_id="r", endpoint="chat", ok=True), True, 0)
    assert constraint_claims("load", [record], {"tools": None, "response_format": None}) == []
    assert constraint_claims("load", [record], {}) == []
    names = by_name(constraint_claims("throughput", [record], {"response_format": "json"}))
    assert "throughput.output_valid_pct" in names and "throughput.tool_calls_per_request" not in names
    assert "throughput.output_invalid_reason" not in names


def load_run() -> Run:
    records = [
        checked(r, r.ok and i % 3 != 0, i % 2, None if i % 3 else "tool call 0: names no declared tool") if r.ok else r
        for i, r in enumerate(test_load.RECORDS)
    ]
    manifest = {
        "run_id": "load-constrained",
        "scenario": "load",
        "options": OPTIONS,
        "plan": msgspec.to_builtins(test_load.plan()),
    }
    return rv.run_of(Path("load-constrained"), manifest, records, events=test_load.EVENTS)


def throughput_run() -> Run:
    manifest = throughput_manifest("throughput-constrained")
    manifest["options"] = {**manifest["options"], "response_format": "json"}
    records = [
        checked(r, i % 2 == 0, 0, "answer: not JSON (Expecting value, char 0)")
        for i, r in enumerate(throughput_records())
    ]
    return rv.run_of(Path("throughput-constrained"), manifest, records)


def test_the_scenarios_add_them_to_their_own():
    load = by_name(compute_claims(load_run()))
    assert {"load.output_valid_pct", "load.tool_calls_per_request", "load.ttft_s.p50"} <= set(load)
    throughput = by_name(compute_claims(throughput_run()))
    assert "throughput.output_valid_pct" in throughput and "throughput.output_invalid_reason" in throughput


def docs_runs(tmp_path: Path) -> list[Run]:
    return [load_run(), throughput_run()]
