#!/bin/bash
# What sharding the optimizer state (ZeRO stage 1, --ring-shard-optimizer-
# state) costs a ring job in speed: the same ferry local ring job with and
# without it, in alternating rounds, on the Fashion-MNIST data. Sharded, each
# step reduce-scatters the gradients, updates 1/W of the parameters and
# all-gathers them: the same bytes as the all-reduce, but the all-gather
# cannot overlap the backward pass (the all-reduce's second half can), and
# the update runs on 1/W of the elements.
#
# Per run: samples/s over the job's window and the final test accuracy; per
# round the ratio sharded / plain. Both write a ring checkpoint every
# --checkpoint-every 100 steps (the sharded job also after its first step).
#
#   bench/ring_sharded_speed.sh [ROUNDS, default 3] [WORKERS, default 2]
#       [MODEL, default mlp] [EPOCHS, default 1] [OPTIMIZER, default momentum]
#       [LR, default ferry local's]
#
# Needs the Fashion-MNIST data (ferry data fashion-mnist) and a build in
# build/. Writes nothing outside a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
WORKERS=${2:-2}
MODEL=${3:-mlp}
EPOCHS=${4:-1}
OPTIMIZER=${5:-momentum}
LR_ARGS=()
[ -n "${6:-}" ] && LR_ARGS=(--lr "$6")
WORK=$(mktemp -d /tmp/ferry-ring-sharded-XXXXXX)
trap 'rm -rf "$WORK"' EXIT

run() {  # run TAG SHARDED -> prints "samples/s accuracy"
  local tag=$1 sharded=$2
  build/bin/ferry local --mode ring --workers "$WORKERS" --model "$MODEL" \
    --optimizer "$OPTIMIZER" "${LR_ARGS[@]}" --epochs "$EPOCHS" --device cpu \
    --checkpoint-every 100 --ring-shard-optimizer-state "$sharded" \
    --log-dir "$WORK/$tag" --summary-json "$WORK/$tag.json" \
    >"$WORK/$tag.out" 2>&1 || {
    echo "run $tag failed: see $WORK/$tag.out" >&2
    tail -5 "$WORK/$tag.out" >&2
    exit 1
  }
  python3 -c "
import json, sys
s = json.load(open('$WORK/$tag.json'))
print(s['samples_per_second'], s['test_accuracy'])"
}

echo "ring, $WORKERS workers, model $MODEL, $OPTIMIZER ${6:+lr $6}, $EPOCHS epoch(s)"
printf '%-6s %14s %10s %14s %10s %8s\n' round plain acc sharded acc ratio
for r in $(seq 1 "$ROUNDS"); do
  # Alternate which goes first.
  if ((r % 2)); then
    read -r p pa < <(run "plain$r" false)
    read -r s sa < <(run "sharded$r" true)
  else
    read -r s sa < <(run "sharded$r" true)
    read -r p pa < <(run "plain$r" false)
  fi
  printf '%-6s %14.0f %10.4f %14.0f %10.4f %8.3f\n' "$r" "$p" "$pa" "$s" "$sa" \
    "$(python3 -c "print($s / $p)")"
done
