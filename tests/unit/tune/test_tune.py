"""`loadproof tune`'s parts that need no engine: the grid, the journal, the front, one point predicted."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import msgspec
import pytest

from loadproof.config.profile import load_profile, packaged_profile, parse_profile
from loadproof.errors import UsageError
from loadproof.rundir.tune import JournalLine, Measured, Predicted, TuneSpec
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.options import from_cli
from loadproof.sim.config import CostModel, SimConfig
from loadproof.store.series import encode_line
from loadproof.tune.grid import parse_axis, points, profile_toml
from loadproof.tune.journal import Journal
from loadproof.tune.pareto import Scored, dominated_by, front
from loadproof.tune.tuning import predict_point

SHAPES = Path(__file__).resolve().parents[3] / "src" / "loadproof" / "data" / "models"


def test_a_grid_is_every_combination_each_a_valid_profile():
    base = packaged_profile("embedded")
    grid = points(base, [parse_axis("max_num_seqs=4,8"), parse_axis("scheduler.max_num_batched_tokens=512,2048")])
    assert [p.name for p in grid] == [
        "max_num_seqs=4,max_num_batched_tokens=512",
        "max_num_seqs=4,max_num_batched_tokens=2048",
        "max_num_seqs=8,max_num_batched_tokens=512",
        "max_num_seqs=8,max_num_batched_tokens=2048",
    ]
    assert (grid[2].profile.scheduler.max_num_seqs, grid[2].profile.scheduler.max_num_batched_tokens) == (8, 512)
    with pytest.raises(UsageError, match="KEY=V1,V2"):
        parse_axis("max_num_seqs")
    with pytest.raises(UsageError, match="given twice"):
        parse_axis("max_num_seqs=4,4")
    with pytest.raises(UsageError, match="max_num_seqs"):  # the profile's own validation, one line
        points(base, [parse_axis("max_num_seqs=0")])


@pytest.mark.parametrize("name", ["embedded", "embedded-pd", "reference-tp4pp2", "llama-8b-h200"])
def test_a_points_profile_written_as_toml_reads_back_the_same(name):
    profile = packaged_profile(name)
    assert parse_profile(tomllib.loads(profile_toml(profile)), name) == profile


def search_options(**values) -> LoadOptions:
    """run load's options a tune's searches hold, as `loadproof tune` makes them (run load's defaults)."""
    return from_cli(LoadOptions, {**values, "search": "rate"}, "tune")


def spec(grid: list[str], **load) -> TuneSpec:
    opts = search_options(slo="ttft=1s", duration_s=10, **load)
    return TuneSpec(profile="p.toml", sim="s.toml", sha256={}, grid=grid, load=opts.model_dump(mode="json"))


def test_the_journal_resumes_the_same_tune_and_refuses_another(tmp_path):
    journal = Journal(tmp_path, spec(["a=1,2"]))
    journal.add(Predicted(point="a=1", max_rate_rps=2.0, kv_gib=0.0))
    with open(tmp_path / "tune.jsonl", "a") as f:
        f.write('{"kind": "measured", "point": "a=1", "max')  # an interrupt cut the last line
    again = Journal(tmp_path, spec(["a=1,2"]))
    assert again.resumed and again.find(Predicted, "a=1").max_rate_rps == 2.0
    assert again.find(Measured, "a=1") is None
    with pytest.raises(UsageError, match="holds another tune .*grid"):
        Journal(tmp_path, spec(["a=1,3"]))
    with pytest.raises(UsageError, match=r"holds another tune \(its load\.attainment differ\)"):
        Journal(tmp_path, spec(["a=1,2"], attainment=0.9))


def test_the_front_keeps_what_nothing_beats_on_every_axis():
    fast = Scored("fast", 8.0, 0.9, 4.0)
    slow = Scored("slow", 4.0, 1.2, 4.0)
    lean = Scored("lean", 4.0, 1.2, 2.0)  # slower than fast, but cheaper
    assert dominated_by(slow, [fast, slow, lean]) is fast
    assert [p.name for p in front([fast, slow, lean])] == ["fast", "lean"]


def test_a_point_is_predicted_by_the_rate_search_run_load_would_do(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    shutil.copy(SHAPES / "llama-3.1-8b-shape" / "config.json", model / "config.json")
    profile_path = tmp_path / "p.toml"
    profile_path.write_text(
        f'name = "t"\nengine = "vllm"\n[model]\npath = "{model}"\nserved_name = "m"\n'
        "max_model_len = 8192\n[kv_cache]\nbudget_gib_per_gpu = 4\n[scheduler]\nmax_num_seqs = 4\n"
    )
    # 10 ms a step plus 1 ms a sequence: 4 sequences of 32 tokens take ~0.45 s, so about 8 requests/s fit
    sim = SimConfig(
        max_model_len=8192, cost=CostModel(step_overhead_s=0.01, decode_s_per_seq=0.001, prefill_s_per_token=1e-5)
    )
    options = search_options(slo="ttft=1s,tpot=50ms", duration_s=10, search_max=64)
    small = predict_point(load_profile(profile_path), sim, options, "max_num_seqs=4")
    assert small.tried[0] == (1.0, True) and small.max_rate_rps is not None and not small.lower_bound
    assert small.kv_gib == 4.0 and small.point == "max_num_seqs=4"
    profile_path.write_text(profile_path.read_text().replace("max_num_seqs = 4", "max_num_seqs = 16"))
    large = predict_point(load_profile(profile_path), sim, options)
    assert large.max_rate_rps > 1.5 * small.max_rate_rps  # four times the batch: more than 1.5x the rate
    assert msgspec.json.decode(encode_line(large), type=JournalLine) == large  # the journal's line


def test_a_draft_length_on_the_grid_changes_the_prediction_and_needs_an_acceptance(tmp_path):
    """The profile's drafts reach the modeled engine (`sim.predict.deployment_config`): a point that drafts
    3 tokens at 80% acceptance yields 1 + 0.8 + 0.64 + 0.512 = 2.95 tokens a step for the cost of 4 query
    tokens, so it fits more traffic than one that drafts 1; a sim profile with no acceptance is refused."""
    model = tmp_path / "model"
    model.mkdir()
    shutil.copy(SHAPES / "llama-3.1-8b-shape" / "config.json", model / "config.json")
    profile_path = tmp_path / "p.toml"
    profile_path.write_text(
        f'name = "t"\nengine = "vllm"\n[model]\npath = "{model}"\nserved_name = "m"\n'
        "max_model_len = 8192\n[kv_cache]\nbudget_gib_per_gpu = 4\n[scheduler]\nmax_num_seqs = 4\n"
        '[speculative]\nmethod = "ngram"\ndraft_tokens = 1\n'
    )
    # a step: 10 ms + 0.2 ms a query token; 32 tokens a request at 1.8 or 2.95 tokens a step
    sim = SimConfig(
        max_model_len=8192,
        cost=CostModel(step_overhead_s=0.01, decode_s_per_seq=0.0002, prefill_s_per_token=1e-5, spec_acceptance=0.8),
    )
    options = search_options(slo="ttft=1s,tpot=20ms", duration_s=10, search_max=64)
    one, three = points(load_profile(profile_path), [parse_axis("speculative.draft_tokens=1,3")])
    fewer, more = (predict_point(p.profile, sim, options).max_rate_rps for p in (one, three))
    assert more > 1.2 * fewer, (fewer, more)
    blind = sim.model_copy(update={"cost": sim.cost.model_copy(update={"spec_acceptance": 0.0})})
    with pytest.raises(UsageError, match="drafts .* no draft acceptance: calibrate it with --spec-from"):
        predict_point(one.profile, blind, options)


def test_a_draft_schedule_becomes_the_simulators_draft_length_by_batch():
    from loadproof.predict.deployment import _drafting

    profile = packaged_profile("reference-tp4pp2")  # MTP drafts by the reference's schedule
    config = SimConfig(max_num_seqs=64, cost=CostModel(spec_acceptance=0.7))
    drafted = _drafting(profile, config).cost
    spec = profile.speculative
    assert all(drafted.draft_length(b) == spec.draft_length(b) for b in range(1, 65))
    plain = profile.model_copy(update={"speculative": None})
    assert _drafting(plain, config.model_copy(update={"cost": drafted})).cost.spec_draft_by_batch == []
