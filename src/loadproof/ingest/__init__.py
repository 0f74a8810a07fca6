"""Other tools' results read in as runs: vllm bench serve, GuideLLM, AIPerf, inference-perf."""
