#!/usr/bin/env bash
# Serves a pre-built SSE body (256 vLLM-shaped completion chunks with per-chunk usage, then [DONE]) with
# nginx on http://127.0.0.1:8088/v1/chat/completions, for benchmarks/client_ceiling.py. Installs nginx from Debian's packages
# if it is missing. Stop it with: nginx -p "$dir" -c nginx.conf -s stop   (dir is printed)
set -euo pipefail
command -v nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq nginx >/dev/null; }
dir=$(mktemp -d /tmp/loadproof-sse.XXXX)
chmod 755 "$dir"  # nginx workers run as an unprivileged user
python3 - "$dir/sse" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(1, 257):
        chunk = {"id": "cmpl-bench", "object": "text_completion", "created": 0, "model": "bench",
                 "choices": [{"index": 0, "text": " token", "logprobs": None, "finish_reason": None}],
                 "usage": {"prompt_tokens": 16, "total_tokens": 16 + i, "completion_tokens": i}}
        f.write("data: " + json.dumps(chunk) + "\n\n")
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
    listen 127.0.0.1:8088;
    location = /v1/chat/completions {
      default_type text/event-stream;
      error_page 405 =200 \$uri;
      alias $dir/sse;
    }
  }
}
CONF
nginx -p "$dir" -c "$dir/nginx.conf"
echo "serving http://127.0.0.1:8088 (/v1/chat/completions) from $dir"
