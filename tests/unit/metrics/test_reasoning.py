"""Reasoning claims from hand-built records; expected values worked out by hand, not by the code."""

import msgspec

from loadproof.metrics import compute_claims
from loadproof.metrics.engine_agreement import agreement_claims
from loadproof.metrics.reasoning import (
    answer_count,
    answer_tpot_ns,
    reasoning_claims,
    reasoning_count,
    reasoning_panels,
    streamed_reasoning,
    thinking_unheeded,
)
from loadproof.records import RequestRecord
from loadproof.report.build import render_markdown
from loadproof.store.run_dir import load_run
from tests import rundir_values as rv
from tests.unit.metrics import test_load
from tests.unit.publish.synthetic import throughput_run

S = 1_000_000_000


def rec(
    i=0,
    send=0.0,
    first=1.0,
    answer=2.0,
    last=4.0,
    out=11,
    reasoning=5,
    engine_reasoning=None,
    ok=True,
    text="",
    scenario="load",
):
    """A request that reasoned from `first` to `answer`, then answered until `last`."""
    return RequestRecord(
        request_id=f"r{i}",
        endpoint="chat",
        scenario=scenario,
        ok=ok,
        send_ns=int(send * S),
        first_token_ns=None if first is None else int(first * S),
        first_answer_ns=None if answer is None else int(answer * S),
        last_token_ns=None if last is None else int(last * S),
        end_ns=int((last or 0) * S) + 1,
        output_tokens=out,
        reasoning_tokens=reasoning,
        engine_reasoning_tokens=engine_reasoning,
        reasoning_text=text,
    )


def by_name(claims):
    return {c.name: c for c in claims}


def test_a_request_reasoned_when_counted_or_its_answer_came_after_its_first_token():
    assert streamed_reasoning(rec(reasoning=3))
    assert streamed_reasoning(rec(reasoning=None, text="let me think"))
    assert streamed_reasoning(rec(reasoning=None, answer=2.0))  # published: text dropped, counts absent
    assert not streamed_reasoning(rec(reasoning=None, answer=1.0))  # the first token was the answer's
    assert not streamed_reasoning(rec(reasoning=0, answer=None))  # a record of before these fields


def test_counts_prefer_the_clients_then_the_engines():
    assert reasoning_count(rec(reasoning=5, engine_reasoning=7)) == 5
    assert reasoning_count(rec(reasoning=None, engine_reasoning=7)) == 7
    assert reasoning_count(rec(reasoning=None, answer=1.0)) == 0  # streamed none
    assert reasoning_count(rec(reasoning=None, answer=2.0)) is None  # reasoned, nobody counted
    assert answer_count(rec(out=11, reasoning=5)) == 6
    assert answer_count(rec(out=11, reasoning=None, answer=2.0)) is None


def test_answer_tpot_counts_the_answer_after_its_first_chunk():
    # 6 answer tokens, first at 2 s, last at 4 s: 5 gaps in 2 s
    assert answer_tpot_ns(rec(answer=2.0, last=4.0, out=11, reasoning=5)) == 2 * S / 5
    assert answer_tpot_ns(rec(out=6, reasoning=5)) is None  # one answer token
    assert answer_tpot_ns(rec(answer=None)) is None


def test_no_claims_without_reasoning():
    plain = [rec(i, answer=1.0, reasoning=None) for i in range(3)]
    assert reasoning_claims("load", plain) == []


def test_claims_per_run():
    records = [
        rec(0, send=0, answer=2.0, last=4.0, out=11, reasoning=5),  # ttfa 2, tpot 2/5 = 0.4
        rec(1, send=1, answer=4.0, last=5.0, out=13, reasoning=10),  # ttfa 3, 3 answer: 1/2 = 0.5
        rec(2, send=2, first=3.0, answer=3.0, last=6.0, out=4, reasoning=None),  # plain: ttfa 1, 3/3 = 1
        rec(3, ok=False, reasoning=99),
    ]  # failed: not counted
    claims = by_name(reasoning_claims("load", records))
    assert claims["load.reasoning.requests"].value == 2
    assert claims["load.reasoning.ttfa_s.p50"].value == 2.0  # of 1, 2, 3
    assert claims["load.reasoning.ttfa_s.p90"].value == 2.8  # 2 + 0.8 * (3 - 2)
    assert claims["load.reasoning.reasoning_tokens"].value == 15
    assert claims["load.reasoning.reasoning_tokens_mean"].value == 5.0
    assert claims["load.reasoning.answer_tokens"].value == 6 + 3 + 4
    assert abs(claims["load.reasoning.answer_tpot_s.p50"].value - 0.5) < 1e-12  # of 0.4, 0.5, 1.0
    assert claims["load.reasoning.ttfa_s.p50"].pattern == "load.reasoning.ttfa_s.<stat>"
    assert claims["load.reasoning.ttfa_s.p99"].direction == "lower"
    assert all(c.formula for c in claims.values())


def test_a_prefix_with_placeholders():
    claims = reasoning_claims("throughput.<family>.c<N>", [rec()], parts={"family": "english", "N": 4})
    names = by_name(claims)
    assert (
        names["throughput.english.c4.reasoning.ttfa_s.p50"].pattern
        == "throughput.<family>.c<N>.reasoning.ttfa_s.<stat>"
    )
    assert names["throughput.english.c4.reasoning.requests"].pattern == "throughput.<family>.c<N>.reasoning.requests"


