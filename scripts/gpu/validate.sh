#!/bin/bash
# loadproof against a real vLLM 0.26 on one H200 (docs/gpu-validation.md). Run on the GPU machine from the
# repository root, one phase per device call, in order; results go to $OUT (run directories, engine logs).
#   setup          reassemble the staged parts, install vLLM into /tmp/site and loadproof's libraries into
#                  /tmp/lpvenv (what the system lacks); loadproof itself runs from this checkout's src/
#   dummy-start    start `loadproof serve` for the dummy-weight Llama (a new session: it outlives the call)
#   dummy-short    throughput and prefill on it
#   dummy-long     capacity (K sessions, then K+1), interference, capacity --search
#   gemma          stop the dummy engine; serve Gemma 3 270M (real weights); capacity with many sessions,
#                  quality
#   gemma-search   the same model with 1 GiB of KV cache; capacity --search finds where sessions stop fitting
# On one H200 (issue 27: speculative decoding, energy and cost, docs/gpu-validation.md):
#   setup, then
#   spec-start     serve Gemma 3 270M twice on the one GPU: n-gram drafts with the reference's K5/K3 schedule on
#                  :8000 (gemma-270m-ngram.toml), no drafts on :8001 (gemma-270m-nodraft.toml), 35% of memory each
#   spec-runs      throughput of both (edit and code prompts, c1/c4/c8); `run ab` drafts off vs on and temperature
#                  0 vs 1 at c1, c4, c8 (6 interleaved rounds each); every run priced ($PRICE per GPU-hour)
#   spec-load      open-loop load with an SLO on each (20 requests/s): energy and cost per SLO-good token
#   offload-start  stop the spec engines; measure the host-to-device bandwidth (pinned 1 GiB copies); serve
#                  Gemma 3 270M with 0.25 GiB of GPU KV and a 4 GiB CPU tier on :8000 (gemma-270m-offload.toml)
#                  and its twin without the tier on :8001 (gemma-270m-recompute.toml)
#   selfdraft      serve Gemma 3 270M drafting with itself (vLLM's draft_model method, 3 tokens) on :8000 and run
#                  throughput on it at temperature 0 (the draft is the target: acceptance should be about 100%)
#   offload-runs   16 two-turn sessions of 2,000 tokens (twice the GPU cache, a seventh of the tier), tier and
#                  recompute interleaved, 3 of each (ABAB)
# On the two-GPU machine (issue 10: the reference topology's pipeline half, scripts/gpu/deepseek-pp2.toml):
#   setup, then
#   mla-start      serve the DeepSeek-V2-Lite shape, PP2, FP8 KV 36 GiB per GPU, 1M window
#   mla-short      throughput at 1 and 8 streams, cold prefill at 32K and 128K (the simulator's calibration)
#   mla-capacity   N x L sessions (N=24, L=180000 unless set) in the background; waits up to WAIT_S for it.
#                  TIMING=1 also runs benchmarks/timing_accuracy.py pinned to two spare cores beside it
#   wait           waits up to WAIT_S more for whatever runs in the background
# On one H200 (issue 20's headline at full scale while two GPUs were withheld, scripts/gpu/mla-headline-1gpu.toml):
#   setup, then
#   hl-start       serve the 2-layer MLA shape with the reference's KV token count, and `loadproof relay` on :8080
#   hl-short       throughput at 1 and 8 streams, cold prefill at 32K, 128K and 1,000,004 (the simulator's
#                  calibration), then the simulator's prediction of 24 x 1,000,004, written before it runs
#   hl-capacity    24 x 1,000,004 (N, L to change) with a 60 s window, through the relay, in the background
#   hl-load        open-loop: loadproof beside `vllm bench serve` at the same rates and prompts, a rate
#                  search with an SLO, and the shipped Mooncake slice replayed
#   hl-grid        `loadproof sim calibrate --grid` on this engine
#   hl-grid29      issue 29: a lone 1M prefill and a grid (1 and 24 sessions x 8K, 128K, 512K), calibrated with the
#                  engine's KV size (the runs name the GPU and the KV budget, so the fit gets the KV-read floor at
#                  the least efficiency the grid allows), then the 24 x 1,000,004 prediction written as a contract
#                  before the run; then
#                  hl-capacity with PRED=/tmp/gpu-runs/prediction-24x1m.json judges the run against it
#   hl-tune        stop the headline's engine; `loadproof tune` over max_num_seqs 8/16/24/32 (MAX_REAL real points;
#                  not yet run on the H200: the 2026-12-02 device time ran out)
# On one H200 (issue 28: interference colocated against a disaggregated prefill/decode pair):
#   setup, then
#   pd-serve       the KV folder (/tmp/lp-kv, on /dev/shm where it has room); serve the 8B shape colocated on :8000
#                  (llama-dummy-colocated.toml) and as a pair behind the relay on :8080 (llama-dummy-pd.toml), all
#                  three instances started at once (each has a fixed KV budget: no profiling race)
#   lora           stop those; make 4 rank-16 adapters for the 8B shape; serve it with them (llama-dummy-lora.toml,
#                  2 slots); open-loop load at 16 requests/s, 1,024 tokens in, 128 out: the base model alone, the
#                  0.5/0.3/0.2 mix of base, a and b, the mix over all four adapters (it churns), the mix, the base
#   pd-runs        one warm-up request each; then interference (4 x 16,000 tokens, a 64,000-token newcomer, 5 s
#                  windows) ABBA-interleaved, colocated (A) and pair (B), 3 of each; the KV folder emptied before each
#                  (so not `run ab --scenario interference`, which runs nothing between runs); then the arms' table
#                  (scripts/gpu/abba_table.py: run ab --scenario's own) in pd-abba.md
set -uo pipefail
phase=$1
OUT=${OUT:-/tmp/out}
RUNS=/tmp/gpu-runs  # kept on the machine across calls ($OUT is emptied before each); packed into $OUT at the end
mkdir -p $RUNS "$OUT"
pack() { cp /tmp/serve-*.log ~/.cache/loadproof/logs/engine-*.log $RUNS/ 2>/dev/null; tar -czf "$OUT/gpu-runs.tar.gz" -C /tmp gpu-runs; }
trap pack EXIT
LP="env PYTHONPATH=$PWD/src /tmp/lpvenv/bin/python -m loadproof"  # this checkout's code, the venv's libraries
URL=http://127.0.0.1:8000
say() { echo "[$(date +%T)] $*"; }
WAIT_S=${WAIT_S:-540}
bg() {  # bg NAME CMD...: run in its own session (it outlives this call), output to $RUNS/NAME.log
  local name=$1; shift
  setsid "$@" >"$RUNS/$name.log" 2>&1 < /dev/null &
  echo $! > /tmp/bg.pid; say "started $name (pid $!)"
}
wait_bg() {  # until the background job ends or WAIT_S passes; a job still running is said, not killed
  local pid; pid=$(cat /tmp/bg.pid 2>/dev/null) || return 0
  for _ in $(seq 1 "$WAIT_S"); do kill -0 "$pid" 2>/dev/null || { say "background job done"; return 0; }; sleep 1; done
  say "background job still running after ${WAIT_S} s"
}

