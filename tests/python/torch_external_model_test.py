#!/usr/bin/python3
"""A PyTorch model that is not ferry's as the model of ferry local jobs
(--model external --dataset external:N): examples/torch/train_transformer.py
(a transformer encoder on generated tokens), 2 workers, in PS mode with 2
shards and in ring mode. The first worker defines the job's tensors and
starting values; the job's export (torch's names) must load strictly into
the script's model and equal, within 1e-4, a single-process torch run that
replays ft.epoch_permutation with the same global batch and momentum SGD.
Then what join refuses: a second model that differs (named by its first
differing tensor), a dataset of another size, a model with buffers.

Usage: torch_external_model_test.py BIN_DIR SOURCE_DIR [--modes ps,ring]
The ferry package is BIN_DIR/../python (FERRY_PYTHON_DIR overrides it).
Exit 0 pass, 1 fail, 77 skip (no torch, no ferry package in the build).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
SAMPLES = 512
STEPS = 16
BATCH = 32
SEED = 1  # ferry local's default --seed: the job's sample order
LR, MOMENTUM = 0.05, 0.9
JOB_OPTIMIZER = ["--optimizer", "momentum", "--lr", str(LR), "--momentum", str(MOMENTUM),
                 "--nesterov", "false", "--weight-decay", "0", "--lr-schedule", "constant",
                 "--warmup-steps", "0"]
SCRIPT_OPTIMIZER = f"--lr {LR} --momentum {MOMENTUM} --nesterov 0 --weight-decay 0"


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def replay(example, ft):
    """The job's first STEPS steps in one process: the global batch of step
    s is positions [s*B, (s+1)*B) of epoch 0's permutation."""
    import torch
    import torch.nn.functional as F
    args = example.arguments(["--samples", str(SAMPLES)])
    model = example.build(args)
    x, y = example.token_data(args.samples, args.seq, args.vocab, args.seed)
    order = ft.epoch_permutation(SAMPLES, SEED, 0)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    for s in range(STEPS):
        idx = order[s * BATCH:(s + 1) * BATCH]
        opt.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
    return model


def run_job(args, mode, work):
    out = os.path.join(work, f"export-{mode}")
    summary = os.path.join(work, f"summary-{mode}.json")
    logs = os.path.join(work, f"logs-{mode}")
    script = os.path.join(args.source_dir, "examples", "torch", "train_transformer.py")
    shards = ["--shards", "2"] if mode == "ps" else []
    cmd = [os.path.join(args.bin_dir, "ferry"), "local", "--mode", mode, "--workers", "2"] + \
        shards + ["--model", "external", "--dataset", f"external:{SAMPLES}",
                  "--batch", str(BATCH), "--epochs", "1", "--max-steps", str(STEPS),
                  "--export", out, "--summary-json", summary, "--log-dir", logs,
                  "--timeout", "240", "--worker-command",
                  f"/usr/bin/python3 {script} --samples {SAMPLES} {SCRIPT_OPTIMIZER}"] + \
        JOB_OPTIMIZER
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        tails = ""
        for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
            if name.endswith(".log"):
                with open(os.path.join(logs, name), errors="replace") as f:
                    tails += f"---- {name}\n" + "".join(f.readlines()[-15:])
        fail(f"{mode}: ferry local exited {run.returncode}\n{run.stderr[-3000:]}\n{tails}")
    if "no test evaluation (the model is the script's)" not in run.stderr:
        fail(f"{mode}: ferry local's summary line does not say the model is not "
             f"evaluated:\n{run.stderr[-1500:]}")
    with open(summary) as f:
        return json.load(f), out


