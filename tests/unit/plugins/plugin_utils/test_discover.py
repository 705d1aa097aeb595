"""An inventory skeleton from the trays' NVLink fabric identity (plugins/plugin_utils/_discover.py)."""
from __future__ import annotations

import yaml

from ansible_collections.rackscale.imex.plugins.plugin_utils._discover import skeleton_of, group_name

RACK1 = "8a0b7c1e-6b0b-5f37-9d0c-1d4f6c2e9a11"
RACK2 = "8a0b7c1e-0000-5f37-9d0c-1d4f6c2e9a22"   # same 8-digit prefix as RACK1
OTHER = "3f2c9d1a-1111-4a2b-8c3d-123456789abc"


def read(cluster, clique=32766, ok=True, problems=()):
    return {"fabric_ok": ok, "cluster_uuid": cluster if ok else None, "clique_id": clique if ok else None,
            "problems": list(problems), "changed": False}


def tray(name, result, **tray_vars):
    return {"name": name, "read": result, "vars": tray_vars}


def test_trays_are_grouped_by_partition_in_natural_order_with_their_size_and_address():
    found = skeleton_of([tray("r-tray10", read(OTHER), ansible_host="10.0.0.10"),
                         tray("r-tray2", read(OTHER), ansible_host="10.0.0.2", ansible_user="root"),
                         tray("s-tray1", read(OTHER, clique=7))], 18)
    assert found["problems"] == []
    assert found["domains"] == {"nvl_3f2c9d1a_32766": ["r-tray2", "r-tray10"], "nvl_3f2c9d1a_7": ["s-tray1"]}
    groups = found["inventory"]["all"]["children"]["imex_domains"]["children"]
    assert groups["nvl_3f2c9d1a_32766"] == {
        "hosts": {"r-tray2": {"ansible_host": "10.0.0.2", "ansible_user": "root"},
                  "r-tray10": {"ansible_host": "10.0.0.10"}},
        "vars": {"imex_domain_size": 2, "imex_domain": "nvl_3f2c9d1a_32766"}}
    assert groups["nvl_3f2c9d1a_7"]["hosts"] == {"s-tray1": None}
    assert found["summary"] == ["nvl_3f2c9d1a_32766: 2 trays (r-tray2, r-tray10)", "nvl_3f2c9d1a_7: 1 tray (s-tray1)"]
    # The skeleton is plain YAML an inventory can be.
    assert yaml.safe_load(yaml.safe_dump(found["inventory"])) == found["inventory"]


def test_names_are_stable_and_grow_only_where_prefixes_collide():
    found = skeleton_of([tray("a", read(RACK1)), tray("b", read(RACK2))], 18)
    assert sorted(found["domains"]) == ["nvl_8a0b7c1e00005f37_32766", "nvl_8a0b7c1e6b0b5f37_32766"]
    assert group_name(OTHER, 32766) == "nvl_3f2c9d1a_32766"


def test_unregistered_or_unread_trays_and_oversized_partitions_are_named():
    found = skeleton_of([
        tray("t1", read(OTHER)),
        tray("t2", read(None, ok=False, problems=["GPU 0: Fabric State is In Progress, not Completed"])),
        tray("t3", {"unreachable": True, "msg": "Failed to connect to the host via ssh"}),
        tray("t4", read(OTHER)), tray("t5", read(OTHER)),
    ], 2)
    assert found["problems"] == [
        "tray t2: NVLink fabric not registered (Completed/Success): GPU 0: Fabric State is In Progress, not Completed",
        "tray t3: could not be read: Failed to connect to the host via ssh",
        "NVLink partition nvl_3f2c9d1a_32766 (ClusterUUID %s, CliqueId 32766) has 3 trays, more than "
        "imex_max_nodes=2: t1, t4, t5" % OTHER,
    ]
