"""Engine adapters: launch arguments, metric names, endpoints and the startup capacity report."""

from loadproof.engines.base import Engine, StartupReport
from loadproof.registry import Registry

engines: Registry[Engine] = Registry("engine")
engines.register("vllm", "loadproof.engines.vllm:VLLM")
engines.register("embedded", "loadproof.engines.vllm:VLLM_CPU")
engines.register("sglang", "loadproof.engines.sglang:SGLANG")
engines.register("sim", "loadproof.engines.sim:SIM")  # loadproof sim: failure-path tests of `serve`

__all__ = ["Engine", "StartupReport", "engines"]
