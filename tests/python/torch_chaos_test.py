#!/usr/bin/python3
"""ferry.torch workers through churn: ferry local jobs whose workers are
PyTorch processes (examples/torch/train_transformer.py, --model external)
under a chaos plan at fixed steps: a worker killed with SIGKILL mid-step,
one sent SIGTERM (it finishes its step and leaves), workers started
mid-epoch, the coordinator killed and restarted (it serves the model its
first worker defined from its state directory), in ring mode a worker
stopped past the heartbeat timeout and continued (it registers again) and,
in PS mode, a shard killed and restarted; with colocated shards
(ps-colocated: the shards run inside torch workers psI), those processes
killed, so that the shard restores from its checkpoint in the restarted
script. The PS jobs' model has BatchNorm buffers. Each job must finish
(exit 0), apply every sample of every epoch exactly once, signal every
planned process, and no worker may print a Python traceback.

Usage: torch_chaos_test.py BIN_DIR SOURCE_DIR [--modes ps,ring,ps-colocated]
The ferry package is BIN_DIR/../python (FERRY_PYTHON_DIR overrides it).
Exit 0 pass, 1 fail, 77 skip (no torch, no ferry package in the build).
"""
import json
import os
import sys

from torch_jobs import SKIP, fail, ferry_package_dir, in_work_dir, parse_args, run_ferry_local

SAMPLES = 2048
BATCH = 32
EPOCHS = 2  # 64 steps an epoch
# The same plan in both modes, but the ring has no shards to kill.
PLANS = {
    "ps": "kill:worker0@step20,join:2@step30,term:worker1@step45,"
          "kill:ps1@step60,kill:coordinator@step80",
    # worker1 is stopped with worker0's kill: the ring then stalls until
    # both are evicted, so cont:worker1 comes after its eviction however
    # late the poll that fires the pair is.
    # ps0 and ps1 train and serve the shards; worker0 only trains.
    "ps-colocated": "kill:ps1@step20,join:1@step30,term:worker0@step45,"
                    "kill:ps0@step60,kill:coordinator@step80",
    "ring": "join:1@step15,kill:worker0@step30,stop:worker1@step30,join:1@step45,"
            "cont:worker1@step55,term:worker2@step70,kill:coordinator@step90",
}
# A worker stopped past the heartbeat timeout and continued: evicted, it
# registers again as a new member and trains on to the job's end
# (HostedWorker's rejoin).
REJOINS = {"ring": "worker1"}
# Colocated processes killed: the restarted script's shard resumes from
# its checkpoint.
RESUMES = {"ps-colocated": ["ps0", "ps1"]}
# The model's width: wide enough that a step takes milliseconds, so that
# the 20 ms between ferry local's status polls spans a few steps, not the
# 25 between stop:worker1 and cont:worker1 (with the default width and
# stop at step 36, both fired in one poll now and then, and worker1 was
# never evicted).
D_MODEL = 128


def run(args, mode, work):
    logs = os.path.join(work, f"logs-{mode}")
    summary_path = os.path.join(work, f"summary-{mode}.json")
    script = os.path.join(args.source_dir, "examples", "torch", "train_transformer.py")
    ps = mode.startswith("ps")
    layout = {"ps": ["--workers", "2", "--shards", "2"],
              "ps-colocated": ["--workers", "3", "--shards", "2", "--colocated-shards"],
              "ring": ["--workers", "2"]}[mode]
    buffers = "--batchnorm 1" if ps else ""
    run_ferry_local(args, mode, ["--mode", "ps" if ps else mode] + layout + [
        "--model", "external", "--dataset", f"external:{SAMPLES}",
        "--batch", str(BATCH), "--epochs", str(EPOCHS),
        "--chaos", PLANS[mode], "--summary-json", summary_path, "--timeout", "300",
        "--worker-command",
        f"/usr/bin/python3 {script} --samples {SAMPLES} --d-model {D_MODEL} {buffers}"],
        logs, timeout=360)
    with open(summary_path) as f:
        summary = json.load(f)
    # Every epoch: every sample applied once, none dropped.
    accounting = summary.get("epochs_accounting", [])
    if len(accounting) != EPOCHS:
        fail(f"{mode}: accounting of {len(accounting)} epochs, expected {EPOCHS}: "
             f"{json.dumps(accounting)}")
    for a in accounting:
        if a["samples_applied"] != SAMPLES or a["samples_dropped"] != 0:
            fail(f"{mode}: epoch {a['epoch']} applied {a['samples_applied']} of {SAMPLES} "
                 f"samples, dropped {a['samples_dropped']}")
    # Every planned event found its process.
    events = summary.get("chaos_events", [])
    planned = sum(int(e.split(":")[1].split("@")[0]) if e.startswith("join:") else 1
                  for e in PLANS[mode].split(","))  # join:N starts N
    if len(events) != planned or any(e["result"] == "not running" for e in events):
        fail(f"{mode}: chaos events {json.dumps(events)}")
    # No traceback from any worker (a killed one prints nothing).
    trains = ("worker", "ps") if mode == "ps-colocated" else ("worker",)
    for name in sorted(os.listdir(logs)):
        if name.startswith(trains) and name.endswith(".log"):
            with open(os.path.join(logs, name), errors="replace") as f:
                text = f.read()
            if "Traceback" in text:
                fail(f"{mode}: {name} printed a traceback:\n{text[-2000:]}")
    # A killed colocated process's shard came back from its checkpoint in
    # the restarted script.
    for name in RESUMES.get(mode, []):
        with open(os.path.join(logs, name + ".log"), errors="replace") as f:
            text = f.read()
        if "resumed from checkpoint" not in text:
            fail(f"{mode}: {name}'s shard did not resume from its checkpoint:\n{text[-2000:]}")
    if mode in REJOINS:
        with open(os.path.join(logs, REJOINS[mode] + ".log"), errors="replace") as f:
            text = f.read()
        rejoined = text.find("registering again as a new member")
        if rejoined < 0 or text.find("finished after", rejoined) < 0:
            fail(f"{mode}: {REJOINS[mode]} did not register again after its "
                 f"eviction and train to the end:\n{text[-2000:]}")
    restarts = summary.get("coordinator_restarts")
    print(f"{mode}: {summary.get('steps')} steps, {summary.get('workers_started')} workers "
          f"started, coordinator restarts {restarts}, "
          f"{' '.join(e['action'] + ':' + e['target'] for e in events)}, "
          f"{summary.get('wall_seconds', 0):.1f} s")


def main():
    args = parse_args(__doc__, modes="ps,ring,ps-colocated")
    if ferry_package_dir(args) is None:
        return SKIP

    def checks(work):
        for mode in args.modes.split(","):
            run(args, mode, work)
    return in_work_dir("ferry-torch-chaos-", checks)


if __name__ == "__main__":
    sys.exit(main())
