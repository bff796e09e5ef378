#!/usr/bin/env bash
# All-reduce busbw (nccl-tests definition: algbw = S/t, busbw = algbw*2(n-1)/n)
# of ferry's ring vs torch.distributed.all_reduce on gloo, 1/16/64 MiB fp32,
# 2 and 4 ranks (one process each) on one host: ferry with its shared-memory
# links (the default) and with loopback gRPC streams (--shared-memory false),
# next to one iperf3 TCP loopback stream and a 256 MiB memcpy, all in this
# run. Prints a table and the raw JSON lines.
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

# 2. One core's memcpy of 256 MiB (numpy's copy is a memcpy), median of 5.
memcpy_gbps=$($py -c '
import time, numpy as np
src = np.ones(64 << 20, dtype=np.float32); dst = np.empty_like(src)
np.copyto(dst, src)
t = []
for _ in range(5):
    s = time.perf_counter(); np.copyto(dst, src); t.append(time.perf_counter() - s)
print(src.nbytes / sorted(t)[2] / 1e9)')

# 3. ferry (links, then streams) and gloo, alternating, same sizes and
#    iterations.
for n in $ranks_list; do
  # shellcheck disable=SC2086
  timeout 170 "$ferry" --ranks "$n" --sizes-mib "$sizes" --iters "$iters" --warmup 2 ${FERRY_ARGS:-} >>"$out/ferry.jsonl" ||
    { echo "compare_allreduce.sh: ferry-ring-allreduce --ranks $n failed" >&2; exit 1; }
  # shellcheck disable=SC2086
  timeout 170 "$ferry" --ranks "$n" --sizes-mib "$sizes" --iters "$iters" --warmup 2 ${FERRY_ARGS:-} --shared-memory false >>"$out/stream.jsonl" ||
    { echo "compare_allreduce.sh: ferry-ring-allreduce --ranks $n --shared-memory false failed" >&2; exit 1; }
  timeout 170 $py bench/torch_allreduce.py --ranks "$n" --sizes-mib "$sizes" --iters "$iters" --warmup 2 >>"$out/gloo.jsonl" ||
    { echo "compare_allreduce.sh: torch_allreduce.py --ranks $n failed" >&2; exit 1; }
done

python3 - "$out" "$iperf_gbit" "$iters" "$memcpy_gbps" <<'EOF'
import json, sys
out, iperf, iters, memcpy = sys.argv[1], float(sys.argv[2]), sys.argv[3], float(sys.argv[4])
load = lambda f: {(r["ranks"], r["bytes"]): r for r in map(json.loads, open(f"{out}/{f}"))}
ferry, stream, gloo = load("ferry.jsonl"), load("stream.jsonl"), load("gloo.jsonl")
tcp = iperf / 8  # GB/s
print(f"all-reduce busbw (GB/s = 1e9 B/s; median of {iters} ops); iperf3 TCP loopback 1 stream: "
      f"{iperf:.2f} Gbit/s = {tcp:.3f} GB/s; memcpy 256 MiB: {memcpy:.2f} GB/s")
print(f"{'size':>8} {'ranks':>5} {'ferry links':>11} {'ferry streams':>13} {'gloo':>7} "
      f"{'links/gloo':>10} {'streams/gloo':>12} {'links/iperf3':>12} {'links/memcpy':>12}")
for key in sorted(ferry, key=lambda k: (k[1], k[0])):
    f, s, g = ferry[key]["busbw_gbps"], stream[key]["busbw_gbps"], gloo[key]["busbw_gbps"]
    print(f"{key[1] / 2**20:>5.0f} MiB {key[0]:>5} {f:>11.3f} {s:>13.3f} {g:>7.3f} "
          f"{f / g:>10.2f} {s / g:>12.2f} {f / tcp:>12.2f} {f / memcpy:>12.2f}")
print("raw:")
for f in ("ferry.jsonl", "stream.jsonl", "gloo.jsonl"):
    sys.stdout.write(open(f"{out}/{f}").read())
EOF