wait_ready() {  # the supervisor prints "ready" once the engine answers; /health alone is not enough
  for _ in $(seq 1 600); do
    curl -sf "${1:-$URL}/v1/models" >/dev/null && return 0
    sleep 1
  done
  return 1
}

case $phase in
setup)
  say "install vLLM"
  bash .stage/p*/install-on-gpu.sh 2>&1 | tail -3
  say "install loadproof"
  python3 -m venv --system-site-packages /tmp/lpvenv
  /tmp/lpvenv/bin/pip install -q --no-index --find-links /tmp/staged/lpwheels aiohttp msgspec pydantic typer rich \
    tokenizers prometheus-client starlette uvicorn pillow nvidia-ml-py jinja2 jsonschema 2>&1 | tail -3
  $LP --help >/dev/null && say "loadproof ready"
  nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv | tee $RUNS/gpu.csv
  PYTHONPATH=/tmp/site python3 -c 'import torch, vllm; print("torch", torch.__version__, "vllm", vllm.__version__)' | tee $RUNS/versions.txt
  ;;
dummy-start)
  say "serve the dummy Llama"
  setsid $LP serve scripts/gpu/llama-dummy.toml --port 8000 >/tmp/serve-llama.log 2>&1 < /dev/null &
  if wait_ready; then say "ready"; else say "not ready"; fi
  cp /tmp/serve-llama.log "$OUT/"; cp ~/.cache/loadproof/logs/engine-*.log "$OUT/" 2>/dev/null
  ;;
