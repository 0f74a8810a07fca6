"""`loadproof run sessions` against the simulator (a real process with vLLM's prefix cache): every turn sends
the whole history with the model's actual reply in it, warm turns hit the prefix cache, and the claims'
bundle verifies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.bundles import publish_and_verify
from tests.integration.sim_process import SimProcess
from tests.integration.test_scenarios_sim import run_scenario

pytestmark = pytest.mark.timeout(180)


def test_warm_turns_carry_the_history_and_hit_the_prefix_cache(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        code, claims, run = run_scenario(
            sim,
            tmp_path,
            "sessions",
            "--endpoint",
            "completions",
            "-u",
            "3",
            "-t",
            "3",
            "--first-tokens",
            "800",
            "--turn-tokens",
            "64",
            "--tool-tokens",
            "32",
            "--output-tokens",
            "12",
            "--think-time-s",
            "uniform:0:0.2",
            "--session-header",
            "x-session-id",
        )
    assert code == 0, claims
    value = {name: c["value"] for name, c in claims.items()}
    assert value["sessions.requests"] == 9 and value["sessions.failed_requests"] == 0
    assert value["sessions.completed_sessions"] == 3
    plan = json.loads((run / "manifest.json").read_text())["plan"]
    salt = plan["session_ids"][0].rsplit("-", 1)[0]  # each user's session: `<salt>-u<k>`, sent in the header
    assert plan["session_header"] == "x-session-id" and plan["session_ids"] == [f"{salt}-u{k}" for k in range(3)]
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    by_user: dict[str, list[dict]] = {}
    for r in sorted(records, key=lambda r: r["batch"]):
        by_user.setdefault(r["prompt_id"], []).append(r)
    for turns in by_user.values():
        assert turns[0]["prompt_tokens"] == turns[0]["planned_input_tokens"]  # the first turn is exact
        for before, after in zip(turns, turns[1:]):
            # the history grows by the reply (the byte tokenizer: its bytes), a newline, tool output, message
            grown = after["prompt_tokens"] - before["prompt_tokens"]
            assert grown == len(before["output_text"].encode()) + 1 + 32 + 64
    assert value["sessions.turn2.context_tokens_mean"] > value["sessions.turn0.context_tokens_mean"]
    reusable, engine = value["sessions.prefix_hit_rate.reusable_pct"], value["sessions.prefix_hit_rate.engine_pct"]
    assert reusable > 40 and abs(reusable - engine) < 3, (reusable, engine)  # 16-token blocks: a little rounding
    # the simulator reports each response's cached tokens, as vLLM does: the warm turns hit, the cold ones
    # share only the system prompt's whole blocks; each turn's figure is the engine's own for that turn
    assert value["sessions.engine_hit_pct.warm"] > 40 > value["sessions.engine_hit_pct.cold"]
    hits = [r["cached_tokens"] for r in records]
    assert all(isinstance(h, int) and 0 <= h < r["prompt_tokens"] for h, r in zip(hits, records))
    publish_and_verify(run, tmp_path / "bundle")


def test_users_take_sharegpt_conversations_as_their_messages(tmp_path: Path):
    def convo(i: int) -> dict[str, list[dict[str, str]]]:
        return {
            "conversations": [
                {"from": "human", "value": f"Conversation {i} opens with a question."},
                {"from": "gpt", "value": "Yes."},
                {"from": "human", "value": f"And a follow-up number {i}, longer."},
            ]
        }

    sharegpt = tmp_path / "multi.json"
    sharegpt.write_text(json.dumps([convo(i) for i in range(5)]))
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        code, claims, run = run_scenario(
            sim,
            tmp_path,
            "sessions",
            "--endpoint",
            "completions",
            "-u",
            "2",
            "-t",
            "3",
            "--turn-tokens",
            "40",
            "--output-tokens",
            "8",
            "--dataset",
            str(sharegpt),
        )
    assert code == 0, claims
    plan = json.loads((run / "manifest.json").read_text())["plan"]
    rows = plan["dataset"]["rows_sent"]
    assert len(rows) == 2 and plan["dataset"]["messages_from_data"] == 4  # two turns each; the third is filler
    records = sorted(
        (json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()),
        key=lambda r: (r["prompt_id"], r["batch"]),
    )
    for u, row in enumerate(rows):
        turns = [r for r in records if r["prompt_id"] == f"u{u}"]
        first = len(f"Conversation {row} opens with a question.\n".encode())
        assert turns[0]["prompt_tokens"] == first + plan["overhead_tokens"]
        second = len(f"And a follow-up number {row}, longer.\n".encode())
        assert (
            turns[1]["prompt_tokens"] - turns[0]["prompt_tokens"] == len(turns[0]["output_text"].encode()) + 1 + second
        )
        assert turns[2]["prompt_tokens"] - turns[1]["prompt_tokens"] == len(turns[1]["output_text"].encode()) + 1 + 40


def test_users_take_prompts_or_message_conversations_from_other_data_set_formats(tmp_path: Path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    parquet = tmp_path / "prompts.parquet"
    pq.write_table(pa.table({"question": [f"Prompt row {i} asks something." for i in range(10)]}), parquet)
    chats = tmp_path / "chats.jsonl"
    chats.write_text(
        "".join(
            json.dumps(
                {
                    "messages": [
                        {"role": "user", "content": f"Chat {i} begins."},
                        {"role": "assistant", "content": "Fine."},
                        {"role": "user", "content": f"Chat {i} goes on."},
                    ]
                }
            )
            + "\n"
            for i in range(4)
        )
    )
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        # a file of prompts: every message is a row (2 users x 3 turns = 6 rows)
        code, claims, run = run_scenario(
            sim,
            tmp_path / "p",
            "sessions",
            "--endpoint",
            "completions",
            "-u",
            "2",
            "-t",
            "3",
            "--output-tokens",
            "8",
            "--dataset",
            str(parquet),
            "--dataset-columns",
            "prompt=question",
        )
        assert code == 0, claims
        plan = json.loads((run / "manifest.json").read_text())["plan"]
        rows = plan["dataset"]["rows_sent"]
        assert plan["dataset"]["format"] == "parquet" and len(rows) == 6 and plan["dataset"]["messages_from_data"] == 6
        records = sorted(
            (json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()),
            key=lambda r: (r["prompt_id"], r["batch"]),
        )
        first = [r for r in records if r["batch"] == 0]
        assert sorted(r["prompt_tokens"] for r in first) == sorted(
            len(f"Prompt row {rows[u * 3]} asks something.\n".encode()) + plan["overhead_tokens"] for u in range(2)
        )
        # JSONL of messages: a conversation per user, its user messages as the turns (filler after them)
        code, claims, run = run_scenario(
            sim,
            tmp_path / "m",
            "sessions",
            "--endpoint",
            "completions",
            "-u",
            "2",
            "-t",
            "3",
            "--turn-tokens",
            "40",
            "--output-tokens",
            "8",
            "--dataset",
            str(chats),
        )
    assert code == 0, claims
    plan = json.loads((run / "manifest.json").read_text())["plan"]
    assert plan["dataset"]["format"] == "jsonl" and plan["dataset"]["messages_from_data"] == 4
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    for u, row in enumerate(plan["dataset"]["rows_sent"]):
        turn0 = next(r for r in records if r["prompt_id"] == f"u{u}" and r["batch"] == 0)
        assert turn0["prompt_tokens"] == len(f"Chat {row} begins.\n".encode()) + plan["overhead_tokens"]


def test_agent_turns_on_the_completions_endpoint_append_each_answer_and_its_tool_result(tmp_path: Path):
    """The completions endpoint takes no tools: each agent turn's answer stands in for the call, its result
    follows, and no user message; the expectations run beside the simulator's own hits. The second user starts
    half a second after the first (--stagger-s): the simulator caches a prompt's blocks once it is prefilled,
    the expectation at its send, so two first turns at the same instant would differ by the shared prefix."""
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        code, claims, run = run_scenario(
            sim,
            tmp_path,
            "sessions",
            "--endpoint",
            "completions",
            "-u",
            "2",
            "-t",
            "3",
            "--first-tokens",
            "200",
            "--system-tokens",
            "300",
            "--tool-definitions-tokens",
            "900",
            "--tool-count",
            "3",
            "--tool-turns",
            "2",
            "--tool-result-tokens",
            "48",
            "--output-tokens",
            "8",
            "--stagger-s",
            "1",
            "--engine-block-tokens",
            "16",
            "--engine-kv-tokens",
            "65536",
        )
    assert code == 0, claims
    value = {name: c["value"] for name, c in claims.items()}
    assert value["sessions.requests"] == 6 and value["sessions.completed_sessions"] == 2
    assert value["sessions.agent.tool_turns"] == 4 and value["sessions.agent.turns_without_call"] == 4
    plan = json.loads((run / "manifest.json").read_text())["plan"]
    assert plan["tool_call_mode"] == "text" and plan["tool_names"] == ["read_file", "write_file", "edit_file"]
    assert (
        300 + 800 < plan["shared_prefix_tokens"] < 300 + 1000
        and plan["kv_source"] == "--engine-block-tokens, --engine-kv-tokens"
    )
    records = sorted(
        (json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()),
        key=lambda r: (r["prompt_id"], r["batch"]),
    )
    for u in ("u0", "u1"):
        turns = [r for r in records if r["prompt_id"] == u]
        assert turns[0]["prompt_tokens"] == plan["overhead_tokens"] + plan["shared_prefix_tokens"] + 200
        for before, after in zip(turns, turns[1:]):  # the answer, a newline, the result: no user message
            assert after["prompt_tokens"] - before["prompt_tokens"] == len(before["output_text"].encode()) + 1 + 48
    for t in range(3):  # the simulator's own hits (16-token blocks, as vLLM's) beside the unbounded expectation
        engine, expected = (
            value[f"sessions.turn{t}.engine_hit_pct"],
            value[f"sessions.turn{t}.expected_hit_pct.unbounded"],
        )
        assert abs(engine - expected) < 3, (t, engine, expected)
        assert value[f"sessions.turn{t}.expected_hit_pct.bounded"] == expected  # 65,536 tokens hold it all
    assert value["sessions.expected_hit_pct.read_against"] == "either"
    publish_and_verify(run, tmp_path / "bundle")


def test_a_primed_shared_prefix_is_cached_before_every_users_first_turn(tmp_path: Path):
    """--prime-shared: the system prompt and tool definitions go out once before the users, who then start
    together (no stagger) and still find the whole shared prefix cached; the priming request is a record of
    its own (family prime) that no turn's figure counts, and the expectation runs it through the cache
    first."""
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        code, claims, run = run_scenario(
            sim,
            tmp_path,
            "sessions",
            "--endpoint",
            "completions",
            "-u",
            "3",
            "-t",
            "2",
            "--first-tokens",
            "64",
            "--system-tokens",
            "600",
            "--turn-tokens",
            "32",
            "--output-tokens",
            "8",
            "--prime-shared",
            "--engine-block-tokens",
            "16",
            "--engine-kv-tokens",
            "65536",
        )
    assert code == 0, claims
    value = {name: c["value"] for name, c in claims.items()}
    assert value["sessions.requests"] == value["sessions.planned_requests"] == 6
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    (prime,) = [r for r in records if r["family"] == "prime"]
    assert prime["output_tokens"] == 1 and prime["send_ns"] < min(r["send_ns"] for r in records if r is not prime)
    plan = json.loads((run / "manifest.json").read_text())["plan"]
    assert plan["prime_shared"] is True
    shared_blocks = (plan["overhead_tokens"] + plan["shared_prefix_tokens"]) // 16 * 16
    first = [r for r in records if r["family"] == "cold"]
    floor = 100 * shared_blocks * len(first) / sum(r["prompt_tokens"] for r in first)
    engine, expected = value["sessions.turn0.engine_hit_pct"], value["sessions.turn0.expected_hit_pct.unbounded"]
    assert engine >= floor - 1 and abs(engine - expected) < 3, (engine, expected, floor)
    publish_and_verify(run, tmp_path / "bundle")


def test_a_model_mix_gives_each_user_one_model_and_primes_each_models_shared_prefix(tmp_path: Path):
    """--model-mix over the model and an adapter: each user's turns all ask for its drawn model, --prime-shared
    primes the shared prefix once per model (the simulator, as vLLM, keys its cache by adapter), so every first
    turn still finds it cached; each model's figures are claimed apart, and the expectation keyed by model
    agrees with the engine's hits."""
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0, "lora_modules": ["adapter-a"]}) as sim:
        code, claims, run = run_scenario(
            sim,
            tmp_path,
            "sessions",
            "--endpoint",
            "completions",
            "-u",
            "6",
            "-t",
            "2",
            "--first-tokens",
            "64",
            "--system-tokens",
            "600",
            "--turn-tokens",
            "32",
            "--output-tokens",
            "8",
            "--prime-shared",
            "--engine-block-tokens",
            "16",
            "--engine-kv-tokens",
            "65536",
            "--model-mix",
            "sim=1,adapter-a=1",
            "--seed",
            "3",
        )
    assert code == 0, claims
    value = {name: c["value"] for name, c in claims.items()}
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    primes = [r for r in records if r["family"] == "prime"]
    turns = [r for r in records if r["family"] != "prime"]
    users = {r["prompt_id"]: {t["model"] for t in turns if t["prompt_id"] == r["prompt_id"]} for r in turns}
    assert all(len(models) == 1 for models in users.values()), users  # a user keeps its model
    drawn = {m for models in users.values() for m in models}
    assert drawn == {"sim", "adapter-a"}  # the seed's draw gives each model users
    assert {p["model"] for p in primes} == drawn and len(primes) == len(drawn)
    assert sum(value[f"sessions.model.{m}.requests"] for m in drawn) == len(turns) == 12
    engine, expected = value["sessions.turn0.engine_hit_pct"], value["sessions.turn0.expected_hit_pct.unbounded"]
    assert engine > 50 and abs(engine - expected) < 3, (engine, expected)  # the shared prefix hit for each model
    publish_and_verify(run, tmp_path / "bundle")


