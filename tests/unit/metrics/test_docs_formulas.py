"""Every claim a run can produce has its formula in docs/: its documented name pattern
(`Claim.pattern`, e.g. `throughput.<family>.c<N>.aggregate_tokens_per_s`) stands in backticks in a
docs/*.md page.

The claims come from a run of every kind published under docs/runs (tests/bundles.py; the claims of every
bundle there are checked against the docs by tests/unit/verify/test_repo_bundles.py) and from synthetic
runs of every scenario, built here to reach every branch that names a claim (each criterion, each suite,
mode, language and length, skipped groups, both soak families and memory sources, engine agreement, GPU
telemetry).
"""

from __future__ import annotations

import copy
import importlib
import json
from pathlib import Path

import msgspec
import pytest

from loadproof.metrics import claim_functions, compute_claims
from loadproof.metrics.claims import Claim, number
from loadproof.metrics.slo import SLO_DEFINITIONS
from loadproof.records import RequestRecord
from loadproof.store.run_dir import Run, load_run
from tests import bundles
from tests import rundir_values as rv
from tests.unit.metrics import test_ab, test_capacity, test_load, test_quality, test_soak
from tests.unit.metrics.test_prefill_interference import rec, sample
from tests.unit.publish.synthetic import capacity_run, telemetry_rows, throughput_run

ROOT = Path(__file__).resolve().parents[3]
S = 1_000_000_000


def docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))


def undocumented(claims: list[Claim], text: str) -> list[str]:
    """The claims' patterns that no docs page names in backticks, each once, in order."""
    return list(dict.fromkeys(c.pattern for c in claims if f"`{c.pattern}`" not in text))


def run(
    scenario: str,
    plan: dict | None,
    records: list[RequestRecord] = (),
    samples: list[dict] = (),
    events: list[dict] = (),
    answers: list[dict] = (),
    telemetry: list[dict] = (),
) -> Run:
    manifest = {"run_id": f"{scenario}-synthetic", "scenario": scenario, **({"plan": plan} if plan else {})}
    return rv.run_of(
        Path(f"{scenario}-synthetic"),
        manifest,
        records,
        samples=samples,
        events=events,
        answers=answers,
        telemetry=telemetry,
    )


def bracket(records: list[RequestRecord]) -> list[dict]:
    """/metrics samples before and after the run, with every counter engine agreement reads."""
    start, end = min(r.send_ns for r in records), max(r.end_ns for r in records)
    counters = {
        "prompt_tokens_total": 0.0,
        "generation_tokens_total": 0.0,
        "ttft_seconds_sum": 0.0,
        "ttft_seconds_count": 0.0,
    }
    grown = {
        "prompt_tokens_total": 1000.0,
        "generation_tokens_total": 500.0,
        "ttft_seconds_sum": 9.0,
        "ttft_seconds_count": 9.0,
    }
    return [{"t_ns": start - S, "values": counters}, {"t_ns": end + S, "values": grown}]


def gpu_telemetry() -> list[dict]:
    rows = telemetry_rows()
    for i, row in enumerate(rows):
        row["host"]["oom_kills"] = i
        for gpu in row["gpus"]:
            gpu.update(
                pcie_tx_kbps=1000 * (i + 1), pcie_rx_kbps=500, nvlink_tx_kib=1024**2 * i, nvlink_rx_kib=1024**2 * i
            )
        row["xid_events"] = [] if i else [{"xid": 79}]
    return rows


def capacity_runs() -> list[Run]:
    plan, records, samples, events = test_capacity.make_run()
    plan = dict(plan, idle_timeout_s=120.0)
    stalled = copy.deepcopy(records)
    stalled[1].first_token_ns = None  # the window never began: the cold phase's waiting criterion
    return [
        run("capacity", plan, records, samples, events),
        run(
            "capacity",
            plan,
            stalled,
            samples,
            events + [{"kind": "admission_stalled", "t_ns": 14 * S, "evidence": "stalled"}],
        ),
    ]


def prefill_run() -> Run:
    records = [rec("r0", 0, 2.0, 4.0, 4.1), rec("r1", 10, 13.0, 15.0, 15.1)]
    samples = [sample(-1, 7), sample(5, 7), sample(9, 7), sample(16, 7)]
    return run(
        "prefill", {"input_tokens": 4096, "repeats": [{"request_id": "r0"}, {"request_id": "r1"}]}, records, samples
    )


def interference_run() -> Run:
    plan = {
        "window_s": 2.0,
        "session_tokens": 1000,
        "newcomer_tokens": 9000,
        "check_probes": True,
        "sessions": [{"request_id": "m0", "followup_request_id": "m0f", "session_id": "m0", "expected": "1111111"}],
        "newcomer": {"request_id": "new"},
    }
    records = [
        rec("m0", 0, 1.0, 12.0, 12.1, chunks=[int(t * S) for t in range(1, 13)]),
        rec("new", 3.0, 6.0, 8.0, 8.1, family="newcomer"),
        rec("m0f", 13, 13.2, 14, 14.1, text=" 1111111.", family="followup"),
    ]
    return run("interference", plan, records, [sample(12.9, 0), sample(14.2, 896)] + bracket(records))


def soak_run() -> Run:
    records = [test_soak.rec(i, i, 1.0, family="short" if i % 2 else "long") for i in range(12)]
    samples = [
        test_soak.rss(0, 1000),
        test_soak.rss(9, 1050),
        test_soak.rss(0, 50, "relay"),
        test_soak.rss(9, 51, "relay"),
    ]
    return run("soak", msgspec.to_builtins(test_soak.PLAN), records, samples)


