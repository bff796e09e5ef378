#!/usr/bin/python3
"""A network partition between one worker and one PS shard, with the real
binaries, each process in its own network namespace (tests/fault/netns.py:
a router namespace, one namespace per process joined to it by a veth pair,
10.213.<k>.2/24; nothing is connected to the host, so no packet leaves the
machine).

  network_partition_test.py BIN_DIR [--keep] [--hold SECONDS] [--json PATH]

Job: PS mode, sync, 2 shards, 3 workers (w0, w1, w2), 1 epoch of
Fashion-MNIST (469 steps of 128), heartbeat timeout 3 s, every worker with
--rpc-timeout 2. Every process binds its namespace's address and is
reached there (coordinator :7070, shards :7071 and /metrics on :9100).

  1. Once training runs (step >= 40), the router silently drops every
     packet between w1 and ps1, both ways (no ICMP, no RST: a dead link).
     w1 still reaches the coordinator and ps0, the others reach everything.
  2. The cut is held until w1 has seen its calls to ps1 fail by deadline
     twice, has then logged no failure for 3 s (it holds its lease, retrying
     UNAVAILABLE inside one pull) and --hold seconds have passed (at most
     --max-hold).
  3. A fourth worker (w3) joins: the coordinator's generation moves on while
     w1 (and the others) hold leases of the old one. Once both shards show
     the new generation's fence (ferry_generation{role="ps"}: the
     coordinator's Fence), the cut heals.
  4. Later (step >= 300) a second, shorter cut (one deadline) lands at
     another point of a step (which part of a step a cut hits is chance:
     the pull, or the push with ps0 already done), then heals.
Asserted:
  - w1's calls to ps1 fail by their deadline, not hang: it logs
    "abandoned step N: DEADLINE_EXCEEDED: ps shard 1" at most --rpc-timeout
    + 3 s after the cut; its UNAVAILABLE failures name ps1 and fall into a
    cut; otherwise it (and every other worker) only fails by waiting for
    the others (DEADLINE_EXCEEDED of a pull of a version not made yet) or
    by being fenced.
  - w1 retries and is not evicted: it stays a member (it heartbeats), its
    step is given to it again, and it trains on after the heal.
  - fenced: after the heal, pushes leased under the old generation are
    refused ABORTED by the shards ("... older than generation ...", the
    shards' ferry_rejected_inputs_total{op="push",reason="aborted"}), never
    applied; w1's among them, unless the push of its step in flight had
    reached both shards before the cut and completed the step there (a
    shard applies a sync step on its last push; w1's retries then find it
    held, reason="already_exists", and it has nothing stale to push); no
    worker loops on a refused push (at most 40 abandoned steps each).
  - the job completes: every worker exits 0 having been told FINISH, the
    epoch applied exactly 60000 samples and dropped none, the workers'
    accepted samples add up to 60000, the test accuracy is > 0.80, both
    shards are at the same version = the steps applied, and the coordinator
    and shards exit 0 on SIGTERM.
The timeline (cut, first deadline, join, heal, first step after it, first
fenced push, end) is printed and, with --json, written as JSON.

Exit 0 pass, 1 fail, 77 skip (not root, no `ip netns` / veth / policy
rules, no binaries or dataset).
"""

import argparse
import calendar
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
import netns  # noqa: E402
from wait_until import wait_until  # noqa: E402

SKIP = 77
DATASET = "/usr/share/datasets/fashion-mnist"
EPOCH_SAMPLES = 60000
RPC_TIMEOUT_S = 2.0
HEARTBEAT_TIMEOUT_S = 3
MIN_ACCURACY = 0.80
# w1 is "holding its lease" once it has logged no failure for this long.
QUIET_S = 3.0
# Steps at which the two cuts start.
FIRST_CUT_STEP = 40
SECOND_CUT_STEP = 300
T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def _die_with_parent():
    """preexec_fn: SIGKILL when the test process dies (even by SIGKILL, e.g.
    a ctest timeout), so that no process outlives the test. `ip netns exec`
    execs the binary, which keeps the setting."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def parse_ts(ts):
    """ferry's log timestamp (2026-11-21T23:10:00.123Z) -> unix seconds."""
    base, _, frac = ts.rstrip("Z").partition(".")
    t = calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S"))
    return t + (float("0." + frac) if frac else 0.0)


