#!/usr/bin/env bash
# What a running process holds at its heap's peak, by where it was
# allocated: attaches heaptrack to PID until the process exits (or
# SECONDS_MAX pass), then sums the live bytes at the highest total
# consumption by the innermost frames of ferry's code (allocations made
# inside a library, such as gRPC's receive slices, by their library frames).
# Only what the process allocates after heaptrack attached is seen: attach
# early (buffers allocated at start-up, such as a worker's parameters, are
# missed otherwise).
# How docs/benchmarks.md ("Sharded optimizer state") attributed a ring
# member's memory: the rollback copies (RingStateCopies::Keep), the
# evaluation snapshot, gRPC's read slices.
#
#   bench/heap_peak.sh PID [TOP, default 12]
#   e.g. (a worker of a running job):
#   bench/heap_peak.sh "$(pgrep -f ferry-worker | head -1)"
#
# Env: SECONDS_MAX (default 600), OUT (default a temporary directory).
# Needs heaptrack and heaptrack_print (Debian's heaptrack package) and the
# right to ptrace PID (root, or the same user with ptrace_scope 0).
set -euo pipefail
pid=${1:?usage: bench/heap_peak.sh PID [TOP]}
top=${2:-12}
command -v heaptrack >/dev/null || { echo "heaptrack not installed (apt-get install heaptrack)" >&2; exit 2; }
kill -0 "$pid" 2>/dev/null || { echo "no process $pid" >&2; exit 2; }
out=${OUT:-$(mktemp -d /tmp/ferry-heap-peak-XXXXXX)}
mkdir -p "$out"
echo "attaching heaptrack to $pid (until it exits, at most ${SECONDS_MAX:-600} s); data in $out" >&2
(cd "$out" && timeout "${SECONDS_MAX:-600}" heaptrack -p "$pid" >"$out/heaptrack.log" 2>&1) || true
data=$(find "$out" -maxdepth 1 -name 'heaptrack.*.zst' -printf '%T@ %p\n' | sort -rn | head -1 | cut -d' ' -f2-)
[[ -n "$data" ]] || { echo "heaptrack wrote no data (see $out/heaptrack.log)" >&2; exit 1; }
heaptrack_print -f "$data" --print-peaks 0 --print-allocators 0 \
  --print-temporary 0 --print-leaks 0 --flamegraph-cost-type peak \
  -F "$out/peak.stacks" >/dev/null 2>&1
python3 - "$out/peak.stacks" "$top" <<'PY'
import collections
import sys

path, top = sys.argv[1], int(sys.argv[2])
by_site = collections.Counter()
for line in open(path):
    stack, _, n = line.rstrip().rpartition(" ")
    inner = stack.split(";")[::-1]  # innermost frame first
    if any("ferry::" in f for f in inner[:3]):
        ours = [f.split("(")[0] for f in inner if "ferry::" in f]
        key = " <- ".join(ours[:3])
    else:  # allocated inside a library: its frames
        key = " <- ".join(f.split("(")[0][:60] for f in inner[:4])
    by_site[key] += int(n)
total = sum(by_site.values())
print(f"live at the heap's peak: {total / 2**20:.1f} MiB")
for key, n in by_site.most_common(top):
    print(f"{n / 2**20:9.1f} MiB  {key}")
PY
