#!/usr/bin/python3
"""The training-loop practices of a real PyTorch script work on ferry.torch
workers, in PS (shard processes, and shards inside the workers) and ring
mode: mixed precision (torch.autocast("cpu",
bfloat16)), gradient accumulation over micro-batches (job.no_sync()),
opt.zero_grad(set_to_none=True) before every step (in even steps at the
loop's top, in odd ones at the bottom of the step before), a layer used
only in even steps, weight tying (the output layer shares the embedding's
weight), and a DataLoader with worker processes (an evaluation every 8
steps, forked beside ferry's threads). Each job must finish without a
traceback or a hang; its weights must equal, within 1e-4, a single-process
replay of the same loop (the job's order from ft.epoch_permutation, the same
micro-batches under the same autocast), and the PS and ring jobs each other.
A parameter that no worker used in a step keeps .grad None after
zero_grad(set_to_none=True): torch's SGD skips it (no momentum step), and
so must the job (its workers declare it absent, and the shards or the ring
members skip it); the replay is plain torch (docs/pytorch.md, "API").

Usage: torch_loop_practices_test.py BIN_DIR SOURCE_DIR
Exit 0 pass, 1 fail, 77 skip (no torch, no ferry package in the build).
"""
import json
import os
import sys

from torch_jobs import SKIP, fail, ferry_package_dir, in_work_dir, parse_args, run_ferry_local

SAMPLES = 512
BATCH = 32      # global: 16 samples a worker, two micro-batches of 8
EPOCHS = 2      # 32 steps
SEED = 7
LR = 0.1
MOMENTUM = 0.9

# The model and the loop, shared by the workers and the replay.
COMMON = r"""
import torch, torch.nn as nn, torch.nn.functional as F
V, D = 64, 16

class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.mid = nn.Linear(D, D)
        self.sometimes = nn.Linear(D, D)   # used in even steps only
        self.out = nn.Linear(D, V)
        self.out.weight = self.emb.weight  # tied

    def forward(self, x, use_sometimes):
        h = torch.tanh(self.mid(self.emb(x)))
        if use_sometimes:
            h = h + self.sometimes(h)
        return self.out(h)

def make(samples):
    torch.manual_seed(0)
    x = torch.randint(0, V, (samples,))
    return Tied(), torch.utils.data.TensorDataset(x, (x * 7 + 3) %% V)

def micro_losses(model, xb, yb, step):
    # Two micro-batches, each mean loss halved (their mean), under autocast.
    half = len(xb) // 2
    for part in (slice(0, half), slice(half, None)):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(xb[part], step %% 2 == 0)
        yield F.cross_entropy(logits.float(), yb[part]) / 2
"""

WORKER = COMMON + r"""
import json
import ferry.torch as ft
torch.set_num_threads(1)
model, data = make(%(samples)d)
opt = torch.optim.SGD(model.parameters(), lr=%(lr)s, momentum=%(momentum)s)
evals = 0
with ft.join(model, opt) as job:
    for xb, yb in job.batches(data):
        if job.steps %% 2 == 0:  # even steps: zeroed before the step
            opt.zero_grad(set_to_none=True)
        first, last = micro_losses(model, xb, yb, job.steps)
        with job.no_sync():
            job.backward(first)
        job.backward(last)
        job.step()
        if job.steps %% 2 == 1:  # odd steps (no "sometimes"): after the one before
            opt.zero_grad(set_to_none=True)
        if job.steps %% 8 == 0:
            loader = torch.utils.data.DataLoader(data, batch_size=128, num_workers=2)
            with torch.no_grad():
                hits = sum(int((model(a, False).argmax(1) == b).sum()) for a, b in loader)
            evals += 1
print(json.dumps({"steps": job.steps, "evals": evals,
                  "tied": model.out.weight is model.emb.weight}), flush=True)
"""


