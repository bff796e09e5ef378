#!/usr/bin/python3
"""Runs the rendered Kubernetes manifests on loopback, so that they cannot
drift from the binaries.

  manifest_loopback_test.py BIN_DIR SOURCE_DIR [--overlay cpu] [--keep]
                            [--components ring,tls,auth-token]
                            [--image localhost/ferry:cpu] [--finish EPOCHS]
                            [--prometheus]

Renders deploy/k8s/overlays/<overlay> (kubectl kustomize) and plays the
kubelet for its workloads: the coordinator Deployment, the ps StatefulSet
(ferry-ps-0..replicas-1) and the worker Deployment, each container started
from BIN_DIR with the manifest's command, args and environment (ConfigMap
envFrom / configMapKeyRef, downward API: status.podIP -> 127.0.0.1,
metadata.name -> the pod name, HOSTNAME = the pod name as in a pod). What
has to change on one machine, and nothing else:
  - every declared containerPort of every pod gets its own free loopback
    port: 0.0.0.0:P -> 127.0.0.1:<port of P>, FERRY_*_PORT=P -> <port of P>;
  - Service names (ferry-coordinator:7070, ferry-ps-N.ferry-ps:7071, also
    with .NAMESPACE[.svc[.cluster.local]]) -> 127.0.0.1:<port of the pod's
    containerPort the Service targets>;
  - volume mount paths (PVCs, emptyDirs) -> a temporary directory per pod;
  - a short run on a small machine: the same overrides a user would patch
    into ConfigMap ferry-job / the worker env (SHORT_RUN below).
Then: waits for every pod's readinessProbe (run with `ferry health`, as the
kubelet's gRPC probe would), trains a few steps, scales the workers up (one
more pod) and down (SIGTERM to one, as `kubectl scale` does; it must exit 0
within its terminationGracePeriodSeconds), runs every readiness and liveness
probe, reads /metrics of every pod on its prometheus.io/port, then SIGTERMs
every pod (exit 0 within the grace period). Exit 0 pass, 1 fail, 77 skip
(no kubectl, or binaries without the flags the manifests use).

A container whose command is python3 (components/torch-worker: a
ferry.torch script from a ConfigMap) runs Debian's /usr/bin/python3 with
the build's ferry package (BIN_DIR/../python) on PYTHONPATH, as the
ferry:torch image has them; ConfigMap volumes are projected into the pod's
volume directory as the kubelet does. Skips (77) without torch or the
package.

--components adds deploy/k8s/components/<name> to the overlay, as a user's
overlay lists them. The Secrets they mount (ferry-tls, ferry-auth) are made
by the test as docs/deploy.md says (a CA of its own, one certificate with
the documented SANs, a random token) and projected into each pod's
volume; `ferry status` calls with the same certificate and token.

--finish EPOCHS trains a job of EPOCHS epochs to its end instead of
stopping it: after the scaling, a shard container is killed (SIGKILL) and
started again on its volume (PS), or a worker is killed and replaced
(ring), and the coordinator is killed and started again on its state
volume; the job must then finish with its final evaluation, every epoch's
samples applied exactly once, and no error. Prints the start-up time (the
first container start to the first step) and the accuracy.

--prometheus runs Debian's Prometheus beside the job: it scrapes every
pod's metrics port (file_sd with the `namespace` and `pod` labels of
deploy/monitoring/prometheus-scrape.yaml) and evaluates
deploy/monitoring/ferry-rules.yaml (its groups' interval shortened to 1 s,
the expressions as shipped). With --finish, the recording rules must equal
the finished job's status (steps, samples, throughput, members, each
worker's bytes), every query of deploy/monitoring/grafana-dashboard.json
must return data, and no alert may fire. Skips (77) without prometheus.

With --image IMAGE every pod is a container of IMAGE instead (podman,
runc, host network so that the loopback ports hold): the manifest's
command as the entrypoint, its args and environment, its volumes mounted
at their mountPaths from the pod's directory, its runAsUser:runAsGroup,
a read-only root file system where the container's securityContext asks
for one. BIN_DIR then only provides `ferry health` and `ferry status`, run
from outside as the kubelet and an operator would. Skips (77) without
podman, without the image (scripts/images builds it), or when the image was
built from other sources than SOURCE_DIR's: its ferry.source-digest label
(scripts/docker_context.py) differs, and a stale image would test old code.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferry_manifests as fm  # noqa: E402
from loopback_cluster import (T0, Cluster, Failure, PortTaken, free_port, log,  # noqa: E402
                              members_of, step_of, summary)
from deploy_secrets import Secrets, secret_names  # noqa: E402
from prometheus_check import Prometheus, PrometheusFailure  # noqa: E402
SKIP = 77
# Per role (and job mode): metric series that must have moved after
# training steps.
EXPECTED_NONZERO = {
    "coordinator": ('ferry_steps_total{role="coordinator"}', "ferry_members",
                    'ferry_generation{role="coordinator"}'),
    "ps": ('ferry_push_seconds_count{role="ps"}', 'ferry_pull_seconds_count{role="ps"}',
           'ferry_model_version{role="ps"}',
           'ferry_bytes_total{direction="received",peer_role="worker",role="ps"}'),
    "worker": ('ferry_steps_total{role="worker"}', 'ferry_push_seconds_count{role="worker"}',
               'ferry_pull_seconds_count{role="worker"}',
               'ferry_bytes_total{direction="sent",peer_role="ps",role="worker"}'),
    "ring-worker": ('ferry_steps_total{role="worker"}', "ferry_allreduce_seconds_count",
                    'ferry_bytes_total{direction="sent",peer_role="worker",role="worker"}'),
}


def image_staleness(image, source_dir):
    """Why image was not built from source_dir's sources, or None when it was."""
    sys.path.insert(0, os.path.join(source_dir, "scripts"))
    import docker_context
    labels = json.loads(subprocess.run(
        ["podman", "image", "inspect", "--format", "{{json .Labels}}", image],
        check=True, capture_output=True, text=True).stdout or "null") or {}
    built_from = labels.get(docker_context.LABEL_KEY)
    if built_from is None:
        return f"image {image} has no {docker_context.LABEL_KEY} label (built before it existed)"
    wanted = docker_context.digest(source_dir)
    if built_from != wanted:
        return (f"image {image} was built from other sources ({built_from[:12]}) than "
                f"{source_dir}'s ({wanted[:12]})")
    return None


