"""Daemon start-up paths and nvidia-imex-ctl's own error handling."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import free_port_pair, run_tool, tool_env

from imexsim import wire

NO_INTERFACE = "No matching network interface found for any IP addresses in the node configuration file {}."


def run_daemon(cluster, index: int, timeout: float = 20):
    """Run daemon INDEX to completion (for start-up failures, which exit at once)."""
    return run_tool("daemon", ["-c", str(cluster.config_path(index))], testbed=cluster.testbed(index), timeout=timeout)


def test_version(tmp_path):
    (tmp_path / "imex_version").write_text("570.172.08\n")
    assert run_tool("daemon", ["--version"], testbed=tmp_path).stdout == "IMEX version is: 570.172.08\n"
    assert run_tool("daemon", ["--version"], testbed=tmp_path / "absent").stdout == "IMEX version is: 580.95.09\n"


def test_no_local_address_in_the_node_list(make_cluster):
    cluster = make_cluster(1)
    # 192.0.2.0/24 is reserved for documentation: never configured here, and never contacted
    # (the daemon only tries to bind to it).
    cluster.configure(0, entries=["192.0.2.10", "192.0.2.11"], settings={"BIND_INTERFACE_IP": ""})
    result = run_daemon(cluster, 0)
    message = NO_INTERFACE.format(cluster.node_dir(0) / "nodes_config.cfg")
    assert result.returncode == 1
    assert message in result.stderr
    assert message in cluster.log_path(0).read_text()


def test_port_option_overrides_server_port(make_cluster):
    cluster = make_cluster(1)
    cluster.configure(0, entries=["192.0.2.10"], settings={"BIND_INTERFACE_IP": ""})  # exits right after the config lines
    result = run_tool("daemon", ["-c", str(cluster.config_path(0)), "-p", "23456"], testbed=cluster.testbed(0))
    assert result.returncode == 1
    assert "IMEX library communication bind port = 23456\n" in cluster.log_path(0).read_text()


def test_local_address_found_without_bind_setting(make_cluster):
    """With BIND_INTERFACE_IP empty the first entry with a local address is this node."""
    cluster = make_cluster(2)
    cluster.configure(1, entries=["192.0.2.10", cluster.addresses[1]], settings={"BIND_INTERFACE_IP": ""})
    cluster.start(1)
    assert f"Identified this node as ID 1, using bind IP of '{cluster.addresses[1]}', and network interface of lo" in cluster.log_path(1).read_text()


def test_host_name_entries(make_cluster):
    cluster = make_cluster(1)
    server_port, cmd_port = free_port_pair("127.0.0.1")
    cluster.configure(0, entries=["localhost"], settings={
        "BIND_INTERFACE_IP": "", "SERVER_PORT": server_port, "IMEX_CMD_BIND_INTERFACE_IP": "127.0.0.1", "IMEX_CMD_PORT": cmd_port,
    })
    cluster.launch(0)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        view = json.loads(cluster.ctl(0, "-N", "-j").stdout)
        if view["status"] == "UP":
            break
        time.sleep(0.2)
    assert view["nodes"]["0"]["host"] == "localhost"
    assert view["status"] == "UP"
    log = cluster.log_path(0).read_text()
    assert "Treating node config entry 'localhost' as a host name." in log
    assert "Identified this node as ID 0, using bind address of 'localhost'" in log


def test_unreadable_node_file(make_cluster):
    cluster = make_cluster(1)
    cluster.configure(0, settings={"IMEX_NODE_CONFIG_FILE": str(cluster.node_dir(0) / "missing.cfg")})
    result = run_daemon(cluster, 0)
    assert result.returncode == 1
    assert "Failed to read node configuration file" in cluster.log_path(0).read_text()


def test_unreadable_config_file(tmp_path):
    result = run_tool("daemon", ["-c", str(tmp_path / "nope.cfg")])
    assert (result.returncode, result.stderr) == (1, f"Unable to open configuration file at {tmp_path / 'nope.cfg'}\n")


def test_fail_start_knob(make_cluster):
    cluster = make_cluster(1)
    cluster.configure(0, faults={"fail_start": True})
    result = run_daemon(cluster, 0)
    assert result.returncode == 1
    assert "[ERROR]" in cluster.log_path(0).read_text()
    assert "faults.json fail_start" in result.stderr


def test_port_in_use(make_cluster):
    cluster = make_cluster(1)
    cluster.start(0)
    second = run_daemon(cluster, 0)
    assert second.returncode == 1
    assert "Address already in use" in second.stderr


def test_log_goes_to_stderr_without_a_log_file(make_cluster):
    cluster = make_cluster(1)
    cluster.configure(0, settings={"LOG_FILE_NAME": "", "IMEX_NODE_CONFIG_FILE": "/nonexistent/nodes.cfg"})
    result = run_daemon(cluster, 0)
    lines = result.stderr.splitlines()
    assert lines[:2] == ["WARNING: failed to open IMEX log file  errno = No such file or directory", "INFO: using stderr for IMEX logging"]
    assert lines[2].startswith("IMEX Log initializing at: ")
    assert any(re.fullmatch(r"\[\w{3} \d{1,2} \d{4} \d\d:\d\d:\d\d\] \[INFO\] \[tid \d+\] Logging level = 4", line) for line in lines)


def processes_using(config_path) -> list[int]:
    """PIDs whose command line names CONFIG_PATH (unique per test), to clean up by PID."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if str(config_path).encode() in handle.read():
                    pids.append(int(entry))
        except (OSError, ValueError):
            continue
    return pids