def test_a_users_tools_and_response_format_are_asked_and_every_answer_checked(tmp_path: Path):
    """--tools FILE in place of the generated definitions, an agent turn forcing a call, and --response-format
    json on the other turns: the simulator answers in plain text, so every answer is checked and found
    invalid, each for its own turn's reason (the agent turn's missing call, the others' non-JSON answer), and
    the conversation goes on with the text standing in for the call."""
    tools = Path(__file__).resolve().parents[2] / "docs" / "examples" / "tools-weather.json"
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        code, claims, run = run_scenario(
            sim,
            tmp_path,
            "sessions",
            "--endpoint",
            "chat",
            "-u",
            "2",
            "-t",
            "3",
            "--first-tokens",
            "64",
            "--turn-tokens",
            "32",
            "--output-tokens",
            "8",
            "--tools",
            str(tools),
            "--tool-turns",
            "1",
            "--tool-result-tokens",
            "48",
            "--response-format",
            "json",
        )
    value = {name: c["value"] for name, c in claims.items()}
    assert value["sessions.requests"] == 6 and value["sessions.failed_requests"] == 0, claims
    assert value["sessions.output_checked"] == 6 and value["sessions.output_valid_pct"] == 0
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    reasons = {r["batch"]: r["output_invalid_reason"] for r in records}
    assert reasons[0] == "no tool call (tool_choice required)", reasons
    assert reasons[1].startswith("answer: not JSON") and reasons[2].startswith("answer: not JSON"), reasons
    plan = json.loads((run / "manifest.json").read_text())["plan"]
    assert plan["tool_names"] == ["get_weather", "get_time"] and plan["tool_choice"] == "required"
    assert plan["shared_prefix_tokens"] > 0  # the file's definitions are written into the system message
    assert code == 0  # invalid answers are claims, not a failed run (no criterion asked for their share)
    publish_and_verify(run, tmp_path / "bundle")