def preflight(bin_dir, docs):
    """Skips (77) when the binaries lack what the manifests use."""
    for b in ("ferry-server", "ferry-worker", "ferry"):
        if not os.access(os.path.join(bin_dir, b), os.X_OK):
            print(f"SKIP: {bin_dir}/{b} is missing (build first)")
            sys.exit(SKIP)
    r = subprocess.run([os.path.join(bin_dir, "ferry"), "health", "--help"],
                       capture_output=True, text=True)
    if r.returncode != 0 or "--address" not in r.stdout:
        print("SKIP: this build has no `ferry health` (the probes need it)")
        sys.exit(SKIP)
    if any(fm.is_python(c.get("command") or ["-"])
           for w in docs if w.get("kind") in fm.WORKLOAD_KINDS
           for c in w["spec"]["template"]["spec"]["containers"]):
        # PyTorch workers (components/torch-worker): Debian's torch and the
        # build's ferry package.
        from loopback_cluster import PYTHON, python_package_dir
        package = python_package_dir(bin_dir)
        check = subprocess.run([PYTHON, "-c", "import torch, ferry.torch"],
                               env={**os.environ, "PYTHONPATH": package},
                               capture_output=True, text=True)
        if check.returncode != 0:
            print(f"SKIP: no torch or no ferry package in {package} "
                  f"({check.stderr.strip().splitlines()[-1:]})")
            sys.exit(SKIP)
    problems = fm.consistency_problems(docs, bin_dir)
    if problems:
        print("FAIL: the manifests do not match the binaries:")
        for p in problems:
            print("  " + p)
        sys.exit(1)


