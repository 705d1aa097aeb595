# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import functools
import os
import shutil
import stat
import types

import pytest
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.rackscale.imex.plugins.module_utils._channel import DROPIN_CONTENT, predict_channels
from ansible_collections.rackscale.imex.plugins.modules import imex_channel

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "files")


@pytest.fixture
def run(run_module):
    return functools.partial(run_module, imex_channel)


@pytest.fixture
def host(tmp_path):
    """A fake host: /proc files from samples, an empty modprobe.d, no device directory yet."""
    proc = tmp_path / "proc"
    proc.mkdir()
    shutil.copy(os.path.join(SAMPLES, "proc_devices_gb200.txt"), str(proc / "devices"))
    shutil.copy(os.path.join(SAMPLES, "nvidia_params.txt"), str(proc / "params"))
    (tmp_path / "modprobe.d").mkdir()
    return tmp_path


def args_for(host, **extra):
    args = dict(
        proc_devices=str(host / "proc" / "devices"),
        params_path=str(host / "proc" / "params"),
        device_dir=str(host / "dev" / "nvidia-caps-imex-channels"),
        modprobe_dirs=[str(host / "modprobe.d")],
        proc_cmdline=str(host / "proc" / "cmdline"),
        modprobe_path=str(host / "modprobe.d" / "nvidia-imex.conf"),
    )
    args.update(extra)
    return args


def node(host, channel=0):
    path = str(host / "dev" / "nvidia-caps-imex-channels" / ("channel%d" % channel))
    if not os.path.lexists(path):
        return None
    st = os.lstat(path)
    if not stat.S_ISCHR(st.st_mode):
        return ("not-char",)
    return (os.major(st.st_rdev), os.minor(st.st_rdev), st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))


def dropin(host):
    path = host / "modprobe.d" / "nvidia-imex.conf"
    return path.read_text() if path.exists() else None


def snapshot(root):
    """Every path under root with its type, numbers, attributes and content."""
    found = {}
    for base, dirs, files in os.walk(str(root)):
        for name in dirs + files:
            path = os.path.join(base, name)
            st = os.lstat(path)
            content = None
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as handle:
                    content = handle.read()
            found[path] = (st.st_mode, st.st_rdev, st.st_uid, st.st_gid, st.st_ino, content)
    return found


CHAR0 = "type: character device\nmajor: 234\nminor: 0\nowner: root (0)\ngroup: root (0)\nmode: 0666\n"


# --- channel 0, persistent (the defaults) ------------------------------------------------------

def test_channel0_created_now_and_for_boot(run, host):
    result = run(args_for(host))
    assert result["_exit_code"] == 0
    assert result["changed"] is True
    assert result["device"] == str(host / "dev" / "nvidia-caps-imex-channels" / "channel0")
    assert (result["major"], result["minor"]) == (234, 0)
    assert result["initramfs_rebuild_needed"] is True
    assert result["reboot_needed"] is False  # the channel exists now; the drop-in covers the next boot
    assert node(host) == (234, 0, 0, 0, 0o666)
    assert stat.S_IMODE(os.stat(str(host / "dev" / "nvidia-caps-imex-channels")).st_mode) == 0o755
    assert dropin(host) == DROPIN_CONTENT
    assert "options nvidia NVreg_CreateImexChannel0=1\n" in DROPIN_CONTENT
    dropin_diff, device_diff = result["diff"]
    assert dropin_diff["before"] == "" and dropin_diff["after"] == DROPIN_CONTENT
    assert dropin_diff["before_header"].endswith("nvidia-imex.conf (absent)")
    assert device_diff == {"before_header": result["device"] + " (device node)",
                           "after_header": result["device"] + " (device node)",
                           "before": "absent\n", "after": CHAR0}