TIER = (
    "--endpoint",
    "completions",
    "-u",
    "6",
    "-t",
    "2",
    "--first-tokens",
    "800",
    "--turn-tokens",
    "32",
    "--output-tokens",
    "8",
    "--think-time-s",
    "3",
    "--stagger-s",
    "2",
    "--engine-kv-tokens",
    "4096",
    "--engine-block-tokens",
    "16",
    "--cpu-tier-tokens",
    "65536",
    "--kv-bytes-per-token",
    "18432",
    "--h2d-gbps",
    "50",
)


@pytest.mark.parametrize("tier_blocks", [4096, 0])
def test_second_turns_beyond_the_gpu_cache_come_back_from_a_cpu_tier(tmp_path: Path, tier_blocks: int):
    """Six histories of 800 tokens against a GPU cache of 256 blocks (4,096 tokens: five of them fill it), one
    user after another: by each second turn the GPU has evicted that user's history. With a tier the engine's
    connector supplies about what the replay expects and the warm turns hit; without one they recompute."""
    config = {
        "time_scale": 10.0,
        "num_gpu_blocks": 256,
        "cpu_tier_blocks": tier_blocks,
        "cpu_tier_s_per_token": 1e-6 if tier_blocks else 0.0,
    }
    with SimProcess(tmp_path / "sim.log", config=config) as sim:
        code, claims, run = run_scenario(sim, tmp_path, "sessions", *TIER)
    assert code == 0, claims
    value = {name: c["value"] for name, c in claims.items()}
    assert value["sessions.failed_requests"] == 0
    expected = value["sessions.tier.expected_tokens"]
    assert expected >= 5 * 768  # at least five of the six histories evicted from the GPU: 48 blocks each
    assert "sessions.tier.within_bound_pct" in value and value["sessions.tier.transfer_s.max"] > 0
    if tier_blocks:
        assert 90 <= value["sessions.tier.served_over_expected_pct"] <= 110, value
        assert value["sessions.engine_hit_pct.warm"] > 80
        assert value["offload.cached_tokens.host"] == value["sessions.tier.served_tokens"]
        publish_and_verify(run, tmp_path / "bundle")
    else:
        assert "sessions.tier.served_tokens" not in value  # no connector, no counter: no figure, never a zero
        assert value["sessions.engine_hit_pct.warm"] < 20
