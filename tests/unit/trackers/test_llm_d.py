"""trackers/llm_d.py and llm_d_schema.py: a run as an llm-d benchmark report 0.2.1, checked against the schema's
types (closed objects, required fields, enumerations, minimums, each statistic's units), its latencies the very
samples loadproof's latency claims summarize."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from loadproof.errors import UsageError
from loadproof.metrics.distribution import summarize
from loadproof.metrics.latency import samples_ns, span_s
from loadproof.store.run_dir import load_run
from loadproof.trackers import llm_d_schema as br
from loadproof.trackers.llm_d import write
from loadproof.trackers.source import open_run
from tests.unit.trackers.runs import PRIVATE_HOST, tracked_run


def test_the_report_fits_the_schema_and_carries_the_runs_latencies(tmp_path: Path):
    path = tracked_run(tmp_path / "runs")
    write(open_run(path), tmp_path / "report.json")
    text = (tmp_path / "report.json").read_text()
    report = br.decode(text.encode())
    assert report.version == "0.2.1" and report.run.uid == path.name
    assert report.run.description == f"tiny-model [{path.name}]"
    assert report.run.time is not None and report.run.time.start == "2026-12-01T06:11:44.000000Z"
    records = load_run(path).records
    performance = report.results.request_performance
    assert performance is not None and performance.aggregate is not None
    aggregate = performance.aggregate
    assert aggregate.requests is not None and aggregate.latency is not None and aggregate.throughput is not None
    assert aggregate.requests.total == 12 and aggregate.requests.failures == 1
    values = samples_ns(records)
    for field, sample, units in [
        ("time_to_first_token", "ttft_s", "s"),
        ("time_per_output_token", "tpot_s", "s/token"),
        ("inter_token_latency", "itl_s", "s/token"),
        ("request_latency", "e2el_s", "s"),
    ]:
        stat = getattr(aggregate.latency, field)
        summary = summarize(values[sample])
        assert summary is not None and stat.units == units
        assert stat.p50 == summary.percentiles["p50"] / 1e9 and stat.p99 == summary.percentiles["p99"] / 1e9
        assert (
            stat.mean == summary.mean / 1e9 and stat.max == summary.max / 1e9 and stat.min == min(values[sample]) / 1e9
        )
        assert stat.min <= stat.p0p1 <= stat.p1 <= stat.p5 <= stat.p10 <= stat.p25 <= stat.p50 <= stat.p75 <= stat.p90
    ok = [r for r in records if r.ok]
    output = aggregate.throughput.output_token_rate
    assert (
        output is not None
        and output.units == "tokens/s"
        and output.mean == sum(r.output_tokens or 0 for r in ok) / span_s(records)
    )
    assert report.scenario is not None and report.scenario.stack is not None
    engine = report.scenario.stack[0].standardized
    assert engine.tool == "unknown" and engine.tool_version == "0.9.1" and engine.model.name == "tiny-model"
    assert PRIVATE_HOST not in text
    assert json.loads(text)["scenario"]["stack"][0]["standardized"]["kind"] == "inference_engine"


def test_a_field_the_schema_does_not_name_or_units_out_of_category_are_refused(tmp_path: Path):
    write(open_run(tracked_run(tmp_path / "runs")), tmp_path / "report.json")
    good = json.loads((tmp_path / "report.json").read_text())
    extra = json.loads(json.dumps(good))
    extra["run"]["owner"] = "x"
    with pytest.raises(msgspec.ValidationError, match="unknown field `owner`"):
        br.decode(json.dumps(extra).encode())
    units = json.loads(json.dumps(good))
    units["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]["units"] = "tokens/s"
    with pytest.raises(msgspec.ValidationError, match=r"'tokens/s' is not one of ms, s - at .*time_to_first_token"):
        br.decode(json.dumps(units).encode())
    missing = json.loads(json.dumps(good))
    del missing["run"]["uid"]
    with pytest.raises(msgspec.ValidationError, match="missing required field `uid`"):
        br.decode(json.dumps(missing).encode())
    with pytest.raises(ValueError, match="not an llm-d benchmark report 0.2.1"):
        br.check(_bad_report())


def _bad_report() -> br.BenchmarkReport:
    stats = br.Statistics(units="tokens/s", mean=1.0)
    latency = br.AggregateLatency(request_latency=stats)
    performance = br.RequestPerformance(aggregate=br.AggregateRequestPerformance(latency=latency))
    return br.BenchmarkReport(run=br.Run(uid="x"), results=br.Results(request_performance=performance))


def test_an_existing_file_or_a_missing_folder_is_refused_before_anything_is_read(tmp_path: Path):
    (tmp_path / "there.json").write_text("{}")
    with pytest.raises(UsageError, match="the file exists"):
        write(open_run(tracked_run(tmp_path / "runs")), tmp_path / "there.json")
    with pytest.raises(UsageError, match="no folder"):
        write(open_run(tracked_run(tmp_path / "runs2")), tmp_path / "nowhere" / "r.json")
