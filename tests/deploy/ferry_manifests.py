"""Reads ferry's rendered Kubernetes manifests the way the kubelet would.

Shared by scripts/check-manifests (static consistency checks) and
tests/deploy/manifest_loopback_test.py (which starts the binaries with the
manifests' command, args and environment). Needs PyYAML (Debian python3-yaml).
"""

import os
import re
import subprocess
import tempfile

import yaml

WORKLOAD_KINDS = ("Deployment", "StatefulSet")
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def render(overlay_dir, kubectl="kubectl", components=()):
    """`kubectl kustomize OVERLAY` as a list of objects. `components`:
    directories of kustomize Components added on top, as a user's overlay
    would list them (rendered through a temporary kustomization that names
    the overlay and the components by relative paths: kustomize refuses
    absolute ones)."""
    if not components:
        out = subprocess.run([kubectl, "kustomize", str(overlay_dir)], check=True,
                             capture_output=True, text=True).stdout
        return load_all(out)
    with tempfile.TemporaryDirectory(prefix="ferry-kustomize-") as d:
        rel = lambda path: os.path.relpath(os.path.abspath(path), d)  # noqa: E731
        with open(os.path.join(d, "kustomization.yaml"), "w") as f:
            yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1",
                            "kind": "Kustomization",
                            "resources": [rel(overlay_dir)],
                            "components": [rel(c) for c in components]}, f)
        out = subprocess.run([kubectl, "kustomize", d], check=True,
                             capture_output=True, text=True).stdout
    return load_all(out)


def load_all(text):
    return [d for d in yaml.safe_load_all(text) if d]


def find(docs, kind, name=None):
    """Objects of `kind` (and `name`, if given)."""
    return [d for d in docs if d.get("kind") == kind
            and (name is None or d.get("metadata", {}).get("name") == name)]


def one(docs, kind, name):
    found = find(docs, kind, name)
    if len(found) != 1:
        raise LookupError(f"expected one {kind}/{name}, found {len(found)}")
    return found[0]


def expand(value, env):
    """Kubernetes $(VAR) expansion: known names are replaced, unknown ones
    stay as written, $$ is a literal $."""
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)
    return _VAR_REF.sub(sub, value)


def container_env(docs, pod_spec, container, field_values):
    """The container's environment as the kubelet builds it: envFrom first
    (ConfigMaps, with their prefix), then env in order, each value expanded
    against what came before. `field_values` maps downward-API field paths
    (status.podIP, metadata.name, ...) to this pod's values. Secrets are not
    resolved (raises LookupError)."""
    env = {}
    for source in container.get("envFrom", []):
        prefix = source.get("prefix", "")
        if "configMapRef" in source:
            ref = source["configMapRef"]
            found = find(docs, "ConfigMap", ref["name"])
            if not found:
                if ref.get("optional"):
                    continue
                raise LookupError(f"envFrom: ConfigMap {ref['name']} is not in the manifests")
            for key, val in (found[0].get("data") or {}).items():
                env[prefix + key] = str(val)
        else:
            raise LookupError(f"envFrom source not supported here: {source}")
    for var in container.get("env", []):
        name = var["name"]
        if "value" in var:
            env[name] = expand(str(var["value"]), env)
        elif "valueFrom" in var:
            src = var["valueFrom"]
            if "fieldRef" in src:
                path = src["fieldRef"]["fieldPath"]
                if path not in field_values:
                    raise LookupError(f"env {name}: downward-API field {path} not emulated")
                env[name] = field_values[path]
            elif "configMapKeyRef" in src:
                ref = src["configMapKeyRef"]
                cm = one(docs, "ConfigMap", ref["name"])
                env[name] = str((cm.get("data") or {})[ref["key"]])
            else:
                raise LookupError(f"env {name}: valueFrom {list(src)} not emulated")
        else:
            env[name] = ""
    return env


def command_line(container, env):
    """command + args with $(VAR) expanded (the image's ENTRYPOINT is
    not consulted: every ferry container sets its command)."""
    if not container.get("command"):
        raise LookupError(f"container {container['name']} has no command")
    return [expand(str(a), env) for a in container["command"] + container.get("args", [])]


