#!/usr/bin/env bash
# The GPU check, run ON the lent device machine from the repository root
# after scripts/device-bundle (see there): the CUDA tests, the step speed of
# the ConvNet against PyTorch on the same GPU (fp32, TF32 off), training in
# one process, in a 2-stage pipeline and in 2-worker PS and ring jobs. Writes
# $OUT/log.txt, the tests' XML and the summaries. About 2 minutes on an H200.
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
T0=$(date +%s)
el() { echo "=== +$(( $(date +%s) - T0 ))s $*"; }
el start
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
mkdir -p /tmp/b && tar -xJf device_bundle/ferry.tar.xz -C /tmp/b
CUB=$(find /usr/local /opt -name 'libcublas.so.13*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=/tmp/b/lib:$(dirname "$CUB")
B=/tmp/b/bin
ldd $B/ferry-worker | grep -i "not found" && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/tmp/b/fallback
el tests
for t in "ferry_compute_tests Cuda*:Cublas*" "ferry_model_tests *Cuda*" "ferry_pipeline_tests *Cuda*"; do
  set -- $t
  timeout 120 $B/$1 --gtest_filter="$2" --gtest_output=xml:$OUT/$1.xml 2>&1 | grep -vE "^\[ +(RUN|OK) " ; echo "rc=${PIPESTATUS[0]}"
done
el steps
for m in 784-1024-1024-10; do for b in 128 1024; do
  timeout 60 $B/ferry-model-step --model $m --batch $b --steps 50 --warmup 5 --device cuda
  timeout 60 python3 bench/torch_convnet.py --model $m --batch $b --steps 50 --warmup 5 --device cuda
done; done
for b in 128 1024; do
  timeout 60 $B/ferry-model-step --model convnet --batch $b --steps 50 --warmup 5 --device cuda
  timeout 60 python3 bench/torch_convnet.py --model convnet --batch $b --steps 50 --warmup 5 --device cuda
done
timeout 60 $B/ferry-model-step --model convnet --batch 128 --steps 20 --device cuda --per-layer
el train
D=device_bundle/fmnist
timeout 100 $B/ferry-worker --standalone --device cuda --model convnet --data-dir $D --epochs 2 --summary-json $OUT/convnet_cuda.json 2>&1 | tail -4
timeout 60 $B/ferry-worker --standalone --device cuda --model convnet --data-dir $D --epochs 1 --pipeline-stages 2 --micro-batches 4 --summary-json $OUT/convnet_cuda_p2.json 2>&1 | tail -3
for m in ps ring; do
  el local $m
  timeout 100 $B/ferry local --mode $m --workers 2 --shards 2 --model convnet --device cuda --data-dir $D --epochs 1 --summary-json $OUT/local_$m.json 2>&1 | tail -4
done
el done
