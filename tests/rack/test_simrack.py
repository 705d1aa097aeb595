"""The simulated rack itself: trays, network, knobs, every fault and its heal, and a clean `down`.

One 1 x 3 rack for the whole module (module fixture; `down` runs even when a test fails).
Tests run in file order and share the rack: each heals what it broke, and the last one tears
the rack down and checks nothing is left. Needs root and podman; skipped otherwise. Tests that
need the IMEX simulator are skipped when tests/imexsim/install-into is absent.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SIMRACK = HERE / "simrack"
SIMULATOR = HERE.parent / "imexsim" / "install-into"
TRAYS = ["rack1-tray01", "rack1-tray02", "rack1-tray03"]
ADDRESSES = ["198.18.1.11", "198.18.1.12", "198.18.1.13"]
NAMESPACES = ["imex-r1t01", "imex-r1t02", "imex-r1t03"]
SYSCTLS = ["fs.inotify.max_user_instances", "fs.inotify.max_user_watches",
           "net.ipv4.neigh.default.gc_thresh1", "net.ipv4.neigh.default.gc_thresh2",
           "net.ipv4.neigh.default.gc_thresh3"]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("podman") is None,
    reason="the simulated rack needs root and podman (tests/rack/simrack installs the rest)")
needs_simulator = pytest.mark.skipif(not os.access(SIMULATOR, os.X_OK),
                                     reason=f"IMEX simulator not present ({SIMULATOR})")


def sysctl(name: str) -> str:
    return Path("/proc/sys", *name.split(".")).read_text().strip()


class Rack:
    def __init__(self, state: str, sysctls_before: dict[str, str]):
        self.state = Path(state)
        self.env = dict(os.environ, SIMRACK_STATE=state)
        self.sysctls_before = sysctls_before      # what `down` must restore
        self.inventory: Path | None = None

    def simrack(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        result = subprocess.run([str(SIMRACK), *args], env=self.env, capture_output=True, text=True,
                                timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"simrack {' '.join(args)} failed ({result.returncode}):\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    def ssh(self, tray: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(["ssh", "-F", str(self.state / "ssh_config"), "-o", "BatchMode=yes",
                               "-o", "ConnectTimeout=3", tray, command],
                              capture_output=True, text=True, timeout=timeout)

    def out(self, tray: str, command: str) -> str:
        result = self.ssh(tray, command)
        assert result.returncode == 0, f"{tray}: {command}: {result.stderr}"
        return result.stdout

    def knob(self, tray: str, name: str) -> str:
        return (self.state / "trays" / tray / name).read_text()

    def write_nodes_config(self, tray: str, addresses: list[str]) -> None:
        lines = "".join(f"{address}\\n" for address in addresses)
        self.out(tray, f"mkdir -p /etc/nvidia-imex && printf '{lines}' > /etc/nvidia-imex/nodes_config.cfg")


def tcp(namespace: str | None, address: str, port: int) -> str:
    """'open', 'refused' (host reachable, nothing listening) or 'timeout' (dropped) from a namespace."""
    probe = ("import socket,sys\n"
             "try:\n"
             f"    socket.create_connection(('{address}', {port}), timeout=1.5); print('open')\n"
             "except ConnectionRefusedError: print('refused')\n"
             "except OSError: print('timeout')\n")
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    return subprocess.run([*prefix, sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=10).stdout.strip()


@pytest.fixture(scope="module")
def rack():
    state = tempfile.mkdtemp(prefix="simrack-t-", dir="/var/tmp")
    rack = Rack(state, {name: sysctl(name) for name in SYSCTLS})
    try:
        result = rack.simrack("up", "--racks", "1", "--trays", "3", timeout=900)
        rack.inventory = Path(result.stdout.strip().splitlines()[-1])
        yield rack
    finally:
        # A failed `down` keeps its record in the state dir: retry, and keep the dir if it still fails.
        for _ in range(3):
            if rack.simrack("down", check=False).returncode == 0:
                shutil.rmtree(state, ignore_errors=True)
                break
            time.sleep(5)
        else:
            raise AssertionError("simrack down failed; the bed is left up with its record in " + state)


# --------------------------------------------------------------------------- the rack as built

def test_inventory_names_every_tray(rack):
    yaml = pytest.importorskip("yaml")
    assert rack.inventory == rack.state / "inventory.yml"
    assert rack.simrack("inventory").stdout.strip() == str(rack.inventory)
    data = yaml.safe_load(rack.inventory.read_text())
    hosts = data["all"]["children"]["imex_domains"]["children"]["rack1"]["hosts"]
    assert list(hosts) == TRAYS
    for name, address in zip(TRAYS, ADDRESSES):
        assert hosts[name] == {
            "ansible_host": address, "imex_address": address, "ansible_user": "root",
            "ansible_ssh_common_args": f"-F {rack.state / 'ssh_config'}",
            "ansible_python_interpreter": "/usr/bin/python3"}


def test_trays_are_systemd_hosts_over_ssh(rack):
    majors = set()
    for tray in TRAYS:
        hostname, state, devices = rack.out(
            tray, "hostname; systemctl is-system-running; grep nvidia-caps-imex-channels /proc/devices"
        ).splitlines()
        assert (hostname, state) == (tray, "running")
        major = devices.split()[0]
        assert f"{major} nvidia-caps-imex-channels\n" in rack.knob(tray, "proc_devices")
        majors.add(major)
    assert len(majors) == len(TRAYS), "each tray must report its own channel major"


def test_trays_talk_only_on_the_fabric(rack):
    for namespace, address in zip(NAMESPACES, ADDRESSES):
        links = subprocess.run(["ip", "-n", namespace, "-6", "-o", "addr"], capture_output=True,
                               text=True, check=True).stdout
        routes = subprocess.run(["ip", "-n", namespace, "route"], capture_output=True, text=True,
                                check=True).stdout
        assert links == "", "IPv6 must be off in the tray namespaces"
        assert routes.split() == ["198.18.0.0/16", "dev", "eth0", "proto", "kernel", "scope", "link",
                                  "src", address]
    assert rack.out(TRAYS[0], "getent hosts rack1-tray03").split() == ["198.18.1.13", "rack1-tray03"]


def test_knobs_have_the_contract_defaults(rack):
    fabric = json.loads(rack.knob(TRAYS[0], "fabric.json"))
    assert fabric["state"] == "Completed" and fabric["status"] == "Success"
    assert (fabric["clique_id"], fabric["health"]) == (32766, "Healthy")
    assert rack.knob(TRAYS[0], "imex_version") == "580.95.09\n"
    assert json.loads(rack.knob(TRAYS[0], "faults.json")) == {}
    assert rack.out(TRAYS[1], "cat /run/testbed/imex_version") == "580.95.09\n"
    assert rack.ssh(TRAYS[1], "touch /run/testbed/x").returncode != 0, "knobs are read-only in the tray"


@needs_simulator
def test_simulator_is_installed(rack):
    listing = rack.out(TRAYS[0], "ls /usr/bin/nvidia-imex /usr/bin/nvidia-imex-ctl /usr/bin/nvidia-smi "
                                 "/usr/sbin/update-initramfs /etc/nvidia-imex/config.cfg; "
                                 "systemctl is-enabled simdriver; systemctl cat nvidia-imex | grep Type=")
    assert "/usr/bin/nvidia-imex-ctl" in listing and "Type=forking" in listing
    assert "enabled" in listing


# --------------------------------------------------------------------------- network faults

def test_link_cut_drops_only_that_pair(rack):
    rack.simrack("fault", "link-cut", TRAYS[0], TRAYS[1])
    assert "link-cut rack1-tray01 rack1-tray02" in rack.simrack("status").stdout
    assert tcp(NAMESPACES[0], ADDRESSES[1], 22) == "timeout"
    assert tcp(NAMESPACES[1], ADDRESSES[0], 22) == "timeout"
    assert tcp(NAMESPACES[0], ADDRESSES[2], 22) == "open"
    assert tcp(NAMESPACES[2], ADDRESSES[1], 22) == "open"
    assert tcp(None, ADDRESSES[0], 22) == "open"
    rack.simrack("fault", "heal", "link-cut", TRAYS[1], TRAYS[0])    # either order names the pair
    assert tcp(NAMESPACES[0], ADDRESSES[1], 22) == "open"


def test_cmd_port_block_drops_the_command_port_from_the_fabric(rack):
    before = tcp(NAMESPACES[1], ADDRESSES[0], 50005)
    assert before in ("open", "refused")       # refused: no daemon listening yet, but reachable
    rack.simrack("fault", "cmd-port-block", TRAYS[0])
    assert tcp(NAMESPACES[1], ADDRESSES[0], 50005) == "timeout"
    assert tcp(NAMESPACES[1], ADDRESSES[0], 22) == "open"
    assert tcp(NAMESPACES[0], "127.0.0.1", 50005) == before     # the tray's own ctl still works
    rack.simrack("fault", "heal", "cmd-port-block", TRAYS[0])
    assert tcp(NAMESPACES[1], ADDRESSES[0], 50005) == before


def test_ssh_block_and_isolate_cut_the_controller_off(rack):
    rack.simrack("fault", "ssh-block", TRAYS[2])
    assert rack.ssh(TRAYS[2], "true").returncode == 255
    assert tcp(NAMESPACES[0], ADDRESSES[2], 22) == "open", "only the controller is blocked"
    rack.simrack("fault", "heal", "ssh-block", TRAYS[2])
    assert rack.ssh(TRAYS[2], "true").returncode == 0

    rack.simrack("fault", "isolate", TRAYS[2])
    assert tcp(None, ADDRESSES[2], 22) == "timeout"
    assert tcp(NAMESPACES[0], ADDRESSES[2], 22) == "timeout"
    rack.simrack("fault", "heal", "isolate", TRAYS[2])
    assert rack.ssh(TRAYS[2], "true").returncode == 0


def test_faults_refuse_nonsense(rack):
    assert "no tray 'rack1-tray09'" in rack.simrack("fault", "isolate", "rack1-tray09", check=False).stderr
    assert "no active ssh-block" in rack.simrack("fault", "heal", "ssh-block", "2", check=False).stderr
    assert "event" in rack.simrack("fault", "heal", "reboot", "2", check=False).stderr


# --------------------------------------------------------------------------- system faults

def test_etc_readonly_and_disk_full_fail_writes_but_keep_files(rack):
    tray = TRAYS[1]
    rack.out(tray, "mkdir -p /etc/nvidia-imex && echo old > /etc/nvidia-imex/probe.cfg")
    rack.simrack("fault", "etc-readonly", tray)
    result = rack.ssh(tray, "cat /etc/nvidia-imex/probe.cfg; echo new > /etc/nvidia-imex/probe.cfg")
    assert result.stdout == "old\n" and "Read-only file system" in result.stderr
    assert "already has a fault mounted" in rack.simrack("fault", "disk-full", tray, check=False).stderr
    rack.simrack("fault", "heal", "etc-readonly", tray)

    rack.simrack("fault", "disk-full", tray)
    result = rack.ssh(tray, "cat /etc/nvidia-imex/probe.cfg; "
                            "python3 -c 'import tempfile; tempfile.mkstemp(dir=\"/etc/nvidia-imex\")'")
    assert result.stdout == "old\n" and "No space left on device" in result.stderr
    rack.simrack("fault", "heal", "disk-full", tray)
    assert rack.out(tray, "echo new > /etc/nvidia-imex/probe.cfg; cat /etc/nvidia-imex/probe.cfg; "
                          "rm /etc/nvidia-imex/probe.cfg") == "new\n"


def test_reboot_keeps_disk_and_channel_major(rack):
    tray = TRAYS[2]
    rack.out(tray, "touch /run/simrack-volatile /root/simrack-persistent")
    major = rack.out(tray, "grep nvidia-caps-imex-channels /proc/devices")
    rack.simrack("fault", "reboot", tray)
    assert rack.out(tray, "systemctl is-system-running") == "running\n"
    assert rack.out(tray, "grep nvidia-caps-imex-channels /proc/devices") == major
    assert rack.out(tray, "ls /run/simrack-volatile /root/simrack-persistent 2>/dev/null; true") == \
        "/root/simrack-persistent\n"


def test_knob_faults_write_and_restore_the_knobs(rack):
    tray = TRAYS[0]
    rack.simrack("fault", "version", tray, "580.105.08")
    rack.simrack("fault", "fabric", tray, "clique_id=0", "state=In Progress", "per_gpu.2.health=Unhealthy")
    rack.simrack("fault", "ctl-hang", tray)
    assert rack.knob(tray, "imex_version") == "580.105.08\n"
    fabric = json.loads(rack.knob(tray, "fabric.json"))
    assert (fabric["clique_id"], fabric["state"], fabric["per_gpu"]) == (0, "In Progress", {"2": {"health": "Unhealthy"}})
    assert json.loads(rack.knob(tray, "faults.json")) == {"ctl_hang": True}
    status = rack.simrack("status").stdout
    assert "version rack1-tray01 580.95.09 -> 580.105.08" in status and "ctl-hang rack1-tray01" in status
    for kind in ("version", "fabric", "ctl-hang"):
        rack.simrack("fault", "heal", kind, tray)
    assert rack.knob(tray, "imex_version") == "580.95.09\n"
    assert json.loads(rack.knob(tray, "fabric.json"))["state"] == "Completed"
    assert json.loads(rack.knob(tray, "faults.json")) == {}
    assert "active faults: none" in rack.simrack("status").stdout


@needs_simulator
def test_slurm_fault_renames_the_node_and_takes_the_controller_away(rack):
    tray = TRAYS[1]
    rack.simrack("fault", "slurm", tray, "MIXED+DRAIN", "--node-name", "gpu-a02")
    assert json.loads(rack.knob(tray, "slurm.json")) == {"state": "MIXED+DRAIN", "node_name": "gpu-a02"}
    assert "slurm rack1-tray02 MIXED+DRAIN as node gpu-a02" in rack.simrack("status").stdout
    assert " State=MIXED+DRAIN " in rack.out(tray, "scontrol show node gpu-a02 --oneliner")
    by_host_name = rack.ssh(tray, f"scontrol show node {tray} --oneliner")
    assert (by_host_name.returncode, by_host_name.stdout) == (1, f"Node {tray} not found\n")
    rack.simrack("fault", "heal", "slurm", tray)
    rack.simrack("fault", "slurm", tray, "--down")
    down = rack.ssh(tray, f"scontrol show node {tray} --oneliner")
    assert down.returncode == 1 and down.stdout == ""
    assert "slurm_load_node error: Unable to contact slurm controller (connect failure)" in down.stderr
    rack.simrack("fault", "heal", "slurm", tray)
    assert json.loads(rack.knob(tray, "slurm.json")) == {"state": "IDLE"}
    assert " State=IDLE " in rack.out(tray, f"scontrol show node {tray} --oneliner")
    refused = rack.simrack("fault", "slurm", tray, "IDLE", "--down", check=False)
    assert refused.returncode == 1 and "give STATE or --down, not both" in refused.stderr
    assert "active faults: none" in rack.simrack("status").stdout


def test_nodelist_edit_swaps_and_restores(rack):
    tray = TRAYS[0]
    rack.write_nodes_config(tray, ADDRESSES)
    original = rack.out(tray, "cat /etc/nvidia-imex/nodes_config.cfg")
    assert original == "".join(f"{address}\n" for address in ADDRESSES)
    rack.simrack("fault", "nodelist-edit", tray)
    assert rack.out(tray, "cat /etc/nvidia-imex/nodes_config.cfg").split() == [ADDRESSES[1], ADDRESSES[0], ADDRESSES[2]]
    rack.simrack("fault", "heal", "nodelist-edit", tray)
    assert rack.out(tray, "cat /etc/nvidia-imex/nodes_config.cfg") == original


# --------------------------------------------------------------------------- with the IMEX simulator

NODE_LINE = re.compile(r"^Node #(\d+)\s+[-*]\s+(\S+)\s+[-* ]*-\s+(\S+)\s+- Version:[ \t]*(\S*)", re.MULTILINE)


def domain_view(rack: Rack, tray: str = TRAYS[0]) -> dict:
    """nvidia-imex-ctl -N as seen from `tray`: node statuses/versions, matrix rows, domain state."""
    text = rack.out(tray, "timeout 10 nvidia-imex-ctl -N")
    nodes = {int(i): (status, version) for i, _, status, version in NODE_LINE.findall(text)}
    table = text.split("Nodes From\\To", 1)[1].split("Domain State:")[0]
    rows = {int(line.split()[0]): line.split()[1:] for line in table.splitlines()[1:] if line.strip()}
    return {"nodes": nodes, "rows": rows, "state": text.rsplit("Domain State:", 1)[1].strip()}


def wait_for(rack: Rack, condition, what: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        view = domain_view(rack)
        if condition(view):
            return view
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not seen within {timeout}s; last view {view}")
        time.sleep(1)


def healthy(view: dict) -> bool:
    return view["state"] == "UP" and all(cell == "C" for row in view["rows"].values() for cell in row)


@pytest.fixture(scope="module")
def domain(rack):
    """All three trays configured as one IMEX domain and running, as the collection would leave them."""
    if not os.access(SIMULATOR, os.X_OK):
        pytest.skip(f"IMEX simulator not present ({SIMULATOR})")
    for tray in TRAYS:
        rack.write_nodes_config(tray, ADDRESSES)
        rack.out(tray, "systemctl start nvidia-imex")
    time.sleep(1)
    for tray in TRAYS:      # a daemon that dies right after a successful start: say so plainly
        state = rack.ssh(tray, "systemctl is-active nvidia-imex").stdout.strip()
        assert state == "active", (f"nvidia-imex on {tray} is {state} after a successful start:\n"
                                   + rack.out(tray, "journalctl -u nvidia-imex -n 8 --no-pager -o cat"))
    wait_for(rack, healthy, "a healthy domain")
    return rack


@needs_simulator
def test_domain_comes_up(domain):
    view = wait_for(domain, healthy, "a healthy domain")
    assert [status for status, _ in view["nodes"].values()] == ["READY"] * 3


@needs_simulator
def test_daemon_stop_makes_the_node_unavailable(domain):
    domain.simrack("fault", "daemon-stop", TRAYS[1])
    view = wait_for(domain, lambda v: v["nodes"][1][0] == "UNAVAILABLE", "node 1 UNAVAILABLE")
    assert view["rows"][1] == ["I", "I", "I"] and view["state"] == "DEGRADED"
    domain.simrack("fault", "heal", "daemon-stop", TRAYS[1])
    wait_for(domain, healthy, "UP after daemon-stop heal")


@needs_simulator
def test_link_cut_shows_recovering_between_the_pair(domain):
    domain.simrack("fault", "link-cut", TRAYS[0], TRAYS[2])
    view = wait_for(domain, lambda v: v["rows"][0][2] not in ("C",), "0->2 not connected")
    assert view["rows"][0][2] == "R" and view["rows"][0][1] == "C"
    domain.simrack("fault", "heal", "link-cut", TRAYS[0], TRAYS[2])
    wait_for(domain, healthy, "UP after link-cut heal")


@needs_simulator
def test_cmd_port_block_degrades_the_domain(domain):
    domain.simrack("fault", "cmd-port-block", TRAYS[1])
    view = wait_for(domain, lambda v: v["nodes"][1] == ("UNAVAILABLE", ""), "node 1 UNAVAILABLE, no version")
    assert view["state"] == "DEGRADED"
    domain.simrack("fault", "heal", "cmd-port-block", TRAYS[1])
    wait_for(domain, healthy, "UP after cmd-port-block heal")


@needs_simulator
def test_version_skew_shows_v(domain):
    domain.simrack("fault", "version", TRAYS[2], "580.105.08", "--restart")
    view = wait_for(domain, lambda v: "!V!" in v["rows"][0], "!V! toward node 2")
    assert view["rows"][0][2] == "!V!" and view["state"] == "DEGRADED"
    domain.simrack("fault", "heal", "version", TRAYS[2], "--restart")
    wait_for(domain, healthy, "UP after version heal")


@needs_simulator
def test_nodelist_edit_shows_m(domain):
    domain.simrack("fault", "nodelist-edit", TRAYS[2], "--restart")
    wait_for(domain, lambda v: any("!M!" in row for row in v["rows"].values()), "!M!")
    domain.simrack("fault", "heal", "nodelist-edit", TRAYS[2], "--restart")
    wait_for(domain, healthy, "UP after nodelist-edit heal")


@needs_simulator
def test_daemon_kill_restarts_unless_told_not_to(domain):
    tray = TRAYS[1]
    main_pid = domain.out(tray, "systemctl show -p MainPID --value nvidia-imex")
    domain.simrack("fault", "daemon-kill", tray)
    deadline = time.monotonic() + 15
    while domain.out(tray, "systemctl show -p MainPID --value nvidia-imex") in (main_pid, "0\n"):
        assert time.monotonic() < deadline, "Restart=on-failure did not bring the daemon back"
        time.sleep(0.5)
    wait_for(domain, healthy, "UP after a killed daemon restarted")

    domain.simrack("fault", "daemon-kill", tray, "--no-restart")
    time.sleep(2)       # longer than RestartSec=1s: a restart would have happened by now
    assert domain.ssh(tray, "systemctl is-active nvidia-imex").stdout.strip() == "failed"
    assert domain.out(tray, "systemctl is-enabled nvidia-imex 2>&1; true").strip() != "masked"
    domain.simrack("fault", "heal", "daemon-kill", tray)
    wait_for(domain, healthy, "UP after daemon-kill heal")


@needs_simulator
def test_fail_start_keeps_the_daemon_down(domain):
    tray = TRAYS[2]
    domain.simrack("fault", "fail-start", tray)
    assert domain.ssh(tray, "systemctl is-active nvidia-imex").stdout.strip() in ("failed", "activating")
    domain.simrack("fault", "heal", "fail-start", tray)
    wait_for(domain, healthy, "UP after fail-start heal")


@needs_simulator
def test_ctl_hang_and_fabric_reach_the_tools(domain):
    tray = TRAYS[0]
    domain.simrack("fault", "ctl-hang", tray)
    assert domain.ssh(tray, "timeout 2 nvidia-imex-ctl -q").returncode == 124
    domain.simrack("fault", "heal", "ctl-hang", tray)
    assert domain.out(tray, "timeout 5 nvidia-imex-ctl -q") == "READY\n"
    domain.simrack("fault", "fabric", tray, "state=In Progress")
    assert "In Progress" in domain.out(tray, "nvidia-smi --query-gpu=fabric.state --format=csv,noheader")
    domain.simrack("fault", "heal", "fabric", tray)
    assert set(domain.out(tray, "nvidia-smi --query-gpu=fabric.state --format=csv,noheader").split("\n")) <= {"Completed", ""}


SLOTS = ["imex-slot-00", "imex-slot-01", "imex-slot-02"]


def main_pid(rack: Rack, tray: str) -> str:
    return rack.out(tray, "systemctl show -p MainPID --value nvidia-imex").strip()


@needs_simulator
def test_swap_gives_the_tray_a_new_address_that_only_signalled_peers_find_by_name(domain):
    """A replacement board: new address (printed), the bed's records follow it, the trays' files do
    not (the collection's job). Its peers lost the old board without a goodbye (R); with slot names
    in the node list and /etc/hosts rewritten, a peer reaches the new board once it gets SIGUSR1,
    in the same process, and not before."""
    yaml = pytest.importorskip("yaml")
    tray = TRAYS[2]
    for each in TRAYS:      # the DNS-name mode: slot names in the node list, /etc/hosts maps them
        rack_hosts = "".join(f"{address}\t{slot}\n" for address, slot in zip(ADDRESSES, SLOTS))
        domain.out(each, f"printf '{rack_hosts}' >> /etc/hosts")
        domain.write_nodes_config(each, SLOTS)
        domain.out(each, "systemctl restart nvidia-imex")
    view = wait_for(domain, healthy, "UP with slot names")
    assert "Treating node config entry 'imex-slot-02' as a host name." in domain.out(TRAYS[0], "cat /var/log/nvidia-imex.log")
    assert "Node #2   - imex-slot-02" in domain.out(TRAYS[0], "nvidia-imex-ctl -N")
    files = "cat /etc/hosts /etc/nvidia-imex/nodes_config.cfg"
    before = domain.out(tray, files)
    domain.simrack("fault", "backoff", TRAYS[0], "60")   # the running daemon takes it at its next wait
    domain.simrack("fault", "backoff", tray)              # a knob fault stays with the tray

    result = domain.simrack("swap", tray)
    new = result.stdout.strip()
    assert re.fullmatch(r"198\.18\.1\.\d+", new) and new not in ADDRESSES, result.stdout
    hosts = yaml.safe_load(domain.inventory.read_text())["all"]["children"]["imex_domains"]["children"]["rack1"]["hosts"]
    assert (hosts[tray]["ansible_host"], hosts[tray]["imex_address"]) == (new, new)
    assert [hosts[t]["ansible_host"] for t in TRAYS[:2]] == ADDRESSES[:2]
    assert f"HostName {new}\n" in (domain.state / "ssh_config").read_text()
    assert f"{new}/16" in domain.out(tray, "ip -4 -o addr show dev eth0")
    assert ADDRESSES[2] not in domain.out(tray, "ip -4 -o addr show dev eth0")
    assert domain.out(tray, files) == before
    assert f" {tray:<14} {new:<13} Up" in domain.simrack("status").stdout
    view = wait_for(domain, lambda v: v["rows"][0][2] != "C", "node 0 losing the old board")
    assert view["rows"][0][2] == "R" and view["nodes"][2][0] == "UNAVAILABLE"
    wait_for(domain, lambda v: "Next connection attempt to node 2 with address imex-slot-02 in 60 s." in domain.out(
        TRAYS[0], "cat /var/log/nvidia-imex.log"), "node 0 backing off 60 s from the old board")
    assert domain.ssh(tray, "systemctl start nvidia-imex").returncode != 0
    assert "No matching network interface found" in domain.out(tray, "journalctl -u nvidia-imex -b --no-pager -o cat")

    # What the collection does, by hand: every tray's /etc/hosts gets the new address, the new
    # board's daemon starts, its peers get SIGUSR1.
    pids = [main_pid(domain, each) for each in TRAYS[:2]]
    for each in TRAYS:
        domain.out(each, f"sed -i 's/^{ADDRESSES[2]}\timex-slot-02$/{new}\timex-slot-02/' /etc/hosts")
    domain.out(tray, "systemctl reset-failed nvidia-imex; systemctl start nvidia-imex")
    view = wait_for(domain, lambda v: v["rows"].get(2) == ["C", "C", "C"], "the new board connected to both peers")
    assert view["rows"][0][2] == "R" and view["rows"][1][2] != "C"   # unsignalled: the old address
    for each in TRAYS[:2]:
        domain.out(each, "systemctl kill --kill-whom=main --signal=SIGUSR1 nvidia-imex")
    wait_for(domain, healthy, "UP once the peers are signalled")
    assert [main_pid(domain, each) for each in TRAYS[:2]] == pids

    again = domain.simrack("swap", tray).stdout.strip()
    assert again not in (new, *ADDRESSES) and domain.out(tray, "hostname") == f"{tray}\n"
    assert domain.simrack("swap", "rack1-tray09", check=False).returncode == 1
    domain.simrack("fault", "ssh-block", tray)
    refused = domain.simrack("swap", tray, check=False)
    assert refused.returncode == 1 and "heal them before swapping" in refused.stderr
    for fault in (("ssh-block", tray), ("backoff", TRAYS[0]), ("backoff", tray)):
        domain.simrack("fault", "heal", *fault)


# --------------------------------------------------------------------------- a second bed (slot 1)

@pytest.fixture
def slot_1_bed_lock():
    """Slot 1's bed lock, held as whoever brings up a bed there holds it (a soak of another test run
    may be using the slot: this test waits for it)."""
    with open("/var/tmp/simrack-bed-1.lock", "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield



def test_a_bed_in_slot_1_runs_beside_the_first_under_its_own_names_and_addresses(rack, slot_1_bed_lock):
    state = tempfile.mkdtemp(prefix="simrack-t1-", dir="/var/tmp")
    second = Rack(state, rack.sysctls_before)
    # The root file system the first bed's trays run on (through their overlays) is never changed
    # under them: the second bed's `up` finds the simulator installed and writes nothing there.
    rootfs = Path(json.loads((rack.state / "rack.json").read_text())["rootfs"])
    launcher = rootfs / "usr/lib/imexsim/imexsim/launch.py"
    installed = os.stat(launcher)
    try:
        second.simrack("up", "--slot", "1", "--racks", "1", "--trays", "2", timeout=900)
        assert (os.stat(launcher).st_ino, os.stat(launcher).st_mtime_ns) == (installed.st_ino, installed.st_mtime_ns)
        assert json.loads((second.state / "rack.json").read_text())["rootfs"] == str(rootfs)
        assert "IMEX version is" in rack.out(TRAYS[0], "nvidia-imex --version")
        namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
        assert {"imex1-fabric", "imex1-r1t01", "imex1-r1t02"} <= set(namespaces)
        assert second.out("rack1-tray02", "hostname").strip() == "rack1-tray02"
        assert second.out("rack1-tray01", "getent hosts rack1-tray02").split() == ["198.19.1.12", "rack1-tray02"]
        inventory = (second.state / "inventory.yml").read_text()
        assert "ansible_host: 198.19.1.11" in inventory and "198.18." not in inventory
        # The two fabrics do not meet: the first bed's trays do not reach the second's.
        assert tcp(NAMESPACES[0], "198.19.1.11", 22) == "timeout"
        # A fault names the second bed's trays and cuts only them off.
        second.simrack("fault", "isolate", "imex1-r1t01")
        assert second.ssh("rack1-tray01", "true", timeout=20).returncode != 0
        assert rack.out(TRAYS[0], "hostname").strip() == TRAYS[0]
        second.simrack("fault", "heal", "isolate", "rack1-tray01")
        refused = second.simrack("up", "--slot", "1", "--state", state + "-again", check=False)
        assert refused.returncode == 1 and "imex1-fabric exists" in refused.stderr, refused.stderr
    finally:
        second.simrack("down", check=False)
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(state + "-again", ignore_errors=True)
    # The first bed is untouched and still needs the kernel tables raised.
    assert rack.out(TRAYS[1], "hostname").strip() == TRAYS[1]
    assert int(sysctl("fs.inotify.max_user_instances")) >= 8192
    assert "imex1-" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not list(Path("/sys/fs/cgroup").glob("*/simrack1")) and not Path("/sys/fs/cgroup/simrack1").exists()


# --------------------------------------------------------------------------- down (runs last)

def test_down_leaves_nothing_behind(rack):
    rack.simrack("down")
    assert not rack.state.exists()
    # The names of this bed's slot (0); a bed of another test run may be up in slot 1.
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    assert not [name for name in namespaces if name.startswith("imex-")]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "imex-up" not in links
    assert not list(Path("/sys/fs/cgroup").glob("*/simrack")) and not Path("/sys/fs/cgroup/simrack").exists()
    with open("/proc/self/mountinfo") as handle:
        assert str(rack.state) not in handle.read()
    leftovers = subprocess.run(["pgrep", "-f", str(rack.state)], capture_output=True, text=True).stdout
    assert leftovers == "", f"processes still mention the state dir: {leftovers}"
    if not [name for name in namespaces if name.startswith("imex1-")]:     # else that bed still needs them
        assert {name: sysctl(name) for name in SYSCTLS} == rack.sysctls_before


def load_simrack():
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("simrack_script", str(SIMRACK))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    sys.modules[loader.name] = module       # its dataclasses look their module up there
    loader.exec_module(module)
    return module


def test_control_dir_removal_survives_a_master_unlinking_its_socket(tmp_path, monkeypatch):
    """The teardown failure seen in CI: an exiting ssh master removed its socket under rmtree."""
    simrack = load_simrack()
    control = tmp_path / "cm"
    control.mkdir()
    (control / "198.18.1.11").write_text("")
    (control / "198.18.1.12").write_text("")
    real_rmtree, calls = shutil.rmtree, []

    def racing_rmtree(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 1:          # the master unlinks its socket after rmtree listed it
            (control / "198.18.1.11").unlink()
            raise FileNotFoundError(2, "No such file or directory", "198.18.1.11")
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(simrack.shutil, "rmtree", racing_rmtree)
    simrack.remove_tree_racing_owners(control)
    assert not control.exists()
    assert len(calls) == 2


def test_control_dir_removal_raises_a_race_that_persists(tmp_path, monkeypatch):
    simrack = load_simrack()
    control = tmp_path / "cm"
    control.mkdir()

    def always_racing(path, *args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", "socket")

    monkeypatch.setattr(simrack.shutil, "rmtree", always_racing)
    with pytest.raises(FileNotFoundError):
        simrack.remove_tree_racing_owners(control, attempts=3)
    assert control.exists()


def test_a_swapped_tray_gets_a_never_used_address_of_its_rack_and_keeps_it(tmp_path):
    simrack = load_simrack()
    (tmp_path / "rack.json").write_text(json.dumps({"racks": 2, "trays": 3, "addresses": {"rack2-tray02": "198.18.2.110"}}))
    rack = simrack.Rack(tmp_path)
    assert [t.address for t in rack.trays] == ["198.18.1.11", "198.18.1.12", "198.18.1.13",
                                               "198.18.2.11", "198.18.2.110", "198.18.2.13"]
    assert rack.tray("r2t02").address == "198.18.2.110"
    assert simrack.next_swap_address(rack, rack.tray("r2t03")) == "198.18.2.111"
    assert simrack.next_swap_address(rack, rack.tray("r1t01")) == "198.18.1.110"
    rack.record.data["retired_addresses"] = ["198.18.2.12", "198.18.2.111"]
    assert simrack.next_swap_address(rack, rack.tray("r2t03")) == "198.18.2.112"


def test_slurm_conf_lets_ordinary_jobs_share_a_tray():
    """Consumable cores and several CPUs a tray: two ordinary jobs fit on one tray, as on a GPU node."""
    simrack = load_simrack()
    trays = simrack.layout(1, 2)
    conf = simrack.slurm_conf(trays, simrack.SlurmController(0, 0, len(trays))).splitlines()
    assert "SelectType=select/cons_tres" in conf and "SelectTypeParameters=CR_Core" in conf
    nodes = [line for line in conf if line.startswith("NodeName=")]
    assert len(nodes) == 2 and all(f"CPUs={simrack.SLURM_TRAY_CPUS} " in line for line in nodes), nodes
    assert simrack.SLURM_TRAY_CPUS > 1
    # No partition or node setting makes jobs exclusive behind the jobs' backs.
    assert not any("OverSubscribe" in line or "Exclusive" in line for line in conf), conf


def test_the_site_prolog_records_the_environment_it_is_given(tmp_path):
    simrack = load_simrack()
    script = tmp_path / "10-site"
    script.write_text(simrack.SITE_SCRIPT.replace(simrack.SLURM_JOB_ENV_DIR, str(tmp_path / "env")))
    script.chmod(0o755)
    environment = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "42", "SLURM_SCRIPT_CONTEXT": "prolog_slurmd",
                   "SLURM_JOB_OVERSUBSCRIBE": "NO", "SLURM_JOB_EXCLUSIVE": "NODE"}
    subprocess.run([str(script)], env=environment, check=True)
    recorded = (tmp_path / "env" / "42.prolog_slurmd").read_text().splitlines()
    assert recorded == sorted(f"{key}={value}" for key, value in environment.items())   # nothing the shell adds
    assert [path.name for path in (tmp_path / "env").iterdir()] == ["42.prolog_slurmd"]   # no temporary left


@pytest.mark.parametrize(("version", "inside"), [(257, "/sys/fs/cgroup/unified"), (262, "/sys/fs/cgroup")])
def test_a_systemd_without_cgroup_v1_gets_the_unified_hierarchy_as_its_cgroup_root(tmp_path, version, inside):
    """Debian forky's systemd (258 and later) refuses to boot on a hybrid hierarchy."""
    simrack = load_simrack()
    library = tmp_path / "usr/lib/x86_64-linux-gnu/systemd" / f"libsystemd-shared-{version}.so"
    library.parent.mkdir(parents=True)
    library.write_text("")
    assert simrack.systemd_version(tmp_path) == version
    with open("/proc/self/mountinfo") as handle:
        hybrid = " /sys/fs/cgroup/unified " in handle.read()
    if not hybrid:
        pytest.skip("this host has no cgroup v1 hybrid hierarchy")
    assert simrack.cgroup_volumes(tmp_path) == ["--volume", f"/sys/fs/cgroup/unified:{inside}:rw"]