def container_ports(container):
    """{name or number: containerPort} for the declared ports."""
    ports = {}
    for p in container.get("ports", []):
        ports[p["containerPort"]] = p["containerPort"]
        if "name" in p:
            ports[p["name"]] = p["containerPort"]
    return ports


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def service_target(docs, service, port):
    """(workload, container, containerPort) a Service port leads to."""
    spec = service["spec"]
    sport = [p for p in spec.get("ports", []) if p["port"] == port]
    if not sport:
        raise LookupError(f"Service {service['metadata']['name']} has no port {port}")
    target = sport[0].get("targetPort", port)
    for w in docs:
        if w.get("kind") not in WORKLOAD_KINDS:
            continue
        labels = w["spec"]["template"]["metadata"].get("labels", {})
        if not selects(spec.get("selector"), labels):
            continue
        for c in w["spec"]["template"]["spec"]["containers"]:
            ports = container_ports(c)
            if target in ports:
                return w, c, ports[target]
    raise LookupError(f"Service {service['metadata']['name']} port {port}: no selected "
                      f"container declares port {target!r}")


def split_host_port(text):
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host, int(port)


_help_cache = {}


def env_names_of(binary, subcommand=None):
    """FERRY_* names a binary (or one of its subcommands, such as
    ferry-server's roles) reads, from the `(Env:FERRY_X)` of its --help;
    subcommands of `ferry` are not listed."""
    key = (binary, subcommand)
    if key not in _help_cache:
        argv = [binary] + ([subcommand] if subcommand else []) + ["--help"]
        out = subprocess.run(argv, capture_output=True, text=True).stdout
        _help_cache[key] = set(re.findall(r"Env:(FERRY_[A-Z0-9_]+)", out))
    return _help_cache[key]


# The FERRY_* variables a ferry.torch worker reads (python/ferry/torch/
# _job.py: join and its process operations, the same names as ferry-worker's
# flags) and FERRY_AFTER_FINISH, which the torch-worker component's script
# honours as ferry-worker does.
TORCH_WORKER_ENV = {
    "FERRY_COORDINATOR", "FERRY_PEER_LISTEN", "FERRY_PEER_ADVERTISE", "FERRY_AFTER_FINISH",
    "FERRY_HEALTH_PORT", "FERRY_METRICS_PORT", "FERRY_OPS_PORT_FILE", "FERRY_LOG_LEVEL",
    "FERRY_LOG_FORMAT", "FERRY_TLS_CERT", "FERRY_TLS_KEY", "FERRY_TLS_CA",
    "FERRY_TLS_SERVER_NAME", "FERRY_REQUIRE_CLIENT_CERT", "FERRY_AUTH_TOKEN_FILE",
    # A hosted shard (python/ferry_module.cc HostedShardFromEnvironment) and
    # the ring's shared-memory links.
    "FERRY_HOST_SHARD", "FERRY_HOST_SHARD_FROM_HOSTNAME", "FERRY_SHARD_LISTEN",
    "FERRY_SHARD_PARTITIONS", "FERRY_SHARD_CHECKPOINT_DIR", "FERRY_RING_SHARED_MEMORY",
}


def is_colocated_shard(workload):
    """A shard StatefulSet whose pods train as workers too
    (components/colocated-shards: ferry-worker --host-shard...;
    components/torch-colocated-shards: a ferry.torch script hosting it)."""
    containers = workload["spec"]["template"]["spec"]["containers"]
    return any((c.get("command") or [""])[0] == "ferry-worker"
               or any(e.get("name") == "FERRY_HOST_SHARD_FROM_HOSTNAME" for e in c.get("env") or [])
               for c in containers)


def is_python(argv):
    """A container that runs a Python script (a ferry.torch worker)."""
    return os.path.basename(argv[0]).startswith("python3")


def role_of(argv):
    """ferry-server's role in a container's command line: its subcommand, or
    the older --role / --role= spelling; None for other programs."""
    if len(argv) > 1 and argv[1] in ("coordinator", "ps"):
        return argv[1]
    for i, arg in enumerate(argv):
        if arg.startswith("--role="):
            return arg.split("=", 1)[1]
        if arg == "--role" and i + 1 < len(argv):
            return argv[i + 1]
    return None


