"""A real Prometheus (Debian's `prometheus`) beside the loopback cluster.

It scrapes every running pod's metrics port through file_sd, with the
`namespace` and `pod` labels deploy/monitoring/prometheus-scrape.yaml gives
on Kubernetes, and evaluates deploy/monitoring/ferry-rules.yaml with its
groups' interval shortened to 1 s (the expressions as shipped).
check_finished() compares the recording rules with a finished job's
status, runs every query of the Grafana dashboard and refuses firing
alerts.
"""

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.parse
import urllib.request

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
from wait_until import wait_until  # noqa: E402


class PrometheusFailure(Exception):
    pass


class Prometheus:
    def __init__(self, source_dir, work_dir, port, namespace):
        self.binary = shutil.which("prometheus")
        self.dir = os.path.join(work_dir, "prometheus")
        os.makedirs(self.dir, exist_ok=True)
        self.port = port
        self.namespace = namespace
        self.source_dir = source_dir
        self.targets_path = os.path.join(self.dir, "targets.json")
        self.proc = None

    def start(self):
        with open(os.path.join(self.source_dir, "deploy/monitoring/ferry-rules.yaml")) as f:
            rules = yaml.safe_load(f)
        for group in rules["groups"]:
            group["interval"] = "1s"
        rules_path = os.path.join(self.dir, "ferry-rules.yaml")
        with open(rules_path, "w") as f:
            yaml.safe_dump(rules, f)
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "1s"},
            "rule_files": [rules_path],
            "scrape_configs": [{"job_name": "ferry",
                                "file_sd_configs": [{"files": [self.targets_path],
                                                     "refresh_interval": "1s"}]}],
        }
        config_path = os.path.join(self.dir, "prometheus.yml")
        with open(config_path, "w") as f:
            yaml.safe_dump(config, f)
        self._write_targets([])
        log = open(os.path.join(self.dir, "log"), "ab")
        self.proc = subprocess.Popen(
            [self.binary, f"--config.file={config_path}",
             f"--storage.tsdb.path={os.path.join(self.dir, 'data')}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        def ready_or_exited():
            if self.proc.poll() is not None:
                raise PrometheusFailure("prometheus exited: " + self.log_tail())
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready",
                                            timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_until("prometheus to become ready", ready_or_exited, 60, interval=0.3,
                   error=PrometheusFailure, describe=self.log_tail)

    def log_tail(self, lines=10):
        try:
            with open(os.path.join(self.dir, "log"), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def _write_targets(self, groups):
        tmp = self.targets_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(groups, f)
        os.replace(tmp, self.targets_path)  # file_sd reads whole files only

    def set_targets(self, cluster):
        """Every running pod's metrics port, labelled as on Kubernetes."""
        groups = []
        for pod in cluster.pods:
            if pod.proc is None or pod.exit_code is not None:
                continue
            if pod.annotations.get("prometheus.io/scrape") != "true":
                continue
            groups.append({"targets": [f"127.0.0.1:{cluster.metrics_port(pod)}"],
                           "labels": {"namespace": self.namespace, "pod": pod.name,
                                      "__metrics_path__": pod.annotations.get(
                                          "prometheus.io/path", "/metrics")}})
        self._write_targets(groups)

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise PrometheusFailure(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr):
        """Instant vector: [(labels, value)]."""
        data = self.api("query", query=expr)
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]

    def scalar(self, expr):
        result = self.query(expr)
        if len(result) != 1:
            raise PrometheusFailure(f"{expr}: expected one series, got {result}")
        return result[0][1]

    def wait_for(self, what, pred, timeout=60):
        def holds():
            try:
                return pred()
            except (PrometheusFailure, OSError):
                return False
        wait_until(f"prometheus: {what}", holds, timeout, interval=0.5,
                   error=PrometheusFailure)

    def check_finished(self, cluster, status, log):
        """The recording rules against the finished job's `status`."""
        ns = self.namespace
        self.wait_for("ferry:job_finished == 1",
                      lambda: self.scalar(f'ferry:job_finished{{namespace="{ns}"}}') == 1)
        members = status.get("members", [])  # none once the job finished
        expected = {
            "ferry:job_steps": float(status.get("step", 0)),
            "ferry:job_samples_applied": float(status.get("samples_applied", 0)),
            "ferry:train_samples_per_second": float(status.get("samples_per_second", 0)),
            "ferry:members": float(len(members)),
        }

        def mismatches():
            out = {}
            for rule, want in expected.items():
                got = self.scalar(f'{rule}{{namespace="{ns}"}}')
                if not math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9):
                    out[rule] = (got, want)
            return out
        # The gauges stop moving once the job finished; the rules catch up
        # within a scrape and an evaluation round.
        try:
            self.wait_for("the recording rules to equal the finished job's status",
                          lambda: not mismatches(), timeout=30)
        except PrometheusFailure:
            raise PrometheusFailure("recording rules differ from the job's status "
                                    "(rule: (prometheus, status)): " + str(mismatches()))
        for rule, want in expected.items():
            log(f"prometheus: {rule} = {want:g}, as the status says")
        # Each worker's bytes: its process's counters = what it reported
        # (all peers but the coordinator, as the rule sums them). Live
        # worker pods only; a pod's worker id is in its log.
        worker_bytes = status.get("worker_bytes", {})
        wanted = {}
        for pod in cluster.trainer_pods():
            if pod.exit_code is not None:
                continue
            with open(pod.log_path, errors="replace") as f:
                ids = re.findall(r"registered with \S+ as (\S+?):", f.read())
            if not ids or ids[-1] not in worker_bytes:
                raise PrometheusFailure(f"{pod.name}: no worker id in its log ({ids}) or "
                                        f"no bytes in the status ({sorted(worker_bytes)})")
            sent = worker_bytes[ids[-1]].get("sent", {})
            wanted[pod.name] = float(sum(int(n) for peer, n in sent.items()
                                         if peer != "coordinator"))
        if not wanted:
            raise PrometheusFailure("no live worker to compare bytes with")

        def bytes_mismatches():
            by_pod = {m["metric"].get("pod"): float(m["value"][1]) for m in self.api(
                "query", query=f'ferry:worker_bytes_sent:by_pod{{namespace="{ns}"}}')["result"]}
            return {pod: (by_pod.get(pod), want) for pod, want in wanted.items()
                    if by_pod.get(pod) is None
                    or not math.isclose(by_pod[pod], want, rel_tol=1e-9)}
        try:
            self.wait_for("each worker's bytes to equal its status",
                          lambda: not bytes_mismatches(), timeout=30)
        except PrometheusFailure:
            raise PrometheusFailure("ferry:worker_bytes_sent:by_pod differs from the "
                                    "status (pod: (prometheus, status)): "
                                    + str(bytes_mismatches()))
        log(f"prometheus: bytes sent of {len(wanted)} workers equal their status")
        # Every dashboard query answers.
        with open(os.path.join(self.source_dir,
                               "deploy/monitoring/grafana-dashboard.json")) as f:
            dashboard = json.load(f)
        checked = 0
        for panel in dashboard["panels"]:
            # Panels of the other mode's series stay empty.
            other = "(PS jobs)" if cluster.mode == "ring" else "(ring jobs)"
            if other in panel.get("description", ""):
                continue
            checked += 1
            for target in panel["targets"]:
                expr = target["expr"].replace("$namespace", ns)
                if not self.query(expr):
                    raise PrometheusFailure(f"dashboard panel {panel['title']!r}: {expr} "
                                            "returns no data")
        log(f"prometheus: the {checked} dashboard panels of a {cluster.mode} job return data")
        firing = [a for a in self.api("alerts")["alerts"] if a.get("state") == "firing"]
        if firing:
            raise PrometheusFailure(f"alerts firing: {firing}")
