#!/bin/bash
# What ring checkpoints cost and what they save: the same ferry local ring
# job (3 workers, the Fashion-MNIST MLP or ConvNet, 2 epochs) with a
# checkpoint at every step (--checkpoint-every 1), written either by every
# member (each writes and fsyncs its third of the parameters and momentum)
# or by rank 0 alone (--ring-checkpoint-writers rank0: the whole state as
# one part), against epoch ends only (--checkpoint-every 0), in rounds that
# rotate the three; then, for each writer choice, one run in which every
# member is killed at once mid-epoch and three new ones start (the ring
# resumes from the newest checkpoint, every 50 steps).
#
# Per run: samples/s (the job's window), the steps' mean time, the bytes one
# checkpoint writes (the parts' sizes on disk) and the checkpoints recorded.
# The cost of one checkpoint is the difference of the median step times; its
# floor is what one writer writes and fsyncs on this disk (a file of one
# part's size for the members writing at once, of the whole checkpoint for
# rank 0 alone; each written and fsynced 20 times here, median). dd's sequential rate to disk (256 MiB,
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

run() {  # run TAG EVERY WRITERS [CHAOS] -> the summary in $WORK/TAG.json
  local tag=$1 every=$2 writers=$3 chaos=${4:-}
  local args=(--mode ring --workers 3 --epochs 2 --batch 256 "${MODEL_ARGS[@]}"
    --heartbeat-timeout 3 --checkpoint-every "$every"
    --ring-checkpoint-writers "$writers"
    --summary-json "$WORK/$tag.json" --log-dir "$WORK/logs-$tag")
  [ -n "$chaos" ] && args+=(--chaos "$chaos" --digest-every 10)
  "$BIN/ferry" local "${args[@]}" > "$WORK/$tag.out" 2>&1 ||
    { tail -5 "$WORK/$tag.out"; exit 1; }
  du -cb "$WORK/logs-$tag"/ring/shard-*-v*.ckpt 2> /dev/null | tail -1 |
    cut -f1 > "$WORK/$tag.bytes" || echo 0 > "$WORK/$tag.bytes"
}

[ "$ROUNDS" -eq 0 ] && run undisturbed 50 all
ARMS=(e0 all rank0)  # epoch ends only; every step by all; by rank 0
for r in $(seq 1 "$ROUNDS"); do
  for k in 0 1 2; do  # rotated each round
    arm=${ARMS[$(((k + r - 1) % 3))]}
    case $arm in
      e0) run "r$r-e0" 0 all ;;
      *) run "r$r-$arm" 1 "$arm" ;;
    esac
  done
done
KILL="kill:worker0@step160,kill:worker1@step160,kill:worker2@step160,join:3@step160"
run killed-all 50 all "$KILL"
run killed-rank0 50 rank0 "$KILL"

python3 - "$WORK" "$ROUNDS" "$DISK" "$MODEL" << 'PY'
import json, statistics, sys
work, rounds, disk, model = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def load(tag):
    return json.load(open(f"{work}/{tag}.json"))
def events(s, kind):
    return [e for e in s["events"] if e["kind"] == kind]
rows = {}
for arm in ("e0", "all", "rank0") if rounds > 0 else ():
    runs = [load(f"r{r}-{arm}") for r in range(1, rounds + 1)]
    for s in runs:
        assert all(a["samples_applied"] == 60000 for a in s["epochs_accounting"])
    rows[arm] = {
        "sps": [s["samples_per_second"] for s in runs],
        "step_ms": [1000 * s["window_seconds"] / s["window_steps"] for s in runs],
        "checkpoints": [len(events(s, "ring_checkpoint")) for s in runs],
        "accuracy": [s["test_accuracy"] for s in runs],
    }
# The three newest versions' parts are on disk after a run: a third of
# that is one checkpoint (3 parts, or rank 0's one).
one = int(open(f"{work}/{'r1-all' if rounds else 'undisturbed'}.bytes").read().split()[0]) / 3
import os, time
def floor(size):  # ms to write and fsync `size` bytes here, median of 20
    times = []
    for i in range(20):
        t = time.perf_counter()
        with open(f"{work}/floor.part", "wb") as f:
            f.write(b"\1" * int(size))
            f.flush()
            os.fsync(f.fileno())
        os.rename(f"{work}/floor.part", f"{work}/floor.ckpt")
        times.append(1000 * (time.perf_counter() - t))
    return statistics.median(times)
floors = {"all": floor(one / 3), "rank0": floor(one)}
print(f"model {model}; disk (dd 256 MiB, fdatasync): {disk}")
print(f"one checkpoint: {one / 1e6:.3f} MB in 3 parts ({one / 3e6:.3f} MB per member)"
      f" or 1 part (rank 0)")
for arm, row in rows.items():
    print(f"{arm}: samples/s {row['sps']} step ms "
          f"{[round(x, 2) for x in row['step_ms']]} checkpoints {row['checkpoints']} "
          f"accuracy {row['accuracy']}")
for arm, floor_ms in floors.items():
    what = "one part" if arm == "all" else "the whole checkpoint"
    print(f"{arm}: floor, {what} written and fsynced here: {floor_ms:.2f} ms (median of 20)")
    if not rounds:
        continue
    cost_ms = statistics.median(rows[arm]["step_ms"]) - statistics.median(rows["e0"]["step_ms"])
    if cost_ms >= 0.5 * floor_ms:
        print(f"{arm}: cost of one checkpoint (median step time difference): "
              f"{cost_ms:.2f} ms = {cost_ms / floor_ms:.2f}x the floor")
        every50 = cost_ms / 50 / statistics.median(rows["e0"]["step_ms"])
        print(f"{arm}: at --checkpoint-every 50: {100 * every50:.1f} % of the step time")
    else:
        spread = max(max(r["step_ms"]) - min(r["step_ms"]) for r in rows.values())
        print(f"{arm}: cost of one checkpoint: not resolved: the step time difference "
              f"({cost_ms:.2f} ms) is below half the floor, i.e. within the runs' noise "
              f"(spread {spread:.2f} ms over {rounds} round(s))")
ref = (statistics.median(rows["e0"]["accuracy"]) if rounds
       else load("undisturbed")["test_accuracy"])
for arm in ("all", "rank0"):
    k = load(f"killed-{arm}")
    print(f"{arm}: every member killed at step 160: accuracy {k['test_accuracy']} "
          f"(undisturbed {ref}), "
          f"accounting {[a['samples_applied'] for a in k['epochs_accounting']]}, "
          f"resumed {[(e['step'], e['detail']) for e in events(k, 'ring_resumed')]}, "
          f"undone {[e['samples_lost'] for e in events(k, 'rolled_back')]} samples, "
          f"wall {k['wall_seconds']:.1f} s, digest mismatches {k['digest_mismatches']}")
PY
