#!/usr/bin/env bash
# Samples the resident memory of a process and all its descendants until it
# exits: one CSV line per process per sample, "seconds,pid,name,rss_kib".
# Usage: bench/rss_sample.sh PID OUT.csv [interval_s, default 5]
# Used by bench/convnet_accuracy.sh to show that a training process's memory
# is flat over an epoch (activations and workspaces allocated once per batch
# shape, not per step).
set -euo pipefail
pid=$1
out=$2
interval=${3:-5}
start=$(date +%s)
echo "seconds,pid,name,rss_kib" >"$out"
descendants() {
  local p=$1
  echo "$p"
  for child in $(pgrep -P "$p" 2>/dev/null || true); do descendants "$child"; done
}
while kill -0 "$pid" 2>/dev/null; do
  now=$(($(date +%s) - start))
  for p in $(descendants "$pid"); do
    [[ -r /proc/$p/status ]] || continue
    # The program's name, with its role (ferry-server's subcommand or the
    # older --role) and --shard-id when it has them (ferry-server-coordinator,
    # ferry-server-ps-1, ferry-worker, ...).
    name=$(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | awk '
      NR == 1 {n = $0; sub(".*/", "", n)}
      NR == 2 && ($0 == "coordinator" || $0 == "ps") {n = n "-" $0}
      prev == "--role" || prev == "--shard-id" {n = n "-" $0}
      {prev = $0}
      END {print n}')
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
    [[ -n "$rss" && -n "$name" ]] && echo "$now,$p,$name,$rss" >>"$out"
  done
  sleep "$interval"
done