def test_the_engine_counts_reasoning_inside_generation_tokens_and_the_crosscheck_holds():
    # completion_tokens include reasoning (11 = 5 reasoning + 6 answer; 13 = 10 + 3): the engine's generation
    # counter grew by 24, what the client's usage sums to, not the 9 answer tokens alone
    records = [rec(0, out=11, reasoning=5), rec(1, send=1, answer=4.0, last=5.0, out=13, reasoning=10)]
    samples = rv.samples(
        [
            {"t_ns": -S, "values": {"generation_tokens_total": 100.0}},
            {"t_ns": 10 * S, "values": {"generation_tokens_total": 124.0}},
        ]
    )
    claims = by_name(agreement_claims(records, samples))
    assert claims["crosscheck.generation_tokens.client"].value == 24
    assert claims["crosscheck.generation_tokens.diff_pct"].value == 0.0
    reasoning = by_name(reasoning_claims("load", records))
    assert reasoning["load.reasoning.reasoning_tokens"].value + reasoning["load.reasoning.answer_tokens"].value == 24


def reasoned(record: RequestRecord) -> RequestRecord:
    """The record as a reasoning model's: the first half of its tokens and of its time spent reasoning."""
    if record.first_token_ns is None or record.last_token_ns is None or not record.output_tokens:
        return record
    half = record.first_token_ns + (record.last_token_ns - record.first_token_ns) // 2
    return msgspec.structs.replace(record, first_answer_ns=half, reasoning_tokens=record.output_tokens // 2)


def docs_runs(tmp_path):
    """A throughput and a load run of a reasoning model: every reasoning claim (the docs-formulas test)."""
    throughput = load_run(throughput_run(tmp_path / "reasoning"))
    throughput.records = [reasoned(r) for r in throughput.records]
    manifest = {"run_id": "load-reasoning", "scenario": "load", "plan": msgspec.to_builtins(test_load.plan())}
    load = rv.run_of(None, manifest, [reasoned(r) for r in test_load.RECORDS], events=test_load.EVENTS)
    return [throughput, load]


def test_the_runs_wired_in_make_reasoning_claims(tmp_path):
    names = {c.pattern for run in docs_runs(tmp_path) for c in compute_claims(run)}
    assert {
        "throughput.<family>.c<N>.reasoning.ttfa_s.<stat>",
        "load.reasoning.ttfa_s.<stat>",
        "load.reasoning.reasoning_tokens",
        "throughput.<family>.c<N>.reasoning.answer_tpot_s.<stat>",
    } <= names


def test_the_report_draws_reasoning_and_answer_apart_only_where_a_run_reasoned():
    claims = reasoning_claims("load", [rec(0), rec(1, send=1, answer=4.0, last=5.0, out=13, reasoning=10)])
    table, bars = reasoning_panels(claims)
    assert table.rows[0][:4] == ["load", "2", "0.500", "2.500"]  # TTFT p50 of 1 and 0; first answer of 2 and 3
    assert table.header[2:4] == ["TTFT p50 s", "first answer p50 s"]
    assert bars.groups == ["load"] and bars.series[1].values == [2.5]
    assert reasoning_panels(reasoning_claims("load", [rec(answer=1.0, reasoning=None)])) == []


def plain(i=0):
    """An answer of a model that did not think: no reasoning, its answer from its first token."""
    return rec(i, first=1.0, answer=1.0, reasoning=None)


def test_thinking_asked_of_a_model_that_streamed_no_reasoning_is_a_warning():
    said = thinking_unheeded("low", "low", [plain(0), plain(1), rec(2, ok=False, reasoning=None)])
    assert said is not None and said.startswith("--thinking low was asked, but none of the 2 successful answers")
    assert "does not reason" in said
    assert thinking_unheeded(None, "high", [plain()]).startswith("--reasoning-effort high was asked")
    assert thinking_unheeded("on", None, [plain(), rec(1)]) is None  # one answer reasoned: the model thinks
    assert thinking_unheeded("off", None, [plain()]) is None  # asked not to
    assert thinking_unheeded(None, None, [plain()]) is None  # the model's default: nothing asked
    assert thinking_unheeded("low", "low", [rec(0, ok=False, reasoning=None)]) is None  # no answer: nothing known


def test_the_warning_comes_first_in_report_md(tmp_path):
    target = {"model": "m", "endpoint": "chat", "thinking": "low", "reasoning_effort": "low"}
    manifest = {"run_id": "load-plain", "scenario": "load", "plan": msgspec.to_builtins(test_load.plan())}
    run = rv.run_of(None, {**manifest, "target": target}, test_load.RECORDS, events=test_load.EVENTS)
    lines = render_markdown(run, compute_claims(run)).splitlines()
    assert lines[2].startswith("- warning: --thinking low was asked, but none of the ")
    assert lines[3].startswith("- scenario: load")
    quiet = rv.run_of(None, {**manifest, "target": {**target, "thinking": None, "reasoning_effort": None}})
    assert "warning" not in render_markdown(quiet, [])
