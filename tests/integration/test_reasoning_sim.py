"""A reasoning model on the simulator (`loadproof sim --reasoning-share 0.3`, a real process): `run load
--thinking on` reads the reasoning stream apart from the answer, its reasoning claims add up against the
engine's generation counter, and the published bundle verifies (`loadproof verify` recomputes them);
`--thinking off` asks the same model not to think, and the run has no reasoning claims."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.integration.bundles import publish_and_verify
from tests.integration.sim_process import SimProcess
from tests.integration.test_scenarios_sim import run_scenario

pytestmark = pytest.mark.timeout(240)

N, OUT = 12, 40
REASONING = 12  # round(0.3 * 40): the simulator reasons for 30% of max_tokens under ignore_eos


def test_a_thinking_load_run_draws_reasoning_and_answer_apart_and_verifies(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", "--reasoning-share", "0.3", config={"time_scale": 10.0}) as sim:
        code, claims, run = run_scenario(
            sim,
            tmp_path / "on",
            "load",
            "--rate",
            "6",
            "-n",
            str(N),
            "--input-tokens",
            "128",
            "--output-tokens",
            str(OUT),
            "--thinking",
            "on",
            "--seed",
            "3",
        )
        off_code, off_claims, off_run = run_scenario(
            sim,
            tmp_path / "off",
            "load",
            "--rate",
            "6",
            "-n",
            "4",
            "--input-tokens",
            "128",
            "--output-tokens",
            "8",
            "--thinking",
            "off",
        )
        asked = {
            "model": "sim",
            "messages": [{"role": "user", "content": "Why?"}],
            "max_tokens": 10,
            "ignore_eos": True,
        }
        thought = sim_json(sim.url, {**asked, "chat_template_kwargs": {"enable_thinking": True}})
        plain = sim_json(sim.url, asked)  # a request that does not ask for thinking gets none
    assert thought["choices"][0]["message"]["reasoning"] == "Let"  # round(0.3 * 10) tokens of one byte
    assert len(thought["choices"][0]["message"]["content"]) == 7 and thought["usage"]["completion_tokens"] == 10
    assert "reasoning" not in plain["choices"][0]["message"]
    assert code == 0, claims
    value = {name: c["value"] for name, c in claims.items()}
    assert value["load.failed_requests"] == 0
    assert value["load.reasoning.requests"] == N
    assert value["load.reasoning.reasoning_tokens"] == N * REASONING
    assert value["load.reasoning.answer_tokens"] == N * (OUT - REASONING)
    assert value["load.reasoning.reasoning_tokens_mean"] == REASONING
    # the engine counts reasoning inside its generated tokens, as usage.completion_tokens does
    assert value["crosscheck.generation_tokens.client"] == value["crosscheck.generation_tokens.engine"] == N * OUT
    # the answer starts only after the reasoning: 12 more decode steps after the first token
    assert value["load.reasoning.ttfa_s.p50"] > value["load.ttft_s.p50"]
    assert value["load.reasoning.answer_tpot_s.p50"] > 0
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    assert all(r["reasoning_tokens"] == REASONING for r in records)
    # the answer starts after the reasoning, as far as the client's reads can tell: times are per read, and a
    # record whose reasoning and first answer token came in one read has them equal (every chunk up to the
    # answer then carries that one time)
    times = {
        json.loads(line)["request_id"]: json.loads(line)["t_ns"]
        for line in (run / "chunks.jsonl").read_text().splitlines()
    }
    for r in records:
        upto = times[r["request_id"]][: REASONING + 1]
        assert r["first_answer_ns"] > r["first_token_ns"] or len(set(upto)) == 1, (r["request_id"], upto)
    assert sum(r["first_answer_ns"] > r["first_token_ns"] for r in records) >= N // 2
    target = json.loads((run / "manifest.json").read_text())["target"]
    assert target["thinking"] == "on" and target["extra_body"] == {"chat_template_kwargs": {"enable_thinking": True}}
    report = (run / "report.md").read_text()
    assert "Reasoning and answer" in report
    publish_and_verify(run, tmp_path / "bundle")  # verify recomputes every reasoning claim from the bundle

    assert off_code == 0, off_claims
    assert not [name for name in off_claims if ".reasoning." in name]
    off_records = [json.loads(line) for line in (off_run / "requests.jsonl").read_text().splitlines()]
    assert all(not r["reasoning_text"] and r["first_answer_ns"] == r["first_token_ns"] for r in off_records)


def sim_json(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url + "/v1/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.loads(resp.read())
