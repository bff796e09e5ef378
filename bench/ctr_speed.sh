#!/usr/bin/env bash
# DLRM training speed, ferry sync PS, hybrid and ring vs PyTorch DDP (issue 20's
# targets: ferry sync PS with 2 workers and 2 shards >= 5x DDP with 2 gloo
# ranks, samples/s, same model, data and global batch, tables of >= 1M rows
# in total; hybrid -- tables on the shards, dense layers in the workers'
# ring -- >= 1.0x PS; ring -- every worker holds the tables, the touched
# rows all-gathered -- for comparison). All run
# on this machine, one thread per process, in the same script, for the same
# number of steps after a warm-up; DDP all-reduces every table's full
# gradient each step (bench/torch_dlrm_ddp.py), ferry's workers move only the
# batch's unique rows. Also prints ferry's PS and ring bytes per step per
# worker next to the unique ids per step.
# Usage: bench/ctr_speed.sh [rows] [out_dir]   (default 1300000, out/ctr-speed)
# Env: BIN_DIR (build/bin), STEPS (300), BATCH (128), MODEL (dlrm), SEED (1),
#      WORKERS (2), SHARDS (2), MODES ("ps hybrid ring"), KEEP_DATA=1,
#      SKIP_TORCH=1, SKIP_FERRY=1.
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-1300000}
out=${2:-out/ctr-speed}
bin=${BIN_DIR:-build/bin}
steps=${STEPS:-300}
batch=${BATCH:-128}
model=${MODEL:-dlrm}
seed=${SEED:-1}
workers=${WORKERS:-2}
shards=${SHARDS:-2}
modes=${MODES:-ps hybrid ring}
mkdir -p "$out"
data="$out/data"
if [[ -z "${KEEP_DATA:-}" || ! -f "$data/meta.json" ]]; then
  echo "== ferry data ctr --rows $rows" >&2
  "$bin/ferry" data ctr --out "$data" --rows "$rows" --test-rows 20000 \
    --seed "$seed" --quiet
fi
model_json=""
[[ "$model" != dlrm ]] && model_json="$model"

if [[ -z "${SKIP_FERRY:-}" ]]; then
  for mode in $modes; do
    cmd=("$bin/ferry" local --mode "$mode" --workers "$workers"
         --model "$model" --dataset "criteo:$data"
         --device cpu --epochs 1 --batch "$batch" --seed "$seed"
         --max-steps "$steps" --optimizer adam --lr 0.001
         --lr-schedule constant --warmup-steps 0 --weight-decay 0
         --embedding-optimizer adagrad --embedding-lr 0.05
         --log-dir "$out/ferry-$mode-logs"
         --summary-json "$out/ferry-$mode.json")
    [[ "$mode" != ring ]] && cmd+=(--shards "$shards")
    echo "== ${cmd[*]}" >&2
    "${cmd[@]}" 2> >(tee "$out/ferry-$mode.log" >&2)
  done
fi
if [[ -z "${SKIP_TORCH:-}" ]]; then
  cmd=(/usr/bin/python3 bench/torch_dlrm_ddp.py --data "$data" --ranks "$workers"
       --batch "$batch" --steps "$steps" --seed "$seed")
  [[ -n "$model_json" ]] && cmd+=(--model-json "$model_json")
  echo "== ${cmd[*]}" >&2
  "${cmd[@]}" > "$out/ddp.json" 2> >(tee "$out/ddp.log" >&2)
fi

/usr/bin/python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
res = {}
for name in ("ferry-ps", "ferry-hybrid", "ferry-ring", "ddp"):
    p = os.path.join(out, name + ".json")
    if os.path.exists(p):
        res[name] = json.load(open(p))
for name, label in (("ferry-ps", "ferry sync PS "), ("ferry-hybrid", "ferry hybrid  "),
                    ("ferry-ring", "ferry ring    ")):
    if name not in res:
        continue
    f = res[name]
    by_peer = f.get("worker_bytes_by_peer", {})
    def moved(role):
        c = by_peer.get(role, {})
        return c.get("sent", 0) + c.get("received", 0)
    steps, workers = max(1, f["steps"]), max(1, f.get("workers_seen", 1))
    print(f"{label} {f['samples_per_second']:.0f} samples/s  "
          f"steps {f['steps']}  bytes/step/worker: PS {moved('ps') / steps / workers:.0f}, "
          f"ring {moved('worker') / steps / workers:.0f}  "
          f"unique ids/step {f.get('unique_ids_per_step', 0):.0f}  "
          f"embedding rows {f.get('embedding_rows', 0)}")
if "ddp" in res:
    d = res["ddp"]
    print(f"PyTorch DDP    {d['samples_per_second']:.0f} samples/s  ranks {d['ranks']}  "
          f"table rows {d['embedding_rows']} ({d['table_bytes'] / 2**20:.0f} MiB "
          f"all-reduced per step)")
if "ferry-ps" in res and "ddp" in res:
    r = res["ferry-ps"]["samples_per_second"] / res["ddp"]["samples_per_second"]
    print(f"ferry PS / DDP: {r:.2f}x (target >= 5)")
if "ferry-hybrid" in res and "ddp" in res:
    r = res["ferry-hybrid"]["samples_per_second"] / res["ddp"]["samples_per_second"]
    print(f"ferry hybrid / DDP: {r:.2f}x")
if "ferry-ring" in res and "ddp" in res:
    r = res["ferry-ring"]["samples_per_second"] / res["ddp"]["samples_per_second"]
    print(f"ferry ring / DDP: {r:.2f}x")
if "ferry-ring" in res and "ferry-ps" in res:
    r = res["ferry-ring"]["samples_per_second"] / res["ferry-ps"]["samples_per_second"]
    print(f"ferry ring / PS: {r:.2f}x")
if "ferry-hybrid" in res and "ferry-ps" in res:
    r = res["ferry-hybrid"]["samples_per_second"] / res["ferry-ps"]["samples_per_second"]
    print(f"ferry hybrid / PS: {r:.2f}x (target >= 1.0)")
PY
