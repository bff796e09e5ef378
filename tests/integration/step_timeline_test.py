#!/usr/bin/env python3
"""A real PS job traced with FERRY_STEP_TRACE, read by bench/step_timeline.py.

Runs `ferry local --mode ps --workers 2 --shards 2 --max-steps 60` with the
trace on, then checks what the reader makes of it: a cycle distribution for
each of the two workers over the steps after the skipped ones, and a step
order that sync PS implies: each shard commits the pushes of a step before
it applies it, applies it before a worker's pull of it lands, and the next
step begins after that worker's FinishStep returned.

Usage: step_timeline_test.py BIN_DIR SOURCE_DIR   (exit 77: no dataset)
"""
import json
import os
import subprocess
import sys
import tempfile

STEPS = 60
SKIP = 5


def main():
    bin_dir, source_dir = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        trace = os.path.join(work, "trace")
        os.mkdir(trace)
        env = dict(os.environ, FERRY_STEP_TRACE=trace)
        job = subprocess.run(
            [os.path.join(bin_dir, "ferry"), "local", "--mode", "ps",
             "--workers", "2", "--shards", "2", "--max-steps", str(STEPS),
             "--log-dir", os.path.join(work, "logs")],
            env=env, capture_output=True, text=True, timeout=240)
        if job.returncode != 0:
            if "NOT_FOUND" in job.stderr or "dataset" in job.stderr:
                print("skipped: no dataset\n" + job.stderr[-2000:])
                return 77
            print(job.stdout[-3000:], job.stderr[-3000:])
            return 1
        files = sorted(os.listdir(trace))
        # The coordinator, two shards, two workers: one file each.
        assert len(files) == 5, files
        reader = subprocess.run(
            [sys.executable,
             os.path.join(source_dir, "bench", "step_timeline.py"), trace,
             "--skip", str(SKIP), "--json"],
            capture_output=True, text=True, timeout=60, check=True)
    result = json.loads(reader.stdout)

    cycles = result["cycles"]
    workers = sorted(label for label in cycles if "worker" in label)
    assert len(workers) == 2, cycles.keys()
    for label in workers:
        c = cycles[label]
        # Steps SKIP .. STEPS-2 have a next step to measure against.
        assert c["steps"] == STEPS - SKIP - 1, (label, c)
        assert 0 < c["median_ms"] <= c["p90_ms"] <= c["max_ms"], c
        assert c["slowest"][0]["ms"] == c["max_ms"], c

    at = {}
    for row in result["phases"]:
        at[(row["event"], row["process"], row["shard"])] = row["median_ms"]
    for shard in (0, 1):
        applied = [v for (e, _, s), v in at.items()
                   if e == "step_applied" and s == shard]
        commits = [v for (e, _, s), v in at.items()
                   if e == "push_committed" and s == shard]
        landed = [v for (e, p, s), v in at.items()
                  if e == "pull_landed" and s == shard and "worker" in p]
        assert len(applied) == 1 and commits and len(landed) == 2, at
        assert min(commits) <= applied[0] <= min(landed), (shard, at)
    for label in workers:
        finished = at[("finished", label, -1)]
        assert at[("computed", label, -1)] <= finished, at
        assert finished <= at[("next_begun", label, -1)], at
    print(f"ok: {workers}, median cycles "
          + ", ".join(f"{cycles[w]['median_ms']:.2f} ms" for w in workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
