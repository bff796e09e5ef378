#!/usr/bin/python3
"""torchvision's ResNet-18 (examples/torch/train_resnet.py, 11.2M
parameters and BatchNorm buffers, 32x32 generated images) as the model of
ferry local jobs (--model external): 2 workers in PS mode (2 shards) and in
ring mode train STEPS steps; the export loads strictly into the script's
model, every BatchNorm counted every step, every value finite and moved from
the start. With one worker (batch statistics over the whole batch) the ring
job equals a single-process torch replay as closely as rounding allows:
ResNet-18 at this learning rate amplifies rounding (gradients scaled by
1 + 2**-22 move the replay's weights by ~2e-4 in 4 steps), so the bound is
4x what that perturbation moves the replay, or 1e-4 if more.

Usage: torch_resnet_test.py BIN_DIR SOURCE_DIR [--modes ps,ring]
Exit 0 pass, 1 fail, 77 skip (no torch or torchvision, no ferry package).
"""
import importlib.util
import os
import sys

from torch_jobs import (SKIP, fail, ferry_package_dir, in_work_dir, parse_args, run_ferry_local,
                        torch_replay)

SAMPLES = 64
BATCH = 16
STEPS = 4
SEED = 1  # ferry local's default --seed: the job's sample order


def run_job(args, mode, work, workers):
    out = os.path.join(work, f"export-{mode}-{workers}")
    script = os.path.join(args.source_dir, "examples", "torch", "train_resnet.py")
    shards = ["--shards", "2"] if mode == "ps" else []
    run_ferry_local(args, mode, ["--mode", mode, "--workers", str(workers)] + shards + [
        "--model", "external", "--dataset", f"external:{SAMPLES}", "--batch", str(BATCH),
        "--epochs", "1", "--max-steps", str(STEPS), "--export", out, "--timeout", "300",
        "--worker-command", f"/usr/bin/python3 {script} --data synthetic --samples {SAMPLES}"],
        os.path.join(work, f"logs-{mode}-{workers}"))
    return out


def main():
    args = parse_args(__doc__)
    python_dir = ferry_package_dir(args)
    if python_dir is None:
        return SKIP
    if importlib.util.find_spec("torchvision") is None:
        print("SKIP: no torchvision (Debian's python3-torchvision)")
        return SKIP
    import torch
    sys.path.insert(0, python_dir)
    sys.path.insert(0, os.path.join(args.source_dir, "scripts"))
    sys.path.insert(0, os.path.join(args.source_dir, "examples", "torch"))
    import ferry.torch as ft
    import ferry_torch
    import train_resnet as example
    from example_worker import build_optimizer
    torch.set_num_threads(1)
    script_args = example.arguments(["--data", "synthetic", "--samples", str(SAMPLES)])
    start = example.build(script_args).state_dict()

    def check(work):
        for mode in args.modes.split(","):
            out = run_job(args, mode, work, workers=2)
            got = ferry_torch.read_safetensors(os.path.join(out, "model.safetensors"))
            model = example.build(script_args)
            try:
                model.load_state_dict(got, strict=True)
            except RuntimeError as e:
                fail(f"{mode}: the export does not load into ResNet-18: {e}")
            counters = {n: v.item() for n, v in got.items() if n.endswith("num_batches_tracked")}
            if set(counters.values()) != {STEPS}:
                fail(f"{mode}: BatchNorm counters {sorted(set(counters.values()))}, "
                     f"expected {STEPS}")
            if not all(torch.isfinite(v).all() for v in got.values()):
                fail(f"{mode}: a value is not finite")
            moved = max((got["fc.weight"] - start["fc.weight"]).abs().max().item(),
                        (got["conv1.weight"] - start["conv1.weight"]).abs().max().item())
            params = sum(p.numel() for p in model.parameters())
            print(f"{mode}, 2 workers: ResNet-18 ({params} parameters, {len(counters)} "
                  f"BatchNorm layers) trained {STEPS} steps; the export loads strictly; "
                  f"the weights moved up to {moved:.2e}")
            if moved <= 0:
                fail(f"{mode}: the weights did not move")
        # One worker: the job's BatchNorm statistics are the whole batch's,
        # as in one process.
        out = run_job(args, "ring", work, workers=1)
        got = ferry_torch.read_safetensors(os.path.join(out, "model.safetensors"))
        x, y = example.images(script_args, "train")
        order = ft.epoch_permutation(SAMPLES, SEED, 0)

        def replay(grad_scale):
            model = example.build(script_args)
            opt, _ = build_optimizer(model, script_args)
            torch_replay(model, opt, None, x, y, order, STEPS, BATCH, grad_scale)
            return model.state_dict()

        def distance(a, b):
            return max((a[n].float() - b[n].float()).abs().max().item() for n in b)

        def plain_replay():
            # torch.optim.SGD's update (weight decay, momentum, Nesterov)
            # with one float32 rounding per operation.
            import numpy as np
            import torch.nn.functional as F
            model = example.build(script_args)
            f32 = np.float32
            lr, m, wd = f32(script_args.lr), f32(script_args.momentum), f32(script_args.weight_decay)
            momentum = {}
            for s in range(STEPS):
                idx = order[s * BATCH:(s + 1) * BATCH]
                model.zero_grad()
                F.cross_entropy(model(x[idx]), y[idx]).backward()
                with torch.no_grad():
                    for n, p in model.named_parameters():
                        w = p.data.numpy()
                        g = p.grad.numpy() + wd * w
                        momentum[n] = g.copy() if n not in momentum else m * momentum[n] + g
                        w -= lr * (g + m * momentum[n] if script_args.nesterov else momentum[n])
            return model.state_dict()

        want = replay(1.0)
        rounding = distance(replay(1 + 2 ** -22), want)
        plain = plain_replay()
        worst = min(distance(got, want), distance(got, plain))
        print(f"ring, 1 worker: the replay's two updates differ by {distance(plain, want):.2e}; "
              f"the job is {distance(got, want):.2e} from torch's, {distance(got, plain):.2e} "
              f"from the plain one")
        bound = max(1e-4, 4 * rounding)
        print(f"ring, 1 worker: max |ferry.torch - replay| over every tensor and buffer = "
              f"{worst:.2e}; torch against itself with gradients off by 2**-22: "
              f"{rounding:.2e} (bound {bound:.2e})")
        if worst > bound:
            fail(f"ring, 1 worker: differs from the single-process replay by {worst:.2e}")
    return in_work_dir("ferry-torch-resnet-", check)


if __name__ == "__main__":
    sys.exit(main())
