#!/usr/bin/python3
"""The fault matrix: every mode under every fault, from a seed, checked.

For each mode (sync PS, async, SSP, ring, PS pipeline, ring pipeline,
hybrid, ring DLRM, and PyTorch workers in PS and ring mode) and each fault (a worker SIGKILLed and replaced, SIGTERMed and
replaced, SIGSTOPped past the heartbeat timeout then SIGCONTed; a shard
SIGKILLed; the coordinator SIGKILLed; every worker SIGKILLed at once and
replaced; shard 0's checkpoint directory full or read-only, with shard 0
SIGKILLed twice while it is, the second time at the epoch's end), runs one `ferry local` job (3 workers, 2 shards where the mode
has shards, 2 epochs, --heartbeat-timeout 3, --checkpoint-every 50) with the
fault as a `--chaos` plan at a step drawn from the seed, and checks its
summary. The MLP modes train Fashion-MNIST at batch 256 (the torch modes
with examples/torch/train_sequential.py as every worker, `ferry local
--worker-command`, from the same MLP's initial weights); hybrid and ring
DLRM train a small DLRM at batch 128 on 24,000 rows of synthetic click logs (`ferry data
ctr`, written into the work directory once). The checks:

  - ferry local exited 0 and the job finished (every epoch accounted);
  - every epoch applied each of its samples exactly once (Fashion-MNIST:
    applied 60,000; DLRM: 24,000; dropped 0);
  - ring and hybrid: no weights digest mismatch between members (ring
    DLRM: weights and tables);
  - modes with shards: every shard's final version equals the job's
    applied steps (sync; async/SSP: its applied tasks), i.e. no update lost
    or doubled on a shard;
  - the final evaluation succeeded, and the test accuracy (DLRM: the
    test AUC) is within 1 point of the same mode's undisturbed run.

A cell's plan depends only on the seed, the mode and the fault, so any row
replays with `--seed S --modes M --faults F`. Cells listed in KNOWN are
limitations ferry states (docs/elasticity.md): they are run and reported,
and only an unexpected result fails the script (exit 1).

  bench/fault_matrix.py [--bin build/bin] [--seed N] [--modes m1,m2]
      [--faults f1,f2] [--random-cells K] [--markdown FILE] [--work DIR]

--random-cells K: K cells drawn by the seed among the cells expected to
pass (the short randomized schedule CI runs: ctest FaultMatrix.RandomCells,
seeded by the day of the year, the seed printed first).
The disk faults mount a small tmpfs on shard 0's checkpoint directory
(bench/checkpoint_disk.py): they need root with the right to mount, and
are reported as "skip" without it.
Exit 0 all as expected, 1 an unexpected result, 77 skipped (no binaries or
dataset).
"""
import argparse
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import checkpoint_disk

EPOCHS = 2
SKIP = 77  # ctest's SKIP_RETURN_CODE
DATASET = "/usr/share/datasets/fashion-mnist"
TRAIN_SAMPLES = 60000
CTR_ROWS = 24000
ACCURACY_TOLERANCE = 0.01

MODES = {
    "sync": ["--mode", "ps", "--shards", "2"],
    "async": ["--mode", "ps", "--shards", "2", "--consistency", "async"],
    "ssp": ["--mode", "ps", "--shards", "2", "--consistency", "ssp:2"],
    "ring": ["--mode", "ring", "--digest-every", "10"],
    "ps-pipeline": ["--mode", "ps", "--shards", "2", "--pipeline-stages", "2",
                    "--micro-batches", "2"],
    "ring-pipeline": ["--mode", "ring", "--pipeline-stages", "2",
                      "--micro-batches", "2", "--digest-every", "10"],
    "hybrid": ["--mode", "hybrid", "--shards", "2", "--digest-every", "10"],
    # Ring DLRM: every member holds the whole tables (ring checkpoints carry
    # them in part 0).
    "ring-dlrm": ["--mode", "ring", "--digest-every", "10"],
    "torch-ps": ["--mode", "ps", "--shards", "2"],
    "torch-ring": ["--mode", "ring", "--digest-every", "10"],
}
SHARD_MODES = {"sync", "async", "ssp", "ps-pipeline", "hybrid", "torch-ps"}
CTR_MODES = {"hybrid", "ring-dlrm"}
# PyTorch workers: examples/torch/train_sequential.py on the MLP that
# ferry-worker trains (scripts/ferry_torch.py writes its initial weights).
TORCH_MODES = {"torch-ps", "torch-ring"}
SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The small DLRM of the sparse fault tests (tests/testing/process_run.h).
DLRM_JSON = ('{"format": "ferry.model.v1", "kind": "dlrm", '
             '"embedding_dim": 8, "bottom": [16], "top": [16]}')


