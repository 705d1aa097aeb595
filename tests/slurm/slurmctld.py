# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real slurmctld for tests: chrooted into a Slurm root file system, in namespaces of its own.

The root file system (Debian trixie with Slurm 24.11 and its plugins, or Debian forky with Slurm
26.05 for topology.yaml, which needs 25.05: ``slurm_rootfs(TOPOLOGY_YAML_SUITE)``) is only read: an overlay
mount, private to the daemon's mount namespace, takes every write, and a temporary directory holds
slurm.conf, the topology file, slurm.key, the state and the log. The daemon runs in a network
namespace this harness creates (a unique name, one address of 198.18.0.0/15 on a veth link:
getaddrinfo needs a non-loopback address) and a UTS namespace whose host name is SlurmctldHost.
``scontrol`` runs inside the same namespaces and root through nsenter. ``stop()`` kills only the
slurmctld this harness started (by its pid), deletes its network namespace, and removes the
temporary directory; the mounts vanish with the mount namespace.

Usage::

    with Slurmctld(rootfs, nodes=["t1", "t2"], topology="BlockName=b1 Nodes=t[1-2]\\n") as ctld:
        ctld.scontrol("show", "topology")
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time

# The Debian suite of simrack's Slurm root file system whose Slurm (26.05) reads topology.yaml.
TOPOLOGY_YAML_SUITE = "forky"
SIMRACK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "rack", "simrack")
CONTROLLER_ADDRESS = "198.18.254.1"
CONTROLLER_HOST = "slurmctl"
# Node addresses: never contacted (no slurmd runs), only resolvable without DNS.
NODE_NETWORK = "198.19"


class SlurmctldError(RuntimeError):
    """The daemon did not start, or stopped; carries its log."""


def slurm_rootfs(suite=None):
    """Path of a root file system with Slurm: simrack's cached one (``suite``: another Debian suite
    than simrack's default), built once on first use. A failed build raises with simrack's output:
    the tests it serves must fail, not be skipped."""
    found = subprocess.run([SIMRACK, "rootfs", "--slurm"] + (["--suite", suite] if suite else []),
                           capture_output=True, text=True, timeout=3600, check=False)
    path = found.stdout.strip().splitlines()[-1] if found.stdout.strip() else ""
    if found.returncode != 0 or not os.path.lexists(os.path.join(path, "usr", "sbin", "slurmctld")):
        raise SlurmctldError("simrack rootfs --slurm%s failed (%d), no slurmctld in %r:\n%s%s"
                             % (" --suite " + suite if suite else "", found.returncode, path,
                                found.stdout[-2000:], found.stderr[-4000:]))
    return path


