#!/usr/bin/env python3
"""PyTorch's side of ferry-model-step: one thread, the MNIST example ConvNet
(ferry's `convnet` preset), forward + backward per step, no optimizer.
Usage: /usr/bin/python3 bench/torch_convnet.py [--batch 128] [--steps 20]"""
import argparse
import time

import torch
from torch import nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128),
        nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))
    x = torch.rand(args.batch, 1, 28, 28) * 2 - 1
    y = torch.arange(args.batch) % 10
    loss_fn = nn.CrossEntropyLoss()
    total = 0.0
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        model.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        if step >= args.warmup:
            total += time.perf_counter() - start
    print(f"torch batch={args.batch} steps={args.steps} "
          f"ms/step={1e3 * total / args.steps:.2f} "
          f"samples/s={args.steps * args.batch / total:.1f}")


if __name__ == "__main__":
    main()
