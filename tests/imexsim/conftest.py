"""Fixtures for the simulator self-tests: simulated daemons as local processes on loopback.

Every node gets its own 127.x.y.z address, config directory, log file and test bed knob
directory, and runs in the foreground (DAEMONIZE=0) as a child of the test, so it can be
stopped by PID. All processes are killed by the fixture, whatever the test outcome.
"""
from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from imexsim import wire

SIM_DIR = Path(__file__).resolve().parent
SAMPLES = SIM_DIR / "samples"
# Reconnect interval given to test daemons (faults.json knob): short, so scenarios converge fast.
TEST_RECONNECT_INTERVAL_S = 0.5
CONVERGE_TIMEOUT_S = 20.0
_subnets = itertools.count(1)


def tool_env(testbed: Path | None = None, **extra: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SIM_DIR), env.get("PYTHONPATH")]))
    env.pop("IMEXSIM_CTL_LAYOUT", None)
    if testbed is not None:
        env["IMEXSIM_TESTBED_DIR"] = str(testbed)
    env.update(extra)
    return env


def run_tool(module: str, args: list[str], *, testbed: Path | None = None, timeout: float = 30,
             prefix: list[str] | None = None, **extra: str):
    """Run one simulator tool (`python -m imexsim.<module>`) to completion."""
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", f"imexsim.{module}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=tool_env(testbed, **extra),
        check=False,
    )


def free_port_pair(address: str) -> tuple[int, int]:
    """Two ports bindable on ADDRESS, below the ephemeral range so that no outgoing connection
    of a starting daemon can occupy them first."""
    for port in range(21000 + os.getpid() % 500 * 20, 32000, 20):
        try:
            for candidate in (port, port + 5):
                with socket.socket() as probe:
                    probe.bind((address, candidate))
        except OSError:
            continue
        return port, port + 5
    raise RuntimeError(f"no free port pair on {address}")


def can_give_own_etc_hosts() -> bool:
    return os.geteuid() == 0 and shutil.which("unshare") is not None


def own_etc_hosts_prefix(hosts: Path) -> list[str]:
    """argv prefix: run the tool in a mount namespace of its own whose /etc/hosts is HOSTS, and
    whose name service reads files only (a tray has no DNS), as on a tray with its own /etc/hosts.
    The file is bind-mounted: rewrite it in place (a rename would not be seen)."""
    nsswitch = hosts.with_name("nsswitch.conf")
    if not nsswitch.exists():
        lines = Path("/etc/nsswitch.conf").read_text().splitlines()
        nsswitch.write_text("".join(("hosts: files" if line.startswith("hosts:") else line) + "\n"
                                    for line in lines))
    script = 'mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/nsswitch.conf && shift 2 && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(hosts), str(nsswitch)]


