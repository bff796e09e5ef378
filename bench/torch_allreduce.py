#!/usr/bin/env python3
"""Peer baseline for bench/ring_allreduce.cc: torch.distributed.all_reduce
(sum, fp32) on the gloo backend between processes on loopback.

  torch_allreduce.py --ranks 4 --sizes-mib 1,16,64 --iters 10 --warmup 2

Same measurement as ferry-ring-allreduce: per size S, `--warmup` untimed
ops then `--iters` timed ones; every op: reset the tensor to this rank's
input (untimed), barrier (a one-float all_reduce, like ferry's), time
all_reduce on the whole tensor, verify the exact sum (untimed). Rank r's
input is (r + 1) * (1 + i % 1021). Rank 0 prints one JSON line per size:
{impl, ranks, bytes, iters, seconds_per_op (median of rank 0's times),
mean_seconds_per_op, min_seconds_per_op, algbw_gbps, busbw_gbps}, with
algbw = S / t, busbw = algbw * 2(n-1)/n (nccl-tests), GB = 1e9 bytes.

Run with Debian's /usr/bin/python3 (python3-torch). One intra-op thread per
process; init_method tcp://127.0.0.1:<free port>. Every wait has a deadline
(--timeout-s for the whole run); a failed rank makes this exit 1.
"""
import argparse
import datetime
import json
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

PATTERN = 1021


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_rank(rank, args, port):
    torch.set_num_threads(1)
    n = args.ranks
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n,
        timeout=datetime.timedelta(seconds=args.op_timeout_s))
    one = torch.zeros(1)

    def barrier():
        one.fill_(1.0)
        dist.all_reduce(one)
        if one.item() != n:
            raise RuntimeError(f"rank {rank}: barrier sum {one.item()}, expected {n}")

    barrier()
    total = n * (n + 1) // 2
    for mib in args.sizes:
        count = int(mib * (1 << 20)) // 4
        nbytes = count * 4
        pattern = (torch.arange(count, dtype=torch.int64) % PATTERN + 1).to(torch.float32)
        inp = pattern * float(rank + 1)
        want = pattern * float(total)
        buf = torch.empty_like(inp)
        times = []
        for it in range(args.warmup + args.iters):
            buf.copy_(inp)
            barrier()
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            t1 = time.perf_counter()
            if it >= args.warmup:
                times.append(t1 - t0)
            if args.verify and not torch.equal(buf, want):
                bad = (buf != want).nonzero()[0].item()
                raise RuntimeError(
                    f"rank {rank}: wrong sum at element {bad} of {count} ({nbytes} bytes): "
                    f"{buf[bad].item()}, expected {want[bad].item()}")
        barrier()
        if rank == 0:
            t = statistics.median(times)
            algbw = nbytes / t / 1e9
            print(json.dumps({
                "impl": "gloo", "ranks": n, "bytes": nbytes, "iters": args.iters,
                "seconds_per_op": round(t, 6),
                "mean_seconds_per_op": round(statistics.fmean(times), 6),
                "min_seconds_per_op": round(min(times), 6),
                "algbw_gbps": round(algbw, 4),
                "busbw_gbps": round(algbw * 2 * (n - 1) / n, 4)}), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--sizes-mib", default="1,16,64")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--timeout-s", type=float, default=170, help="deadline of the whole run")
    p.add_argument("--op-timeout-s", type=float, default=60,
                   help="gloo timeout of one collective (and of the rendezvous)")
    p.add_argument("--no-verify", dest="verify", action="store_false")
    args = p.parse_args()
    args.sizes = [float(s) for s in args.sizes_mib.split(",") if s]
    if args.ranks < 1 or args.iters < 1 or not args.sizes:
        p.error("need --ranks >= 1, --iters >= 1 and at least one size")

    ctx = mp.start_processes(run_rank, args=(args, free_port()), nprocs=args.ranks,
                             join=False, start_method="spawn")
    deadline = time.monotonic() + args.timeout_s
    try:
        while not ctx.join(timeout=0.2):
            if time.monotonic() > deadline:
                print(f"torch_allreduce.py: ranks still running after --timeout-s "
                      f"{args.timeout_s:.0f}; stopping them", file=sys.stderr)
                return 1
    except mp.ProcessRaisedException as e:
        print(f"torch_allreduce.py: a rank failed:\n{e}", file=sys.stderr)
        return 1
    except mp.ProcessExitedException as e:
        print(f"torch_allreduce.py: {e}", file=sys.stderr)
        return 1
    finally:
        for proc in ctx.processes:
            if proc.is_alive():
                proc.terminate()
        for proc in ctx.processes:
            proc.join(2)
            if proc.is_alive():
                proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
