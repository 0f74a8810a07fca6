"""A/B claims of an interleaved run: per-round medians, change, paired bootstrap interval, recomputable offline.

Expected values are worked out here from the rates and times the records were built with.
"""

import json
import random
import statistics

import msgspec
import pytest
from pydantic import ValidationError

from loadproof.metrics import compute_claims
from loadproof.metrics.ab import ab_claims, paired_bootstrap_change, round_figures, ttft_s
from loadproof.metrics.throughput import decode_rate_per_s
from loadproof.plans.ab import AbPlan
from loadproof.records import RequestRecord
from loadproof.rundir import Manifest
from loadproof.scenarios.ab import AbOptions, AbScenario, plan_order
from loadproof.scenarios.base import Target
from loadproof.store.run_dir import RunWriter, load_run

S = 1_000_000_000


def rec(arm, rnd, rate, ttft=0.1, i=0, ok=True):
    """11 tokens after a first token `ttft` s after send, at `rate` tokens/s."""
    send = rnd * 100.0 + (50.0 if arm == "b" else 0.0) + i * 5.0
    first = send + ttft
    return RequestRecord(
        request_id=f"ab-r{rnd}-{arm}-{i}",
        endpoint="chat",
        scenario="ab",
        family=arm,
        repeat=rnd,
        ok=ok,
        send_ns=round(send * S),
        first_token_ns=round(first * S),
        last_token_ns=round((first + 10 / rate) * S),
        end_ns=round((first + 10 / rate) * S) + 1,
        output_tokens=11,
        error_kind=None if ok else "http_status",
    )


def plan(rounds, seed=5):
    return {
        "arms": {},
        "order": [["a", "b"]] * rounds,
        "order_seed": 1,
        "prompts": ["english-00"],
        "family": "english",
        "bootstrap_seed": seed,
        "resamples": 2000,
    }


def typed(rounds, seed=5):
    return msgspec.convert(plan(rounds, seed), AbPlan)


def test_round_figure_is_the_median_of_the_arm_in_that_round():
    records = [rec("a", 0, 10.0, i=0), rec("a", 0, 12.0, i=1), rec("a", 0, 20.0, i=2), rec("b", 0, 15.0)]
    ((rnd, a, b),) = round_figures(records, decode_rate_per_s)
    assert rnd == 0 and a == pytest.approx(12.0) and b == pytest.approx(15.0)


def test_claims_change_and_a_significant_interval():
    a_rates = [10.0, 10.3, 9.8, 10.1, 9.9]
    b_rates = [12.0, 12.2, 11.9, 12.3, 11.8]
    records = [rec("a", r, x) for r, x in enumerate(a_rates)] + [rec("b", r, x) for r, x in enumerate(b_rates)]
    claims = {c.name: c for c in ab_claims(typed(5), records)}
    mean_a, mean_b = statistics.fmean(a_rates), statistics.fmean(b_rates)
    assert claims["ab.decode_tokens_per_s.a"].value == pytest.approx(mean_a, rel=1e-6)
    assert claims["ab.decode_tokens_per_s.b"].value == pytest.approx(mean_b, rel=1e-6)
    assert claims["ab.decode_tokens_per_s.change"].value == pytest.approx((mean_b - mean_a) / mean_a, rel=1e-6)
    assert 0 < claims["ab.decode_tokens_per_s.ci_low"].value < claims["ab.decode_tokens_per_s.change"].value
    assert claims["ab.decode_tokens_per_s.ci_high"].value > claims["ab.decode_tokens_per_s.change"].value
    assert claims["ab.decode_tokens_per_s.significant"].value is True
    assert claims["ab.ttft_s.a"].value == pytest.approx(0.1, rel=1e-6)
    assert claims["ab.ttft_s.change"].value == pytest.approx(0.0, abs=1e-6)
    assert claims["ab.ttft_s.significant"].value is False  # a constant has a [0, 0] interval: includes 0
    assert claims["ab.rounds"].value == 5
    assert claims["ab.output_tokens.change"].value == 0.0  # both arms wrote 11 tokens: a like-for-like rate
    assert all(c.formula for c in claims.values())


def test_an_a_a_comparison_is_not_significant():
    a_rates = [10.0, 11.0, 10.0, 11.0, 10.5, 9.5]
    b_rates = [11.0, 10.0, 11.0, 10.0, 9.5, 10.5]
    records = [rec("a", r, x) for r, x in enumerate(a_rates)] + [rec("b", r, x) for r, x in enumerate(b_rates)]
    claims = {c.name: c for c in ab_claims(typed(6), records)}
    assert claims["ab.decode_tokens_per_s.ci_low"].value < 0 < claims["ab.decode_tokens_per_s.ci_high"].value
    assert claims["ab.decode_tokens_per_s.significant"].value is False