dummy-short)
  TOK=/tmp/staged/llama-dummy/tokenizer.json
  common=(--url $URL --profile scripts/gpu/llama-dummy.toml --out $RUNS)
  say "throughput"
  $LP run throughput "${common[@]}" --families english --concurrency 1,4,8 --max-tokens 256 --num-prompts 4 --ignore-eos --tokenizer $TOK
  for L in 100000 130000; do
    say "prefill $L"
    $LP run prefill "${common[@]}" --tokenizer $TOK -l $L -r 2 --decode-tokens 128
  done
  ;;
dummy-long)
  TOK=/tmp/staged/llama-dummy/tokenizer.json
  common=(--url $URL --profile scripts/gpu/llama-dummy.toml --out $RUNS --tokenizer $TOK)
  K=${K:-7}
  say "capacity $K x 120000"
  $LP run capacity "${common[@]}" -n $K -l 120000 --window-s 20 --skip-probe-check
  say "capacity $((K+1)) x 120000 (one more than fits)"
  $LP run capacity "${common[@]}" -n $((K+1)) -l 120000 --window-s 10 --skip-probe-check
  say "interference"
  $LP run interference "${common[@]}" -m 4 --session-tokens 32000 --newcomer-tokens 120000 --window-s 5 --skip-probe-check
  cp /tmp/serve-llama.log "$OUT/"
  ;;
dummy-quiet)
  # the supervisor's liveness probe is a real one-token request: it shows in num_requests_running.
  # Pause the supervisor (not the engine) for one capacity run, so only the sessions run.
  TOK=/tmp/staged/llama-dummy/tokenizer.json
  sup=$(pgrep -f "loadproof serve scripts/gpu/llama-dummy.toml" | head -1)
  kill -STOP $sup
  say "capacity ${K:-7} x 120000, supervisor paused"
  $LP run capacity --url $URL --profile scripts/gpu/llama-dummy.toml --out $RUNS --tokenizer $TOK -n ${K:-7} -l 120000 \
    --window-s 20 --skip-probe-check
  kill -CONT $sup
  ;;
gemma)
  pkill -TERM -f "loadproof serve scripts/gpu/llama-dummy.toml"; sleep 5
  say "serve Gemma 3 270M"
  setsid $LP serve scripts/gpu/gemma-270m.toml --port 8000 --probe-interval-s 3600 >/tmp/serve-gemma.log 2>&1 < /dev/null &
  if wait_ready; then say "ready"; else say "not ready"; cp /tmp/serve-gemma.log "$OUT/"; exit 1; fi
  TOK=/tmp/staged/gemma3-270m-bf16/tokenizer.json
  common=(--url $URL --profile scripts/gpu/gemma-270m.toml --out $RUNS --tokenizer $TOK)
  say "capacity 64 x 16000"
  $LP run capacity "${common[@]}" -n 64 -l 16000 --window-s 20
  say "quality"
  $LP run quality "${common[@]}" --gsm8k-items 200 --concurrency 32 --retrieval-lengths 1024,4096,16384,30000
  cp /tmp/serve-gemma.log "$OUT/"; cp ~/.cache/loadproof/logs/engine-*.log "$OUT/" 2>/dev/null
  ;;
gemma-search)
  pkill -TERM -f "loadproof serve scripts/gpu/gemma-270m.toml"; sleep 5
  say "serve Gemma 3 270M with 1 GiB of KV cache"
  setsid $LP serve scripts/gpu/gemma-270m-small-kv.toml --port 8000 --probe-interval-s 3600 >/tmp/serve-gemma-small.log 2>&1 < /dev/null &
  if wait_ready; then say "ready"; else say "not ready"; cp /tmp/serve-gemma-small.log "$OUT/"; exit 1; fi
  TOK=/tmp/staged/gemma3-270m-bf16/tokenizer.json
  say "capacity search"
  timeout 420 $LP run capacity --url $URL --profile scripts/gpu/gemma-270m-small-kv.toml --out $RUNS \
    --tokenizer $TOK --search sessions --search-max 64 -l 8000 --window-s 5
  cp /tmp/serve-gemma-small.log "$OUT/"; cp ~/.cache/loadproof/logs/engine-*.log "$OUT/" 2>/dev/null
  ;;