class Cluster:
    """The job's processes, each in its own namespace, logs in `work`."""

    def __init__(self, bin_dir, net, work):
        self.bin = bin_dir
        self.net = net
        self.work = work
        self.procs = {}
        self.coord = f"{net.ip('coord')}:7070"
        self.shards = [f"{net.ip('ps0')}:7071", f"{net.ip('ps1')}:7071"]

    def start(self, node, argv):
        path = os.path.join(self.work, f"{node}.log")
        with open(path, "w") as out:
            p = subprocess.Popen(self.net.exec_prefix(node) + argv, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True,
                                 preexec_fn=_die_with_parent)
        self.procs[node] = (p, path)

    def start_servers(self):
        common = ["--log-format", "json"]
        self.start("coord", [
            f"{self.bin}/ferry-server", "--role", "coordinator",
            "--listen", self.coord, "--job-id", "partition", "--mode", "ps",
            "--consistency", "sync", "--epochs", "1", "--start-workers", "3",
            "--heartbeat-timeout", str(HEARTBEAT_TIMEOUT_S),
            "--checkpoint-every", "0", "--data-dir", DATASET,
            "--shards", *self.shards] + common)
        for k in (0, 1):
            self.start(f"ps{k}", [
                f"{self.bin}/ferry-server", "--role", "ps",
                "--listen", self.shards[k], "--shard-id", str(k),
                "--coordinator", self.coord, "--metrics-port", "9100"] + common)

    def start_worker(self, node):
        self.start(node, [
            f"{self.bin}/ferry-worker", "--coordinator", self.coord,
            "--device", "cpu", "--rpc-timeout", str(RPC_TIMEOUT_S),
            "--peer-listen", f"{self.net.ip(node)}:0",
            "--summary-json", os.path.join(self.work, f"{node}.json"),
            "--log-format", "json"])

    def in_ns(self, node, argv, timeout=20):
        return subprocess.run(self.net.exec_prefix(node) + argv,
                              capture_output=True, text=True, timeout=timeout)

    def status(self):
        r = self.in_ns("coord", [f"{self.bin}/ferry", "status", "--coordinator",
                                 self.coord, "--json"])
        return json.loads(r.stdout) if r.returncode == 0 else None

    def metrics(self, node):
        """The shard's Prometheus text (from inside the coordinator's
        namespace, which reaches every shard)."""
        url = f"http://{self.net.ip(node)}:9100/metrics"
        r = self.in_ns("coord", [sys.executable, "-c",
                                 "import sys, urllib.request; sys.stdout.write("
                                 "urllib.request.urlopen(sys.argv[1], timeout=10)"
                                 ".read().decode())", url])
        check(r.returncode == 0, f"cannot read {url}: {r.stderr.strip()}")
        return r.stdout

    def poll(self, node):
        return self.procs[node][0].poll()

    def wait(self, node, timeout):
        try:
            return self.procs[node][0].wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def terminate(self, node, timeout=15):
        p = self.procs[node][0]
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        return self.wait(node, timeout)

    def kill_all(self):
        for p, _ in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait()

    def events(self, node):
        """The node's JSON log lines, each with "t" (unix seconds) added."""
        out = []
        with open(self.procs[node][1]) as f:
            for line in f:
                if not line.startswith("{"):
                    continue
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                e["t"] = parse_ts(e["ts"]) if "ts" in e else 0.0
                out.append(e)
        return out

    def worker_id(self, node):
        for e in self.events(node):
            m = re.match(r"registered with \S+ as (\S+):", e.get("msg", ""))
            if m:
                return m.group(1)
        return None


