#!/usr/bin/python3
"""A ferry DLRM export in PyTorch (Debian's python3-torch and numpy).

`ferry-worker --standalone --model dlrm ... --export DIR` writes
(ps/dlrm_export.h, docs/sparse.md "Export and import"):
  DIR/model.json         the DLRM spec ("kind": "dlrm")
  DIR/model.safetensors  the dense MLPs under PyTorch names (bot_l.*, top_l.*);
                         its metadata says what an id without a row reads as
  DIR/embeddings.ckpt    every table's rows in ferry's checkpoint format
                         (common/checkpoint_io.h, common/checkpoint_tables.h)

This script reads all three and scores Criteo TSV rows with the same model
in PyTorch: bottom MLP on log1p(max(x, 0)) of the 13 integers, one row per
categorical field (sum pooling of one id: the row itself), the strict lower
triangle of the 27 x 27 Gram matrix after the bottom output, top MLP,
sigmoid. An id without a row reads as ferry reads it: its initial values
(InitialRowValue, compute/row_optimizer_math.h, recomputed here bit for bit)
or zeros under admission.

  ferry_dlrm_torch.py eval DIR --data D   test AUC and log loss of D/test.tsv
                                          as JSON (one line)

As a module: load_dlrm(DIR) -> (spec, state_dict, tables, metadata);
read_tables(path) -> {table: (ids, values, pending)}; score(...).
"""
import argparse
import json
import math
import os
import struct
import sys
import zlib

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ferry_torch import read_safetensors  # noqa: E402

MAGIC = b"FERRYCKP"
MISSING_ID = 1 << 32  # data/criteo_format.h kCriteoMissingId
NUM_DENSE = 13
MASK = (1 << 64) - 1


def read_tables(path):
    """Returns {table: (ids uint64 [rows], values float32 [rows, row_floats],
    pending {id: count})} of a ferry checkpoint file (format 2 or 3)."""
    raw = np.memmap(path, dtype=np.uint8, mode="r")  # read in place
    if bytes(raw[:8]) != MAGIC:
        raise ValueError(f"{path}: not a ferry checkpoint")
    (crc,) = struct.unpack_from("<I", raw, len(raw) - 4)
    if zlib.crc32(memoryview(raw)[:-4]) != crc:
        raise ValueError(f"{path}: checksum mismatch")
    pos = 8
    fmt, job_len = struct.unpack_from("<II", raw, pos)
    if fmt not in (2, 3):
        raise ValueError(f"{path}: format {fmt} holds no tables")
    pos += 8 + job_len + 4 + 4 + 8 + 8 + 8 + 8
    num_state, elements = struct.unpack_from("<IQ", raw, pos)
    pos += 12 + (num_state + 1) * elements * 4
    (count,) = struct.unpack_from("<I", raw, pos)
    pos += 4
    tables = {}
    for _ in range(count):
        table, row_floats, rows = struct.unpack_from("<iIQ", raw, pos)
        pos += 16
        ids = np.frombuffer(raw, np.uint64, rows, pos)
        pos += 16 * rows  # ids, then last-seen steps
        values = np.frombuffer(raw, np.float32, rows * row_floats, pos)
        pos += 4 * rows * row_floats
        (pending,) = struct.unpack_from("<Q", raw, pos)
        pos += 8
        p_ids = np.frombuffer(raw, np.uint64, pending, pos)
        p_counts = np.frombuffer(raw, np.int32, pending, pos + 8 * pending)
        pos += 20 * pending
        if fmt == 3:
            pos += 40  # the event counters
        tables[table] = (ids, values.reshape(rows, row_floats),
                         dict(zip(p_ids.tolist(), p_counts.tolist())))
    if pos != len(raw) - 4:
        raise ValueError(f"{path}: {len(raw) - 4 - pos} bytes left over")
    return tables


