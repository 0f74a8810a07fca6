"""A profile named on the command line: an existing file wins, else a packaged profile's name, else one line that
lists the packaged names; a sim profile's place takes a packaged profile whose engine is the simulator by name."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from loadproof.config.profile import (
    SchedulerSpec,
    packaged_listing,
    packaged_model,
    packaged_profiles,
    resolve_profile,
    resolve_profile_path,
)
from loadproof.errors import ConfigError, UsageError
from loadproof.sim.config import is_sim_profile, load_sim_config, sim_profile_of, sim_profile_path, simulator_profiles

PROFILES = Path(str(resources.files("loadproof") / "profiles"))
SMALL = Path(str(resources.files("loadproof") / "data" / "sim" / "small.toml"))
MINE = 'name = "mine"\nengine = "vllm"\n[model]\npath = "m"\nserved_name = "m"\nmax_model_len = 4096\n'


def test_a_packaged_name_resolves_to_the_packaged_profile():
    assert resolve_profile_path("embedded-pd") == PROFILES / "embedded-pd.toml"
    pair = resolve_profile("embedded-pd")
    assert pair.name == "embedded-pd" and pair.disaggregation is not None
    assert resolve_profile("embedded-tools").serving.extra_args[-2:] == ["--tool-call-parser", "hermes"]


def test_an_existing_file_wins_over_a_packaged_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("embedded").write_text(MINE)  # a file here named as a packaged profile is
    assert resolve_profile_path("embedded") == Path("embedded")
    assert resolve_profile("embedded").name == "mine"
    (tmp_path / "p.toml").write_text(MINE)
    assert resolve_profile(tmp_path / "p.toml").name == "mine"
    assert resolve_profile(str(tmp_path / "p.toml")).name == "mine"


def test_neither_a_file_nor_a_packaged_name_is_one_line_listing_the_names(tmp_path):
    names = ", ".join(sorted(packaged_profiles()))
    for text in ("nope", str(tmp_path / "missing.toml"), "embedded.toml", str(tmp_path)):
        with pytest.raises(ConfigError) as raised:
            resolve_profile(text)
        said = str(raised.value)
        assert (
            said
            == f"profile not found: {text} (not a file, and not a packaged profile: {names}; see loadproof profiles)"
        )
        assert "\n" not in said and "sim-small" in said and "embedded-tools" in said


def test_every_packaged_profile_says_what_it_is_in_one_line():
    listed = packaged_listing()
    assert [name for name, _ in listed] == sorted(packaged_profiles())
    assert {"embedded", "embedded-pd", "embedded-tools", "sim-small"} <= {name for name, _ in listed}
    for name, description in listed:
        assert description and "\n" not in description and len(description) <= 110, name


def test_a_packaged_model_is_a_shape_folder_or_a_sim_profile():
    assert (packaged_model("llama-3.1-8b-shape") / "config.json").is_file()
    assert packaged_model("small") == SMALL and is_sim_profile(SMALL)
    for name in ("nope", "../sim/small", ""):
        with pytest.raises(ConfigError, match="no packaged model"):
            packaged_model(name)


def test_the_packaged_simulator_profile_runs_its_packaged_sim_profile_and_adds_nothing_to_it():
    profile = resolve_profile("sim-small")
    assert sim_profile_of(profile) == SMALL and simulator_profiles() == ["sim-small"]
    config = load_sim_config(SMALL)
    # by name in a sim profile's place it stands for its sim profile: nothing of its own may be lost there
    assert profile.model.max_model_len == config.max_model_len and profile.scheduler == SchedulerSpec()
    assert profile.model.served_name == config.model == "sim-small"
    assert sim_profile_of(resolve_profile("embedded")) is None


def test_a_sim_profiles_place_takes_a_file_or_a_packaged_simulator_profiles_name(tmp_path):
    assert sim_profile_path("sim-small", "--sim") == SMALL
    (tmp_path / "s.toml").write_text("max_model_len = 4096\n")
    assert sim_profile_path(tmp_path / "s.toml", "--sim") == tmp_path / "s.toml"  # its reader checks it
    with pytest.raises(UsageError, match=r"^--sim embedded: not a sim profile .*: sim-small$"):
        sim_profile_path("embedded", "--sim")
    with pytest.raises(ConfigError, match=r"^--config: profile not found: nope \(not a file, and not a packaged"):
        sim_profile_path("nope", "--config")
