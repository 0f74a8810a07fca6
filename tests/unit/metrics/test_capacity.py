"""Capacity acceptance from hand-built runs: every criterion can fail, each for its own reason."""

import copy

import msgspec
import pytest

from loadproof.metrics import capacity
from loadproof.metrics.capacity import Window, evaluate_capacity, max_gap_ns, window_tokens
from loadproof.plans.capacity import CapacityPlan
from loadproof.records import RequestRecord
from tests import rundir_values as rv

S = 1_000_000_000
N, L, W = 2, 1000, 4.0


def make_run():
    plan = {
        "sessions": [
            {"request_id": f"cap-s{i}", "session_id": f"s{i}", "expected": f"{1234560 + i}"} for i in range(N)
        ],
        "input_tokens": L,
        "window_s": W,
        "max_gap_s": 1.5,
        "drain_timeout_s": 5.0,
        "kv_idle_bound": 0.02,
        "check_probes": True,
        "theoretical_full_windows": 30.25,
    }
    records = []
    for i in range(N):
        first = 10 * S + i * S  # s0 first token at 10 s, s1 at 11 s -> window [11, 15]
        times = [first + k * S // 2 for k in range(0, 14)]  # a chunk every 0.5 s until 16.5 s
        records.append(
            RequestRecord(
                request_id=f"cap-s{i}",
                endpoint="completions",
                scenario="capacity",
                ok=False,
                error_kind="cancelled",
                send_ns=0,
                first_token_ns=first,
                last_token_ns=times[-1],
                end_ns=17 * S,
                prompt_tokens=L,
                output_tokens=len(times) * 2,
                chunk_ns=times,
                chunk_tokens=[2] * len(times),
                output_text=f" {1234560 + i}. And then the story went on",
            )
        )
    idle = {
        "num_requests_running": 0,
        "num_requests_waiting": 0,
        "num_preemptions_total": 3,
        "prefix_cache_hits_total": 50,
        "prefix_cache_queries_total": 900,
        "kv_cache_usage_perc": 0.01,
    }
    busy = dict(idle, num_requests_running=N, prefix_cache_queries_total=2900, kv_cache_usage_perc=0.4)
    samples = [{"t_ns": -1 * S, "values": idle}]
    samples += [{"t_ns": t * S, "values": dict(busy)} for t in (11, 12, 13, 14, 15)]
    samples += [{"t_ns": 18 * S, "values": dict(idle, prefix_cache_queries_total=2900)}]
    events = [{"kind": "cancel", "t_ns": 17 * S}]
    return plan, records, samples, events


def verdict(plan, records, samples, events):
    result = evaluate_capacity(msgspec.convert(plan, CapacityPlan), records, rv.samples(samples), rv.events(events))
    return result, {c.name: c for c in result.criteria}, {c.name: c for c in result.claims}


def test_a_good_run_passes_with_hand_computed_figures():
    result, criteria, claims = verdict(*make_run())
    assert result.verdict == "PASS", result.reason
    assert all(c.status == "PASS" for c in criteria.values())
    # window [11 s, 15 s]: s0 has chunks at 11.0, 11.5, ... 15.0 (9 chunks), s1 at 11.0 ... 15.0 (9)
    assert claims["capacity.window_per_stream_min_tokens_per_s"].value == 9 * 2 / W
    assert claims["capacity.window_aggregate_tokens_per_s"].value == 2 * 9 * 2 / W
    assert claims["capacity.cold_ttft_median_s"].value == 10.5
    assert claims["capacity.cold_ttft_max_s"].value == 11.0
    assert claims["capacity.prefix_cache_hits"].value == 0
    assert claims["capacity.probes_retrieved"].value == 2
    assert claims["capacity.theoretical_full_windows"].value == 30.25
    assert claims["capacity.verdict"].value == "PASS"
    assert "2,000 queried tokens" in criteria["cold_prefix_cache"].evidence


def mutate(fn):
    run = copy.deepcopy(make_run())
    fn(*run)
    return verdict(*run)


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("waiting", lambda p, r, s, e: s[2]["values"].__setitem__("num_requests_waiting", 1)),
        ("running", lambda p, r, s, e: s[3]["values"].__setitem__("num_requests_running", 1)),
        ("preemptions", lambda p, r, s, e: s[4]["values"].__setitem__("num_preemptions_total", 4)),
        ("prompt_tokens", lambda p, r, s, e: setattr(r[1], "prompt_tokens", L - 1)),
        ("cold_prefix_cache", lambda p, r, s, e: s[1]["values"].__setitem__("prefix_cache_hits_total", 178)),
        ("probes", lambda p, r, s, e: setattr(r[0], "output_text", " 7654321. and so on")),
        ("drain", lambda p, r, s, e: s[-1]["values"].__setitem__("num_requests_running", 1)),
        ("drain", lambda p, r, s, e: s[-1]["values"].__setitem__("kv_cache_usage_perc", 0.2)),
        (
            "streams_progress",
            lambda p, r, s, e: (
                setattr(r[0], "chunk_ns", r[0].chunk_ns[:4] + r[0].chunk_ns[8:]),
                setattr(r[0], "chunk_tokens", r[0].chunk_tokens[:4] + r[0].chunk_tokens[8:]),
            ),
        ),
    ],
)
def test_each_criterion_fails_for_its_own_reason(name, change):
    run = copy.deepcopy(make_run())
    change(*run)
    result, criteria, _ = verdict(*run)
    assert result.verdict == "FAIL"
    assert criteria[name].status == "FAIL", criteria[name]
    assert result.reason.startswith(name)


