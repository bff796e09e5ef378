"""The loopback cluster of manifest_loopback_test.py: pods started from the
rendered manifests' workloads, as processes of BIN_DIR or as containers of
an image (podman), with Service names and ports mapped to loopback (see
manifest_loopback_test.py for what is emulated and how).
"""

import ctypes
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import ferry_manifests as fm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
from wait_until import wait_until  # noqa: E402


def short_run(finish_epochs):
    """Overrides for a short run on a 2-core machine, applied like a patch of
    ConfigMap ferry-job (coordinator) and of the worker Deployment's env.
    Everything else comes from the manifests as rendered."""
    return {
        # Without --finish: more epochs than the test can reach, so that
        # the job is still training when the test stops it (a fast machine
        # could otherwise finish the 15 epochs of the ConfigMap while the
        # test scales).
        "coordinator": {"FERRY_EPOCHS": str(finish_epochs or 1000)},
        "ps": {},
        # One BLAS thread per worker: three workers, two shards and a
        # coordinator share two cores here.
        "worker": {"FERRY_THREADS": "1"},
    }


PROBE_TIMEOUT_S = 30

# The Python a ferry.torch worker container runs here (Debian's, which
# python3-torch is installed for).
PYTHON = "/usr/bin/python3"


def python_package_dir(bin_dir):
    """The build's ferry Python package folder (BIN_DIR/../python)."""
    return os.path.join(os.path.dirname(os.path.abspath(bin_dir)), "python")


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
_PORT_CLAIMS = []  # sockets kept open: the claims last as long as this process