# Variables that name a file or directory the process reads.
PATH_VARS = ("FERRY_MODEL", "FERRY_INIT_FROM")


def path_problems(docs, pod_spec, container, env):
    """Each absolute path in PATH_VARS lies on a volume the container mounts;
    on a ConfigMap volume it is one of the files the ConfigMap projects."""
    problems = []
    for var in PATH_VARS:
        path = env.get(var, "")
        if not path.startswith("/"):
            continue  # a preset name or MLP sizes
        mounts = [m for m in container.get("volumeMounts", [])
                  if path == m["mountPath"]
                  or path.startswith(m["mountPath"].rstrip("/") + "/")]
        if not mounts:
            problems.append(f"{var}={path} is on no volume the container mounts")
            continue
        mount = max(mounts, key=lambda m: len(m["mountPath"]))
        volume = next((v for v in pod_spec.get("volumes", [])
                       if v["name"] == mount["name"]), None)
        if volume is None:
            problems.append(f"{var}: volumeMount {mount['name']} names no volume")
            continue
        if "configMap" not in volume:
            continue
        relative = path[len(mount["mountPath"].rstrip("/")) + 1:]
        found = find(docs, "ConfigMap", volume["configMap"]["name"])
        if not found:
            problems.append(f"{var}: ConfigMap {volume['configMap']['name']} is not in "
                            "the manifests")
            continue
        items = volume["configMap"].get("items")
        files = ({i["path"] for i in items} if items
                 else set((found[0].get("data") or {}).keys()))
        if relative not in files:
            problems.append(f"{var}={path}: ConfigMap {volume['configMap']['name']} "
                            f"projects no file {relative!r} (it has {sorted(files)})")
    return problems