def test_a_stream_that_never_started_fails_the_run():
    run = copy.deepcopy(make_run())
    run[1][1].first_token_ns = None
    run[1][1].error_kind, run[1][1].error_message = "http_status", "HTTP 400: too long"
    result, criteria, claims = verdict(*run)
    assert criteria["all_streams_started"].status == "FAIL" and "too long" in criteria["all_streams_started"].evidence
    assert "capacity.window_aggregate_tokens_per_s" not in claims


def test_skipped_probe_check_is_said_not_passed():
    run = copy.deepcopy(make_run())
    run[0]["check_probes"] = False
    run[1][0].output_text = "noise"
    result, criteria, _ = verdict(*run)
    assert result.verdict == "PASS" and criteria["probes"].status == "SKIPPED"
    assert "skipped" in criteria["probes"].evidence


def test_window_helpers():
    rec = RequestRecord(request_id="x", endpoint="chat", chunk_ns=[1 * S, 2 * S, 6 * S], chunk_tokens=[1, 3, 2])
    assert window_tokens(rec, 2 * S, 6 * S) == 5
    assert max_gap_ns(rec, 0, 7 * S) == 4 * S


def test_a_stream_that_finished_inside_the_window_fails_progress_even_under_the_gap_bound():
    run = copy.deepcopy(make_run())
    plan, records, samples, events = run
    plan["max_gap_s"] = 100.0
    records[0].error_kind, records[0].finish_reason, records[0].end_ns = None, "length", 13 * S
    result, criteria, _ = verdict(*run)
    assert criteria["streams_progress"].status == "FAIL"
    assert "ended before the window closed, e.g. s0 (length, 2.0 s early)" in criteria["streams_progress"].evidence


def test_admission_stall_is_evidence_and_cold_phase_waiting_fails():
    run = copy.deepcopy(make_run())
    plan, records, samples, events = run
    records[1].first_token_ns = None
    samples[2]["values"]["num_requests_waiting"] = 1
    events.append({"kind": "admission_stalled", "t_ns": 14 * S, "evidence": "the engine kept 1 waiting for 10 s"})
    result, criteria, _ = verdict(*run)
    assert "the engine kept 1 waiting for 10 s" in criteria["all_streams_started"].evidence
    assert criteria["waiting"].status == "FAIL" and "cold phase" in criteria["waiting"].evidence


def test_idle_before_is_checked_only_for_runs_made_with_the_idle_guard():
    run = copy.deepcopy(make_run())
    _, criteria, _ = verdict(*run)
    assert "engine_idle_before" not in criteria  # an older plan: no such criterion, its claims unchanged
    run[0]["idle_timeout_s"] = 120.0
    result, criteria, _ = verdict(*run)
    assert result.verdict == "PASS" and criteria["engine_idle_before"].status == "PASS"
    run[2][0]["values"]["num_requests_waiting"] = 1  # someone else's request queued before ours
    result, criteria, _ = verdict(*run)
    assert criteria["engine_idle_before"].status == "FAIL"
    assert "running 0, waiting 1" in criteria["engine_idle_before"].evidence
    assert result.reason.startswith("engine_idle_before")


