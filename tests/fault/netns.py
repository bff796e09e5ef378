"""A private network of Linux network namespaces for fault tests.

  with netns.Topology(["coord", "ps0", "w0"]) as net:
      subprocess.Popen(net.exec_prefix("ps0") + ["ferry-server", ...])
      net.partition("w0", "ps0")   # silent drop both ways
      net.heal("w0", "ps0")

Layout: one router namespace (`<prefix>-r`, IPv4 forwarding on) and one
namespace per node (`<prefix>-<node>`), joined by a veth pair each. Node k
(0-based, in the order given) owns 10.213.<k+1>.2/24 on its `eth0`, the
router 10.213.<k+1>.1 on its side, which is the node's default route. Every
namespace has its own loopback up. Nothing is connected to the host's
namespaces, so no packet can leave the machine.

partition(a, b) adds policy rules in the router, `from A to B blackhole` and
`from B to A blackhole`: the router drops the pair's packets silently (no
ICMP, no RST), as a cut cable or a lost route between two racks would, while
both nodes still reach everybody else. heal() deletes the rules.

Names are unique per run: `ferry-np-<pid>-<node>` (interface names are
the same in every run, `eth0` in a node and `v<k>` in the router, as they
only have to be unique inside one namespace). close() (or leaving the
`with`) deletes every namespace it made, also after a failure; deleting a
namespace deletes its veth ends and the routes and rules in it. Namespaces
of runs whose process is gone (killed by SIGKILL, which leaves no chance to
clean up) are deleted when the next Topology is made.

Requires root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2's `ip`;
`check_available()` says why not, for a test to skip.
"""

import os
import re
import shutil
import subprocess

SUBNET = "10.213"
PREFIX = "ferry-np-"


class Unavailable(Exception):
    """The machine cannot make network namespaces (the test should skip)."""


def _ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: exit {r.returncode}: "
                           f"{r.stderr.strip()}")
    return r


def check_available():
    """Raises Unavailable (with the reason) unless namespaces, veth pairs and
    policy rules can be made here."""
    if shutil.which("ip") is None:
        raise Unavailable("no `ip` command (Debian package iproute2)")
    if os.geteuid() != 0:
        raise Unavailable("not root: network namespaces need CAP_NET_ADMIN "
                          "and CAP_SYS_ADMIN")
    probe = f"{PREFIX}probe{os.getpid()}"
    try:
        r = _ip("netns", "add", probe, check=False)
        if r.returncode != 0:
            raise Unavailable(f"`ip netns add` failed: {r.stderr.strip()}")
        for args in (["link", "add", "pa", "type", "veth", "peer", "name", "pb"],
                     ["rule", "add", "from", "10.0.0.1", "to", "10.0.0.2",
                      "blackhole"]):
            r = _ip("-n", probe, *args, check=False)
            if r.returncode != 0:
                raise Unavailable(f"`ip {' '.join(args)}` in a namespace "
                                  f"failed: {r.stderr.strip()}")
    finally:
        _ip("netns", "del", probe, check=False)


class Topology:
    def __init__(self, nodes, prefix=None):
        if len(nodes) > 250:
            raise ValueError("at most 250 nodes")
        self.prefix = prefix or f"{PREFIX}{os.getpid()}"
        self.nodes = list(nodes)
        self.router = f"{self.prefix}-r"
        self._made = []
        self._rules = set()
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # Names and addresses.
    def ns(self, node):
        return f"{self.prefix}-{node}"

    def ip(self, node):
        return f"{SUBNET}.{self.nodes.index(node) + 1}.2"

    def exec_prefix(self, node):
        """argv prefix that runs a command inside the node's namespace."""
        return ["ip", "netns", "exec", self.ns(node)]

    def _build(self):
        self._cleanup_leftovers()
        self._add_ns(self.router)
        # /proc/sys/net is the writer's namespace's (no procps needed).
        subprocess.run(["ip", "netns", "exec", self.router, "sh", "-c",
                        "echo 1 > /proc/sys/net/ipv4/ip_forward"], check=True,
                       capture_output=True)
        for k, node in enumerate(self.nodes, start=1):
            ns = self.ns(node)
            self._add_ns(ns)
            # Made in the router, then one end moved: names only have to be
            # unique inside each namespace.
            rside = f"v{k}"
            _ip("-n", self.router, "link", "add", rside, "type", "veth",
                "peer", "name", "eth0", "netns", ns)
            _ip("-n", self.router, "addr", "add", f"{SUBNET}.{k}.1/24", "dev", rside)
            _ip("-n", self.router, "link", "set", rside, "up")
            _ip("-n", ns, "addr", "add", f"{SUBNET}.{k}.2/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "route", "add", "default", "via", f"{SUBNET}.{k}.1")

    def _add_ns(self, ns):
        _ip("netns", "add", ns)
        self._made.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")

    def _cleanup_leftovers(self):
        r = _ip("netns", "list", check=False)
        for line in r.stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if name.startswith(self.prefix + "-"):
                _ip("netns", "del", name, check=False)
                continue
            m = re.match(re.escape(PREFIX) + r"(\d+)-", name)
            if m and not os.path.exists(f"/proc/{m.group(1)}"):
                _ip("netns", "del", name, check=False)  # its run is gone

    # Faults.
    def partition(self, a, b):
        """Drops every packet between nodes a and b, both ways, silently."""
        for src, dst in ((a, b), (b, a)):
            _ip("-n", self.router, "rule", "add", "from", self.ip(src), "to",
                self.ip(dst), "blackhole")
            self._rules.add((src, dst))

    def heal(self, a, b):
        for src, dst in ((a, b), (b, a)):
            if (src, dst) in self._rules:
                _ip("-n", self.router, "rule", "del", "from", self.ip(src),
                    "to", self.ip(dst), "blackhole")
                self._rules.discard((src, dst))

    def rules(self):
        return _ip("-n", self.router, "rule", "show").stdout

    def close(self):
        for ns in reversed(self._made):
            _ip("netns", "del", ns, check=False)
        self._made = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
