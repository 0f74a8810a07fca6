"""Speculative decoding from the engine's counters (metrics.spec_decode): each window's growth, the
acceptance rate, the mean accepted length and the acceptance by draft position, per throughput level and
over a load run; nothing where the engine drafted nothing; the per-position series kept apart by label."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from loadproof.metrics import compute_claims
from loadproof.metrics.spec_decode import spec_claims, spec_window
from loadproof.plans.throughput import ThroughputPlan
from loadproof.records import RequestRecord
from loadproof.store.run_dir import Run
from loadproof.telemetry.server_metrics import MetricsSource, _vector_reading, parse_metrics
from tests import rundir_values as rv
from tests.unit.metrics import test_load

S = 1_000_000_000
NAMES = {
    "spec_decode_num_drafts_total": "vllm:spec_decode_num_drafts_total",
    "spec_decode_num_accepted_tokens_per_pos_total": "vllm:spec_decode_num_accepted_tokens_per_pos_total{position}",
}


def counters(t_s: float, drafts: float, draft_tokens: float, accepted: float, *by_pos: float) -> dict:
    values = {
        "spec_decode_num_drafts_total": drafts,
        "spec_decode_num_draft_tokens_total": draft_tokens,
        "spec_decode_num_accepted_tokens_total": accepted,
    }
    values.update({f"spec_decode_num_accepted_tokens_per_pos_total_{k}": v for k, v in enumerate(by_pos)})
    return {"t_ns": int(t_s * S), "values": values}


def test_a_window_is_the_growth_between_the_samples_around_it():
    samples = rv.samples(
        [
            counters(0, 10, 30, 12, 7, 4, 1),
            counters(5, 11, 33, 13, 8, 4, 1),
            counters(20, 110, 330, 162, 87, 54, 21),
            counters(30, 200, 600, 300, 160, 100, 40),
        ]
    )
    window = spec_window(samples, 6 * S, 19 * S)  # from the sample at 5 s to the one at 20 s
    assert window is not None and (window.drafts, window.draft_tokens, window.accepted) == (99, 297, 149)
    assert window.accepted_by_pos == (79, 50, 20)
    claims = {c.name: c.value for c in spec_claims("load", {}, window, "test")}
    assert claims["load.spec_decode.acceptance_pct"] == pytest.approx(100 * 149 / 297)
    assert claims["load.spec_decode.mean_accepted_length"] == pytest.approx(1 + 149 / 99)
    assert claims["load.spec_decode.mean_draft_length"] == pytest.approx(297 / 99)
    assert "load.spec_decode.tokens_per_step" not in claims  # no generation counter, no request count
    assert [claims[f"load.spec_decode.pos{k}.acceptance_pct"] for k in range(3)] == pytest.approx(
        [100 * 79 / 99, 100 * 50 / 99, 100 * 20 / 99]
    )
    assert claims["load.spec_decode.drafts"] == 99


def test_tokens_per_step_counts_the_steps_without_a_draft():
    a, b = counters(0, 0, 0, 0), counters(10, 100, 300, 250)
    a["values"]["generation_tokens_total"], b["values"]["generation_tokens_total"] = 0.0, 510.0
    window = spec_window(rv.samples([a, b]), 1 * S, 9 * S)
    # 10 requests: 10 prefill tokens, 500 decoded in 100 drafted steps (350 tokens) and 150 undrafted ones
    claims = {c.name: c.value for c in spec_claims("load", {}, window, "test", requests=10)}
    assert claims["load.spec_decode.tokens_per_step"] == pytest.approx(500 / 250)
    assert claims["load.spec_decode.mean_accepted_length"] == pytest.approx(3.5)


def test_no_drafts_or_no_sample_on_a_side_is_no_claim():
    flat = rv.samples([counters(0, 10, 30, 12), counters(9, 10, 30, 12)])
    assert spec_window(flat, 1 * S, 8 * S) is None  # drafting off in between: absent, never zero
    assert spec_window(flat, -1 * S, 8 * S) is None and spec_window(flat, 1 * S, 10 * S) is None
    assert spec_claims("load", {}, None, "test") == []
    off = rv.samples([{"t_ns": 0, "values": {"num_requests_running": 1.0}}, {"t_ns": 9 * S, "values": {}}])
    assert spec_window(off, 1 * S, 8 * S) is None


def throughput_run() -> Run:
    """Two levels one after the other, /metrics sampled around each: c1 accepts more than c4."""
    records = [
        RequestRecord(
            request_id=f"c{c}-{i}",
            endpoint="chat",
            scenario="throughput",
            family="english",
            concurrency=c,
            batch=0,
            ok=True,
            send_ns=int((t0 + i * 0.1) * S),
            first_token_ns=int((t0 + 0.5) * S),
            last_token_ns=int((t0 + 2) * S),
            end_ns=int((t0 + 2 + i * 0.1) * S),
            output_tokens=32,
        )
        for c, t0 in ((1, 1.0), (4, 11.0))
        for i in range(c)
    ]
    samples = [counters(0, 0, 0, 0, 0, 0), counters(10, 40, 80, 60, 35, 25), counters(20, 100, 200, 110, 70, 40)]
    for sample, generated in zip(samples, (0.0, 150.0, 400.0)):
        sample["values"]["generation_tokens_total"] = generated
    plan = msgspec.to_builtins(
        ThroughputPlan(
            families=["english"],
            concurrency=[1, 4],
            max_tokens=32,
            num_prompts=1,
            repeats=1,
            temperature=0.0,
            ignore_eos=True,
            seed=0,
        )
    )
    return rv.run_of(
        Path("throughput-spec"),
        {"run_id": "throughput-spec", "scenario": "throughput", "plan": plan},
        records,
        samples=samples,
    )


def load_run() -> Run:
    samples = [
        counters(test_load.T0 / S - 1, 5, 15, 6, 3, 2, 1),
        counters(test_load.T0 / S + 30, 65, 195, 96, 50, 30, 16),
    ]
    plan = msgspec.to_builtins(test_load.plan())
    return rv.run_of(
        Path("load-spec"),
        {"run_id": "load-spec", "scenario": "load", "plan": plan},
        test_load.RECORDS,
        samples=samples,
        events=test_load.EVENTS,
    )


def docs_runs(tmp_path: Path) -> list[Run]:
    """For the docs-formulas test: every spec_decode claim's pattern (SGLang's gauges too)."""
    return [throughput_run(), load_run(), *docs_runs_sglang(tmp_path), *docs_runs_unavailable(tmp_path)]


def test_each_throughput_level_and_a_load_run_get_their_own_window():
    tp = {c.name: c.value for c in compute_claims(throughput_run())}
    assert tp["throughput.english.c1.spec_decode.acceptance_pct"] == pytest.approx(100 * 60 / 80)
    assert tp["throughput.english.c4.spec_decode.acceptance_pct"] == pytest.approx(100 * 50 / 120)
    assert tp["throughput.english.c4.spec_decode.mean_accepted_length"] == pytest.approx(1 + 50 / 60)
    assert tp["throughput.english.c1.spec_decode.pos1.acceptance_pct"] == pytest.approx(100 * 25 / 40)
    # c1: 1 request, 150 generated, 60 accepted: 149 decoded tokens in 89 steps
    assert tp["throughput.english.c1.spec_decode.tokens_per_step"] == pytest.approx(149 / 89)
    load = {c.name: c.value for c in compute_claims(load_run())}
    assert load["load.spec_decode.acceptance_pct"] == pytest.approx(100 * 90 / 180)
    assert load["load.spec_decode.pos2.acceptance_pct"] == pytest.approx(100 * 15 / 60)


EXPOSITION = """# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 7
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 5
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 3
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 2
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="no good"} 9
"""


def test_the_per_position_counter_is_kept_apart_by_its_label_from_either_source():
    assert parse_metrics(EXPOSITION, NAMES) == {
        "spec_decode_num_drafts_total": 7.0,
        "spec_decode_num_accepted_tokens_per_pos_total_0": 5.0,
        "spec_decode_num_accepted_tokens_per_pos_total_1": 5.0,
    }
    source = MetricsSource.parse("prometheus+http://prom:9090?job=vllm")
    assert source.query(NAMES).startswith(
        'sum by (__name__, position) ({__name__=~"vllm:spec_decode_num_accepted_'
        'tokens_per_pos_total|vllm:spec_decode_num_drafts_total",job="vllm"})'
    )
    result = [
        {"metric": {"__name__": "vllm:spec_decode_num_drafts_total"}, "value": [9.0, "7"]},
        {
            "metric": {"__name__": "vllm:spec_decode_num_accepted_tokens_per_pos_total", "position": "0"},
            "value": [9.0, "5"],
        },
        {
            "metric": {"__name__": "vllm:spec_decode_num_accepted_tokens_per_pos_total", "position": "1"},
            "value": [9.0, "5"],
        },
    ]
    reading = _vector_reading({"status": "success", "data": {"result": result}}, NAMES)
    assert reading.values == parse_metrics(EXPOSITION, NAMES)


def test_a_load_run_plots_its_acceptance_over_time():
    from loadproof.metrics.figures import LinePlot
    from loadproof.metrics.load import figures
    from loadproof.plans import load_plan

    t0 = test_load.T0 / S
    run = rv.run_of(
        Path("load-spec"),
        {"run_id": "load-spec", "scenario": "load", "plan": msgspec.to_builtins(test_load.plan())},
        test_load.RECORDS,
        samples=[
            counters(t0 - 1, 0, 0, 0),
            counters(t0 + 2, 10, 30, 15),
            counters(t0 + 4, 30, 90, 75),
            counters(t0 + 6, 30, 90, 75),
        ],  # the last pair drafted nothing: no point
        events=test_load.EVENTS,
    )
    (panel,) = [p for p in figures(run, load_plan(run), []) if isinstance(p, LinePlot) and p.key == "draft-acceptance"]
    assert panel.series[0].points == [(2.0, pytest.approx(50.0)), (4.0, pytest.approx(100.0))]
    one_window = figures(load_run(), load_plan(load_run()), [])  # one window only: no line to draw
    assert not [p for p in one_window if isinstance(p, LinePlot) and p.key == "draft-acceptance"]


SGLANG_EXPOSITION = """# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.9
# HELP sglang:spec_accept_rate The average acceptance rate of speculative decoding.
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.27
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.557572e+06
"""


def sglang_run(after_end: list[dict]) -> Run:
    """The throughput run's records with SGLang's gauges instead of vLLM's counters."""
    tp = throughput_run()
    return rv.run_of(
        Path("throughput-sglang"),
        {"run_id": "throughput-sglang", "scenario": "throughput", "plan": msgspec.to_builtins(tp.manifest.plan)},
        tp.records,
        samples=after_end,
    )


