"""A multimodal load run's figures (docs/scenarios.md, "Multimodal load"), pure functions of its records and
the engine's scraped counters: media per second, pixels and bytes per request, the share of media sent again,
the prompt tokens the engine counted against what the text and `--media-tokens` imply, the engine's multimodal
cache (vLLM's `mm_cache_queries_total`, `mm_cache_hits_total`, in items), and, for a route of media alone (a
transcription), audio seconds per second and the real-time factor.

A request's media are in its record (`images`, `video_frames`, `audio_s`, `media_pixels`, `media_bytes`,
`media_hashes`, `media_tokens`); a record without `media_hashes` carried none.
"""

from __future__ import annotations

from statistics import fmean

from loadproof.metrics.claims import Claim, count, number
from loadproof.metrics.latency import succeeded
from loadproof.metrics.uncertainty import rate_interval, ratio_interval
from loadproof.plans.load import MediaPlan
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.units import NS_PER_S

QUERIES, HITS = "mm_cache_queries_total", "mm_cache_hits_total"
# what a predicted run shows of its media (`plan --simulate load --images ...`), in order, with their headings
PREDICTED_MEDIA = (
    ("images/s", "load.media.images_per_s"),
    ("frames/s", "load.media.video_frames_per_s"),
    ("audio s/s", "load.media.audio_s_per_s"),
    ("prompt tokens/request", "load.media.prompt_tokens_per_request.engine"),
    ("mm cache hits", "load.media.mm_cache_hit_pct"),
)


def with_media(records: list[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.media_hashes]


def media_claims(
    records: list[RequestRecord],
    media: MediaPlan | None,
    duration_s: float,
    samples: list[EngineSample],
    start_ns: int,
    end_ns: int,
) -> list[Claim]:
    sent = with_media(records)
    if media is None or not sent:
        return []
    ok = [r for r in sent if succeeded(r)]
    claims = [
        count(
            "load.media.requests",
            len(sent),
            "requests",
            "records whose request carried media (media_hashes not empty)",
            direction="neither",
        )
    ]
    if duration_s > 0:
        for field, name, unit, what in (
            ("images", "images_per_s", "images/s", "images"),
            ("video_frames", "video_frames_per_s", "frames/s", "video_frames"),
            ("audio_s", "audio_s_per_s", "audio s/s", "audio_s"),
        ):
            weights = [float(getattr(r, field) or 0) for r in ok]
            total = sum(weights)
            if any(getattr(r, field) for r in sent):
                claims.append(
                    number(
                        f"load.media.{name}",
                        total / duration_s,
                        unit,
                        f"sum of {what} over the successful requests / duration",
                        2,
                        direction="higher",
                        interval=rate_interval(
                            [r.end_ns for r in ok], weights, start_ns, duration_s, total / duration_s
                        ),
                    )
                )
    if ok and any(r.media_pixels for r in ok):
        claims.append(
            number(
                "load.media.pixels_per_request",
                fmean(r.media_pixels or 0 for r in ok) if ok else 0.0,
                "pixels",
                "mean of media_pixels (width x height of every image and video frame) over the successful "
                "requests with media",
                0,
                direction="neither",
            )
        )
    if ok and any(r.media_bytes for r in ok):  # a prediction encodes no file: no bytes to claim
        claims.append(
            number(
                "load.media.bytes_per_request",
                fmean(r.media_bytes or 0 for r in ok),
                "bytes",
                "mean of media_bytes (the encoded files, before base64) over the successful requests with media",
                0,
                direction="neither",
            )
        )
    claims += _reuse(sent) + _tokens(ok) + _cache(samples, start_ns, end_ns)
    if media.media_alone and ok:
        audio_s = sum(r.audio_s or 0 for r in ok)
        if audio_s > 0:
            claims.append(
                number(
                    "load.media.real_time_factor",
                    sum(r.end_ns - r.send_ns for r in ok) / NS_PER_S / audio_s,
                    "x",
                    "sum of (end_ns - send_ns) / sum of audio_s over the successful requests: seconds a request "
                    "waited per second of audio it carried (below 1: faster than real time)",
                    3,
                    direction="lower",
                    interval=ratio_interval(
                        [(r.end_ns - r.send_ns) / NS_PER_S for r in ok], [r.audio_s or 0.0 for r in ok]
                    ),
                )
            )
    return claims


def _reuse(sent: list[RequestRecord]) -> list[Claim]:
    """Media items sent again: an item whose digest a request sent earlier (by intended send, else send)."""
    seen: set[str] = set()
    items = again = 0
    for r in sorted(sent, key=lambda r: (r.intended_send_ns or r.send_ns, r.request_id)):
        digests = r.media_hashes.split(",")
        items += len(digests)
        again += sum(d in seen for d in digests)
        seen.update(digests)
    return [
        number(
            "load.media.reused_pct",
            100 * again / items,
            "%",
            "media items whose digest (media_hashes) an earlier request sent / media items sent x 100, requests "
            "in intended send order",
            1,
            direction="neither",
        )
    ]


def _tokens(ok: list[RequestRecord]) -> list[Claim]:
    """The engine's prompt tokens against the text's planned tokens plus the rule's media tokens."""
    rows = [
        (r.prompt_tokens, r.planned_input_tokens + r.media_tokens)
        for r in ok
        if r.prompt_tokens is not None and r.planned_input_tokens is not None and r.media_tokens is not None
    ]
    if not rows:
        return []
    return [
        number(
            "load.media.prompt_tokens_per_request.engine",
            fmean(engine for engine, _ in rows),
            "tokens",
            "mean usage.prompt_tokens over the successful requests with media and a media_tokens expectation",
            1,
            direction="neither",
        ),
        number(
            "load.media.prompt_tokens_per_request.expected",
            fmean(expected for _, expected in rows),
            "tokens",
            "mean of planned_input_tokens (the text's) + media_tokens (--media-tokens' rule per item) over the "
            "same requests",
            1,
            direction="neither",
        ),
        count(
            "load.media.prompt_tokens_mismatched",
            sum(engine != expected for engine, expected in rows),
            "requests",
            "of those requests, the ones whose usage.prompt_tokens differs from planned_input_tokens + media_tokens",
            direction="lower",
        ),
    ]


def _cache(samples: list[EngineSample], start_ns: int, end_ns: int) -> list[Claim]:
    """vLLM's multimodal cache counters (items) over the run: their growth from the last sample at or before
    the schedule's start to the last at or after the last response's end."""
    ordered = sorted((s for s in samples if QUERIES in s.values and HITS in s.values), key=lambda s: s.t_ns)
    before = [s.values for s in ordered if s.t_ns <= start_ns]
    after = [s.values for s in ordered if s.t_ns >= end_ns]
    if not before or not after:
        return []
    queries = after[-1][QUERIES] - before[-1][QUERIES]
    hits = after[-1][HITS] - before[-1][HITS]
    claims = [
        count(
            "load.media.engine_mm_cache_queries",
            int(round(queries)),
            "items",
            "growth of mm_cache_queries_total from the last sample at or before the schedule's start to the "
            "last at or after the last response's end",
            direction="neither",
        ),
        count(
            "load.media.engine_mm_cache_hits",
            int(round(hits)),
            "items",
            "growth of mm_cache_hits_total over the same samples",
            direction="neither",
        ),
    ]
    if queries > 0:
        claims.append(
            number(
                "load.media.mm_cache_hit_pct",
                100 * hits / queries,
                "%",
                "mm_cache_hits_total growth / mm_cache_queries_total growth x 100 over the same samples",
                1,
                direction="neither",
            )
        )
    return claims
