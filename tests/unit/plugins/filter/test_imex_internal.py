# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The glue filters left for the imex_channels role hand explicit data to the controller-side code.
The imex role's decisions are the plan's (tests/unit/plugins/plugin_utils/test_plan.py); discovery
is the plan action's discover stage (tests/unit/plugins/action/test_imex_plan.py)."""
from __future__ import annotations

import pytest

from ansible_collections.rackscale.imex.plugins.filter.imex_internal import (
    FilterModule,
    imex_internal_channel_entries,
    imex_internal_channels_to_ensure,
)
from ansible_collections.rackscale.imex.plugins.plugin_utils._channels import channel_entries

TENANT = {"channel": 5, "group": "tenant-a", "mode": "0660"}


def test_only_the_filters_of_the_channels_role_are_left():
    assert FilterModule().filters() == {
        "imex_internal_channel_entries": imex_internal_channel_entries,
        "imex_internal_channels_to_ensure": imex_internal_channels_to_ensure,
    }


@pytest.mark.parametrize(("given", "channel0"), [
    (True, True), ("true", True), ("yes", True), ("1", True),
    (False, False), ("false", False), ("no", False), ("0", False), ("", False), (None, False),
])
def test_channel0_given_as_text_is_a_boolean(given, channel0):
    # -e imex_channels_channel0=false arrives as the string "false", which bool() would take for true.
    entries = imex_internal_channel_entries("static", given, None)
    assert entries == [{"channel": 0, "state": "present" if channel0 else "absent", "persistent": True,
                        "immediate": True}]


def test_the_channel_filters_hand_their_data_to_the_channel_code():
    entries = imex_internal_channel_entries("dra_host_managed", True, (TENANT,))
    assert entries == channel_entries("dra_host_managed", True, [TENANT])
    assert imex_internal_channels_to_ensure(entries, {"0": {"changed": False}, "5": {"changed": True}}) == entries[1:]
    assert imex_internal_channels_to_ensure(entries, None) == entries
