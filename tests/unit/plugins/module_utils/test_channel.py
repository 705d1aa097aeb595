# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import functools
import os
import shutil
import stat

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils._channel import (
    DEFAULT_CHANNEL_COUNT,
    DROPIN_CONTENT,
    ChannelError,
    NodeState,
    apply_device_plan,
    conflicting_settings,
    foreign_dropin_lines,
    imex_channel_count,
    imex_channel_major,
    option_values,
    parse_nvidia_params,
    plan_device,
    plan_device_absent,
    cmdline_values,
    effective_modprobe_files,
    scan_cmdline,
    scan_modprobe_dir,
    scan_modprobe_dirs,
)
from ansible_collections.rackscale.imex.tests.unit.plugins.vendor_samples import read_sample

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "files")
sample = functools.partial(read_sample, "files")


# --- /proc/devices -----------------------------------------------------------------------------

@pytest.mark.parametrize("name, major", [
    ("proc_devices_gb200.txt", 234),
    ("proc_devices_nvswitch.txt", 234),
    ("proc_devices_major507.txt", 507),
    ("proc_devices_no_imex.txt", None),
    ("proc_devices_traps.txt", None),
])
def test_major_from_proc_devices_samples(name, major):
    assert imex_channel_major(sample(name)) == major


def test_major_requires_character_section():
    assert imex_channel_major("234 nvidia-caps-imex-channels\n") is None
    assert imex_channel_major("") is None


def test_major_entry_without_trailing_newline():
    assert imex_channel_major("Character devices:\n234 nvidia-caps-imex-channels") == 234


# --- /proc/driver/nvidia/params ----------------------------------------------------------------

def test_params_parsing():
    params = parse_nvidia_params(sample("nvidia_params.txt"))
    assert params["ImexChannelCount"] == "2048"
    assert params["CreateImexChannel0"] == "0"
    assert params["RegistryDwords"] == '""'


@pytest.mark.parametrize("text, count", [
    (None, DEFAULT_CHANNEL_COUNT),
    ("", DEFAULT_CHANNEL_COUNT),
    ("ImexChannelCount: 16\n", 16),
    ("ImexChannelCount: 0\n", 0),
    ("ImexChannelCount: garbage\n", DEFAULT_CHANNEL_COUNT),
])
def test_channel_count(text, count):
    assert imex_channel_count(text) == count


def test_channel_count_samples():
    assert imex_channel_count(sample("nvidia_params.txt")) == 2048
    assert imex_channel_count(sample("nvidia_params_count16.txt")) == 16
    assert imex_channel_count(sample("nvidia_params_old_driver.txt")) == 2048


# --- modprobe.d --------------------------------------------------------------------------------

def test_option_values_several_params_and_quotes():
    assert option_values(sample("modprobe.d/nvidia-hpc-image.conf")) == [(2, "1")]


def test_option_values_ignores_comments_and_other_modules():
    assert option_values(sample("modprobe.d/nvidia-commented.conf")) == []


def test_option_values_same_file_twice():
    assert option_values(sample("modprobe.d/nvidia-twice.conf")) == [(1, "1"), (2, "0x0")]


def test_option_values_unbalanced_quote_still_reads_words():
    assert option_values('options nvidia NVreg_RegistryDwords="x NVreg_CreateImexChannel0=0\n') == [(1, "0")]


def test_scan_dir_reports_file_line_value_in_name_order(tmp_path):
    shutil.copytree(os.path.join(SAMPLES, "modprobe.d"), str(tmp_path / "modprobe.d"))
    (tmp_path / "modprobe.d" / "nvidia.conf.dpkg-old").write_text("options nvidia NVreg_CreateImexChannel0=0\n")
    settings = scan_modprobe_dir(str(tmp_path / "modprobe.d"))
    found = [setting.as_tuple() for setting in settings]
    base = str(tmp_path / "modprobe.d")
    assert found == [
        (os.path.join(base, "nvidia-disable-channel0.conf"), 2, "0"),
        (os.path.join(base, "nvidia-hpc-image.conf"), 2, "1"),
        (os.path.join(base, "nvidia-twice.conf"), 1, "1"),
        (os.path.join(base, "nvidia-twice.conf"), 2, "0x0"),
    ]
    assert conflicting_settings(settings, "1") == [
        (os.path.join(base, "nvidia-disable-channel0.conf"), 2, "0"),
        (os.path.join(base, "nvidia-twice.conf"), 2, "0x0"),
    ]
    assert conflicting_settings(settings, "0") == [
        (os.path.join(base, "nvidia-hpc-image.conf"), 2, "1"),
        (os.path.join(base, "nvidia-twice.conf"), 1, "1"),
    ]


