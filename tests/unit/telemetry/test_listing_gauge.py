"""vLLM's `lora_requests_info`: one series per set of running and waiting adapters, each valued at the time it
was set, every old one still exposed. Read as `metric[label]`, the latest series' list is counted, from the
engine's own exposition and from a Prometheus server alike; the load run claims the most seen."""

from loadproof.engines.vllm import VLLM_METRICS
from loadproof.metrics.engine_state import engine_claims
from loadproof.telemetry.server_metrics import MetricsSource, _vector_reading, parse_metrics
from tests import rundir_values as rv

NAMES = {k: v for k, v in VLLM_METRICS.items() if k.startswith("lora_")}
LABELS = ('max_lora="2"', 'running_lora_adapters="{running}"', 'waiting_lora_adapters="{waiting}"')
SERIES = [("adapter-a", "", 1796000000.5), ("adapter-a,adapter-b", "adapter-c", 1796000003.25), ("", "", 1796000001.0)]


def exposition(series=SERIES) -> str:
    lines = ["# HELP vllm:lora_requests_info Running stats on lora requests.", "# TYPE vllm:lora_requests_info gauge"]
    for running, waiting, at in series:
        labels = ",".join(LABELS).format(running=running, waiting=waiting)
        lines.append(f"vllm:lora_requests_info{{{labels}}} {at}")
    return "\n".join(lines) + "\n"


def test_the_latest_series_lists_are_counted():
    assert parse_metrics(exposition(), NAMES) == {"lora_running_adapters": 2.0, "lora_waiting_adapters": 1.0}
    emptied = [*SERIES, ("", "", 1796000009.0)]  # the batch drained: the newest series lists nothing
    assert parse_metrics(exposition(emptied), NAMES) == {"lora_running_adapters": 0.0, "lora_waiting_adapters": 0.0}
    assert parse_metrics("vllm:num_requests_running 1\n", NAMES) == {}  # no LoRA: nothing, never a guessed 0


def test_a_prometheus_server_keeps_the_labels_the_lists_are_in():
    query = MetricsSource.parse("prometheus+http://127.0.0.1:9090").query(NAMES)
    assert "running_lora_adapters" in query and "waiting_lora_adapters" in query
    result = [
        {
            "metric": {"__name__": "vllm:lora_requests_info", "running_lora_adapters": r, "waiting_lora_adapters": w},
            "value": [1796000010.0, str(at)],
        }
        for r, w, at in SERIES
    ]
    reading = _vector_reading({"status": "success", "data": {"result": result}}, NAMES)
    assert reading.values == {"lora_running_adapters": 2.0, "lora_waiting_adapters": 1.0}


def test_the_load_run_claims_the_most_adapters_listed_while_it_ran():
    samples = rv.samples(
        [
            {"t_ns": 5, "values": {"lora_running_adapters": 2.0, "lora_waiting_adapters": 0.0}},
            {"t_ns": 10, "values": {"lora_running_adapters": 1.0, "lora_waiting_adapters": 1.0}},
            {"t_ns": 20, "values": {"lora_running_adapters": 0.0, "lora_waiting_adapters": 0.0}},
        ]
    )
    got = {c.name: c.value for c in engine_claims(samples, 8, 30)}
    assert got == {"load.lora.engine_running_adapters_max": 1, "load.lora.engine_waiting_adapters_max": 1}