def run(cluster, t_limit, finish):
    replicas_ps = cluster.ps_wl["spec"].get("replicas", 1) if cluster.ps_wl else 0
    replicas_w = cluster.worker_wl["spec"].get("replicas", 1)
    # The job's members: the worker pods, and the shard pods where they
    # train too (components/colocated-shards).
    members = replicas_w + (replicas_ps if cluster.colocated else 0)
    # Create every pod first (ports), then start them as the controllers
    # would: all at once, in no particular order of readiness.
    coord = cluster.create(cluster.coordinator_wl, "coordinator")
    shards = [cluster.create(cluster.ps_wl, "ps", i) for i in range(replicas_ps)]
    workers = [cluster.create(cluster.worker_wl, "worker") for _ in range(replicas_w)]
    t_start = time.monotonic()
    for pod in [coord] + shards + workers:
        cluster.start(pod)
    cluster.wait_ready([coord] + shards + workers)
    # Liveness too.
    for pod in cluster.pods:
        rc, out = cluster.probe(pod, "livenessProbe")
        if rc != 0:
            raise Failure(f"{pod.name}: livenessProbe failed: {out}")

    st = cluster.wait_for("the first step", lambda s: step_of(s) >= 1, timeout=60)
    first_step = time.monotonic() - t_start
    log(f"first step {first_step:.1f}s after the first container started "
        f"(the job's startup_seconds: {st.get('startup_seconds', 0):.1f}s)")
    st = cluster.wait_for("the first steps", lambda s: step_of(s) >= 5)
    log(f"training: {summary(st)}")
    check_callers_without_credentials(cluster)

    scale_up_and_down(cluster, members)
    if finish:
        workers = inject_faults(cluster, coord, shards, workers, members)
        st = finish_job(cluster, finish)
        log(f"RESULT: start-up {first_step:.1f}s to the first step, test accuracy "
            f"{st['evals'][-1].get('test_accuracy', 0):.4f} after {finish} epochs, "
            f"{step_of(st)} steps, {st.get('restarts', 0)} coordinator restart(s), "
            f"{st.get('rollbacks', 0)} rollback(s)")
    check_probes_and_metrics(cluster, [coord] + shards + workers, finished=bool(finish))
    if finish and cluster.prometheus:
        cluster.prometheus.check_finished(cluster, cluster.status(), log)
    tear_down(cluster, coord, shards, workers)
    if time.monotonic() - T0 > t_limit:
        raise Failure(f"took {time.monotonic() - T0:.0f}s, more than {t_limit}s")


def check_callers_without_credentials(cluster):
    """With the TLS and token components, a caller without the certificate
    or without the token is refused."""
    flags = cluster.client_flags()
    if not flags:
        return
    token_at = flags.index("--auth-token-file") if "--auth-token-file" in flags else None
    attempts = {"no certificate and no token": []}
    if token_at is not None:
        attempts["the certificate but no token"] = flags[:token_at] + flags[token_at + 2:]
    for what, partial in attempts.items():
        try:
            cluster.status(partial)
        except Failure as e:
            log(f"a caller with {what} is refused: {str(e)[:120]}")
            continue
        raise Failure(f"ferry status with {what} was answered")


def scale_up_and_down(cluster, members):
    # Scale up: kubectl scale deploy/ferry-worker --replicas N+1.
    extra = cluster.create(cluster.worker_wl, "worker")
    cluster.start(extra)
    cluster.wait_ready([extra])
    st = cluster.wait_for(f"{members + 1} members", lambda s: members_of(s) == members + 1)
    before = step_of(st)
    st = cluster.wait_for(f"steps with {members + 1} members",
                          lambda s: members_of(s) == members + 1 and step_of(s) >= before + 5)
    log(f"scaled up: {summary(st)}")

    # Scale down: kubectl scale --replicas N sends SIGTERM to one pod.
    rc, secs = cluster.terminate(extra)
    if rc != 0:
        raise Failure(f"{extra.name} exited with code {rc} after SIGTERM (expected 0)")
    log(f"scaled down: {extra.name} left, exit 0 in {secs:.1f}s (grace {extra.grace}s)")
    if cluster.prometheus:
        cluster.prometheus.set_targets(cluster)
    progress(cluster, members, "after scale-down")


def progress(cluster, members, what, timeout=60):
    st = cluster.wait_for(f"{members} members", lambda s: members_of(s) == members,
                          timeout=timeout)
    before = step_of(st)
    st = cluster.wait_for(f"steps with {members} members",
                          lambda s: members_of(s) == members and step_of(s) >= before + 5,
                          timeout=timeout)
    log(f"{what}: {summary(st)}")
    return st


def inject_faults(cluster, coord, shards, workers, members):
    """What a node loss does to each kind of pod. Returns the workers."""
    if shards:
        # The StatefulSet starts ferry-ps-N again on its claim (colocated:
        # a member is lost with its shard, and both come back).
        shard = shards[-1]
        cluster.kill(shard)
        cluster.start(shard)
        cluster.wait_ready([shard])
        progress(cluster, members, f"{shard.name} restarted on its volume")
    else:
        # Ring: the Deployment replaces a lost worker with a new pod.
        lost = workers[-1]
        cluster.kill(lost)
        replacement = cluster.create(cluster.worker_wl, "worker")
        cluster.start(replacement)
        cluster.wait_ready([replacement])
        workers = workers[:-1] + [replacement]
        progress(cluster, members, f"{lost.name} replaced by {replacement.name}")
    # The Deployment starts the coordinator again on its state claim (the
    # Service keeps its name, so the pod keeps its ports here).
    cluster.kill(coord)
    cluster.start(coord)
    cluster.wait_ready([coord])
    st = progress(cluster, members, "coordinator restarted on its state volume")
    if int(st.get("restarts", 0)) < 1:
        raise Failure(f"the coordinator did not resume from its state (restarts "
                      f"{st.get('restarts')})")
    return workers


