#!/usr/bin/python3
"""A PyTorch model that is not ferry's as the model of ferry local jobs
(--model external --dataset external:N): examples/torch/train_transformer.py
(a transformer encoder on generated tokens), 2 workers, in PS mode with 2
shards and in ring mode. The first worker defines the job's tensors and
starting values; the job's export (torch's names) must load strictly into
the script's model and equal, within 1e-4, a single-process torch run that
replays ft.epoch_permutation with the same global batch and momentum SGD.
A model with two BatchNorm layers (buffers: running statistics and a
counter) with one worker equals the replay too, buffers included. Then what join refuses: a
second model that differs (named by its first differing tensor), a dataset
of another size, a float64 model.

Usage: torch_external_model_test.py BIN_DIR SOURCE_DIR [--modes ps,ring]
The ferry package is BIN_DIR/../python (FERRY_PYTHON_DIR overrides it).
Exit 0 pass, 1 fail, 77 skip (no torch, no ferry package in the build).
"""
import json
import os
import sys

from torch_jobs import (JOB_OPTIMIZER, SCRIPT_OPTIMIZER, SKIP, coordinator, fail, ferry_package_dir,
                        in_work_dir, parse_args, refused, run_ferry_local, sgd_replay)

SAMPLES = 512
STEPS = 16
BATCH = 32
SEED = 1  # ferry local's default --seed: the job's sample order


def replay(example, ft, extra=()):
    """The job's first STEPS steps in one process: the global batch of step
    s is positions [s*B, (s+1)*B) of epoch 0's permutation."""
    args = example.arguments(["--samples", str(SAMPLES)] + list(extra))
    x, y = example.token_data(args.samples, args.seq, args.vocab, args.seed)
    return sgd_replay(example.build(args), x, y, ft.epoch_permutation(SAMPLES, SEED, 0),
                      STEPS, BATCH)


def run_job(args, mode, work, workers=2, extra=()):
    tag = f"{mode}-{workers}{'-'.join(extra)}"
    out = os.path.join(work, f"export-{tag}")
    summary = os.path.join(work, f"summary-{tag}.json")
    logs = os.path.join(work, f"logs-{tag}")
    script = os.path.join(args.source_dir, "examples", "torch", "train_transformer.py")
    script_args = " ".join(extra)
    shards = ["--shards", "2"] if mode == "ps" else []
    run = run_ferry_local(args, mode, ["--mode", mode, "--workers", str(workers)] + shards + [
        "--model", "external", "--dataset", f"external:{SAMPLES}",
        "--batch", str(BATCH), "--epochs", "1", "--max-steps", str(STEPS),
        "--export", out, "--summary-json", summary, "--timeout", "240", "--worker-command",
        f"/usr/bin/python3 {script} --samples {SAMPLES} {SCRIPT_OPTIMIZER} {script_args}"] +
        JOB_OPTIMIZER, logs)
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


def check_batchnorm(args, example, ferry_torch, ft, work):
    """A model with buffers (BatchNorm's running statistics and counter):
    one worker, so that its batch statistics are the whole batch's, in
    both modes: every tensor and buffer equals the replay's."""
    extra = ["--batchnorm", "1"]
    want = replay(example, ft, extra).state_dict()
    for mode in args.modes.split(","):
        summary, out = run_job(args, mode, work, workers=1, extra=extra)
        got = ferry_torch.read_safetensors(os.path.join(out, "model.safetensors"))
        model = example.build(example.arguments(["--samples", str(SAMPLES)] + extra))
        try:
            model.load_state_dict(got, strict=True)
        except RuntimeError as e:
            fail(f"{mode} with BatchNorm: the export does not load: {e}")
        worst = max((got[name].float() - value.float()).abs().max().item()
                    for name, value in want.items())
        tracked = min(got["norm.0.num_batches_tracked"].item(),
                      got["norm.2.num_batches_tracked"].item())
        print(f"{mode} with BatchNorm, 1 worker: {summary.get('steps')} steps, "
              f"num_batches_tracked {tracked:.0f}, max |ferry.torch - torch| = {worst:.2e}")
        if tracked != STEPS or worst > 1e-4:
            fail(f"{mode} with BatchNorm: differs from the replay by {worst:.2e} "
                 f"(num_batches_tracked {tracked})")


def check_refusals(args, example, ft, work):
    import torch
    from torch import nn
    with coordinator(args, work, ["--mode", "ring", "--model", "external", "--dataset",
                                  "external:64"] + JOB_OPTIMIZER) as address:
        # Refused before anything is defined: a float64 model.
        refused("a float64 model",
                lambda: ft.join(nn.Sequential(nn.Linear(4, 4)).double(),
                                coordinator=address, timeout=30), "float64")
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


def main():
    args = parse_args(__doc__)
    python_dir = ferry_package_dir(args)
    if python_dir is None:
        return SKIP
    import torch
    sys.path.insert(0, python_dir)
    sys.path.insert(0, os.path.join(args.source_dir, "scripts"))
    sys.path.insert(0, os.path.join(args.source_dir, "examples", "torch"))
    import ferry.torch as ft
    import ferry_torch
    import train_transformer as example
    torch.set_num_threads(1)

    def checks(work):
        check_refusals(args, example, ft, work)
        check_equivalence(args, example, ferry_torch, ft, work)
        check_batchnorm(args, example, ferry_torch, ft, work)
    return in_work_dir("ferry-torch-external-", checks)


if __name__ == "__main__":
    sys.exit(main())