def _claim(port):
    """Claims `port` among every process that picks ports this way or with
    PickFreePort (client/child_process.cc): binds the abstract Unix socket
    "@ferry-port-PORT", which one process at a time can hold and the kernel
    releases when the process exits. False when another process holds it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(f"\0ferry-port-{port}")
    except OSError:
        s.close()
        return False
    _PORT_CLAIMS.append(s)
    return True


def free_port():
    """A port free on every address, at random outside the ephemeral range
    (where outgoing connections take source ports and binds to port 0
    land), as ferry local picks, and claimed for this process so that no
    other test picks it too. Never the same port twice in one run: every
    pod's ports are picked before any pod binds one (the manifests name
    them), so port 0 cannot be used here."""
    low, high = _ephemeral_range()
    first, last = (10000, low - 1) if low > 11000 else (high + 1, 65535)
    for _ in range(200):
        port = random.randint(first, last)
        if port in _PORTS_HANDED_OUT or not _claim(port):
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
    def __init__(self, docs, bin_dir, work_dir, image=None, finish_epochs=None,
                 secrets=None, prometheus=None):
        self.docs = docs
        self.image = image
        self.bin_dir = bin_dir
        self.work_dir = work_dir
        self.short_run = short_run(finish_epochs)
        self.secrets = secrets  # Secrets or None
        self.prometheus = prometheus  # Prometheus or None
        self.pods = []
        self.namespace = None
        self.coordinator_wl = fm.one(docs, "Deployment", "ferry-coordinator")
        ps = fm.find(docs, "StatefulSet", "ferry-ps")  # none in ring mode
        self.ps_wl = ps[0] if ps else None
        self.worker_wl = fm.one(docs, "Deployment", "ferry-worker")
        self.namespace = self.worker_wl["metadata"].get("namespace", "default")
        self.services = {s["metadata"]["name"]: s for s in fm.find(docs, "Service")}
        self.mode = (fm.one(docs, "ConfigMap", "ferry-job").get("data") or {}).get(
            "FERRY_MODE", "ps")
        # components/colocated-shards: each shard pod is also a worker.
        self.colocated = self.ps_wl is not None and fm.is_colocated_shard(self.ps_wl)
        if self.colocated:
            self.short_run["ps"] = dict(self.short_run["worker"])

    # --- name resolution, as cluster DNS + Services would do it ---------
    def pods_of(self, workload):
        return [p for p in self.pods if p.workload is workload]

    def trainer_pods(self):
        """The pods that train: the worker Deployment's, and the shard pods
        where they are workers too (colocated)."""
        return self.pods_of(self.worker_wl) + (self.pods_of(self.ps_wl) if self.colocated
                                               else [])

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
        env.update(self.short_run[pod.role])
        self.project_secrets(pod)
        self.project_config_maps(pod)
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
        if fm.is_python(argv) and not self.image:
            # A ferry.torch worker: Debian's python3 (the one python3-torch
            # is for) with the build's ferry package, as the image has them.
            binary = PYTHON
            full_env["PYTHONPATH"] = python_package_dir(self.bin_dir)
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
        pod.exit_code = None
        log(f"started {pod.name} (pid {pod.proc.pid}): {os.path.basename(binary)} "
            f"{' '.join(args)}")
        if self.prometheus:
            self.prometheus.set_targets(self)

    def project_secrets(self, pod):
        """Writes the Secrets the pod's volumes name into those volumes,
        with the volume's defaultMode, owned by the pod's user (as the
        kubelet does with fsGroup)."""
        uid, gid = self.pod_user(pod)
        for volume in pod.spec.get("volumes", []):
            if "secret" not in volume:
                continue
            name = volume["secret"]["secretName"]
            if self.secrets is None or name not in self.secrets.data:
                raise Failure(f"{pod.name}: volume {volume['name']} needs Secret {name}, "
                              "which this test cannot make")
            local = pod.volume(volume["name"])
            for key, data in self.secrets.data[name].items():
                path = os.path.join(local, key)
                if os.path.exists(path):
                    os.chmod(path, 0o600)
                with open(path, "wb") as f:
                    f.write(data)
                if self.image:
                    os.chown(path, uid, gid)
                os.chmod(path, volume["secret"].get("defaultMode", 0o644))

    def project_config_maps(self, pod):
        """Writes the ConfigMaps the pod's volumes name into those volumes
        (every key as a file, or the volume's items at their paths), as the
        kubelet projects them."""
        for volume in pod.spec.get("volumes", []):
            if "configMap" not in volume:
                continue
            name = volume["configMap"]["name"]
            found = fm.find(self.docs, "ConfigMap", name)
            if not found:
                raise Failure(f"{pod.name}: volume {volume['name']} needs ConfigMap {name}, "
                              "which the manifests lack")
            data = found[0].get("data") or {}
            items = volume["configMap"].get("items") or [{"key": k, "path": k} for k in data]
            local = pod.volume(volume["name"])
            for item in items:
                path = os.path.join(local, item["path"])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(data[item["key"]])

    def pod_user(self, pod):
        security = dict(pod.spec.get("securityContext", {}))
        security.update(pod.container.get("securityContext", {}))
        return security.get("runAsUser", 10001), security.get("runAsGroup", 10001)

    def container_command(self, pod, entrypoint, args, env):
        """podman run for `pod`: the image's container as the manifest
        describes it (see the module's docstring)."""
        security = dict(pod.spec.get("securityContext", {}))
        security.update(pod.container.get("securityContext", {}))
        uid, gid = self.pod_user(pod)
        user = f"{uid}:{gid}"
        nofile = resource_limit_nofile()
        cmd = ["podman", "--runtime", "runc", "run", "--rm", "--name", pod.name,
               "--network", "host", "--hostname", pod.name, "--user", user,
               "--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", "nproc=4096:4096",
               "--entrypoint", entrypoint]
        if security.get("readOnlyRootFilesystem"):
            cmd.append("--read-only")
        for mount in pod.container.get("volumeMounts", []):
            local = pod.volume(mount["name"])
            os.chown(local, uid, gid)
            ro = ":ro" if mount.get("readOnly") else ""
            cmd += ["-v", f"{local}:{mount['mountPath']}{ro}"]
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

    def kill(self, pod):
        """SIGKILL, as a lost node or an OOM kill does: no grace. The pod
        keeps its name, ports and volumes for start() to run it again, as a
        StatefulSet or a Deployment's replacement would."""
        if self.image:
            subprocess.run(["podman", "kill", "--signal", "KILL", pod.name],
                           capture_output=True, timeout=60)
        else:
            os.killpg(pod.proc.pid, signal.SIGKILL)
        pod.exit_code = pod.proc.wait(timeout=60)
        if self.image:  # --rm removes it; make sure the name is free again
            subprocess.run(["podman", "rm", "-f", "-t", "0", pod.name],
                           capture_output=True, timeout=60)
        log(f"killed {pod.name} (SIGKILL)")
        if self.prometheus:
            self.prometheus.set_targets(self)

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
        pending = list(pods)

        def all_ready():
            self.check_alive()
            pending[:] = [p for p in pending if self.probe(p, "readinessProbe")[0] != 0]
            return not pending
        wait_until("readiness", all_ready, timeout, interval=0.3, error=Failure,
                   describe=lambda: ", ".join(
                       f"{p.name} ({self.probe(p, 'readinessProbe')[1]})" for p in pending))
        log("ready: " + ", ".join(p.name for p in pods))

    def status(self, flags=None):
        """`ferry status --json`, with the operator's credentials unless
        `flags` says otherwise."""
        coord = self.pods_of(self.coordinator_wl)[0]
        port = coord.port_of("grpc")
        r = subprocess.run([os.path.join(self.bin_dir, "ferry"), "status", "--json",
                            "--coordinator", f"127.0.0.1:{port}"]
                           + (self.client_flags() if flags is None else flags),
                           capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise Failure(f"ferry status failed: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def wait_for(self, what, pred, timeout=30):
        last = {"status": None, "error": None}

        def holds():
            self.check_alive()
            try:
                last["status"] = self.status()
                return last["status"] if pred(last["status"]) else None
            except (Failure, ValueError) as e:  # not answering (yet)
                last["error"] = e
                return None
        return wait_until(what, holds, timeout, interval=0.3, error=Failure,
                          describe=lambda: "status: " + (
                              summary(last["status"]) if last["status"] else str(last["error"])))

    def client_flags(self):
        """What an operator's `ferry status` needs to call the coordinator:
        the components' certificate and token, when the manifests use
        them."""
        coord = self.coordinator_wl["spec"]["template"]["spec"]["containers"][0]
        names = {e["name"]: e.get("value") for e in coord.get("env", [])}
        flags = []
        if "FERRY_TLS_CERT" in names:
            d = self.secrets.dir("ferry-tls")
            flags += ["--tls-cert", f"{d}/tls.crt", "--tls-key", f"{d}/tls.key",
                      "--tls-ca", f"{d}/ca.crt"]
            if names.get("FERRY_TLS_SERVER_NAME"):
                flags += ["--tls-server-name", names["FERRY_TLS_SERVER_NAME"]]
        if "FERRY_AUTH_TOKEN_FILE" in names:
            flags += ["--auth-token-file", f"{self.secrets.dir('ferry-auth')}/token"]
        return flags

    def metrics_port(self, pod):
        return pod.port_of(int(pod.annotations["prometheus.io/port"]))

    def metrics(self, pod):
        port = self.metrics_port(pod)
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