def kill_worker(r, s):
    w = r.randrange(3)
    return f"kill:worker{w}@step{s},join:1@step{s}"


def term_worker(r, s):
    w = r.randrange(3)
    return f"term:worker{w}@step{s},join:1@step{s}"


def stop_worker(r, s):
    w = r.randrange(3)
    return f"stop:worker{w}@step{s},cont:worker{w}@step{s + 40}"


def kill_shard(r, s):
    return f"kill:ps{r.randrange(2)}@step{s}"


def kill_coordinator(r, s):
    return f"kill:coordinator@step{s}"


def kill_all_workers(r, s):
    return (f"kill:worker0@step{s},kill:worker1@step{s},"
            f"kill:worker2@step{s},join:3@step{s}")


DISK_KILL_AFTER = 25  # steps from a disk fault to shard 0's SIGKILL


def disk_fault(kind):
    """Shard 0's checkpoint directory full or read-only from step s (in
    the first epoch), and shard 0 SIGKILLed while it is so: DISK_KILL_AFTER
    steps after the fault hit and again at the epoch's end. The harness
    does it all (checkpoint_disk.py), not ferry local's --chaos."""
    def plan(r, s):
        return f"{kind}:ps0@step{s}+kill{DISK_KILL_AFTER}+kill@epoch-end"
    return plan


FAULTS = {
    "kill-worker": kill_worker,
    "term-worker": term_worker,
    "stop-worker": stop_worker,
    "kill-shard": kill_shard,
    "kill-coordinator": kill_coordinator,
    "kill-all-workers": kill_all_workers,
    "disk-full": disk_fault("disk-full"),
    "disk-read-only": disk_fault("disk-read-only"),
}
DISK_FAULTS = {"disk-full": "full", "disk-read-only": "read-only"}

# Cells ferry does not pass yet, with the reason (docs/elasticity.md,
# "Weaker than it could be"). Filled from measured runs.
KNOWN = {}


def applies(mode, fault):
    return (fault != "kill-shard" and fault not in DISK_FAULTS
            or mode in SHARD_MODES)


def write_ctr_data(binary_dir, work):
    """The DLRM modes' dataset and model, written once into `work`."""
    out = os.path.join(work, "ctr")
    if not os.path.exists(os.path.join(out, "model.json")):
        vocab = ",".join(str(3000 if f % 3 == 0 else 10 * (f + 1))
                         for f in range(26))
        subprocess.run([os.path.join(binary_dir, "ferry"), "data", "ctr",
                        "--out", os.path.join(out, "data"), "--rows",
                        str(CTR_ROWS), "--test-rows", "4000", "--seed", "13",
                        "--vocab-sizes", vocab, "--quiet"], check=True)
        with open(os.path.join(out, "model.json"), "w") as f:
            f.write(DLRM_JSON)
    return out


def write_torch_model(work):
    """The PyTorch modes' initial model directory, written once into
    `work`."""
    out = os.path.join(work, "torch-mlp")
    if not os.path.exists(os.path.join(out, "model.safetensors")):
        subprocess.run(["/usr/bin/python3",
                        os.path.join(SOURCE_DIR, "scripts", "ferry_torch.py"),
                        "train", "--preset", "mlp", "--out", out, "--steps",
                        "0"], check=True, stdout=subprocess.DEVNULL)
    return out


