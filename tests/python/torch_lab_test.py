#!/usr/bin/python3
"""The comparison lab measures a PyTorch model: `ferry bench compare
--worker-command` runs the example transformer script as every run's worker
in PS (2 shards), PS with the shards inside the scripts' processes
(ps-colocated) and ring mode, and the cost model predicts from the job's
own tensors (the run's export), so the bytes each worker moved per step
equal the closed forms of the script's model: PS the model each way,
colocated PS the half held by the other process each way, ring 2(N-1)/N
of it each way.

Usage: torch_lab_test.py BIN_DIR SOURCE_DIR
Exit 0 pass, 1 fail, 77 skip (no torch, no ferry package in the build).
"""
import json
import os
import subprocess
import sys

from torch_jobs import SKIP, fail, ferry_package_dir, in_work_dir, parse_args


def script_params(source_dir):
    """The example transformer's element count (parameters and buffers: the
    job's flat buffer), as torch builds it."""
    sys.path.insert(0, os.path.join(source_dir, "examples", "torch"))
    import train_transformer
    model = train_transformer.build(train_transformer.arguments([]))
    return (sum(p.numel() for p in model.parameters()) +
            sum(b.numel() for b in model.buffers()))


def main():
    args = parse_args(__doc__)
    python_dir = ferry_package_dir(args)
    if python_dir is None:
        return SKIP
    os.environ["PYTHONPATH"] = python_dir
    sys.path.insert(0, python_dir)
    elements = script_params(args.source_dir)
    script = os.path.join(args.source_dir, "examples", "torch", "train_transformer.py")

    def body(work):
        out = os.path.join(work, "lab")
        cmd = [os.path.join(args.bin_dir, "ferry"), "bench", "compare",
               "--worker-command",
               f"/usr/bin/python3 {script} --samples {{samples}} --lr {{lr}} --momentum 0.9 "
               "--nesterov 0 --weight-decay 0",
               "--model-name", "transformer", "--modes", "ps,ring,ps-colocated", "--workers", "2",
               "--shards", "2", "--bandwidth", "0", "--latency", "0", "--batch", "32",
               "--warmup-steps", "2", "--steps", "6", "--run-timeout", "240", "--out", out]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            fail(f"ferry bench compare exited {done.returncode}\n{done.stdout[-2000:]}\n"
                 f"{done.stderr[-2000:]}")
        with open(os.path.join(out, "results.json")) as f:
            runs = json.load(f)["runs"]
        if sorted(r["mode"] for r in runs) != ["ps", "ps-colocated", "ring"]:
            fail(f"expected one PS, one colocated PS and one ring run, got "
                 f"{[r['mode'] for r in runs]}")
        for r in runs:
            print(json.dumps({k: r[k] for k in ("name", "model_params", "samples_per_second",
                                                "bytes_per_step_per_worker_measured",
                                                "bytes_per_step_per_worker_predicted")}))
            if r["model"] != "transformer" or r["model_params"] != elements:
                fail(f"{r['name']}: the lab's model is {r['model']} of {r['model_params']} "
                     f"elements, the script's has {elements}")
            model_bytes = 4 * elements
            workers = 2
            closed = {"ps": 2 * model_bytes,
                      "ps-colocated": 2 * model_bytes * (workers - 1) / workers,
                      "ring": 2 * (2 * (workers - 1) / workers) * model_bytes}[r["mode"]]
            if abs(r["bytes_per_step_per_worker_predicted"] - closed) > 0.01 * closed:
                fail(f"{r['name']}: predicted {r['bytes_per_step_per_worker_predicted']} B per "
                     f"step, the closed form is {closed}")
            if abs(r["bytes_error"]) > 0.02:
                fail(f"{r['name']}: measured bytes off the prediction by {r['bytes_error']:+.1%}")
            if r["test_accuracy"] is not None:
                fail(f"{r['name']}: an accuracy {r['test_accuracy']} for a model nobody scored")
            if r["invalid"]:
                fail(f"{r['name']}: marked invalid: {r['invalid']}")
        with open(os.path.join(out, "results.md")) as f:
            if "transformer" not in f.read():
                fail("results.md does not name the script's model")

    return in_work_dir("ferry-torch-lab-", body)


if __name__ == "__main__":
    sys.exit(main())
