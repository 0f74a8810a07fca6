"""The vLLM adapter: startup capacity lines as vLLM prints them, and the launch command."""

from loadproof.config.profile import packaged_profile
from loadproof.engines import engines

CPU_LOG = """(Worker pid=2554) INFO 11-30 06:35:47 [cpu_worker.py:260] Explicitly set (4.0/9.96) GiB for KV cache on node 0.
(EngineCore pid=2473) INFO 11-30 06:35:47 [kv_cache_utils.py:2327] CPU KV cache size: 991,390 tokens, Maximum concurrency for 32,768 tokens per request: 30.25x
"""
GPU_LOG = """INFO [gpu_worker.py] Available KV cache memory: 112.28 GiB
INFO [kv_cache_utils.py] GPU KV cache size: 919,824 tokens
INFO [kv_cache_utils.py] Maximum concurrency for 131,072 tokens per request: 7.02x
"""


def test_cpu_startup_line():
    report = engines.get("embedded").parse_startup_report(CPU_LOG)
    assert report.kv_cache_tokens == 991_390
    assert report.max_concurrency == 30.25 and report.max_concurrency_tokens == 32_768
    assert report.line.startswith("(EngineCore") and "30.25x" in report.line


def test_gpu_startup_lines():
    report = engines.get("vllm").parse_startup_report(GPU_LOG)
    assert (report.kv_cache_tokens, report.max_concurrency, report.max_concurrency_tokens) == (919_824, 7.02, 131_072)


def test_no_report_in_an_unrelated_log():
    assert engines.get("vllm").parse_startup_report("INFO starting\n") is None


def test_embedded_launch_command():
    profile = packaged_profile("embedded")
    cmd = engines.get("embedded").launch_command(profile, "/venv/bin/python", "/models/g", 8123)
    assert cmd.argv[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    joined = " ".join(cmd.argv)
    assert "--max-model-len 32768" in joined and "--dtype bfloat16" in joined
    assert "--host 127.0.0.1" in joined and "--port 8123" in joined
    assert cmd.env["VLLM_CPU_KVCACHE_SPACE"] == "4"


def test_root_cause_of_a_failed_start_is_the_first_error_line():
    from loadproof.engines.process import root_cause

    log = """(EngineCore pid=7535) ERROR 11-30 07:04:17 [core.py:1510] ValueError: To serve at least one request with the model's max seq len (4096), (0.05 GiB KV cache is needed
Traceback (most recent call last):
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""
    assert root_cause(log).startswith("ValueError: To serve at least one request")
    assert root_cause("all fine\n") is None
    # a warning that quotes an error is not the cause (vLLM-CPU 0.32 logs this one at every start here)
    warned = (
        "(APIServer pid=16528) WARNING 12-01 03:51:15 [system_utils.py:255] Found ulimit of 20000 and failed "
        "to automatically increase with error current limit exceeds maximum limit. This can cause fd limit "
        "errors like `OSError: [Errno 24] Too many open files`. Consider increasing with ulimit -n\n" + log
    )
    assert root_cause(warned).startswith("ValueError: To serve at least one request")
    assert root_cause("WARNING:root:saw KeyError: x\nKeyError: 'model'\n") == "KeyError: 'model'"