mla-start)
  nvidia-smi topo -m > $RUNS/topo.txt
  say "serve the DeepSeek-V2-Lite shape, PP2"
  setsid $LP serve scripts/gpu/deepseek-pp2.toml --port 8000 --probe-interval-s 3600 >/tmp/serve-mla.log 2>&1 < /dev/null &
  for _ in $(seq 1 "$WAIT_S"); do curl -sf "$URL/v1/models" >/dev/null && break; sleep 1; done
  if curl -sf "$URL/v1/models" >/dev/null; then say "ready"; else say "not ready yet"; fi
  tail -5 /tmp/serve-mla.log
  ;;
mla-ready)
  for _ in $(seq 1 "$WAIT_S"); do curl -sf "$URL/v1/models" >/dev/null && break; sleep 1; done
  if curl -sf "$URL/v1/models" >/dev/null; then say "ready"; else say "not ready yet"; fi
  tail -5 /tmp/serve-mla.log
  ;;
mla-short)
  TOK=/tmp/staged/ds-dummy/tokenizer.json
  common=(--url $URL --profile scripts/gpu/deepseek-pp2.toml --out $RUNS --tokenizer $TOK)
  say "throughput"
  $LP run throughput "${common[@]}" --families english --concurrency 1,8 --max-tokens 256 --num-prompts 8 --ignore-eos
  for L in 32768 131072; do
    say "prefill $L"
    $LP run prefill "${common[@]}" -l $L -r 1 --decode-tokens 128
  done
  ;;
mla-capacity)
  TOK=/tmp/staged/ds-dummy/tokenizer.json
  N=${N:-24}; L=${L:-180000}
  if [[ ${TIMING:-0} == 1 ]]; then
    say "timing benchmark on cores 30 (client) and 31 (simulator), beside the engine"
    setsid env PYTHONPATH=$PWD/src /tmp/lpvenv/bin/python benchmarks/timing_accuracy.py --client-cpus 30 --sim-cpus 31 \
      --json $RUNS/timing-accuracy.json >$RUNS/timing-accuracy.log 2>&1 < /dev/null &
  fi
  bg capacity $LP run capacity --url $URL --profile scripts/gpu/deepseek-pp2.toml --out $RUNS --tokenizer $TOK \
    -n $N -l $L --window-s 20 --skip-probe-check
  wait_bg
  tail -20 $RUNS/capacity.log
  ;;
hl-start)
  say "serve the 2-layer MLA shape on one GPU"
  setsid $LP serve scripts/gpu/mla-headline-1gpu.toml --port 8000 --probe-interval-s 3600 >/tmp/serve-hl.log 2>&1 < /dev/null &
  setsid $LP relay --upstream $URL --port 8080 --heartbeat-s 5 --body-timeout-s 300 >$RUNS/relay.log 2>&1 < /dev/null &
  for _ in $(seq 1 "$WAIT_S"); do curl -sf "$URL/v1/models" >/dev/null && break; sleep 1; done
  if curl -sf "$URL/v1/models" >/dev/null; then say "ready"; else say "not ready yet"; fi
  grep -h "KV cache size\|Maximum concurrency\|block size" ~/.cache/loadproof/logs/engine-*.log | tail -4
  tail -3 /tmp/serve-hl.log
  ;;
