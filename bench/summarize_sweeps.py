#!/usr/bin/env python3
"""Repeats of one `ferry bench compare` sweep side by side.

Usage: bench/summarize_sweeps.py OUT1/results.json OUT2/results.json ...

Prints a Markdown table with one row per configuration: the bytes per step
per worker (measured, and its error against the model), the measured step
time of every repeat, the model's step time (mean over the repeats: each
repeat's prediction uses its own measured compute and loopback overhead),
each repeat's step-time error, and the samples/s. INVALID rows (a broken
physical check, docs/comparison.md "Time and throughput") are shown as
INVALID and left out of the error count printed below the table.
"""
import json
import sys


def label(r):
    link = "loopback" if r["link_bandwidth"] == "0" else f'{r["link_bandwidth"]} {r["link_latency"]}'
    shards = "–" if r["mode"] in ("ring", "ring-full") else str(r["shards"])
    if r.get("partitions", 1) > 1:
        shards += f'x{r["partitions"]}'
    return f'| {r["mode"]} | {shards} | {r["compression"]} | {link} |'


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sweeps = []
    for path in sys.argv[1:]:
        with open(path) as f:
            sweeps.append({r["name"]: r for r in json.load(f)["runs"]})
    names = list(sweeps[0])
    print(f"| mode | S | compression | link | MB/step/worker (err) | step ms, {len(sweeps)} runs | "
          "model ms | step err | samples/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    within = total = 0
    for name in names:
        runs = [s[name] for s in sweeps if name in s]
        r0 = runs[0]
        steps = " / ".join(
            ("INVALID " if r.get("invalid") else "") + f'{1e3 * r["step_seconds_measured"]:.1f}'
            for r in runs)
        predicted = [r["step_seconds_predicted"] for r in runs if r["step_seconds_predicted"] is not None]
        model = f"{1e3 * sum(predicted) / len(predicted):.1f}" if predicted else "—"
        errors = []
        for r in runs:
            if r["step_error"] is None:
                continue
            errors.append(f'{100 * r["step_error"]:+.0f}%')
            if not r.get("invalid"):
                total += 1
                within += abs(r["step_error"]) <= 0.15
        sps = " / ".join(f'{r.get("samples_per_second", 0):.0f}' for r in runs)
        print(f'{label(r0)} {r0["bytes_per_step_per_worker_measured"] / 1e6:.3f} '
              f'({100 * r0["bytes_error"]:+.2f}%) | {steps} | {model} | '
              f'{" / ".join(errors) or "—"} | {sps} |')
    if total:
        print(f"\nStep time within ±15 % of the model: {within} of {total} valid emulated rows.")


if __name__ == "__main__":
    main()
