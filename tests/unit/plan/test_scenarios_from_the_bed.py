# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Decisions that e2e tests used to prove on the simulated rack, proven here on the recorded reads (see
tests/README.md, "e2e tests replaced by scenario tests"). A state the recordings do not hold is derived
in the test from a recorded read, one field changed, and the test says which."""
from __future__ import annotations

import os
import time

import pytest
import yaml

from ansible_collections.rackscale.imex.plugins.module_utils import _slurm
from ansible_collections.rackscale.imex.tests.unit.plan import scenario
from ansible_collections.rackscale.imex.tests.unit.plan.scenario import Bed, run, tray_options
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import TLS_PEM, model_of, role_options
from ansible_collections.rackscale.imex.tests.unit.plugins.tls_material import cert_pem, key_pem, make_ca, make_tray_cert

T1, T2, T3 = "rack1-tray01", "rack1-tray02", "rack1-tray03"
ALL = [T1, T2, T3]
NEW_PORT = {"imex_server_port": 50010}
TASKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "roles", "imex", "tasks")
SAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "samples")


def tray_info_tasks():
    """(file, task) of every imex_tray_info task of the imex role, blocks opened."""
    found = []

    def walk(name, tasks):
        for task in tasks or []:
            walk(name, task.get("block"))
            walk(name, task.get("rescue"))
            walk(name, task.get("always"))
            if "rackscale.imex.imex_tray_info" in task:
                found.append((name, task))
    for name in sorted(os.listdir(TASKS)):
        with open(os.path.join(TASKS, name), encoding="utf-8") as handle:
            walk(name, yaml.safe_load(handle))
    return found


def test_a_slurm_job_on_a_tray_named_otherwise_in_slurm_keeps_its_domain_from_a_restart():
    """Derived from reads/busy_slurm.json: rack1-tray02's Slurm node is named gb200-n02 (the recorded read
    asked scontrol for the host name). Every read of the trays asks Slurm for imex_slurm_node_name, so the
    job is seen under that name; the refusal names the tray, its Slurm node and its state; once the job
    has ended the same run restarts the domain."""
    bed = Bed("busy_slurm")
    bed.trays[T2].template["slurm"]["node"] = "gb200-n02"
    named = {T2: {"imex_slurm_node_name": "gb200-n02"}}
    before = bed.snapshot()
    refused = run(bed, every=NEW_PORT, by_tray=named)
    said = "\n".join(refused.problems)
    assert refused.stopped_at == "restart" and refused.restarted == [] and refused.written == {}, said
    assert "work runs on it (rack1-tray02: Slurm node gb200-n02 state ALLOCATED)" in said
    assert "Nothing was written" in said and bed.snapshot() == before
    # The wiring that makes the read ask for that name: each read of the Slurm state of a tray (the plan's,
    # and the one just before the restart) gives imex_tray_info the option.
    reads = [(name, task["rackscale.imex.imex_tray_info"]) for name, task in tray_info_tasks()
             if "slurm_state" in task["rackscale.imex.imex_tray_info"]]
    assert len(reads) >= 2, reads
    for name, arguments in reads:
        assert "imex_slurm_node_name" in str(arguments.get("slurm_node_name")), (name, arguments)

    bed.trays[T2].template["slurm"]["state"] = "IDLE"
    bed.trays[T2].template["slurm_state"] = "IDLE"
    applied = run(bed, every=NEW_PORT, by_tray=named)
    assert applied.restarted == ALL and applied.verdicts == {bed.domain: "healthy"}, applied.problems


def test_check_mode_on_fresh_trays_predicts_the_first_converge_and_changes_nothing():
    """The first converge: every node list written, every daemon started (none stopped); --check predicts
    exactly that and changes nothing."""
    bed = Bed("fresh")
    before = bed.snapshot()
    checked = run(bed, check=True)
    assert bed.snapshot() == before and checked.written == {} and checked.started == [] and not checked.refused
    predicted_starts = [tray for tray in ALL if checked.plans[-1][1]["trays"][tray].get("start")]
    real = run(bed)
    assert checked.decisions() == real.decisions(), (checked.decisions(), real.decisions())
    assert real.written == {tray: ["node list"] for tray in ALL} and real.restarted == []
    assert predicted_starts == real.started == ALL
    assert real.verdicts == {bed.domain: "healthy"}


def test_a_certificate_from_another_ca_is_refused_before_any_tray_and_the_right_one_changes_nothing(tmp_path):
    """The rogue certificate given as a controller file (its path named in the refusal), the CA as PEM
    text: refused before the locks, naming tray, file and issuer; with the right certificate the next run
    passes with nothing to write or restart."""
    now = time.time()
    rogue_cert, rogue_key = make_tray_cert(make_ca("rogue-ca", now=now), ips=["198.18.1.13"], now=now)
    cert, key = tmp_path / "rogue.crt", tmp_path / "rogue.key"
    cert.write_text(cert_pem(rogue_cert))
    key.write_text(key_pem(rogue_key))
    bed = Bed("tls")
    before = bed.snapshot()
    tls = dict(TLS_PEM, imex_tls=True)
    refused = run(bed, every=tls, by_tray={T3: {"imex_tls_cert": str(cert), "imex_tls_key": str(key)}})
    assert refused.stopped_at == "preflight" and bed.locks == {} and bed.snapshot() == before
    assert refused.problems == [
        "tray rack1-tray03: imex_tls_cert (%s): the certificate (issuer CN=rogue-ca) is not signed by the CA given "
        "in tray rack1-tray03: imex_tls_ca (PEM text) (CN=rack-ca); its peers would refuse it" % cert]
    right = run(bed, every=tls)
    assert not right.refused and right.written == {} and right.restarted == [] and right.started == [], right.problems
    assert bed.snapshot() == before


@pytest.mark.parametrize("rack1", [{"imex_mode": "slurm", "imex_channel0": False}, {}],
                         ids=["other-rack-slurm-by-group-vars", "other-rack-default-mode"])
def test_a_daemon_option_set_on_one_tray_of_a_rack_is_refused_before_any_tray(rack1):
    """Two racks of four; rack2-tray02 (not its first tray) alone set to slurm. Refused before any tray is
    contacted, naming the domain, the option, each value and the trays holding it; rack1, whose trays agree
    (whatever its group vars set), is not named."""
    racks = {"rack%d" % number: ["rack%d-tray%02d" % (number, index) for index in range(1, 5)] for number in (1, 2)}
    model = model_of(racks)
    options = {tray: role_options(**rack1) for tray in racks["rack1"]}
    options.update((tray, role_options()) for tray in racks["rack2"])
    options["rack2-tray02"] = role_options(imex_mode="slurm")
    with pytest.raises(scenario.run_plan.PlanError) as refused:
        scenario.run_plan.preflight.preflight(model, options, racks["rack1"] + racks["rack2"], "run-1")
    problems = refused.value.problems
    # One sentence holds the domain, the option, each value and the trays holding it.
    named = [problem for problem in problems if "imex_mode" in problem]
    assert len(named) == 1 and all(part in named[0] for part in (
        "domain rack2", "differs between its trays", "slurm", "on rack2-tray02", "static",
        "on rack2-tray01, rack2-tray03, rack2-tray04")), problems
    assert not [problem for problem in problems if "rack1" in problem], problems


def test_a_domain_on_two_releases_is_refused_by_the_read_with_or_without_the_fabric_gate():
    """Derived from reads/healthy.json: rack1-tray03's driver and nvidia-imex package on 580.105.08. validate.yml
    (a read-only proof) stops at the read, naming the odd tray and both releases, before any status is read;
    imex_skip_fabric_check skips the fabric gate, never the versions."""
    bed = Bed()
    for field in ("driver_version", "imex_version"):
        bed.trays[T3].template[field] = "580.105.08"
    options = tray_options(bed)
    for skip_fabric in (False, True):
        plan = scenario.run_plan.preflight.preflight(bed.model, options, ALL, "run-1")
        reads = {tray: bed.trays[tray].read(plan["trays"][tray]) for tray in ALL}
        with pytest.raises(scenario.run_plan.PlanError) as refused:
            scenario.run_plan.read.after_read(plan, bed.model, options, reads, skip_fabric=skip_fabric, converge=False)
        said = "\n".join(refused.value.problems)
        assert ("domain rack1 runs different driver releases: 580.105.08 on rack1-tray03; 580.95.09 on rack1-tray01, "
                "rack1-tray02; the daemons would answer !V!") in said, said


def with_the_slurm_beds_config(bed):
    """The trays as the Slurm bed's slurmd would show them: each read's slurm_config made, as imex_tray_info makes
    it, from that bed's recorded `scontrol show config` (switch/nvidia_imex, Prolog=/etc/slurm/prolog.d/*,
    Epilog=/etc/slurm/epilog.d/*, PrologFlags=Alloc) and its slurmd release."""
    with open(os.path.join(SAMPLES, "slurm", "show_config_per_job_bed.txt"), encoding="utf-8") as handle:
        config = _slurm.channel_plugin_config(_slurm.parse_show_config(handle.read()))
    for tray in bed.trays.values():
        tray.template["slurm_config"] = {"installed": True, "config": config, "error": None}
        tray.template["slurmd_version"] = config["version"]
    return bed


def test_channel0_under_slurms_channel_plugin_is_refused_in_the_static_mode_before_any_write():
    """Derived from reads/healthy.json, each tray's Slurm configuration the Slurm bed's (above)."""
    bed = with_the_slurm_beds_config(Bed())
    before = bed.snapshot()
    refused = run(bed, every=NEW_PORT)
    said = "\n".join(refused.problems)
    assert refused.stopped_at == "read" and refused.written == {} and bed.snapshot() == before, said
    assert ("domain rack1, trays rack1-tray01, rack1-tray02, rack1-tray03: imex_channel0=true (imex_mode=static), "
            "but Slurm's switch/nvidia_imex (SwitchType in slurm.conf) owns the IMEX channels: slurmd empties "
            "/dev/nvidia-caps-imex-channels when it starts") in said, said
    assert "set imex_channel0=false" in said


def test_a_per_job_prolog_directory_slurm_conf_does_not_run_is_refused_naming_the_line_to_add():
    """Derived from reads/mode_slurm_per_job.json, each tray's Slurm configuration the Slurm bed's (above): the
    prolog directory asked for is not one slurm.conf runs, the epilog directory is, so only the prolog is named."""
    bed = with_the_slurm_beds_config(Bed("mode_slurm_per_job"))
    before = bed.snapshot()
    refused = run(bed, every={"imex_mode": "slurm_per_job", "imex_channel0": False,
                              "imex_slurm_prolog_dir": "/etc/slurm/imex-prolog.d"})
    said = "\n".join(refused.problems)
    assert refused.stopped_at == "read" and refused.written == {} and bed.snapshot() == before, said
    assert ("slurm.conf runs Prolog=/etc/slurm/prolog.d/*, not /etc/slurm/imex-prolog.d/90-rackscale-imex, where the "
            "role installs the per-job prolog (imex_slurm_prolog_dir=/etc/slurm/imex-prolog.d): add the line "
            "Prolog=/etc/slurm/imex-prolog.d/* to slurm.conf") in said, said
    assert "Epilog=" not in said