def test_scan_dir_excludes_our_dropin_and_tolerates_missing_dir(tmp_path):
    ours = tmp_path / "nvidia-imex.conf"
    ours.write_text(DROPIN_CONTENT)
    assert [s.as_tuple() for s in scan_modprobe_dir(str(tmp_path))] == [(str(ours), 2, "1")]
    assert scan_modprobe_dir(str(tmp_path), exclude=str(ours)) == []
    assert scan_modprobe_dir(str(tmp_path / "missing")) == []


def test_modprobe_directories_apply_in_precedence_then_name_order(tmp_path):
    """modprobe.d(5): a name in an earlier directory hides the later ones' file of that name (a
    /dev/null link masks it); the files left are applied by name, whichever directory holds them."""
    etc, run_dir, usr_lib = (tmp_path / name for name in ("etc", "run", "usr_lib"))
    for directory in (etc, run_dir, usr_lib):
        directory.mkdir()
    vendor = os.path.join(SAMPLES, "modprobe.d")
    shutil.copy(os.path.join(vendor, "nvidia-disable-channel0.conf"), str(usr_lib))
    shutil.copy(os.path.join(vendor, "nvidia-hpc-image.conf"), str(usr_lib))
    shutil.copy(os.path.join(vendor, "nvidia-twice.conf"), str(run_dir))
    (etc / "nvidia-disable-channel0.conf").symlink_to("/dev/null")    # masks the vendor's file
    shutil.copy(os.path.join(vendor, "nvidia-commented.conf"), str(etc / "nvidia-hpc-image.conf"))
    directories = [str(etc), str(tmp_path / "absent"), str(run_dir), str(usr_lib)]
    assert effective_modprobe_files(directories) == [
        str(etc / "nvidia-disable-channel0.conf"), str(etc / "nvidia-hpc-image.conf"), str(run_dir / "nvidia-twice.conf")]
    found = [setting.as_tuple() for setting in scan_modprobe_dirs(directories)]
    assert found == [(str(run_dir / "nvidia-twice.conf"), 1, "1"), (str(run_dir / "nvidia-twice.conf"), 2, "0x0")]
    # Without the masks, the vendor's files count, sorted by name among the others.
    assert [path for path, _line, _value in (s.as_tuple() for s in scan_modprobe_dirs([str(run_dir), str(usr_lib)]))] == [
        str(usr_lib / "nvidia-disable-channel0.conf"), str(usr_lib / "nvidia-hpc-image.conf"),
        str(run_dir / "nvidia-twice.conf"), str(run_dir / "nvidia-twice.conf")]


def test_the_kernel_command_line_gives_the_nvidia_module_s_value_only():
    with open(os.path.join(SAMPLES, "proc_cmdline_gb200.txt")) as handle:
        assert cmdline_values(handle.read()) == []
    with open(os.path.join(SAMPLES, "proc_cmdline_channel0_off.txt")) as handle:
        # Not the bare parameter (no module), not nvidia-peermem's; the quoted RegistryDwords is one word.
        assert cmdline_values(handle.read()) == ["0"]
    assert cmdline_values("nvidia.NVreg_CreateImexChannel0=1 nvidia.NVreg_CreateImexChannel0=0x0\n") == ["1", "0x0"]
    assert cmdline_values("") == [] and cmdline_values(None) == []