def check_equivalence(args, example, ferry_torch, ft, work):
    expected = replay(example, ft)
    want = expected.state_dict()
    for mode in args.modes.split(","):
        summary, out = run_job(args, mode, work)
        steps = summary.get("steps") or summary.get("steps_applied")
        got = ferry_torch.read_safetensors(os.path.join(out, "model.safetensors"))
        # The export is the script's model, by torch's names: it loads strictly.
        model = example.build(example.arguments(["--samples", str(SAMPLES)]))
        try:
            model.load_state_dict(got, strict=True)
        except RuntimeError as e:
            fail(f"{mode}: the export does not load into the script's model: {e}")
        worst = max((got[name] - value).abs().max().item() for name, value in want.items())
        print(f"{mode}: {steps} steps, {len(got)} tensors, "
              f"max |ferry.torch - torch| = {worst:.2e}")
        if steps != STEPS:
            fail(f"{mode}: {steps} steps applied, expected {STEPS}: {json.dumps(summary)[:800]}")
        if worst > 1e-4:
            fail(f"{mode}: weights differ from the single-process replay by {worst:.2e}")


def check_refusals(args, example, ft, work):
    import torch
    from torch import nn
    port_file = os.path.join(work, "coordinator.port")
    coordinator = subprocess.Popen(
        [os.path.join(args.bin_dir, "ferry-server"), "coordinator", "--listen",
         "127.0.0.1:0", "--port-file", port_file, "--mode", "ring", "--model", "external",
         "--dataset", "external:64", "--health-port", "-1", "--metrics-port", "-1",
         "--state-dir", os.path.join(work, "state")] + JOB_OPTIMIZER,
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "coordinator.log"), "w"))
    try:
        sys.path.insert(0, os.path.join(args.source_dir, "tests", "testing"))
        from wait_until import wait_until
        wait_until("the coordinator's port file",
                   lambda: os.path.exists(port_file) and open(port_file).read().strip(), 30)
        address = "127.0.0.1:" + open(port_file).read().split()[0]

        def refused(what, make, want, error=ValueError):
            try:
                make()
            except error as e:
                if want not in str(e):
                    fail(f"{what}: refused with {e!r}, which does not name {want!r}")
                print(f"refused {what}: {e}")
                return
            fail(f"{what}: not refused")

        # Refused before anything is defined: a model with buffers.
        refused("a model with buffers",
                lambda: ft.join(nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)),
                                coordinator=address, timeout=30), "buffers")
        # The first worker defines the model; a second one that differs is
        # refused, named by its first differing tensor.
        first_args = example.arguments(["--samples", "64"])
        first = example.build(first_args)
        job = ft.join(first, coordinator=address, timeout=30)
        try:
            wider = example.build(example.arguments(["--samples", "64", "--d-model", "48"]))
            refused("a second model of other shapes",
                    lambda: ft.join(wider, coordinator=address, timeout=30), "position")
            x, y = example.token_data(100, first_args.seq, first_args.vocab, 0)
            refused("a dataset of another size",
                    lambda: next(iter(job.batches(torch.utils.data.TensorDataset(x, y)))),
                    "external:64")
            # The first worker holds the job's starting values: its own.
            again = example.build(first_args)
            for (name, mine), theirs in zip(again.state_dict().items(),
                                            job.state_dict().values()):
                if not torch.equal(mine, theirs):
                    fail(f"the job's starting value of {name} is not the defining model's")
        finally:
            job.close()
    finally:
        coordinator.kill()
        coordinator.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("source_dir")
    ap.add_argument("--modes", default="ps,ring")
    args = ap.parse_args()
    python_dir = os.environ.get("FERRY_PYTHON_DIR") or os.path.join(
        os.path.dirname(os.path.abspath(args.bin_dir)), "python")
    try:
        import torch
    except ImportError:
        print("SKIP: no torch (Debian's python3-torch)")
        return SKIP
    if not os.path.isdir(os.path.join(python_dir, "ferry")):
        print(f"SKIP: no ferry package in {python_dir} (python3-dev and pybind11-dev)")
        return SKIP
    sys.path.insert(0, python_dir)
    sys.path.insert(0, os.path.join(args.source_dir, "scripts"))
    sys.path.insert(0, os.path.join(args.source_dir, "examples", "torch"))
    import ferry.torch as ft
    import ferry_torch
    import train_transformer as example
    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="ferry-torch-external-")
    try:
        check_refusals(args, example, ft, work)
        check_equivalence(args, example, ferry_torch, ft, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
