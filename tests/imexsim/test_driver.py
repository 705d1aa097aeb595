"""Simulated driver load (simdriver) and initramfs rebuild (update-initramfs, dracut) in a temp root."""
from __future__ import annotations

import os
import stat
import threading

import pytest
from conftest import run_tool

PROC_DEVICES = "Character devices:\n  1 mem\n195 nvidia\n{entry}\nBlock devices:\n  8 sd\n"
OPTION = "options nvidia NVreg_CreateImexChannel0=1\n"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="creating a character device needs CAP_MKNOD")


@pytest.fixture
def root(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "etc/modprobe.d").mkdir(parents=True)
    return tmp_path


def register_major(root, major: int = 234) -> None:
    (root / "proc/devices").write_text(PROC_DEVICES.format(entry=f"{major} nvidia-caps-imex-channels"))


def simdriver(root, wait: str = "0"):
    return run_tool("simdriver", [], IMEXSIM_ROOT=str(root), IMEXSIM_DRIVER_WAIT_S=wait)


def initramfs_tool(root, program: str, *args: str):
    return run_tool("launch", [program, *args], IMEXSIM_ROOT=str(root))


def channel0(root):
    return root / "dev/nvidia-caps-imex-channels/channel0"


@needs_root
def test_channel0_created_from_live_modprobe_d_before_any_initramfs(root):
    register_major(root, 234)
    (root / "etc/modprobe.d/nvidia.conf").write_text(OPTION)
    assert simdriver(root).returncode == 0
    node = os.lstat(channel0(root))
    assert stat.S_ISCHR(node.st_mode)
    assert (os.major(node.st_rdev), os.minor(node.st_rdev)) == (234, 0)
    assert stat.S_IMODE(node.st_mode) == 0o666
    assert stat.S_IMODE(os.stat(root / "dev/nvidia-caps-imex-channels").st_mode) == 0o755
    assert (root / "run/simdriver/params").read_text() == "ImexChannelCount: 2048\nCreateImexChannel0: 1\n"


def test_option_absent_means_no_channel(root):
    register_major(root)
    (root / "etc/modprobe.d/nvidia.conf").write_text("options nvidia NVreg_CreateImexChannel0=0\n")
    assert simdriver(root).returncode == 0
    assert not channel0(root).exists()
    assert (root / "run/simdriver/params").read_text().endswith("CreateImexChannel0: 0\n")


@needs_root
def test_initramfs_copy_wins_over_live_modprobe_d(root):
    register_major(root)
    (root / "etc/modprobe.d").joinpath("other.conf").write_text("blacklist nouveau\n")
    assert initramfs_tool(root, "update-initramfs", "-u").returncode == 0  # snapshot without the option
    (root / "etc/modprobe.d/nvidia.conf").write_text(OPTION)  # changed, initramfs not rebuilt
    simdriver(root)
    assert not channel0(root).exists()
    result = initramfs_tool(root, "update-initramfs", "-u", "-k", "all")
    assert result.returncode == 0 and result.stdout.startswith("update-initramfs: Generating /boot/initrd.img-")
    simdriver(root)
    assert channel0(root).exists()
    log = (root / "var/log/simdriver.log").read_text()
    assert "update-initramfs -u: snapshot of /etc/modprobe.d taken (1 files)" in log
    assert "update-initramfs -u -k all: snapshot of /etc/modprobe.d taken (2 files)" in log
    assert "module loaded from the initramfs" in log


def test_dracut_needs_force_to_replace_an_image(root):
    (root / "etc/modprobe.d/nvidia.conf").write_text(OPTION)
    assert initramfs_tool(root, "dracut", "--force").returncode == 0
    refused = initramfs_tool(root, "dracut")
    assert refused.returncode == 1 and "without --force" in refused.stderr
    snapshot = root / "var/lib/simdriver/initramfs/modprobe.d/nvidia.conf"
    assert snapshot.read_text() == OPTION


def test_channel_count_zero_disables_channel0(root):
    register_major(root)
    (root / "etc/modprobe.d/nvidia.conf").write_text("options nvidia NVreg_CreateImexChannel0=1 \\\n  NVreg_ImexChannelCount=0\n")
    simdriver(root)
    assert not channel0(root).exists()
    assert (root / "run/simdriver/params").read_text() == "ImexChannelCount: 0\nCreateImexChannel0: 0\n"


@needs_root
def test_waits_for_the_host_to_register_the_major(root):
    (root / "proc/devices").write_text(PROC_DEVICES.format(entry=""))
    (root / "etc/modprobe.d/nvidia.conf").write_text(OPTION)
    timer = threading.Timer(1.0, register_major, args=(root, 509))  # the host's late bind mount
    timer.start()
    try:
        assert simdriver(root, wait="15").returncode == 0
    finally:
        timer.cancel()
    assert os.major(os.lstat(channel0(root)).st_rdev) == 509


def test_gives_up_without_failing_boot_when_no_major_appears(root):
    (root / "proc/devices").write_text(PROC_DEVICES.format(entry=""))
    (root / "etc/modprobe.d/nvidia.conf").write_text(OPTION)
    result = simdriver(root, wait="0.5")
    assert result.returncode == 0
    assert "not registered" in result.stderr
    assert not channel0(root).exists()
    assert "WARNING" in (root / "var/log/simdriver.log").read_text()
