from pathlib import Path
from types import SimpleNamespace

import msgspec

from loadproof.metrics import compute_claims
from loadproof.metrics.engine_agreement import VERSION, agreement_claims
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.scenarios.recording import common_manifest
from loadproof.store.run_dir import Run
from loadproof.store.schema import manifest_json, read_manifest
from tests import rundir_values as rv
from tests.unit.metrics import test_load

S = 1_000_000_000


def rec(i: int, send: float, first: float | None, end: float, prompt: int, out: int) -> RequestRecord:
    return RequestRecord(
        request_id=f"r{i}",
        endpoint="completions",
        send_ns=int(send * S),
        first_token_ns=None if first is None else int(first * S),
        end_ns=int(end * S),
        prompt_tokens=prompt,
        output_tokens=out,
    )


def sample(t: float, **values: float) -> EngineSample:
    return EngineSample(t_ns=int(t * S), values=values)


def test_client_figures_beside_the_engine_counters():
    records = [rec(0, 1.0, 1.5, 3.0, 100, 10), rec(1, 1.0, 2.5, 4.0, 200, 20), rec(2, 2.0, None, 4.0, 300, 0)]
    samples = [
        sample(0.5, prompt_tokens_total=1000, generation_tokens_total=50, ttft_seconds_sum=10.0, ttft_seconds_count=4),
        sample(2.0, prompt_tokens_total=1100, generation_tokens_total=55),  # inside: not used
        sample(4.5, prompt_tokens_total=1300, generation_tokens_total=82, ttft_seconds_sum=11.9, ttft_seconds_count=6),
    ]
    got = {c.name: c.value for c in agreement_claims(records, samples)}
    assert got["crosscheck.prompt_tokens.client"] == 300  # the request with no first token is not counted
    assert got["crosscheck.prompt_tokens.engine"] == 300
    assert got["crosscheck.prompt_tokens.diff_pct"] == 0
    assert got["crosscheck.generation_tokens.client"] == 30
    assert got["crosscheck.generation_tokens.engine"] == 32
    assert abs(got["crosscheck.generation_tokens.diff_pct"] - (30 - 32) / 32 * 100) < 1e-9
    assert abs(got["crosscheck.ttft_mean_s.client"] - 1.0) < 1e-9  # (0.5 + 1.5) / 2
    assert abs(got["crosscheck.ttft_mean_s.engine"] - 0.95) < 1e-9  # 1.9 s over 2 requests
    assert got["crosscheck.ttft_count.engine"] == 2 and got["crosscheck.ttft_count.client"] == 2


def test_behind_a_disaggregated_pair_the_clients_ttft_drops_the_prefill_hop():
    """The engine read is the decode instance: its TTFT begins when the relay's prefill hop has ended."""
    records = [rec(0, 1.0, 3.5, 5.0, 100, 10), rec(1, 1.0, 4.0, 6.0, 200, 20)]
    records[0].prefill_hop_ns, records[1].prefill_hop_ns = int(2.0 * S), int(2.2 * S)
    samples = [
        sample(0.5, ttft_seconds_sum=0.0, ttft_seconds_count=0),
        sample(6.5, ttft_seconds_sum=1.3, ttft_seconds_count=2),
    ]
    got = {c.name: c.value for c in agreement_claims(records, samples)}
    assert abs(got["crosscheck.ttft_mean_s.client"] - 0.65) < 1e-9  # ((2.5 - 2.0) + (3.0 - 2.2)) / 2
    assert abs(got["crosscheck.ttft_mean_s.engine"] - 0.65) < 1e-9


def test_nothing_is_claimed_without_samples_around_the_run():
    records = [rec(0, 1.0, 1.5, 3.0, 100, 10)]
    assert agreement_claims(records, []) == []
    assert agreement_claims(records, [sample(2.0, prompt_tokens_total=1), sample(5.0, prompt_tokens_total=2)]) == []


PROBED = [  # a run of two requests; the engine's TTFT histogram also counts two short probes it did not send
    sample(0.5, prompt_tokens_total=0, generation_tokens_total=0, ttft_seconds_sum=0.0, ttft_seconds_count=0),
    sample(9.0, prompt_tokens_total=304, generation_tokens_total=32, ttft_seconds_sum=2.02, ttft_seconds_count=4),
]


def probed_records() -> list[RequestRecord]:
    return [rec(0, 1.0, 2.0, 3.0, 150, 15), rec(1, 4.0, 5.0, 6.0, 150, 15)]


def test_engine_requests_the_run_did_not_send_make_the_mean_ttfts_not_comparable():
    """Issue #37: the supervisor's probes are in the engine's TTFT histogram; its mean (0.505 s over 4) is not
    the run's (1 s over 2), and a -49.5 % difference would be the probes', not a disagreement."""
    got = {c.name: c for c in agreement_claims(probed_records(), PROBED)}
    assert got["crosscheck.ttft_mean_s.client"].value == 1.0
    assert "crosscheck.ttft_mean_s.engine" not in got and "crosscheck.ttft_mean_s.diff_pct" not in got
    why = got["crosscheck.ttft_mean_s.not_comparable"]
    assert why.kind == "fact" and why.value.startswith("not comparable: 2 engine request(s) not sent by this run")
    assert got["crosscheck.ttft_count.client"].value == 2 and got["crosscheck.ttft_count.engine"].value == 4
    assert got["crosscheck.prompt_tokens.diff_pct"].value is not None  # the token counters are still set beside


