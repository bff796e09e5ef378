#!/usr/bin/env bash
# PS push+pull goodput vs raw TCP loopback (iperf3), in one run.
#
# ROUNDS times: iperf3 (one TCP stream on 127.0.0.1 for SECONDS_IPERF s),
# then ferry-ps-goodput (one worker pushes a whole --mib gradient to the PS
# shard processes and pulls the whole model back, --iters times); and one
# last iperf3. Each round's ratio is ferry / mean(iperf3 just before, just
# after), so that the drift of a shared machine cancels; the summary gives the
# median ratio (issue 19's goal is >= 0.85). MB = 1e6 bytes everywhere.
#
# Usage: bench/ps_goodput.sh [BIN_DIR] [-- ferry-ps-goodput flags]
#   BIN_DIR defaults to build/bin, e.g.
#   bench/ps_goodput.sh build/bin -- --mib 64 --iters 10 --shards 2
# Env: ROUNDS (3), SECONDS_IPERF (5), IPERF3 (/usr/bin/iperf3),
#      BENCH (a ferry-ps-goodput binary; default BIN_DIR/ferry-ps-goodput).
set -euo pipefail

BIN_DIR=build/bin
if [[ $# -gt 0 && $1 != -- ]]; then BIN_DIR=$1; shift; fi
[[ $# -gt 0 && $1 == -- ]] && shift
FERRY_ARGS=("$@")
[[ ${#FERRY_ARGS[@]} -eq 0 ]] && FERRY_ARGS=(--mib 64 --iters 10 --warmup 2)
IPERF3=${IPERF3:-/usr/bin/iperf3}
SECS=${SECONDS_IPERF:-5}
ROUNDS=${ROUNDS:-3}
BENCH=${BENCH:-$BIN_DIR/ferry-ps-goodput}

command -v "$IPERF3" >/dev/null || { echo "iperf3 not found at $IPERF3" >&2; exit 2; }
[[ -x $BENCH ]] || { echo "$BENCH not built (target ferry-ps-goodput)" >&2; exit 2; }

WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  if [[ -n $SERVER_PID ]]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# One iperf3 run (fresh one-shot server); prints the receiver's MB/s.
iperf_mbps() {
  local port out=$WORK/iperf.json ok=
  port=$(free_port)
  "$IPERF3" -s -1 -B 127.0.0.1 -p "$port" >"$WORK/iperf-server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 300); do  # up to 30 s until it listens (without connecting)
    [[ -n $(ss -ltnH "sport = :$port" 2>/dev/null) ]] && break
    sleep 0.1
  done
  for _ in 1 2 3; do
    if "$IPERF3" -c 127.0.0.1 -p "$port" -t "$SECS" -J >"$out" 2>/dev/null; then ok=1; break; fi
    sleep 1
  done
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
  if [[ -z $ok ]]; then
    echo "iperf3 failed: $(cat "$WORK/iperf-server.log") $(head -c 300 "$out")" >&2
    exit 1
  fi
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.1f" % (d["end"]["sum_received"]["bits_per_second"]/8e6))' "$out"
}

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $BENCH ${FERRY_ARGS[*]}"
IPERF=("$(iperf_mbps)")
echo "iperf3: ${IPERF[0]} MB/s"
for r in $(seq "$ROUNDS"); do
  "$BENCH" "${FERRY_ARGS[@]}" >"$WORK/ferry$r.json"
  echo "ferry round $r: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["goodput_MBps"], "MB/s; push", d["push_MBps"], "pull", d["pull_MBps"], "MB/s; cpu", d["cpu_ms_per_MB"], "ms/MB")' "$WORK/ferry$r.json")"
  IPERF+=("$(iperf_mbps)")
  echo "iperf3: ${IPERF[$r]} MB/s"
done
echo "# last ferry-ps-goodput JSON:"
cat "$WORK/ferry$ROUNDS.json"
python3 - "$WORK" "$ROUNDS" "${IPERF[@]}" <<'EOF'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
iperf = [float(x) for x in sys.argv[3:]]
ferry = [json.load(open(f"{work}/ferry{r}.json")) for r in range(1, rounds + 1)]
ratios = [f["goodput_MBps"] / ((iperf[i] + iperf[i + 1]) / 2) for i, f in enumerate(ferry)]
median_ratio = statistics.median(ratios)
print(json.dumps({
    "ferry_goodput_MBps": [f["goodput_MBps"] for f in ferry],
    "iperf3_MBps": iperf,
    "ratios": [round(x, 3) for x in ratios],
    "ferry_goodput_MBps_median": statistics.median(f["goodput_MBps"] for f in ferry),
    "iperf3_MBps_median": statistics.median(iperf),
    "ratio_median": round(median_ratio, 3),
    "goal": 0.85,
    "meets_goal": median_ratio >= 0.85,
}, indent=2))
EOF
