"""The simulator as an engine kind: a profile with `engine = "sim"` runs `loadproof sim` under the supervisor.

It is the engine of the failure-path tests of `loadproof serve` (a real HTTP process, started, probed,
interrupted and stopped as vLLM is, in a second instead of minutes), never a stand-in for vLLM in a
measurement. `model.path` is a sim profile (TOML or JSON, see `loadproof sim calibrate`), or `sim` for
the simulator's defaults; the served name and the context window come from the profile, and so do the
scheduler's limits (max_num_seqs, max_num_batched_tokens, the long-prefill threshold, rendered as vLLM's
flags are, so `loadproof tune` can restart it per grid point). The KV budget and the step cost are the sim
profile's: set in the deployment profile, they are refused, not dropped. The simulator is part of loadproof, so it runs on loadproof's own interpreter.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from loadproof.config.profile import Profile
from loadproof.engines.base import EngineDefaults, LaunchCommand, NodeCommand, StartupReport, flag_value
from loadproof.protocol.vllm_metrics import VLLM_METRICS

DEFAULTS = "sim"  # model.path for the simulator's built-in figures
_KV = re.compile(r"KV ([\d,]+) tokens")


@dataclass(frozen=True)
class SimEngine(EngineDefaults):
    name: str = "sim"
    default_block_size: int = 16
    default_max_num_batched_tokens: int = 2048
    health_path: str = "/health"
    tokenize_path: str = "/tokenize"
    metric_names: dict[str, str] = field(default_factory=lambda: dict(VLLM_METRICS))  # it exposes vLLM's
    needs_gpus: bool = False

    def api_key(self, argv: Sequence[str], env: Mapping[str, str]) -> str | None:
        return flag_value(argv, "--api-key")

    def launch_command(self, profile: Profile, python: str, model_path: str, port: int) -> LaunchCommand:
        model, serving = profile.model, profile.serving
        argv = [
            sys.executable,
            "-m",
            "loadproof",
            "sim",
            "--host",
            serving.host,
            "--port",
            str(port),
            "--served-model-name",
            model.served_name,
            "--max-model-len",
            str(model.max_model_len),
        ]
        if model_path != DEFAULTS:
            argv += ["--config", model_path]
        sched = profile.scheduler
        for flag, value in (
            ("--max-num-seqs", sched.max_num_seqs),
            ("--max-num-batched-tokens", sched.max_num_batched_tokens),
        ):
            if value is not None:
                argv += [flag, str(value)]
        if sched.long_prefill_token_threshold is not None or sched.max_num_partial_prefills is not None:
            argv += ["--long-prefill-token-threshold", str(sched.long_prefill_threshold(model.max_model_len))]
        default = Profile(name="-", engine="sim", model=model)
        notes = [
            f"unsupported: the simulator does not take [{section}] from a deployment profile (its sim "
            "profile, model.path, models the engine)"
            for section in ("parallel", "kv_cache", "speculative", "cuda_graphs", "cpu_offload_gib")
            if getattr(profile, section) != getattr(default, section)
        ]
        return LaunchCommand(argv=argv + serving.extra_args, env=dict(serving.env), notes=tuple(notes))

    def cluster_commands(self, profile: Profile, python: str, model_path: str, port: int) -> list[NodeCommand]:
        command = self.launch_command(profile, python, model_path, port)
        return [NodeCommand("head", command.argv, command.env)]

    def interpreter(self, profile: Profile) -> str:
        return sys.executable  # the simulator is part of loadproof

    def parse_startup_report(self, log_text: str) -> StartupReport | None:
        """The KV budget from the simulator's first line (`... KV 131,072 tokens (...)`)."""
        match = _KV.search(log_text)
        if match is None:
            return None
        start = log_text.rfind("\n", 0, match.start()) + 1
        end = log_text.find("\n", match.end())
        return StartupReport(
            kv_cache_tokens=int(match.group(1).replace(",", "")),
            line=log_text[start : end if end >= 0 else None].strip(),
        )


SIM = SimEngine()
