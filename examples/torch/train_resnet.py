#!/usr/bin/python3
"""torchvision's ResNet-18 trained as a ferry job's worker (docs/pytorch.md),
on 32x32 images: Fashion-MNIST padded to 32x32, or generated images. The
job takes its model, optimizer and scheduler from its first worker:

  ferry local --mode ring --workers 2 --model external --dataset external:60000 \\
      --batch 64 --epochs 1 --export out/resnet \\
      --worker-command "examples/torch/train_resnet.py"
  examples/torch/train_resnet.py --evaluate out/resnet   # test accuracy of the export

The model is torchvision.models.resnet18(num_classes=10) with the stem
CIFAR models use for 32x32 inputs (a 3x3 stride-1 first convolution for one
channel, no max-pool); its tensor names are torchvision's, BatchNorm's
running statistics included, so the export loads into it strictly. Its
training loop (example_worker.train_as_worker) is plain PyTorch except for
ft.join, job.batches, job.backward and job.step; it prints one JSON line:
this worker's steps, its recent training accuracy and its summary.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
import torchvision
from torch import nn

from example_worker import add_optimizer_arguments, test_set_evaluation, train_as_worker

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import ferry_torch  # noqa: E402  (Fashion-MNIST, safetensors)

CLASSES = 10


def build(args):
    """ResNet-18 for 32x32 single-channel images, the same for a seed in
    every worker."""
    torch.manual_seed(args.seed)
    model = torchvision.models.resnet18(num_classes=CLASSES)
    model.conv1 = nn.Conv2d(1, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def images(args, split):
    """(x [N, 1, 32, 32] float32, y [N] int64) of `split` ("train", "test"):
    Fashion-MNIST padded by 2 pixels a side and standardized, or (--data
    synthetic) generated images whose class is the quadrant and the
    brightness of a bright square, with noise."""
    if args.data == "fashion-mnist":
        spec = {"scale": 1 / 255.0, "mean": 0.2860, "std": 0.3530, "shape": [1, 28, 28]}
        x, y = ferry_torch.load_split(args.data_dir, split, spec)
        if split == "train" and args.samples:
            x, y = x[:args.samples], y[:args.samples]
        return F.pad(x, (2, 2, 2, 2), value=float((0 - spec["mean"]) / spec["std"])), y
    n = args.samples if split == "train" else max(256, args.samples // 4)
    g = torch.Generator().manual_seed(args.seed + (0 if split == "train" else 1))
    y = torch.randint(0, CLASSES, (n,), generator=g)
    x = 0.5 * torch.randn(n, 1, 32, 32, generator=g)
    for i in range(n):
        quadrant, level = int(y[i]) % 4, 1.0 + int(y[i]) // 4
        r, c = 4 + 16 * (quadrant // 2), 4 + 16 * (quadrant % 2)
        x[i, 0, r:r + 8, c:c + 8] += level
    return x, y


def arguments(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", choices=["fashion-mnist", "synthetic"], default="fashion-mnist")
    ap.add_argument("--data-dir", default=ferry_torch.FASHION_MNIST)
    ap.add_argument("--samples", type=int, default=0,
                    help="training samples (0: all of Fashion-MNIST's 60000; synthetic: "
                         "required); the job's --dataset external:N must say the same N")
    ap.add_argument("--seed", type=int, default=0, help="model and data seed")
    ap.add_argument("--evaluate", metavar="DIR",
                    help="no training: the test accuracy of DIR/model.safetensors (on "
                         "the first --eval-samples test images when given)")
    ap.add_argument("--eval-samples", type=int, default=0,
                    help="> 0: the worker evaluates the job's weights (job.evaluate) on "
                         "the test split's first N images at each epoch's end and at the end")
    add_optimizer_arguments(ap)
    args = ap.parse_args(argv)
    if args.data == "synthetic" and args.samples <= 0:
        ap.error("--data synthetic needs --samples N")
    return args


def evaluate(args):
    model = build(args)
    model.load_state_dict(ferry_torch.read_safetensors(
        os.path.join(args.evaluate, "model.safetensors")), strict=True)
    x, y = images(args, "test")
    if args.eval_samples > 0:  # the images a job with --eval-samples scored
        x, y = x[:args.eval_samples], y[:args.eval_samples]
    with torch.no_grad():
        scores = test_set_evaluation(torch.utils.data.TensorDataset(x, y), 500)(model)
    print(json.dumps({"test_accuracy": scores["accuracy"], "test_loss": scores["loss"],
                      "samples": len(y)}))


def main():
    args = arguments()
    torch.set_num_threads(1)
    if args.evaluate:
        return evaluate(args)
    model = build(args)
    x, y = images(args, "train")
    test = None
    if args.eval_samples > 0:
        tx, ty = images(args, "test")
        test = torch.utils.data.TensorDataset(tx[:args.eval_samples], ty[:args.eval_samples])
    train_as_worker(model, torch.utils.data.TensorDataset(x, y), args, test)


if __name__ == "__main__":
    main()
