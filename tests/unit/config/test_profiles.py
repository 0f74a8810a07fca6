"""Every packaged profile validates; an unknown key or a bad value is one clear error."""

import pytest

from loadproof.config.profile import load_profile, packaged_profile, packaged_profiles
from loadproof.errors import ConfigError


@pytest.mark.parametrize("name", sorted(packaged_profiles()))
def test_every_packaged_profile_validates(name):
    profile = packaged_profile(name)
    assert profile.name == name


def test_packaged_profiles_exist():
    assert "embedded" in packaged_profiles()


def test_unknown_key_is_an_error_not_dropped(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(
        'name = "x"\nengine = "vllm"\n[model]\npath = "m"\nserved_name = "m"\nmax_model_len = 4096\nmax_num_seq = 8\n'
    )
    with pytest.raises(ConfigError, match=r"model\.max_num_seq: Extra inputs are not permitted"):
        load_profile(path)


def test_bad_toml_and_missing_file(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text("name = ")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_profile(path)
    with pytest.raises(ConfigError, match="profile not found"):
        load_profile(tmp_path / "missing.toml")