def test_scan_cmdline_names_the_file_and_tolerates_its_absence(tmp_path):
    shutil.copy(os.path.join(SAMPLES, "proc_cmdline_channel0_off.txt"), str(tmp_path / "cmdline"))
    assert [s.as_tuple() for s in scan_cmdline(str(tmp_path / "cmdline"))] == [(str(tmp_path / "cmdline"), 1, "0")]
    assert scan_cmdline(str(tmp_path / "missing")) == []


def test_foreign_dropin_lines():
    assert foreign_dropin_lines(DROPIN_CONTENT) == []
    assert foreign_dropin_lines("options  nvidia   NVreg_CreateImexChannel0=1\n\n# x\n") == []
    assert foreign_dropin_lines(sample("modprobe.d/nvidia-hpc-image.conf")) == [
        (2, 'options nvidia NVreg_EnableStreamMemOPs=1 NVreg_RegistryDwords="PeerMappingOverride=1;" '
            'NVreg_CreateImexChannel0=1'),
        (3, "options nvidia-drm modeset=1"),
    ]


# --- device nodes ------------------------------------------------------------------------------

def test_node_state_and_description(tmp_path):
    path = str(tmp_path / "channel0")
    assert NodeState.from_path(path).describe() == "absent\n"
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(234, 0))
    os.chmod(path, 0o666)
    state = NodeState.from_path(path)
    assert (state.kind, state.major, state.minor, state.mode) == ("char", 234, 0, 0o666)
    assert state.describe() == ("type: character device\nmajor: 234\nminor: 0\nowner: root (0)\n"
                                "group: root (0)\nmode: 0666\n")
    assert NodeState.from_path(str(tmp_path)).kind == "directory"


def test_plan_and_apply_create(tmp_path):
    path = str(tmp_path / "channel3")
    plan = plan_device(path, 234, 3, 0, 0, 0o600)
    assert plan.create and plan.changed
    apply_device_plan(plan)
    st = os.lstat(path)
    assert stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 234 and os.minor(st.st_rdev) == 3
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert not plan_device(path, 234, 3, 0, 0, 0o600).changed


@pytest.mark.parametrize("make", ["file", "symlink", "wrong_major", "wrong_minor", "block"])
def test_plan_recreates_wrong_nodes(tmp_path, make):
    path = str(tmp_path / "channel0")
    if make == "file":
        open(path, "w").close()
    elif make == "symlink":
        os.symlink("/dev/null", path)
    elif make == "wrong_major":
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(195, 0))
    elif make == "wrong_minor":
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(234, 7))
    else:
        os.mknod(path, stat.S_IFBLK | 0o666, os.makedev(234, 0))
    plan = plan_device(path, 234, 0, 0, 0, 0o666)
    assert plan.recreate
    apply_device_plan(plan)
    state = NodeState.from_path(path)
    assert (state.kind, state.major, state.minor, state.mode) == ("char", 234, 0, 0o666)


def test_plan_fixes_owner_and_mode_in_place(tmp_path):
    path = str(tmp_path / "channel1")
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(234, 1))
    os.chmod(path, 0o666)
    inode = os.lstat(path).st_ino
    plan = plan_device(path, 234, 1, 1234, 1235, 0o660)
    assert plan.set_owner and plan.set_mode and not plan.recreate
    apply_device_plan(plan)
    st = os.lstat(path)
    assert (st.st_ino, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (inode, 1234, 1235, 0o660)


def test_plan_refuses_directory(tmp_path):
    (tmp_path / "channel0").mkdir()
    with pytest.raises(ChannelError, match="channel0 is a directory"):
        plan_device(str(tmp_path / "channel0"), 234, 0, 0, 0, 0o666)
    with pytest.raises(ChannelError, match="channel0 is a directory"):
        plan_device_absent(str(tmp_path / "channel0"))


def test_plan_absent(tmp_path):
    path = str(tmp_path / "channel0")
    assert not plan_device_absent(path).changed
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(234, 0))
    plan = plan_device_absent(path)
    assert plan.remove
    apply_device_plan(plan)
    assert not os.path.lexists(path)
