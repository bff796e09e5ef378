"""The fault matrix's disk faults: a shard's checkpoint directory full or
read-only while a `ferry local` job runs.

The directory is its own small tmpfs, mounted before the job starts (so the
fault is the kernel's own ENOSPC or EROFS, not a simulation). A watcher
thread follows the job through `ferry status` (the coordinator's address
comes from `ferry local --cluster-file`), applies the fault once the job
has applied `at_step` steps, SIGKILLs shard 0 a few steps later and again
at the epoch's end (the fault still on: it must come back from a checkpoint
written before, and the job must not have gone on into an epoch it cannot
roll back into), and takes the fault away once the job has said again that
it waits for a checkpoint (the event "checkpoint_failed ... the next epoch
waits"); see DiskFaultWatcher.

Needs root with the right to mount (CAP_SYS_ADMIN): `mount_error()` says
why not, and the fault matrix then skips these cells.
"""
import errno
import json
import os
import signal
import subprocess
import tempfile
import threading
import time

FILL_CHUNK = 1 << 20


def mount_error():
    """None when a tmpfs can be mounted here, else why not."""
    if os.geteuid() != 0:
        return "needs root to mount a tmpfs"
    probe = tempfile.mkdtemp(prefix="ferry-mount-probe-")
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs",
                            probe], capture_output=True, text=True)
        if r.returncode != 0:
            return f"cannot mount a tmpfs: {r.stderr.strip()}"
        subprocess.run(["umount", probe], check=False)
        return None
    finally:
        os.rmdir(probe)


class CheckpointDisk:
    """`path` on its own tmpfs of `size_mb`; full or read-only on demand."""

    def __init__(self, path, size_mb=32):
        self.path = path
        self.size_mb = size_mb
        self.filler = os.path.join(path, "filler")

    def __enter__(self):
        os.makedirs(self.path, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o",
                        f"size={self.size_mb}m", "tmpfs", self.path],
                       check=True)
        return self

    def __exit__(self, *exc):
        self.writable()
        subprocess.run(["umount", "-l", self.path], check=False)

    def fill(self):
        """Writes zeros until the file system is full (ENOSPC)."""
        chunk = bytes(FILL_CHUNK)
        with open(self.filler, "wb", buffering=0) as f:
            try:
                while True:
                    f.write(chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise

    def free(self):
        try:
            os.remove(self.filler)
        except FileNotFoundError:
            pass

    def read_only(self):
        subprocess.run(["mount", "-o", "remount,ro", self.path], check=True)

    def writable(self):
        subprocess.run(["mount", "-o", "remount,rw", self.path], check=False)


def cluster_process(cluster_file, name, field):
    """`field` of process `name` ("coordinator", "ps0") in the file
    `ferry local --cluster-file` writes; None while it is not there."""
    try:
        with open(cluster_file) as f:
            cluster = json.load(f)
    except (OSError, ValueError):
        return None
    for p in cluster if isinstance(cluster, list) else []:
        if p.get("name") == name and p.get(field) not in (None, "", -1):
            return p[field]
    return None


def coordinator_address(cluster_file):
    return cluster_process(cluster_file, "coordinator", "address")


def job_status(ferry, address):
    r = subprocess.run([ferry, "status", "--coordinator", address, "--json"],
                       capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


def waits_since(status, unix_seconds):
    """Whether the job said, after `unix_seconds`, that its next epoch waits
    for a checkpoint."""
    return any(e.get("kind") == "checkpoint_failed"
               and "the next epoch waits" in e.get("detail", "")
               and float(e.get("unix_seconds", 0)) > unix_seconds
               for e in status.get("events", []))


class DiskFaultWatcher(threading.Thread):
    """Applies `fault` ("full" or "read-only") to `disk` once the job that
    `ferry local` runs with `cluster_file` has applied `at_step` steps (in
    its first epoch, of `epoch_steps` steps), and SIGKILLs `victim` (ferry
    local restarts it) twice while the fault is on: `kill_after` steps after
    it (a shard restarting from a checkpoint written before the fault), and
    at the epoch's end, once the job waits for the checkpoint of the next
    epoch's start, or `after_end` steps into the next epoch if it does not
    wait. The fault is lifted once the job waits again after that kill, or
    `after_end` steps later still, or `hold_s` after the fault. `log`
    records what happened at which step."""

    def __init__(self, disk, fault, at_step, epoch_steps, ferry, cluster_file,
                 kill_after=25, after_end=10, hold_s=60, victim="ps0"):
        super().__init__(daemon=True)
        self.disk, self.fault, self.at_step = disk, fault, at_step
        self.epoch_steps, self.after_end = epoch_steps, after_end
        self.ferry, self.cluster_file, self.hold_s = ferry, cluster_file, hold_s
        self.kill_after, self.victim = kill_after, victim
        self.stop = threading.Event()
        self.log = []
        self.applied = False
        self.kills = 0
        self.waited = False

    def _note(self, what, step):
        self.log.append({"what": what, "step": step, "t": time.monotonic()})

    def _kill(self, step):
        pid = cluster_process(self.cluster_file, self.victim, "pid")
        if pid is None:
            return False
        os.kill(pid, signal.SIGKILL)
        self.kills += 1
        self._note(f"SIGKILL {self.victim}", step)
        return True

    def run(self):
        address = None
        applied_at = applied_step = None
        end_kill_unix = None
        while not self.stop.wait(0.05):
            address = address or coordinator_address(self.cluster_file)
            if address is None:
                continue
            status = job_status(self.ferry, address)
            if status is None:
                continue
            step = int(status.get("step", 0))
            if applied_at is None:
                if step >= self.at_step:
                    self._apply(step)
                    applied_at, applied_step = time.monotonic(), step
                continue
            end = self.epoch_steps
            waits = waits_since(status, end_kill_unix or 0.0)
            self.waited = self.waited or waits
            if (self.kills == 0 and step < end and
                    step >= applied_step + self.kill_after):
                self._kill(step)
            elif end_kill_unix is None:
                if (waits or step >= end + self.after_end) and self._kill(step):
                    end_kill_unix = time.time()
            elif (waits or step >= end + 2 * self.after_end or
                  time.monotonic() - applied_at > self.hold_s):
                self._lift(step)
                return

    def _apply(self, step):
        if self.fault == "full":
            self.disk.fill()
        else:
            self.disk.read_only()
        self.applied = True
        self._note(f"{self.fault} disk", step)

    def _lift(self, step):
        if self.fault == "full":
            self.disk.free()
        else:
            self.disk.writable()
        self._note("disk writable again", step)

    def finish(self):
        """Stops watching; the disk is writable again either way."""
        self.stop.set()
        self.join(timeout=15)
        self.disk.free()
        self.disk.writable()