def mix64(z):
    """splitmix64's finalizer (compute/kernel_math.h Mix64) on uint64 arrays."""
    with np.errstate(over="ignore"):
        z = np.asarray(z, np.uint64) + np.uint64(0x9e3779b97f4a7c15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
        return z ^ (z >> np.uint64(31))


def initial_rows(seed, table, ids, dim, scale):
    """InitialRowValue for every id (uint64 [n]) and element: float32 [n, dim]."""
    h = mix64(np.uint64(seed) ^ np.uint64(0xbb67ae8584caa73b))
    h = mix64(h ^ np.uint64(table & 0xffffffff))
    h = mix64(h ^ ids.astype(np.uint64))[:, None]
    h = mix64(h ^ np.arange(dim, dtype=np.uint64)[None, :])
    u = (h >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    return (np.float32(2.0) * u - np.float32(1.0)) * np.float32(scale)


def load_dlrm(model_dir):
    with open(os.path.join(model_dir, "model.json")) as f:
        spec = json.load(f)
    if spec.get("kind") != "dlrm":
        raise ValueError(f"{model_dir}/model.json is not a DLRM")
    path = os.path.join(model_dir, "model.safetensors")
    state = read_safetensors(path)
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        metadata = json.loads(f.read(n)).get("__metadata__", {})
    tables = read_tables(os.path.join(model_dir, "embeddings.ckpt"))
    return spec, state, tables, metadata


def read_tsv(path, fields):
    """dense float32 [N, 13], ids uint64 [N, fields], labels float32 [N]."""
    dense, ids, labels = [], [], []
    with open(path) as f:
        for line in f:
            cols = line.rstrip("\r\n").split("\t")
            if len(cols) != 1 + NUM_DENSE + fields:
                continue
            labels.append(float(cols[0]))
            dense.append([math.log1p(max(int(c), 0)) if c else 0.0
                          for c in cols[1:1 + NUM_DENSE]])
            ids.append([int(c, 16) if c else MISSING_ID
                        for c in cols[1 + NUM_DENSE:]])
    return (np.asarray(dense, np.float32), np.asarray(ids, np.uint64),
            np.asarray(labels, np.float32))


def embed(tables, metadata, field_ids, table, dim):
    """The rows ferry reads for `field_ids` (uint64 [N]) of `table`: a
    stored row's values; for an id without one zeros until admitted
    (ferry.embedding.admit_count), then its initial values (uniform from
    seed and init_scale, or zeros: ferry.embedding.initial_values)."""
    ids, values, pending = tables[table]
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    at = np.searchsorted(sorted_ids, field_ids)
    at_clipped = np.minimum(at, max(len(sorted_ids) - 1, 0))
    have = (at < len(sorted_ids)) & (sorted_ids[at_clipped] == field_ids) \
        if len(sorted_ids) else np.zeros(len(field_ids), bool)
    out = np.zeros((len(field_ids), dim), np.float32)
    out[have] = values[order[at_clipped[have]], :dim]
    unseen = ~have
    admit = int(metadata["ferry.embedding.admit_count"])
    if admit > 1:
        counted = np.array([pending.get(int(i), 0) >= admit
                            for i in field_ids[unseen].tolist()], bool)
        unseen[np.flatnonzero(unseen)[~counted]] = False
    if unseen.any() and metadata["ferry.embedding.initial_values"] == "uniform":
        out[unseen] = initial_rows(
            int(metadata["ferry.embedding.seed"]), table, field_ids[unseen],
            dim, float(metadata["ferry.embedding.init_scale"]))
    return out


def mlp(state, prefix, x, relu_last):
    names = sorted({k.split(".")[1] for k in state if k.startswith(prefix)},
                   key=int)
    for i, n in enumerate(names):
        x = x @ state[f"{prefix}.{n}.weight"].T + state[f"{prefix}.{n}.bias"]
        if relu_last or i + 1 < len(names):
            x = torch.relu(x)
    return x


@torch.no_grad()
def score(spec, state, tables, metadata, dense, ids):
    """sigmoid(logit) of every row: float64 numpy [N]."""
    dim = spec["embedding_dim"]
    x = mlp(state, "bot_l", torch.from_numpy(dense), relu_last=True)
    pooled = [torch.from_numpy(embed(tables, metadata, ids[:, f], f, dim))
              for f in range(ids.shape[1])]
    z = torch.stack([x] + pooled, dim=1)
    gram = torch.bmm(z, z.transpose(1, 2))
    li, lj = torch.tril_indices(z.shape[1], z.shape[1], offset=-1)
    logits = mlp(state, "top_l", torch.cat([x, gram[:, li, lj]], dim=1),
                 relu_last=False).squeeze(1)
    return torch.sigmoid(logits.double()).numpy()


def auc(scores, labels):
    """Rank AUC, ties counting one half (as data/ctr_metrics.h)."""
    order = np.argsort(scores, kind="mergesort")
    s = scores[order]
    ranks = np.empty(len(s), dtype=np.float64)
    _, first, counts = np.unique(s, return_index=True, return_counts=True)
    for f0, c in zip(first, counts):
        ranks[f0:f0 + c] = f0 + (c + 1) / 2.0
    y = labels[order]
    pos = y.sum()
    neg = len(y) - pos
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def logloss(p, y):
    """Mean binary cross-entropy, probabilities clipped to [1e-7, 1 - 1e-7]."""
    p = np.clip(p, 1e-7, 1 - 1e-7)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("eval", help="test AUC and log loss of an export")
    ev.add_argument("model_dir")
    ev.add_argument("--data", required=True, help="a Criteo directory")
    a = ap.parse_args()
    torch.set_num_threads(1)
    spec, state, tables, metadata = load_dlrm(a.model_dir)
    dense, ids, labels = read_tsv(os.path.join(a.data, "test.tsv"),
                                  spec.get("num_fields", 26))
    p = score(spec, state, tables, metadata, dense, ids)
    print(json.dumps({"test_auc": auc(p, labels),
                      "test_logloss": logloss(p, labels),
                      "samples": len(labels),
                      "rows": sum(len(t[0]) for t in tables.values())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
