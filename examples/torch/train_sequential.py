#!/usr/bin/python3
"""A PyTorch training script as a ferry worker (docs/pytorch.md).

Trains the nn.Sequential of a ferry model directory (model.json +
model.safetensors, e.g. from `scripts/ferry_torch.py train` or ferry's
--export) on Fashion-MNIST, in whatever mode the job runs (PS or ring):

  ferry local --mode ps --workers 2 --shards 2 --init-from DIR \\
      --worker-command "examples/torch/train_sequential.py DIR"

The script is plain PyTorch except for ft.join, job.batches, job.backward
and job.step. It prints one JSON line: this worker's steps and summary.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

import ferry.torch as ft

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import ferry_torch  # noqa: E402  (model directories, Fashion-MNIST)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir", help="ferry model directory (model.json + model.safetensors)")
    ap.add_argument("--data-dir", default=ferry_torch.FASHION_MNIST)
    # The optimizer must be the job's: these defaults are ferry local's.
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--nesterov", type=int, default=1, help="1 or 0")
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    args = ap.parse_args()
    torch.set_num_threads(1)

    model, spec = ferry_torch.load_sequential(args.model_dir)
    x, y = ferry_torch.load_split(args.data_dir, "train", spec["input"])
    train = torch.utils.data.TensorDataset(x, y)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          nesterov=bool(args.nesterov), weight_decay=args.weight_decay)

    with ft.join(model, opt) as job:
        for xb, yb in job.batches(train):
            loss = F.cross_entropy(model(xb), yb)
            job.backward(loss)
            job.step()
    print(json.dumps({"steps": job.steps, "mode": job.mode, "summary": job.summary}))


if __name__ == "__main__":
    main()