def test_daemonize_returns_once_the_daemon_listens(make_cluster):
    cluster = make_cluster(1)
    cluster.configure(0, settings={"DAEMONIZE": "1"})
    config = cluster.config_path(0)
    try:
        # stderr to a file: the daemon keeps it open (journal under systemd), a pipe would never end.
        with open(cluster.node_dir(0) / "daemon.out", "wb") as output:
            starter = subprocess.run(
                [sys.executable, "-m", "imexsim.daemon", "-c", str(config)],
                stdout=output, stderr=output, env=tool_env(cluster.testbed(0)), timeout=20, check=False,
            )
        assert starter.returncode == 0
        status = wire.query_status(host=cluster.addresses[0], port=cluster.cmd_port)
        assert status["state"] == "READY"
        assert os.getsid(status["pid"]) != os.getsid(0)  # detached into a session of its own
        os.kill(status["pid"], signal.SIGTERM)
        deadline = time.monotonic() + 10
        while processes_using(config) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not processes_using(config), "daemonized nvidia-imex did not exit on SIGTERM"
    finally:
        for pid in processes_using(config):
            os.kill(pid, signal.SIGKILL)


def test_command_service_on_a_unix_socket(make_cluster, tmp_path):
    cluster = make_cluster(1)
    path = str(tmp_path / "imex_ctrl.sock")
    cluster.configure(0, settings={"IMEX_CMD_PORT": "", "IMEX_CMD_UNIX_DOMAIN_PATH": path})
    process = cluster.launch(0)
    deadline = time.monotonic() + 20
    while not os.path.exists(path) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    for args in (["-u", path, "-q"], [f"--u={path}", "-q"], ["-c", str(cluster.config_path(0)), "-q"]):
        result = run_tool("ctl", args)
        assert (result.returncode, result.stdout) == (0, "READY\n"), args
    assert cluster.stop(0) == 0
    assert not os.path.exists(path)


def test_ctl_usage_and_missing_files(make_cluster, tmp_path):
    for args in (["-h"], ["--help"], ["-N", "-q"], ["-X"]):
        result = run_tool("ctl", args)
        assert result.returncode == 1
        assert result.stdout.startswith("Usage: nvidia-imex-ctl ")
    missing = run_tool("ctl", ["-c", str(tmp_path / "none.cfg"), "-N"])
    assert missing.returncode == 1
    assert missing.stdout.startswith(f"Unable to open configuration file at {tmp_path / 'none.cfg'}\nUsage: nvidia-imex-ctl ")
    cluster = make_cluster(1)
    cluster.configure(0, settings={"IMEX_NODE_CONFIG_FILE": str(tmp_path / "nodes_missing.cfg")})
    result = cluster.ctl(0, "-N", "-j")
    assert result.returncode == 1
    assert "Failed to read node configuration file" in result.stdout


def test_ctl_hang_knob(make_cluster):
    cluster = make_cluster(1)
    cluster.configure(0, faults={"ctl_hang": True})
    with pytest.raises(subprocess.TimeoutExpired):
        cluster.ctl(0, "-q", timeout=1)  # subprocess.run kills the child on timeout


def test_a_driver_of_another_release_stops_the_start(make_cluster):
    cluster = make_cluster(1)
    cluster.configure(0, entries=[cluster.addresses[0]], settings={"BIND_INTERFACE_IP": ""})
    (cluster.testbed(0) / "driver_version").write_text("580.105.08\n")
    result = run_daemon(cluster, 0)
    assert result.returncode == 1
    assert "NvGpu Library version does not match GPU Driver version" in cluster.log_path(0).read_text()
    smi = run_tool("smi", ["--query-gpu=driver_version", "--format=csv,noheader"], testbed=cluster.testbed(0))
    assert smi.stdout.splitlines()[0] == "580.105.08"


def test_lifetime_record_names_each_start_and_stop(make_cluster):
    """The daemon's own record (read by the soak): one `start` line per instance that serves, with
    its PID, and one `stop` line when it is signalled; a start that fails records nothing."""
    cluster = make_cluster(1)
    cluster.configure(0, settings={"DAEMONIZE": "1"})
    config = cluster.config_path(0)
    events = cluster.node_dir(0) / "events.jsonl"
    env = dict(tool_env(cluster.testbed(0)), IMEXSIM_EVENTS_FILE=str(events))
    try:
        with open(cluster.node_dir(0) / "daemon.out", "wb") as output:
            starter = subprocess.run([sys.executable, "-m", "imexsim.daemon", "-c", str(config)],
                                     stdout=output, stderr=output, env=env, timeout=20, check=False)
        assert starter.returncode == 0
        pid = wire.query_status(host=cluster.addresses[0], port=cluster.cmd_port)["pid"]
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while processes_using(config) and time.monotonic() < deadline:
            time.sleep(0.05)
        records = [json.loads(line) for line in events.read_text().splitlines()]
        assert [(r["event"], r["pid"]) for r in records] == [("start", pid), ("stop", pid)]
        assert records[1]["signal"] == "SIGTERM" and records[0]["time"] <= records[1]["time"]
        assert records[0]["instance"] == records[1]["instance"]
    finally:
        for pid in processes_using(config):
            os.kill(pid, signal.SIGKILL)
