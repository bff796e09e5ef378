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
of another size, a float64 model. job.evaluate's figures are torch's on
the weights of each epoch's end and of the job's end.

Usage: torch_external_model_test.py BIN_DIR SOURCE_DIR [--modes ps,ring]
The ferry package is BIN_DIR/../python (FERRY_PYTHON_DIR overrides it).
Exit 0 pass, 1 fail, 77 skip (no torch, no ferry package in the build).
"""
import json
import math
import os
import sys

from torch_jobs import (JOB_OPTIMIZER, SCRIPT_OPTIMIZER, SKIP, coordinator, fail, ferry_package_dir,
                        in_work_dir, parse_args, refused, run_ferry_local, sgd_replay)
from torch_jobs import torch_replay as replay_with

SAMPLES = 512
STEPS = 16
BATCH = 32
EVAL_SAMPLES = 256
SEED = 1  # ferry local's default --seed: the job's sample order


def replay(example, ft, extra=()):
    """The job's first STEPS steps in one process: the global batch of step
    s is positions [s*B, (s+1)*B) of epoch 0's permutation."""
    args = example.arguments(["--samples", str(SAMPLES)] + list(extra))
    x, y = example.token_data(args.samples, args.seq, args.vocab, args.seed)
    return sgd_replay(example.build(args), x, y, ft.epoch_permutation(SAMPLES, SEED, 0),
                      STEPS, BATCH)


def run_job(args, mode, work, workers=2, extra=(), job_optimizer=JOB_OPTIMIZER, metrics=None,
            init_from=None, epochs=1, max_steps=STEPS, scored=False):
    """A ferry local job of train_transformer.py workers: (summary JSON,
    export dir). `scored`: its workers evaluate (job.evaluate), so the
    summary line gives a test accuracy."""
    tag = f"{mode}-{workers}{'-'.join(extra)}{'-init' if init_from else ''}"
    out = os.path.join(work, f"export-{tag}")
    summary = os.path.join(work, f"summary-{tag}.json")
    logs = os.path.join(work, f"logs-{tag}")
    script = os.path.join(args.source_dir, "examples", "torch", "train_transformer.py")
    script_args = " ".join(extra)
    shards = ["--shards", "2"] if mode == "ps" else []
    run = run_ferry_local(args, mode, ["--mode", mode, "--workers", str(workers)] + shards + [
        "--model", "external", "--dataset", f"external:{SAMPLES}",
        "--batch", str(BATCH), "--epochs", str(epochs), "--max-steps", str(max_steps),
        "--export", out, "--summary-json", summary, "--timeout", "240", "--worker-command",
        f"/usr/bin/python3 {script} --samples {SAMPLES} {SCRIPT_OPTIMIZER} {script_args}"] +
        list(job_optimizer) + (["--metrics-jsonl", metrics] if metrics else []) +
        (["--init-from", init_from] if init_from else []), logs)
    said = "test accuracy" if scored else "no test evaluation (the model is the script"
    if said not in run.stderr:
        fail(f"{mode}: ferry local's summary line does not say '{said}':\n"
             f"{run.stderr[-1500:]}")
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


