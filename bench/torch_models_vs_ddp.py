#!/usr/bin/python3
"""PyTorch models trained as ferry workers vs PyTorch DDP (gloo), on the
same script core: the model and data builders of examples/torch
(train_resnet.py: torchvision's ResNet-18 on generated 32x32 images;
train_transformer.py: a 2-layer transformer encoder, d=128, on generated
token sequences), the same global batch and momentum SGD, 2 workers of one
torch thread each.

  bench/torch_models_vs_ddp.py [--models resnet18,transformer] [--rounds 3]

Per model and round, in an order that alternates between rounds:
  - ddp:  2 processes, DistributedDataParallel over gloo on loopback;
  - ring: ferry local --mode ring --workers 2, the example as the worker;
  - ps:   ferry local --mode ps --workers 2 --shards 2;
  - ps-colocated: the same with --colocated-shards (shard i inside worker
    i's process: two processes, as DDP's; only with --runs naming it).
And at the start of each round: one process computing the same per-worker
batch with no communication (the compute floor, "floor").

Figures per run:
  - samples/s: DDP over its timed steps (after --warmup steps), from the
    slowest rank's clock; ferry from its throughput window (the job's
    steps after the first, on the workers' clocks: StatusResponse.
    window_*), both over the same number of steps;
  - exposed communication per step: DDP, the step time minus the same
    rank's step time under no_sync() (no all-reduce), measured in the same
    process; ferry, the workers' comm_seconds (the waits in BeginStep and
    FinishStep that backward did not hide) per report;
  - CPU seconds per step per worker process (every thread, user + system:
    getrusage over the timed steps; ferry's workers over their steps
    after the first): what a step costs, the figure least disturbed by
    other load on a shared machine. Its excess over the floor's is what
    the communication (and ferry's bookkeeping) costs in CPU;
  - peak resident memory per worker process (VmHWM, as
    examples/torch/example_worker.py reports it for ferry's workers).
Every samples/s is checked against the compute floor: 2 workers cannot
exceed 2x one process that only computes (2 cores); a figure more than 5 %
above 2x the fastest floor measured so far is reported as impossible and
the run fails.

Prints one JSON line per run and a table of medians with the ratios
ring/DDP and PS/DDP, and each round's ratio against that round's DDP run;
--out FILE writes the JSON lines.
Run with Debian's /usr/bin/python3 after scripts/build (needs python3-torch
and python3-torchvision: scripts/setup --with-peers).
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "examples", "torch")
LR, MOMENTUM = 0.05, 0.9


def model_setup(name, samples):
    """(example module, its argument list) for `name`."""
    sys.path.insert(0, EXAMPLES)
    if name == "resnet18":
        import train_resnet as example
        return example, ["--data", "synthetic", "--samples", str(samples)]
    if name == "transformer":
        import train_transformer as example
        return example, ["--samples", str(samples), "--d-model", "128", "--heads", "4",
                         "--layers", "2", "--seq", "32", "--vocab", "256"]
    raise SystemExit(f"unknown model {name}: resnet18 or transformer")


def dataset(name, example, args):
    import torch
    if name == "resnet18":
        x, y = example.images(args, "train")
    else:
        x, y = example.token_data(args.samples, args.seq, args.vocab, args.seed)
    return torch.utils.data.TensorDataset(x, y)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ddp_rank(rank, opts, port, out):
    """One DDP rank: `warmup` steps, `steps` timed steps, then the same
    number under no_sync() (compute only), each on its share of the global
    batch."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    torch.set_num_threads(1)
    example, argv = model_setup(opts.model, opts.samples)
    args = example.arguments(argv)
    data = dataset(opts.model, example, args)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2, timeout=datetime.timedelta(seconds=opts.timeout))
    model = torch.nn.parallel.DistributedDataParallel(example.build(args))
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    share = opts.batch // 2
    g = torch.Generator().manual_seed(rank)

    def step(sync):
        idx = torch.randint(len(data), (share,), generator=g)
        x, y = data[idx]
        opt.zero_grad(set_to_none=True)
        if sync:
            F.cross_entropy(model(x), y).backward()
        else:
            with model.no_sync():
                F.cross_entropy(model(x), y).backward()
        opt.step()

    from example_worker import cost_per_step, peak_rss_mib, process_cpu

    def timed(sync, n):
        dist.barrier()
        began = time.perf_counter()
        since = (0, *process_cpu())
        for _ in range(n):
            step(sync)
        seconds = time.perf_counter() - began
        cost = cost_per_step(since, n)
        dist.barrier()
        return seconds, cost

    for _ in range(opts.warmup):
        step(True)
    synced, cost = timed(True, opts.steps)
    compute, _ = timed(False, opts.steps)
    out.put({"rank": rank, "seconds": synced, "compute_seconds": compute,
             "peak_rss_mib": peak_rss_mib(), **cost})
    dist.destroy_process_group()


