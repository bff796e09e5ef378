#!/usr/bin/env python3
"""PyTorch baseline for ferry's DLRM (issue 20): the same model trained in one
process on the same Criteo TSV files (DIR/train.tsv, DIR/test.tsv, as
`ferry data ctr` writes them), reporting test AUC and log loss.

The model is ferry's (model/dlrm_spec.h), built as facebookresearch/dlrm
builds it: one nn.EmbeddingBag(mode='sum', sparse=True) per categorical
field, a bottom MLP (ReLU after every layer) on log(1 + max(x, 0)) of the 13
integers, the strict lower triangle of the Gram matrix of the 27 vectors
concatenated after the bottom output, a top MLP to one logit, BCE with
logits. Initial values as ferry's: He-normal weights (Xavier-normal for the
last), zero biases, embedding rows uniform in [-1/sqrt(dim), 1/sqrt(dim)).

Ids: each field's distinct values in train.tsv (the empty value included)
get dense indices 1..n in order of first appearance; a test value never seen
in training maps to the field's shared OOV row 0, which training never
touches (it keeps its initial values; ferry's unseen ids read their own
initial values: both are untrained random vectors).

Embedding optimizer (--embedding-optimizer):
  rowwise-adagrad (default): FBGEMM's row-wise Adagrad, exactly ferry's
      (compute/row_optimizer_math.h): per row a += mean(g^2), w -= lr g /
      (sqrt(a) + eps), applied to the touched rows from the sparse gradient.
      torch has no built-in row-wise Adagrad; this is ~10 lines.
  adagrad: torch.optim.Adagrad on the sparse gradients (one accumulator per
      element, not per row).
  sgd: torch.optim.SGD on the sparse gradients.

Usage: torch_dlrm.py --data DIR [--epochs 1] [--batch 128] [--optimizer adam]
         [--lr 0.001] [--embedding-lr 0.05] [--model-json small.json] ...
Prints one JSON line (test_auc, test_logloss, samples_per_second, ...).
Run with Debian's /usr/bin/python3 (python3-torch); one intra-op thread.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "scripts"))
from ferry_dlrm_torch import auc, logloss  # noqa: E402  (data/ctr_metrics.h's)

NUM_DENSE = 13
NUM_FIELDS = 26


def read_tsv(path, maps, grow):
    """Returns dense [N,13] float32, ids [N,26] int64, labels [N] float32."""
    dense, ids, labels = [], [], []
    with open(path, "r") as f:
        for line in f:
            cols = line.rstrip("\r\n").split("\t")
            if len(cols) != 1 + NUM_DENSE + NUM_FIELDS:
                continue
            labels.append(float(cols[0]))
            dense.append([math.log1p(max(int(c), 0)) if c else 0.0
                          for c in cols[1:1 + NUM_DENSE]])
            row = []
            for f_i, c in enumerate(cols[1 + NUM_DENSE:]):
                m = maps[f_i]
                key = c.lower()
                idx = m.get(key)
                if idx is None:
                    if grow:
                        idx = len(m) + 1
                        m[key] = idx
                    else:
                        idx = 0
                row.append(idx)
            ids.append(row)
    return (torch.tensor(dense, dtype=torch.float32),
            torch.tensor(ids, dtype=torch.int64),
            torch.tensor(labels, dtype=torch.float32))


def mlp(sizes, relu_last):
    layers = []
    for i in range(len(sizes) - 1):
        lin = nn.Linear(sizes[i], sizes[i + 1])
        last = i + 2 == len(sizes)
        fan_in, fan_out = sizes[i], sizes[i + 1]
        std = math.sqrt(2.0 / (fan_in + fan_out)) if last and not relu_last \
            else math.sqrt(2.0 / fan_in)
        nn.init.normal_(lin.weight, 0.0, std)
        nn.init.zeros_(lin.bias)
        layers.append(lin)
        if relu_last or not last:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Dlrm(nn.Module):
    def __init__(self, rows, dim, bottom, top):
        super().__init__()
        self.emb = nn.ModuleList()
        scale = 1.0 / math.sqrt(dim)
        for n in rows:
            e = nn.EmbeddingBag(n, dim, mode="sum", sparse=True)
            nn.init.uniform_(e.weight, -scale, scale)
            self.emb.append(e)
        self.bot_l = mlp([NUM_DENSE] + bottom + [dim], relu_last=True)
        vectors = NUM_FIELDS + 1
        inter = dim + vectors * (vectors - 1) // 2
        self.top_l = mlp([inter] + top + [1], relu_last=False)
        li, lj = torch.tril_indices(vectors, vectors, offset=-1)
        self.register_buffer("li", li)
        self.register_buffer("lj", lj)

    def forward(self, dense, ids):
        b = dense.shape[0]
        offsets = torch.arange(b, dtype=torch.int64)
        x = self.bot_l(dense)
        pooled = [e(ids[:, f].contiguous(), offsets) for f, e in enumerate(self.emb)]
        z = torch.stack([x] + pooled, dim=1)  # [B, 27, dim]
        gram = torch.bmm(z, z.transpose(1, 2))
        tri = gram[:, self.li, self.lj]
        return self.top_l(torch.cat([x, tri], dim=1)).squeeze(1)


class RowwiseAdagrad:
    """ferry's / FBGEMM's row-wise Adagrad over sparse embedding gradients."""

    def __init__(self, tables, lr, eps=1e-8):
        self.tables, self.lr, self.eps = tables, lr, eps
        self.acc = [torch.zeros(t.weight.shape[0]) for t in tables]

    def zero_grad(self):
        for t in self.tables:
            t.weight.grad = None

    @torch.no_grad()
    def step(self):
        for t, acc in zip(self.tables, self.acc):
            g = t.weight.grad.coalesce()
            rows, vals = g.indices()[0], g.values()
            a = acc[rows] + vals.pow(2).mean(dim=1)
            acc[rows] = a
            t.weight.index_add_(0, rows, -self.lr * vals / (a.sqrt() + self.eps)[:, None])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--model-json", default="",
                    help="a ferry DLRM JSON (kind dlrm); default: the dlrm preset")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--optimizer", default="adam", choices=["sgd", "momentum", "adam"])
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--embedding-optimizer", default="rowwise-adagrad",
                    choices=["rowwise-adagrad", "adagrad", "sgd"])
    ap.add_argument("--embedding-lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-rows", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    spec = {"embedding_dim": 16, "bottom": [512, 256, 64], "top": [512, 256],
            "num_fields": 26, "dense_features": 13, "pooling": "sum"}
    if args.model_json:
        with open(args.model_json) as f:
            spec.update(json.load(f))
    assert spec["num_fields"] == NUM_FIELDS and spec["dense_features"] == NUM_DENSE
    assert spec.get("pooling", "sum") == "sum"

    t0 = time.time()
    maps = [dict() for _ in range(NUM_FIELDS)]
    xd, xi, y = read_tsv(os.path.join(args.data, "train.tsv"), maps, grow=True)
    td, ti, ty = read_tsv(os.path.join(args.data, "test.tsv"), maps, grow=False)
    load_s = time.time() - t0
    rows = [len(m) + 1 for m in maps]

    net = Dlrm(rows, spec["embedding_dim"], list(spec["bottom"]), list(spec["top"]))
    dense_params = list(net.bot_l.parameters()) + list(net.top_l.parameters())
    if args.optimizer == "adam":
        dense_opt = torch.optim.Adam(dense_params, lr=args.lr, weight_decay=args.weight_decay)
    elif args.optimizer == "momentum":
        dense_opt = torch.optim.SGD(dense_params, lr=args.lr, momentum=args.momentum,
                                    nesterov=True, weight_decay=args.weight_decay)
    else:
        dense_opt = torch.optim.SGD(dense_params, lr=args.lr, weight_decay=args.weight_decay)
    tables = list(net.emb)
    if args.embedding_optimizer == "rowwise-adagrad":
        emb_opt = RowwiseAdagrad(tables, args.embedding_lr)
    elif args.embedding_optimizer == "adagrad":
        emb_opt = torch.optim.Adagrad([t.weight for t in tables], lr=args.embedding_lr)
    else:
        emb_opt = torch.optim.SGD([t.weight for t in tables], lr=args.embedding_lr)
    loss_fn = nn.BCEWithLogitsLoss()

    n = len(y)
    gen = torch.Generator().manual_seed(args.seed)
    train_s = 0.0
    epochs = []
    for epoch in range(args.epochs):
        start = time.time()
        order = torch.randperm(n, generator=gen)
        loss_sum = 0.0
        net.train()
        for b0 in range(0, n, args.batch):
            idx = order[b0:b0 + args.batch]
            logits = net(xd[idx], xi[idx])
            loss = loss_fn(logits, y[idx])
            dense_opt.zero_grad(set_to_none=True)
            emb_opt.zero_grad()
            loss.backward()
            dense_opt.step()
            emb_opt.step()
            loss_sum += loss.item() * len(idx)
        secs = time.time() - start
        train_s += secs
        net.eval()
        with torch.no_grad():
            probs = torch.cat([torch.sigmoid(net(td[i:i + 8192], ti[i:i + 8192]))
                               for i in range(0, len(ty), 8192)]).numpy().astype(np.float64)
        labels = ty.numpy().astype(np.float64)
        e = {"epoch": epoch + 1, "train_loss": loss_sum / n, "test_auc": auc(probs, labels),
             "test_logloss": logloss(probs, labels), "samples_per_second": n / secs}
        epochs.append(e)
        print(json.dumps(e), flush=True, file=sys.stderr)
    oov = int((ti == 0).sum())
    print(json.dumps({
        "test_auc": epochs[-1]["test_auc"], "test_logloss": epochs[-1]["test_logloss"],
        "samples_per_second": n * args.epochs / train_s, "train_seconds": train_s,
        "load_seconds": load_s, "train_rows": n, "test_rows": len(ty),
        "embedding_rows": sum(rows), "test_oov_fraction": oov / ti.numel(),
        "embedding_optimizer": args.embedding_optimizer, "per_epoch": epochs}))


if __name__ == "__main__":
    main()