def finish_job(cluster, epochs):
    """Waits for the job's end; its result and accounting must be whole."""
    st = cluster.wait_for("the job to finish", lambda s: bool(s.get("finished")),
                          timeout=60 * epochs + 120)
    with open(os.path.join(cluster.work_dir, "status-finished.json"), "w") as f:
        json.dump(st, f, indent=1)
    if st.get("error"):
        raise Failure(f"the job finished with an error: {st['error']}")
    evals = st.get("evals", [])
    if not evals or not evals[-1].get("final"):
        raise Failure(f"no final evaluation in the finished job's status: {evals[-1:]}")
    accuracy = evals[-1].get("test_accuracy", 0)
    if accuracy < 0.75:
        raise Failure(f"final test accuracy {accuracy:.4f} after {epochs} epochs (expected "
                      ">= 0.75 for the Fashion-MNIST MLP)")
    accounting = st.get("accounting", [])
    size = train_samples(cluster)
    if len(accounting) != epochs:
        raise Failure(f"{len(accounting)} epochs accounted, expected {epochs}: {accounting}")
    for a in accounting:  # proto JSON: int64 as strings, zeros left out
        applied, dropped = int(a.get("samples_applied", 0)), int(a.get("samples_dropped", 0))
        if applied != size or dropped:
            raise Failure(f"epoch {a.get('epoch', 0)}: {applied} samples applied, {dropped} "
                          f"dropped, of {size}: not every sample exactly once")
    log(f"finished: {summary(st)}; every epoch applied each of its {size} samples once")
    return st


def train_samples(cluster):
    """The training set's size: the job's external:N (a PyTorch worker's
    dataset), else as the workers loaded it (their log)."""
    for cm in fm.find(cluster.docs, "ConfigMap", "ferry-job"):
        found = re.fullmatch(r"external:(\d+)", (cm.get("data") or {}).get("FERRY_DATASET", ""))
        if found:
            return int(found.group(1))
    for pod in cluster.trainer_pods():
        with open(pod.log_path, errors="replace") as f:
            found = re.search(r"(\d+) train samples", f.read())
        if found:
            return int(found.group(1))
    raise Failure("no worker logged its training set's size")


def check_probes_and_metrics(cluster, pods, finished=False):
    """Every running pod: both probes and its metrics endpoint."""
    for pod in pods:
        for which in ("readinessProbe", "livenessProbe"):
            rc, out = cluster.probe(pod, which)
            if rc != 0:
                raise Failure(f"{pod.name}: {which} failed (exit {rc}): {out}")
        text = cluster.metrics(pod)
        names = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
                 if line.startswith("ferry_")}
        if not names:
            raise Failure(f"{pod.name}: /metrics has no ferry_* metric")
        # The series that show this role did its work while we watched.
        values = {}
        for line in text.splitlines():
            if line.startswith("ferry_") and " " in line:
                key, value = line.rsplit(" ", 1)
                values[key] = float(value)
        role = "ring-worker" if pod.role == "worker" and cluster.mode == "ring" else pod.role
        # A colocated shard pod trains too: both roles' series.
        roles = ("ps", "worker") if pod.role == "ps" and cluster.colocated else (role,)
        for key in (k for r in roles for k in EXPECTED_NONZERO.get(r, ())):
            if finished and key == "ferry_members":
                continue  # the workers of a finished job are no members
            if values.get(key, 0) <= 0:
                raise Failure(f"{pod.name}: {key} is {values.get(key)}, expected > 0")
        log(f"{pod.name}: probes SERVING, /metrics: {len(names)} ferry_* series names")