def test_drain_counts_only_samples_after_every_connection_closed():
    run = copy.deepcopy(make_run())
    plan, records, samples, events = run
    # a third request, queued when cancelled, whose connection closed only at 19 s; the idle-looking
    # sample at 18 s came before that and proves nothing about it
    records.append(
        RequestRecord(
            request_id="cap-q", endpoint="completions", ok=False, error_kind="cancelled", send_ns=0, end_ns=19 * S
        )
    )
    result, criteria, _ = verdict(*run)
    assert criteria["drain"].status == "FAIL"
    assert "all 3 requests sent (1 without a first token at cancel)" in criteria["drain"].evidence
    samples.append({"t_ns": 19 * S + 1, "values": dict(samples[-1]["values"])})
    result, criteria, _ = verdict(*run)
    assert criteria["drain"].status == "PASS", criteria["drain"].evidence
    assert "closed 2.00 s after cancel" in criteria["drain"].evidence


def sessions_of(plan, records):
    typed = msgspec.convert(plan, CapacityPlan)
    by_id = {r.request_id: r for r in records}
    return typed, [(s, by_id.get(s.request_id)) for s in typed.sessions]


def test_each_criterion_is_a_pure_function_of_what_it_names():
    plan, records, raw_samples, events = make_run()
    samples = rv.samples(raw_samples)
    typed, sessions = sessions_of(plan, records)
    window = capacity.shared_window(typed, sessions)
    assert window == Window(11 * S, 15 * S)
    assert capacity.running(samples, window, N).status == "PASS"
    assert capacity.running(samples, window, N + 1).status == "FAIL"  # the engine ran 2, we asked for 3
    assert capacity.running(samples, Window(30 * S, 31 * S), N).evidence == "no /metrics sample inside the window"
    assert capacity.waiting(samples, window).status == "PASS"
    assert capacity.preemptions(samples, {}, window).evidence == "the engine exposes no preemption counter"
    assert capacity.prompt_tokens(sessions, L + 1).status == "FAIL"
    assert capacity.streams_progress(sessions, window, max_gap_s=0.25).status == "FAIL"  # chunks every 0.5 s
    assert capacity.probes(sessions, check=False).status == "SKIPPED"
    assert capacity.cold_prefix_cache(samples, samples[0].values, window).evidence.startswith("0 prefix-cache hits")


def test_cold_phase_waiting_without_a_cancel_reads_every_later_sample():
    plan, records, samples, events = make_run()
    records[1].first_token_ns = None
    typed, sessions = sessions_of(plan, records)
    assert capacity.shared_window(typed, sessions) is None
    samples.append({"t_ns": 10**15, "values": {"num_requests_waiting": 2}})  # long after the run, no cancel to bound it
    waited = capacity.cold_phase_waiting(sessions, rv.samples(samples), [])
    assert waited.status == "FAIL" and "max 2 over 7 samples" in waited.evidence
    bounded = capacity.cold_phase_waiting(
        sessions, rv.samples(samples), rv.events(events)
    )  # cancel at 17 s leaves the late sample out
    assert bounded.status == "PASS"
    assert capacity.cold_phase_waiting(sessions, [], []) is None  # no sample: no criterion, not a PASS


def test_claims_say_their_kind_and_which_way_is_better():
    _, _, claims = verdict(*make_run())
    assert (claims["capacity.verdict"].kind, claims["capacity.verdict"].direction) == ("verdict", "neither")
    assert claims["capacity.criteria.running"].kind == "criterion"
    assert claims["capacity.window_aggregate_tokens_per_s"].direction == "higher"
    assert claims["capacity.cold_ttft_median_s"].direction == "lower"
    assert (claims["capacity.sessions"].kind, claims["capacity.sessions"].direction) == ("count", "neither")
    assert claims["capacity.window_s"].direction == "neither"  # a setting, not a latency
    assert claims["capacity.probes_retrieved"].direction == "higher"