hl-short)
  TOK=/tmp/staged/ds-2l/tokenizer.json
  common=(--url $URL --profile scripts/gpu/mla-headline-1gpu.toml --out $RUNS/short --tokenizer $TOK)
  say "throughput"
  $LP run throughput "${common[@]}" --families english --concurrency 1,8 --max-tokens 256 --num-prompts 8 --ignore-eos
  for L in 32768 131072 1000004; do
    say "prefill $L"
    $LP run prefill "${common[@]}" -l $L -r 1 --decode-tokens 128
  done
  say "the simulator, calibrated on these runs only, predicts 24 x 1,000,004 (before it runs)"
  $LP sim calibrate $RUNS/short/* --kv-tokens 25981696 --block-size 64 --max-num-batched-tokens 16384 --max-num-seqs 24 --max-model-len 1048576 -o $RUNS/sim-hl.toml 2>&1 | tee $RUNS/sim-calibrate.txt
  { date -u +%FT%TZ; $LP plan $RUNS/sim-hl.toml --simulate capacity --sessions 24 -l 1000004 --window-s 60; } 2>&1 | tee $RUNS/prediction-24x1m.txt
  ;;
hl-capacity)
  TOK=/tmp/staged/ds-2l/tokenizer.json
  N=${N:-24}; L=${L:-1000004}
  bg capacity-$N $LP run capacity --url http://127.0.0.1:8080 --engine-metrics http://127.0.0.1:8080/engine/metrics \
    --profile scripts/gpu/mla-headline-1gpu.toml --out $RUNS/capacity --tokenizer $TOK \
    --startup-log "$(ls -t ~/.cache/loadproof/logs/engine-*.log | head -1)" \
    -n $N -l $L --window-s 60 --skip-probe-check --drain-timeout-s 120 ${PRED:+--prediction $PRED}
  wait_bg
  tail -25 $RUNS/capacity-$N.log
  ;;
hl-load)
  TOK=/tmp/staged/ds-2l
  say "loadproof beside vllm bench serve"
  env PYTHONPATH=$PWD/src:/tmp/site python3 benchmarks/cross_vllm_bench.py --url $URL --tokenizer $TOK \
    --rates ${RATES:-8,32,96} --arrivals constant -n ${NREQ:-240} --input-tokens 2048 --output-tokens 128 \
    --vllm-cmd "python3 -m vllm.entrypoints.cli.main" --loadproof-cmd "python3 -m loadproof" \
    --work $RUNS/cross --out $RUNS/cross-vllm-bench.json 2>&1 | tail -12
  common=(--url $URL --profile scripts/gpu/mla-headline-1gpu.toml --tokenizer $TOK/tokenizer.json)
  say "rate search with an SLO"
  $LP run load "${common[@]}" --out $RUNS/search --rate 16 --search rate --slo ttft=250ms,tpot=20ms --attainment 0.95 \
    --duration-s 10 --input-tokens 2048 --output-tokens 128 --search-max 512 --search-resolution 10% 2>&1 | tail -15
  say "Mooncake slice"
  $LP run replay "${common[@]}" --out $RUNS/replay --trace src/loadproof/data/traces/mooncake-conversation-300.jsonl \
    --time-scale ${TSCALE:-2} 2>&1 | tail -15
  ;;
hl-grid)
  TOK=/tmp/staged/ds-2l/tokenizer.json
  say "calibration grid"
  $LP sim calibrate --grid --url $URL --tokenizer $TOK --concurrency 1,8,24 --context 8192,131072 --window-s 10 \
    --runs-out $RUNS/grid --grid-arg=--profile=scripts/gpu/mla-headline-1gpu.toml --grid-arg=--skip-probe-check \
    -o $RUNS/sim-grid.toml 2>&1 | tail -20
  ;;
hl-grid29)
  TOK=/tmp/staged/ds-2l/tokenizer.json
  say "a lone 1,000,004-token prefill, then the calibration grid (issue 29: at most 5 minutes together)"
  $LP run prefill --url $URL --profile scripts/gpu/mla-headline-1gpu.toml --out $RUNS/grid29-extra --tokenizer $TOK \
    -l 1000004 -r 1 --decode-tokens 128 2>&1 | tail -4
  $LP sim calibrate --grid --url $URL --tokenizer $TOK --concurrency ${GRID_C:-1,24} --context ${GRID_L:-8192,131072,524288} \
    --window-s 10 --runs-out $RUNS/grid29 --grid-arg=--profile=scripts/gpu/mla-headline-1gpu.toml --grid-arg=--skip-probe-check \
    --kv-tokens 25981696 --block-size 64 --max-num-batched-tokens 16384 --max-num-seqs 24 --max-model-len 1048576 \
    $RUNS/grid29-extra/prefill-* -o $RUNS/sim-grid29.toml 2>&1 | tail -25
  say "the headline's contract, written before it runs"
  { date -u +%FT%TZ; $LP plan $RUNS/sim-grid29.toml --simulate capacity --sessions 24 -l 1000004 --window-s 60 \
      --prediction-out $RUNS/prediction-24x1m.json; } 2>&1 | grep -v "^prediction [0-9]" | tee $RUNS/prediction-24x1m.txt | tail -30
  ;;
hl-tune)
  TOK=/tmp/staged/ds-2l/tokenizer.json
  say "issue 29: a 4-point tune of the stand-in (the headline's engine stopped first: one GPU)"
  pkill -INT -f "[l]oadproof serve scripts/gpu/mla-headline" ; sleep 20
  $LP tune scripts/gpu/mla-headline-1gpu.toml --sim $RUNS/sim-grid29.toml --grid max_num_seqs=8,16,24,32 \
    --slo ttft=250ms,tpot=20ms --attainment 0.95 --rate 16 --search-max 512 --duration-s 10 --input-tokens 2048 \
    --output-tokens 128 --tokenizer $TOK --max-real ${MAX_REAL:-1} --port 8002 -o $RUNS/tune 2>&1 | tail -40
  ;;
spec-start)
  say "serve Gemma 3 270M with n-gram drafts on :8000"
  setsid $LP serve scripts/gpu/gemma-270m-ngram.toml --port 8000 --probe-interval-s 3600 >/tmp/serve-ngram.log 2>&1 < /dev/null &
  wait_ready http://127.0.0.1:8000 && say "ready" || { say "not ready"; cp /tmp/serve-ngram.log "$OUT/"; exit 1; }
  say "serve it without drafts on :8001"
  setsid $LP serve scripts/gpu/gemma-270m-nodraft.toml --port 8001 --probe-interval-s 3600 >/tmp/serve-nodraft.log 2>&1 < /dev/null &
  wait_ready http://127.0.0.1:8001 && say "ready" || { say "not ready"; cp /tmp/serve-nodraft.log "$OUT/"; exit 1; }
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv | tee $RUNS/spec-memory.csv
  ;;
spec-runs)
  TOK=/tmp/staged/gemma3-270m-bf16/tokenizer.json
  NG=http://127.0.0.1:8000; ND=http://127.0.0.1:8001
  price=(--price-per-gpu-hour "${PRICE:-3.5}" --out $RUNS/spec)
  SLO="--slo ttft=200ms,tpot=10ms"  # which requests are good: their tokens' energy and cost
  for arm in ngram:$NG nodraft:$ND; do
    say "throughput, ${arm%%:*}"
    $LP run throughput --url ${arm#*:} --profile scripts/gpu/gemma-270m-${arm%%:*}.toml "${price[@]}" --tokenizer $TOK $SLO \
      --families edit,code --concurrency 1,4,8 --num-prompts 8 --max-tokens 192 2>&1 | tail -3
  done
  fixed=(--a ignore_eos=true --b ignore_eos=true --family edit --max-tokens 192 --repeats 6)
  for c in 1 4 8; do
    say "ab drafts off (a) vs on (b), c$c"
    $LP run ab --url $NG --a-url $ND --b-url $NG --a-profile scripts/gpu/gemma-270m-nodraft.toml \
      --b-profile scripts/gpu/gemma-270m-ngram.toml "${fixed[@]}" --concurrency $c --num-prompts $c "${price[@]}" $SLO 2>&1 | tail -2
    say "ab temperature 0 (a) vs 1 (b) with drafts, c$c"
    $LP run ab --url $NG --profile scripts/gpu/gemma-270m-ngram.toml --a temperature=0 --b temperature=1 \
      "${fixed[@]}" --concurrency $c --num-prompts $c "${price[@]}" $SLO 2>&1 | tail -2
  done
  cp /tmp/serve-ngram.log /tmp/serve-nodraft.log $RUNS/ 2>/dev/null
  ;;
spec-load)
  TOK=/tmp/staged/gemma3-270m-bf16/tokenizer.json
  for arm in ngram:8000 nodraft:8001; do
    say "load with an SLO, ${arm%%:*}: energy and cost per good token"
    $LP run load --url http://127.0.0.1:${arm#*:} --profile scripts/gpu/gemma-270m-${arm%%:*}.toml --tokenizer $TOK \
      --rate 20 -n 300 --input-tokens 512 --output-tokens 128 --slo ttft=100ms,tpot=5ms --seed 731 \
      --price-per-gpu-hour "${PRICE:-3.5}" --out $RUNS/spec 2>&1 | tail -2
  done
  ;;
offload-start)
  pkill -f "[l]oadproof serve scripts/gpu/gemma-270m-" ; sleep 10
  say "host-to-device bandwidth: pinned 1 GiB, 10 copies"
  python3 -c 'import torch, time
x = torch.empty(1 << 30, dtype=torch.uint8).pin_memory(); y = torch.empty_like(x, device="cuda")
for _ in range(3): y.copy_(x, non_blocking=True)
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(10): y.copy_(x, non_blocking=True)
torch.cuda.synchronize(); print(f"{10 * (1 << 30) / (time.perf_counter() - t) / 1e9:.2f}")' | tee $RUNS/h2d-gbps.txt
  for arm in offload:8000 recompute:8001; do
    say "serve Gemma 3 270M, ${arm%%:*}, on :${arm#*:}"
    setsid $LP serve scripts/gpu/gemma-270m-${arm%%:*}.toml --port ${arm#*:} --probe-interval-s 3600 \
      >/tmp/serve-${arm%%:*}.log 2>&1 < /dev/null &
    wait_ready http://127.0.0.1:${arm#*:} && say "ready" || { say "not ready"; tail -5 /tmp/serve-${arm%%:*}.log; exit 1; }
  done
  grep -h "KV cache\|offload\|connector" ~/.cache/loadproof/logs/engine-*.log | tail -12
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv | tee $RUNS/offload-memory.csv
  ;;
offload-runs)
  TOK=/tmp/staged/gemma3-270m-bf16/tokenizer.json
  H2D=$(cat $RUNS/h2d-gbps.txt)
  # the tier's tokens and a token's bytes: `loadproof plan scripts/gpu/gemma-270m-offload.toml`
  for round in 1 2 3; do
    for arm in offload:8000 recompute:8001; do
      say "sessions, ${arm%%:*}, round $round"
      $LP run sessions --url http://127.0.0.1:${arm#*:} --profile scripts/gpu/gemma-270m-${arm%%:*}.toml \
        --tokenizer $TOK -u 16 -t 2 --first-tokens 2000 --turn-tokens 64 --output-tokens 16 --think-time-s 10 \
        --stagger-s 8 --cpu-tier-tokens 233016 --kv-bytes-per-token 18432 --h2d-gbps $H2D \
        --slo ttft=200ms,tpot=20ms --price-per-gpu-hour "${PRICE:-3.5}" --out $RUNS/offload 2>&1 | tail -4
    done
  done
  cp /tmp/serve-offload.log /tmp/serve-recompute.log $RUNS/ 2>/dev/null
  ;;
selfdraft)
  TOK=/tmp/staged/gemma3-270m-bf16/tokenizer.json
  say "serve Gemma 3 270M drafting with itself on :8000"
  setsid $LP serve scripts/gpu/gemma-270m-selfdraft.toml --port 8000 --probe-interval-s 3600 >/tmp/serve-selfdraft.log 2>&1 < /dev/null &
  for _ in $(seq 1 ${READY_S:-300}); do curl -sf $URL/v1/models >/dev/null && break; sleep 1; done
  curl -sf $URL/v1/models >/dev/null && say "ready" || { say "not ready"; tail -8 /tmp/serve-selfdraft.log; grep -h "Error\|error" ~/.cache/loadproof/logs/engine-*.log | tail -5; exit 1; }
  grep -h "speculative\|draft" ~/.cache/loadproof/logs/engine-*.log | head -5
  $LP run throughput --url $URL --profile scripts/gpu/gemma-270m-selfdraft.toml --tokenizer $TOK --families edit,code \
    --concurrency 1,4 --num-prompts 4 --max-tokens 128 --slo ttft=200ms,tpot=20ms --price-per-gpu-hour "${PRICE:-3.5}" \
    --out $RUNS/selfdraft 2>&1 | grep -E "spec_decode\.(acceptance_pct|mean_accepted)|claims:|error" | head -12
  cp /tmp/serve-selfdraft.log $RUNS/ 2>/dev/null
  ;;
pd-serve)
  free_gb=$(df --output=avail -BG /dev/shm | tail -1 | tr -dc 0-9)
  if (( free_gb >= 40 )); then mkdir -p /dev/shm/lp-kv && ln -sfn /dev/shm/lp-kv /tmp/lp-kv; else mkdir -p /tmp/lp-kv; fi
  df -h /dev/shm /tmp | tee $RUNS/pd-storage.txt; ls -ld /tmp/lp-kv | tee -a $RUNS/pd-storage.txt
  say "serve colocated on :8000 and the pair behind the relay on :8080"
  setsid $LP serve scripts/gpu/llama-dummy-colocated.toml --port 8000 --probe-interval-s 3600 >/tmp/serve-colocated.log 2>&1 < /dev/null &
  setsid $LP serve scripts/gpu/llama-dummy-pd.toml --probe-interval-s 3600 >/tmp/serve-pd.log 2>&1 < /dev/null &
  wait_ready http://127.0.0.1:8000 && say "colocated ready" || { say "colocated not ready"; tail -5 /tmp/serve-colocated.log; }
  wait_ready http://127.0.0.1:8080 && say "pair ready" || { say "pair not ready"; tail -8 /tmp/serve-pd.log; }
  grep -h "KV cache size\|kv_transfer\|chunked" ~/.cache/loadproof/logs/engine-*.log | cut -c1-300 | tail -8
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv | tee $RUNS/pd-memory.csv
  cp /tmp/serve-colocated.log /tmp/serve-pd.log $RUNS/ 2>/dev/null
  ;;
pd-runs)
  TOK=/tmp/staged/llama-dummy/tokenizer.json
  for url in http://127.0.0.1:8000 http://127.0.0.1:8080; do
    curl -s $url/v1/completions -H 'content-type: application/json' \
      -d '{"model":"llama-8b-shape","prompt":"warm up","max_tokens":8}' >/dev/null && say "warmed $url"
  done
  common=(--tokenizer $TOK -m 4 --session-tokens 16000 --newcomer-tokens 64000 --window-s 5 --skip-probe-check
          --out $RUNS/pd)
  i=0; ran=()
  for arm in colocated pd pd colocated colocated pd; do
    i=$((i+1)); rm -rf /tmp/lp-kv/*/*  # the serve session's subfolder stays, emptied
    say "interference $i: $arm"
    if [[ $arm == colocated ]]; then
      $LP run interference --url http://127.0.0.1:8000 --profile scripts/gpu/llama-dummy-colocated.toml "${common[@]}" 2>&1 | tail -3
    else
      $LP run interference --url http://127.0.0.1:8080 --engine-metrics http://127.0.0.1:8080/engine/metrics \
        --profile scripts/gpu/llama-dummy-pd.toml "${common[@]}" 2>&1 | tail -3
      du -sb /tmp/lp-kv/ | tee -a $RUNS/pd-storage.txt
    fi
    ran+=("$arm=$(ls -td $RUNS/pd/interference-* | head -n 1)")
  done
  # the arms' table (run ab --scenario's own; here the runs are made one by one, the KV folder emptied before each)
  env PYTHONPATH=$PWD/src /tmp/lpvenv/bin/python scripts/gpu/abba_table.py "${ran[@]}" | tee $RUNS/pd-abba.md
  cp /tmp/serve-colocated.log /tmp/serve-pd.log $RUNS/ 2>/dev/null
  ;;
