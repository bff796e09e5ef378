#!/usr/bin/env bash
# Memory at scale on one machine: a ~100M-parameter MLP (default
# 784-8192-8192-3328-10, 100.9M parameters, momentum SGD) trained by W
# workers and S shards on the synthetic dataset, once in sync PS mode and
# once in ring mode, a few steps each. Every process's peak resident memory
# (its high-water mark, from ferry local's summary) is printed against its
# state (the resident memory is also sampled every second into the CSV,
# bench/rss_sample.sh):
#   - a shard against its slice + the optimizer state (momentum: 2 x P/S x 4 B);
#   - a worker against the model (P x 4 B);
#   - the coordinator against the model (it evaluates the weights).
# Usage: bench/scale_memory.sh [steps, default 4] [model] [workers, default 4]
#        [shards, default 4]
# Env: BIN (default build/bin: the binaries to measure); MODES (default "ps ring"); EXTRA: more `ferry local` arguments, e.g.
# EXTRA="--pipeline-stages 2 --micro-batches 4 --worker-memory-budget 600MiB"
# (a PS pipeline stage's worker then holds its stage only) or
# EXTRA="--sum-on-arrival true" with FERRY_RECEIVE_WINDOW=4194304 (a shard
# then holds its slice, the optimizer state and one sum); TAG: a suffix of
# the output names. Writes out/scale-memory/{ps,ring}$TAG.csv and prints the
# table.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-4}
model=${2:-784-8192-8192-3328-10}
workers=${3:-4}
shards=${4:-4}
bin=${BIN:-build/bin}
out=out/scale-memory
mkdir -p "$out"
params=$(python3 -c "
s=[int(x) for x in '$model'.split('-')]
print(sum(a*b+b for a,b in zip(s,s[1:])))")
echo "model $model: $params parameters ($(python3 -c "print(round($params*4/2**20))") MiB fp32); $workers workers, $shards shards, $steps steps"

run() {  # $1: mode
  local mode=$1 extra=()
  [[ $mode == ps ]] && extra=(--shards "$shards")
  # shellcheck disable=SC2206  # EXTRA is split into arguments on purpose
  extra+=(${EXTRA:-})
  local tag=${TAG:-}
  $bin/ferry local --mode "$mode" --workers "$workers" "${extra[@]}" --model "$model" \
    --dataset synthetic:1200 --batch 128 --epochs 1 --max-steps "$steps" --device cpu \
    --summary-json "$out/$mode$tag.json" --log-dir "$out/logs-$mode$tag" --timeout 1800 >"$out/$mode$tag.log" 2>&1 &
  local pid=$!
  bench/rss_sample.sh "$pid" "$out/$mode$tag.csv" 1 &
  local sampler=$!
  wait "$pid" || { echo "ferry local --mode $mode failed: $out/$mode$tag.log" >&2; return 1; }
  wait "$sampler" || true
  # The peaks are each process's high-water mark (ferry local's summary:
  # wait4's ru_maxrss), exact; the 1 s samples are the time series.
  python3 - "$out/$mode$tag.json" "$mode" "$params" "$shards" <<'EOF'
import json, sys
path, mode, params, shards = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with open(path) as f:
    peaks = json.load(f)["peak_rss_mib"]
model_mib = params * 4 / 2**20
print(f"{mode}: {'process':<24} {'peak RSS':>10} {'state':>10} {'ratio':>6}")
for name, mib in sorted(peaks.items()):
    if name.startswith("ps"):
        state, what = 2 * model_mib / shards, "slice+momentum"
    else:  # workerN, coordinator
        state, what = model_mib, "model"
    print(f"{mode}: {name:<24} {mib:8.0f} MiB {state:7.0f} MiB {mib / state:5.2f}x  ({what})")
EOF
}
for mode in ${MODES:-ps ring}; do run "$mode"; done
