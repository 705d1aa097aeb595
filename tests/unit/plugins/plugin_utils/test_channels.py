# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which channels a mode wants, and which need the channel module after a read of the tray."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import modes
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.channels import channels_to_ensure

TENANT = {"channel": 5, "group": "tenant-a", "mode": "0660"}


def test_static_wants_channel0_and_the_isolation_channels_made_now_and_at_boot():
    assert modes.of("static").channel_entries(True, [TENANT]) == [
        {"channel": 0, "state": "present", "persistent": True, "immediate": True},
        dict(TENANT, persistent=True, immediate=True)]
    assert modes.of("dra_host_managed").channel_entries(False, [])[0]["state"] == "absent"


def test_slurm_and_dra_only_drop_the_channel0_option_and_touch_no_node():
    for mode in ("slurm", "dra"):
        assert modes.of(mode).channel_entries(True, [TENANT]) == [
            {"channel": 0, "state": "absent", "persistent": True, "immediate": False}]


def test_only_channels_the_read_shows_changing_or_failing_are_ensured():
    entries = modes.of("static").channel_entries(True, [TENANT, {"channel": 6}, {"channel": 7}])
    observed = {"0": {"changed": False}, "5": {"changed": True}, "6": {"error": "owner 'x' does not exist"}}
    # Channel 7 is not in the read: ensured, to be safe.
    assert [entry["channel"] for entry in channels_to_ensure(entries, observed)] == [5, 6, 7]
    assert channels_to_ensure(entries, {}) == entries


def test_a_channel_given_as_text_or_an_awx_float_reaches_the_tray_as_its_number():
    assert [entry["channel"] for entry in modes.of("static").channel_entries(True, [{"channel": "5"}, {"channel": 6.0}])] == [0, 5, 6]
