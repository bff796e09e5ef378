"""What the ferry.torch tests share: their command line, the skip rules, a
`ferry local` run that fails with the processes' log tails, a standalone
coordinator, and the check that join refuses what it must.

The tests run as scripts (python3 tests/python/X.py BIN_DIR SOURCE_DIR), so
this module is on sys.path as their directory.
"""
import argparse
import contextlib
import os
import subprocess
import sys

SKIP = 77
LR, MOMENTUM = 0.05, 0.9
# A job optimizer that torch.optim.SGD(lr=LR, momentum=MOMENTUM) replays.
JOB_OPTIMIZER = ["--optimizer", "momentum", "--lr", str(LR), "--momentum", str(MOMENTUM),
                 "--nesterov", "false", "--weight-decay", "0", "--lr-schedule", "constant",
                 "--warmup-steps", "0"]
# The same optimizer as the example scripts' flags.
SCRIPT_OPTIMIZER = f"--lr {LR} --momentum {MOMENTUM} --nesterov 0 --weight-decay 0"


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def parse_args(doc, add_arguments=None, modes="ps,ring"):
    """BIN_DIR SOURCE_DIR [--modes MODES] and what `add_arguments(parser)`
    adds; the description is the docstring's first paragraph."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("source_dir")
    ap.add_argument("--modes", default=modes)
    if add_arguments:
        add_arguments(ap)
    return ap.parse_args()


def ferry_package_dir(args):
    """The directory holding the ferry package (BIN_DIR/../python, or
    FERRY_PYTHON_DIR), or None after printing why the test skips: no torch
    (Debian's python3-torch) or no package in the build."""
    import importlib.util
    python_dir = os.environ.get("FERRY_PYTHON_DIR") or os.path.join(
        os.path.dirname(os.path.abspath(args.bin_dir)), "python")
    if importlib.util.find_spec("torch") is None:
        print("SKIP: no torch (Debian's python3-torch)")
        return None
    if not os.path.isdir(os.path.join(python_dir, "ferry")):
        print(f"SKIP: no ferry package in {python_dir} (python3-dev and pybind11-dev)")
        return None
    return python_dir


def log_tails(logs, lines=15):
    """The last `lines` lines of each *.log in `logs`, each under its name."""
    tails = ""
    for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        if name.endswith(".log"):
            with open(os.path.join(logs, name), errors="replace") as f:
                tails += f"---- {name}\n" + "".join(f.readlines()[-lines:])
    return tails


def run_ferry_local(args, what, ferry_args, logs, timeout=300):
    """Runs `ferry local FERRY_ARGS --log-dir LOGS`; fails the test, with
    its stderr and the processes' log tails, unless it exits 0. The
    completed process."""
    cmd = [os.path.join(args.bin_dir, "ferry"), "local"] + ferry_args + ["--log-dir", logs]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        fail(f"{what}: ferry local exited {done.returncode}\n{done.stderr[-3000:]}\n"
             f"{log_tails(logs)}")
    return done


@contextlib.contextmanager
def coordinator(args, work, coordinator_args):
    """A ferry-server coordinator on a loopback port (state in WORK/state,
    log in WORK/coordinator.log) for the body; yields its address and kills
    it after."""
    port_file = os.path.join(work, "coordinator.port")
    with open(os.path.join(work, "coordinator.log"), "w") as log:
        process = subprocess.Popen(
            [os.path.join(args.bin_dir, "ferry-server"), "coordinator", "--listen",
             "127.0.0.1:0", "--port-file", port_file, "--health-port", "-1",
             "--metrics-port", "-1", "--state-dir", os.path.join(work, "state")] +
            coordinator_args, stdout=subprocess.DEVNULL, stderr=log)
    try:
        sys.path.insert(0, os.path.join(args.source_dir, "tests", "testing"))
        from wait_until import wait_until
        wait_until("the coordinator's port file",
                   lambda: os.path.exists(port_file) and open(port_file).read().strip(), 30)
        yield "127.0.0.1:" + open(port_file).read().split()[0]
    finally:
        process.kill()
        process.wait()


def refused(what, make, want, error=ValueError):
    """Fails the test unless make() raises `error` with `want` in its text."""
    try:
        make()
    except error as e:
        if want not in str(e):
            fail(f"{what}: refused with {e!r}, which does not name {want!r}")
        print(f"refused {what}: {e}")
        return
    fail(f"{what}: not refused")


def in_work_dir(prefix, body):
    """Runs body(work) in a fresh temporary directory, removed after; prints
    PASS and is 0 when body returns (a check that fails exits 1)."""
    import shutil
    import tempfile
    work = tempfile.mkdtemp(prefix=prefix)
    try:
        body(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


def sgd_replay(model, x, y, order, steps, batch):
    """A job's first `steps` steps in one process, as torch.optim.SGD(lr=LR,
    momentum=MOMENTUM) over cross entropy: the global batch of step s is
    positions [s*batch, (s+1)*batch) of `order` (the epoch's permutation).
    The model, trained in place."""
    import torch
    torch_replay(model, torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM),
                 None, x, y, order, steps, batch)
    return model


def torch_replay(model, opt, scheduler, x, y, order, steps, batch, grad_scale=1.0):
    """sgd_replay with `opt` and `scheduler` (None, or stepped after each
    step), each gradient multiplied by `grad_scale` (1 + 2**-22: a rounding
    error's worth, to measure how far rounding alone moves the weights):
    the first parameter group's learning rate of each step."""
    import torch.nn.functional as F
    rates = []
    for s in range(steps):
        idx = order[s * batch:(s + 1) * batch]
        rates.append(opt.param_groups[0]["lr"])
        opt.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        if grad_scale != 1.0:
            for p in model.parameters():
                p.grad.mul_(grad_scale)
        opt.step()
        if scheduler is not None:
            scheduler.step()
    return rates