def quality_runs() -> list[Run]:
    skipped = [
        {"suite": "gsm8k", "item_id": "gsm8k-test-0001", "mode": "plain", "skipped": "no data"},
        test_quality.a("zh-arith-01", "zh", None, skipped="not asked in Chinese"),
        test_quality.a("en-arith-01", "en", True),
        {"suite": "image", "item_id": "image-colour-red", "mode": "plain", "extracted": "red", "correct": True},
    ]
    plan = {
        "suites": ["gsm8k", "authored", "retrieval", "image"],
        "endpoint": "chat",
        "max_model_len": 8192,
        "num_items": 1,
        "num_skipped": 0,
    }
    return [run("quality", plan, answers=test_quality.ROWS), run("quality", plan, answers=skipped)]


def ab_run() -> Run:
    records = [test_ab.rec(arm, r, rate + (arm == "b")) for r, rate in enumerate([10.0, 10.3, 9.8]) for arm in "ab"]
    return run("ab", test_ab.plan(3), records)


def open_loop_run() -> Run:
    samples = [
        {"t_ns": test_load.T0 - S, "values": {"num_preemptions_total": 0.0}},
        {
            "t_ns": test_load.T0 + S,
            "values": {"num_requests_waiting": 2.0, "num_requests_running": 3.0, "kv_cache_usage_perc": 0.4},
        },
        {"t_ns": test_load.T0 + 20 * S, "values": {"num_preemptions_total": 1.0}},
    ]
    plan = msgspec.to_builtins(test_load.plan(slo={key: 1.0 for key in SLO_DEFINITIONS}))
    return run("load", plan, test_load.RECORDS, samples, test_load.EVENTS)


def replay_run() -> Run:
    from tests.unit.metrics import test_replay

    opened = open_loop_run()
    replay = test_replay.run(test_replay.plan(slo={key: 1.0 for key in SLO_DEFINITIONS}))
    replay.samples = opened.samples + rv.samples(test_replay.samples())
    return replay


def sessions_run() -> Run:
    from tests.unit.metrics import test_sessions

    return test_sessions.run()


def contributed_runs(tmp_path: Path) -> list[Run]:
    """The synthetic runs a scenario's own test module offers as `docs_runs(tmp_path)`: a new scenario brings
    its runs in its own new test file (tests/unit/metrics/test_NAME.py), and this file stays as it is."""
    runs: list[Run] = []
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        module = importlib.import_module(f"{__package__}.{path.stem}")
        if hasattr(module, "docs_runs"):
            runs += module.docs_runs(tmp_path)
    return runs


def synthetic_runs(tmp_path: Path) -> list[Run]:
    throughput = load_run(throughput_run(tmp_path))
    throughput.telemetry = rv.telemetry(gpu_telemetry())
    throughput.samples = rv.samples(bracket(throughput.records))
    return [
        throughput,
        load_run(capacity_run(tmp_path)),
        *capacity_runs(),
        prefill_run(),
        interference_run(),
        soak_run(),
        *quality_runs(),
        ab_run(),
        open_loop_run(),
        replay_run(),
        sessions_run(),
        *contributed_runs(tmp_path),
    ]


def test_a_scenario_test_module_can_contribute_its_runs(tmp_path, monkeypatch):
    offered = run("throughput", None)
    module = importlib.import_module(f"{__package__}.test_throughput")
    monkeypatch.setattr(module, "docs_runs", lambda _tmp: [offered], raising=False)
    assert offered in contributed_runs(tmp_path)


def published_runs() -> list[Run]:
    """A run of every kind published (tests/bundles.py); tests/unit/verify/test_repo_bundles.py checks the claims
    of every bundle under docs/runs against the docs."""
    return [load_run(path) for path in bundles.runs()]


def test_every_claim_a_run_can_produce_has_its_formula_in_docs(tmp_path):
    runs = published_runs() + synthetic_runs(tmp_path)
    claims = [c for r in runs for c in compute_claims(r)]
    assert {r.manifest.scenario for r in runs} == set(claim_functions.names()), "a scenario has no synthetic run"
    for family in (
        "crosscheck.",
        "telemetry.max_pcie",
        "telemetry.nvlink",
        "soak.relay",
        "quality.image.skipped",
        "capacity.criteria.engine_idle_before",
        "prefill.r<i>",
        "throughput.<family>.c<N>.failed_batches",
    ):
        assert any(c.pattern.startswith(family) for c in claims), f"the synthetic runs reach no {family} claim"
    assert all(c.formula for c in claims)
    missing = undocumented(claims, docs_text())
    assert not missing, f"claims with no formula in docs/*.md (document each name in backticks): {missing}"


def test_the_check_catches_an_undocumented_claim():
    made_up = number(
        "throughput.<family>.c<N>.best_ever_tokens_per_s",
        99.0,
        "tokens/s",
        "made up",
        direction="higher",
        parts={"family": "english", "N": 4},
    )
    assert made_up.name == "throughput.english.c4.best_ever_tokens_per_s"
    assert undocumented([made_up], docs_text()) == ["throughput.<family>.c<N>.best_ever_tokens_per_s"]


@pytest.mark.parametrize(
    "pattern",
    ["throughput.<family>.c<N>.decode_tokens_per_s", "prefill.r<i>.ttft_s", "quality.retrieval.<L>.retrieved"],
)
def test_a_documented_pattern_passes(pattern):
    assert f"`{pattern}`" in docs_text()


def test_claims_json_holds_kind_and_direction_not_the_pattern(tmp_path):
    claims = compute_claims(load_run(throughput_run(tmp_path)))
    entry = json.loads(json.dumps(claims[0].as_dict()))
    assert set(entry) == {"name", "value", "unit", "printed", "formula", "kind", "direction"}
