#!/usr/bin/env bash
# A replica lost mid-run (docs/fleet.md, "A replica lost"). The packaged embedded-fleet (two CPU replicas behind
# vllm-router, round robin) with the relay in front; one recorded agent trace replayed through the relay while
# every replica's /metrics and the router's own are scraped; KILL_AT_S seconds in, replica 2's engine is killed
# (SIGKILL to the process listening on its port, as an OOM kill or a crash would end it). Its supervisor restarts
# it; the run's report has the recovery timeline (the fleet's claims) and every finished request; the run is
# published and verified.
#   scripts/fleet_replica_loss.sh TRACE OUT_DIR
# Environment: LOADPROOF (default loadproof), COPIES (default 30), INTERVAL_S (default 4), KILL_AT_S (default 25),
# POLICY (default round_robin).
set -euo pipefail
trace=${1:?TRACE}
out=${2:?OUT_DIR}
lp=${LOADPROOF:-loadproof}
copies=${COPIES:-30}
interval=${INTERVAL_S:-4}
kill_at=${KILL_AT_S:-25}
policy=${POLICY:-round_robin}
mkdir -p "$out"
profile="$out/embedded-fleet.toml"
"${PYTHON:-python}" -c 'from loadproof.config.profile import packaged_profiles; print(packaged_profiles()["embedded-fleet"])' \
  >"$profile"
sed -i 's/^# ports = \[8091, 8092\].*/ports = [8091, 8092]/; s/^# prometheus_port = 29000.*/prometheus_port = 29000/' "$profile"
pids=()
stop() { kill -INT "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
trap stop EXIT
$lp serve "$profile" --router-policy "$policy" --relay --relay-port 8089 --backoff-s 2 --out "$out/serve" \
  >"$out/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do grep -q "^engine metrics: " "$out/serve.log" && break; sleep 1; done
$lp run replay --url http://127.0.0.1:8089 --format otel --trace "$trace" --copies "$copies" \
  --copy-interval-s "$interval" --session-header x-session-id \
  --engine-metrics http://127.0.0.1:8091/metrics,http://127.0.0.1:8092/metrics \
  --router-metrics http://127.0.0.1:29000/metrics --router-policy "$policy" --out "$out/runs" >"$out/run.log" 2>&1 &
run=$!
sleep "$kill_at"
victim=$(ss -ltnpH 'sport = :8092' | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2)
echo "$(date +%s.%N) killing replica 2's engine (pid $victim)" | tee "$out/kill.log"
kill -KILL "$victim"
wait "$run" || true
head -n 12 "$out/run.log"
$lp publish "$out/runs"/*/ --out "$out/bundle" >"$out/publish.log" 2>&1
$lp verify "$out/bundle" | head -n 3
