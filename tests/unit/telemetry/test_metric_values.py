"""An engine /metrics value JSON cannot hold (NaN, an infinity) never reaches metrics.jsonl: the typed reader
refuses a null where a sample's value is a number, which would make the whole run unreadable."""

from pathlib import Path

from loadproof.rundir import EngineSample
from loadproof.store.run_dir import RunWriter, load_run
from loadproof.telemetry.server_metrics import _vector_reading, parse_metrics

NAMES = {
    "kv_cache_usage_perc": "vllm:kv_cache_usage_perc",
    "num_requests_running": "vllm:num_requests_running",
    "num_requests_waiting": "vllm:num_requests_waiting",
}
EXPOSITION = """# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0"} NaN
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} 2
vllm:num_requests_running{engine="1"} +Inf
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0"} 1
vllm:num_requests_waiting{engine="1"} 3
"""


def _read_back(tmp_path: Path, values: dict[str, float]) -> dict[str, float]:
    with RunWriter(tmp_path / "run") as writer:
        writer.write_manifest({"run_id": "run", "scenario": "load"})
        writer.metric_sample(EngineSample(t_ns=1, values=values))
    (sample,) = load_run(tmp_path / "run").samples
    return sample.values


def test_an_exposition_nan_or_infinity_is_left_out_and_the_run_reads_back(tmp_path):
    values = parse_metrics(EXPOSITION, NAMES)
    assert values == {"num_requests_running": 2.0, "num_requests_waiting": 4.0}
    assert _read_back(tmp_path, values) == values


def test_a_prometheus_infinity_is_left_out_like_a_nan(tmp_path):
    result = [
        {"metric": {"__name__": "vllm:num_requests_running"}, "value": [100.0, "+Inf"]},
        {"metric": {"__name__": "vllm:num_requests_waiting"}, "value": [100.0, "2"]},
        {"metric": {"__name__": "vllm:kv_cache_usage_perc"}, "value": [100.0, "-Inf"]},
    ]
    reading = _vector_reading({"status": "success", "data": {"result": result}}, NAMES)
    assert reading.values == {"num_requests_waiting": 2.0}
    assert _read_back(tmp_path, reading.values) == reading.values