def test_failed_requests_are_counted_not_measured():
    records = [
        rec("a", 0, 10.0),
        rec("a", 0, 99.0, i=1, ok=False),
        rec("b", 0, 12.0),
        rec("a", 1, 10.0),
        rec("b", 1, 12.0),
    ]
    claims = {c.name: c for c in ab_claims(typed(2), records)}
    assert claims["ab.failed_requests.a"].value == 1 and claims["ab.failed_requests.b"].value == 0
    assert claims["ab.decode_tokens_per_s.a"].value == pytest.approx(10.0, rel=1e-6)
    assert ttft_s(records[1]) is None


def test_paired_bootstrap_is_seeded_and_needs_two_rounds():
    pairs = [(10.0, 11.0), (10.5, 11.2), (9.8, 10.9), (10.1, 11.4)]
    assert paired_bootstrap_change(pairs, random.Random(3)) == paired_bootstrap_change(pairs, random.Random(3))
    assert paired_bootstrap_change(pairs[:1], random.Random(3)) is None


def test_plan_order_is_balanced_seeded_and_random():
    order = plan_order(10, random.Random(1))
    assert order == plan_order(10, random.Random(1))
    assert sum(o == ["a", "b"] for o in order) == 5 and sum(o == ["b", "a"] for o in order) == 5
    assert any(plan_order(10, random.Random(s)) != order for s in range(2, 6))
    assert len(plan_order(5, random.Random(1))) == 5


def test_claims_recompute_offline_from_the_run_directory(tmp_path):
    """The seed is in the manifest: the interval is the same every time the run is read back."""
    a_rates, b_rates = [10.0, 10.4, 9.7, 10.2], [10.6, 11.1, 10.2, 10.9]
    with RunWriter(tmp_path / "ab-run") as writer:
        manifest = {"run_id": "ab-run", "scenario": "ab", "plan": {**plan(4, seed=11), "arms": {}}}
        writer.write_manifest(manifest)
        for r, (a, b) in enumerate(zip(a_rates, b_rates)):
            writer.append(rec("a", r, a))
            writer.append(rec("b", r, b))
    first = [c.as_dict() for c in compute_claims(load_run(tmp_path / "ab-run"))]
    assert first == [c.as_dict() for c in compute_claims(load_run(tmp_path / "ab-run"))]
    manifest["plan"]["bootstrap_seed"] = 12
    (tmp_path / "ab-run" / "manifest.json").write_text(json.dumps(manifest))
    second = {c["name"]: c["value"] for c in (c.as_dict() for c in compute_claims(load_run(tmp_path / "ab-run")))}
    first_values = {c["name"]: c["value"] for c in first}
    assert second["ab.decode_tokens_per_s.change"] == first_values["ab.decode_tokens_per_s.change"]
    assert second["ab.decode_tokens_per_s.ci_low"] != first_values["ab.decode_tokens_per_s.ci_low"]


def test_options_refuse_an_unknown_setting():
    with pytest.raises(ValidationError, match="unknown setting temprature"):
        AbOptions(a={"temprature": 0.7})
    with pytest.raises(ValidationError):
        AbOptions(repeats=1)


def test_each_arm_sends_its_own_settings_to_its_own_target():
    targets = {
        "a": Target(url="http://127.0.0.1:1", model="m1", endpoint="chat"),
        "b": Target(url="http://127.0.0.1:2", model="m2", endpoint="completions"),
    }
    scenario = AbScenario(targets, AbOptions(a={"temperature": 0}, b={"temperature": 0.7, "top_p": 0.9}))
    from loadproof.workloads.prompts import load_family

    prompt = load_family("english")[0]
    a = msgspec.json.decode(scenario._spec("a", "x", prompt, {"family": "a"}).body)
    b_spec = scenario._spec("b", "y", prompt, {"family": "b"})
    b = msgspec.json.decode(b_spec.body)
    assert (a["model"], a["temperature"]) == ("m1", 0) and "messages" in a
    assert (b["model"], b["temperature"], b["top_p"]) == ("m2", 0.7, 0.9) and "prompt" in b
    assert b_spec.labels == {"family": "b", "prompt_id": prompt.id}
    plan_ = scenario.manifest_plan([["b", "a"]], [prompt])
    assert plan_.order == [["b", "a"]] and plan_.arms["b"].settings == {"temperature": 0.7, "top_p": 0.9}
    assert plan_.arms["b"].target["url"] == "http://127.0.0.1:2"


