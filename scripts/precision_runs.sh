#!/usr/bin/env bash
# The runs behind docs/scenarios.md's "Measured" note of `run load --until-precision`: for each seed, one run
# that stops at the precision asked (its ceiling --duration-s CEILING_S) and one fixed-count run of FIXED_N
# requests, at the same rate and workload, against URL; then the table (scripts/precision_table.py).
#
#   ASKED=ttft_p50=5%,itl_p50=2% RATE=20 FIXED_N=1000 scripts/precision_runs.sh URL OUT SEED...
#
# Also: CEILING_S (default 120), INPUT (256), OUTPUT (32), EXTRA (more run load options, e.g. --tokenizer PATH),
# MODES ("precision fixed": which of the two runs each seed gets).
set -euo pipefail
url=$1 out=$2
shift 2
: "${ASKED:=ttft_p50=5%,itl_p50=2%}" "${RATE:=20}" "${FIXED_N:=1000}" "${CEILING_S:=120}" "${INPUT:=256}" "${OUTPUT:=32}"
: "${EXTRA:=}" "${MODES:=precision fixed}"
here=$(cd "$(dirname "$0")/.." && pwd)
loadproof=("$here/.venv/bin/loadproof" run load --url "$url" --out "$out" --rate "$RATE" --input-tokens "$INPUT"
  --output-tokens "$OUTPUT")
for seed in "$@"; do
  if [[ $MODES == *precision* ]]; then  # exit 1 where the ceiling came first: the table says so
    # shellcheck disable=SC2086  # EXTRA is a list of options
    "${loadproof[@]}" --seed "$seed" --duration-s "$CEILING_S" --until-precision "$ASKED" $EXTRA || true
  fi
  if [[ $MODES == *fixed* ]]; then
    # shellcheck disable=SC2086
    "${loadproof[@]}" --seed "$seed" -n "$FIXED_N" $EXTRA
  fi
done
"$here/.venv/bin/python" "$here/scripts/precision_table.py" --asked "$ASKED" "$out"/load-*