def torch_skip(binary_dir):
    """Why the PyTorch modes cannot run here, or None."""
    if not os.path.isdir(os.path.join(binary_dir, "..", "python", "ferry")):
        return "no ferry Python package in the build (python3-dev, pybind11)"
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                      capture_output=True).returncode != 0:
        return "no python3-torch"
    return None


def job_args(mode, work):
    common = ["--workers", "3", "--epochs", str(EPOCHS), "--device", "cpu",
              "--heartbeat-timeout", "3", "--checkpoint-every", "50"]
    if mode in CTR_MODES:
        ctr = os.path.join(work, "ctr")
        return common + ["--batch", "128", "--model",
                         os.path.join(ctr, "model.json"), "--dataset",
                         "criteo:" + os.path.join(ctr, "data"), "--seed", "5",
                         "--optimizer", "adam", "--lr", "0.003",
                         "--lr-schedule", "constant", "--warmup-steps", "0",
                         "--weight-decay", "0"] + MODES[mode]
    if mode in TORCH_MODES:
        model = os.path.join(work, "torch-mlp")
        script = os.path.join(SOURCE_DIR, "examples", "torch",
                              "train_sequential.py")
        return common + ["--batch", "256", "--init-from", model,
                         "--worker-command",
                         f"/usr/bin/python3 {script} {model}"] + MODES[mode]
    return common + ["--batch", "256"] + MODES[mode]


def train_samples(mode):
    return CTR_ROWS if mode in CTR_MODES else TRAIN_SAMPLES


def score_key(mode):
    """The summary's figure a run is compared by."""
    return "test_auc" if mode in CTR_MODES else "test_accuracy"