@pytest.mark.parametrize("installed,expected", [
    ({"update-initramfs", "dracut"}, ["/usr/sbin/update-initramfs", "-u", "-k", "all"]),
    ({"dracut"}, ["/usr/sbin/dracut", "--force", "--regenerate-all"]),
])
def test_initramfs_rebuild_command_is_found_on_the_node(run, host, monkeypatch, installed, expected):
    monkeypatch.setattr(AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: "/usr/sbin/" + name if name in installed else None)
    result = run(args_for(host))
    assert result["initramfs_rebuild_needed"] is True
    assert result["initramfs_rebuild_command"] == expected
    assert run(args_for(host))["initramfs_rebuild_command"] is None   # nothing to rebuild any more


def test_missing_initramfs_tool_is_a_warning_not_a_failure(run, host, monkeypatch):
    monkeypatch.setattr(AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: None)
    result = run(args_for(host))
    assert result["_exit_code"] == 0 and result["changed"] is True
    assert result["initramfs_rebuild_command"] is None
    assert any("neither update-initramfs nor dracut" in str(warning) for warning in result["warnings"])


def test_second_run_is_unchanged(run, host):
    run(args_for(host))
    before = snapshot(host)
    result = run(args_for(host))
    assert result["changed"] is False
    assert result["initramfs_rebuild_needed"] is False
    assert result["reboot_needed"] is False
    assert result["diff"][1]["before"] == result["diff"][1]["after"] == CHAR0
    assert snapshot(host) == before


def test_check_mode_predicts_and_changes_nothing(run, host):
    before = snapshot(host)
    predicted = run(args_for(host), check=True)
    assert snapshot(host) == before
    real = run(args_for(host))
    for key in ("changed", "major", "minor", "device", "initramfs_rebuild_needed", "reboot_needed", "diff"):
        assert predicted[key] == real[key], key
    assert run(args_for(host), check=True)["changed"] is False


def test_no_diff_without_diff_mode(run, host):
    assert "diff" not in run(args_for(host), diff=False)


def test_image_build_without_driver(run, host):
    result = run(args_for(host, immediate=False, proc_devices=str(host / "missing"),
                          params_path=str(host / "missing")))
    assert result["changed"] is True
    assert result["major"] is None
    assert result["initramfs_rebuild_needed"] is True
    assert result["reboot_needed"] is True  # only the next boot creates channel0
    assert dropin(host) == DROPIN_CONTENT
    assert node(host) is None
    assert len(result["diff"]) == 1
    again = run(args_for(host, immediate=False, proc_devices=str(host / "missing")))
    assert again["changed"] is False and again["reboot_needed"] is False


def test_existing_driver_channel0_is_accepted_as_is(run, host):
    devdir = host / "dev" / "nvidia-caps-imex-channels"
    devdir.mkdir(parents=True)
    os.mknod(str(devdir / "channel0"), stat.S_IFCHR | 0o600, os.makedev(234, 0))
    os.chmod(str(devdir / "channel0"), 0o666)
    result = run(args_for(host, persistent=False))
    assert result["changed"] is False
    assert dropin(host) is None
    assert len(result["diff"]) == 1


def test_wrong_node_is_replaced(run, host):
    devdir = host / "dev" / "nvidia-caps-imex-channels"
    devdir.mkdir(parents=True)
    os.mknod(str(devdir / "channel0"), stat.S_IFCHR | 0o666, os.makedev(195, 0))
    result = run(args_for(host, persistent=False))
    assert result["changed"] is True
    assert "major: 195" in result["diff"][0]["before"]
    assert node(host) == (234, 0, 0, 0, 0o666)


def test_regular_file_in_place_of_node_is_replaced(run, host):
    devdir = host / "dev" / "nvidia-caps-imex-channels"
    devdir.mkdir(parents=True)
    (devdir / "channel0").write_text("")
    result = run(args_for(host, persistent=False))
    assert result["diff"][0]["before"] == "type: file (not a character device)\n"
    assert node(host) == (234, 0, 0, 0, 0o666)


