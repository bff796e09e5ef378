#!/usr/bin/python3
"""A PyTorch model ferry's layer library cannot express, trained as a ferry
job's worker (docs/pytorch.md): a small transformer encoder classifying
generated token sequences. The job takes its model from its first worker:

  ferry local --mode ring --workers 2 --model external --dataset external:4096 \\
      --worker-command "examples/torch/train_transformer.py --samples 4096"

Every worker builds the model with the same seed; the first to join defines
the job's tensors and starting values, the others are checked against it.
The data: SAMPLES sequences of SEQ tokens in [0, VOCAB); a token's category
is token % 4 and a sequence's class is its most frequent category (the
lowest on a tie). Its training loop (example_worker.train_as_worker) is
plain PyTorch except for ft.join, job.batches, job.backward and job.step;
it prints one JSON line: this worker's steps, its share of the last
batches' accuracy and its summary.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

from example_worker import add_optimizer_arguments, test_set_evaluation, train_as_worker

CLASSES = 4


def token_data(samples, seq, vocab, seed):
    """(tokens [samples, seq] int64, labels [samples] int64), the same for a
    seed on every machine."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(vocab, (samples, seq), generator=g)
    counts = F.one_hot(x % CLASSES, CLASSES).sum(dim=1)
    # argmax returns the first maximum: the lowest category on a tie.
    return x, counts.argmax(dim=1)


class TokenClassifier(nn.Module):
    """Token and position embeddings, a transformer encoder (no dropout),
    mean pooling, a linear head."""

    def __init__(self, vocab, seq, d_model, heads, layers, batchnorm=False):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Parameter(torch.randn(seq, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=2 * d_model,
                                           dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        # Optional: two BatchNorm layers around a hidden layer on the pooled
        # features, a model with buffers.
        self.norm = nn.Sequential(nn.BatchNorm1d(d_model), nn.Linear(d_model, d_model),
                                  nn.BatchNorm1d(d_model)) if batchnorm else nn.Identity()
        self.head = nn.Linear(d_model, CLASSES)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens) + self.position)
        return self.head(self.norm(h.mean(dim=1)))


def build(args):
    """The model, the same for a seed in every worker."""
    torch.manual_seed(args.seed)
    return TokenClassifier(args.vocab, args.seq, args.d_model, args.heads, args.layers,
                           batchnorm=bool(args.batchnorm))


def arguments(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=4096,
                    help="the job's --dataset external:N must say the same N")
    ap.add_argument("--seq", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=32)
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--batchnorm", type=int, default=0,
                    help="1: two BatchNorm layers on the pooled features (running "
                         "statistics the job keeps consistent across workers)")
    ap.add_argument("--seed", type=int, default=0, help="model and data seed")
    ap.add_argument("--eval-samples", type=int, default=0,
                    help="> 0: the worker evaluates the job's weights (job.evaluate) on "
                         "this many generated sequences (seed + 1) at each epoch's end "
                         "and at the end")
    ap.add_argument("--evaluate", metavar="DIR",
                    help="no training: the accuracy of DIR/model.safetensors (an export) "
                         "on the --eval-samples sequences")
    # The first worker's optimizer and scheduler are the job's (--model
    # external); these defaults are also ferry local's own.
    add_optimizer_arguments(ap)
    return ap.parse_args(argv)


def test_set(args):
    """The --eval-samples held-out sequences (seed + 1); None without."""
    if args.eval_samples <= 0:
        return None
    return torch.utils.data.TensorDataset(
        *token_data(args.eval_samples, args.seq, args.vocab, args.seed + 1))


def main():
    args = arguments()
    torch.set_num_threads(1)
    model = build(args)
    if args.evaluate:
        if args.eval_samples <= 0:
            sys.exit("--evaluate needs --eval-samples N")
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                        "..", "..", "scripts"))
        import ferry_torch  # safetensors
        model.load_state_dict(ferry_torch.read_safetensors(
            os.path.join(args.evaluate, "model.safetensors")), strict=True)
        with torch.no_grad():
            scores = test_set_evaluation(test_set(args))(model)
        print(json.dumps({"test_accuracy": scores["accuracy"], "test_loss": scores["loss"],
                          "samples": args.eval_samples}))
        return
    x, y = token_data(args.samples, args.seq, args.vocab, args.seed)
    train_as_worker(model, torch.utils.data.TensorDataset(x, y), args, test_set(args))


if __name__ == "__main__":
    main()
