#!/usr/bin/python3
"""ferry.torch end to end: PyTorch scripts (examples/torch/train_sequential.py)
are the workers of `ferry local` jobs, 2 workers in PS mode with 2 shards and
in ring mode; the job's exported weights must equal, within 1e-4, those of
a single-process torch run that replays ft.epoch_permutation with the same
global batch, initial weights and momentum SGD, and exchange the bytes the
closed forms give per step, as ferry-worker does on the same model. Then
the refusals at join: a
model whose tensors differ, an optimizer that differs from the job's, no
coordinator address.

Usage: torch_worker_test.py BIN_DIR SOURCE_DIR [--modes ps,ring]
The ferry package is BIN_DIR/../python (FERRY_PYTHON_DIR overrides it).
Exit 0 pass, 1 fail, 77 skip (no torch, no ferry package in the build, no
Fashion-MNIST).
"""
import json
import os
import sys

from torch_jobs import (JOB_OPTIMIZER, LR, MOMENTUM, SCRIPT_OPTIMIZER, SKIP, coordinator, fail,
                        ferry_package_dir, in_work_dir, parse_args, refused, run_ferry_local,
                        sgd_replay)

STEPS = 25
BATCH = 64


def replay(ferry_torch, ft, init_dir, data_dir, seed):
    """The job's first STEPS steps in one process: the global batch of step
    s is positions [s*B, (s+1)*B) of epoch 0's permutation."""
    model, spec = ferry_torch.load_sequential(init_dir)
    x, y = ferry_torch.load_split(data_dir, "train", spec["input"])
    order = ft.epoch_permutation(len(y), seed, 0)
    return sgd_replay(model, x, y, order, STEPS, BATCH).state_dict()


def run_job(args, mode, init_dir, work, data_dir, torch_workers=True):
    """A ferry local job of 2 workers: train_sequential.py scripts, or
    (torch_workers=False) ferry-worker on the same model and data."""
    tag = mode if torch_workers else f"{mode}-ferry-worker"
    out = os.path.join(work, f"export-{tag}")
    summary = os.path.join(work, f"summary-{tag}.json")
    script = os.path.join(args.source_dir, "examples", "torch", "train_sequential.py")
    shards = ["--shards", "2"] if mode == "ps" else []
    workers = ["--worker-command",
               f"/usr/bin/python3 {script} {init_dir} --data-dir {data_dir} {SCRIPT_OPTIMIZER}"]
    run_ferry_local(args, tag, ["--mode", mode, "--workers", "2"] + shards + [
        "--init-from", init_dir, "--data-dir", data_dir,
        "--batch", str(BATCH), "--epochs", "1", "--max-steps", str(STEPS),
        "--export", out, "--summary-json", summary, "--timeout", "240"] +
        (workers if torch_workers else []) + JOB_OPTIMIZER, os.path.join(work, f"logs-{tag}"))
    with open(summary) as f:
        return json.load(f), out


def exchange_bytes(summary, mode):
    """(sent, received) per worker per step with the job's peers of the
    mode's exchange (PS: the shards; ring: the other members)."""
    role = "ps" if mode == "ps" else "worker"
    by_peer = summary.get("worker_bytes_by_peer", {})
    if role not in by_peer:
        fail(f"{mode}: no worker bytes with '{role}' in the summary: {sorted(by_peer)}")
    per = 2 * STEPS
    return (int(by_peer[role].get("sent", 0)) / per,
            int(by_peer[role].get("received", 0)) / per)