def test_wrong_mode_and_owner_fixed_check_mode_first(run, host):
    run(args_for(host))
    path = str(host / "dev" / "nvidia-caps-imex-channels" / "channel0")
    os.chown(path, 1234, 1234)
    os.chmod(path, 0o600)
    predicted = run(args_for(host), check=True)
    assert predicted["changed"] is True and predicted["initramfs_rebuild_needed"] is False
    assert node(host) == (234, 0, 1234, 1234, 0o600)
    result = run(args_for(host))
    assert result["diff"] == predicted["diff"]
    assert "mode: 0600" in result["diff"][1]["before"] and "mode: 0666" in result["diff"][1]["after"]
    assert node(host) == (234, 0, 0, 0, 0o666)


def test_other_file_with_the_same_value_is_not_a_conflict(run, host):
    shutil.copy(os.path.join(SAMPLES, "modprobe.d", "nvidia-hpc-image.conf"), str(host / "modprobe.d"))
    result = run(args_for(host))
    assert result["_exit_code"] == 0 and dropin(host) == DROPIN_CONTENT


def test_persistent_false_leaves_existing_dropin_alone(run, host):
    (host / "modprobe.d" / "nvidia-imex.conf").write_text("options nvidia NVreg_CreateImexChannel0=0\n")
    result = run(args_for(host, persistent=False))
    assert result["initramfs_rebuild_needed"] is False
    assert dropin(host) == "options nvidia NVreg_CreateImexChannel0=0\n"


# --- other channels ----------------------------------------------------------------------------

def test_tenant_channel_defaults_to_0600_and_no_dropin(run, host):
    result = run(args_for(host, channel=5, group="1234"))
    assert result["changed"] is True
    assert (result["major"], result["minor"]) == (234, 5)
    assert node(host, 5) == (234, 5, 0, 1234, 0o600)
    assert dropin(host) is None
    assert result["initramfs_rebuild_needed"] is False and result["reboot_needed"] is False
    assert len(result["diff"]) == 1
    assert run(args_for(host, channel=5, group="1234"))["changed"] is False


def test_persistent_tenant_channel_gets_a_boot_entry_and_loses_it_when_absent(run, host):
    boot = host / "boot"
    args = args_for(host, channel=5, group="1234", mode="0660", persistent=True, boot_dir=str(boot))
    predicted = run(args, check=True)
    assert predicted["changed"] is True and not boot.exists()
    result = run(args)
    assert result["changed"] is True
    assert node(host, 5) == (234, 5, 0, 1234, 0o660)
    assert (boot / "channel5").read_text() == "5 root 1234 0660\n"
    assert stat.S_IMODE(os.stat(str(boot / "channel5")).st_mode) == 0o644
    assert dropin(host) is None  # the modprobe option is channel0's alone
    assert result["initramfs_rebuild_needed"] is False and result["reboot_needed"] is False
    assert run(args)["changed"] is False
    gone = run(dict(args, state="absent"))
    assert gone["changed"] is True and node(host, 5) is None and not (boot / "channel5").exists()


def test_channel_limit_comes_from_params(run, host):
    shutil.copy(os.path.join(SAMPLES, "nvidia_params_count16.txt"), str(host / "proc" / "params"))
    assert run(args_for(host, channel=15))["changed"] is True
    result = run(args_for(host, channel=16))
    assert result["failed"] is True
    assert result["msg"] == ("channel 16 is outside 0..15: %s sets ImexChannelCount=16" % (host / "proc" / "params"))
    assert node(host, 16) is None


def test_channel_limit_defaults_to_2048_without_params(run, host):
    os.unlink(str(host / "proc" / "params"))
    assert run(args_for(host, channel=2047))["changed"] is True
    result = run(args_for(host, channel=2048))
    assert "channel 2048 is outside 0..2047" in result["msg"]


# --- rejections --------------------------------------------------------------------------------

def test_negative_channel_is_refused(run, host):
    result = run(args_for(host, channel=-1))
    assert result["msg"] == "channel -1 is outside 0..1048575 (IMEX channel numbers are 20-bit minors)"


