#!/usr/bin/env python3
"""PyTorch baseline for ferry's benchmarks: the same model on Fashion-MNIST
(an MLP given as sizes, or --model convnet: ferry's `convnet` preset, the
PyTorch MNIST example network).

  torch_mlp.py --mode single --steps 400 --batch 128
  torch_mlp.py --mode ddp --world 2 --steps 400 --batch 128   (gloo, CPU, global batch)
  torch_mlp.py --mode ddp --world 2 --steps 60 --model convnet

Prints one JSON line: {"mode", "world", "batch", "steps", "seconds", "samples_per_second"}.
Run with Debian's /usr/bin/python3 (python3-torch). One intra-op thread per process.
"""
import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DATA = "/usr/share/datasets/fashion-mnist"


def load_images(data_dir):
    with gzip.open(os.path.join(data_dir, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(data_dir, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    x = (x.astype(np.float32) / 255.0 - 0.2860) / 0.3530
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def convnet():
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128),
        nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))


def model(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def train(rank, args, out):
    torch.set_num_threads(1)
    torch.manual_seed(1)
    x, y = load_images(args.data_dir)
    if args.model == "convnet":
        x = x.view(-1, 1, 28, 28)
        net = convnet()
    else:
        net = model([int(s) for s in args.model.split("-")])
    world = args.world if args.mode == "ddp" else 1
    if args.mode == "ddp":
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(args.port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
        net = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    local = args.batch // world
    perm = torch.randperm(x.shape[0])
    def step(i):
        start = (i * args.batch + rank * local) % (x.shape[0] - local)
        idx = perm[start:start + local]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x[idx]), y[idx])
        loss.backward()
        opt.step()
    for i in range(args.warmup):
        step(i)
    if args.mode == "ddp":
        dist.barrier()
    t0 = time.perf_counter()
    for i in range(args.steps):
        step(args.warmup + i)
    if args.mode == "ddp":
        dist.barrier()
    seconds = time.perf_counter() - t0
    if rank == 0:
        out.put({"mode": args.mode, "world": world, "batch": args.batch, "steps": args.steps,
                 "seconds": seconds, "samples_per_second": args.steps * args.batch / seconds})
    if args.mode == "ddp":
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["single", "ddp"], default="single")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=128, help="global batch")
    p.add_argument("--model", default="784-256-128-10",
                   help="MLP sizes or convnet")
    p.add_argument("--data-dir", default=DATA)
    p.add_argument("--port", type=int, default=29533)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    if args.mode == "single":
        train(0, args, out)
    else:
        procs = [ctx.Process(target=train, args=(r, args, out)) for r in range(args.world)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
    print(json.dumps(out.get()))


if __name__ == "__main__":
    main()
