#!/usr/bin/env python3
"""Plots of a `ferry bench compare` sweep (its results.json) as SVG files.

Usage: bench/plot_compare.py OUT/results.json OUT_DIR

Writes, in OUT_DIR:
  step_time.svg            measured vs predicted seconds per step, per run
  bytes_per_worker.svg     measured vs predicted bytes per step per worker
  shard_load.svg           PS runs: bytes per step per shard (hot spots)
  comm_compute.svg         compute vs exposed communication per step
  predicted_vs_measured.svg  step time, model against measurement (emulated links)
Needs python3-matplotlib (scripts/setup installs it).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def label(run):
    text = f"{run['mode']} {run['model']} W{run['workers']}"
    if run.get("invalid"):
        text = "INVALID " + text
    if run["mode"] in ("ps", "ps-colocated", "hybrid"):
        text += f" S{run['shards']}"
        if run["consistency"] != "sync":
            text += f" {run['consistency']}"
    if run["compression"] != "none":
        text += f" {run['compression']}"
    if run["link_bandwidth"] != "0":
        text += f" @{run['link_bandwidth']}"
    return text


def paired_bars(runs, measured_key, predicted_key, scale, ylabel, title, path):
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(runs) + 2), 4.5))
    xs = range(len(runs))
    width = 0.4
    ax.bar([x - width / 2 for x in xs], [r[measured_key] * scale for r in runs], width,
           label="measured")
    # A loopback baseline has no time prediction (null): no bar.
    ax.bar([x + width / 2 for x in xs],
           [float("nan") if r[predicted_key] is None else r[predicted_key] * scale
            for r in runs], width, label="cost model")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([label(r) for r in runs], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def shard_load(runs, path):
    ps = [r for r in runs if r["mode"] == "ps" and r["shard_bytes_per_step_measured"]]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(ps) + 2), 4.5))
    labelled = set()
    for i, r in enumerate(ps):
        loads = r["shard_bytes_per_step_measured"]
        for s, b in enumerate(loads):
            ax.bar(i + (s - (len(loads) - 1) / 2) * 0.8 / max(1, len(loads)), b / 1e6,
                   0.8 / max(1, len(loads)), color=f"C{s % 10}",
                   label=None if s in labelled else f"ps{s}")
            labelled.add(s)
    ax.set_xticks(list(range(len(ps))))
    ax.set_xticklabels([label(r) for r in ps], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("MB per step per shard (both ways)")
    ax.set_title("PS shard load")
    if ps:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def comm_compute(runs, path):
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(runs) + 2), 4.5))
    xs = list(range(len(runs)))
    compute = [r["compute_seconds_per_step"] * 1e3 for r in runs]
    comm = [r["comm_seconds_measured"] * 1e3 for r in runs]
    other = [max(0.0, r["step_seconds_measured"] * 1e3 - a - b)
             for r, a, b in zip(runs, compute, comm)]
    ax.bar(xs, compute, label="compute")
    ax.bar(xs, comm, bottom=compute, label="exposed communication")
    ax.bar(xs, other, bottom=[a + b for a, b in zip(compute, comm)], label="other (control, waiting)")
    ax.set_xticks(xs)
    ax.set_xticklabels([label(r) for r in runs], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("ms per step (per worker)")
    ax.set_title("Where a step's time goes")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def scatter(runs, path):
    # Loopback baselines calibrate the model; only emulated links compare,
    # and rows that broke a physical check (INVALID) are no evidence.
    runs = [r for r in runs if (r["link_bandwidth"] != "0" or r["link_latency"] != "0")
            and not r.get("invalid")]
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for mode, marker in (("ps", "o"), ("ps-colocated", "v"), ("ring", "s"),
                         ("hybrid", "^"), ("ring-full", "D")):
        sel = [r for r in runs if r["mode"] == mode]
        ax.scatter([r["step_seconds_predicted"] * 1e3 for r in sel],
                   [r["step_seconds_measured"] * 1e3 for r in sel], marker=marker, label=mode)
    top = max([1.0] + [max(r["step_seconds_predicted"], r["step_seconds_measured"]) * 1e3
                       for r in runs]) * 1.1
    ax.plot([0, top], [0, top], "k--", linewidth=0.8, label="model = measured")
    ax.plot([0, top], [0, top * 1.15], ":", color="grey", linewidth=0.8, label="±15%")
    ax.plot([0, top], [0, top * 0.85], ":", color="grey", linewidth=0.8)
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("predicted ms per step")
    ax.set_ylabel("measured ms per step")
    ax.set_title("Cost model vs measurement (emulated links)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        runs = json.load(f)["runs"]
    if not runs:
        sys.exit("no runs to plot")
    out = sys.argv[2]
    paired_bars(runs, "step_seconds_measured", "step_seconds_predicted", 1e3, "ms per step",
                "Step time", f"{out}/step_time.svg")
    paired_bars(runs, "bytes_per_step_per_worker_measured", "bytes_per_step_per_worker_predicted",
                1e-6, "MB per step per worker (sent + received)", "Bytes on the wire per worker",
                f"{out}/bytes_per_worker.svg")
    shard_load(runs, f"{out}/shard_load.svg")
    comm_compute(runs, f"{out}/comm_compute.svg")
    scatter(runs, f"{out}/predicted_vs_measured.svg")


if __name__ == "__main__":
    main()
