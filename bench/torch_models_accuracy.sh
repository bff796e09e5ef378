#!/usr/bin/env bash
# PyTorch models trained as ferry workers to a stated accuracy, in PS mode
# (2 shards) and ring mode, 2 workers each, under ferry local; the workers
# evaluate (job.evaluate, --eval-samples) and the job exports its weights,
# which torch then loads strictly and scores again:
#   - examples/torch/train_resnet.py: torchvision's ResNet-18 (32x32 stem)
#     on the first RESNET_SAMPLES Fashion-MNIST training images padded to
#     32x32, RESNET_EPOCHS epochs, batch 64, momentum SGD 0.05/0.9, scored
#     on the first 2000 test images;
#   - examples/torch/train_transformer.py: a 2-layer transformer encoder
#     (d=128, 4 heads) on 8192 generated sequences of 32 tokens (vocab
#     256), 3 epochs, batch 64, AdamW 1e-3 in two groups with a cosine
#     schedule, scored on 2048 more.
# Prints one line per run: the job's final evaluation (the worker's test
# pass on the final weights), the export's accuracy as torch computes it
# (they must agree), the wall time and the throughput.
# Usage: bench/torch_models_accuracy.sh [BIN_DIR]   (default build/bin)
# Env: RESNET_SAMPLES (8000), RESNET_EPOCHS (1), MODELS ("resnet18 transformer").
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/bin}
py=/usr/bin/python3
$py -c 'import torch, torchvision' 2>/dev/null ||
  { echo "python3-torch / python3-torchvision missing: scripts/setup --with-peers" >&2; exit 1; }
[[ -x $bin/ferry ]] || { echo "no $bin/ferry: run scripts/build" >&2; exit 1; }
out=$(mktemp -d /tmp/ferry-torch-accuracy.XXXXXX)
resnet_samples=${RESNET_SAMPLES:-8000}
resnet_epochs=${RESNET_EPOCHS:-1}
export PYTHONPATH="$(cd "$bin/.." && pwd)/python${PYTHONPATH:+:$PYTHONPATH}"

run() {  # model mode: one ferry local job, then torch on its export
  local model=$1 mode=$2 tag="$1-$2" shards=() job worker check shape
  [[ $mode == ps ]] && shards=(--shards 2)
  if [[ $model == resnet18 ]]; then
    job=(--dataset "external:$resnet_samples" --batch 64 --epochs "$resnet_epochs")
    worker="examples/torch/train_resnet.py --samples $resnet_samples --eval-samples 2000"
    check=(examples/torch/train_resnet.py --samples "$resnet_samples" --eval-samples 2000
      --evaluate "$out/$tag")
  else
    shape="--samples 8192 --seq 32 --vocab 256 --d-model 128 --heads 4 --layers 2"
    job=(--dataset external:8192 --batch 64 --epochs 3)
    worker="examples/torch/train_transformer.py $shape --eval-samples 2048 --optimizer adamw --lr 1e-3 --weight-decay 0.01 --warmup-steps 20 --cosine-steps 384"
    check=(examples/torch/train_transformer.py $shape --eval-samples 2048 --evaluate "$out/$tag")
  fi
  local began=$SECONDS
  "$bin/ferry" local --mode "$mode" --workers 2 "${shards[@]}" --model external "${job[@]}" \
    --export "$out/$tag" --summary-json "$out/$tag.json" --log-dir "$out/logs-$tag" \
    --timeout 3600 --worker-command "$py $worker" >"$out/$tag.log" 2>&1 ||
    { echo "$tag: ferry local failed (see $out/$tag.log)" >&2; tail -20 "$out/$tag.log" >&2; exit 1; }
  local wall=$((SECONDS - began)) torch_acc
  torch_acc=$($py "${check[@]}" | $py -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["test_accuracy"])')
  $py - "$out/$tag.json" "$tag" "$wall" "$torch_acc" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
final = [e for e in s.get("evals", []) if e.get("final")]
if not final:
    sys.exit(f"{sys.argv[2]}: no final evaluation in the summary")
f = final[-1]
print(f"{sys.argv[2]:18} final test accuracy {f['test_accuracy']:.4f} loss {f['test_loss']:.4f} "
      f"(step {f['step']}; export scored by torch: {sys.argv[4]}), "
      f"{s['samples_per_second']:.1f} samples/s, wall {sys.argv[3]} s, "
      f"evaluations {[(e['epoch'], round(e['test_accuracy'], 4)) for e in s['evals']]}")
EOF
}

for model in ${MODELS:-resnet18 transformer}; do
  for mode in ps ring; do
    run "$model" "$mode"
  done
done
rm -rf "$out"