def test_up_refuses_a_slurm_suite_without_slurm(tmp_path):
    result = subprocess.run([str(SIMRACK), "up", "--state", str(tmp_path / "state"), "--slurm-suite", "forky"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "--slurm-suite chooses the Slurm the bed runs: give it with --slurm" in result.stderr
    assert not (tmp_path / "state" / "rack.json").exists()


def test_the_simulator_goes_into_a_rootfs_of_its_own_made_once_per_simulator(tmp_path):
    simrack = load_simrack()
    entry = tmp_path / "rootfs-golden"
    for directory in ("sbin", "usr/bin"):
        (entry / "rootfs" / directory).mkdir(parents=True)
    (entry / "rootfs/sbin/init").write_text("")
    rootfs, present = simrack.with_simulator(entry)
    assert present and rootfs == tmp_path / f"rootfs-golden-imexsim-{simrack.simulator_digest()}" / "rootfs"
    assert (rootfs / "usr/bin/nvidia-imex").is_file() and (rootfs / "sbin/init").is_file()
    assert not (entry / "rootfs/usr/bin/nvidia-imex").exists()      # the golden one stays as built
    made = (rootfs / "usr/bin/nvidia-imex").stat().st_mtime_ns
    assert simrack.with_simulator(entry) == (rootfs, True)
    assert (rootfs / "usr/bin/nvidia-imex").stat().st_mtime_ns == made
    assert not list(tmp_path.glob(".build-*"))
