#!/usr/bin/env bash
# Training throughput of ferry vs PyTorch on the same model (default the
# MLP 784-256-128-10; or convnet), batch 128, 1 thread per process, both
# measured in this run:
#   1. single process: ferry-worker --standalone vs torch (CPU)
#   2. W workers: ferry local --mode ps (sync, 2 shards) vs torch DDP (gloo)
#      with W ranks; the same PS job with --finalize-on-push false (the
#      coordinator finalizes every step); and with --colocated-shards (W
#      shard processes, one inside each worker: W + 1 processes in all)
#   3. W workers: ferry local --mode ring vs the same torch DDP figure
# Prints each figure and the ratio ferry/torch. Needs scripts/setup --with-peers.
# Usage: bench/compare_torch.sh [steps] [model] [workers]   (default 600,
#        784-256-128-10, 2; the ConvNet: bench/compare_torch.sh 60 convnet)
# Env: PARTITIONS (1): the PS runs' --partitions (logical shards per shard
#      process).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-600}
model=${2:-784-256-128-10}
workers=${3:-2}
bin=build/bin
out=$(mktemp -d)
py=/usr/bin/python3
$py -c 'import torch' 2>/dev/null || { echo "python3-torch missing: scripts/setup --with-peers" >&2; exit 1; }

ferry_single=$($bin/ferry-worker --standalone --device cpu --model "$model" --epochs 1 --max-steps "$steps" \
  --summary-json "$out/single.json" >/dev/null 2>&1 && python3 -c "import json;print(json.load(open('$out/single.json'))['samples_per_second'])")
torch_single=$($py bench/torch_mlp.py --model "$model" --mode single --steps "$steps" | python3 -c "import json,sys;print(json.load(sys.stdin)['samples_per_second'])")
printf "single process   ferry %8.0f samples/s   torch %8.0f samples/s   ratio %.2f\n" \
  "$ferry_single" "$torch_single" "$(python3 -c "print($ferry_single/$torch_single)")"

ferry_ps_run() {  # $1: --finalize-on-push value, $2: summary name, $3: shards, $4...: more flags
  local finalize=$1 name=$2 shards=$3
  shift 3
  $bin/ferry local --mode ps --workers "$workers" --shards "$shards" --partitions "${PARTITIONS:-1}" \
    --model "$model" --epochs 1 --max-steps "$steps" --device cpu --finalize-on-push "$finalize" \
    --summary-json "$out/$name.json" --log-dir "$out/logs-$name" "$@" >/dev/null 2>&1
  python3 -c "import json;print(json.load(open('$out/$name.json'))['samples_per_second'])"
}
ferry_ps=$(ferry_ps_run true ps 2)
torch_ddp=$($py bench/torch_mlp.py --model "$model" --mode ddp --world "$workers" --steps "$steps" | python3 -c "import json,sys;print(json.load(sys.stdin)['samples_per_second'])")
ferry_ps_coord=$(ferry_ps_run false ps-coordinator 2)
ferry_ps_colo=$(ferry_ps_run true ps-colocated "$workers" --colocated-shards)
printf "%d workers        ferry PS sync %8.0f samples/s   torch DDP %8.0f samples/s   ratio %.2f\n" \
  "$workers" "$ferry_ps" "$torch_ddp" "$(python3 -c "print($ferry_ps/$torch_ddp)")"
printf "%d workers        ferry PS sync, coordinator finalize %8.0f samples/s   ratio %.2f (finalize on push: %.2fx)\n" \
  "$workers" "$ferry_ps_coord" "$(python3 -c "print($ferry_ps_coord/$torch_ddp)")" "$(python3 -c "print($ferry_ps/$ferry_ps_coord)")"
printf "%d workers        ferry PS sync, colocated shards %8.0f samples/s   ratio %.2f (vs 2 shard processes: %.2fx)\n" \
  "$workers" "$ferry_ps_colo" "$(python3 -c "print($ferry_ps_colo/$torch_ddp)")" "$(python3 -c "print($ferry_ps_colo/$ferry_ps)")"
$bin/ferry local --mode ring --workers "$workers" --model "$model" --epochs 1 --max-steps "$steps" --device cpu \
  --summary-json "$out/ring.json" --log-dir "$out/logs-ring" >/dev/null 2>&1
ferry_ring=$(python3 -c "import json;print(json.load(open('$out/ring.json'))['samples_per_second'])")
printf "%d workers        ferry ring    %8.0f samples/s   torch DDP %8.0f samples/s   ratio %.2f\n" \
  "$workers" "$ferry_ring" "$torch_ddp" "$(python3 -c "print($ferry_ring/$torch_ddp)")"
rm -rf "$out"
