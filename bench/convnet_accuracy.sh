#!/usr/bin/env bash
# ConvNet accuracy on Fashion-MNIST (issue 18's targets: standalone >= 0.92,
# PS and ring with 2 workers >= 0.915, within 15 epochs with the default
# optimizer flags). Long: at ~400-650 samples/s per process on a 2-core
# machine one 15-epoch job takes 25-40 minutes; not a test.
# Usage: bench/convnet_accuracy.sh [epochs] [out_dir]   (default 15, out/convnet)
# Env: BIN_DIR (default build/bin), MODES (default "standalone ps ring"),
#      THREADS (BLAS threads of the standalone process, default 1).
# Each run's resident memory (every process of it) is sampled every 5 s to
# OUT/MODE-rss.csv; bench/rss_summary.py prints its growth after warm-up.
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-15}
out=${2:-out/convnet}
bin=${BIN_DIR:-build/bin}
modes=${MODES:-standalone ps ring}
threads=${THREADS:-1}
mkdir -p "$out"
for mode in $modes; do
  echo "== $mode, $epochs epochs" >&2
  case $mode in
    standalone)
      "$bin/ferry-worker" --standalone --model convnet --epochs "$epochs" \
        --device cpu --threads "$threads" --summary-json "$out/$mode.json" \
        --export "$out/$mode-model" & ;;
    ps)
      "$bin/ferry" local --mode ps --workers 2 --shards 2 --model convnet \
        --epochs "$epochs" --device cpu --summary-json "$out/$mode.json" \
        --export "$out/$mode-model" --timeout 14400 & ;;
    ring)
      "$bin/ferry" local --mode ring --workers 2 --model convnet \
        --epochs "$epochs" --device cpu --summary-json "$out/$mode.json" \
        --export "$out/$mode-model" --timeout 14400 & ;;
    *) echo "unknown mode $mode" >&2; exit 2 ;;
  esac
  job=$!
  bench/rss_sample.sh "$job" "$out/$mode-rss.csv" 5 &
  sampler=$!
  wait "$job"
  wait "$sampler" || true
  bench/rss_summary.py "$out/$mode-rss.csv" --skip 120 >&2
done
printf '%-11s %-14s %-12s\n' mode test_accuracy samples/s
for mode in $modes; do
  /usr/bin/python3 - "$out/$mode.json" "$mode" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<11} {s['test_accuracy']:<14.4f} {s['samples_per_second']:<12.0f}")
PY
done