def check_adamw_groups_and_schedule(args, example, ferry_torch, ft, work):
    """The script's optimizer is the job's: AdamW with two parameter groups
    (no weight decay on biases and norms) and a torch cosine schedule after
    a linear warm-up, with no optimizer flags to ferry local. Per step, the
    job's learning rate (its metrics lines) equals torch's, and after STEPS
    steps every tensor is within 1e-4 (relative to its largest value) of a
    single-process replay with the same optimizer and scheduler (the
    issue's bound is 1e-3; weight decay on the no-decay group would move
    the biases by about sum(lr) * 0.1 = 2.4e-3 of their value).

    Except the attention's key bias (in_proj_bias[d:2d]): softmax ignores a
    constant added to every key, so its true gradient is exactly 0 and what
    backward computes is rounding noise, which Adam normalizes into steps of
    about lr whichever way the noise points (measured: 3.7e-4 absolute after
    16 steps, the other tensors <= 3e-6 relative). It is compared on its
    own: it must stay within the steps' rates summed of the replay's."""
    extra = ["--optimizer", "adamw", "--lr", "0.003", "--weight-decay", "0.1",
             "--warmup-steps", "5", "--cosine-steps", str(STEPS)]
    replay_args = example.arguments(["--samples", str(SAMPLES)] + extra)
    model = example.build(replay_args)
    from example_worker import build_optimizer
    opt, scheduler = build_optimizer(model, replay_args)
    x, y = example.token_data(replay_args.samples, replay_args.seq, replay_args.vocab,
                              replay_args.seed)
    rates = replay_with(model, opt, scheduler, x, y, ft.epoch_permutation(SAMPLES, SEED, 0),
                        STEPS, BATCH)
    want = model.state_dict()
    for mode in args.modes.split(","):
        metrics = os.path.join(work, f"metrics-adamw-{mode}.jsonl")
        summary, out = run_job(args, mode, work, extra=extra, job_optimizer=(),
                               metrics=metrics)
        with open(metrics) as f:
            lines = [json.loads(line) for line in f]
        job_rates = {line["step"]: line["lr"] for line in lines if line["kind"] == "step"}
        for step, rate in enumerate(rates, start=1):
            if step not in job_rates or not math.isclose(job_rates[step], rate,
                                                         rel_tol=1e-9):
                fail(f"{mode}: step {step}'s learning rate is {job_rates.get(step)}, "
                     f"torch's {rate}")
        got = ferry_torch.read_safetensors(os.path.join(out, "model.safetensors"))
        key_bias = slice(replay_args.d_model, 2 * replay_args.d_model)
        worst = 0.0
        for name, value in want.items():
            diff = (got[name] - value).abs()
            if name.endswith("self_attn.in_proj_bias"):
                noise = diff[key_bias].max().item()
                if noise > sum(rates):
                    fail(f"{mode}: the key bias moved {noise:.2e} from the replay's, more "
                         f"than Adam's steps can ({sum(rates):.2e})")
                diff[key_bias] = 0
            worst = max(worst, (diff.max() / value.abs().max().clamp(min=1e-12)).item())
        print(f"{mode} AdamW, 2 groups, warm-up + cosine: {summary.get('steps')} steps, "
              f"lr {rates[0]:.2e} .. {max(rates):.2e} .. {rates[-1]:.2e} as torch's, "
              f"max relative |ferry.torch - torch| = {worst:.2e}")
        if worst > 1e-4 or summary.get("steps") != STEPS:
            fail(f"{mode}: AdamW weights differ from the replay by {worst:.2e} (relative)")


def check_init_from(args, example, ferry_torch, ft, work, mode):
    """--init-from an earlier job's export: the job starts from its values
    (not the first worker's seed) and equals a replay of STEPS steps from
    them (fresh optimizer state, as the job's); a worker whose model is
    not the file's is refused at join, naming the tensor."""
    start = os.path.join(work, f"export-{mode}-2")  # check_equivalence's export
    summary, out = run_job(args, mode, work, init_from=start)
    model = example.build(example.arguments(["--samples", str(SAMPLES)]))
    model.load_state_dict(ferry_torch.read_safetensors(
        os.path.join(start, "model.safetensors")), strict=True)
    args_ = example.arguments(["--samples", str(SAMPLES)])
    x, y = example.token_data(args_.samples, args_.seq, args_.vocab, args_.seed)
    sgd_replay(model, x, y, ft.epoch_permutation(SAMPLES, SEED, 0), STEPS, BATCH)
    got = ferry_torch.read_safetensors(os.path.join(out, "model.safetensors"))
    worst = max((got[name] - value).abs().max().item()
                for name, value in model.state_dict().items())
    seed_model = example.build(args_)
    moved = max((got[n] - v).abs().max().item() for n, v in seed_model.state_dict().items())
    print(f"{mode} --init-from an export: {summary.get('steps')} steps, max |ferry.torch - "
          f"torch from the export| = {worst:.2e} (from the seed's model: {moved:.2e})")
    if worst > 1e-4:
        fail(f"{mode} --init-from: differs from the replay from the export by {worst:.2e}")
    refusal_work = os.path.join(work, "init-refusal")
    os.makedirs(refusal_work)
    with coordinator(args, refusal_work, ["--mode", mode, "--model", "external", "--dataset",
                                          f"external:{SAMPLES}", "--init-from", start] +
                     JOB_OPTIMIZER) as address:
        wider = example.build(example.arguments(["--samples", str(SAMPLES), "--d-model", "48"]))
        refused("a model that is not --init-from's",
                lambda: ft.join(wider, coordinator=address, timeout=30), "model.safetensors")