def test_sglangs_gauges_are_its_word_for_its_last_interval_not_a_window():
    from loadproof.engines.sglang import SGLANG_METRICS

    values = parse_metrics(SGLANG_EXPOSITION, SGLANG_METRICS)
    assert values["spec_accept_length"] == 2.9 and values["spec_accept_rate"] == 0.27
    # a sample after each level: c1 ends at 2.0 s, c4 at 13.3 s
    got = {
        c.name: c.value
        for c in compute_claims(
            sglang_run(
                [{"t_ns": 5 * S, "values": values}, {"t_ns": 15 * S, "values": dict(values, spec_accept_length=3.5)}]
            )
        )
    }
    assert got["throughput.english.c1.spec_decode.engine_accept_length"] == 2.9
    assert got["throughput.english.c1.spec_decode.engine_accept_rate_pct"] == pytest.approx(27.0)
    assert got["throughput.english.c4.spec_decode.engine_accept_length"] == 3.5
    assert not any(name.endswith("acceptance_pct") for name in got)  # no counters: no window figures
    off = {
        c.name for c in compute_claims(sglang_run([{"t_ns": 15 * S, "values": dict(values, spec_accept_length=0.0)}]))
    }
    assert not any("spec_decode" in name for name in off)  # drafting off reports 0: no claim, never a zero


