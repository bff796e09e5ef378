#!/bin/bash
# The cost of making the coordinator's state durable: the same ferry local
# job (ring, 2 workers, the Fashion-MNIST MLP: hundreds of steps a second,
# two state saves each) with the coordinator fsyncing every save
# (--state-sync-interval 0) and at most once a second (the default), in
# alternating rounds. Per run: the coordinator's CPU seconds (utime + stime
# from /proc, sampled every 0.1 s until it exits), the steps applied, and
# the job's samples/s; then per variant the medians.
#
#   bench/coordinator_state_sync.sh [BIN_DIR] [ROUNDS]
#
# Needs the Fashion-MNIST data (scripts/setup fetches nothing: ferry data
# fashion-mnist, or the build's default path as ferry local uses it).
set -euo pipefail
BIN=${1:-build/bin}
ROUNDS=${2:-3}
WORK=$(mktemp -d /tmp/ferry-state-sync-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
TICKS=$(getconf CLK_TCK)

run() {  # run TAG INTERVAL -> "cpu_seconds steps samples_per_second"
  local tag=$1 interval=$2
  "$BIN/ferry" local --mode ring --workers 2 --epochs 2 \
    --state-sync-interval "$interval" --summary-json "$WORK/$tag.json" \
    --log-dir "$WORK/logs-$tag" > "$WORK/$tag.out" 2>&1 &
  local local_pid=$! pid="" cpu=0
  while kill -0 "$local_pid" 2> /dev/null; do
    [ -z "$pid" ] && pid=$(pgrep -P "$local_pid" -f "ferry-server coordinator" | head -1 || true)
    if [ -n "$pid" ] && [ -r "/proc/$pid/stat" ]; then
      cpu=$(awk -v t="$TICKS" '{print ($14 + $15) / t}' "/proc/$pid/stat" 2> /dev/null || echo "$cpu")
    fi
    sleep 0.1
  done
  wait "$local_pid"
  python3 -c "import json,sys; s=json.load(open('$WORK/$tag.json')); print($cpu, s['steps'], s['samples_per_second'])"
}

declare -A CPU STEPS SPS
for r in $(seq 1 "$ROUNDS"); do
  order="0 1"; [ $((r % 2)) -eq 0 ] && order="1 0"
  for interval in $order; do
    read -r cpu steps sps < <(run "r$r-i$interval" "$interval")
    echo "round $r --state-sync-interval $interval: coordinator ${cpu} CPU s, $steps steps, ${sps} samples/s"
    CPU[$interval]+="$cpu "; STEPS[$interval]+="$steps "; SPS[$interval]+="$sps "
  done
done
python3 - "${CPU[0]}" "${STEPS[0]}" "${SPS[0]}" "${CPU[1]}" "${STEPS[1]}" "${SPS[1]}" <<'PY'
import statistics, sys
for name, cpu, steps, sps in (("every save (0)", *sys.argv[1:4]), ("once a second (1)", *sys.argv[4:7])):
    per = [1e6 * float(c) / int(s) for c, s in zip(cpu.split(), steps.split())]
    print(f"{name:18} coordinator CPU {statistics.median(per):7.1f} us/step "
          f"(runs {', '.join(f'{p:.1f}' for p in per)}), "
          f"{statistics.median(float(x) for x in sps.split()):8.0f} samples/s")
PY
