"""A run's headline (report/headline.py): at most about ten lines, the decision first, each scenario's key
figures by its catalog entry; read from the published sample runs (tests/bundles.py) and synthetic ones."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from loadproof.catalog import SCENARIOS
from loadproof.metrics import compute_claims
from loadproof.metrics.claims import Claim
from loadproof.metrics.headline import CROSSCHECK, headlines, matcher, render_lines, value_text
from loadproof.predict.load import predict_load_sweep, rate_sweep
from loadproof.records import RequestRecord
from loadproof.report.build import Report
from loadproof.report.headline import decision, headline_lines
from loadproof.sim.config import SimConfig
from loadproof.store.run_dir import load_run
from tests import bundles
from tests import rundir_values as rv

MAX_LINES = 10  # the "at most about ten lines", warnings apart

SAMPLE_RUNS = bundles.runs()


def report_of(path: Path) -> Report:
    run = load_run(path)
    return Report(run=run, claims=compute_claims(run), markdown="")


@pytest.fixture(scope="module")
def reports() -> dict[Path, Report]:
    return {path: report_of(path) for path in SAMPLE_RUNS}


def test_every_sample_runs_headline_fits_ten_lines_with_its_decision_first(reports):
    for path, report in reports.items():
        lines = [line for line in headline_lines(report) if not line.startswith("warning:")]
        assert 3 <= len(lines) <= MAX_LINES, (bundles.label(path), lines)
        assert lines[0] == decision(report), bundles.label(path)
        assert lines[-1].startswith(f"report: {path / 'report.html'}")
        assert sum(line.startswith("  ") for line in lines) >= 2, (bundles.label(path), lines)  # figures shown


def test_a_verdict_comes_first_and_a_fail_names_its_criteria(reports):
    seen = set()
    for report in reports.values():
        verdict = next((c for c in report.claims if c.kind == "verdict"), None)
        if verdict is None or report.failures.measured_nothing:
            continue
        first = decision(report)
        seen.add(verdict.value)
        prefix = verdict.name.removesuffix(".verdict")  # the scenario's, or a part's of it (replay.agent)
        assert prefix.split(".")[0] == report.run.manifest.scenario, verdict.name
        assert first.startswith(f"{prefix} {verdict.value}: "), first
        failed = [c.name.rsplit(".", 1)[-1] for c in report.claims if c.kind == "criterion" and c.value == "FAIL"]
        assert all(name in first for name in failed[:3]), (first, failed)
    assert seen == {"PASS", "FAIL"}  # the sample holds both (a FAIL capacity run)


def test_every_declared_figure_is_one_the_sample_runs_claim(reports):
    """A typo in a headline's claim name would drop that figure silently: each declared figure must match a
    claim of a sample run of its scenario, or be one a run makes only when asked (an SLO, an engine's
    counter the sample's engine lacked), listed here with why."""
    only_when_asked = {
        "sessions.slo_attainment_pct",  # --slo
        "sessions.checkpointed_hit_pct.bounded",  # a hybrid model's sliding window: no published sessions run had one
        "replay.slo_attainment_pct",  # --slo
        "replay.goodput_rps",
        "soak.duration_s",  # no soak run is published: its claims are checked in tests/unit/metrics
        "soak.errors",
        "soak.*.latency_drift",
        "quality.retrieval.*.retrieved",  # --suite retrieval
        # --images or --audio-s: no sample run carries media (test_a_load_run_with_media_shows_one_line_of_them)
        "load.media.images_per_s",
        "load.media.audio_s_per_s",
        "load.media.video_frames_per_s",  # --video-frames
        "load.media.real_time_factor",  # --endpoint transcriptions
        "load.media.prompt_tokens_per_request.engine",
        "load.media.prompt_tokens_per_request.expected",
        "load.media.prompt_tokens_mismatched",
        "load.media.mm_cache_hit_pct",
        # --until-precision: no sample run was stopped by precision (tests/unit/metrics/test_precision.py)
        "load.precision.*.reached_pct",
        "load.precision.requests",
        "load.precision.decided_s",
        "load.precision.stopped_by",
    }
    claims_by_scenario: dict[str, set[str]] = defaultdict(set)
    for report in reports.values():
        claims_by_scenario[str(report.run.manifest.scenario)] |= {c.name for c in report.claims}
    missing = []
    for scenario in headlines.in_order():
        for line in headlines.get(scenario):
            for figure in line.figures:
                match = matcher(figure.claim)
                if figure.claim in only_when_asked:
                    continue
                if not any(match(name) is not None for name in claims_by_scenario[scenario]):
                    missing.append(f"{scenario}: {figure.claim}")
    assert missing == []


def test_every_catalog_scenario_declares_a_headline():
    assert [name for name, entry in SCENARIOS.items() if entry.headline is None] == []


def test_a_wildcard_names_each_figure_by_the_parts_it_stood_for():
    claims = [
        Claim("throughput.edit.c4.decode_tokens_per_s", 27.1, "tokens/s", "27.1", "f", "figure", "higher"),
        Claim("throughput.code.c1.decode_tokens_per_s", 30.0, "tokens/s", "30.0", "f", "figure", "higher"),
        Claim("throughput.code.c1.ttft_median_s", 0.0123, "s", "0.0123", "f", "figure", "lower"),
    ]
    (line,) = [spec for spec in headlines.get("throughput") if spec.label == "decode"]
    assert render_lines((line,), claims) == [("decode", "edit c4 27.1 tokens/s · code c1 30.0 tokens/s")]


@pytest.mark.parametrize(
    ("value", "unit", "kind", "printed", "shown"),
    [
        (0.0123, "s", "figure", "0.0123", "12.3 ms"),
        (23.2148, "s", "figure", "23.2148", "23.2 s"),
        (0.0, "s", "figure", "0.0000", "0 s"),
        (1234, "requests", "count", "1234", "1,234"),
        (51.3, "%", "figure", "51.3", "51.3%"),
        (107.26, "tokens/s", "figure", "107.3", "107.3 tokens/s"),
    ],
)
def test_a_figure_is_shown_short_with_its_unit(value, unit, kind, printed, shown):
    assert value_text(Claim("x.y", value, unit, printed, "f", kind, "neither")) == shown


def test_the_crosscheck_line_signs_a_difference():
    claims = [
        Claim("crosscheck.ttft_mean_s.diff_pct", 0.04, "%", "0.04", "f", "figure", "neither"),
        Claim("crosscheck.prompt_tokens.diff_pct", 0.0, "%", "0.00", "f", "figure", "neither"),
    ]
    assert render_lines(CROSSCHECK, claims) == [("client vs engine", "prompt tokens 0.00% · TTFT mean +0.04%")]


def test_a_run_that_measured_nothing_says_so_first_and_one_that_partly_failed_names_the_error():
    said = "HTTP 400: the prompt is 40123 tokens, more than the 32768 of the model's context"
    failed = [
        RequestRecord(request_id=f"r{i}", endpoint="chat", ok=False, error_kind="http_status", error_message=said)
        for i in range(3)
    ]
    nothing = Report(run=rv.run_of(Path("run"), {"scenario": "load"}, failed), claims=[], markdown="")
    assert headline_lines(nothing)[0] == f"The run measured nothing: 3 of 3 requests failed; most frequent (3x): {said}"
    ok = RequestRecord(request_id="ok", endpoint="chat", ok=True)
    partly = Report(run=rv.run_of(Path("run"), {"scenario": "load"}, [ok, *failed]), claims=[], markdown="")
    assert headline_lines(partly)[0] == f"load: 4 requests recorded, 3 failed; most frequent (3x): {said}"


def test_a_prediction_contract_that_failed_is_said_apart_from_the_scenarios_own_pass():
    """A run judged by a contract has two verdicts: each says its own (a fresh-clone suite printed `example PASS:`
    followed by the contract's failed figure, as if the scenario's acceptance had failed on it)."""
    run = rv.run_of(Path("run"), {"scenario": "capacity"}, [RequestRecord(request_id="r", endpoint="chat", ok=True)])
    claims = [
        Claim("capacity.verdict", "PASS", "", "PASS", "every criterion", "verdict", "neither"),
        Claim("capacity.criteria.running", "PASS", "", "PASS", "running 4", "criterion", "neither"),
        Claim("prediction.verdict", "FAIL", "", "FAIL", "every figure in range", "verdict", "neither"),
        Claim(
            "prediction.criteria.ttft", "FAIL", "", "FAIL", "measured 0.0974, predicted 0.07", "criterion", "neither"
        ),
    ]
    assert decision(Report(run=run, claims=claims, markdown="")) == (
        "capacity PASS: 1 of 1 acceptance criteria held; prediction FAIL: ttft (measured 0.0974, predicted 0.07)"
    )


def test_a_load_run_with_media_shows_one_line_of_them_and_one_without_none():
    """The media line's figures are the claims metrics/media.py makes of a run's records and the engine's
    multimodal cache counters; here a predicted run's (`plan --simulate load --images`), which makes them by the
    same formulas."""
    base = {"rate": "1", "num_requests": 10, "input_tokens": "64", "output_tokens": "4", "endpoint": "chat"}
    config = SimConfig(num_gpu_blocks=4000)
    media = {"images": "2:64x64", "media_tokens": "fixed:32", "media_reuse": 0.5}
    with_media = predict_load_sweep(config, rate_sweep({**base, **media})).rates[0].run.claims
    rendered = dict(render_lines(headlines.get("load"), with_media))
    images = next(c for c in with_media if c.name == "load.media.images_per_s")
    assert rendered["media"] == (
        f"images {value_text(images)} · prompt tokens engine 128.0 tokens · expected 128.0 tokens · "
        "mismatched 0 · mm cache hits 50.0%"
    )
    text = predict_load_sweep(config, rate_sweep(base)).rates[0].run.claims
    assert "media" not in dict(render_lines(headlines.get("load"), text))