def transcribed(records: list[RequestRecord]) -> list[RequestRecord]:
    """`records` as transcriptions: vLLM's usage counts the audio's mel frames beside the decoder's 4 tokens."""
    for r in records:
        r.endpoint = "transcriptions"
    return records


def test_a_route_whose_usage_counts_other_prompt_tokens_leaves_the_prompt_pair_out_and_no_other():
    """vLLM's transcription usage counts 100 mel frames a second and the decoder's 4 tokens, its counter the 4
    alone: a +9,980% difference would compare apples to oranges. Every other pair stays as it was."""
    records = [rec(0, 1.0, 1.5, 3.0, 204, 10), rec(1, 1.0, 2.5, 4.0, 204, 20)]
    samples = [
        sample(0.5, prompt_tokens_total=0, generation_tokens_total=0, ttft_seconds_sum=0.0, ttft_seconds_count=0),
        sample(4.5, prompt_tokens_total=8, generation_tokens_total=30, ttft_seconds_sum=1.9, ttft_seconds_count=2),
    ]
    text = {c.name: c.value for c in agreement_claims(records, samples)}
    assert text["crosscheck.prompt_tokens.diff_pct"] == (408 - 8) / 8 * 100  # on a text route: set beside
    got = {c.name: c for c in agreement_claims(transcribed(records), samples)}
    assert not [name for name in got if name.startswith("crosscheck.prompt_tokens.") and "not_comparable" not in name]
    why = got["crosscheck.prompt_tokens.not_comparable"]
    assert why.kind == "fact" and why.value.startswith("not comparable: usage.prompt_tokens on the transcriptions")
    # every other pair unchanged
    assert {n: c.value for n, c in got.items() if not n.startswith("crosscheck.prompt_tokens.")} == {
        n: v for n, v in text.items() if not n.startswith("crosscheck.prompt_tokens.")
    }
    # one such record in a mixed run is enough: the engine's counter cannot be split by route
    mixed = [rec(0, 1.0, 1.5, 3.0, 100, 10), *transcribed([rec(1, 1.0, 2.5, 4.0, 204, 20)])]
    assert "crosscheck.prompt_tokens.not_comparable" in {c.name for c in agreement_claims(mixed, samples)}
    # a route no adapter knows (a plug-in's) is taken to count as the engine does; a run of version 2 keeps its pair
    for r in records:
        r.endpoint = "echo-plugin"
    assert "crosscheck.prompt_tokens.diff_pct" in {c.name for c in agreement_claims(records, samples)}
    old = {c.name for c in agreement_claims(transcribed(records), samples, version=2)}
    assert "crosscheck.prompt_tokens.diff_pct" in old and "crosscheck.prompt_tokens.not_comparable" not in old


def test_fewer_engine_first_tokens_than_the_runs_are_not_comparable_either():
    restarted = [PROBED[0], sample(9.0, ttft_seconds_sum=0.9, ttft_seconds_count=1)]
    got = {c.name: c.value for c in agreement_claims(probed_records(), restarted)}
    assert got["crosscheck.ttft_mean_s.not_comparable"].startswith("not comparable: the engine counted 1 first token")
    assert "crosscheck.ttft_mean_s.diff_pct" not in got


def test_a_run_recorded_before_version_2_keeps_its_published_difference():
    """Version 1 (a manifest without `crosscheck`, every bundle published before it): the means side by side."""
    got = {c.name: c.value for c in agreement_claims(probed_records(), PROBED, version=1)}
    assert abs(got["crosscheck.ttft_mean_s.engine"] - 0.505) < 1e-9
    assert abs(got["crosscheck.ttft_mean_s.diff_pct"] - (1.0 - 0.505) / 0.505 * 100) < 1e-9
    assert "crosscheck.ttft_mean_s.not_comparable" not in got


def test_the_version_comes_from_the_runs_manifest():
    for manifest, expected in (
        ({}, "crosscheck.ttft_mean_s.diff_pct"),
        ({"crosscheck": 2}, "crosscheck.ttft_mean_s.not_comparable"),
    ):
        names = {c.name for c in compute_claims(probed_run(manifest))}
        assert expected in names


def test_every_run_records_this_loadproofs_crosscheck_version():
    manifest = common_manifest(
        "r",
        "throughput",
        SimpleNamespace(model_dump=dict),
        SimpleNamespace(describe=dict, served=SimpleNamespace(version=None)),
    )
    assert manifest.crosscheck == VERSION == 3
    assert read_manifest(manifest_json(manifest)).crosscheck == VERSION


def probed_run(manifest: dict) -> Run:
    """The probed run as a load run of its own (its plan test_load's), with `manifest`'s fields."""
    fields = {"run_id": "probed", "scenario": "load", "plan": msgspec.to_builtins(test_load.plan()), **manifest}
    samples = [msgspec.to_builtins(s) for s in PROBED]
    return rv.run_of(Path("probed"), fields, probed_records(), samples=samples)


def docs_runs(_tmp_path: Path) -> list[Run]:
    """For the docs-formulas test: the crosscheck's not-comparable facts (TTFT means, a transcription's prompt
    tokens)."""
    fields = {"run_id": "heard", "scenario": "load", "plan": msgspec.to_builtins(test_load.plan()), "crosscheck": 3}
    samples = [msgspec.to_builtins(s) for s in PROBED]
    heard = rv.run_of(Path("heard"), fields, transcribed(probed_records()), samples=samples)
    return [probed_run({"crosscheck": VERSION}), heard]
