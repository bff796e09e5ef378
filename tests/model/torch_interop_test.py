#!/usr/bin/python3
"""Models move between ferry and PyTorch (Debian's python3-torch).

1. ferry trains the ConvNet briefly and exports it (--export); PyTorch builds
   nn.Sequential from model.json, load_state_dict(strict=True) takes
   model.safetensors, and its test accuracy is ferry's within 0.002.
2. PyTorch trains the ConvNet briefly and exports it with
   scripts/ferry_torch.py; ferry evaluates it (--init-from --evaluate-only)
   to PyTorch's test accuracy within 0.002.
3. A distributed job (ferry local, PS and ring) starts from PyTorch's export
   (--init-from) with a learning rate too small to move a weight: its final
   evaluation is PyTorch's accuracy, and its --export holds PyTorch's
   weights under the same names (read with the helper's reader).
Usage: torch_interop_test.py BIN_DIR SOURCE_DIR. Exit 77 (skipped) without
torch or the Fashion-MNIST files.
"""
import json
import os
import subprocess
import sys
import tempfile

TOLERANCE = 0.002
DATA = "/usr/share/datasets/fashion-mnist"


def run(argv, timeout=600):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(argv)} exited {p.returncode}\n"
                 f"{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def last_json(text):
    return json.loads([l for l in text.splitlines() if l.startswith("{")][-1])


def main():
    bin_dir, src = sys.argv[1], sys.argv[2]
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: python3-torch is not installed (scripts/setup "
              "--with-peers)")
        return 77
    if not os.path.isdir(DATA):
        print(f"SKIP: {DATA} is missing (dataset-fashion-mnist)")
        return 77
    helper = os.path.join(src, "scripts", "ferry_torch.py")
    worker = os.path.join(bin_dir, "ferry-worker")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        # 1. ferry -> PyTorch.
        exported = os.path.join(tmp, "from-ferry")
        summary = os.path.join(tmp, "ferry.json")
        run([worker, "--standalone", "--model", "convnet", "--epochs", "1",
             "--max-steps", "30", "--device", "cpu", "--export", exported,
             "--summary-json", summary])
        with open(summary) as f:
            ferry_acc = json.load(f)["test_accuracy"]
        torch_acc = last_json(run([sys.executable, helper, "eval",
                                   exported]))["test_accuracy"]
        print(f"ferry-trained ConvNet: ferry {ferry_acc:.4f}, "
              f"PyTorch {torch_acc:.4f}")
        if abs(ferry_acc - torch_acc) > TOLERANCE:
            failures.append(f"PyTorch reads ferry's export at {torch_acc}, "
                            f"ferry reported {ferry_acc}")
        if ferry_acc < 0.3:
            failures.append(f"ferry's 30 steps did not train: {ferry_acc}")

        # 2. PyTorch -> ferry.
        from_torch = os.path.join(tmp, "from-torch")
        torch_acc = last_json(run([sys.executable, helper, "train",
                                   "--preset", "convnet", "--steps", "30",
                                   "--out", from_torch]))["test_accuracy"]
        summary = os.path.join(tmp, "eval.json")
        run([worker, "--standalone", "--init-from", from_torch,
             "--evaluate-only", "--device", "cpu", "--summary-json",
             summary])
        with open(summary) as f:
            ferry_acc = json.load(f)["test_accuracy"]
        print(f"PyTorch-trained ConvNet: PyTorch {torch_acc:.4f}, "
              f"ferry {ferry_acc:.4f}")
        if abs(ferry_acc - torch_acc) > TOLERANCE:
            failures.append(f"ferry reads PyTorch's export at {ferry_acc}, "
                            f"PyTorch measured {torch_acc}")
        # 3. PyTorch -> a distributed ferry job -> PyTorch.
        for mode in ("ps", "ring"):
            out = os.path.join(tmp, f"job-{mode}")
            summary = os.path.join(tmp, f"job-{mode}.json")
            run([os.path.join(bin_dir, "ferry"), "local", "--mode", mode,
                 "--workers", "2", "--shards", "2", "--init-from", from_torch,
                 "--lr", "1e-30", "--weight-decay", "0", "--warmup-steps",
                 "0", "--max-steps", "2", "--device", "cpu", "--export", out,
                 "--summary-json", summary, "--log-dir",
                 os.path.join(tmp, f"logs-{mode}")])
            with open(summary) as f:
                job_acc = json.load(f)["test_accuracy"]
            sys.path.insert(0, os.path.dirname(helper))
            import ferry_torch
            ours = ferry_torch.read_safetensors(
                os.path.join(out, "model.safetensors"))
            theirs = ferry_torch.read_safetensors(
                os.path.join(from_torch, "model.safetensors"))
            drift = max((ours[k].float() - theirs[k].float()).abs().max()
                        .item() for k in theirs) if set(ours) == set(
                            theirs) else float("inf")
            print(f"{mode} job from PyTorch's weights: job {job_acc:.4f}, "
                  f"its export differs from them by {drift:.2e}")
            if abs(job_acc - torch_acc) > TOLERANCE:
                failures.append(f"{mode} job started from PyTorch's weights "
                                f"evaluates {job_acc}, not {torch_acc}")
            if drift > 1e-6:
                failures.append(f"{mode} job's export is not PyTorch's "
                                f"weights (names {sorted(ours)[:4]}..., "
                                f"max difference {drift})")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
