#!/usr/bin/python3
"""Runs the rendered Kubernetes manifests on loopback, so that they cannot
drift from the binaries.

  manifest_loopback_test.py BIN_DIR SOURCE_DIR [--overlay cpu] [--keep]
                            [--image localhost/ferry:cpu]

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

With --image IMAGE every pod is a container of IMAGE instead (podman,
runc, host network so that the loopback ports hold): the manifest's
command as the entrypoint, its args and environment, its volumes mounted
at their mountPaths from the pod's directory, its runAsUser:runAsGroup,
a read-only root file system where the container's securityContext asks
for one. BIN_DIR then only provides `ferry health` and `ferry status`, run
from outside as the kubelet and an operator would. Skips (77) without
podman or without the image (scripts/images builds it).
"""

import argparse
import ctypes
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ferry_manifests as fm  # noqa: E402

SKIP = 77
# Overrides for a short run on a 2-core machine, applied like a patch of
# ConfigMap ferry-job (coordinator) and of the worker Deployment's env.
# Everything else comes from the manifests as rendered.
SHORT_RUN = {
    # More epochs than the test can reach, so that the job is still training
    # when the test stops it (a fast machine could otherwise finish the 15
    # epochs of the ConfigMap while the test scales).
    "coordinator": {"FERRY_EPOCHS": "1000"},
    "ps": {},
    # One BLAS thread per worker: three workers, two shards and a
    # coordinator share two cores here.
    "worker": {"FERRY_THREADS": "1"},
}
PROBE_TIMEOUT_S = 30


class Failure(Exception):
    pass


class PortTaken(Failure):
    """A pod could not bind a port picked for it: another process on this
    machine took it between the pick and the bind (the run is retried)."""


def log(msg):
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


T0 = time.monotonic()


