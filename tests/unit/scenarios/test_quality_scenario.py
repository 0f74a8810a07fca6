"""The quality scenario against a scripted server: what it sends, what it stores, and what it never stores."""

from __future__ import annotations

import json

import pytest

from loadproof.metrics.quality import quality_claims
from loadproof.plans import load_plan
from loadproof.protocol.sse import DONE_EVENT
from loadproof.report.build import build_report
from loadproof.rundir import Manifest
from loadproof.scenarios.base import Target
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.quality import QualityScenario
from loadproof.scenarios.quality_options import QualityOptions
from loadproof.store.run_dir import RunWriter, load_run
from loadproof.workloads.quality import authored, gsm8k
from tests.conftest import Script
from tests.sse_chunks import chat_chunk, completion_chunk, usage_only


def answer_script(text: str, chat: bool = False) -> Script:
    piece = chat_chunk(text, completion_tokens=3) if chat else completion_chunk(text, 3, finish="stop")
    return Script(pieces=[piece, usage_only(3), DONE_EVENT])


async def run_quality(tmp_path, target: Target, options: QualityOptions):
    writer = RunWriter.create(tmp_path, "quality")
    manifest = Manifest(run_id=writer.run_id, scenario="quality")
    live = LiveStatus("quality")
    with writer:
        await QualityScenario(target, options).run(writer, manifest, live)
    writer.write_manifest(manifest)
    return writer.path, live


def secret_texts() -> list[str]:
    return [p.question for p in gsm8k.load_subset()] + [t.prompt for t in authored.load_tasks()]


@pytest.mark.asyncio
async def test_completions_run_stores_scored_rows_and_no_question_text(sse_server, tmp_path):
    server = await sse_server([answer_script(" 42\n#### 42")])
    target = Target(url=server.url, model="m", endpoint="completions")
    path, live = await run_quality(tmp_path, target, QualityOptions(gsm8k_items=3))
    run = load_run(path)
    tasks = authored.load_tasks()
    assert len(run.records) == 3 + len(tasks)
    assert (live.done, live.planned, live.errors) == (3 + len(tasks), 3 + len(tasks), 0)
    assert live.sent == 3 + len(tasks)  # the client told the live view of every request it sent
    assert all(r.output_text == "" and r.scenario == "quality" for r in run.records)
    rows = {(r.suite, r.item_id, r.mode): r for r in run.answers}
    first = rows[("gsm8k", "gsm8k-test-0003", "plain")]
    assert first.extracted_strict == "42" and first.expected == "540" and first.correct_flexible is False
    assert first.request_id == "gsm8k-test-0003.plain"
    arith = rows[("authored", "en-arith-01", "plain")]
    assert arith.extracted == "42" and arith.correct is True and arith.lang == "en"
    skipped = [r for r in run.answers if r.skipped]
    assert {r.suite for r in skipped} == {"authored", "retrieval", "image"}
    assert all("completions endpoint" in r.skipped for r in skipped if r.suite == "authored")
    assert all("--tokenizer" in r.skipped for r in skipped if r.suite == "retrieval")
    assert len([r for r in skipped if r.suite == "retrieval"]) == 6
    # nothing of any question or prompt anywhere in the run directory
    stored = "".join(p.read_text(encoding="utf-8") for p in path.iterdir())
    assert not [text for text in secret_texts() if text in stored]
    # what was sent: greedy, few-shot completion prompts with lm-eval's stops, short authored answers
    bodies = [json.loads(b) for b in server.bodies]
    gsm = [b for b in bodies if b["max_tokens"] == 256]
    assert len(gsm) == 3 and all(b["stop"] == gsm8k.STOP and b["temperature"] == 0.0 for b in gsm)
    assert all(b["prompt"].count("Question:") == len(gsm8k.EXEMPLARS) + 1 for b in gsm)
    assert sum(b["max_tokens"] == 64 for b in bodies) == len(tasks)
    assert run.manifest.plan["gsm8k"]["items"] == 3 and run.manifest.plan["num_skipped"] == len(skipped)
    assert "image" in run.manifest.plan and "overhead_tokens" not in run.manifest.plan["retrieval"]
    plan = load_plan(run)  # the typed plan reads back what the scenario wrote, a suite not asked left out
    assert run.manifest.plan_version == 1 and plan.gsm8k.items == 3 and plan.retrieval.asked_lengths == []
    claims = {c.name: c for c in quality_claims(run.answers)}
    assert claims["quality.gsm8k.items"].value == 3
    assert claims["quality.authored.low-thinking.skipped"].value.startswith("completions endpoint")
    report = build_report(path)
    assert "## Quality" in report.markdown and "| authored plain |" in report.markdown


@pytest.mark.asyncio
async def test_chat_thinking_model_modes_and_an_image_refusal(sse_server, tmp_path):
    refusal = Script(status=400, pieces=[b'{"error": {"message": "this model does not support images"}}'])
    server = await sse_server([refusal, answer_script("Paris", chat=True)])
    target = Target(
        url=server.url, model="m", endpoint="chat", extra_body={"chat_template_kwargs": {"enable_thinking": False}}
    )
    options = QualityOptions(suites=["authored", "image"], thinking_mode=True, concurrency=2)
    path, _ = await run_quality(tmp_path, target, options)
    run = load_run(path)
    images = [r for r in run.answers if r.suite == "image"]
    assert images and all("HTTP 400: this model does not support images" in r.skipped for r in images)
    bodies = [json.loads(b) for b in server.bodies]
    assert bodies[0]["messages"][0]["content"][0]["type"] == "image_url"  # the probe
    tasks = authored.load_tasks()
    plain = [b for b in bodies[1:] if "chat_template_kwargs" not in b]
    low = [b for b in bodies[1:] if b.get("chat_template_kwargs") == {"enable_thinking": False}]
    assert len(plain) == len(low) == len(tasks)
    assert all(b["max_tokens"] == options.thinking_max_tokens for b in plain)  # room to think first
    assert all(b["max_tokens"] == options.authored_max_tokens and "stop" not in b for b in low)
    assert {b["messages"][0]["content"] for b in low} == {t.prompt for t in tasks}
    capital = [r for r in run.answers if r.item_id == "en-capital-01"]
    assert sorted(r.mode for r in capital) == ["low-thinking", "plain"] and all(r.correct for r in capital)


@pytest.mark.asyncio
async def test_a_failed_request_is_a_wrong_answer_with_its_error(sse_server, tmp_path):
    server = await sse_server([Script(status=500, pieces=[b'{"error": {"message": "boom"}}'])])
    target = Target(url=server.url, model="m", endpoint="completions")
    path, _ = await run_quality(tmp_path, target, QualityOptions(suites=["gsm8k"], gsm8k_items=2))
    rows = load_run(path).answers
    assert [r.error for r in rows] == ["http_status", "http_status"]
    assert all(r.correct_flexible is False and r.extracted_flexible is None for r in rows)
    claims = {c.name: c for c in quality_claims(rows)}
    assert claims["quality.gsm8k.correct"].value == 0 and claims["quality.request_errors"].value == 2


def test_options_reject_unknown_suites_and_modes():
    with pytest.raises(ValueError):
        QualityOptions(suites=["gsm9k"])
    with pytest.raises(ValueError):
        QualityOptions(authored_modes=["high-thinking"])
