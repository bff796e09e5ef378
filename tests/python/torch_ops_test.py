#!/usr/bin/python3
"""A ferry.torch worker is operated like ferry-worker: from the same FERRY_*
variables it speaks mutual TLS with a bearer token to a coordinator that
requires both, serves grpc.health.v1 on FERRY_HEALTH_PORT (ready while the
coordinator answers) and Prometheus metrics on FERRY_METRICS_PORT, then
trains its job to the end. Without the token the coordinator refuses it
(PermissionError at join), and a malformed variable is a ValueError naming
it.

Usage: torch_ops_test.py BIN_DIR SOURCE_DIR
Exit 0 pass, 1 fail, 77 skip (no torch, no ferry package in the build, no
openssl).
"""
import json
import os
import shutil
import subprocess
import sys
import urllib.request

from torch_jobs import (JOB_OPTIMIZER, LR, MOMENTUM, SKIP, coordinator, fail,
                        ferry_package_dir, in_work_dir, parse_args)

SAMPLES = 64
BATCH = 16

# The worker: joins, says so with its ports, waits for "go" on stdin, trains
# its leases to the job's end and prints its steps.
WORKER = r"""
import json, sys, torch
import torch.nn.functional as F
import ferry.torch as ft
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 4))
opt = torch.optim.SGD(model.parameters(), lr=%(lr)s, momentum=%(momentum)s)
data = torch.utils.data.TensorDataset(torch.randn(%(samples)d, 8),
                                      torch.randint(0, 4, (%(samples)d,)))
try:
    job = ft.join(model, opt, timeout=30)
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}), flush=True)
    sys.exit(3)
print(json.dumps({"joined": True}), flush=True)
sys.stdin.readline()
with job:
    for x, y in job.batches(data):
        job.backward(F.cross_entropy(model(x), y))
        job.step()
print(json.dumps({"steps": job.steps}), flush=True)
"""


def worker_env(base, python_dir, address, **ferry):
    env = {k: v for k, v in base.items() if not k.startswith("FERRY_")}
    env["PYTHONPATH"] = python_dir
    env["FERRY_COORDINATOR"] = address
    env.update({f"FERRY_{k.upper()}": str(v) for k, v in ferry.items()})
    return env


def start_worker(env, work):
    script = os.path.join(work, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER % {"lr": LR, "momentum": MOMENTUM, "samples": SAMPLES})
    return subprocess.Popen(["/usr/bin/python3", script], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def first_line(process, what):
    line = process.stdout.readline()
    if not line:
        fail(f"{what}: the worker said nothing:\n{process.stderr.read()[-2000:]}")
    return json.loads(line)


def check(args, python_dir, work):
    sys.path.insert(0, os.path.join(args.source_dir, "tests", "deploy"))
    from deploy_secrets import Secrets
    secrets = Secrets({"ferry-tls", "ferry-auth"}, work)
    tls = secrets.dir("ferry-tls")
    token = os.path.join(secrets.dir("ferry-auth"), "token")
    security = ["--tls-cert", os.path.join(tls, "tls.crt"), "--tls-key",
                os.path.join(tls, "tls.key"), "--tls-ca", os.path.join(tls, "ca.crt"),
                "--require-client-cert", "--auth-token-file", token]
    client_tls = {"tls_cert": os.path.join(tls, "tls.crt"),
                  "tls_key": os.path.join(tls, "tls.key"),
                  "tls_ca": os.path.join(tls, "ca.crt")}
    with coordinator(args, work, ["--mode", "ring", "--model", "external", "--dataset",
                                  f"external:{SAMPLES}", "--batch", str(BATCH), "--epochs",
                                  "1"] + JOB_OPTIMIZER + security) as address:
        # No token: refused at join, as ferry-worker would be.
        process = start_worker(worker_env(os.environ, python_dir, address, **client_tls), work)
        said = first_line(process, "without the token")
        process.wait(60)
        if said.get("error") != "PermissionError":
            fail(f"a worker without the token was not refused with PermissionError: {said}")
        print(f"refused without the token: {said['message']}")
        # A malformed variable.
        process = start_worker(worker_env(os.environ, python_dir, address, health_port="abc",
                                          auth_token_file=token, **client_tls), work)
        said = first_line(process, "a malformed FERRY_HEALTH_PORT")
        process.wait(60)
        if said.get("error") != "ValueError" or "health" not in said.get("message", ""):
            fail(f"FERRY_HEALTH_PORT=abc was not a ValueError naming it: {said}")
        print(f"refused FERRY_HEALTH_PORT=abc: {said['message']}")
        # The whole thing.
        ports_file = os.path.join(work, "ops.ports")
        process = start_worker(worker_env(os.environ, python_dir, address, health_port=-1,
                                          metrics_port=-1, ops_port_file=ports_file,
                                          auth_token_file=token, **client_tls), work)
        try:
            said = first_line(process, "with TLS and the token")
            if not said.get("joined"):
                fail(f"the worker did not join over TLS with the token: {said}")
            ports = dict(line.split() for line in open(ports_file).read().splitlines())
            health = subprocess.run(
                [os.path.join(args.bin_dir, "ferry"), "health", "--address",
                 f"127.0.0.1:{ports['health']}", "--wait", "20"],
                capture_output=True, text=True, timeout=60)
            if health.returncode != 0:
                fail(f"the worker's health port is not SERVING: {health.stdout} {health.stderr}")
            metrics = urllib.request.urlopen(
                f"http://127.0.0.1:{ports['metrics']}/metrics", timeout=10).read().decode()
            if "ferry_" not in metrics:
                fail(f"the worker's metrics port serves no ferry metric:\n{metrics[:500]}")
            print(f"health port {ports['health']} SERVING; metrics port {ports['metrics']} "
                  f"serves {sum(1 for line in metrics.splitlines() if line.startswith('ferry_'))} "
                  "ferry_ samples")
            process.stdin.write("go\n")
            process.stdin.flush()
            done = first_line(process, "training over TLS")
            process.wait(120)
        finally:
            if process.poll() is None:
                process.kill()
        if done.get("steps") != SAMPLES // BATCH or process.returncode != 0:
            fail(f"the worker trained {done} (exit {process.returncode}), expected "
                 f"{SAMPLES // BATCH} steps:\n{process.stderr.read()[-2000:]}")
        print(f"trained {done['steps']} steps over mutual TLS with the token")


def main():
    args = parse_args(__doc__)
    python_dir = ferry_package_dir(args)
    if python_dir is None:
        return SKIP
    if shutil.which("openssl") is None:
        print("SKIP: no openssl")
        return SKIP
    return in_work_dir("ferry-torch-ops-", lambda work: check(args, python_dir, work))


if __name__ == "__main__":
    sys.exit(main())
