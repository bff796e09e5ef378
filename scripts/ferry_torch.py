#!/usr/bin/python3
"""Moves models between PyTorch and ferry (format ferry.model.v1).

A ferry model directory holds
  model.json         {"format": "ferry.model.v1", "input": {"shape": [...],
                     "scale": s, "mean": m, "std": d}, "classes": K,
                     "layers": [{"type": <torch.nn class>, "args": {...}}]}
  model.safetensors  the weights, named as nn.Sequential(*layers).state_dict()
                     names them.
The model sees (pixel * scale - mean) / std for raw pixels 0-255.

As a library (Debian's python3-torch; no other dependency):
  import ferry_torch
  ferry_torch.export_sequential(model, "out/m", input_shape=[1, 28, 28],
                                classes=10)
  model, spec = ferry_torch.load_sequential("out/m")

As a command:
  scripts/ferry_torch.py eval DIR [--data-dir D]   test accuracy with PyTorch
  scripts/ferry_torch.py train --preset mlp|convnet --out DIR [--steps N]
                                                   train briefly, export
Both print one JSON line (test_accuracy, test_loss, samples).
"""

import argparse
import gzip
import json
import os
import struct
import sys

import torch
from torch import nn

FORMAT = "ferry.model.v1"
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
# ferry's Fashion-MNIST normalization (data/dataset.h).
FASHION_MEAN, FASHION_STD = 0.2860, 0.3530

_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16",
           torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32"}
_FROM_NAME = {v: k for k, v in _DTYPES.items()}


def write_safetensors(path, tensors, metadata=None):
    """Writes an ordered dict name -> tensor in the safetensors format."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        if t.dtype not in _DTYPES:
            raise ValueError(f"{name}: dtype {t.dtype} is not supported")
        data = t.numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read_safetensors(path):
    """Returns an ordered dict name -> tensor (in data-offset order)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError(f"{path}: header of {n} bytes is truncated")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    entries = sorted(((k, v) for k, v in header.items()
                      if k != "__metadata__"),
                     key=lambda kv: kv[1]["data_offsets"][0])
    out = {}
    for name, e in entries:
        begin, end = e["data_offsets"]
        dtype = _FROM_NAME[e["dtype"]]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype)
        out[name] = t.reshape(e["shape"]).clone()
    return out


def _pair(v):
    return list(v) if isinstance(v, (tuple, list)) else v


def layer_spec(module):
    """{"type", "args"} of one torch.nn module ferry knows."""
    kind = type(module).__name__
    if kind == "Linear":
        args = {"in_features": module.in_features,
                "out_features": module.out_features,
                "bias": module.bias is not None}
    elif kind == "Conv2d":
        if module.dilation not in ((1, 1), 1) or module.groups != 1:
            raise ValueError("Conv2d with dilation or groups is not supported")
        args = {"in_channels": module.in_channels,
                "out_channels": module.out_channels,
                "kernel_size": _pair(module.kernel_size),
                "stride": _pair(module.stride),
                "padding": _pair(module.padding),
                "bias": module.bias is not None}
    elif kind in ("MaxPool2d", "AvgPool2d"):
        args = {"kernel_size": _pair(module.kernel_size),
                "stride": _pair(module.stride),
                "padding": _pair(module.padding)}
    elif kind == "Dropout":
        args = {"p": module.p}
    elif kind in ("ReLU", "Flatten"):
        args = {}
    elif kind in ("BatchNorm1d", "BatchNorm2d"):
        args = {"num_features": module.num_features, "eps": module.eps,
                "momentum": module.momentum}
    else:
        raise ValueError(f"ferry has no layer for torch.nn.{kind}")
    return {"type": kind, "args": args}


def export_sequential(model, out_dir, input_shape, classes, scale=1 / 255.0,
                      mean=FASHION_MEAN, std=FASHION_STD):
    """Writes out_dir/model.json and out_dir/model.safetensors."""
    if not isinstance(model, nn.Sequential):
        raise TypeError("export_sequential takes an nn.Sequential")
    os.makedirs(out_dir, exist_ok=True)
    spec = {"format": FORMAT,
            "input": {"shape": list(input_shape), "scale": scale,
                      "mean": mean, "std": std},
            "classes": classes,
            "layers": [layer_spec(m) for m in model]}
    with open(os.path.join(out_dir, "model.json"), "w") as f:
        json.dump(spec, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(out_dir, "model.safetensors"),
                      model.state_dict())
    return spec


def load_sequential(model_dir):
    """(nn.Sequential with the directory's weights, its spec dict)."""
    with open(os.path.join(model_dir, "model.json")) as f:
        spec = json.load(f)
    if spec.get("format") != FORMAT:
        raise ValueError(f"{model_dir}: format {spec.get('format')!r}, "
                         f"expected {FORMAT}")
    model = nn.Sequential(*[getattr(nn, l["type"])(**l["args"])
                            for l in spec["layers"]])
    state = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    model.load_state_dict(state, strict=True)
    return model, spec


def preset(name):
    """The torch side of ferry's presets (model/ presets)."""
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(),
                             nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10)), [784]
    if name == "convnet":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 1),
            nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
            nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(128, 10)), [1, 28, 28]
    raise ValueError(f"unknown preset {name!r}: mlp or convnet")


def _idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path,
                                                                 "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    t = torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8)
    return t.reshape(dims)


def load_split(data_dir, split, spec_input):
    prefix = "train" if split == "train" else "t10k"
    images = _idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = _idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = images.float() * spec_input["scale"]
    x = (x - spec_input["mean"]) / spec_input["std"]
    return x.reshape([x.shape[0]] + list(spec_input["shape"])), labels.long()


def evaluate(model, x, y, batch=1000):
    model.eval()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for i in range(0, len(y), batch):
            out = model(x[i:i + batch])
            loss += nn.functional.cross_entropy(out, y[i:i + batch],
                                                reduction="sum").item()
            correct += (out.argmax(1) == y[i:i + batch]).sum().item()
    return {"test_accuracy": correct / len(y), "test_loss": loss / len(y),
            "samples": len(y)}


def main():
    torch.set_num_threads(1)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("eval", help="test accuracy of a ferry model dir")
    e.add_argument("dir")
    e.add_argument("--data-dir", default=FASHION_MNIST)
    t = sub.add_parser("train", help="train a preset briefly and export it")
    t.add_argument("--preset", default="mlp", choices=["mlp", "convnet"])
    t.add_argument("--out", required=True)
    t.add_argument("--steps", type=int, default=200)
    t.add_argument("--batch", type=int, default=64)
    t.add_argument("--lr", type=float, default=0.05)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--data-dir", default=FASHION_MNIST)
    a = p.parse_args()
    if a.cmd == "eval":
        model, spec = load_sequential(a.dir)
        x, y = load_split(a.data_dir, "test", spec["input"])
        print(json.dumps(evaluate(model, x, y)))
        return 0
    torch.manual_seed(a.seed)
    model, shape = preset(a.preset)
    spec_input = {"shape": shape, "scale": 1 / 255.0, "mean": FASHION_MEAN,
                  "std": FASHION_STD}
    x, y = load_split(a.data_dir, "train", spec_input)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    model.train()
    for step in range(a.steps):
        idx = torch.randint(0, len(y), (a.batch,))
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
    export_sequential(model, a.out, shape, 10)
    tx, ty = load_split(a.data_dir, "test", spec_input)
    print(json.dumps(evaluate(model, tx, ty)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
