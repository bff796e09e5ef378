#!/bin/bash
# What ring checkpoints cost and what they save: the same ferry local ring
# job (3 workers, the Fashion-MNIST MLP or ConvNet, 2 epochs) with a
# checkpoint at every step (--checkpoint-every 1: each member writes and
# fsyncs its third of the parameters and momentum every step) against epoch
# ends only (--checkpoint-every 0), in alternating rounds; then one run in
# which every member is killed at once mid-epoch and three new ones start
# (the ring resumes from the newest checkpoint, every 50 steps).
#
# Per run: samples/s (the job's window), the steps' mean time, the bytes one
# checkpoint writes (the parts' sizes on disk) and the checkpoints recorded.
# The cost of one checkpoint is the difference of the median step times; its
# floor is one member's part written and fsynced on this disk (a file of the
# part's size, written and fsynced 20 times here, median), since the members
# write theirs at the same time. dd's sequential rate to disk (256 MiB,
# fdatasync) is printed for scale.
#
#   bench/ring_checkpoint_cost.sh [BIN_DIR] [ROUNDS] [MODEL]
#
# MODEL: mlp (default) or convnet. ROUNDS 0: only the kill run and an
# undisturbed one (--checkpoint-every 50) to compare its accuracy with. Needs
# the Fashion-MNIST data (ferry data fashion-mnist).
set -euo pipefail
BIN=${1:-build/bin}
ROUNDS=${2:-3}
MODEL=${3:-mlp}
WORK=$(mktemp -d /tmp/ferry-ring-ckpt-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
MODEL_ARGS=()
[ "$MODEL" = convnet ] && MODEL_ARGS=(--model convnet)

# Sequential write rate with the data on disk at the end (MB/s).
DISK=$(dd if=/dev/zero of="$WORK/dd" bs=1M count=256 conv=fdatasync 2>&1 |
  awk '/copied/ {print $(NF-1), $NF}')
rm -f "$WORK/dd"

run() {  # run TAG EVERY [CHAOS] -> the summary in $WORK/TAG.json
  local tag=$1 every=$2 chaos=${3:-}
  local args=(--mode ring --workers 3 --epochs 2 --batch 256 "${MODEL_ARGS[@]}"
    --heartbeat-timeout 3 --checkpoint-every "$every"
    --summary-json "$WORK/$tag.json" --log-dir "$WORK/logs-$tag")
  [ -n "$chaos" ] && args+=(--chaos "$chaos" --digest-every 10)
  "$BIN/ferry" local "${args[@]}" > "$WORK/$tag.out" 2>&1 ||
    { tail -5 "$WORK/$tag.out"; exit 1; }
  du -cb "$WORK/logs-$tag"/ring/shard-*-v*.ckpt 2> /dev/null | tail -1 |
    cut -f1 > "$WORK/$tag.bytes" || echo 0 > "$WORK/$tag.bytes"
}

[ "$ROUNDS" -eq 0 ] && run undisturbed 50
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then order="0 1"; else order="1 0"; fi
  for every in $order; do run "r$r-e$every" "$every"; done
done
run killed 50 "kill:worker0@step160,kill:worker1@step160,kill:worker2@step160,join:3@step160"

python3 - "$WORK" "$ROUNDS" "$DISK" "$MODEL" << 'PY'
import json, statistics, sys
work, rounds, disk, model = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def load(tag):
    return json.load(open(f"{work}/{tag}.json"))
def events(s, kind):
    return [e for e in s["events"] if e["kind"] == kind]
rows = {}
for every in (0, 1) if rounds > 0 else ():
    runs = [load(f"r{r}-e{every}") for r in range(1, rounds + 1)]
    for s in runs:
        assert all(a["samples_applied"] == 60000 for a in s["epochs_accounting"])
    rows[every] = {
        "sps": [s["samples_per_second"] for s in runs],
        "step_ms": [1000 * s["window_seconds"] / s["window_steps"] for s in runs],
        "checkpoints": [len(events(s, "ring_checkpoint")) for s in runs],
        "accuracy": [s["test_accuracy"] for s in runs],
    }
# The three newest versions' parts are on disk after a run: a third of
# that is one checkpoint (3 parts).
one = int(open(f"{work}/{'r1-e1' if rounds else 'undisturbed'}.bytes").read().split()[0]) / 3
cost_ms = (statistics.median(rows[1]["step_ms"]) - statistics.median(rows[0]["step_ms"])
           if rounds else 0.0)
import os, time
times = []
for i in range(20):
    t = time.perf_counter()
    with open(f"{work}/floor.part", "wb") as f:
        f.write(b"\1" * int(one / 3))
        f.flush()
        os.fsync(f.fileno())
    os.rename(f"{work}/floor.part", f"{work}/floor.ckpt")
    times.append(1000 * (time.perf_counter() - t))
floor_ms = statistics.median(times)
print(f"model {model}; disk (dd 256 MiB, fdatasync): {disk}")
print(f"one checkpoint: {one / 1e6:.3f} MB in 3 parts ({one / 3e6:.3f} MB per member)")
for every, row in rows.items():
    print(f"--checkpoint-every {every}: samples/s {row['sps']} step ms "
          f"{[round(x, 2) for x in row['step_ms']]} checkpoints {row['checkpoints']} "
          f"accuracy {row['accuracy']}")
print(f"floor: one part written and fsynced here: {floor_ms:.2f} ms (median of 20)")
if rounds and cost_ms >= 0.5 * floor_ms:
    print(f"cost of one checkpoint (median step time difference): {cost_ms:.2f} ms"
          f" = {cost_ms / floor_ms:.2f}x the floor")
    every50 = cost_ms / 50 / statistics.median(rows[0]["step_ms"])
    print(f"at --checkpoint-every 50: {100 * every50:.1f} % of the step time")
elif rounds:
    spread = max(max(r["step_ms"]) - min(r["step_ms"]) for r in rows.values())
    print(f"cost of one checkpoint: not resolved: the step time difference "
          f"({cost_ms:.2f} ms) is below the floor, i.e. within the runs' noise "
          f"(spread {spread:.2f} ms over {rounds} round(s))")
k = load("killed")
ref = (statistics.median(rows[0]["accuracy"]) if rounds
       else load("undisturbed")["test_accuracy"])
print(f"every member killed at step 160: accuracy {k['test_accuracy']} (undisturbed {ref}), "
      f"accounting {[a['samples_applied'] for a in k['epochs_accounting']]}, "
      f"resumed {[(e['step'], e['detail']) for e in events(k, 'ring_resumed')]}, "
      f"undone {[e['samples_lost'] for e in events(k, 'rolled_back')]} samples, "
      f"wall {k['wall_seconds']:.1f} s, digest mismatches {k['digest_mismatches']}")
PY
