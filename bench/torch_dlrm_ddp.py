#!/usr/bin/env python3
"""PyTorch DDP baseline for ferry's distributed DLRM speed (issue 20): the
model of bench/torch_dlrm.py trained by N ranks with DistributedDataParallel
over gloo on one machine, each rank a process with one intra-op thread, the
global batch split evenly, for a fixed number of steps; prints one JSON line
with the ranks' training samples/s.

The embedding tables are nn.EmbeddingBag(sparse=False), so DDP all-reduces
every table's full gradient each step, as a DDP user gets by wrapping the
whole model (ferry's PS moves only the touched rows; this gap is what the
comparison shows). The embeddings take row-wise Adagrad on that dense
gradient (rows whose gradient is zero stay as they are, as in ferry), the
dense layers Adam.

Usage: torch_dlrm_ddp.py --data DIR --ranks 2 [--batch 128] [--steps 200]
         [--model-json small.json] [--lr 0.001] [--embedding-lr 0.05]
Run with Debian's /usr/bin/python3 (python3-torch).
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_dlrm  # noqa: E402  (same model, reader and spec defaults)


class DenseRowwiseAdagrad:
    """Row-wise Adagrad on dense table gradients: a += mean(g^2) per row,
    w -= lr g / (sqrt(a) + eps); an untouched row has g = 0 and stays."""

    def __init__(self, tables, lr, eps=1e-8):
        self.tables, self.lr, self.eps = tables, lr, eps
        self.acc = [torch.zeros(t.weight.shape[0], 1) for t in tables]

    @torch.no_grad()
    def step(self):
        for t, acc in zip(self.tables, self.acc):
            g = t.weight.grad
            acc.add_(g.pow(2).mean(dim=1, keepdim=True))
            t.weight.sub_(self.lr * g / (acc.sqrt() + self.eps))


def run(rank, args, port, result_path):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    torch.manual_seed(args.seed)
    spec = {"embedding_dim": 16, "bottom": [512, 256, 64], "top": [512, 256]}
    if args.model_json:
        with open(args.model_json) as f:
            spec.update(json.load(f))
    maps = [dict() for _ in range(torch_dlrm.NUM_FIELDS)]
    xd, xi, y = torch_dlrm.read_tsv(os.path.join(args.data, "train.tsv"), maps, grow=True)
    rows = [len(m) + 1 for m in maps]
    net = torch_dlrm.Dlrm(rows, spec["embedding_dim"], list(spec["bottom"]), list(spec["top"]))
    for e in net.emb:
        e.sparse = False  # dense gradients: DDP all-reduces whole tables
    model = nn.parallel.DistributedDataParallel(net)
    dense_opt = torch.optim.Adam(list(net.bot_l.parameters()) + list(net.top_l.parameters()),
                                 lr=args.lr)
    emb_opt = DenseRowwiseAdagrad(list(net.emb), args.embedding_lr)
    loss_fn = nn.BCEWithLogitsLoss()
    local = args.batch // args.ranks
    gen = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(y), generator=gen)
    dist.barrier()

    def one_step(s):
        b0 = (s * args.batch) % max(1, len(y) - args.batch)
        idx = order[b0 + rank * local:b0 + (rank + 1) * local]
        loss = loss_fn(model(xd[idx], xi[idx]), y[idx])
        dense_opt.zero_grad(set_to_none=False)
        for e in net.emb:
            e.weight.grad = None
        loss.backward()
        dense_opt.step()
        emb_opt.step()

    for s in range(args.warmup_steps):
        one_step(s)
    dist.barrier()
    start = time.time()
    for s in range(args.steps):
        one_step(args.warmup_steps + s)
    dist.barrier()
    secs = time.time() - start
    if rank == 0:
        with open(result_path, "w") as f:
            json.dump({"ranks": args.ranks, "steps": args.steps, "global_batch": args.batch,
                       "train_seconds": secs,
                       "samples_per_second": args.steps * local * args.ranks / secs,
                       "embedding_rows": sum(rows),
                       "table_bytes": sum(rows) * spec["embedding_dim"] * 4}, f)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--model-json", default="")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128, help="global batch")
    ap.add_argument("--steps", type=int, default=200, help="timed steps")
    ap.add_argument("--warmup-steps", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--embedding-lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--port", type=int, default=29517)
    args = ap.parse_args()
    if args.batch % args.ranks:
        sys.exit("--batch must divide evenly over --ranks")
    result = os.path.join(os.path.dirname(os.path.abspath(args.data)), ".ddp_result.json")
    mp.spawn(run, args=(args, args.port, result), nprocs=args.ranks, join=True)
    with open(result) as f:
        print(f.read())
    os.remove(result)


if __name__ == "__main__":
    main()
