#!/usr/bin/env bash
# Training throughput of ferry vs PyTorch on the same model (default the
# MLP 784-256-128-10; or convnet), batch 128, 1 thread per process, both
# measured in this run:
#   1. single process: ferry-worker --standalone vs torch (CPU)
#   2. 2 workers: ferry local --mode ps (sync, 2 shards) vs torch DDP (gloo)
#   3. 2 workers: ferry local --mode ring vs the same torch DDP figure
# Prints each figure and the ratio ferry/torch. Needs scripts/setup --with-peers.
# Usage: bench/compare_torch.sh [steps] [model]   (default 600, 784-256-128-10;
#        the ConvNet: bench/compare_torch.sh 60 convnet)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-600}
model=${2:-784-256-128-10}
bin=build/bin
out=$(mktemp -d)
py=/usr/bin/python3
$py -c 'import torch' 2>/dev/null || { echo "python3-torch missing: scripts/setup --with-peers" >&2; exit 1; }

ferry_single=$($bin/ferry-worker --standalone --device cpu --model "$model" --epochs 1 --max-steps "$steps" \
  --summary-json "$out/single.json" >/dev/null 2>&1 && python3 -c "import json;print(json.load(open('$out/single.json'))['samples_per_second'])")
torch_single=$($py bench/torch_mlp.py --model "$model" --mode single --steps "$steps" | python3 -c "import json,sys;print(json.load(sys.stdin)['samples_per_second'])")
printf "single process   ferry %8.0f samples/s   torch %8.0f samples/s   ratio %.2f\n" \
  "$ferry_single" "$torch_single" "$(python3 -c "print($ferry_single/$torch_single)")"

$bin/ferry local --mode ps --workers 2 --shards 2 --model "$model" --epochs 1 --max-steps "$steps" --device cpu \
  --summary-json "$out/ps.json" --log-dir "$out/logs" >/dev/null 2>&1
ferry_ps=$(python3 -c "import json;print(json.load(open('$out/ps.json'))['samples_per_second'])")
torch_ddp=$($py bench/torch_mlp.py --model "$model" --mode ddp --world 2 --steps "$steps" | python3 -c "import json,sys;print(json.load(sys.stdin)['samples_per_second'])")
printf "2 workers        ferry PS sync %8.0f samples/s   torch DDP %8.0f samples/s   ratio %.2f\n" \
  "$ferry_ps" "$torch_ddp" "$(python3 -c "print($ferry_ps/$torch_ddp)")"
$bin/ferry local --mode ring --workers 2 --model "$model" --epochs 1 --max-steps "$steps" --device cpu \
  --summary-json "$out/ring.json" --log-dir "$out/logs-ring" >/dev/null 2>&1
ferry_ring=$(python3 -c "import json;print(json.load(open('$out/ring.json'))['samples_per_second'])")
printf "2 workers        ferry ring    %8.0f samples/s   torch DDP %8.0f samples/s   ratio %.2f\n" \
  "$ferry_ring" "$torch_ddp" "$(python3 -c "print($ferry_ring/$torch_ddp)")"
rm -rf "$out"
