#!/bin/bash
# What the async barrier costs (coordinator/coordinator_async_barrier.cc):
# the same ferry local async job (3 workers, 2 shards, 2 epochs of the
# Fashion-MNIST MLP at batch 256: 1,412 tasks) with a consistent cut every
# 25 and every 100 tasks against cuts at the job's start and the epoch
# ends only (--checkpoint-every 0), in alternating rounds. Per run: the
# job's samples/s over its window and the cuts made (events
# async_checkpoint); the cost of one cut is the difference of the window
# times over the difference of the cuts, against its floor: the shards'
# checkpoint writes themselves (their Checkpoint RPC times are not
# separated here, so the floor printed is a shard slice written and fsynced
# on this disk, median of 20, measured in this script).
#
#   bench/async_barrier_cost.sh [BIN_DIR] [ROUNDS] [CONSISTENCY]
#
# CONSISTENCY: async (default) or ssp:K. Needs the Fashion-MNIST data.
set -euo pipefail
BIN=${1:-build/bin}
ROUNDS=${2:-3}
CONSISTENCY=${3:-async}
WORK=$(mktemp -d /tmp/ferry-async-barrier-XXXXXX)
trap 'rm -rf "$WORK"' EXIT

run() {  # run TAG EVERY
  "$BIN/ferry" local --mode ps --shards 2 --workers 3 --epochs 2 --batch 256 \
    --consistency "$CONSISTENCY" --checkpoint-every "$2" \
    --summary-json "$WORK/$1.json" --log-dir "$WORK/logs-$1" \
    > "$WORK/$1.out" 2>&1 || { tail -5 "$WORK/$1.out"; exit 1; }
  du -b "$WORK/logs-$1"/ps0/*.ckpt 2> /dev/null | sort -n | tail -1 |
    cut -f1 > "$WORK/$1.bytes" || echo 0 > "$WORK/$1.bytes"
}

EVERY=(0 100 25)
for r in $(seq 1 "$ROUNDS"); do
  order=("${EVERY[@]}")
  [ $((r % 2)) -eq 0 ] && order=(25 100 0)
  for e in "${order[@]}"; do run "r$r-e$e" "$e"; done
done

python3 - "$WORK" "$ROUNDS" << 'PY'
import json, os, statistics, sys, time
work, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for e in (0, 100, 25):
    runs = [json.load(open(f"{work}/r{r}-e{e}.json")) for r in range(1, rounds + 1)]
    for s in runs:
        assert all(a["samples_applied"] == 60000 for a in s["epochs_accounting"]), s["epochs_accounting"]
        assert all(v == s["steps"] for v in s["shard_versions"]), (s["shard_versions"], s["steps"])
    rows[e] = {
        "sps": [s["samples_per_second"] for s in runs],
        "window": [s["window_seconds"] for s in runs],
        "cuts": [sum(ev["kind"] == "async_checkpoint" for ev in s["events"]) for s in runs],
        "rollbacks": [sum(ev["kind"] == "async_rolled_back" for ev in s["events"]) for s in runs],
        "accuracy": [s["test_accuracy"] for s in runs],
    }
part = int(open(f"{work}/r1-e25.bytes").read().split()[0] or 0)
times = []
for i in range(20):
    t = time.perf_counter()
    with open(f"{work}/floor.tmp", "wb") as f:
        f.write(b"\1" * part)
        f.flush()
        os.fsync(f.fileno())
    os.rename(f"{work}/floor.tmp", f"{work}/floor.ckpt")
    times.append(1000 * (time.perf_counter() - t))
floor = statistics.median(times)
for e, row in rows.items():
    print(f"--checkpoint-every {e:3d}: samples/s {[round(x) for x in row['sps']]} "
          f"(median {statistics.median(row['sps']):.0f}), cuts {row['cuts']}, "
          f"rollbacks {row['rollbacks']}, accuracy {row['accuracy']}")
base_w = statistics.median(rows[0]["window"])
for e in (100, 25):
    dw = statistics.median(rows[e]["window"]) - base_w
    dc = statistics.median(rows[e]["cuts"]) - statistics.median(rows[0]["cuts"])
    ratio = statistics.median(rows[e]["sps"]) / statistics.median(rows[0]["sps"])
    spread = max(rows[e]["window"]) - min(rows[e]["window"])
    print(f"every {e}: {ratio:.2f}x the samples/s of epoch-end cuts only; "
          f"{1000 * dw / dc:.1f} ms per cut ({dc:.0f} more cuts, window spread {spread:.2f} s)")
print(f"floor: one shard checkpoint ({part / 1e6:.3f} MB) written and fsynced: {floor:.2f} ms")
PY