class SimCluster:
    """N simulated trays sharing one node list; node i listens on its own loopback address."""

    def __init__(self, base: Path, size: int):
        subnet = f"127.{100 + os.getpid() % 100}.{next(_subnets)}"
        self.base = base
        self.addresses = [f"{subnet}.{11 + index}" for index in range(size)]
        self.server_port, self.cmd_port = free_port_pair(self.addresses[0])
        self.processes: dict[int, subprocess.Popen] = {}
        for index in range(size):
            self.configure(index)

    def node_dir(self, index: int) -> Path:
        return self.base / f"node{index}"

    def testbed(self, index: int) -> Path:
        return self.node_dir(index) / "testbed"

    def config_path(self, index: int) -> Path:
        return self.node_dir(index) / "config.cfg"

    def log_path(self, index: int) -> Path:
        return self.node_dir(index) / "nvidia-imex.log"

    def hosts_path(self, index: int) -> Path:
        """Node INDEX's own /etc/hosts: used (daemon and ctl) once it exists."""
        return self.node_dir(index) / "hosts"

    def write_hosts(self, index: int, names: dict[str, str]) -> None:
        """(Re)write node INDEX's /etc/hosts in place: name -> address."""
        self.hosts_path(index).write_text("127.0.0.1\tlocalhost\n" + "".join(
            f"{address}\t{name}\n" for name, address in names.items()))

    def prefix(self, index: int) -> list[str]:
        hosts = self.hosts_path(index)
        return own_etc_hosts_prefix(hosts) if hosts.exists() else []

    def configure(self, index: int, *, version: str | None = None, entries: list[str] | None = None,
                  settings: dict | None = None, faults: dict | None = None) -> None:
        """(Re)write node INDEX's config.cfg, node list and knobs; read by its next start."""
        directory = self.node_dir(index)
        self.testbed(index).mkdir(parents=True, exist_ok=True)
        address = self.addresses[index]
        values = {
            "LOG_FILE_NAME": str(self.log_path(index)),
            "LOG_APPEND_TO_LOG": "1",
            "DAEMONIZE": "0",
            "BIND_INTERFACE_IP": address,
            "SERVER_PORT": str(self.server_port),
            "IMEX_NODE_CONFIG_FILE": str(directory / "nodes_config.cfg"),
            "IMEX_CMD_ENABLED": "1",
            "IMEX_CMD_BIND_INTERFACE_IP": address,
            "IMEX_CMD_PORT": str(self.cmd_port),
            **(settings or {}),
        }
        self.config_path(index).write_text("".join(f"{key}={value}\n" for key, value in values.items()))
        node_list = self.addresses if entries is None else entries
        (directory / "nodes_config.cfg").write_text("".join(f"{entry}\n" for entry in node_list))
        (self.testbed(index) / "imex_version").write_text(f"{version or '580.95.09'}\n")
        knobs = {"reconnect_interval_s": TEST_RECONNECT_INTERVAL_S, **(faults or {})}
        (self.testbed(index) / "faults.json").write_text(json.dumps(knobs))

    def launch(self, index: int) -> subprocess.Popen:
        """Start daemon INDEX without waiting for it."""
        with open(self.node_dir(index) / "daemon.out", "ab") as output:
            self.processes[index] = subprocess.Popen(  # pylint: disable=consider-using-with
                [*self.prefix(index), sys.executable, "-m", "imexsim.daemon", "-c", str(self.config_path(index))],
                stdout=output,
                stderr=subprocess.STDOUT,
                env=tool_env(self.testbed(index)),
            )
        return self.processes[index]

    def start(self, *indexes: int) -> None:
        """Start the daemons and wait until each answers on its command service."""
        for index in indexes:
            self.launch(index)
        for index in indexes:
            self.wait_ready(index)

    def start_all(self) -> None:
        self.start(*range(len(self.addresses)))

    def wait_ready(self, index: int) -> None:
        deadline = time.monotonic() + CONVERGE_TIMEOUT_S
        while True:
            try:
                state = wire.query_status(host=self.addresses[index], port=self.cmd_port)["state"]
            except (OSError, ValueError):
                state = None
            if state == "READY":
                return
            process = self.processes[index]
            if process.poll() is not None or time.monotonic() > deadline:
                output = (self.node_dir(index) / "daemon.out").read_text(errors="replace")
                raise AssertionError(f"daemon {index} not READY (rc={process.returncode}, state={state}): {output}")
            time.sleep(0.05)

    def send(self, index: int, signum: int) -> None:
        self.processes[index].send_signal(signum)

    def stop(self, index: int, signum: int = signal.SIGTERM) -> int:
        process = self.processes.pop(index)
        process.send_signal(signum)
        return process.wait(timeout=10)

    def ctl(self, index: int, *args: str, timeout: float = 30, **extra: str):
        return run_tool("ctl", ["-c", str(self.config_path(index)), *args], testbed=self.testbed(index), timeout=timeout,
                        prefix=self.prefix(index), **extra)

    def domain(self, index: int) -> dict:
        result = self.ctl(index, "-N", "-j")
        assert result.returncode == 0, result.stdout
        return json.loads(result.stdout)

    def wait_for(self, index: int, predicate, what: str) -> dict:
        """Poll node INDEX's `-N -j` view until PREDICATE(view) holds; returns that view."""
        deadline = time.monotonic() + CONVERGE_TIMEOUT_S
        while True:
            view = self.domain(index)
            if predicate(view):
                return view
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; last view:\n{json.dumps(view, indent=1)}")
            time.sleep(0.2)

    def wait_for_cell(self, index: int, peer: int, letter: str) -> None:
        """Wait until daemon INDEX itself reports LETTER toward PEER (asks its command service
        directly, which stays fast while another node is frozen)."""
        deadline = time.monotonic() + CONVERGE_TIMEOUT_S
        while True:
            state = wire.query_status(host=self.addresses[index], port=self.cmd_port)["connections"][str(peer)]
            if state == letter:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"node {index} reports {state} toward node {peer}, expected {letter}")
            time.sleep(0.1)

    def wait_for_log(self, index: int, text: str, count: int = 1) -> str:
        """Wait until node INDEX's log holds TEXT at least COUNT times; returns the log."""
        deadline = time.monotonic() + CONVERGE_TIMEOUT_S
        while True:
            log = self.log_path(index).read_text()
            if log.count(text) >= count:
                return log
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not logged {count} time(s) by node {index}:\n{log}")
            time.sleep(0.1)

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)
        self.processes.clear()


def cells(view: dict) -> dict[tuple[int, int], str]:
    """(from, to) -> JSON connection word of a `-N -j` view."""
    return {
        (int(source), int(target)): connection["status"]
        for source, node in view["nodes"].items()
        for target, connection in node["connections"].items()
    }


def all_connected(view: dict) -> bool:
    return view["status"] == "UP"


@pytest.fixture(scope="module")
def healthy_rack(tmp_path_factory):
    """18 healthy nodes (an NVL72 rack), shared by the read-only tests of a module."""
    cluster = SimCluster(tmp_path_factory.mktemp("rack"), 18)
    try:
        cluster.start_all()
        cluster.wait_for(0, all_connected, "18 nodes UP")
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def make_cluster(tmp_path):
    """Factory for SimClusters; every daemon they started is killed at teardown."""
    clusters = []

    def factory(size: int) -> SimCluster:
        cluster = SimCluster(tmp_path / f"cluster{len(clusters)}", size)
        clusters.append(cluster)
        return cluster

    try:
        yield factory
    finally:
        for cluster in clusters:
            cluster.close()
