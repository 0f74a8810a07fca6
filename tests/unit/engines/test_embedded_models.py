"""The embedded engine's models: Gemma 3 270M for every embedded profile, and idefics3-tiny (make_vlm.py, random
weights) made only for a profile that serves it, in a folder of its own, from a temporary folder renamed once
made; the packaged embedded-vlm profile states what an image costs (`model.image_tokens`), which a profile
checks as `protocol.media.MediaTokens` reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadproof.config.profile import packaged_profile, parse_profile
from loadproof.engines import embedded, engines
from loadproof.errors import ConfigError, EngineInstallError
from loadproof.protocol.media import MediaTokens


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LOADPROOF_HOME", str(tmp_path))
    return tmp_path


def test_each_embedded_model_has_its_folder_and_an_unknown_one_is_named(home: Path) -> None:
    assert embedded.model_path_for(packaged_profile("embedded")) == str(home / "models" / "gemma3-270m-bf16")
    assert embedded.model_path_for(packaged_profile("embedded-vlm")) == str(home / "models" / "idefics3-tiny")
    gemma = packaged_profile("embedded")
    other = gemma.model_copy(update={"model": gemma.model.model_copy(update={"path": "embedded:llava"})})
    with pytest.raises(EngineInstallError, match="'llava'.*'gemma3-270m', 'idefics3-tiny'"):
        embedded.model_path_for(other)


def test_the_vlm_is_made_only_for_a_profile_that_serves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    monkeypatch.setattr(embedded, "ensure_engine", lambda status=None: made.append("engine") or 0.0)
    monkeypatch.setattr(embedded, "ensure_model", lambda status=None: made.append("gemma") or 0.0)
    monkeypatch.setattr(embedded, "ensure_vlm", lambda status=None: made.append("vlm") or 0.0)
    engines.get("embedded").prepare(None, packaged_profile("embedded-tools"))
    assert made == ["engine", "gemma"]
    made.clear()
    engines.get("embedded").prepare(None, packaged_profile("embedded-vlm"))
    assert made == ["engine", "gemma", "vlm"]


def test_the_vlm_is_made_once_into_a_temporary_folder_then_renamed(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded, "ensure_engine", lambda status=None: 0.0)
    monkeypatch.setattr(embedded, "ensure_model", lambda status=None: 0.0)
    runs: list[list[str]] = []

    def run(argv: list[str], log: Path, what: str, status: object, env: dict[str, str] | None = None) -> None:
        runs.append(argv)
        assert env == {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # offline: nothing fetched
        Path(argv[2]).mkdir()
        (Path(argv[2]) / "config.json").write_text("{}")

    monkeypatch.setattr(embedded, "_run", run)
    (home / "models" / "idefics3-tiny.partial").mkdir(parents=True)  # a half-made one from before: redone
    assert embedded.ensure_vlm() >= 0.0
    p = embedded.paths()
    assert runs == [[str(p.python), str(embedded._VLM_MAKER), str(p.vlm_dir) + ".partial", str(p.model_dir), "0"]]
    assert (p.vlm_dir / "config.json").is_file() and embedded.vlm_prepared(p)
    assert not p.vlm_dir.with_name("idefics3-tiny.partial").exists()
    assert embedded.ensure_vlm() == 0.0 and len(runs) == 1  # the marker says it is made


def test_the_embedded_vlm_profile_serves_images_unsplit_at_its_stated_cost() -> None:
    profile = packaged_profile("embedded-vlm")
    assert profile.serving.endpoint == "chat" and profile.model.max_model_len == 2048
    assert profile.model.image_tokens is not None
    assert MediaTokens.parse(profile.model.image_tokens).image(4000, 30) == 67  # whatever the size
    engine = engines.get("embedded")
    argv = engine.launch_command(profile, "python", "/m", 8000).argv
    assert argv[argv.index("--mm-processor-kwargs") + 1] == '{"do_image_splitting": false}'
    assert engine.kv_budget_gib(profile) == (1.0, "VLLM_CPU_KVCACHE_SPACE=1 GiB")


@pytest.mark.parametrize(
    ("field", "rule", "said"),
    [
        ("image_tokens", "fixed:sixty", "give fixed:N, patches:P or per_s:R"),
        ("image_tokens", "per_s:50", "give fixed:N or patches:P"),
        ("audio_tokens", "fixed:64", "give per_s:R"),
    ],
)
def test_a_media_rule_the_model_cannot_have_is_one_line(field: str, rule: str, said: str) -> None:
    def profile(value: str) -> dict[str, object]:
        model = {"path": "m", "served_name": "m", "max_model_len": 4096, field: value}
        return {"name": "x", "engine": "vllm", "model": model}

    with pytest.raises(ConfigError, match=f"model.{field}.*{said}"):
        parse_profile(profile(rule), "p.toml")
    good = "per_s:50+2" if field == "audio_tokens" else "patches:28+2"
    assert getattr(parse_profile(profile(good), "p.toml").model, field) == good