ABANDONED = re.compile(r"abandoned step (\d+): ([A-Z_]+): (.*)")
# The worker's message for a pull that waited for a version (ps/ps_calls.h).
PULL_WAIT = re.compile(r"ps shard \d+ \([^)]*\) pull of version >= \d+: ")


def abandoned(cluster, node, since=0.0):
    """[(t, step, code, message)] of the node's abandoned steps."""
    out = []
    for e in cluster.events(node):
        m = ABANDONED.match(e.get("msg", ""))
        if m and e["t"] >= since:
            out.append((e["t"], int(m.group(1)), m.group(2), m.group(3)))
    return out


def metric_sum(text, name, **labels):
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def wait_for(what, cond, timeout, interval=0.2):
    return wait_until(what, cond, timeout, interval=interval, error=Failure)


def step_of(status):
    return int(status.get("step", 0)) if status else -1


def scenario(cluster, net, args, timeline):
    cluster.start_servers()
    for w in ("w0", "w1", "w2"):
        cluster.start_worker(w)
    s = wait_for(f"step {FIRST_CUT_STEP}",
                 lambda: (lambda st: st if step_of(st) >= FIRST_CUT_STEP else None)(
                     cluster.status()), 60)
    cut_id = cluster.worker_id("w1")
    check(cut_id, "w1 did not log its registration")
    log(f"w1 is {cut_id}; step {s['step']}, generation {s['generation']}")
    generation_before = int(s["generation"])

    # 1. The cut.
    net.partition("w1", "ps1")
    cut = time.time()
    timeline["cut"] = cut
    timeline["step_at_cut"] = step_of(s)
    log(f"cut w1 <-> ps1 at step {s['step']}")
    # 2. Hold until w1 saw ps1 fail by deadline twice, and --hold seconds.
    fails = wait_for(
        "w1's calls to ps1 failing by deadline (twice)",
        lambda: (lambda a: a if len(a) >= 2 else None)(
            [x for x in abandoned(cluster, "w1", cut)
             if x[2] == "DEADLINE_EXCEEDED" and "ps shard 1" in x[3]]),
        8 * RPC_TIMEOUT_S + 10)
    timeline["first_deadline"] = fails[0][0]
    log(f"w1: step {fails[0][1]} abandoned {fails[0][0] - cut:.2f} s after the cut: "
        f"{fails[0][2]}: {fails[0][3]}")
    # Then until w1 has been quiet for a while: it holds its lease, retrying
    # UNAVAILABLE (gRPC gave the connection up) with backoff.
    # The partition lasts --hold seconds at least (the scenario, not a
    # wait for anything) and at most --max-hold; reaching --max-hold
    # without quiet is not a failure here (the checks below judge).
    def held_and_quiet():
        last = max(x[0] for x in abandoned(cluster, "w1", cut))
        return time.time() - cut >= args.hold and time.time() - last >= QUIET_S
    wait_until("w1 to be quiet", held_and_quiet, args.max_hold, error=None)
    timeline["w1_last_failure_before_join"] = max(x[0] for x in abandoned(cluster, "w1", cut))
    # 3. A join while cut off, just before the heal: a new generation while
    # the workers hold leases of the old one (each re-lease after a failure
    # gets the current generation, so a join early in the partition would
    # leave nothing stale).
    s_held = cluster.status()
    timeline["step_before_heal"] = step_of(s_held)
    cluster.start_worker("w3")
    timeline["join"] = time.time()
    s = wait_for("w3 to join (a new generation)",
                 lambda: (lambda st: st if st and int(st["generation"]) > generation_before
                          and len(st.get("members", [])) >= 4 else None)(cluster.status()),
                 30)
    timeline["join_seen"] = time.time()
    members = {m["worker_id"]: m for m in s.get("members", [])}
    check(cut_id in members,
          f"w1 ({cut_id}) is no longer a member while cut off from ps1 only: {sorted(members)}")
    check(float(members[cut_id].get("seconds_since_heartbeat", 0)) < HEARTBEAT_TIMEOUT_S,
          f"w1 stopped heartbeating: {members[cut_id]}")
    log(f"w3 joined: generation {s['generation']}, members {sorted(members)}, "
        f"step {s['step']}")
    # The coordinator fences the shards when its generation moves (a step
    # applied on push raises no fence of its own): heal once both have it.
    new_generation = int(s["generation"])
    wait_for(f"both shards fenced at generation {new_generation}",
             lambda: all(metric_sum(cluster.metrics(k), "ferry_generation", role="ps")
                         >= new_generation for k in ("ps0", "ps1")), 15)
    net.heal("w1", "ps1")
    timeline["w1_quiet_through_join"] = (
        max(x[0] for x in abandoned(cluster, "w1", cut)) < timeline["join"])
    heal = time.time()
    timeline["heal"] = heal
    log(f"healed after {heal - cut:.1f} s at step {s_held['step']} "
        f"(step {timeline['step_at_cut']} at the cut)")
    s = wait_for("a step applied after the heal",
                 lambda: (lambda st: st if step_of(st) > step_of(s_held) else None)(
                     cluster.status()), 60, interval=0.1)
    timeline["first_step_after_heal"] = time.time()
    log(f"training on: step {s['step']} {time.time() - heal:.2f} s after the heal")

    # 4. The second cut.
    s = wait_for(f"step {SECOND_CUT_STEP}",
                 lambda: (lambda st: st if step_of(st) >= SECOND_CUT_STEP or
                          (st and st.get("finished")) else None)(cluster.status()), 60)
    if not s.get("finished"):
        net.partition("w1", "ps1")
        cut2 = time.time()
        timeline["cut2"] = cut2
        log(f"second cut at step {s['step']}")
        wait_for("w1's call to ps1 failing by deadline after the second cut",
                 lambda: [x for x in abandoned(cluster, "w1", cut2)
                          if x[2] == "DEADLINE_EXCEEDED" and "ps shard 1" in x[3]],
                 4 * RPC_TIMEOUT_S + 10)
        net.heal("w1", "ps1")
        timeline["heal2"] = time.time()
        log(f"healed the second cut after {time.time() - cut2:.1f} s")
    else:
        log("the job finished before the second cut (fast machine): skipped it")

    # The end.
    codes = {}
    for w in ("w0", "w1", "w2", "w3"):
        codes[w] = cluster.wait(w, 120)
        log(f"{w} exited {codes[w]}")
    timeline["workers_done"] = time.time()
    final = wait_for("the coordinator's final evaluation",
                     lambda: (lambda st: st if st and st.get("finished") else None)(
                         cluster.status()), 60)
    shard_metrics = {k: cluster.metrics(k) for k in ("ps0", "ps1")}
    stops = {n: cluster.terminate(n) for n in ("coord", "ps0", "ps1")}
    verify(cluster, timeline, cut_id, codes, final, shard_metrics, stops)


