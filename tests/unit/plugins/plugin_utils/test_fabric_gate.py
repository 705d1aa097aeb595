from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils._fabric_gate import fabric_problems, version_problems

RACK_A = "dc6e40c4-d722-4357-9ba6-5291dd461278"
RACK_B = "0b5b2b7e-2f3c-4c55-9a51-6f0d9a1d0c11"


def _model(**domains):
    return {"domains": {name: {"nodes": [{"host": h} for h in hosts]} for name, hosts in domains.items()}}


def _ok(uuid, clique):
    return {"fabric_ok": True, "cluster_uuid": uuid, "clique_id": clique, "problems": []}


def test_matching_fabric_has_no_problem():
    model = _model(rack1=["t1", "t2"], rack2=["t3"])
    fabric = {"t1": _ok(RACK_A, 32766), "t2": _ok(RACK_A, 32766), "t3": _ok(RACK_B, 32766)}
    assert fabric_problems(model, fabric) == []


def test_domain_spanning_two_partitions_names_the_trays():
    model = _model(rack1=["t1", "t2", "t3"])
    fabric = {"t1": _ok(RACK_A, 1), "t2": _ok(RACK_A, 1), "t3": _ok(RACK_A, 2)}
    (problem,) = fabric_problems(model, fabric)
    assert "domain rack1 spans several NVLink partitions" in problem
    assert "clique 2 on t3" in problem and "clique 1 on t1, t2" in problem


def test_two_domains_on_one_partition_are_refused():
    model = _model(part_a=["t1"], part_b=["t2"])
    fabric = {"t1": _ok(RACK_A, 7), "t2": _ok(RACK_A, 7)}
    (problem,) = fabric_problems(model, fabric)
    assert "domains part_a and part_b share the NVLink partition" in problem
    assert "t2" in problem and problem.endswith("(imex_shared_partition: true allows it)")


def test_two_domains_on_one_partition_are_said_when_the_operator_allows_it():
    model = _model(part_a=["t1"], part_b=["t2"])
    notes = []
    assert fabric_problems(model, {"t1": _ok(RACK_A, 7), "t2": _ok(RACK_A, 7)}, notes=notes) == []
    assert notes == ["domains part_a and part_b share the NVLink partition cluster %s clique 7 (trays t2), as "
                     "imex_shared_partition allows: a job must stay inside one IMEX domain" % RACK_A]


def test_unfinished_fabric_and_unknown_tray_are_reported():
    model = _model(rack1=["t1", "t2", "t3"])
    fabric = {
        "t1": {"fabric_ok": False, "problems": ["GPU 2: fabric state is In Progress, not Completed"]},
        "t2": {"failed": True, "msg": "nvidia-smi not found"},
        "t3": _ok(RACK_A, 1),
    }
    problems = fabric_problems(model, fabric)
    assert problems == [
        "tray t1 (domain rack1): GPU 2: fabric state is In Progress, not Completed",
        "tray t2 (domain rack1): fabric identity unknown: nvidia-smi not found",
    ]


def test_trays_outside_the_play_are_not_judged():
    model = _model(rack1=["t1", "t2"])
    assert fabric_problems(model, {"t1": _ok(RACK_A, 1)}) == []


def _domain(*addresses):
    return {"domains": {"rack1": {"nodes": [{"host": "t%d" % (position + 1), "address": address}
                                            for position, address in enumerate(addresses)]}}}


def _versions(driver, imex="same"):
    return {"driver_version": driver, "imex_version": driver if imex == "same" else imex}


def test_one_release_everywhere_passes_and_unknown_versions_are_not_judged():
    model = _domain("198.18.1.11", "198.18.1.12", "198.18.1.13")
    assert version_problems(model, {"t1": _versions("580.95.09"), "t2": _versions("580.95.09"),
                                    "t3": _versions(None, None)}) == []


def test_a_package_of_another_release_and_a_domain_with_two_releases_are_named():
    model = _domain("198.18.1.11", "198.18.1.12", "198.18.1.13")
    problems = version_problems(model, {"t1": _versions("580.95.09"), "t2": _versions("580.95.09"),
                                        "t3": _versions("580.105.08", "580.95.09")})
    assert problems == [
        "tray t3 (domain rack1): nvidia-imex 580.95.09 does not match the driver 580.105.08; install the nvidia-imex "
        "package of the driver's release (the daemon refuses to start otherwise)",
        "domain rack1 runs different driver releases: 580.105.08 on t3; 580.95.09 on t1, t2; the daemons would "
        "answer !V! (version mismatch); run one release on every tray of a domain"]


def test_host_names_are_gated_on_the_driver_actually_read():
    named = _domain("tray1.example", "tray2.example")
    assert version_problems(named, {"t1": _versions("570.148.08"), "t2": _versions("570.148.08")}) == [
        "domain rack1 uses host names in its node list (t1, t2), which need driver 570.158.01 or newer; its trays "
        "run 570.148.08; use IP addresses or upgrade the driver"]
    assert version_problems(named, {"t1": _versions("580.95.09"), "t2": _versions("580.95.09")}) == []
