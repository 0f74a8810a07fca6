"""A multimodal load run's figures (metrics/media.py) on hand-made records: media per second, pixels and bytes
per request, the share sent again, the engine's prompt tokens against the expected, vLLM's multimodal cache over
the run, a transcription's real-time factor; none for a run without media."""

from __future__ import annotations

import msgspec
import pytest

from loadproof.metrics import compute_claims
from loadproof.plans.load import MediaPlan
from loadproof.records import RequestRecord
from loadproof.store.run_dir import Run
from tests import rundir_values as rv
from tests.unit.metrics import test_load

S = 1_000_000_000
T0 = 100 * S


def rec(
    i: int, hashes: str, *, ok: bool = True, prompt: int = 164, media_tokens: int | None = 100, **media
) -> RequestRecord:
    send = T0 + i * S
    return RequestRecord(
        request_id=f"load-{i}",
        endpoint="chat",
        scenario="load",
        ok=ok,
        error_kind=None if ok else "http_status",
        send_ns=send,
        intended_send_ns=send,
        first_token_ns=send + S // 10 if ok else None,
        last_token_ns=send + S // 2 if ok else None,
        end_ns=send + S // 2,
        prompt_tokens=prompt if ok else None,
        output_tokens=4 if ok else None,
        planned_input_tokens=64,
        planned_output_tokens=4,
        media_hashes=hashes,
        media_tokens=media_tokens,
        **media,
    )


def image_records() -> list[RequestRecord]:
    img = {"images": 2, "media_pixels": 2 * 64 * 64, "media_bytes": 3000}
    return [
        rec(0, "a,b", **img),
        rec(1, "c,d", **img),
        rec(2, "a,b", **img),  # sends request 0's images again
        rec(3, "e,f", prompt=170, **img),  # the engine counted 6 more than expected
        rec(4, "g,h", ok=False, **img),  # failed: counted as sent, in no figure of successful requests
    ]


def samples(queries: tuple[float, float], hits: tuple[float, float]) -> list[dict]:
    return [
        {"t_ns": T0 - S, "values": {"mm_cache_queries_total": queries[0], "mm_cache_hits_total": hits[0]}},
        {"t_ns": T0 + 10 * S, "values": {"mm_cache_queries_total": queries[1], "mm_cache_hits_total": hits[1]}},
    ]


def media_run(records: list[RequestRecord], media: MediaPlan, samples: list[dict] = ()) -> Run:
    plan = test_load.plan(planned_requests=len(records), endpoint="chat", media=media)
    return rv.run_of(
        None,
        {"scenario": "load", "plan": msgspec.to_builtins(plan)},
        records,
        samples=samples,
        events=[{"kind": "schedule_start", "t_ns": T0}],
    )


def claims_of(run: Run) -> dict[str, object]:
    return {c.name: c.value for c in compute_claims(run)}


def test_image_figures_reuse_tokens_and_the_engine_cache():
    run = media_run(image_records(), MediaPlan(images="2:64x64", tokens="fixed:50"), samples((5, 15), (1, 3)))
    got = claims_of(run)
    duration = 4.5  # the schedule's start to the last response's end
    assert got["load.media.requests"] == 5
    assert got["load.media.images_per_s"] == pytest.approx(8 / duration)
    assert got["load.media.pixels_per_request"] == 2 * 64 * 64 and got["load.media.bytes_per_request"] == 3000
    assert got["load.media.reused_pct"] == pytest.approx(100 * 2 / 10)
    assert got["load.media.prompt_tokens_per_request.engine"] == pytest.approx((164 * 3 + 170) / 4)
    assert got["load.media.prompt_tokens_per_request.expected"] == 164
    assert got["load.media.prompt_tokens_mismatched"] == 1
    assert got["load.media.engine_mm_cache_queries"] == 10 and got["load.media.engine_mm_cache_hits"] == 2
    assert got["load.media.mm_cache_hit_pct"] == pytest.approx(20.0)
    assert "load.input_tokens_mismatched" not in got  # records with media are left to the media claims
    assert "load.media.real_time_factor" not in got and "load.media.audio_s_per_s" not in got


def transcription_records() -> list[RequestRecord]:
    return [
        msgspec.structs.replace(
            rec(i, f"w{i}", audio_s=2.0, media_bytes=64_044, media_tokens=None, video_frames=None),
            endpoint="transcriptions",
            planned_input_tokens=None,
        )
        for i in range(3)
    ]


def test_a_transcription_run_claims_audio_seconds_and_the_real_time_factor():
    got = claims_of(media_run(transcription_records(), MediaPlan(audio_s=2.0, media_alone=True)))
    assert got["load.media.audio_s_per_s"] == pytest.approx(6.0 / 2.5)
    assert got["load.media.real_time_factor"] == pytest.approx(1.5 / 6.0)  # 2 s of audio in 0.5 s, three times
    assert "load.media.prompt_tokens_per_request.engine" not in got and "load.media.pixels_per_request" not in got


def test_video_frames_per_second():
    records = [rec(i, f"v{i}", video_frames=8, media_pixels=8 * 32 * 32, media_bytes=900) for i in range(2)]
    got = claims_of(media_run(records, MediaPlan(video_frames="8:32x32")))
    assert got["load.media.video_frames_per_s"] == pytest.approx(16 / 1.5)


def test_a_run_without_media_has_no_media_claim():
    run = rv.run_of(
        None,
        {"scenario": "load", "plan": msgspec.to_builtins(test_load.plan(planned_requests=1))},
        [msgspec.structs.replace(rec(0, ""), media_tokens=None)],
        events=[{"kind": "schedule_start", "t_ns": T0}],
    )
    assert not [n for n in claims_of(run) if n.startswith("load.media.")]


def docs_runs(_tmp_path) -> list[Run]:  # tests/unit/metrics/test_docs_formulas.py
    video = [rec(9, "v", video_frames=4, media_pixels=4 * 16, media_bytes=10)]
    return [
        media_run(image_records() + video, MediaPlan(images="2:64x64", tokens="fixed:50"), samples((5, 15), (1, 3))),
        media_run(transcription_records(), MediaPlan(audio_s=2.0, media_alone=True)),
    ]