@pytest.mark.parametrize("sample_name", ["proc_devices_no_imex.txt", "proc_devices_traps.txt", None])
def test_missing_major_explains_why(run, host, sample_name):
    devices = host / "proc" / "devices"
    if sample_name:
        shutil.copy(os.path.join(SAMPLES, sample_name), str(devices))
    else:
        os.unlink(str(devices))
    before = snapshot(host)
    result = run(args_for(host))
    assert result["failed"] is True
    assert result["msg"].startswith("%s has no 'nvidia-caps-imex-channels' entry" % devices)
    assert "driver is not loaded" in result["msg"] and "NVreg_ImexChannelCount=0" in result["msg"]
    assert "immediate=false" in result["msg"]
    assert snapshot(host) == before  # nothing written before validation finished


def test_conflicting_modprobe_file_is_named_with_line(run, host):
    shutil.copy(os.path.join(SAMPLES, "modprobe.d", "nvidia-disable-channel0.conf"), str(host / "modprobe.d"))
    before = snapshot(host)
    result = run(args_for(host))
    assert result["failed"] is True
    assert "%s line 2 sets NVreg_CreateImexChannel0=0" % (host / "modprobe.d" / "nvidia-disable-channel0.conf") in result["msg"]
    assert "wanted NVreg_CreateImexChannel0=1" in result["msg"]
    assert snapshot(host) == before


def test_a_conflict_in_a_vendor_directory_counts_unless_etc_masks_it(run, host):
    vendor = host / "usr_lib_modprobe.d"
    vendor.mkdir()
    shutil.copy(os.path.join(SAMPLES, "modprobe.d", "nvidia-disable-channel0.conf"), str(vendor))
    args = args_for(host, modprobe_dirs=[str(host / "modprobe.d"), str(vendor)])
    before = snapshot(host)
    result = run(args)
    assert result["failed"] is True and snapshot(host) == before
    assert result["msg"].startswith("modprobe.d conflicts with the wanted NVreg_CreateImexChannel0=1: %s line 2 sets "
                                    "NVreg_CreateImexChannel0=0. modprobe applies its files in name order across its "
                                    "directories" % (vendor / "nvidia-disable-channel0.conf"))
    # The same name in the first directory hides it, as modprobe.d(5) says (here: a mask).
    (host / "modprobe.d" / "nvidia-disable-channel0.conf").symlink_to("/dev/null")
    assert run(args)["changed"] is True and dropin(host) == DROPIN_CONTENT


def test_a_different_value_on_the_kernel_command_line_is_refused(run, host):
    shutil.copy(os.path.join(SAMPLES, "proc_cmdline_channel0_off.txt"), str(host / "proc" / "cmdline"))
    before = snapshot(host)
    result = run(args_for(host))
    assert result["failed"] is True and snapshot(host) == before
    assert result["msg"] == (
        "the kernel command line conflicts with the wanted NVreg_CreateImexChannel0=1: %s sets "
        "nvidia.NVreg_CreateImexChannel0=0. The kernel command line is applied after every modprobe.d file and "
        "wins; remove the parameter from the boot loader's configuration and reboot" % (host / "proc" / "cmdline"))
    # Removing channel0 wants 0: the same command line agrees.
    assert run(args_for(host, state="absent"))["_exit_code"] == 0
    shutil.copy(os.path.join(SAMPLES, "proc_cmdline_gb200.txt"), str(host / "proc" / "cmdline"))
    assert run(args_for(host))["changed"] is True


def test_dropin_with_other_options_is_never_overwritten(run, host):
    shared = host / "modprobe.d" / "nvidia.conf"
    shutil.copy(os.path.join(SAMPLES, "modprobe.d", "nvidia-hpc-image.conf"), str(shared))
    result = run(args_for(host, modprobe_path=str(shared)))
    assert result["failed"] is True
    assert result["msg"].startswith("%s holds other settings (line 2: " % shared)
    with open(os.path.join(SAMPLES, "modprobe.d", "nvidia-hpc-image.conf")) as handle:
        assert shared.read_text() == handle.read()


