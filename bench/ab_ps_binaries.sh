#!/usr/bin/env bash
# A/B of two builds on one job: ferry local PS sync (2 workers, 2 shards, MLP
# 784-256-128-10, batch 128, 600 steps, CPU), alternating the builds round by
# round so that both see the same machine. Prints one line per run and each
# build's median samples/s (the throughput window, docs/comparison.md).
# Usage: bench/ab_ps_binaries.sh OLD_BIN_DIR NEW_BIN_DIR [rounds]   (default 6)
#   Env: EXTRA, more `ferry local` flags for both (e.g. "--colocated-shards"),
#        WORKERS / SHARDS (2 / 2).
#   e.g. git worktree add /tmp/old REV && cmake -S /tmp/old -B /tmp/old/build
#        -DFERRY_BUILD_TESTS=OFF -DFERRY_BUILD_BENCH=OFF && cmake --build
#        /tmp/old/build --target ferry ferry-server ferry-worker, then
#        bench/ab_ps_binaries.sh /tmp/old/build/bin build/bin
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
old=$1 new=$2 rounds=${3:-6}
for d in "$old" "$new"; do
  [[ -x $d/ferry ]] || { echo "ab_ps_binaries.sh: no $d/ferry" >&2; exit 1; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A figures=([old]="" [new]="")
for r in $(seq 1 "$rounds"); do
  for which in old new; do
    bin=$old
    [[ $which == new ]] && bin=$new
    run=$out/$which-$r
    # shellcheck disable=SC2086  # EXTRA is a list of flags
    "$bin/ferry" local --mode ps --workers "${WORKERS:-2}" --shards "${SHARDS:-2}" \
      --model 784-256-128-10 --epochs 1 --max-steps 600 --device cpu ${EXTRA:-} \
      --summary-json "$run.json" --log-dir "$run-logs" >/dev/null 2>&1
    sps=$(python3 -c "import json;print(round(json.load(open('$run.json'))['samples_per_second']))")
    echo "round $r  $which  $sps samples/s"
    figures[$which]+="$sps "
  done
done
python3 - "${figures[old]}" "${figures[new]}" <<'PY'
import statistics, sys
old, new = (list(map(int, a.split())) for a in sys.argv[1:3])
mo, mn = statistics.median(old), statistics.median(new)
print(f"median old {mo:.0f}  new {mn:.0f}  new/old {mn / mo:.2f}  "
      f"(old {min(old)}-{max(old)}, new {min(new)}-{max(new)})")
PY