def check_accounting(args, ferry_torch, summaries, init_dir, work, data_dir):
    """The bytes a torch worker exchanges per step equal the closed form
    (PS: the model's fp32 bytes each way; ring of N: 2(N-1)/N of them) up
    to the messages' framing and the job's one-time transfers, and
    ferry-worker's on the same model and data within 1 %."""
    model, _ = ferry_torch.load_sequential(init_dir)
    model_bytes = 4 * sum(t.numel() for t in model.state_dict().values())
    for mode, summary in summaries.items():
        sent, received = exchange_bytes(summary, mode)
        reference, _ = run_job(args, mode, init_dir, work, data_dir, torch_workers=False)
        ref_sent, ref_received = exchange_bytes(reference, mode)
        closed = model_bytes * (1.0 if mode == "ps" else 2 * (2 - 1) / 2)
        print(f"{mode}: per worker per step sent {sent:.0f} B, received {received:.0f} B; "
              f"closed form {closed:.0f} B each way; ferry-worker sent {ref_sent:.0f} B, "
              f"received {ref_received:.0f} B")
        for what, got in (("sent", sent), ("received", received)):
            if not closed <= got <= closed * 1.10:
                fail(f"{mode}: {what} {got:.0f} B per worker per step is not the closed "
                     f"form {closed:.0f} B (+ up to 10 % framing and one-time transfers)")
        # A step aborted under load (a collective past its deadline) is
        # exchanged again and its new ring broadcast: up to twice the
        # step's bytes more, spread over the STEPS applied steps.
        redone = abs(int(summary.get("aborted_steps", 0)) -
                     int(reference.get("aborted_steps", 0)))
        slack = 2 * closed / STEPS * redone
        for what, got, ref in (("sent", sent, ref_sent), ("received", received, ref_received)):
            if abs(got - ref) > 0.01 * ref + slack:
                fail(f"{mode}: a torch worker {what} {got:.0f} B per step, ferry-worker "
                     f"{ref:.0f} B: they differ by more than 1 % "
                     f"(+ {slack:.0f} B for {redone} step(s) aborted in one run only)")


def check_equivalence(args, ferry_torch, ft, work, data_dir):
    import torch
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
    init_dir = os.path.join(work, "init")
    ferry_torch.export_sequential(model, init_dir, input_shape=[784], classes=10)
    expected = replay(ferry_torch, ft, init_dir, data_dir, seed=1)
    summaries = {}
    for mode in args.modes.split(","):
        summary, out = run_job(args, mode, init_dir, work, data_dir)
        summaries[mode] = summary
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
    return summaries, init_dir


def check_refusals(args, ft, work):
    import torch
    from torch import nn
    with coordinator(args, work, ["--mode", "ring", "--model", "784-64-10"] +
                     JOB_OPTIMIZER) as address:
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
                                coordinator=address, timeout=30), "amsgrad")
        job_sgd = torch.optim.SGD(named.parameters(), lr=LR, momentum=MOMENTUM)
        refused("a torch scheduler in a job of a ferry model",
                lambda: ft.join(named, job_sgd, coordinator=address, timeout=30,
                                scheduler=torch.optim.lr_scheduler.StepLR(job_sgd, 10)),
                "--model external")
        first, rest = list(named.parameters())[:1], list(named.parameters())[1:]
        refused("two parameter groups in a job of one",
                lambda: ft.join(named, torch.optim.SGD(
                    [{"params": first}, {"params": rest, "lr": LR / 2}], lr=LR,
                    momentum=MOMENTUM), coordinator=address, timeout=30),
                "parameter group")
        os.environ.pop("FERRY_COORDINATOR", None)
        refused("no coordinator", lambda: ft.join(named), "coordinator")
        check_nan_refused(ft, named, address)


class ZerosDataset:
    """Fashion-MNIST's size, every sample a zero image of class 0."""

    def __len__(self):
        return 60000

    def __getitem__(self, i):
        import torch
        return torch.zeros(784), 0


def check_nan_refused(ft, model, address):
    """A NaN gradient refuses the step, naming the tensor; the worker leaves.
    Before it: job.evaluate in a job of a ferry model (the coordinator
    scores those) is refused."""
    import torch.nn.functional as F
    job = ft.join(model, coordinator=address, timeout=30)
    refused("job.evaluate in a job of a ferry model",
            lambda: job.evaluate(lambda m: {"accuracy": 0.0, "loss": 0.0}), "--model external")
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
    args = parse_args(__doc__, lambda ap: ap.add_argument(
        "--data-dir", default="/usr/share/datasets/fashion-mnist"))
    python_dir = ferry_package_dir(args)
    if python_dir is None:
        return SKIP
    import torch
    if not os.path.exists(os.path.join(args.data_dir, "train-images-idx3-ubyte.gz")):
        print(f"SKIP: no Fashion-MNIST in {args.data_dir}")
        return SKIP
    sys.path.insert(0, python_dir)
    sys.path.insert(0, os.path.join(args.source_dir, "scripts"))
    import ferry.torch as ft
    import ferry_torch
    torch.set_num_threads(1)

    def checks(work):
        check_refusals(args, ft, work)
        summaries, init_dir = check_equivalence(args, ferry_torch, ft, work, args.data_dir)
        check_accounting(args, ferry_torch, summaries, init_dir, work, args.data_dir)
    return in_work_dir("ferry-torch-worker-", checks)


if __name__ == "__main__":
    sys.exit(main())
