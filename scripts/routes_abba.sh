#!/usr/bin/env bash
# The same throughput and load runs through the chat, Responses and Messages APIs of one server, in
# interleaved order (each route three times, each position of the order balanced across routes), then each
# API against chat by `loadproof compare` with the three repeats a side: a bootstrap interval per figure.
# Every run's crosscheck holds its usage against the engine's own counters.
#   scripts/routes_abba.sh URL OUT_DIR        (docs/routes.md, "Measured")
set -euo pipefail
url=${1:?URL}
out=${2:?OUT_DIR}
lp=${LOADPROOF:-loadproof}
order=(chat responses messages messages responses chat chat responses messages)
mkdir -p "$out"
for i in "${!order[@]}"; do
  ep=${order[$i]}
  $lp run throughput --url "$url" --endpoint "$ep" --no-ignore-eos --families english --num-prompts 4 \
    --concurrency 1,4 --max-tokens 48 --out "$out/throughput-$ep" >"$out/throughput-$ep-$i.log" 2>&1
  $lp run load --url "$url" --endpoint "$ep" --no-ignore-eos --rate 2 -n 24 --input-tokens 256 \
    --output-tokens 32 --seed 7 --out "$out/load-$ep" >"$out/load-$ep-$i.log" 2>&1
  echo "$i $ep done"
done
for kind in throughput load; do
  chat=$(ls -d "$out/$kind-chat"/*/ | paste -sd, -)
  for ep in responses messages; do
    other=$(ls -d "$out/$kind-$ep"/*/ | paste -sd, -)
    $lp compare "$chat" "$other" --anyway --out "$out/compare-$kind-chat-vs-$ep.md" >"$out/compare-$kind-chat-vs-$ep.txt" 2>&1 || true
  done
done
