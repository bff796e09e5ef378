"""The worker script of deploy/k8s/components/torch-worker: a PyTorch
training script as a ferry worker (docs/pytorch.md). Replace this file with
your own; keep its shape: build the model, ft.join, train job.batches(),
evaluate with job.evaluate.

This one: a small transformer encoder classifying generated token sequences
(no dataset to mount): SAMPLES sequences of SEQ tokens in [0, VOCAB); a
sequence's class is its most frequent token % 4. The job's FERRY_DATASET
must be external:SAMPLES. Every replica builds the same model (seed 0); the
first to join defines the job's tensors, optimizer and starting values.

After the job (or when the job has finished before this pod started) the
pod stays idle until SIGTERM when FERRY_AFTER_FINISH=wait, as ferry-worker
does: a Deployment would restart an exited container.
"""
import json
import os
import signal
import sys

import torch
import torch.nn.functional as F
from torch import nn

import ferry.torch as ft

SAMPLES, SEQ, VOCAB, CLASSES = 8192, 16, 64, 4


def tokens(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(VOCAB, (n, SEQ), generator=g)
    return x, F.one_hot(x % CLASSES, CLASSES).sum(dim=1).argmax(dim=1)


class Classifier(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.position = nn.Parameter(torch.randn(SEQ, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, CLASSES)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x) + self.position).mean(dim=1))


def evaluate(test):
    x, y = test

    def fn(model):
        model.eval()
        logits = model(x)
        return {"accuracy": float((logits.argmax(1) == y).float().mean()),
                "loss": float(F.cross_entropy(logits, y))}
    return fn


def idle_if_asked():
    """With FERRY_AFTER_FINISH=wait: stays until SIGTERM (or SIGINT), then
    returns (the pod exits 0)."""
    if os.environ.get("FERRY_AFTER_FINISH") != "wait":
        return
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    print("the job has finished; idle until SIGTERM (FERRY_AFTER_FINISH=wait)", flush=True)
    signal.sigwait(stop)


def main():
    torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "1")))
    torch.manual_seed(0)
    model = Classifier()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    train = torch.utils.data.TensorDataset(*tokens(SAMPLES, 0))
    try:
        job = ft.join(model, opt)
    except RuntimeError as e:
        if "finished" not in str(e):
            raise
        print(f"not joining: {e}", flush=True)
        idle_if_asked()
        return 0
    with job:
        job.evaluate(evaluate(tokens(1024, 1)))
        for x, y in job.batches(train):
            job.backward(F.cross_entropy(model(x), y))
            job.step()
    print(json.dumps({"steps": job.steps, "evaluations": job.evaluations,
                      "end": job.summary.get("end_reason")}), flush=True)
    # Not when SIGTERM already came: during training, or while the job's
    # close() served this pod's hosted shard (torch-colocated-shards).
    if job.summary.get("end_reason") == "finished" and not job.stop_requested:
        idle_if_asked()
    return 0


if __name__ == "__main__":
    sys.exit(main())