def split_disk_fault(chaos, total_steps):
    """(the plan ferry local runs, (fault kind, step, steps per epoch) or
    None)."""
    head, _, when = chaos.partition("@")
    if head.split(":")[0] not in DISK_FAULTS:
        return chaos, None
    step = int(when[len("step"):].split("+")[0])
    return "", (DISK_FAULTS[head.split(":")[0]], step, total_steps // EPOCHS)


def run_job(binary_dir, work, name, args, timeout_s=600, disk=None):
    """One ferry local job; `disk` = (kind, step): shard 0's checkpoint
    directory goes full or read-only at that step (checkpoint_disk.py)."""
    out = os.path.join(work, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    summary = os.path.join(out, "summary.json")
    cluster = os.path.join(out, "cluster.json")
    ferry = os.path.join(binary_dir, "ferry")
    cmd = [ferry, "local", *args, "--summary-json", summary, "--log-dir",
           os.path.join(out, "logs"), "--timeout", str(timeout_s),
           "--cluster-file", cluster]
    start = time.monotonic()
    watcher = None
    with contextlib.ExitStack() as stack:
        if disk is not None:
            ckpt = stack.enter_context(checkpoint_disk.CheckpointDisk(
                os.path.join(out, "logs", "ps0")))
            watcher = checkpoint_disk.DiskFaultWatcher(
                ckpt, disk[0], disk[1], disk[2], ferry, cluster,
                kill_after=DISK_KILL_AFTER)
            watcher.start()
            stack.callback(watcher.finish)
        with open(os.path.join(out, "ferry-local.log"), "w") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                                timeout=timeout_s + 60).returncode
    s = None
    if os.path.exists(summary):
        with open(summary) as f:
            s = json.load(f)
    return {"rc": rc, "summary": s, "dir": out, "cmd": cmd,
            "seconds": time.monotonic() - start,
            "disk": None if watcher is None else
            {"applied": watcher.applied, "waited": watcher.waited,
             "kills": watcher.kills, "log": watcher.log}}


def check(mode, run, reference):
    """The problems of one run (empty: passed)."""
    s = run["summary"]
    if run["rc"] != 0:
        return [f"ferry local exited {run['rc']}"]
    if s is None:
        return ["no summary"]
    problems = []
    acc = s.get("epochs_accounting", [])
    if len(acc) != EPOCHS:
        problems.append(f"{len(acc)} epochs accounted, not {EPOCHS}")
    for a in acc:
        if a["samples_applied"] != train_samples(mode) or a["samples_dropped"]:
            problems.append(f"epoch {a['epoch']}: applied "
                            f"{a['samples_applied']}, dropped "
                            f"{a['samples_dropped']}")
    if s.get("digest_mismatches", 0):
        problems.append(f"{s['digest_mismatches']} digest mismatches")
    problems += check_disk_fault(run)
    if s.get("final_eval_error"):
        problems.append(f"final evaluation failed: {s['final_eval_error']}")
    if mode in SHARD_MODES:
        versions = s.get("shard_versions", [])
        expected = reference_versions(mode, s)
        if versions and any(v != expected for v in versions):
            problems.append(f"shard versions {versions}, job applied "
                            f"{expected}")
    if reference is not None and reference.get("summary"):
        key = score_key(mode)
        want = reference["summary"][key]
        got = s.get(key, 0.0)
        if abs(got - want) > ACCURACY_TOLERANCE:
            problems.append(f"{key} {got:.4f} vs undisturbed {want:.4f}")
    return problems


def check_disk_fault(run):
    """A disk cell tests something only if the fault hit the job: the disk
    went full (read-only) before shard 0 was killed, and a checkpoint
    failed."""
    disk = run.get("disk")
    if disk is None:
        return []
    if not disk["applied"]:
        return ["the disk fault never applied"]
    if disk["kills"] < 2:
        return [f"shard 0 was killed {disk['kills']} times while its disk "
                "was faulty, not twice"]
    kinds = [e.get("kind") for e in run["summary"].get("events", [])]
    return [] if "checkpoint_failed" in kinds else [
        "no checkpoint failed: the fault missed the job"]


def reference_versions(mode, s):
    # Sync: the job's applied steps. Async and SSP: every applied task
    # pushed once to every shard, and `steps` counts applied tasks there.
    return s.get("steps", -1)


def plan(seed, mode, fault, total_steps):
    r = random.Random(f"{seed}/{mode}/{fault}")
    # Disk faults start in the first epoch, so that its end finds the disk
    # still full (the next epoch must wait for its start's checkpoint).
    last = 0.35 if fault in DISK_FAULTS else 0.7
    step = r.randint(int(0.15 * total_steps), int(last * total_steps))
    return FAULTS[fault](r, step)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default="build/bin")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--faults", default=",".join(FAULTS))
    p.add_argument("--random-cells", type=int, default=0)
    p.add_argument("--markdown", default="")
    p.add_argument("--work", default="")
    a = p.parse_args()
    modes = a.modes.split(",")
    faults = a.faults.split(",")
    for m in modes:
        if m not in MODES:
            p.error(f"unknown mode {m} (modes: {', '.join(MODES)})")
    for f in faults:
        if f not in FAULTS:
            p.error(f"unknown fault {f} (faults: {', '.join(FAULTS)})")
    if not os.access(os.path.join(a.bin, "ferry"), os.X_OK):
        print(f"fault matrix: no ferry binary in {a.bin}: skipped")
        return SKIP
    if any(m not in CTR_MODES for m in modes) and not os.path.isdir(DATASET):
        print(f"fault matrix: no dataset at {DATASET} "
              "(dataset-fashion-mnist): skipped")
        return SKIP
    cells = [(m, f) for m in modes for f in faults if applies(m, f)]
    if a.random_cells:
        expected = [c for c in cells if c not in KNOWN]
        cells = random.Random(a.seed).sample(
            expected, min(a.random_cells, len(expected)))
    disk_skip = (checkpoint_disk.mount_error()
                 if any(f in DISK_FAULTS for _, f in cells) else None)
    work = a.work or tempfile.mkdtemp(prefix="ferry-fault-matrix-")
    print(f"fault matrix: seed {a.seed}, {len(cells)} cells, runs in {work}",
          flush=True)
    if any(m in CTR_MODES for m, _ in cells):
        write_ctr_data(a.bin, work)
    skip_torch = (torch_skip(a.bin)
                  if any(m in TORCH_MODES for m, _ in cells) else None)
    if skip_torch is None and any(m in TORCH_MODES for m, _ in cells):
        write_torch_model(work)
    references = {}
    results = []
    unexpected = 0
    for mode, fault in cells:
        if mode in TORCH_MODES and skip_torch:
            print(f"{mode:13s} {fault:17s} skip  ({skip_torch})", flush=True)
            results.append({"mode": mode, "fault": fault, "verdict": "skip",
                            "problems": [skip_torch]})
            continue
        if mode not in references:
            ref = run_job(a.bin, work, f"{mode}-undisturbed",
                          job_args(mode, work))
            ref_problems = check(mode, ref, None)
            references[mode] = ref
            print(f"{mode} undisturbed: "
                  f"{'ok' if not ref_problems else '; '.join(ref_problems)}"
                  f" ({score_key(mode)} "
                  f"{ref['summary'] and ref['summary'].get(score_key(mode))},"
                  f" {ref['seconds']:.0f} s)", flush=True)
        ref = references[mode]
        total = (ref["summary"] or {}).get("steps", 400)
        chaos = plan(a.seed, mode, fault, total)
        local_chaos, disk = split_disk_fault(chaos, total)
        if disk is not None and disk_skip:
            print(f"{mode:13s} {fault:17s} skip  ({disk_skip})", flush=True)
            results.append({"mode": mode, "fault": fault, "chaos": chaos,
                            "verdict": "skip", "problems": [disk_skip]})
            continue
        chaos_args = ["--chaos", local_chaos] if local_chaos else []
        run = run_job(a.bin, work, f"{mode}-{fault}",
                      job_args(mode, work) + chaos_args, disk=disk)
        problems = check(mode, run, ref)
        known = KNOWN.get((mode, fault))
        verdict = "pass" if not problems else ("known" if known else "FAIL")
        if verdict == "FAIL" or (known and not problems):
            unexpected += 1
        s = run["summary"] or {}
        results.append({"mode": mode, "fault": fault, "chaos": chaos,
                        "verdict": verdict, "problems": problems,
                        "known": known, "seconds": round(run["seconds"], 1),
                        "accuracy": s.get(score_key(mode)),
                        "reference_accuracy":
                            (ref["summary"] or {}).get(score_key(mode)),
                        "rollbacks": s.get("rollbacks"),
                        "aborted_steps": s.get("aborted_steps"),
                        "disk": run["disk"], "dir": run["dir"]})
        print(f"{mode:13s} {fault:17s} {verdict:5s} {chaos}"
              + (f"  [{'; '.join(problems)}]" if problems else ""), flush=True)
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump({"seed": a.seed, "results": results}, f, indent=1)
    if a.markdown:
        write_markdown(a.markdown, a.seed, modes, faults, results)
    print(f"fault matrix: {sum(r['verdict'] == 'pass' for r in results)} "
          f"passed, {sum(r['verdict'] == 'known' for r in results)} known, "
          f"{unexpected} unexpected; results in {work}/results.json")
    return 1 if unexpected else 0


def write_markdown(path, seed, modes, faults, results):
    by_cell = {(r["mode"], r["fault"]): r for r in results}
    lines = [f"| mode \\ fault (seed {seed}) | " + " | ".join(faults) + " |",
             "|---|" + "---|" * len(faults)]
    for m in modes:
        row = [m]
        for f in faults:
            r = by_cell.get((m, f))
            if r is None:
                row.append("—")
            elif r["verdict"] == "pass":
                row.append(f"pass ({r['accuracy']:.4f})")
            else:
                row.append(f"{r['verdict']}: {'; '.join(r['problems'])}")
        lines.append("| " + " | ".join(row) + " |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