def docs_runs_sglang(_tmp_path: Path) -> list[Run]:
    from loadproof.engines.sglang import SGLANG_METRICS

    return [sglang_run([{"t_ns": 15 * S, "values": parse_metrics(SGLANG_EXPOSITION, SGLANG_METRICS)}])]


def test_a_drafting_profile_without_the_engines_counters_says_why():
    tp = throughput_run()
    drafting = {"name": "p", "engine": "vllm", "speculative": {"method": "ngram", "draft_tokens": 3}}
    manifest = {
        "run_id": "t",
        "scenario": "throughput",
        "plan": msgspec.to_builtins(tp.manifest.plan),
        "profile": drafting,
    }
    bare = rv.run_of(
        Path("t"),
        manifest,
        tp.records,
        samples=[
            {"t_ns": 0, "values": {"generation_tokens_total": 1.0}},
            {"t_ns": 30 * S, "values": {"generation_tokens_total": 9.0}},
        ],
    )
    got = {c.name: c.value for c in compute_claims(bare)}
    assert "ngram drafts" in got["spec_decode.unavailable"] and "no draft counters" in got["spec_decode.unavailable"]
    counted = rv.run_of(Path("t"), manifest, tp.records, samples=[msgspec.to_builtins(s) for s in tp.samples])
    assert "spec_decode.unavailable" not in {c.name for c in compute_claims(counted)}  # the counters were there
    plain = rv.run_of(Path("t"), dict(manifest, profile={"name": "p", "engine": "vllm"}), tp.records)
    assert "spec_decode.unavailable" not in {c.name for c in compute_claims(plain)}  # nothing asked: nothing said


def docs_runs_unavailable(_tmp_path: Path) -> list[Run]:
    tp = throughput_run()
    return [
        rv.run_of(
            Path("t"),
            {
                "run_id": "t",
                "scenario": "throughput",
                "plan": msgspec.to_builtins(tp.manifest.plan),
                "profile": {"name": "p", "engine": "vllm", "speculative": {"method": "ngram"}},
            },
            tp.records,
        )
    ]
