#!/usr/bin/env bash
# Serves a pre-built SSE body with nginx on http://127.0.0.1:PORT/v1/chat/completions (PORT: the first
# argument, default 8088), for benchmarks/client_ceiling.py and benchmarks/run_all.py. The body is what
# vLLM streams for a chat completion with continuous usage stats: 256 chunks of one token each (" token"),
# each with its usage, the last with finish_reason "length", then the usage-only chunk ("choices": [],
# usage.completion_tokens 256) and [DONE], so every client counts 256 tokens per response the same way.
# CHUNKS (the second argument, default 256) sets the number of one-token chunks (benchmarks/load_rates.py
# serves short bodies of 4). For `loadproof run load` it also answers GET /v1/models (model "static"),
# GET /metrics (vLLM's gauges, all 0: an idle engine) and POST /tokenize ({"count": TOKENIZE_COUNT}, the third
# argument, default 1), all static.
# Installs nginx from Debian's packages if it is missing.
# Stop it with: nginx -p "$dir" -c "$dir/nginx.conf" -s stop   (dir is printed)
set -euo pipefail
port=${1:-8088}
chunks=${2:-256}
tokenize_count=${3:-1}
command -v nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq nginx >/dev/null; }
dir=$(mktemp -d /tmp/loadproof-sse.XXXX)
chmod 755 "$dir"  # nginx workers run as an unprivileged user
python3 - "$dir" "$chunks" "$tokenize_count" <<'PY'
import json, sys
folder, chunks, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(folder + "/models", "w") as f:
    json.dump({"object": "list", "data": [{"id": "static", "object": "model", "max_model_len": 1048576}]}, f)
with open(folder + "/tokenize", "w") as f:
    json.dump({"count": count, "max_model_len": 1048576, "tokens": []}, f)
with open(folder + "/metrics", "w") as f:
    for name in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc", "num_preemptions_total"):
        f.write(f'vllm:{name}{{model_name="static"}} 0.0\n')
with open(folder + "/sse", "w") as f:
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "static"}
    for i in range(1, chunks + 1):
        choice = {"index": 0, "delta": {"content": " token"}, "logprobs": None,
                  "finish_reason": "length" if i == chunks else None}
        usage = {"prompt_tokens": 128, "total_tokens": 128 + i, "completion_tokens": i}
        f.write("data: " + json.dumps({**head, "choices": [choice], "usage": usage}) + "\n\n")
    f.write("data: " + json.dumps({**head, "choices": [], "usage": usage}) + "\n\n")
    f.write("data: [DONE]\n\n")
PY
mkdir -p "$dir/logs"
cat > "$dir/nginx.conf" <<CONF
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/logs/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  server {
    listen 127.0.0.1:$port;
    location = /v1/chat/completions {
      default_type text/event-stream;
      error_page 405 =200 \$uri;
      alias $dir/sse;
    }
    location = /v1/models { default_type application/json; alias $dir/models; }
    location = /metrics { default_type text/plain; alias $dir/metrics; }
    location = /tokenize {
      default_type application/json;
      error_page 405 =200 \$uri;
      alias $dir/tokenize;
    }
  }
}
CONF
nginx -p "$dir" -c "$dir/nginx.conf"
echo "serving http://127.0.0.1:$port (/v1/chat/completions, $chunks chunks) from $dir"
