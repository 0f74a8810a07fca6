"""The embedded engine's models: Gemma 3 270M for every embedded profile, and idefics3-tiny (make_vlm.py) and
whisper-tiny (make_whisper.py, with soundfile added to the engine's environment), random weights, each made only
for a profile that serves it, in a folder of its own, from a temporary folder renamed once made; the packaged
embedded-vlm and embedded-asr profiles state what an image or a second of audio costs (`model.image_tokens`,
`model.audio_tokens`), which a profile checks as `protocol.media.MediaTokens` reads it. A model that serves only
audio is probed by a transcription of silence (it serves no completion)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadproof.config.profile import packaged_profile, parse_profile
from loadproof.engines import embedded, engines
from loadproof.errors import ConfigError, EngineInstallError
from loadproof.protocol.media import MediaTokens, audio_of
from loadproof.supervisor.probe import probe_embedder, probe_engine, probe_listener, prober_for, silence


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LOADPROOF_HOME", str(tmp_path))
    return tmp_path


def test_each_embedded_model_has_its_folder_and_an_unknown_one_is_named(home: Path) -> None:
    assert embedded.model_path_for(packaged_profile("embedded")) == str(home / "models" / "gemma3-270m-bf16")
    assert embedded.model_path_for(packaged_profile("embedded-vlm")) == str(home / "models" / "idefics3-tiny")
    assert embedded.model_path_for(packaged_profile("embedded-asr")) == str(home / "models" / "whisper-tiny")
    gemma = packaged_profile("embedded")
    other = gemma.model_copy(update={"model": gemma.model.model_copy(update={"path": "embedded:llava"})})
    with pytest.raises(EngineInstallError, match="'llava'.*'gemma3-270m', 'idefics3-tiny', 'whisper-tiny'"):
        embedded.model_path_for(other)


def test_the_vlm_is_made_only_for_a_profile_that_serves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    monkeypatch.setattr(embedded, "ensure_engine", lambda status=None: made.append("engine") or 0.0)
    monkeypatch.setattr(embedded, "ensure_model", lambda status=None: made.append("gemma") or 0.0)
    monkeypatch.setattr(embedded, "ensure_vlm", lambda status=None: made.append("vlm") or 0.0)
    monkeypatch.setattr(embedded, "ensure_asr", lambda status=None: made.append("asr") or 0.0)
    engines.get("embedded").prepare(None, packaged_profile("embedded-tools"))
    assert made == ["engine", "gemma"]
    for name, model in (("embedded-vlm", "vlm"), ("embedded-asr", "asr")):
        made.clear()
        engines.get("embedded").prepare(None, packaged_profile(name))
        assert made == ["engine", "gemma", model]


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


def test_the_asr_model_comes_with_soundfile_installed_once(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded, "ensure_engine", lambda status=None: 0.0)
    runs: list[list[str]] = []

    def run(argv: list[str], log: Path, what: str, status: object, env: dict[str, str] | None = None) -> None:
        runs.append(argv)
        if argv[1] == str(embedded._ASR_MAKER):
            Path(argv[2]).mkdir(parents=True)

    monkeypatch.setattr(embedded, "_run", run)
    p = embedded.paths()
    p.venv.mkdir(parents=True)
    assert embedded.ensure_asr() >= 0.0 and embedded.asr_prepared(p)
    assert runs[0][-1] == "soundfile==0.14.0" and runs[0][1:4] == ["-m", "pip", "install"]
    assert runs[1] == [str(p.python), str(embedded._ASR_MAKER), str(p.asr_dir) + ".partial", "0"]
    assert embedded.ensure_asr() == 0.0 and len(runs) == 2


def test_a_model_that_serves_only_audio_is_probed_by_a_transcription_of_silence() -> None:
    assert prober_for(packaged_profile("embedded").serving) is probe_engine
    assert prober_for(packaged_profile("embedded-vlm").serving) is probe_engine  # chat with images: completions too
    listener = prober_for(packaged_profile("embedded-asr").serving)
    assert getattr(listener, "func", None) is probe_listener
    pooling = packaged_profile("embedded").serving.model_copy(update={"endpoint": "embeddings", "runner": "pooling"})
    assert prober_for(pooling) is probe_embedder
    assert audio_of(silence()).seconds == 0.1


def test_the_embedded_vlm_profile_serves_images_unsplit_at_its_stated_cost() -> None:
    profile = packaged_profile("embedded-vlm")
    assert profile.serving.endpoint == "chat" and profile.model.max_model_len == 2048
    assert profile.model.image_tokens is not None
    assert MediaTokens.parse(profile.model.image_tokens).image(4000, 30) == 67  # whatever the size
    engine = engines.get("embedded")
    argv = engine.launch_command(profile, "python", "/m", 8000).argv
    assert argv[argv.index("--mm-processor-kwargs") + 1] == '{"do_image_splitting": false}'
    assert engine.kv_budget_gib(profile) == (1.0, "VLLM_CPU_KVCACHE_SPACE=1 GiB")


def test_the_embedded_asr_profile_states_what_vllm_counts_for_a_second_of_audio() -> None:
    profile = packaged_profile("embedded-asr")
    assert profile.serving.endpoint == "transcriptions" and profile.model.max_model_len == 448
    assert profile.model.audio_tokens is not None
    assert MediaTokens.parse(profile.model.audio_tokens).audio(5.0) == 504  # 500 log-mel frames, 4 decoder tokens


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