def check_evaluate(args, example, ferry_torch, ft, work):
    """job.evaluate (--eval-samples in the example): 2 workers that both
    evaluate, 2 epochs of 16 steps. The job's evaluations are epoch 0's end
    (version 16) and the final one (version 32), each run once, and each
    equals what torch computes on the weights of that version: the replay's
    after 16 steps, and the job's export (its final weights)."""
    import torch
    from example_worker import test_set_evaluation
    extra = ["--eval-samples", str(EVAL_SAMPLES)]
    model_args = example.arguments(["--samples", str(SAMPLES)] + extra)
    test = torch.utils.data.TensorDataset(*example.token_data(
        EVAL_SAMPLES, model_args.seq, model_args.vocab, model_args.seed + 1))
    evaluate = test_set_evaluation(test)
    replayed = replay(example, ft)
    with torch.no_grad():
        epoch_end = evaluate(replayed)
    for mode in args.modes.split(","):
        summary, out = run_job(args, mode, work, extra=extra, epochs=2, max_steps=0,
                               scored=True)
        model = example.build(model_args)
        model.load_state_dict(ferry_torch.read_safetensors(
            os.path.join(out, "model.safetensors")), strict=True)
        with torch.no_grad():
            final = evaluate(model)
        points = [(e["step"], e["epoch"], e["final"]) for e in summary.get("evals", [])]
        print(f"{mode}, job.evaluate: points {points}; epoch 0 loss "
              f"{summary['evals'][0]['test_loss'] if points else None} vs torch "
              f"{epoch_end['loss']:.6f}; final loss "
              f"{summary['evals'][-1]['test_loss'] if points else None} vs torch "
              f"{final['loss']:.6f}")
        if points != [(STEPS, 0, False), (2 * STEPS, 1, True)]:
            fail(f"{mode}: the job's evaluations are {points}, expected epoch 0's end "
                 f"and the final one: {json.dumps(summary)[:1200]}")
        for point, want, what in ((summary["evals"][0], epoch_end, "epoch 0's end"),
                                  (summary["evals"][1], final, "the final weights")):
            if abs(point["test_loss"] - want["loss"]) > 1e-4 or \
                    abs(point["test_accuracy"] - want["accuracy"]) > 1.5 / EVAL_SAMPLES:
                fail(f"{mode}: the evaluation of {what} ({point}) is not torch's on "
                     f"those weights ({want})")
        if abs(summary.get("test_accuracy", -1) - final["accuracy"]) > 1.5 / EVAL_SAMPLES:
            fail(f"{mode}: the summary's test_accuracy {summary.get('test_accuracy')} is not "
                 f"the final evaluation's {final['accuracy']}")


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
            refused("job.evaluate of something not callable", lambda: job.evaluate(3),
                    "callable")
            refused("job.evaluate every step",
                    lambda: job.evaluate(lambda m: {}, every="step"), "every='epoch'")
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
        check_adamw_groups_and_schedule(args, example, ferry_torch, ft, work)
        check_init_from(args, example, ferry_torch, ft, work, args.modes.split(",")[-1])
        check_evaluate(args, example, ferry_torch, ft, work)
    return in_work_dir("ferry-torch-external-", checks)


if __name__ == "__main__":
    sys.exit(main())
