#!/usr/bin/env python3
"""Where a training step's time goes, across a job's processes.

Reads the step traces a job wrote with FERRY_STEP_TRACE=DIR set
(common/step_trace.h: one file per process, CLOCK_MONOTONIC nanoseconds,
one clock for every process of a host) and prints:

  1. each worker's step cycle (its `begun` of step s+1 minus that of step
     s): mean, median, p90, p99, max, and the slowest steps. A mean far
     above the median points at rare stalls (a timeout, a backoff, a
     checkpoint) rather than at the common step.
  2. the median time of every event of a step relative to the moment the
     last worker handed its gradient over (`computed`), per process and
     shard: the order in which the step's pushes, commits, update, pulls
     and the next step's start happen.

Usage:
  FERRY_STEP_TRACE=/tmp/trace ferry local --mode ps --workers 2 --shards 2 ...
  bench/step_timeline.py /tmp/trace [--skip 20] [--slowest 5] [--json]

--skip drops the first steps (start-up) from both tables, and the last
step (no next one to measure against). Events without a step ("?") belong to the step the same process
began last.
"""
import argparse
import glob
import json
import os
import statistics
import sys
from collections import defaultdict


def read_traces(directory):
    """{label: [(ns, event, step, arg)]} from every steptrace-*.txt."""
    traces = {}
    paths = sorted(glob.glob(os.path.join(directory, "steptrace-*.txt")))
    if not paths:
        raise SystemExit(f"step_timeline: no steptrace-*.txt in {directory} "
                         "(run the job with FERRY_STEP_TRACE set to it)")
    for path in paths:
        with open(path) as f:
            header = f.readline().split()
            if header[:4] != ["#", "ferry", "step", "trace:"]:
                raise SystemExit(f"step_timeline: {path} is not a step trace")
            fields = dict(zip(header[4::2], header[5::2]))
            label = fields.get("names", "-")
            if label == "-":
                label = "pid" + fields.get("pid", "?")
            if fields.get("dropped", "0") != "0":
                print(f"warning: {path} dropped {fields['dropped']} events",
                      file=sys.stderr)
            events = []
            last_begun = None
            for line in f:
                ns, event, step, arg = line.split()
                step = last_begun if step == "?" else int(step)
                if event == "begun":
                    last_begun = step
                if step is None:
                    continue
                events.append((int(ns), event, step, int(arg)))
            traces[label] = events
    return traces


def percentile(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1,
                             int(q * len(sorted_values)))]


def cycles(traces, skip, slowest):
    """Per worker: the distribution of begun-to-begun times (ms)."""
    out = {}
    for label, events in traces.items():
        begun = {step: ns for ns, event, step, _ in events if event == "begun"}
        if len(begun) < 2:
            continue
        first, last = min(begun) + skip, max(begun)
        gaps = [((begun[s + 1] - begun[s]) / 1e6, s)
                for s in range(first, last) if s in begun and s + 1 in begun]
        if not gaps:
            continue
        values = sorted(g for g, _ in gaps)
        out[label] = {
            "steps": len(values),
            "mean_ms": statistics.mean(values),
            "median_ms": statistics.median(values),
            "p90_ms": percentile(values, 0.90),
            "p99_ms": percentile(values, 0.99),
            "max_ms": values[-1],
            "slowest": [{"step": s, "ms": g}
                        for g, s in sorted(gaps, reverse=True)[:slowest]],
        }
    return out


def phases(traces, skip):
    """Median offset (ms) of each (event, process, shard) from the step's
    last `computed`."""
    by_step = defaultdict(list)  # step -> [(ns, key)]
    for label, events in traces.items():
        for ns, event, step, arg in events:
            key = (event, label, arg)
            by_step[step].append((ns, key))
            if event == "begun":  # the next step's start, seen from step-1
                by_step[step - 1].append((ns, ("next_begun", label, arg)))
    steps = sorted(s for s in by_step
                   if any(k[0] == "computed" for _, k in by_step[s]))
    if len(steps) <= skip + 1:
        return []
    offsets = defaultdict(list)
    for step in steps[skip:-1]:
        computed = [ns for ns, k in by_step[step] if k[0] == "computed"]
        reference = max(computed)
        seen = set()
        for ns, key in sorted(by_step[step]):
            if key in seen:  # the first of repeated events (retries)
                continue
            seen.add(key)
            offsets[key].append((ns - reference) / 1e6)
    rows = [{"event": k[0], "process": k[1], "shard": k[2],
             "median_ms": statistics.median(v), "steps": len(v)}
            for k, v in offsets.items()]
    rows.sort(key=lambda r: r["median_ms"])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("directory", help="the FERRY_STEP_TRACE directory")
    parser.add_argument("--skip", type=int, default=20,
                        help="first steps left out (start-up; default 20)")
    parser.add_argument("--slowest", type=int, default=5,
                        help="slowest steps listed per worker (default 5)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object instead of tables")
    args = parser.parse_args()
    traces = read_traces(args.directory)
    result = {"cycles": cycles(traces, args.skip, args.slowest),
              "phases": phases(traces, args.skip)}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    if not result["cycles"]:
        raise SystemExit("step_timeline: no worker began two steps "
                         f"after the first {args.skip}")
    print("step cycle per worker (begun to next begun), ms")
    for label, c in result["cycles"].items():
        slow = " ".join(f"{x['ms']:.1f}@{x['step']}" for x in c["slowest"])
        print(f"  {label:28s} steps {c['steps']:5d}  mean {c['mean_ms']:7.2f}"
              f"  median {c['median_ms']:6.2f}  p90 {c['p90_ms']:6.2f}"
              f"  p99 {c['p99_ms']:7.2f}  max {c['max_ms']:8.2f}"
              f"  slowest {slow}")
    print("\nmedian time of each event from the step's last `computed`, ms"
          " (over the steps it occurred in)")
    for r in result["phases"]:
        shard = f" shard {r['shard']}" if r["shard"] >= 0 else ""
        print(f"  {r['median_ms']:8.3f}  {r['event']:15s} {r['process']}"
              f"{shard}  ({r['steps']} steps)")


if __name__ == "__main__":
    main()
