"""Engine adapters: launch arguments, metric names, endpoints and the startup capacity report."""

from pathlib import Path

from loadproof.engines.base import Engine, StartupReport
from loadproof.errors import UsageError
from loadproof.registry import Registry

engines: Registry[Engine] = Registry("engine")
engines.register("vllm", "loadproof.engines.vllm:VLLM")
engines.register("embedded", "loadproof.engines.vllm:VLLM_CPU")
engines.register("sglang", "loadproof.engines.sglang:SGLANG")
engines.register("sim", "loadproof.engines.sim:SIM")  # loadproof sim: failure-path tests of `serve`


def read_startup_log(path: Path) -> str:
    """An engine's startup log, as text (a missing one is the user's mistake)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise UsageError(f"no startup log at {path}") from None


def startup_report(path: Path, kind: str) -> StartupReport:
    """The capacity engine `kind` reported in its startup log at `path`."""
    report = engines.get(kind).parse_startup_report(read_startup_log(path))
    if report is None:
        raise UsageError(f"{path} holds no KV cache size line")
    return report


__all__ = ["Engine", "StartupReport", "engines", "read_startup_log", "startup_report"]
