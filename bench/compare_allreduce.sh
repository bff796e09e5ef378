#!/usr/bin/env bash
# All-reduce busbw (nccl-tests definition: algbw = S/t, busbw = algbw*2(n-1)/n)
# of ferry's gRPC ring vs torch.distributed.all_reduce on gloo, 1/16/64 MiB
# fp32, 2 and 4 ranks (one process each) on loopback, next to one iperf3
# TCP loopback stream, all in this run. Prints a table and the raw JSON lines.
# Needs build/bin/ferry-ring-allreduce (BIN_DIR=... overrides build/bin),
# Debian's python3-torch and iperf3 (scripts/setup --with-peers).
# Usage: bench/compare_allreduce.sh [iters]        (default 20 timed ops per size)
# Env:   BIN_DIR, SIZES_MIB (default 1,16,64), RANKS (default "2 4"),
#        FERRY_ARGS (extra ferry-ring-allreduce flags, e.g. "--piece-mib 4").
set -euo pipefail
cd "$(dirname "$0")/.."
iters=${1:-20}
bin=${BIN_DIR:-build/bin}
sizes=${SIZES_MIB:-1,16,64}
ranks_list=${RANKS:-2 4}
py=/usr/bin/python3
ferry=$bin/ferry-ring-allreduce

[[ -x $ferry ]] || { echo "compare_allreduce.sh: $ferry not found: build it (cmake --build build --target ferry-ring-allreduce) or set BIN_DIR" >&2; exit 1; }
[[ -x $py ]] && $py -c 'import torch, torch.distributed' 2>/dev/null ||
  { echo "compare_allreduce.sh: python3-torch missing ($py cannot import torch): scripts/setup --with-peers" >&2; exit 1; }
command -v iperf3 >/dev/null || { echo "compare_allreduce.sh: iperf3 missing: scripts/setup --with-peers (apt-get install iperf3)" >&2; exit 1; }

out=$(mktemp -d)
iperf_pid=""
cleanup() {
  [[ -n $iperf_pid ]] && kill "$iperf_pid" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT

# 1. Raw TCP loopback: one iperf3 stream for 3 s.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
iperf3 -s -1 -D -B 127.0.0.1 -p "$port" -I "$out/iperf3.pid" >/dev/null
for _ in $(seq 50); do [[ -s $out/iperf3.pid ]] && break; sleep 0.1; done
iperf_pid=$(tr -d '\0' <"$out/iperf3.pid" 2>/dev/null || true)
sleep 0.3
timeout 30 iperf3 -c 127.0.0.1 -p "$port" -t 3 -J >"$out/iperf3.json" ||
  { echo "compare_allreduce.sh: iperf3 client failed: $(head -c 300 "$out/iperf3.json")" >&2; exit 1; }
iperf_gbit=$(python3 -c "import json; print(json.load(open('$out/iperf3.json'))['end']['sum_received']['bits_per_second']/1e9)")

# 2. ferry and gloo, alternating, same sizes and iterations.
for n in $ranks_list; do
  # shellcheck disable=SC2086
  timeout 170 "$ferry" --ranks "$n" --sizes-mib "$sizes" --iters "$iters" --warmup 2 ${FERRY_ARGS:-} >>"$out/ferry.jsonl" ||
    { echo "compare_allreduce.sh: ferry-ring-allreduce --ranks $n failed" >&2; exit 1; }
  timeout 170 $py bench/torch_allreduce.py --ranks "$n" --sizes-mib "$sizes" --iters "$iters" --warmup 2 >>"$out/gloo.jsonl" ||
    { echo "compare_allreduce.sh: torch_allreduce.py --ranks $n failed" >&2; exit 1; }
done

python3 - "$out" "$iperf_gbit" "$iters" <<'EOF'
import json, sys
out, iperf, iters = sys.argv[1], float(sys.argv[2]), sys.argv[3]
load = lambda f: {(r["ranks"], r["bytes"]): r for r in map(json.loads, open(f"{out}/{f}"))}
ferry, gloo = load("ferry.jsonl"), load("gloo.jsonl")
print(f"all-reduce busbw (GB/s = 1e9 B/s; median of {iters} ops), iperf3 TCP loopback 1 stream: "
      f"{iperf:.2f} Gbit/s = {iperf / 8:.3f} GB/s")
print(f"{'size':>8} {'ranks':>5} {'ferry busbw':>12} {'gloo busbw':>11} {'ferry/gloo':>10} {'iperf3 Gbit/s':>13}")
for key in sorted(ferry, key=lambda k: (k[1], k[0])):
    f, g = ferry[key], gloo.get(key)
    gb = g["busbw_gbps"] if g else float("nan")
    print(f"{key[1] / 2**20:>5.0f} MiB {key[0]:>5} {f['busbw_gbps']:>12.3f} {gb:>11.3f} "
          f"{f['busbw_gbps'] / gb:>10.2f} {iperf:>13.2f}")
print("raw:")
for f in ("ferry.jsonl", "gloo.jsonl"):
    sys.stdout.write(open(f"{out}/{f}").read())
EOF