@pytest.mark.asyncio
async def test_the_scenario_interleaves_two_servers_in_the_recorded_order(sse_server, tmp_path):
    from loadproof.protocol.sse import DONE_EVENT
    from tests.conftest import Script
    from tests.sse_chunks import completion_chunk

    pieces = [completion_chunk(f"t{i}", i + 1) for i in range(4)] + [DONE_EVENT]
    server_a = await sse_server([Script(pieces=pieces, pause_s=0.002)])
    server_b = await sse_server([Script(pieces=pieces, pause_s=0.004)])
    targets = {
        "a": Target(url=server_a.url, model="m", endpoint="completions"),
        "b": Target(url=server_b.url, model="m", endpoint="completions"),
    }
    options = AbOptions(num_prompts=2, repeats=3, max_tokens=4, order_seed=3, b={"temperature": 0.7})
    with RunWriter(tmp_path / "ab") as writer:
        manifest = Manifest(run_id="ab", scenario="ab")
        failed = await AbScenario(targets, options).run(writer, manifest)
        writer.write_manifest(manifest)
    assert failed == 0
    assert len(server_a.bodies) == len(server_b.bodies) == 1 + 3 * 2  # a warm-up, then 2 prompts x 3 rounds
    run = load_run(tmp_path / "ab")
    assert run.manifest.plan["order"] == plan_order(3, random.Random(3))
    sent = sorted(run.records, key=lambda r: r.send_ns)
    arms_in_time = [sent[i].family for i in range(0, len(sent), 2)]  # each arm sends its 2 prompts in a row
    assert arms_in_time == [arm for pair in run.manifest.plan["order"] for arm in pair]
    assert {(r.repeat, r.family) for r in run.records} == {(k, arm) for k in range(3) for arm in "ab"}
    # each round samples anew: round r sends seed + r to both arms (after the warm-ups, with the plain seed)
    seeds = sorted({msgspec.json.decode(body)["seed"] for body in server_b.bodies[1:]})
    assert seeds == [options.seed + r for r in range(3)]
    claims = {c.name for c in compute_claims(run)}
    assert {"ab.decode_tokens_per_s.change", "ab.ttft_s.ci_low", "ab.ttft_s.significant"} <= claims


def spec_sample(arm, t_s, drafts, accepted):
    """The arm's engine counters at t_s: 3 draft tokens a draft."""
    return {
        "t_ns": round(t_s * S),
        "source": arm,
        "values": {
            "spec_decode_num_drafts_total": drafts,
            "spec_decode_num_draft_tokens_total": 3 * drafts,
            "spec_decode_num_accepted_tokens_total": accepted,
        },
    }


def test_batch_figures_pair_where_both_arms_have_one_and_stand_alone_otherwise():
    from tests import rundir_values as rv

    records = [rec(arm, r, 10.0, i=i) for r in range(1, 4) for arm in "ab" for i in range(2)]  # (a send at 0: unsent)
    # arm b drafts (sampled around each of its batches: 50 s into each round, 2 requests 5 s apart);
    # round r accepts 60 + 10 r of 90 draft tokens; arm a's engine draws no drafts
    samples = []
    for r in range(1, 4):
        samples += [
            spec_sample("b", r * 100 + 49, 30 * r, 50 * r),
            spec_sample("b", r * 100 + 58, 30 * r + 30, 50 * r + 60 + 10 * r),
        ]
        samples += [
            {"t_ns": round((r * 100 - 1) * S), "source": "a", "values": {}},
            {"t_ns": round((r * 100 + 8) * S), "source": "a", "values": {}},
        ]
    claims = {c.name: c.value for c in ab_claims(typed(3), records, rv.samples(samples))}
    assert claims["ab.spec_acceptance_pct.b"] == pytest.approx(
        statistics.fmean([100 * 70 / 90, 100 * 80 / 90, 100 * 90 / 90])
    )
    assert claims["ab.spec_mean_accepted_length.b"] == pytest.approx(1 + 80 / 30)
    assert "ab.spec_acceptance_pct.a" not in claims and "ab.spec_acceptance_pct.change" not in claims
    # both requests of a batch: 11 tokens each, the second sent 5 s after the first, each 1.1 s long
    assert claims["ab.aggregate_tokens_per_s.a"] == pytest.approx(22 / (5 + 0.1 + 1.0 + 1e-9), rel=1e-6)
    assert claims["ab.aggregate_tokens_per_s.change"] == pytest.approx(0.0)


def docs_runs(_tmp_path):
    """For the docs-formulas test: every spec-decode and batch figure's pattern, both arms drafting."""
    from pathlib import Path

    from tests import rundir_values as rv

    records = [rec(arm, r, 10.0 + r + (arm == "b"), i=i) for r in range(1, 4) for arm in "ab" for i in range(2)]
    samples = [
        spec_sample(
            arm,
            r * 100 + (49 if arm == "b" else -1) + dt,
            30 * r + (30 if dt else 0),
            50 * r + (60 + 10 * r + (arm == "b") if dt else 0),
        )
        for r in range(1, 4)
        for arm in "ab"
        for dt in (0, 9)
    ]
    return [
        rv.run_of(Path("ab-spec"), {"run_id": "ab-spec", "scenario": "ab", "plan": plan(3)}, records, samples=samples)
    ]