lora)
  pkill -f "[l]oadproof serve scripts/gpu/llama-dummy-" ; sleep 10
  for a in a b c d; do
    PYTHONPATH=/tmp/site python3 src/loadproof/engines/embedded/make_lora.py /tmp/staged/llama-dummy /tmp/adapters/$a 16 \
      $(printf '%d' "'$a") || exit 1
  done
  du -sh /tmp/adapters/* | tee $RUNS/lora-adapters.txt
  say "serve the 8B shape with 4 adapters, 2 slots"
  setsid $LP serve scripts/gpu/llama-dummy-lora.toml --port 8000 --probe-interval-s 3600 >/tmp/serve-lora.log 2>&1 < /dev/null &
  wait_ready && say "ready" || { say "not ready"; tail -8 /tmp/serve-lora.log; exit 1; }
  TOK=/tmp/staged/llama-dummy/tokenizer.json
  curl -s $URL/v1/completions -H 'content-type: application/json' -d '{"model":"a","prompt":"warm up","max_tokens":8}' >/dev/null
  common=(--url $URL --profile scripts/gpu/llama-dummy-lora.toml --tokenizer $TOK --rate 16 -n 480 --input-tokens 1024
          --output-tokens 128 --ignore-eos --slo ttft=1s,tpot=50ms --seed 731 --out $RUNS/lora)
  for mix in llama-8b-shape=1 llama-8b-shape=0.5,a=0.3,b=0.2 llama-8b-shape=0.2,a=0.2,b=0.2,c=0.2,d=0.2 \
             llama-8b-shape=0.5,a=0.3,b=0.2 llama-8b-shape=1; do
    say "load, mix $mix"
    $LP run load "${common[@]}" --model-mix $mix 2>&1 | tail -2
  done
  cp /tmp/serve-lora.log $RUNS/ 2>/dev/null
  ;;
wait)
  wait_bg
  ;;
esac
say "done $phase"