def _die_with_parent():
    """preexec_fn: the child gets SIGKILL when this test process dies (even
    by SIGKILL, e.g. a ctest timeout), so no pod outlives the test."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
            return low, high
    except (OSError, ValueError):
        return 32768, 60999


_PORTS_HANDED_OUT = set()


def free_port():
    """A port free on every address, at random outside the ephemeral range
    (where outgoing connections take source ports), as ferry local picks.
    Never the same port twice in one run: every pod's ports are picked
    before any pod binds one."""
    low, high = _ephemeral_range()
    first, last = (10000, low - 1) if low > 11000 else (high + 1, 65535)
    for _ in range(200):
        port = random.randint(first, last)
        if port in _PORTS_HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
        _PORTS_HANDED_OUT.add(port)
        return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _PORTS_HANDED_OUT.add(port)
    return port


# Per role: metric series that must have moved after training steps.
EXPECTED_NONZERO = {
    "coordinator": ('ferry_steps_total{role="coordinator"}', "ferry_members",
                    'ferry_generation{role="coordinator"}'),
    "ps": ('ferry_push_seconds_count{role="ps"}', 'ferry_pull_seconds_count{role="ps"}',
           'ferry_model_version{role="ps"}',
           'ferry_bytes_total{direction="received",peer_role="worker",role="ps"}'),
    "worker": ('ferry_steps_total{role="worker"}', 'ferry_push_seconds_count{role="worker"}',
               'ferry_pull_seconds_count{role="worker"}',
               'ferry_bytes_total{direction="sent",peer_role="ps",role="worker"}'),
}


class Pod:
    """One emulated pod: a process started from a workload's template."""

    def __init__(self, name, workload, role, index, work_dir):
        self.name = name
        self.workload = workload
        self.role = role
        self.index = index
        self.spec = workload["spec"]["template"]["spec"]
        self.annotations = workload["spec"]["template"]["metadata"].get("annotations", {})
        self.container = self.spec["containers"][0]
        self.ports = {p: free_port() for p in set(fm.container_ports(self.container).values())}
        self.dir = os.path.join(work_dir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.log_path = os.path.join(self.dir, "log")
        self.proc = None
        self.exit_code = None
        self.grace = self.spec.get("terminationGracePeriodSeconds", 30)

    def volume(self, name):
        local = os.path.join(self.dir, "volumes", name)
        os.makedirs(local, exist_ok=True)
        return local

    def log_tail(self, lines=15):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def port_of(self, container_port):
        if isinstance(container_port, str):
            container_port = fm.container_ports(self.container)[container_port]
        return self.ports[container_port]


class Cluster:
    def __init__(self, docs, bin_dir, work_dir, image=None):
        self.docs = docs
        self.image = image
        self.bin_dir = bin_dir
        self.work_dir = work_dir
        self.pods = []
        self.namespace = None
        self.coordinator_wl = fm.one(docs, "Deployment", "ferry-coordinator")
        self.ps_wl = fm.one(docs, "StatefulSet", "ferry-ps")
        self.worker_wl = fm.one(docs, "Deployment", "ferry-worker")
        self.namespace = self.worker_wl["metadata"].get("namespace", "default")
        self.services = {s["metadata"]["name"]: s for s in fm.find(docs, "Service")}
        self.next_worker = 0

    # --- name resolution, as cluster DNS + Services would do it ---------
    def pods_of(self, workload):
        return [p for p in self.pods if p.workload is workload]

    def resolve(self, host, port):
        """127.0.0.1:<port> for a Service name (or pod.headless-service)."""
        labels = host.split(".")
        suffixes = ([], [self.namespace], [self.namespace, "svc"],
                    [self.namespace, "svc", "cluster", "local"])
        for n in (2, 1):  # pod.service[...] first, then service[...]
            if len(labels) < n:
                continue
            head, tail = labels[:n], labels[n:]
            if tail not in suffixes or head[-1] not in self.services:
                continue
            svc = self.services[head[-1]]
            workload, _, cport = fm.service_target(self.docs, svc, port)
            pods = self.pods_of(workload)
            if n == 2:
                pods = [p for p in pods if p.name == head[0]]
                if svc["spec"].get("clusterIP") != "None":
                    raise Failure(f"{host}: pod DNS names need a headless Service")
            if not pods:
                # The pod may not have been started yet (ordering): its
                # ports are allocated when the pods are created.
                raise Failure(f"{host}:{port}: no pod behind Service {svc['metadata']['name']}")
            return f"127.0.0.1:{pods[0].port_of(cport)}"
        return None

    def map_value(self, pod, key, value):
        """Rewrites one env value or argument for loopback."""
        out = []
        for item in value.split(","):
            hp = fm.split_host_port(item)
            if hp and hp[0] == "0.0.0.0":
                if hp[1] not in pod.ports:
                    raise Failure(f"{pod.name}: {key}={value}: port {hp[1]} is not a declared "
                                  "containerPort")
                item = f"127.0.0.1:{pod.ports[hp[1]]}"
            elif hp:
                mapped = self.resolve(hp[0], hp[1])
                if mapped:
                    item = mapped
            out.append(item)
        value = ",".join(out)
        if key.endswith("_PORT") and value.isdigit():
            if int(value) not in pod.ports:
                raise Failure(f"{pod.name}: {key}={value} is not a declared containerPort")
            value = str(pod.ports[int(value)])
        if self.image:
            return value  # a container mounts its volumes at their paths
        mounts = sorted(pod.container.get("volumeMounts", []),
                        key=lambda m: len(m["mountPath"]), reverse=True)
        for mount in mounts:  # the deepest mount that holds the path
            path = mount["mountPath"].rstrip("/")
            if value == path or value.startswith(path + "/"):
                value = pod.volume(mount["name"]) + value[len(path):]
                break
        return value

    # --- pods ---------------------------------------------------------------
    def create(self, workload, role, index=None):
        if role == "ps":
            name = f"{workload['metadata']['name']}-{index}"
        else:
            name = f"{workload['metadata']['name']}-{len(self.pods):x}loop"
        pod = Pod(name, workload, role, index, self.work_dir)
        self.pods.append(pod)
        return pod

    def start(self, pod):
        field_values = {"status.podIP": "127.0.0.1", "metadata.name": pod.name,
                        "metadata.namespace": self.namespace, "spec.nodeName": "loopback",
                        "status.hostIP": "127.0.0.1"}
        env = fm.container_env(self.docs, pod.spec, pod.container, field_values)
        env.update(SHORT_RUN[pod.role])
        argv = fm.command_line(pod.container, env)
        env = {k: self.map_value(pod, k, v) for k, v in env.items()}
        args = []
        for a in argv[1:]:
            if a.startswith("--") and "=" in a:
                flag, _, val = a.partition("=")
                args.append(f"{flag}={self.map_value(pod, flag, val)}")
            else:
                args.append(self.map_value(pod, "arg", a))
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOSTNAME": pod.name,
                    "HOME": pod.dir}
        full_env.update(env)
        binary = os.path.join(self.bin_dir, argv[0])
        command = [binary] + args
        if self.image:
            command = self.container_command(pod, argv[0], args, env)
        with open(os.path.join(pod.dir, "cmdline"), "w") as f:
            f.write(" ".join(command) + "\n")
            for k in sorted(env):
                f.write(f"{k}={env[k]}\n")
        log_file = open(pod.log_path, "ab")
        pod.proc = subprocess.Popen(command, env=full_env, cwd=pod.dir,
                                    stdout=log_file, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=_die_with_parent)
        log_file.close()
        log(f"started {pod.name} (pid {pod.proc.pid}): {os.path.basename(binary)} "
            f"{' '.join(args)}")

    def container_command(self, pod, entrypoint, args, env):
        """podman run for `pod`: the image's container as the manifest
        describes it (see the module's docstring)."""
        security = dict(pod.spec.get("securityContext", {}))
        security.update(pod.container.get("securityContext", {}))
        user = f"{security.get('runAsUser', 10001)}:{security.get('runAsGroup', 10001)}"
        nofile = resource_limit_nofile()
        cmd = ["podman", "--runtime", "runc", "run", "--rm", "--name", pod.name,
               "--network", "host", "--hostname", pod.name, "--user", user,
               "--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", "nproc=4096:4096",
               "--entrypoint", entrypoint]
        if security.get("readOnlyRootFilesystem"):
            cmd.append("--read-only")
        uid, gid = (int(x) for x in user.split(":"))
        for mount in pod.container.get("volumeMounts", []):
            local = pod.volume(mount["name"])
            os.chown(local, uid, gid)
            cmd += ["-v", f"{local}:{mount['mountPath']}"]
        for key in sorted(env):
            cmd += ["--env", f"{key}={env[key]}"]
        return cmd + [self.image] + args

    def terminate(self, pod):
        """SIGTERM, as the kubelet does; SIGKILL after the grace period.
        Returns (exit code, seconds)."""
        t = time.monotonic()
        pod.proc.send_signal(signal.SIGTERM)
        try:
            pod.exit_code = pod.proc.wait(timeout=pod.grace)
        except subprocess.TimeoutExpired:
            pod.proc.kill()
            pod.exit_code = pod.proc.wait()
            raise Failure(f"{pod.name} did not exit within terminationGracePeriodSeconds "
                          f"{pod.grace} after SIGTERM (SIGKILLed)")
        return pod.exit_code, time.monotonic() - t

    def kill_all(self):
        for pod in self.pods:
            if pod.proc and pod.proc.poll() is None:
                if self.image:  # the container outlives a killed `podman run`
                    subprocess.run(["podman", "rm", "-f", "-t", "0", pod.name],
                                   capture_output=True)
                try:
                    os.killpg(pod.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                pod.proc.wait()

    def check_alive(self):
        for pod in self.pods:
            if pod.proc and pod.exit_code is None and pod.proc.poll() is not None:
                message = f"{pod.name} exited with code {pod.proc.returncode}"
                if "Address already in use" in pod.log_tail():
                    raise PortTaken(message + " (a port picked for it was taken meanwhile)")
                raise Failure(message)

    # --- probes, status, metrics ---------------------------------------------
    def probe(self, pod, which):
        grpc = pod.container[which]["grpc"]
        argv = [os.path.join(self.bin_dir, "ferry"), "health", "--address",
                f"127.0.0.1:{pod.port_of(grpc['port'])}", "--timeout",
                str(pod.container[which].get("timeoutSeconds", 1))]
        if grpc.get("service"):
            argv += ["--service", grpc["service"]]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return 2, "ferry health did not return"
        return r.returncode, (r.stdout + r.stderr).strip()

    def wait_ready(self, pods, timeout=PROBE_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        pending = list(pods)
        while pending:
            self.check_alive()
            pending = [p for p in pending if self.probe(p, "readinessProbe")[0] != 0]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise Failure("not ready after %ds: %s" % (timeout, ", ".join(
                    f"{p.name} ({self.probe(p, 'readinessProbe')[1]})" for p in pending)))
            time.sleep(0.3)
        log("ready: " + ", ".join(p.name for p in pods))

    def status(self):
        coord = self.pods_of(self.coordinator_wl)[0]
        port = coord.port_of("grpc")
        r = subprocess.run([os.path.join(self.bin_dir, "ferry"), "status", "--json",
                            "--coordinator", f"127.0.0.1:{port}"],
                           capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise Failure(f"ferry status failed: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def wait_for(self, what, pred, timeout=30):
        deadline = time.monotonic() + timeout
        st, err = None, None
        while True:
            self.check_alive()
            try:
                st = self.status()
                if pred(st):
                    return st
            except (Failure, ValueError) as e:  # not answering (yet)
                err = e
            if time.monotonic() > deadline:
                raise Failure(f"timed out waiting for {what}; status: "
                              f"{summary(st) if st else err}")
            time.sleep(0.3)

    def metrics(self, pod):
        port = pod.port_of(int(pod.annotations["prometheus.io/port"]))
        path = pod.annotations.get("prometheus.io/path", "/metrics")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.read().decode()


def resource_limit_nofile():
    """The host's hard limit of open files: what a container may ask for
    (podman's default is above it here)."""
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)


def step_of(st):
    return int(st.get("step", 0))


def members_of(st):
    return len(st.get("members", []))


def summary(st):
    return f"step {step_of(st)}, {members_of(st)} members, generation {st.get('generation')}"


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
    problems = fm.consistency_problems(docs, bin_dir)
    if problems:
        print("FAIL: the manifests do not match the binaries:")
        for p in problems:
            print("  " + p)
        sys.exit(1)


def run(cluster, t_limit):
    replicas_ps = cluster.ps_wl["spec"].get("replicas", 1)
    replicas_w = cluster.worker_wl["spec"].get("replicas", 1)
    # Create every pod first (ports), then start them as the controllers
    # would: all at once, in no particular order of readiness.
    coord = cluster.create(cluster.coordinator_wl, "coordinator")
    shards = [cluster.create(cluster.ps_wl, "ps", i) for i in range(replicas_ps)]
    workers = [cluster.create(cluster.worker_wl, "worker") for _ in range(replicas_w)]
    for pod in [coord] + shards + workers:
        cluster.start(pod)
    cluster.wait_ready([coord] + shards + workers)
    # Liveness too.
    for pod in cluster.pods:
        rc, out = cluster.probe(pod, "livenessProbe")
        if rc != 0:
            raise Failure(f"{pod.name}: livenessProbe failed: {out}")

    st = cluster.wait_for("the first steps", lambda s: step_of(s) >= 5)
    log(f"training: {summary(st)}")

    # Scale up: kubectl scale deploy/ferry-worker --replicas N+1.
    extra = cluster.create(cluster.worker_wl, "worker")
    cluster.start(extra)
    cluster.wait_ready([extra])
    st = cluster.wait_for(f"{replicas_w + 1} members", lambda s: members_of(s) == replicas_w + 1)
    before = step_of(st)
    st = cluster.wait_for(f"steps with {replicas_w + 1} members",
                          lambda s: members_of(s) == replicas_w + 1 and step_of(s) >= before + 5)
    log(f"scaled up: {summary(st)}")

    # Scale down: kubectl scale --replicas N sends SIGTERM to one pod.
    rc, secs = cluster.terminate(extra)
    if rc != 0:
        raise Failure(f"{extra.name} exited with code {rc} after SIGTERM (expected 0)")
    log(f"scaled down: {extra.name} left, exit 0 in {secs:.1f}s (grace {extra.grace}s)")
    st = cluster.wait_for(f"{replicas_w} members", lambda s: members_of(s) == replicas_w)
    before = step_of(st)
    st = cluster.wait_for(f"steps with {replicas_w} members",
                          lambda s: members_of(s) == replicas_w and step_of(s) >= before + 5)
    log(f"after scale-down: {summary(st)}")

    # Every running pod: both probes and its metrics endpoint.
    for pod in [coord] + shards + workers:
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
        for key in EXPECTED_NONZERO.get(pod.role, ()):
            if values.get(key, 0) <= 0:
                raise Failure(f"{pod.name}: {key} is {values.get(key)}, expected > 0")
        log(f"{pod.name}: probes SERVING, /metrics: {len(names)} ferry_* series names")

    # Tear down (kubectl delete): every pod gets SIGTERM.
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
    if time.monotonic() - T0 > t_limit:
        raise Failure(f"took {time.monotonic() - T0:.0f}s, more than {t_limit}s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("source_dir")
    ap.add_argument("--overlay", default="cpu")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--time-limit", type=float, default=120,
                    help="fail when the whole run takes longer (seconds)")
    ap.add_argument("--image", help="run every pod as a container of this image (podman)")
    a = ap.parse_args()
    if a.image:
        if shutil.which("podman") is None:
            print("SKIP: no podman (scripts/images installs it)")
            return SKIP
        if subprocess.run(["podman", "image", "exists", a.image]).returncode != 0:
            print(f"SKIP: no image {a.image} here (scripts/images builds it)")
            return SKIP
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("SKIP: no kubectl on PATH (scripts/setup installs one)")
        return SKIP
    overlay = os.path.join(a.source_dir, "deploy", "k8s", "overlays", a.overlay)
    try:
        docs = fm.render(overlay, kubectl)
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
        cluster = Cluster(docs, bin_dir, run_dir, a.image)
        retry = False
        try:
            run(cluster, a.time_limit)
            ok = True
        except (Failure, LookupError, subprocess.TimeoutExpired, OSError) as e:
            retry = isinstance(e, PortTaken) and attempt == 1
            print(f"{'RETRY' if retry else 'FAIL'}: {e}")
            for pod in cluster.pods:
                print(f"---- {pod.name} ({pod.dir}/cmdline) log tail:")
                print(pod.log_tail(), end="")
        finally:
            cluster.kill_all()
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