def tear_down(cluster, coord, shards, workers):
    # kubectl delete: every pod gets SIGTERM.
    for pod in workers + shards + [coord]:
        rc, secs = cluster.terminate(pod)
        if rc != 0:
            raise Failure(f"{pod.name} exited with code {rc} after SIGTERM (expected 0)")
        log(f"{pod.name}: exit 0 {secs:.1f}s after SIGTERM (grace {pod.grace}s)")
    # What docs/deploy.md collects: each shard's checkpoint on its claim
    # (written at SIGTERM), the coordinator's state on its claim.
    for pod in shards:
        for claim in pod.workload["spec"].get("volumeClaimTemplates", []):
            files = os.listdir(pod.volume(claim["metadata"]["name"]))
            if not any(f.startswith(f"shard-{pod.index}-v") and f.endswith(".ckpt") for f in files):
                raise Failure(f"{pod.name}: no shard-{pod.index}-v*.ckpt on volume "
                              f"{claim['metadata']['name']} after SIGTERM: {files}")
    for v in coord.spec.get("volumes", []):
        if "persistentVolumeClaim" in v and not os.listdir(coord.volume(v["name"])):
            raise Failure(f"{coord.name}: nothing saved on volume {v['name']}")
    log("checkpoints and coordinator state are on their volumes")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("source_dir")
    ap.add_argument("--overlay", default="cpu")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--time-limit", type=float, default=120,
                    help="fail when the whole run takes longer (seconds)")
    ap.add_argument("--image", help="run every pod as a container of this image (podman)")
    ap.add_argument("--components", default="",
                    help="comma-separated deploy/k8s/components to add (ring, tls, auth-token)")
    ap.add_argument("--finish", type=int, metavar="EPOCHS",
                    help="train a job of EPOCHS epochs to its end, with faults")
    ap.add_argument("--prometheus", action="store_true",
                    help="scrape the job with Debian's prometheus and check the rules")
    a = ap.parse_args()
    if a.prometheus and shutil.which("prometheus") is None:
        print("SKIP: no prometheus (Debian's `prometheus` package)")
        return SKIP
    if a.image:
        if shutil.which("podman") is None:
            print("SKIP: no podman (scripts/images installs it)")
            return SKIP
        if subprocess.run(["podman", "image", "exists", a.image]).returncode != 0:
            print(f"SKIP: no image {a.image} here (scripts/images builds it)")
            return SKIP
        stale = image_staleness(a.image, a.source_dir)
        if stale:
            print(f"SKIP: {stale}; scripts/images rebuilds it")
            return SKIP
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("SKIP: no kubectl on PATH (scripts/setup installs one)")
        return SKIP
    overlay = os.path.join(a.source_dir, "deploy", "k8s", "overlays", a.overlay)
    components = [os.path.join(a.source_dir, "deploy", "k8s", "components", c)
                  for c in a.components.split(",") if c]
    try:
        docs = fm.render(overlay, kubectl, components)
    except subprocess.CalledProcessError as e:
        print(f"SKIP: kubectl kustomize cannot render {overlay} (kustomize too old?): "
              f"{e.stderr.strip()[:400]}")
        return SKIP
    bin_dir = os.path.abspath(a.bin_dir)
    preflight(bin_dir, docs)
    work_dir = tempfile.mkdtemp(prefix="ferry-manifest-loopback-")
    # SIGTERM/SIGINT to the test: clean up like any other failure.
    def interrupted(signum, frame):
        raise Failure(f"interrupted by signal {signum}")
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    ok = False
    # Ports are picked free but bound later by the pods: another test on
    # this machine may take one meanwhile. Such a run starts over, once,
    # on fresh ports and a fresh work directory.
    for attempt in (1, 2):
        run_dir = os.path.join(work_dir, f"run{attempt}")
        os.makedirs(run_dir, exist_ok=True)
        secrets = Secrets(secret_names(docs), run_dir)
        prometheus = None
        if a.prometheus:
            namespace = fm.one(docs, "Deployment", "ferry-worker")["metadata"].get(
                "namespace", "default")
            prometheus = Prometheus(a.source_dir, run_dir, free_port(), namespace)
        cluster = Cluster(docs, bin_dir, run_dir, a.image, a.finish, secrets, prometheus)
        retry = False
        try:
            if prometheus:
                prometheus.start()
            run(cluster, a.time_limit, a.finish)
            ok = True
        except (Failure, PrometheusFailure, LookupError, subprocess.TimeoutExpired,
                subprocess.CalledProcessError, OSError) as e:
            retry = isinstance(e, PortTaken) and attempt == 1
            print(f"{'RETRY' if retry else 'FAIL'}: {e}")
            for pod in cluster.pods:
                print(f"---- {pod.name} ({pod.dir}/cmdline) log tail:")
                print(pod.log_tail(), end="")
            if prometheus:
                print(f"---- prometheus log tail:\n{prometheus.log_tail()}", end="")
        finally:
            cluster.kill_all()
            if prometheus:
                prometheus.stop()
        if not retry:
            break
    if ok and not a.keep:
        shutil.rmtree(work_dir, ignore_errors=True)
    else:
        print(f"work directory kept: {work_dir}")
    log("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
