#!/usr/bin/env bash
# Embedding tables at scale on real shard processes (issue 20, "Scale"):
# ferry-sparse-scale starts a DLRM job's coordinator and SHARDS `ferry-server
# ps` processes (26 tables of dim 16, row-wise Adagrad), pushes rows
# of new ids over gRPC until they hold ROWS rows, checkpoints every shard
# (at half and at all the rows) and stops them (each writes its final
# checkpoint). It reports per shard its rows, their bytes (values + Adagrad
# state), its peak RSS (VmHWM) against them and the hash map's bytes per
# row. bench/rss_sample.sh samples every process meanwhile (OUT/rss.csv,
# summed up by bench/rss_summary.py).
#
# Usage: bench/sparse_scale.sh [ROWS, default 50000000] [SHARDS, default 4]
#        [-- more ferry-sparse-scale flags]
# Env: BIN_DIR (build/bin), OUT (out/sparse-scale; its logs/ holds the
#      processes' logs and the checkpoints, deleted at the end unless
#      KEEP_CHECKPOINTS=1). Needs about ROWS x 110 B of memory and ROWS x
#      84 B x 3 of disk (three checkpoints kept per shard).
set -euo pipefail
cd "$(dirname "$0")/.."
rows=50000000
shards=4
if [[ $# -gt 0 && $1 != -- ]]; then rows=$1; shift; fi
if [[ $# -gt 0 && $1 != -- ]]; then shards=$1; shift; fi
[[ $# -gt 0 && $1 == -- ]] && shift
BIN_DIR=${BIN_DIR:-build/bin}
OUT=${OUT:-out/sparse-scale}
bench=$BIN_DIR/ferry-sparse-scale
[[ -x $bench ]] || { echo "$bench not built (target ferry-sparse-scale)" >&2; exit 2; }
rm -rf "$OUT/logs"
mkdir -p "$OUT/logs"

"$bench" --rows "$rows" --shards "$shards" --log-dir "$OUT/logs" \
  --json "$OUT/sparse_scale.json" "$@" > >(tee "$OUT/sparse_scale.log") &
pid=$!
# The driver and its children: the coordinator and the shards.
bench/rss_sample.sh "$pid" "$OUT/rss.csv" 1 &
sampler=$!
rc=0
wait "$pid" || rc=$?
wait "$sampler" || true
python3 bench/rss_summary.py "$OUT/rss.csv" --skip 0 | tee -a "$OUT/sparse_scale.log"
# Each checkpoint's time under its shard's lock (its updates waited) and in
# the fsync and rename after it.
grep -h "checkpoint file written" "$OUT"/logs/ps*.log | sed 's/^[^ ]* //' |
  tee -a "$OUT/sparse_scale.log" || true
if [[ ${KEEP_CHECKPOINTS:-0} != 1 ]]; then rm -rf "$OUT/logs/ckpt"; fi
exit "$rc"