def consistency_problems(docs, bin_dir=None):
    """ferry-specific checks the schemas cannot make. Returns a list of
    messages (empty: consistent)."""
    problems = []
    workloads = [d for d in docs if d.get("kind") in WORKLOAD_KINDS]
    services = {d["metadata"]["name"]: d for d in find(docs, "Service")}
    for w in workloads:
        wname = f"{w['kind']}/{w['metadata']['name']}"
        pod = w["spec"]["template"]
        spec = pod["spec"]
        for c in spec["containers"]:
            where = f"{wname} container {c['name']}"
            try:
                env = container_env(docs, spec, c, {"status.podIP": "10.0.0.1",
                                                    "metadata.name": "pod-0",
                                                    "metadata.namespace": "ns"})
                argv = command_line(c, env)
            except (LookupError, KeyError) as e:
                problems.append(f"{where}: {e}")
                continue
            problems += [f"{where}: {p}" for p in path_problems(docs, spec, c, env)]
            ports = container_ports(c)
            # Every listening port the process is told to use is declared.
            for key in ("FERRY_LISTEN", "FERRY_PEER_LISTEN", "FERRY_SHARD_LISTEN"):
                if key in env:
                    hp = split_host_port(env[key])
                    if not hp or hp[1] not in ports:
                        problems.append(f"{where}: {key}={env[key]} is not a declared containerPort")
            for key in ("FERRY_HEALTH_PORT", "FERRY_METRICS_PORT"):
                if key in env and int(env[key]) not in ports:
                    problems.append(f"{where}: {key}={env[key]} is not a declared containerPort")
            # Probes are gRPC health checks on the health port.
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                p = c.get(probe)
                if p is None:
                    problems.append(f"{where}: no {probe}")
                    continue
                grpc = p.get("grpc")
                if not grpc:
                    problems.append(f"{where}: {probe} is not a grpc probe")
                    continue
                if str(grpc["port"]) != env.get("FERRY_HEALTH_PORT"):
                    problems.append(f"{where}: {probe} port {grpc['port']} != FERRY_HEALTH_PORT "
                                    f"{env.get('FERRY_HEALTH_PORT')}")
                want = "" if probe == "readinessProbe" else "liveness"
                if grpc.get("service", "") != want:
                    problems.append(f"{where}: {probe} service {grpc.get('service', '')!r}, "
                                    f"expected {want!r}")
            ann = pod.get("metadata", {}).get("annotations", {})
            if ann.get("prometheus.io/port") != env.get("FERRY_METRICS_PORT"):
                problems.append(f"{where}: prometheus.io/port {ann.get('prometheus.io/port')} != "
                                f"FERRY_METRICS_PORT {env.get('FERRY_METRICS_PORT')}")
            # Every HOST:PORT that names a Service leads to a declared port.
            for key, val in env.items():
                for item in val.split(","):
                    hp = split_host_port(item)
                    if not hp:
                        continue
                    first = hp[0].split(".")
                    svc_name = first[1] if len(first) > 1 and first[1] in services \
                        else first[0]
                    if svc_name not in services:
                        continue
                    try:
                        service_target(docs, services[svc_name], hp[1])
                    except LookupError as e:
                        problems.append(f"{where}: {key}: {e}")
            # Every FERRY_* variable is a flag of the binary it is given to.
            if is_python(argv):
                for key in env:
                    if key.startswith("FERRY_") and key not in TORCH_WORKER_ENV:
                        problems.append(f"{where}: {key} is not a variable a ferry.torch "
                                        "worker reads")
            elif bin_dir is not None:
                role = role_of(argv)
                program = " ".join([argv[0]] + ([role] if role else []))
                names = env_names_of(f"{bin_dir}/{argv[0]}", role)
                for key in env:
                    if key.startswith("FERRY_") and key not in names:
                        problems.append(f"{where}: {key} is not a flag of {program} "
                                        f"(no Env:{key} in its --help)")
                for arg in argv[1:]:
                    if arg.startswith("--") and not arg.startswith("--role"):
                        flag = "FERRY_" + arg[2:].split("=")[0].replace("-", "_").upper()
                        if flag not in names:
                            problems.append(f"{where}: argument {arg} is not a flag of {program}")
    # The job's shard list matches the shard StatefulSet.
    for cm in find(docs, "ConfigMap"):
        shards = (cm.get("data") or {}).get("FERRY_SHARDS")
        if shards is None:
            continue
        entries = [s for s in shards.split(",") if s]
        sts = find(docs, "StatefulSet", "ferry-ps")
        mode = (cm.get("data") or {}).get("FERRY_MODE", "ps")
        if mode == "ps" and not sts:
            problems.append("FERRY_SHARDS is set in ps mode but there is no StatefulSet ferry-ps")
            continue
        if not sts:
            continue
        sts = sts[0]
        replicas = sts["spec"].get("replicas", 1)
        # --partitions K: the job lists replicas x K logical shards, pod N's
        # partition i (port = the first entry's + i) at position N + i x replicas.
        partitions = 1
        for c in sts["spec"]["template"]["spec"].get("containers", []):
            for e in c.get("env") or []:
                if e.get("name") == "FERRY_PARTITIONS":
                    partitions = int(e.get("value", "1"))
        if len(entries) != replicas * partitions:
            problems.append(f"FERRY_SHARDS has {len(entries)} entries, StatefulSet ferry-ps has "
                            f"{replicas} replicas x {partitions} partitions")
        svc = sts["spec"]["serviceName"]
        first = split_host_port(entries[0]) if entries else None
        for i, e in enumerate(entries):
            hp = split_host_port(e)
            want = f"ferry-ps-{i % replicas}.{svc}"
            if not hp or not (hp[0] == want or hp[0].startswith(want + ".")):
                problems.append(f"FERRY_SHARDS entry {i} is {e!r}, expected {want}:PORT")
            elif first and int(hp[1]) != int(first[1]) + i // replicas:
                problems.append(f"FERRY_SHARDS entry {i} is {e!r}: partition {i // replicas} of "
                                f"its pod listens on port {int(first[1]) + i // replicas}")
    for sts in find(docs, "StatefulSet"):
        svc = services.get(sts["spec"]["serviceName"])
        if svc is None:
            problems.append(f"StatefulSet {sts['metadata']['name']}: no Service "
                            f"{sts['spec']['serviceName']}")
        elif svc["spec"].get("clusterIP") != "None" or \
                not svc["spec"].get("publishNotReadyAddresses"):
            problems.append(f"Service {svc['metadata']['name']}: must be headless with "
                            "publishNotReadyAddresses")
    return problems
