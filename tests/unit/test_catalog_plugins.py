"""Scenarios plug in through the catalog: the registries are live views of its table, and the generic
parts (report, compare, export, verify, publish, the simulator, its predictions and calibration, the
command line) never name a scenario; claim names live in metrics/ alone. The example scenario
(tests/unit/example_scenario) gets `plan --simulate` and a prediction contract from its entry alone."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from loadproof import catalog
from loadproof.catalog import Entry, column
from loadproof.errors import UsageError
from loadproof.metrics import claim_functions
from loadproof.plans import schemas
from loadproof.registry import Registry
from loadproof.scenarios import scenarios
from loadproof.scenarios.demo import DemoSetup, demo_scenarios
from loadproof.sim.config import dump_sim_config
from loadproof.telemetry.server_metrics import MetricsSource
from tests.python_source import parse
from tests.unit.example_scenario.predict import TESTS_PROFILE


def test_the_registries_list_every_catalog_entry_in_order():
    names = list(catalog.SCENARIOS)
    assert scenarios.in_order() == names
    assert schemas.in_order() == names and claim_functions.in_order() == names
    assert list(column("demo")) == [n for n, e in catalog.SCENARIOS.items() if e.demo]


def test_an_entry_added_to_the_catalog_later_is_found_and_gone_once_removed(monkeypatch):
    entry = Entry("json:JSONDecoder", "json:JSONEncoder", "json:dumps")
    with monkeypatch.context() as patch:
        patch.setitem(catalog.SCENARIOS, "json-ish", entry)
        import json

        assert claim_functions.get("json-ish") is json.dumps and schemas.get("json-ish") is json.JSONEncoder
        assert "json-ish" in claim_functions and "json-ish" not in Registry.over("x", column("figures"))
    assert "json-ish" not in claim_functions
    with pytest.raises(UsageError, match="unknown scenario 'json-ish'"):
        claim_functions.get("json-ish")


def test_a_view_takes_no_registration_and_a_column_must_name_a_part():
    with pytest.raises(TypeError, match="view"):
        Registry.over("scenario", column("plan")).register("new", "json:dumps")
    with pytest.raises(ValueError, match="not a module:attr part"):
        column("splits_by_repeat")


def test_the_demo_runs_each_catalog_entry_with_a_demo_factory_scaled_down():
    target = SimpleNamespace(engine="vllm")  # the factories hand it on; metric names come from its engine
    setup = DemoSetup(target=target, max_tokens=64, prompts=2, kv_cache_tokens=12_345, engine_url="http://127.0.0.1:9")
    demo = demo_scenarios(setup)
    assert [s.name for s in demo] == ["throughput", "load", "capacity", "prefill", "interference", "soak", "quality"]
    by_name = {s.name: s for s in demo}
    assert all(s.target is target for s in demo)
    assert (by_name["throughput"].options.max_tokens, by_name["throughput"].options.num_prompts) == (64, 2)
    assert by_name["load"].options.duration_s == 15.0 and by_name["capacity"].options.sessions == 4
    assert by_name["capacity"].startup_kv_tokens == 12_345
    assert by_name["soak"].engine_metrics.describe() == MetricsSource.beside("http://127.0.0.1:9").describe()
    assert by_name["quality"].options.retrieval_lengths == [1024, 2048]


# --- no generic part names a scenario ---------------------------------------------------------------

SRC = Path(__file__).resolve().parents[2] / "src" / "loadproof"
GENERIC = ["report", "verify", "publish", "store/export.py", "sim", "predict", "cli"]
# (file, top-level name whose value may hold the word): the words that are not a scenario there
NOT_A_SCENARIO = {
    ("report/compare.py", "BUDGETS"),  # a budget's kind: figures in tokens/s are "throughput"
    ("predict/published.py", "RATES_TABLE"),  # a published-figures file's [throughput] table
}
# where the simulator and the command line could read a claim by its name; they take it from metrics/
CLAIM_FREE = ["sim", "predict", "cli"]


def _files(parts: list[str]) -> list[Path]:
    return sorted(p for part in parts for p in ([SRC / part] if part.endswith(".py") else (SRC / part).rglob("*.py")))


def _plugin_modules() -> set[Path]:
    """Each scenario's own part of the predictor (predict/NAME.py): the modules its entry's `predict` and
    `calibrate` name, which may name their own scenario (as scenarios/NAME.py does), never a claim."""
    targets = [t for part in ("predict", "calibrate") for t in column(part).values()]
    return {SRC.parent / (t.partition(":")[0].replace(".", "/") + ".py") for t in targets}


def _generic_files() -> list[Path]:
    return [p for p in _files(GENERIC) if p not in _plugin_modules()]


def _code_strings(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, text, the top-level name it is assigned to) of every string in the code: docstrings and
    comments left out, the literal parts of f-strings in."""
    tree = parse(path.read_text(encoding="utf-8"), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    out = []
    for statement in tree.body:
        targets = (
            statement.targets
            if isinstance(statement, ast.Assign)
            else ([statement.target] if isinstance(statement, ast.AnnAssign) else [])
        )
        owner = next((t.id for t in targets if isinstance(t, ast.Name)), None)
        out += [
            (node.lineno, node.value, owner)
            for node in ast.walk(statement)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        ]
    return out


def names_a_scenario(text: str, names: list[str]) -> bool:
    """`text` is a scenario's name, or begins a claim of one (`quality.`, `throughput.`...)."""
    return text in names or any(text.startswith(f"{name}.") for name in names)


def test_the_scan_finds_a_scenario_name_however_it_is_written(tmp_path):
    code = tmp_path / "code.py"
    code.write_text(
        '"""capacity in a docstring is words."""\n# a comment on load\n'
        'def f(run, fam):\n    """throughput here too."""\n'
        '    return run == "capacity" or f"throughput.{fam}.c1" or "quality.gsm8k".split(".")\n'
    )
    found = [text for _, text, _ in _code_strings(code) if names_a_scenario(text, list(catalog.SCENARIOS))]
    assert found == ["capacity", "throughput.", "quality.gsm8k"]


def test_report_compare_export_verify_publish_the_simulator_and_the_cli_never_name_a_scenario():
    names = list(catalog.SCENARIOS)
    found = [
        f"{path.relative_to(SRC)}:{line}: {text!r}"
        for path in _generic_files()
        for line, text, owner in _code_strings(path)
        if names_a_scenario(text, names) and (path.relative_to(SRC).as_posix(), owner) not in NOT_A_SCENARIO
    ]
    assert not found, (
        "a generic part branches on a scenario; declare it in the scenario's catalog entry:\n" + "\n".join(found)
    )


def test_every_plugin_module_of_the_predictor_is_in_predict_and_the_scan_skips_only_those():
    plugins = _plugin_modules()
    assert plugins and all(p.parent == SRC / "predict" and p.is_file() for p in plugins)
    assert SRC / "predict" / "whatif.py" in _generic_files() and SRC / "predict" / "capacity.py" not in _generic_files()


def test_the_simulator_its_predictions_and_the_cli_read_claims_by_names_metrics_defines():
    names = list(catalog.SCENARIOS)
    found = [
        f"{path.relative_to(SRC)}:{line}: {text!r}"
        for path in _files(CLAIM_FREE)
        for line, text, _ in _code_strings(path)
        if names_a_scenario(text, names) and text not in names  # `capacity.` and on: a claim's name
    ]
    assert not found, "a claim named outside metrics/; define it in metrics/NAME.py and import it:\n" + "\n".join(found)


# --- the example scenario, predicted and judged through its entry alone -------------------------------


def example(*args: str) -> subprocess.CompletedProcess[str]:
    """`loadproof` with the example scenario in its catalog."""
    root = SRC.parents[1]
    return subprocess.run(
        [sys.executable, "-m", "tests.unit.example_scenario", *args],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
    )


def test_the_example_scenario_gets_plan_simulate_and_a_contract_from_its_entry(tmp_path):
    sim = tmp_path / "sim.toml"
    sim.write_text(dump_sim_config(TESTS_PROFILE))
    out = tmp_path / "example.json"
    args = ["plan", str(sim), "--simulate", "example", "--requests", "2", "--rounds", "3", "--max-tokens", "8"]
    done = example(*args, "--prediction-out", str(out), "--tolerance", "20")
    assert done.returncode == 0, done.stderr[-3000:]
    # its own claims on the predicted run: a lone prompt of 20 bytes, 50 ms + 20 x 1 ms; 51 ms a token after
    assert "example.ttft_median_s" in done.stdout and "0.0700" in done.stdout and "19.6" in done.stdout
    assert "Ranges over the open assumptions" in done.stdout and "loadproof run example" in done.stdout
    contract = json.loads(out.read_text())
    assert contract["scenario"] == "example" and contract["tolerance_pct"] == 20
    assert [f["claim"] for f in contract["figures"]] == ["example.ttft_median_s", "example.decode_tokens_per_s"]
    assert contract["figures"][0]["point"] == pytest.approx(0.07)
    assert contract["options"] == {"requests": 2, "rounds": 3, "max_tokens": 8, "prompt": "Say something short."}
    # an option of another prediction is refused, and without the entry there is no such prediction
    wrong = example("plan", str(sim), "--simulate", "example", "--rate", "2")
    assert wrong.returncode == 2 and "--rate applies to --simulate load" in wrong.stderr
    plain = subprocess.run(
        [sys.executable, "-m", "loadproof", "plan", str(sim), "--simulate", "example"], capture_output=True, text=True
    )
    assert plain.returncode == 2 and "the simulator predicts capacity, load, prefill, replay" in plain.stderr
