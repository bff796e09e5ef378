"""What the example scripts share: their optimizer arguments (the torch
optimizer and lr_scheduler a worker gives ft.join, which become the job's
in a --model external job; docs/pytorch.md, "The optimizer") and their
training loop as a ferry worker."""
import json
import resource

import torch
import torch.nn.functional as F
from torch.utils.data import default_collate

import ferry.torch as ft


def add_optimizer_arguments(ap, lr=0.05, weight_decay=5e-4):
    """--optimizer, --lr, --momentum, --nesterov, --weight-decay,
    --warmup-steps and --cosine-steps on the parser `ap`; the SGD defaults
    are ferry local's own."""
    ap.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd",
                    help="adamw: two parameter groups, no weight decay on biases and "
                         "norms (tensors of one dimension)")
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--nesterov", type=int, default=1, help="1 or 0")
    ap.add_argument("--weight-decay", type=float, default=weight_decay)
    ap.add_argument("--warmup-steps", type=int, default=0,
                    help="with --cosine-steps: a linear warm-up from lr/10 first")
    ap.add_argument("--cosine-steps", type=int, default=0,
                    help="> 0: a cosine lr schedule over this many steps "
                         "(torch.optim.lr_scheduler, stepped per step)")


def build_optimizer(model, args):
    """(optimizer, scheduler or None) as the arguments say."""
    if args.optimizer == "adamw":
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=args.lr)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                              nesterov=bool(args.nesterov), weight_decay=args.weight_decay)
    if args.cosine_steps <= 0:
        return opt, None
    schedulers = torch.optim.lr_scheduler
    cosine = schedulers.CosineAnnealingLR(opt, T_max=args.cosine_steps - args.warmup_steps)
    if args.warmup_steps <= 0:
        return opt, cosine
    warmup = schedulers.LinearLR(opt, start_factor=0.1, total_iters=args.warmup_steps)
    return opt, schedulers.SequentialLR(opt, [warmup, cosine], [args.warmup_steps])


def test_set_evaluation(dataset, batch=256):
    """fn(model) for job.evaluate: the model's accuracy and mean cross
    entropy on `dataset` (in eval mode: BatchNorm uses its running
    statistics)."""
    def evaluate(model):
        model.eval()
        correct, loss_sum = 0, 0.0
        for start in range(0, len(dataset), batch):
            xb, yb = default_collate([dataset[i] for i in
                                      range(start, min(start + batch, len(dataset)))])
            logits = model(xb)
            loss_sum += F.cross_entropy(logits, yb, reduction="sum").item()
            correct += int((logits.argmax(dim=1) == yb).sum())
        return {"accuracy": correct / len(dataset), "loss": loss_sum / len(dataset)}
    return evaluate


def peak_rss_mib():
    """This process's peak resident memory in MiB: VmHWM of its own
    address space (unlike ru_maxrss, it does not carry over the parent's
    peak across fork and exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def process_cpu():
    """This process's CPU seconds so far (every thread, user + system) and
    its minor page faults."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, usage.ru_minflt


def cost_per_step(since, steps):
    """CPU seconds and minor page faults per step after `since` ((steps,
    cpu, faults) then) up to `steps` steps: what a step cost this process,
    its communication threads included; less sensitive than a clock to
    other load on a shared machine. {} without steps to measure."""
    if since is None or steps <= since[0]:
        return {}
    cpu, faults = process_cpu()
    return {"cpu_seconds_per_step": (cpu - since[1]) / (steps - since[0]),
            "minor_faults_per_step": (faults - since[2]) / (steps - since[0])}


def train_as_worker(model, dataset, args, test_dataset=None):
    """Joins the job (FERRY_COORDINATOR) with `model` and the optimizer the
    arguments say, trains cross entropy on the leases of `dataset` until the
    job ends, and prints one JSON line: this worker's steps, its accuracy on
    its last batches (on the weights before each step), the evaluations it
    ran, its peak resident memory, its CPU time and page faults per step
    after its first, and its summary. With `test_dataset` the worker evaluates the job's
    weights on it (job.evaluate) at each epoch's end and at the job's end."""
    opt, scheduler = build_optimizer(model, args)
    correct = seen = 0
    after_first = None  # (steps, cpu, faults) after this worker's first step
    with ft.join(model, opt, scheduler=scheduler) as job:
        if test_dataset is not None:
            job.evaluate(test_set_evaluation(test_dataset))
        for xb, yb in job.batches(dataset):
            logits = model(xb)
            job.backward(F.cross_entropy(logits, yb))
            job.step()
            if after_first is None:
                after_first = (job.steps, *process_cpu())
            if job.steps % 20 == 0:  # the last 20 batches' accuracy
                correct = seen = 0
            correct += int((logits.argmax(dim=1) == yb).sum())
            seen += len(yb)
    print(json.dumps({"steps": job.steps, "mode": job.mode,
                      "recent_train_accuracy": correct / seen if seen else None,
                      "evaluations": job.evaluations,
                      "peak_rss_mib": peak_rss_mib(),
                      **cost_per_step(after_first, job.steps),
                      "summary": job.summary}))