@pytest.mark.parametrize("option, value, message", [
    ("owner", "no-such-user-imex", "owner 'no-such-user-imex' does not exist"),
    ("group", "no-such-group-imex", "group 'no-such-group-imex' does not exist"),
    ("mode", "u=rw", "mode 'u=rw' is not an octal file mode"),
    ("owner", "", "owner, group and mode of"),
])
def test_bad_attributes_are_named(run, host, option, value, message):
    result = run(args_for(host, **{option: value}))
    assert result["failed"] is True and message in result["msg"]
    assert node(host) is None and dropin(host) is None


def test_device_dir_that_is_a_file(run, host):
    (host / "dev").mkdir()
    (host / "dev" / "nvidia-caps-imex-channels").write_text("")
    result = run(args_for(host))
    assert result["msg"] == "%s exists but is not a directory" % (host / "dev" / "nvidia-caps-imex-channels")


# --- state absent ------------------------------------------------------------------------------

def test_absent_removes_node_and_dropin(run, host):
    run(args_for(host))
    predicted = run(args_for(host, state="absent"), check=True)
    assert node(host) is not None and dropin(host) is not None
    result = run(args_for(host, state="absent"))
    assert result["changed"] is True
    assert result["initramfs_rebuild_needed"] is True
    assert result["reboot_needed"] is False
    assert result["major"] is None
    assert node(host) is None and dropin(host) is None
    assert result["diff"] == predicted["diff"]
    assert result["diff"][1]["after"] == "absent\n"
    assert run(args_for(host, state="absent"))["changed"] is False


def test_absent_without_immediate_needs_a_reboot(run, host):
    run(args_for(host))
    result = run(args_for(host, state="absent", immediate=False))
    assert result["initramfs_rebuild_needed"] is True
    assert result["reboot_needed"] is True  # channel0 still exists until the next boot
    assert node(host) is not None and dropin(host) is None


def test_absent_refuses_when_another_file_still_creates_channel0(run, host):
    shutil.copy(os.path.join(SAMPLES, "modprobe.d", "nvidia-hpc-image.conf"), str(host / "modprobe.d"))
    result = run(args_for(host, state="absent"))
    assert result["failed"] is True
    assert "nvidia-hpc-image.conf line 2 sets NVreg_CreateImexChannel0=1" in result["msg"]


def test_absent_tenant_channel_needs_no_proc_files(run, host):
    run(args_for(host, channel=7))
    result = run(args_for(host, channel=7, state="absent", proc_devices=str(host / "missing")))
    assert result["changed"] is True and node(host, 7) is None


# --- the read that predicts the module (imex_tray_info's channels) ------------------------------

def predicted(host, **entry):
    """What imex_tray_info's read says the module would do: ensure_channel run in check mode."""
    args = args_for(host)
    paths = dict(modprobe_path=args["modprobe_path"], modprobe_dirs=args["modprobe_dirs"],
                 proc_cmdline=args["proc_cmdline"],
                 proc_devices=args["proc_devices"], params_path=args["params_path"], device_dir=args["device_dir"],
                 boot_dir=str(host / "boot"))
    module = types.SimpleNamespace(get_bin_path=lambda *args, **kwargs: None)
    return predict_channels(module, [entry], **paths)[str(entry["channel"])]


@pytest.mark.parametrize("entry", [
    {"channel": 0},
    {"channel": 0, "state": "absent"},
    {"channel": 5, "group": "1234", "mode": "0660", "persistent": True},
    {"channel": 5, "state": "absent", "persistent": True},
])
def test_the_read_predicts_exactly_what_the_module_then_does(run, host, entry):
    args = args_for(host, boot_dir=str(host / "boot"), **entry)
    for attempt in ("fresh tray", "same tray after the module ran"):
        before = snapshot(host)
        expected = predicted(host, **entry)
        assert snapshot(host) == before, attempt  # reading changed nothing
        assert expected == {"changed": run(args)["changed"]}, attempt


def test_the_read_names_what_the_module_would_fail_on(run, host):
    (host / "dev" / "nvidia-caps-imex-channels" / "channel3").mkdir(parents=True)
    expected = predicted(host, channel=3)
    result = run(args_for(host, channel=3))
    assert result["failed"] is True and expected == {"error": result["msg"]}
