#!/usr/bin/env bash
# DLRM accuracy, ferry vs PyTorch (issue 20's target: ferry's test AUC within
# 0.01 of PyTorch's and within 0.03 of the generator's teacher_test_auc).
# Generates CTR data with `ferry data ctr`, trains the same DLRM on the same
# files with `ferry-worker --standalone` and bench/torch_dlrm.py (one thread
# each, the same epochs, batch, dense optimizer and row-wise Adagrad for the
# embeddings), and prints both AUCs, log losses, samples/s and the teacher's
# AUC. Not a test: 1M rows take ~5-10 minutes per epoch on the 2-core machine.
# Usage: bench/ctr_accuracy.sh [rows] [out_dir]   (default 1000000, out/ctr)
# Env: BIN_DIR (default build/bin), TEST_ROWS (default rows / 5), SEED (1),
#      EPOCHS (1), BATCH (128), MODEL (dlrm: the preset; or a DLRM JSON),
#      OPTIMIZER (adam), LR (0.001), EMB_LR (0.05), VOCAB (comma-separated
#      26 sizes; default ferry's Criteo-like ones), ZIPF (1.1),
#      SKIP_TORCH=1, SKIP_FERRY=1, KEEP_DATA=1 (reuse OUT/data if present).
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-1000000}
out=${2:-out/ctr}
bin=${BIN_DIR:-build/bin}
test_rows=${TEST_ROWS:-$((rows / 5))}
seed=${SEED:-1}
epochs=${EPOCHS:-1}
batch=${BATCH:-128}
model=${MODEL:-dlrm}
optimizer=${OPTIMIZER:-adam}
lr=${LR:-0.001}
emb_lr=${EMB_LR:-0.05}
zipf=${ZIPF:-1.1}
mkdir -p "$out"
data="$out/data"
if [[ -z "${KEEP_DATA:-}" || ! -f "$data/meta.json" ]]; then
  gen=("$bin/ferry" data ctr --out "$data" --rows "$rows" --test-rows "$test_rows"
       --seed "$seed" --zipf "$zipf" --quiet)
  [[ -n "${VOCAB:-}" ]] && gen+=(--vocab-sizes "$VOCAB")
  echo "== ${gen[*]}" >&2
  "${gen[@]}"
fi
model_json=""
[[ "$model" != dlrm ]] && model_json="$model"

if [[ -z "${SKIP_FERRY:-}" ]]; then
  cmd=("$bin/ferry-worker" --standalone --model "$model" --dataset "criteo:$data"
       --device cpu --threads 1 --epochs "$epochs" --batch "$batch" --seed "$seed"
       --optimizer "$optimizer" --lr "$lr" --lr-schedule constant --warmup-steps 0
       --weight-decay 0 --embedding-optimizer adagrad --embedding-lr "$emb_lr"
       --summary-json "$out/ferry.json")
  echo "== ${cmd[*]}" >&2
  "${cmd[@]}" 2> >(tee "$out/ferry.log" >&2)
fi
if [[ -z "${SKIP_TORCH:-}" ]]; then
  cmd=(/usr/bin/python3 bench/torch_dlrm.py --data "$data" --epochs "$epochs"
       --batch "$batch" --seed "$seed" --optimizer "$optimizer" --lr "$lr"
       --embedding-optimizer "${TORCH_EMB_OPT:-rowwise-adagrad}" --embedding-lr "$emb_lr")
  [[ -n "$model_json" ]] && cmd+=(--model-json "$model_json")
  echo "== ${cmd[*]}" >&2
  "${cmd[@]}" > "$out/torch.json" 2> >(tee "$out/torch.log" >&2)
fi

/usr/bin/python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
meta = json.load(open(os.path.join(out, "data", "meta.json")))
teacher = meta["teacher_test_auc"]
print(f"teacher       test AUC {teacher:.4f}  logloss {meta['teacher_test_logloss']:.4f}")
res = {}
for name in ("ferry", "torch"):
    path = os.path.join(out, name + ".json")
    if not os.path.exists(path):
        continue
    s = json.load(open(path))
    res[name] = s
    print(f"{name:<13} test AUC {s['test_auc']:.4f}  logloss {s['test_logloss']:.4f}  "
          f"{s['samples_per_second']:.0f} samples/s  "
          f"embedding rows {s.get('embedding_rows', 0)}")
if "ferry" in res:
    f = res["ferry"]["test_auc"]
    print(f"ferry - teacher: {f - teacher:+.4f} (target >= -0.03)")
    if "torch" in res:
        t = res["torch"]["test_auc"]
        print(f"ferry - torch:   {f - t:+.4f} (target within 0.01); "
              f"speed ratio ferry/torch {res['ferry']['samples_per_second'] / res['torch']['samples_per_second']:.2f}")
PY
