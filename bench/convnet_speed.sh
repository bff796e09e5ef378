#!/usr/bin/env bash
# Single-process ConvNet step speed, ferry vs PyTorch (forward + backward,
# batch 128, one thread each), alternating runs in this script; then ferry's
# per-layer breakdown and the backend's GEMM rate (ferry-model-step
# --per-layer --gemm). Needs scripts/setup --with-peers (python3-torch).
# Usage: bench/convnet_speed.sh [steps] [rounds]   (default 10, 2)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10}
rounds=${2:-2}
bin=${BIN_DIR:-build/bin}
for round in $(seq "$rounds"); do
  echo "== round $round"
  "$bin/ferry-model-step" --model convnet --batch 128 --steps "$steps"
  /usr/bin/python3 bench/torch_convnet.py --batch 128 --steps "$steps"
done
echo "== per layer (backend synchronized around every layer)"
"$bin/ferry-model-step" --model convnet --batch 128 --steps "$steps" --per-layer --gemm
