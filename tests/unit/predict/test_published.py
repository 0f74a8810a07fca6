"""The published-figures file: parsing (each malformed case one line), calibration, and the CLI's exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loadproof.errors import UsageError
from loadproof.predict.published import calibrate_published, parse_draft_schedule, read_published

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "reference-published.toml"

MINIMAL = """
[deployment]
gpu_model = "H200"
tensor_parallel = 1
pipeline_parallel = 2
kv_cache_tokens = 1000000
max_model_len = 131072
max_num_seqs = 8
[single_request]
cold_prefill_ttft_median_s = 4.0
cold_prefill_input_tokens = 100000
[throughput]
english = { c1 = 200.0, c8 = 1200.0 }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "published.toml"
    path.write_text(text)
    return path


def test_the_reference_example_calibrates_and_says_what_it_used_and_assumed():
    pub = read_published(EXAMPLE)
    assert pub.pipeline_parallel == 2 and pub.kv_cache_tokens == 25_981_641 and pub.max_num_batched_tokens is None
    assert pub.draft_by_batch == [[4, 5], [32, 3]]
    cal = calibrate_published(pub)
    cost = cal.config.cost
    assert cal.config.max_num_batched_tokens == 8192 and cost.pipeline_stages == 2 and max(cost.cuda_graph_sizes) == 128
    assert 0 < cost.spec_acceptance < 1
    assert any("relay_decode_tokens_per_s" in u for u in cal.used) and any("[history]" in u for u in cal.used)
    assert any("max_num_batched_tokens" in a for a in cal.assumptions)
    for line in cal.residuals:  # every published figure is reproduced by the fitted model
        assert float(line.rsplit("(", 1)[1].split("%")[0]) == pytest.approx(0, abs=1.0), line


def test_a_minimal_file_without_speculative_decoding(tmp_path: Path):
    cal = calibrate_published(read_published(write(tmp_path, MINIMAL)))
    assert cal.config.cost.spec_draft_by_batch == [] and cal.config.cost.pipeline_stages == 2


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda t: t.replace("[deployment]", "[deploy]"), "no [deployment] table"),
        (lambda t: t.replace("kv_cache_tokens = 1000000\n", ""), "kv_cache_tokens is missing"),
        (lambda t: t.replace("max_num_seqs = 8", "max_num_seqs = -3"), "max_num_seqs = -3"),
        (lambda t: t.replace("max_num_seqs = 8", 'max_num_seqs = "many"'), "max_num_seqs"),
        (lambda t: t.replace("cold_prefill_ttft_median_s = 4.0", "cold_prefill_ttft_median_s = 0"), "positive number"),
        (
            lambda t: t.replace("cold_prefill_input_tokens = 100000", 'cold_prefill_input_tokens = "1M"'),
            "cold_prefill_input_tokens",
        ),
        (
            lambda t: t.replace("cold_prefill_ttft_median_s = 4.0\ncold_prefill_input_tokens = 100000\n", ""),
            "no cold TTFT",
        ),
        (lambda t: t.replace("c8 = 1200.0", "c8 = -1"), "english.c8"),
        (lambda t: t.replace("c1 = 200.0, ", ""), "no c1"),
        (lambda t: t.replace("[deployment]", '[deployment]\nspeculative = "sometimes"'), "speculative"),
        (lambda t: t + "[[[", "not valid TOML"),
        (lambda t: t.replace("pipeline_parallel = 2", 'pipeline_parallel = "two"'), "pipeline_parallel"),
    ],
)
def test_each_malformed_file_is_one_line(tmp_path: Path, edit, needle):
    with pytest.raises(UsageError) as info:
        read_published(write(tmp_path, edit(MINIMAL)))
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_one_concurrency_cannot_fit_the_decode_step(tmp_path: Path):
    with pytest.raises(UsageError, match="two concurrencies"):
        calibrate_published(read_published(write(tmp_path, MINIMAL.replace(", c8 = 1200.0", ""))))


def test_draft_schedule_forms():
    assert parse_draft_schedule("draft length 5 for batches of 1-4 sequences, 3 for batches of 5-32", Path("x")) == [
        [4, 5],
        [32, 3],
    ]
    assert parse_draft_schedule([[32, 3], [4, 5]], Path("x")) == [[4, 5], [32, 3]]
    assert parse_draft_schedule(None, Path("x")) == []


def test_cli_bad_file_exits_2_with_one_line(tmp_path: Path):
    path = write(tmp_path, MINIMAL.replace("max_num_seqs = 8", "max_num_seqs = 0"))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadproof",
            "sim",
            "calibrate",
            "--published",
            str(path),
            "-o",
            str(tmp_path / "out.toml"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "max_num_seqs" in proc.stderr


def test_cli_grid_needs_an_engine(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-m", "loadproof", "sim", "calibrate", "--grid", "-o", str(tmp_path / "o.toml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--grid needs --url" in proc.stderr


def test_the_published_calibration_lists_what_it_cannot_pin_and_each_value_still_fits_the_figures(tmp_path: Path):
    from loadproof.predict.calibration import CalibrationLimits, FitShares, calibrate_from_published
    from loadproof.sim.assumptions import with_overrides
    from loadproof.sim.config import load_sim_config

    done = calibrate_from_published(EXAMPLE, tmp_path / "ref.toml", CalibrationLimits(), FitShares())
    config = load_sim_config(done.path)  # written and read back, assumptions included
    by_name = {a.name: a for a in config.assumptions}
    assert set(by_name) == {
        "kv_read_efficiency",
        "frontend_s_per_token",
        "prefill_attention_share",
        "draft_acceptance",
        "concurrent_long_prefills",
        "pipeline_batching",
    }
    assert all(a.open for a in config.assumptions)
    assert [i.name for i in config.inputs] == ["reference-published.toml"] and len(config.inputs[0].sha256) == 64
    # every efficiency re-derives the long text's acceptance so the 1M relay still decodes at 416.32 tokens/s
    for variant in by_name["kv_read_efficiency"].variants:
        cost = with_overrides(config, variant.overrides).cost
        rate = 1 / cost.step_s([], [1_000_004])  # a decode step is charged per emitted token (step / E)
        assert rate == pytest.approx(416.32, rel=0.01), variant.value
    # every front-end overhead re-fits the prefill so the lone 1M prompt still takes 61.14 s
    from loadproof.predict.calibrate import lone_ttft_s

    for variant in by_name["frontend_s_per_token"].variants:
        cost = with_overrides(config, variant.overrides).cost
        assert lone_ttft_s(cost, 999_936, 8192) == pytest.approx(61.14, rel=0.01), variant.value
    given = calibrate_from_published(
        EXAMPLE, tmp_path / "given.toml", CalibrationLimits(), FitShares(frontend_s_per_token=0.0, acceptance=0.5)
    )
    pinned = {a.name: a.pinned_by for a in given.calibration.config.assumptions}
    assert pinned["frontend_s_per_token"] == "--frontend-s-per-token" and pinned["draft_acceptance"] == "--acceptance"
