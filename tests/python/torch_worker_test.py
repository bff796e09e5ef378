#!/usr/bin/python3
"""ferry.torch end to end: PyTorch scripts (examples/torch/train_sequential.py)
are the workers of `ferry local` jobs, 2 workers in PS mode with 2 shards and
in ring mode; the job's exported weights must equal, within 1e-4, those of
a single-process torch run that replays ft.epoch_permutation with the same
global batch, initial weights and momentum SGD. Then the refusals at join: a
model whose tensors differ, an optimizer that differs from the job's, no
coordinator address.

Usage: torch_worker_test.py BIN_DIR SOURCE_DIR [--modes ps,ring]
The ferry package is BIN_DIR/../python (FERRY_PYTHON_DIR overrides it).
Exit 0 pass, 1 fail, 77 skip (no torch, no ferry package in the build, no
Fashion-MNIST).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
STEPS = 25
BATCH = 64
LR, MOMENTUM = 0.05, 0.9
JOB_OPTIMIZER = ["--optimizer", "momentum", "--lr", str(LR), "--momentum", str(MOMENTUM),
                 "--nesterov", "false", "--weight-decay", "0", "--lr-schedule", "constant",
                 "--warmup-steps", "0"]


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def replay(ferry_torch, ft, init_dir, data_dir, seed):
    """The job's first STEPS steps in one process: the global batch of step
    s is positions [s*B, (s+1)*B) of epoch 0's permutation."""
    import torch
    import torch.nn.functional as F
    model, spec = ferry_torch.load_sequential(init_dir)
    x, y = ferry_torch.load_split(data_dir, "train", spec["input"])
    order = ft.epoch_permutation(len(y), seed, 0)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    for s in range(STEPS):
        idx = order[s * BATCH:(s + 1) * BATCH]
        opt.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
    return model.state_dict()


def run_job(bin_dir, source_dir, mode, init_dir, work, data_dir):
    out = os.path.join(work, f"export-{mode}")
    summary = os.path.join(work, f"summary-{mode}.json")
    script = os.path.join(source_dir, "examples", "torch", "train_sequential.py")
    shards = ["--shards", "2"] if mode == "ps" else []
    cmd = [os.path.join(bin_dir, "ferry"), "local", "--mode", mode, "--workers", "2"] + shards + [
           "--init-from", init_dir,
           "--batch", str(BATCH), "--epochs", "1", "--max-steps", str(STEPS),
           "--export", out, "--summary-json", summary, "--log-dir",
           os.path.join(work, f"logs-{mode}"), "--timeout", "240",
           "--worker-command",
           f"/usr/bin/python3 {script} {init_dir} --data-dir {data_dir} "
           f"--lr {LR} --momentum {MOMENTUM} --nesterov 0 --weight-decay 0"] + JOB_OPTIMIZER
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        logs = os.path.join(work, f"logs-{mode}")
        tails = ""
        for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
            if name.endswith(".log"):
                with open(os.path.join(logs, name), errors="replace") as f:
                    tails += f"---- {name}\n" + "".join(f.readlines()[-15:])
        fail(f"{mode}: ferry local exited {run.returncode}\n{run.stderr[-3000:]}\n{tails}")
    with open(summary) as f:
        return json.load(f), out


def check_equivalence(args, ferry_torch, ft, work, data_dir):
    import torch
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
    init_dir = os.path.join(work, "init")
    ferry_torch.export_sequential(model, init_dir, input_shape=[784], classes=10)
    expected = replay(ferry_torch, ft, init_dir, data_dir, seed=1)
    for mode in args.modes.split(","):
        summary, out = run_job(args.bin_dir, args.source_dir, mode, init_dir, work, data_dir)
        steps = summary.get("steps") or summary.get("steps_applied")
        got = ferry_torch.read_safetensors(os.path.join(out, "model.safetensors"))
        worst = 0.0
        for name, want in expected.items():
            if name not in got:
                fail(f"{mode}: the export lacks {name}")
            worst = max(worst, (got[name] - want).abs().max().item())
        print(f"{mode}: {steps} steps, max |ferry.torch - torch| = {worst:.2e}")
        if steps != STEPS:
            fail(f"{mode}: {steps} steps applied, expected {STEPS}: {json.dumps(summary)[:800]}")
        if worst > 1e-4:
            fail(f"{mode}: weights differ from the single-process replay by {worst:.2e}")