def verify(cluster, timeline, cut_id, codes, final, shard_metrics, stops):
    cut, heal = timeline["cut"], timeline["heal"]
    problems = []

    def expect(cond, msg):
        if not cond:
            problems.append(msg)

    # Calls failed by deadline (or UNAVAILABLE once the channel gave up
    # connecting), not hung, and only w1's calls to ps1.
    first = timeline["first_deadline"] - cut
    timeline["cut_to_first_deadline_s"] = round(first, 2)
    expect(first <= RPC_TIMEOUT_S + 3,
           f"w1's first deadline came {first:.1f} s after the cut (rpc timeout "
           f"{RPC_TIMEOUT_S} s)")
    windows = [(cut, heal)]
    if "cut2" in timeline:
        windows.append((timeline["cut2"], timeline["heal2"]))
    for t, step, code, msg in abandoned(cluster, "w1"):
        # A call started before the heal may end by its deadline after it.
        in_partition = any(a <= t <= b + RPC_TIMEOUT_S + 1 for a, b in windows)
        if code == "ABORTED":
            expect("older than generation" in msg,
                   f"w1 abandoned step {step}: {code}: {msg}")
        elif code == "UNAVAILABLE":
            expect("ps shard 1" in msg and in_partition,
                   f"w1 could not reach a shard outside the partition: step {step}: {msg}")
        else:
            # Outside the partition only a wait for the others' pushes: a
            # pull of a version they have not made yet (a slow start, a
            # newcomer), never a push, which no shard holds back.
            expect(code == "DEADLINE_EXCEEDED" and
                   (in_partition or PULL_WAIT.search(msg)),
                   f"w1 abandoned step {step} outside the partition: {code}: {msg}")
    for w in ("w0", "w2", "w3"):
        for t, step, code, msg in abandoned(cluster, w):
            # They only ever wait (for w1, or a newcomer) or are fenced.
            expect(code == "DEADLINE_EXCEEDED" and PULL_WAIT.search(msg) or
                   code == "ABORTED" and "older than generation" in msg,
                   f"{w} (not cut off) abandoned step {step}: {code}: {msg}")
    # No livelock: a worker gives a step up a handful of times, not in a loop.
    for w in ("w0", "w1", "w2", "w3"):
        n = len(abandoned(cluster, w))
        timeline[f"abandoned_{w}"] = n
        expect(n <= 40, f"{w} abandoned {n} steps (a retry loop?)")

    # Fenced: stale-generation pushes refused after the heal, never applied.
    fenced = []
    for w in ("w0", "w1", "w2", "w3"):
        for t, step, code, msg in abandoned(cluster, w, heal):
            if code == "ABORTED" and "older than generation" in msg:
                fenced.append((t, w, step, msg))
    fenced.sort()
    aborted = sum(metric_sum(m, "ferry_rejected_inputs_total", role="ps", op="push",
                             reason="aborted") for m in shard_metrics.values())
    already = sum(metric_sum(m, "ferry_rejected_inputs_total", role="ps", op="push",
                             reason="already_exists") for m in shard_metrics.values())
    timeline["pushes_refused_aborted"] = aborted
    timeline["pushes_already_held"] = already
    timeline["fenced"] = [f"{w} step {step}: {msg}" for _, w, step, msg in fenced]
    # w1 held the leases it had before the join through the heal.
    expect(timeline.get("w1_quiet_through_join"),
           "w1 did not settle into retrying (holding its lease) within --max-hold: "
           "it re-leased after the join, so nothing of it was stale")
    # Which part of a step the cut hit is chance (a shard applies a sync
    # step on its last push): either w1's push to ps1 was lost, and its push
    # leased under the old generation must be refused after the heal, or
    # that push had reached both shards and completed the step there (its
    # retries found it held: ALREADY_EXISTS), so w1 only waited for the new
    # version and had nothing stale left to push. Either way nothing is
    # applied twice: the accounting below checks it.
    w1_fenced = any(w == "w1" for _, w, _, _ in fenced)
    timeline["w1_stale_push"] = ("refused" if w1_fenced else
                                 "none: its step was applied before the join"
                                 if already > 0 else "none")
    expect(w1_fenced or already > 0,
           "w1's push leased under the old generation was not refused after the heal, "
           "and no shard held a push of its step (ferry_rejected_inputs_total"
           "{reason=\"already_exists\"} is 0)")
    expect(aborted >= len(fenced),
           f"the shards counted {aborted} ABORTED pushes, the workers saw {len(fenced)}")
    if fenced:
        timeline["heal_to_first_fenced_s"] = round(fenced[0][0] - heal, 2)

    # Completion and the final state.
    for w, code in codes.items():
        expect(code == 0, f"{w} exited {code}")
    summaries = {}
    for w in codes:
        path = os.path.join(cluster.work, f"{w}.json")
        if os.path.exists(path):
            with open(path) as f:
                summaries[w] = json.load(f)
        expect(summaries.get(w, {}).get("end_reason") == "finished",
               f"{w} did not finish: {summaries.get(w)}")
    expect(summaries.get("w1", {}).get("worker_id") == cut_id,
           f"w1's summary names {summaries.get('w1', {}).get('worker_id')}, not {cut_id}")
    accepted = sum(int(s.get("samples", 0)) for s in summaries.values())
    expect(accepted == EPOCH_SAMPLES,
           f"the workers' accepted samples add up to {accepted}, not {EPOCH_SAMPLES}")
    accounting = final.get("accounting", [])
    expect(len(accounting) == 1 and int(accounting[0].get("samples_applied", 0)) ==
           EPOCH_SAMPLES and int(accounting[0].get("samples_dropped", 0)) == 0,
           f"epoch accounting: {accounting}")
    evals = final.get("evals", [])
    accuracy = float(evals[-1].get("test_accuracy", 0)) if evals else 0.0
    expect(accuracy > MIN_ACCURACY, f"test accuracy {accuracy} (evals {evals})")
    expect(not final.get("error"), f"coordinator error: {final.get('error')}")
    steps = step_of(final)
    versions = {k: metric_sum(m, "ferry_model_version") for k, m in shard_metrics.items()}
    expect(len(set(versions.values())) == 1 and versions["ps0"] == steps,
           f"shard versions {versions}, steps applied {steps}")
    for n, code in stops.items():
        expect(code == 0, f"{n} exited {code} on SIGTERM")
    timeline.update({
        "steps": steps, "generation": int(final.get("generation", 0)),
        "test_accuracy": accuracy, "shard_versions": versions,
        "worker_samples": {w: int(s.get("samples", 0)) for w, s in summaries.items()},
        "heal_to_first_step_s": round(timeline["first_step_after_heal"] - heal, 2),
        "partition_s": round(heal - cut, 2),
        "steps_during_partition": timeline["step_before_heal"] - timeline["step_at_cut"],
        "job_wall_s": round(float(final.get("wall_seconds", 0)), 1),
    })
    if problems:
        raise Failure("\n  ".join([""] + problems))