def replay(ft, work):
    """The job in one process: step s's global batch is positions
    [s*BATCH, (s+1)*BATCH) of its epoch's permutation, each worker's half
    in two micro-batches, their gradients summed as the job weighs them."""
    import torch
    scope = {}
    exec(COMMON % {}, scope)
    model, data = scope["make"](SAMPLES)
    x, y = data.tensors
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    steps_per_epoch = SAMPLES // BATCH
    for s in range(steps_per_epoch * EPOCHS):
        epoch, at = divmod(s, steps_per_epoch)
        order = ft.epoch_permutation(SAMPLES, SEED, epoch)
        idx = order[at * BATCH:(at + 1) * BATCH]
        opt.zero_grad(set_to_none=True)
        for share in (idx[:BATCH // 2], idx[BATCH // 2:]):
            for loss in scope["micro_losses"](model, x[share], y[share], s):
                (loss / 2).backward()  # the mean of the two workers
        opt.step()  # skips the parameters unused this step (.grad None)
    return {name: t.detach() for name, t in model.named_parameters()}


def run(args, mode, work):
    script = os.path.join(work, "practices.py")
    with open(script, "w") as f:
        f.write(WORKER % {"samples": SAMPLES, "lr": LR, "momentum": MOMENTUM})
    export = os.path.join(work, f"export-{mode}")
    logs = os.path.join(work, f"logs-{mode}")
    # ps-colocated: the 2 shards inside the 2 training processes (psN logs).
    shards = {"ps": ["--shards", "2"], "ps-colocated": ["--shards", "2", "--colocated-shards"]}
    run_ferry_local(args, mode, ["--mode", mode.split("-")[0], "--workers", "2"] +
                    shards.get(mode, []) + [
        "--model", "external", "--dataset", f"external:{SAMPLES}", "--seed", str(SEED),
        "--batch", str(BATCH), "--epochs", str(EPOCHS), "--export", export,
        "--timeout", "200", "--worker-command", f"/usr/bin/python3 {script}"], logs, timeout=260)
    reports = []
    for name in sorted(os.listdir(logs)):
        if not name.startswith(("worker", "ps")) or not name.endswith(".log"):
            continue
        with open(os.path.join(logs, name), errors="replace") as f:
            text = f.read()
        if "Traceback" in text:
            fail(f"{mode}: {name} printed a traceback:\n{text[-3000:]}")
        reports += [json.loads(line) for line in text.splitlines()
                    if line.startswith('{"steps"')]
    if len(reports) != 2:
        fail(f"{mode}: {len(reports)} worker reports, expected 2")
    for r in reports:
        if not r["tied"] or r["evals"] < 1:
            fail(f"{mode}: a worker lost its tied weight or ran no DataLoader evaluation: {r}")
    sys.path.insert(0, os.path.join(args.source_dir, "scripts"))
    import ferry_torch
    return ferry_torch.read_safetensors(os.path.join(export, "model.safetensors"))


def main():
    args = parse_args(__doc__)
    python_dir = ferry_package_dir(args)
    if python_dir is None:
        return SKIP
    sys.path.insert(0, python_dir)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (python_dir, os.environ.get("PYTHONPATH", "")) if p)
    import ferry.torch as ft

    def body(work):
        want = replay(ft, work)
        got = {mode: run(args, mode, work) for mode in ("ps", "ps-colocated", "ring")}
        for mode, weights in got.items():
            for name, value in want.items():
                if name not in weights:
                    fail(f"{mode}: the export lacks {name} (has {sorted(weights)})")
                diff = float((weights[name] - value).abs().max())
                print(f"{mode} {name}: max |job - replay| = {diff:.2e}")
                if diff > 1e-4:
                    fail(f"{mode}: {name} is {diff:.2e} from the single-process replay")
        for name in want:
            for mode in ("ps-colocated", "ring"):
                diff = float((got["ps"][name] - got[mode][name]).abs().max())
                if diff > 1e-5:
                    fail(f"{name}: PS and {mode} differ by {diff:.2e}")
    return in_work_dir("ferry-loop-practices-", body)


if __name__ == "__main__":
    sys.exit(main())
