"""What differs between engine kinds is asked of the adapter, never decided by the kind's name
(registry.py's rule): the planner, `serve`, the embedded launcher and the scenarios ask the adapter."""

from __future__ import annotations

import re
import sys
from importlib import resources
from pathlib import Path

from loadproof.config.profile import packaged_profile, parse_profile
from loadproof.engines import engines

KINDS = "|".join(engines.names())
BRANCH = re.compile(rf"""(==|!=|\bin\b)\s*\(?\s*["']({KINDS})["']""")
SUBJECT = re.compile(r"engine|kind|self\.name")  # what a branch on a kind compares


def test_no_module_branches_on_an_engine_kind_by_name():
    root = Path(str(resources.files("loadproof")))
    offenders = []
    for path in root.rglob("*.py"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if BRANCH.search(line) and SUBJECT.search(line):
                offenders.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert not offenders


def profile(engine: str, **extra: object):
    data = {"name": "t", "engine": engine, "model": {"path": "m", "served_name": "m", "max_model_len": 4096}}
    data.update(extra)
    return parse_profile(data, "test")


def test_each_adapter_answers_what_the_planner_and_serve_ask():
    embedded = engines.get("embedded")
    assert embedded.interpreter(packaged_profile("embedded")).endswith("/bin/python")
    assert embedded.kv_budget_gib(packaged_profile("embedded")) == (4.0, "VLLM_CPU_KVCACHE_SPACE=4 GiB")
    assert embedded.attention_block_size(mla=True) == (128, "embedded default")
    assert embedded.concurrent_batches(profile("embedded"), {})[0] == 1
    vllm = engines.get("vllm")
    assert vllm.interpreter(profile("vllm", serving={"python": "/opt/py"})) == "/opt/py"
    assert vllm.kv_budget_gib(profile("vllm")) is None
    assert vllm.attention_block_size(mla=True)[0] == 64 and vllm.attention_block_size(mla=False)[0] == 16
    assert engines.get("sglang").concurrent_batches(profile("sglang"), {}) == (1, "synchronous scheduling assumed")
    assert engines.get("sim").interpreter(profile("sim")) == sys.executable
    for kind in ("vllm", "sglang", "sim"):
        assert engines.get(kind).prepare(None) is None  # nothing to install: the user's engine, or loadproof itself


def test_the_throughput_scenario_reads_the_targets_engine_metric_names():
    from loadproof.scenarios.base import Target
    from loadproof.scenarios.long_context import MetricsScenario

    target = Target(url="http://h:1", model="m", endpoint="chat", engine="sglang")
    assert MetricsScenario(target, None).metric_names == engines.get("sglang").metric_names
    text = (Path(str(resources.files("loadproof"))) / "scenarios" / "throughput.py").read_text(encoding="utf-8")
    assert "VLLM_METRICS" not in text and "engines.get(self.target.engine).metric_names" in text