def check_refusals(args, ft, work):
    import torch
    from torch import nn
    port_file = os.path.join(work, "coordinator.port")
    coordinator = subprocess.Popen(
        [os.path.join(args.bin_dir, "ferry-server"), "coordinator", "--listen",
         "127.0.0.1:0", "--port-file", port_file, "--mode", "ring", "--model", "784-64-10",
         "--health-port", "-1", "--metrics-port", "-1", "--state-dir",
         os.path.join(work, "state")] + JOB_OPTIMIZER,
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "coordinator.log"), "w"))
    try:
        sys.path.insert(0, os.path.join(args.source_dir, "tests", "testing"))
        from wait_until import wait_until
        wait_until("the coordinator's port file",
                   lambda: os.path.exists(port_file) and open(port_file).read().strip(), 30)
        address = "127.0.0.1:" + open(port_file).read().split()[0]

        def refused(what, make, want):
            try:
                make()
            except ValueError as e:
                if want not in str(e):
                    fail(f"{what}: refused with {e!r}, which does not name {want!r}")
                print(f"refused {what}: {e}")
                return
            fail(f"{what}: not refused")

        wrong = nn.Sequential(nn.Linear(784, 32), nn.ReLU(), nn.Linear(32, 10))
        refused("a model of other shapes",
                lambda: ft.join(wrong, coordinator=address, timeout=30), "0.weight")
        renamed = nn.Sequential()
        renamed.add_module("fc0", nn.Linear(784, 64))
        renamed.add_module("fc1", nn.Linear(64, 10))
        refused("a model of other names",
                lambda: ft.join(renamed, coordinator=address, timeout=30), "fc0.weight")
        named = nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
        refused("a float64 model",
                lambda: ft.join(nn.Sequential(nn.Linear(784, 64), nn.ReLU(),
                                              nn.Linear(64, 10)).double(),
                                coordinator=address, timeout=30), "float64")
        refused("an optimizer that differs from the job's",
                lambda: ft.join(named, torch.optim.SGD(named.parameters(), lr=0.1, momentum=0.9),
                                coordinator=address, timeout=30), "lr")
        refused("Adam with amsgrad",
                lambda: ft.join(named, torch.optim.Adam(named.parameters(), amsgrad=True),
                                coordinator=address, timeout=30), "Adam")
        os.environ.pop("FERRY_COORDINATOR", None)
        refused("no coordinator", lambda: ft.join(named), "coordinator")
        check_nan_refused(ft, named, address)
    finally:
        coordinator.kill()
        coordinator.wait()


class ZerosDataset:
    """Fashion-MNIST's size, every sample a zero image of class 0."""

    def __len__(self):
        return 60000

    def __getitem__(self, i):
        import torch
        return torch.zeros(784), 0


def check_nan_refused(ft, model, address):
    """A NaN gradient refuses the step, naming the tensor; the worker leaves."""
    import torch.nn.functional as F
    job = ft.join(model, coordinator=address, timeout=30)
    try:
        for x, y in job.batches(ZerosDataset()):
            loss = F.cross_entropy(model(x), y) * float("nan")
            job.backward(loss)
            try:
                job.step()
            except ValueError as e:
                if "0.weight" not in str(e) and "0.bias" not in str(e) and "2." not in str(e):
                    fail(f"a NaN gradient was refused with {e!r}, naming no tensor")
                print(f"refused a NaN gradient: {e}")
                return
            fail("a NaN gradient was not refused")
        fail("the job ended before the first batch")
    finally:
        try:
            job.close()
        except Exception as e:  # the worker ended with the refusal
            print(f"closed after the refusal: {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("source_dir")
    ap.add_argument("--modes", default="ps,ring")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    args = ap.parse_args()
    python_dir = os.environ.get("FERRY_PYTHON_DIR") or os.path.join(
        os.path.dirname(os.path.abspath(args.bin_dir)), "python")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: no torch (Debian's python3-torch)")
        return SKIP
    if not os.path.isdir(os.path.join(python_dir, "ferry")):
        print(f"SKIP: no ferry package in {python_dir} (python3-dev and pybind11-dev)")
        return SKIP
    if not os.path.exists(os.path.join(args.data_dir, "train-images-idx3-ubyte.gz")):
        print(f"SKIP: no Fashion-MNIST in {args.data_dir}")
        return SKIP
    sys.path.insert(0, python_dir)
    sys.path.insert(0, os.path.join(args.source_dir, "scripts"))
    import ferry.torch as ft
    import ferry_torch
    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="ferry-torch-worker-")
    try:
        check_refusals(args, ft, work)
        check_equivalence(args, ferry_torch, ft, work, args.data_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
