#!/usr/bin/env bash
# Does the router keep the cache? (docs/fleet.md, "Measured"). The packaged embedded-fleet (two CPU replicas, 1 GiB
# of KV each) behind vllm-router under round_robin, a second `loadproof router` under POLICY_B (default
# cache_aware) in front of the same replicas, and one recorded agent trace replayed through each in interleaved
# order (A B B A A B: three runs a side, each position balanced), with every replica's /metrics and each router's
# own scraped; then `loadproof compare` of the three runs a side (a bootstrap interval per figure), and all six
# runs published as one bundle and verified.
#   scripts/fleet_abba.sh TRACE OUT_DIR [POLICY_B]
# Environment: LOADPROOF (the command, default loadproof), COPIES (default 12), INTERVAL_S (default 1.5),
# INPUT_SCALE (default 1).
set -euo pipefail
trace=${1:?TRACE}
out=${2:?OUT_DIR}
policy_b=${3:-cache_aware}
lp=${LOADPROOF:-loadproof}
copies=${COPIES:-12}
interval=${INTERVAL_S:-1.5}
scale=${INPUT_SCALE:-1}
mkdir -p "$out"
replicas=(http://127.0.0.1:8091 http://127.0.0.1:8092)
metrics="${replicas[0]}/metrics,${replicas[1]}/metrics"
profile="$out/embedded-fleet.toml"
"${PYTHON:-python}" -c 'from loadproof.config.profile import packaged_profiles; print(packaged_profiles()["embedded-fleet"])' \
  >"$profile"
sed -i 's/^# ports = \[8091, 8092\].*/ports = [8091, 8092]/; s/^# prometheus_port = 29000.*/prometheus_port = 29000/' "$profile"
stop() { kill -INT "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
pids=()
trap stop EXIT
$lp serve "$profile" --out "$out/serve" >"$out/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do grep -q "^engine metrics: " "$out/serve.log" && break; sleep 1; done
$lp router --worker-urls "${replicas[0]},${replicas[1]}" --policy "$policy_b" --port 8095 --prometheus-port 29001 \
  >"$out/router-b.log" 2>&1 &
pids+=($!)
sleep 3
declare -A url=([round_robin]=http://127.0.0.1:8090 [$policy_b]=http://127.0.0.1:8095)
declare -A prom=([round_robin]=http://127.0.0.1:29000/metrics [$policy_b]=http://127.0.0.1:29001/metrics)
order=(round_robin "$policy_b" "$policy_b" round_robin round_robin "$policy_b")
for i in "${!order[@]}"; do
  p=${order[$i]}
  $lp run replay --url "${url[$p]}" --format otel --trace "$trace" --copies "$copies" --copy-interval-s "$interval" \
    --input-scale "$scale" --session-header x-session-id --engine-metrics "$metrics" --router-metrics "${prom[$p]}" \
    --router-policy "$p" --out "$out/$p" >"$out/run-$i-$p.log" 2>&1 || true
  echo "$i $p: $(grep -m 1 -E "^[a-z.]+ (PASS|FAIL)|^error" "$out/run-$i-$p.log")"
done
a=$(ls -d "$out/round_robin"/*/ | paste -sd, -)
b=$(ls -d "$out/$policy_b"/*/ | paste -sd, -)
$lp compare "$a" "$b" --out "$out/compare.md" >"$out/compare.txt" 2>&1 || true
# shellcheck disable=SC2046 # one argument per run directory
$lp publish $(ls -d "$out/round_robin"/*/ "$out/$policy_b"/*/) --out "$out/bundle" >"$out/publish.log" 2>&1
$lp verify "$out/bundle" >"$out/verify.log" 2>&1
head -n 3 "$out/compare.txt" "$out/verify.log"