def slurm_conf(nodes, topology_plugin="topology/block", extra=()):
    """slurm.conf of a controller with ``nodes`` (never started) and the topology plugin."""
    lines = [
        "ClusterName=imextest",
        "SlurmctldHost=%s(%s)" % (CONTROLLER_HOST, CONTROLLER_ADDRESS),
        "AuthType=auth/slurm",
        "CredType=auth/slurm",
        "SlurmUser=root",
        "SlurmdUser=root",
        "StateSaveLocation=/var/lib/slurm/slurmctld",
        "SlurmdSpoolDir=/var/lib/slurm/slurmd",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmctldDebug=debug",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MailProg=/bin/true",
        "ReturnToService=2",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
    ]
    if topology_plugin:
        lines.append("TopologyPlugin=%s" % topology_plugin)
    lines.extend(extra)
    for position, node in enumerate(nodes):
        lines.append("NodeName=%s NodeAddr=%s.%d.%d CPUs=1 State=UNKNOWN"
                     % (node, NODE_NETWORK, position // 250, position % 250 + 1))
    if nodes:
        lines.append("PartitionName=all Nodes=ALL Default=YES State=UP")
    return "\n".join(lines) + "\n"


class Slurmctld:
    """One slurmctld on ``rootfs`` with the given nodes and topology file; see the module's doc."""

    START_TIMEOUT_S = 30

    def __init__(self, rootfs, nodes, topology=None, topology_name="topology.conf", conf=None):
        self.rootfs = rootfs
        self.nodes = list(nodes)
        self.topology = topology
        self.topology_name = topology_name
        self.conf = conf if conf is not None else slurm_conf(self.nodes)
        self.netns = "imex-topo-%d-%s" % (os.getpid(), secrets.token_hex(3))
        self.work = None
        self.process = None
        self.pid = None

    # -- life cycle ---------------------------------------------------------------------------------

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    @property
    def etc(self):
        return os.path.join(self.work, "etc")

    @property
    def log_path(self):
        return os.path.join(self.work, "log", "slurmctld.log")

    def log(self):
        try:
            with open(self.log_path, errors="replace") as handle:
                return handle.read()
        except OSError:
            return ""

    def write_etc(self, name, text):
        path = os.path.join(self.etc, name)
        with open(path, "w") as handle:
            handle.write(text)
        return path

    def start(self):
        self.work = tempfile.mkdtemp(prefix="imex-slurmctld.")
        for name in ("etc", "state", "log", "upper", "overlaywork", "merged"):
            os.makedirs(os.path.join(self.work, name))
        self.write_etc("slurm.conf", self.conf)
        # No cgroups in a test namespace (CgroupPlugin belongs in cgroup.conf, not slurm.conf).
        self.write_etc("cgroup.conf", "CgroupPlugin=disabled\n")
        if self.topology is not None:
            self.write_etc(self.topology_name, self.topology)
        key = os.path.join(self.etc, "slurm.key")
        with open(key, "wb") as handle:
            handle.write(secrets.token_bytes(1024))
        os.chmod(key, 0o600)
        self._netns()
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, "unshare", "--mount", "--uts", "--propagation", "private",
             "sh", "-ec", self._script(), "slurmctld-harness", self.work, self.rootfs],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.process.pid
        self.wait_answering()

    @staticmethod
    def _script():
        # Runs in the new mount and UTS namespaces: the overlay over the read-only root file system,
        # the test's own /etc/slurm, state and log directories, then slurmctld in the foreground
        # (exec: the harness's pid is the daemon's).
        return r"""
work=$1 rootfs=$2 root=$1/merged
hostname %s
mount -t overlay overlay -o "lowerdir=$rootfs,upperdir=$work/upper,workdir=$work/overlaywork" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/run"
mount -t tmpfs tmpfs "$root/tmp"
mkdir -p "$root/etc/slurm" "$root/var/lib/slurm/slurmctld" "$root/var/log/slurm"
mount --bind "$work/etc" "$root/etc/slurm"
mount --bind "$work/state" "$root/var/lib/slurm/slurmctld"
mount --bind "$work/log" "$root/var/log/slurm"
exec chroot "$root" /usr/sbin/slurmctld -D -i -f /etc/slurm/slurm.conf
""" % CONTROLLER_HOST

    def _netns(self):
        run = ["ip", "-n", self.netns]
        subprocess.run(["ip", "netns", "add", self.netns], check=True, timeout=30)
        subprocess.run(run + ["link", "set", "lo", "up"], check=True, timeout=30)
        # A veth pair with both ends inside (this kernel may lack the dummy link type).
        subprocess.run(run + ["link", "add", "imex0", "type", "veth", "peer", "name", "imex1"], check=True, timeout=30)
        subprocess.run(run + ["address", "add", CONTROLLER_ADDRESS + "/16", "dev", "imex0"], check=True, timeout=30)
        subprocess.run(run + ["link", "set", "imex0", "up"], check=True, timeout=30)
        subprocess.run(run + ["link", "set", "imex1", "up"], check=True, timeout=30)

    def running(self):
        return self.process is not None and self.process.poll() is None

    def output(self):
        """What the harness's shell and slurmctld printed (after the daemon stopped)."""
        if self.process is None or self.process.stdout is None or self.running():
            return ""
        return self.process.stdout.read().decode(errors="replace")

    def wait_answering(self, timeout=None):
        """Wait until scontrol gets an answer; SlurmctldError with the log when the daemon stops."""
        deadline = time.monotonic() + (timeout or self.START_TIMEOUT_S)
        while time.monotonic() < deadline:
            if not self.running():
                raise SlurmctldError("slurmctld stopped (rc %s):\n%s\n%s"
                                     % (self.process.returncode, self.output(), self.log()[-4000:]))
            found = self.scontrol("ping", check=False)
            if found.returncode == 0 and "UP" in found.stdout:
                return
            time.sleep(0.3)
        waited = timeout or self.START_TIMEOUT_S
        raise SlurmctldError("slurmctld did not answer within %ss:\n%s" % (waited, self.log()[-4000:]))

    def wait_stopped(self, timeout=None):
        """The daemon's exit code once it stopped by itself (a fatal error), or None while it runs."""
        try:
            return self.process.wait(timeout=timeout or self.START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        if self.process is not None and self.running():
            # Only the daemon this harness started, by its pid; SIGKILL when it does not stop.
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.process.wait(timeout=15)
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()
        subprocess.run(["ip", "netns", "delete", self.netns], capture_output=True, timeout=30, check=False)
        if self.work:
            shutil.rmtree(self.work, ignore_errors=True)
            self.work = None

    # -- inside ---------------------------------------------------------------------------------------

    def inside(self, *argv, check=True, timeout=60, env=None):
        """Run ``argv`` in the daemon's namespaces and root (its /etc/slurm, its network)."""
        command = ["nsenter", "--target", str(self.pid), "--mount", "--uts", "--net", "--root", "--wd=/",
                   "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"]
        command += ["%s=%s" % item for item in sorted((env or {}).items())]
        return subprocess.run(command + list(argv), capture_output=True, text=True, timeout=timeout, check=check)

    def python(self):
        """Path of an interpreter for ansible_python_interpreter that runs the root file system's
        python3 inside the daemon's namespaces and root: with pipelining (the module on stdin), a
        module run on such a host works on the daemon's /etc/slurm and asks its slurmctld."""
        path = os.path.join(self.work, "python-in-slurmctld")
        with open(path, "w") as handle:
            handle.write("#!/bin/sh\nexec nsenter --target %d --mount --uts --net --root --wd=/ "
                         "env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C /usr/bin/python3 \"$@\"\n" % self.pid)
        os.chmod(path, 0o755)
        return path

    def read_etc(self, name):
        with open(os.path.join(self.etc, name)) as handle:
            return handle.read()

    def scontrol(self, *argv, check=True, timeout=60):
        return self.inside("scontrol", *argv, check=check, timeout=timeout)
