"""install-into: what lands in a tray root file system, and that it works from there."""
from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys

import pytest
from conftest import SIM_DIR

INSTALL = SIM_DIR / "install-into"
# sha256 of the reference's §1.3 stock file without its `> ` quoting: the installed stock
# config must stay a byte copy of the vendor file.
STOCK_CONFIG_SHA256 = "b6862e938400d2a0dac08781db15cdbfeb8e217873986519c3828eb50bca0cb6"


def install(root):
    return subprocess.run([sys.executable, str(INSTALL), str(root)], capture_output=True, text=True, check=False, timeout=60)


def tree(root) -> dict[str, tuple]:
    """Path -> (kind, mode, content hash or link target) for everything under ROOT."""
    entries = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                detail = os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                with open(path, "rb") as handle:
                    detail = hashlib.sha256(handle.read()).hexdigest()
            else:
                detail = ""
            entries[os.path.relpath(path, root)] = (stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode), detail)
    return entries


@pytest.fixture
def rootfs(tmp_path):
    root = tmp_path / "rootfs"
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/python3").write_text("")  # the trays' interpreter; only its presence is checked
    result = install(root)
    assert (result.returncode, result.stderr) == (0, "")
    return root


def test_install_is_idempotent(rootfs):
    first = tree(rootfs)
    assert install(rootfs).returncode == 0
    assert tree(rootfs) == first


def test_installed_layout(rootfs):
    for tool in ("usr/bin/nvidia-imex", "usr/bin/nvidia-imex-ctl", "usr/bin/nvidia-smi", "usr/bin/scontrol",
                 "usr/bin/dracut", "usr/sbin/update-initramfs", "usr/sbin/simdriver"):
        path = rootfs / tool
        assert path.read_bytes().startswith(b"#!/usr/bin/python3\n"), tool
        assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert (rootfs / "usr/lib/imexsim/imexsim/daemon.py").is_file()
    assert not list((rootfs / "usr/lib/imexsim").rglob("__pycache__"))
    config = (rootfs / "etc/nvidia-imex/config.cfg").read_bytes()
    assert hashlib.sha256(config).hexdigest() == STOCK_CONFIG_SHA256
    assert not (rootfs / "etc/nvidia-imex/nodes_config.cfg").exists()
    unit = (rootfs / "lib/systemd/system/nvidia-imex.service").read_text()
    for line in ("Type=forking", "ExecStart=/usr/bin/nvidia-imex -c /etc/nvidia-imex/config.cfg", "Restart=on-failure",
                 "RestartSec=1s", "After=network-online.target", "Requires=network-online.target", "WantedBy=multi-user.target"):
        assert line in unit.splitlines()
    wants = rootfs / "etc/systemd/system/multi-user.target.wants"
    assert os.readlink(wants / "simdriver.service") == "/lib/systemd/system/simdriver.service"
    assert not (wants / "nvidia-imex.service").exists()  # the collection enables it
    assert "Before=nvidia-imex.service" in (rootfs / "lib/systemd/system/simdriver.service").read_text().splitlines()


def test_stock_config_values():
    text = (SIM_DIR / "files/config.cfg").read_text()
    for line in ("DAEMONIZE=1", "SERVER_PORT=50000", "IMEX_CMD_ENABLED=1", "IMEX_CMD_PORT=50005",
                 "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg", "LOG_FILE_NAME=/var/log/nvidia-imex.log"):
        assert line in text.splitlines()


def test_installed_tools_run(rootfs, tmp_path):
    testbed = tmp_path / "testbed"
    testbed.mkdir()
    (testbed / "imex_version").write_text("580.65.06\n")
    env = {**os.environ, "IMEXSIM_TESTBED_DIR": str(testbed), "IMEXSIM_ROOT": str(tmp_path / "tray")}
    env.pop("PYTHONPATH", None)  # the launcher must find the installed package by itself

    def run(tool, *args):
        return subprocess.run([sys.executable, str(rootfs / tool), *args], capture_output=True, text=True, env=env, check=False, timeout=30)

    assert run("usr/bin/nvidia-imex", "--version").stdout == "IMEX version is: 580.65.06\n"
    assert run("usr/bin/nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader").stdout == "580.65.06\n" * 4
    assert run("usr/bin/nvidia-imex-ctl", "-h").returncode == 1
    (tmp_path / "tray/etc/modprobe.d").mkdir(parents=True)
    assert run("usr/sbin/update-initramfs", "-u").returncode == 0
    assert (tmp_path / "tray/var/lib/simdriver/initramfs/modprobe.d").is_dir()


def test_refuses_to_write_through_a_symlink_leaving_the_root(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "rootfs"
    root.mkdir()
    (root / "lib").symlink_to(outside)  # like an absolute lib -> /usr/lib link seen from the host
    result = install(root)
    assert result.returncode != 0
    assert "resolves outside" in result.stderr
    assert not list(outside.iterdir())
    assert list(root.iterdir()) == [root / "lib"]  # nothing written before the refusal