def run(args):
    if not os.path.isdir(DATASET):
        raise netns.Unavailable(f"no dataset at {DATASET} (dataset-fashion-mnist)")
    for b in ("ferry", "ferry-server", "ferry-worker"):
        if not os.access(os.path.join(args.bin_dir, b), os.X_OK):
            raise netns.Unavailable(f"no {b} in {args.bin_dir} (build it first)")
    netns.check_available()
    work = tempfile.mkdtemp(prefix="ferry-partition-")
    log(f"logs in {work}")
    timeline = {}
    ok = False
    try:
        with netns.Topology(["coord", "ps0", "ps1", "w0", "w1", "w2", "w3"]) as net:
            cluster = Cluster(args.bin_dir, net, work)
            try:
                scenario(cluster, net, args, timeline)
                ok = True
            finally:
                cluster.kill_all()
    finally:
        report(timeline, args)
        if ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"logs kept in {work}")


def report(timeline, args):
    base = timeline.get("cut")
    rel = {k: round(v - base, 2) for k, v in timeline.items()
           if base and isinstance(v, float) and v > 1e9}
    out = {k: v for k, v in timeline.items() if not (isinstance(v, float) and v > 1e9)}
    out["seconds_after_cut"] = rel
    print(json.dumps(out, indent=1, sort_keys=True), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("--keep", action="store_true", help="keep the logs after a pass")
    ap.add_argument("--hold", type=float, default=6.0,
                    help="hold the first cut at least this long (seconds)")
    ap.add_argument("--max-hold", type=float, default=20.0,
                    help="hold the first cut at most this long (seconds)")
    ap.add_argument("--json", help="write the timeline here")
    args = ap.parse_args()
    # ctest's timeout and ^C: unwind, so that the namespaces are deleted.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        run(args)
    except netns.Unavailable as e:
        print(f"SKIP: {e}", flush=True)
        return SKIP
    except Failure as e:
        log(f"FAIL: {e}")
        return 1
    log("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
