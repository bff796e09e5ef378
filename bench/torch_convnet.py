#!/usr/bin/env python3
"""PyTorch's side of ferry-model-step: forward + backward per step, no
optimizer, on ferry's `convnet` preset (the MNIST example ConvNet) or an MLP
given as sizes (784-1024-1024-10), on the CPU (one thread) or a CUDA device.
Usage: python3 bench/torch_convnet.py [--batch 128] [--steps 20]
                                      [--model convnet|SIZES] [--device cpu|cuda]"""
import argparse
import time

import torch
from torch import nn


def build(spec):
    if spec == "convnet":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 1),
            nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
            nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(128, 10))
    sizes = [int(s) for s in spec.split("-")]
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--model", default="convnet")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    device = torch.device(args.device)
    # ferry's CUDA backend computes in fp32 without TF32; so does this.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = build(args.model).to(device)
    if args.model == "convnet":
        x = torch.rand(args.batch, 1, 28, 28) * 2 - 1
    else:
        x = torch.rand(args.batch, int(args.model.split("-")[0])) * 2 - 1
    x = x.to(device)
    y = (torch.arange(args.batch) % 10).to(device)
    loss_fn = nn.CrossEntropyLoss()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(args.warmup):
        model.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
    sync()
    start = time.perf_counter()
    for _ in range(args.steps):
        model.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
    sync()
    total = time.perf_counter() - start
    print(f"torch model={args.model} device={args.device} "
          f"batch={args.batch} steps={args.steps} "
          f"ms/step={1e3 * total / args.steps:.2f} "
          f"samples/s={args.steps * args.batch / total:.1f}")


if __name__ == "__main__":
    main()