def run_ddp(opts):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=ddp_rank, args=(r, opts, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    ranks = [out.get(timeout=opts.timeout) for _ in procs]
    for p in procs:
        p.join(opts.timeout)
        if p.exitcode != 0:
            raise RuntimeError(f"a DDP rank exited with {p.exitcode}")
    seconds = max(r["seconds"] for r in ranks)
    compute = max(r["compute_seconds"] for r in ranks)
    return {"samples_per_second": opts.batch * opts.steps / seconds,
            "exposed_comm_seconds_per_step": max(0.0, (seconds - compute) / opts.steps),
            "cpu_seconds_per_step": statistics.mean(r["cpu_seconds_per_step"] for r in ranks),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in ranks)}


def run_compute_floor(opts):
    """One process, one thread, the per-worker batch, no communication:
    samples/s of one worker computing alone (fwd, bwd, SGD)."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    example, argv = model_setup(opts.model, opts.samples)
    args = example.arguments(argv)
    data = dataset(opts.model, example, args)
    model = example.build(args)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    share = opts.batch // 2
    g = torch.Generator().manual_seed(0)
    from example_worker import cost_per_step, process_cpu
    began = since = None
    for i in range(opts.warmup + opts.steps):
        if i == opts.warmup:
            began, since = time.perf_counter(), (0, *process_cpu())
        x, y = data[torch.randint(len(data), (share,), generator=g)]
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return {"samples_per_second": share * opts.steps / (time.perf_counter() - began),
            **cost_per_step(since, opts.steps)}


def run_ferry(opts, mode, work):
    example, argv = model_setup(opts.model, opts.samples)
    script = os.path.join(EXAMPLES, "train_resnet.py" if opts.model == "resnet18"
                          else "train_transformer.py")
    colocated = mode == "ps-colocated"
    mode = "ps" if colocated else mode
    tag = f"{opts.model}-{mode}-{time.monotonic_ns()}"
    summary_path = os.path.join(work, f"{tag}.json")
    logs = os.path.join(work, f"logs-{tag}")
    # The throughput window starts after the first step: warmup + steps
    # steps make a window of the DDP run's timed steps and more.
    steps = opts.warmup + opts.steps + 1
    cmd = [os.path.join(opts.bin_dir, "ferry"), "local", "--mode", mode, "--workers", "2",
           "--model", "external", "--dataset", f"external:{opts.samples}",
           "--batch", str(opts.batch), "--epochs", "100", "--max-steps", str(steps),
           "--lr", str(LR), "--momentum", str(MOMENTUM), "--summary-json", summary_path,
           "--log-dir", logs, "--timeout", str(opts.timeout),
           "--worker-command",
           f"/usr/bin/python3 {script} {' '.join(argv)} --lr {LR} --momentum {MOMENTUM} "
           "--nesterov 0 --weight-decay 0"]
    if mode == "ps":
        cmd[6:6] = ["--shards", "2"] + (["--colocated-shards"] if colocated else [])
    cmd[6:6] = opts.ferry_args.split()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=opts.timeout + 60)
    if run.returncode != 0:
        raise RuntimeError(f"ferry local {mode} failed ({run.returncode}):\n{run.stderr[-2000:]}")
    with open(summary_path) as f:
        s = json.load(f)
    workers = []
    # Colocated: the processes psI train too.
    trains = ("worker", "ps") if colocated else ("worker",)
    for name in sorted(os.listdir(logs)):
        if not name.startswith(trains) or not name.endswith(".log"):
            continue
        with open(os.path.join(logs, name), errors="replace") as f:
            for line in f:
                if line.startswith("{") and "peak_rss_mib" in line:
                    workers.append(json.loads(line))
    cpu = [w["cpu_seconds_per_step"] for w in workers if "cpu_seconds_per_step" in w]
    return {"samples_per_second": s["samples_per_second"],
            "exposed_comm_seconds_per_step": s.get("window_comm_seconds_per_worker_step"),
            "window_steps": s.get("window_steps"),
            "cpu_seconds_per_step": statistics.mean(cpu) if cpu else None,
            "peak_rss_mib": max(w["peak_rss_mib"] for w in workers) if workers else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet18,transformer")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32, help="global batch (2 workers)")
    ap.add_argument("--samples", type=int, default=2048, help="generated training samples")
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--timeout", type=int, default=900, help="seconds per run")
    ap.add_argument("--out", help="write the JSON lines here too")
    ap.add_argument("--runs", default="ddp,ring,ps", help="which runs, of ddp, ring, ps and ps-colocated (the "
                         "2 shards inside the 2 workers' processes)")
    ap.add_argument("--ferry-args", default="",
                    help="more ferry local flags for the ring and PS runs "
                         "(e.g. --bucket-elements 1048576)")
    opts = ap.parse_args()
    if not os.path.exists(os.path.join(opts.bin_dir, "ferry")):
        raise SystemExit(f"no {opts.bin_dir}/ferry: run scripts/build (or pass --bin-dir)")
    # The examples import ferry.torch (the build's package); the DDP ranks
    # (spawned) find it through PYTHONPATH.
    package = os.path.join(os.path.dirname(os.path.abspath(opts.bin_dir)), "python")
    sys.path.insert(0, package)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (package, os.environ.get("PYTHONPATH", "")) if p)
    lines = []
    with tempfile.TemporaryDirectory(prefix="ferry-vs-ddp-") as work:
        for model in opts.models.split(","):
            opts.model = model
            fastest_floor = 0.0
            runs = {"ddp": lambda: run_ddp(opts), "ring": lambda: run_ferry(opts, "ring", work),
                    "ps": lambda: run_ferry(opts, "ps", work),
                    "ps-colocated": lambda: run_ferry(opts, "ps-colocated", work)}
            order = [k for k in opts.runs.split(",") if k in runs]
            for r in range(opts.rounds):
                # The floor is measured each round (this machine's speed
                # drifts); the bound is 2x the fastest floor seen so far.
                floor = run_compute_floor(opts)
                floor_line = {"model": model, "run": "floor", "round": r, **floor}
                print(json.dumps(floor_line), flush=True)
                lines.append(floor_line)
                fastest_floor = max(fastest_floor, floor["samples_per_second"])
                bound = 2 * fastest_floor
                for kind in (order if r % 2 == 0 else order[::-1]):
                    figures = runs[kind]()
                    line = {"model": model, "run": kind, "round": r, **figures,
                            "compute_bound_samples_per_second": bound}
                    print(json.dumps(line), flush=True)
                    if figures["samples_per_second"] > bound * 1.05:
                        raise SystemExit(f"{kind}: {figures['samples_per_second']:.1f} samples/s "
                                         f"is above 2 workers' compute bound {bound:.1f}: "
                                         "impossible, the measurement is wrong")
                    lines.append(line)
    print(f"\n{'model':12} {'run':12} {'samples/s':>10} {'x DDP':>6} {'exposed comm/step':>18} "
          f"{'CPU s/step':>11} {'peak RSS MiB':>13}  x DDP by round")
    for model in opts.models.split(","):
        med = {}
        for kind in ("floor", "ddp", "ring", "ps", "ps-colocated"):
            rows = [x for x in lines if x["model"] == model and x["run"] == kind]
            if not rows:
                continue
            med[kind] = {k: statistics.median([x[k] for x in rows if x.get(k) is not None] or [0])
                         for k in ("samples_per_second", "exposed_comm_seconds_per_step",
                                   "cpu_seconds_per_step", "peak_rss_mib")}
        base = med.get("ddp", {}).get("samples_per_second")
        ddp_by_round = {x["round"]: x["samples_per_second"] for x in lines
                        if x["model"] == model and x["run"] == "ddp"}
        for kind, m in med.items():
            ratio = (f"{m['samples_per_second'] / base:6.2f}" if base and kind != "floor"
                     else "     -")
            # Each round's run against the DDP run of the same round: the
            # spread the median hides (DDP's own speed drifts between rounds).
            by_round = " / ".join(
                f"{x['samples_per_second'] / ddp_by_round[x['round']]:.2f}" for x in lines
                if x["model"] == model and x["run"] == kind and x["round"] in ddp_by_round
                and kind not in ("floor", "ddp"))
            print(f"{model:12} {kind:12} {m['samples_per_second']:10.1f} {ratio} "
                  f"{m['exposed_comm_seconds_per_step'] * 1000:15.1f} ms "
                  f"{m['cpu_seconds_per_step']:11.3f} {m['peak_rss_mib']:13.0f}  {by_round}")
    if opts.out:
        with open(opts.out, "w") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
