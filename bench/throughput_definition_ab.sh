#!/usr/bin/env bash
# Issue 37's throughput definitions side by side on the same runs: 600-step
# 2-worker ferry local jobs (PS with 2 shards, ring, twice each); prints the
# window figure (the summary's samples_per_second: steps after the first
# over the span of their own end times) and what the old definition (every
# applied sample over the span of the coordinator's commit records) gives
# for the same run, from its metrics lines.
# Usage: bench/throughput_definition_ab.sh   (after scripts/build)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for mode in ps ring ps ring; do
  extra=""; [[ $mode == ps ]] && extra="--shards 2"
  build/bin/ferry local --mode $mode --workers 2 $extra --model 784-256-128-10 --epochs 1 --max-steps 600 --device cpu \
    --summary-json $out/s.json --metrics-jsonl $out/m.jsonl --log-dir $out/logs >/dev/null 2>&1
  python3 - "$out" "$mode" <<'PY'
import json,sys
out,mode=sys.argv[1],sys.argv[2]
s=json.load(open(out+'/s.json'))
lines=[json.loads(l) for l in open(out+'/m.jsonl') if '"kind":"step"' in l or '"kind": "step"' in l]
lines=[l for l in lines if l.get('kind')=='step']
total=sum(l['samples'] for l in lines)
c0=lines[0]['elapsed_seconds']; c1=lines[-1]['elapsed_seconds']
old=total/(c1-c0)
print(f"{mode}: new {s['samples_per_second']:.0f} samples/s (window {s['window_seconds']:.3f} s, startup {s['startup_seconds']:.2f} s); old definition on the same run {old:.0f} (commits {c0:.3f}..{c1:.3f} s, ends {lines[0]['ended_seconds']:.3f}..{lines[-1]['ended_seconds']:.3f} s); old/new {old/s['samples_per_second']:.3f}")
PY
  rm -f $out/m.jsonl
done
