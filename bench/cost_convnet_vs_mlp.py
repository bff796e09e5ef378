#!/usr/bin/env python3
"""The cost model's PS-vs-ring picture for the MLP and the ConvNet, with a
fixed global batch: each worker's compute is the whole batch's compute / W.
Usage: bench/cost_convnet_vs_mlp.py BIN_DIR MLP_COMPUTE_S CONVNET_COMPUTE_S
(the compute of one forward + backward of the whole batch of 128 on one
thread, e.g. from ferry-model-step). Prints a Markdown table."""
import json
import subprocess
import sys

bin_dir, mlp_compute, conv_compute = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
print("| model | link | W (= S) | compute/worker | PS step | ring step | "
      "ring speedup | exposed comm, PS / ring |")
print("|---|---|---|---|---|---|---|---|")
for model, compute in (("fashion-mlp", mlp_compute), ("convnet", conv_compute)):
    for link in ("1Gbit", "10Gbit"):
        for workers in (2, 4, 8):
            per_worker = compute / workers
            out = subprocess.run(
                [f"{bin_dir}/ferry", "cost", "--model", model, "--workers", str(workers),
                 "--shards", str(workers), "--bandwidth", link,
                 "--compute", f"{per_worker * 1e3:.3f}ms", "--json"],
                check=True, capture_output=True, text=True).stdout
            d = json.loads(out)
            ps, ring = d["ps"], d["ring"]
            print(f"| {model} | {link} | {workers} | {per_worker * 1e3:.1f} ms | "
                  f"{ps['step_seconds'] * 1e3:.1f} ms | {ring['step_seconds'] * 1e3:.1f} ms | "
                  f"{ps['step_seconds'] / ring['step_seconds']:.2f}x | "
                  f"{100 * ps['exposed_comm_seconds'] / ps['step_seconds']:.0f} % / "
                  f"{100 * ring['exposed_comm_seconds'] / ring['step_seconds']:.0f} % |")
