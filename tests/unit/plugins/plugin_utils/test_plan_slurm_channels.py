# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan against Slurm's channel plugin: what `scontrol show config` of a real slurmctld 24.11.5
(tests/unit/samples/slurm/) and the driver's NVreg_ImexChannelCount say, checked after the read of
each tray, before anything is written."""
from __future__ import annotations

import re

import pytest

from ansible_collections.rackscale.imex.plugins.module_utils._channel import driver_channel_count
from ansible_collections.rackscale.imex.plugins.module_utils._slurm import (
    channel_plugin_config,
    parse_show_config,
    release,
)
from ansible_collections.rackscale.imex.plugins.modules import imex_slurm_probe
from ansible_collections.rackscale.imex.plugins.plugin_utils import plan as run_plan
from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import records
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan import (
    model_of,
    options_of,
    preflight,
    reads_of,
    refused,
)
from ansible_collections.rackscale.imex.tests.unit.plugins.plugin_utils.test_plan_per_job import (
    PER_JOB,
    RACK,
    SCRIPT_SHA,
    per_job_read,
)
from ansible_collections.rackscale.imex.tests.unit.plugins.vendor_samples import read_sample

# The bed's slurm.conf: SwitchType=switch/nvidia_imex, imex_channel_count=2048, PrologFlags=Alloc,
# Prolog=/etc/slurm/prolog.d/*, Epilog=/etc/slurm/epilog.d/*.
BED = "show_config_per_job_bed.txt"
# The same slurmctld with imex_channel_count=1024, no PrologFlags, Prolog=/etc/slurm/prolog.sh and
# Prolog=/etc/slurm/prolog.d/* (two lines), Epilog=/etc/slurm/epilog.sh.
TWO_PROLOGS = "show_config_two_prologs_count1024_no_alloc.txt"
# No SwitchType, no prologs.
DEFAULT = "show_config_default.txt"
UNREACHABLE = read_sample("slurm", "show_config_controller_down_stderr.txt").strip()


def slurm_config(name=None, error=None, installed=True):
    """What imex_tray_info returns for a sample of `scontrol show config` (or a failed call)."""
    config = channel_plugin_config(parse_show_config(read_sample("slurm", name))) if name else None
    return {"installed": installed, "config": None if error else config, "error": error}


def params_count(name):
    return {"value": driver_channel_count("/proc/driver/nvidia/params", read_sample("files", name)),
            "source": "/proc/driver/nvidia/params"}


COUNT_2048 = params_count("nvidia_params.txt")
COUNT_16 = params_count("nvidia_params_count16.txt")


def per_job(config=BED, count=None, every=None, by_tray_read=None, converge=True, domains=None,
            check_mode=False):
    count = COUNT_2048 if count is None else count
    model = model_of(domains or RACK)
    options = options_of(model, dict(PER_JOB, **(every or {})))
    plan = preflight(model, options, check_mode=check_mode)
    reads = {}
    # Each tray holds the map site.yml writes, with the Slurm names its read gives.
    names = {tray: (by_tray_read or {}).get(tray, {}).get("node") or tray for tray in plan["trays"]}
    for tray in plan["trays"]:
        domain = plan["domains"][plan["trays"][tray]["domain"]]
        installed = run_plan.slurm_job_map(plan["trays"][tray]["domain"],
                                           [(names[member], address) for member, address
                                            in zip(domain["trays"], domain["addresses"])], names[tray], options[tray])
        extra = {"slurm_config": slurm_config(config), "channel_count": count, "map_text": installed}
        extra.update((by_tray_read or {}).get(tray, {}))
        reads[tray] = per_job_read(plan, tray, **extra)
    return model, options, plan, reads


def after(model, options, plan, reads, converge=True):
    return run_plan.read.after_read(plan, model, options, reads, converge=converge, script_sha256=SCRIPT_SHA, slurm_names={})


def static(config, count=None, every=None):
    count = COUNT_2048 if count is None else count
    model = model_of(RACK)
    options = options_of(model, every)
    plan = preflight(model, options)
    reads = reads_of(plan, **{tray: {"slurm_config": slurm_config(config) if isinstance(config, str) else config,
                                     "channel_count": count} for tray in plan["trays"]})
    return model, options, plan, reads


def test_the_samples_read_as_slurmctld_printed_them():
    bed = slurm_config(BED)["config"]
    assert bed == {"switch_type": "switch/nvidia_imex", "switch_parameters": "imex_channel_count=2048",
                   "imex_channel_count": 2048, "prolog_flags": ["Alloc"], "prolog": ["/etc/slurm/prolog.d/*"],
                   "epilog": ["/etc/slurm/epilog.d/*"], "version": "24.11.5", "prolog_timeout": None,
                   "epilog_timeout": None}
    two = slurm_config(TWO_PROLOGS)["config"]
    assert (two["imex_channel_count"], two["prolog_flags"], two["prolog"], two["epilog"]) == (
        1024, [], ["/etc/slurm/prolog.sh", "/etc/slurm/prolog.d/*"], ["/etc/slurm/epilog.sh"])
    default = slurm_config(DEFAULT)["config"]
    assert (default["switch_type"], default["prolog"], default["imex_channel_count"]) == (None, [], 2048)
    assert (COUNT_2048["value"], COUNT_16["value"]) == (2048, 16)


def test_the_beds_slurm_conf_fits_the_per_job_mode_with_no_warning():
    plan = after(*per_job())
    assert plan["warnings"] == []
    assert plan["trays"]["a1"]["write"] is False


def test_per_job_without_the_channel_plugin_is_refused_naming_the_slurm_conf_line():
    problems = refused(after, *per_job(config=DEFAULT))
    assert problems[0].startswith("slurm.conf, the driver's channel count and the role's options do not fit")
    assert ("domain rackA, trays a1, a2, a3: imex_mode=slurm_per_job, but Slurm's SwitchType is not set: add "
            "SwitchType=switch/nvidia_imex to slurm.conf; Slurm then owns the channels") in " ".join(problems)


def test_the_slurm_mode_without_the_plugin_is_refused_too():
    problems = refused(after, *static(DEFAULT, every={"imex_mode": "slurm", "imex_channel0": False}))
    assert any("imex_mode=slurm, but Slurm's SwitchType is not set: add SwitchType=switch/nvidia_imex" in problem
               for problem in problems), problems


def test_a_plugin_count_other_than_the_drivers_names_both_values_and_both_places():
    problems = refused(after, *per_job(count=COUNT_16))
    found = [problem for problem in problems if "NVreg_ImexChannelCount=16" in problem]
    assert len(found) == 1, problems
    assert found[0].startswith("domain rackA, trays a1, a2, a3: Slurm 24.11.5's switch/nvidia_imex hands out channels "
                               "1 to 2047 (imex_channel_count=2048")
    assert "before Slurm 25.11 the two counts must be one value" in found[0]
    assert "read from /proc/driver/nvidia/params" in found[0]
    assert "SwitchParameters=imex_channel_count=16 in slurm.conf" in found[0]
    assert '"options nvidia NVreg_ImexChannelCount=2048" in /etc/modprobe.d' in found[0]


def test_trays_of_a_domain_with_different_driver_counts_are_refused_in_any_mode():
    model, options, plan, reads = static(DEFAULT, every={"imex_channel0": False})
    reads["a3"]["channel_count"] = COUNT_16
    problems = refused(after, model, options, plan, reads)
    assert ("domain rackA: NVreg_ImexChannelCount differs between its trays (16 on a3; 2048 on a1, a2)"
            in " ".join(problems)), problems


def test_channel0_under_the_plugin_is_refused_in_the_static_mode():
    # The default of the static mode: channel0 made by the driver; slurmd would empty the directory.
    problems = refused(after, *static(BED))
    assert any("imex_channel0=true (imex_mode=static), but Slurm's switch/nvidia_imex (SwitchType in slurm.conf) "
               "owns the IMEX channels: slurmd empties /dev/nvidia-caps-imex-channels when it starts" in problem
               and problem.endswith("set imex_channel0=false") for problem in problems), problems


def test_isolation_channels_under_the_plugin_are_refused_naming_them():
    model, options, plan, reads = static(BED, every={"imex_channel0": False, "imex_channels": [{"channel": 5}]})
    problems = refused(after, model, options, plan, reads)
    assert any("imex_channels asks for channel(s) 5 (imex_mode=static)" in problem and
               problem.endswith("set imex_channels=[]") for problem in problems), problems


def test_the_static_mode_without_the_plugin_keeps_its_channel0():
    plan = after(*static(DEFAULT))
    assert plan["warnings"] == [] and plan["trays"]["a1"]["channels"] == []


def test_per_job_without_alloc_and_with_prologs_elsewhere_is_refused_with_the_lines_to_write():
    model, options, plan, reads = per_job(config=TWO_PROLOGS, count={"value": 1024, "source": "/x"},
                                          every={"imex_slurm_prolog_dir": "/etc/slurm/imex-prolog.d"})
    problems = refused(after, model, options, plan, reads)
    text = "\n".join(problems)
    assert "PrologFlags is not set: the per-job prolog must run on every node of a job when it is allocated; add " \
           "PrologFlags=Alloc to slurm.conf" in text
    assert ("slurm.conf runs Prolog=/etc/slurm/prolog.sh,/etc/slurm/prolog.d/*, not "
            "/etc/slurm/imex-prolog.d/90-rackscale-imex, where the role installs the per-job prolog "
            "(imex_slurm_prolog_dir=/etc/slurm/imex-prolog.d): add the line Prolog=/etc/slurm/imex-prolog.d/* to "
            "slurm.conf") in text
    assert ("slurm.conf runs Epilog=/etc/slurm/epilog.sh, not /etc/slurm/epilog.d/90-rackscale-imex, where the role "
            "installs the per-job epilog (imex_slurm_epilog_dir=/etc/slurm/epilog.d): add the line "
            "Epilog=/etc/slurm/epilog.d/* to slurm.conf") in text
    # The second Prolog= line covers the default directory; one problem per kind, all trays named once.
    assert len(problems) == 4 and all(problem.startswith("domain rackA, trays a1, a2, a3: ")
                                      for problem in problems[1:]), problems


def test_a_prolog_without_prologs_at_all_is_said_so():
    problems = refused(after, *per_job(config="show_config_block_alloc_imex.txt"))
    assert any("slurm.conf runs no Prolog, not /etc/slurm/prolog.d/90-rackscale-imex" in problem
               for problem in problems), problems


def test_an_unreachable_slurmctld_is_a_warning_and_nothing_is_refused():
    error = "scontrol show config failed (rc 1): " + UNREACHABLE
    model, options, plan, reads = per_job(by_tray_read={"a1": {"slurm_config": slurm_config(error=error)}})
    plan = after(model, options, plan, reads)
    assert plan["warnings"] == [
        "domain rackA, trays a1, a2, a3: Slurm's configuration could not be read (scontrol show config failed (rc 1): "
        "slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)): slurm.conf is not checked "
        "against the IMEX channels and the per-job prolog"]


def test_slurmctlds_configuration_is_asked_once_per_domain_by_its_leader():
    model, options, plan, reads = per_job()
    assert [tray for tray, entry in plan["trays"].items() if entry["read_slurm_config"]] == ["a1"]
    # Under --limit, the first tray in the play asks.
    limited = preflight(model, {tray: options[tray] for tray in ("a2", "a3")}, play_hosts=["a2", "a3"])
    assert [tray for tray, entry in limited["trays"].items() if entry["read_slurm_config"]] == ["a2"]
    # Only the leader's read holds it, and it stands for every tray of the domain.
    for tray in ("a2", "a3"):
        del reads[tray]["slurm_config"]
    reads["a1"]["slurm_config"] = slurm_config("show_config_default.txt")
    problems = refused(after, model, options, plan, reads)
    assert any(problem.startswith("domain rackA, trays a1, a2, a3: imex_mode=slurm_per_job, but Slurm's SwitchType "
                                  "is not set") for problem in problems), problems


def test_a_domain_whose_asking_tray_was_not_reached_is_said_unchecked():
    """A run stops at the fabric gate for a tray it did not reach; the check says so on its own all the same."""
    _model, options, plan, reads = per_job()
    reads["a1"] = {"unreachable": True, "msg": "Failed to connect to the host via ssh"}
    problems, warnings = run_plan.slurm_conf.slurm_channel_checks(records.from_register(plan), options, reads)
    assert problems == [] and warnings == [
        "domain rackA: Slurm's configuration was not read (its tray a1, which asks slurmctld for the domain, was not "
        "reached): slurm.conf is not checked against imex_mode=slurm_per_job"]


def test_outside_slurm_a_tray_without_a_slurm_cluster_says_nothing():
    no_source = {"installed": True, "config": None,
                 "error": "scontrol show config failed (rc 1): scontrol: fatal: Could not establish a configuration source"}
    plan = after(*static(no_source))
    assert plan["warnings"] == []
    plan = after(*static({"installed": False, "config": None, "error": None}))
    assert plan["warnings"] == []


def test_outside_slurm_an_unreachable_controller_is_said_when_channels_are_asked_for():
    unreachable = {"installed": True, "config": None, "error": "scontrol show config failed (rc 1): " + UNREACHABLE}
    plan = after(*static(unreachable))
    assert len(plan["warnings"]) == 1 and "could not be read" in plan["warnings"][0]
    plan = after(*static(unreachable, every={"imex_channel0": False}))
    assert plan["warnings"] == []


def test_an_unknown_driver_count_is_a_warning_in_the_slurm_modes():
    plan = after(*per_job(count={"value": None, "source": None}))
    assert plan["warnings"] == ["domain rackA, trays a1, a2, a3: the driver's NVreg_ImexChannelCount could not be read "
                                "(driver not loaded?): its match with Slurm's imex_channel_count=2048 is not checked"]


@pytest.mark.parametrize("path, text, count", [
    ("/proc/driver/nvidia/params", read_sample("files", "nvidia_params_count16.txt"), 16),
    ("/proc/driver/nvidia/params", read_sample("files", "nvidia_params_old_driver.txt"), None),
    ("/sys/module/nvidia/parameters/NVreg_ImexChannelCount", "2048\n", 2048),
    ("/sys/module/nvidia/parameters/NVreg_ImexChannelCount", "junk\n", None),
    ("/proc/driver/nvidia/params", None, None),
])
def test_the_drivers_count_is_read_from_the_params_file_or_sysfs(path, text, count):
    assert driver_channel_count(path, text) == count


# ---------------------------------------------------------------------------------------------------
# The probe job of validate.yml.

RACK18 = {"rack1": ["rack1-tray%02d" % index for index in range(1, 19)]}
PROBE = {"imex_slurm_probe_partition": "gpu"}


def probe_result(sample, addresses, names, busy=None):
    """What imex_slurm_probe returns for a job that printed ``sample`` (a real nvidia-imex-ctl answer)."""
    if busy:
        return {"changed": False, "probed": False, "reason": busy, "healthy": None, "domain_state": None,
                "problems": [], "broken_pairs": [], "nodes": []}
    found = imex_slurm_probe.judge(read_sample("ctl", sample), addresses, names)
    return {"changed": False, "probed": True, "reason": None, "healthy": found["healthy"],
            "domain_state": found["domain_state"], "problems": found["problems"],
            "broken_pairs": found["broken_pairs"], "nodes": found["nodes"]}


def validated(**kwargs):
    model, options, plan, reads = per_job(every=PROBE, **kwargs)
    return model, after(model, options, plan, reads, converge=False)


def test_validate_probes_an_idle_domain_from_its_first_tray_with_its_slurm_names_and_addresses():
    _model, plan = validated(by_tray_read={"a2": {"node": "gpu-002"}})
    assert plan["probe_now"] == ["rackA"] and plan["probe_skipped"] == []
    assert plan["domains"]["rackA"]["probe"] == {
        "partition": "gpu", "runner": "a1", "nodes": ["a1", "gpu-002", "a3"],
        "expected_nodes": ["198.18.1.11", "198.18.1.12", "198.18.1.13"], "expected_names": ["a1", "a2", "a3"]}


def test_site_yml_and_an_unset_partition_probe_nothing():
    model, options, plan, reads = per_job(every=PROBE)
    assert after(model, options, plan, reads, converge=True)["probe_now"] == []
    model, options, plan, reads = per_job()
    plan = after(model, options, plan, reads, converge=False)
    assert (plan["probe_now"], plan["probe_skipped"]) == ([], [])


@pytest.mark.parametrize("kwargs, why", [
    ({"by_tray_read": {"a3": {"slurm_state": "ALLOCATED"}}}, "not idle in Slurm (a3: ALLOCATED)"),
    ({"by_tray_read": {"a1": {"slurm_state": "IDLE+DRAIN"}}}, "not idle in Slurm (a1: IDLE+DRAIN)"),
    ({"by_tray_read": {"a2": {"slurm": {"installed": True, "node": "a2", "state": None,
                                        "error": "slurm_load_node error: Unable to contact slurm controller"}}}},
     "not idle in Slurm (a2: state unknown (slurm_load_node error: Unable to contact slurm controller))"),
    ({"by_tray_read": {"a2": {"installed": False}}}, "its installation is not as site.yml leaves it on a2"),
    ({"check_mode": True}, "check mode: no job is submitted"),
])
def test_a_domain_that_is_not_idle_is_skipped_and_said_so(kwargs, why):
    _model, plan = validated(**kwargs)
    assert plan["probe_now"] == [] and plan["domains"]["rackA"]["probe"] is None
    assert len(plan["probe_skipped"]) == 1 and plan["probe_skipped"][0].startswith("domain rackA: no probe job: " + why)


def judged_with(probe, domains=None):
    model, plan = validated(domains=domains)
    name = plan["per_job_domains"][0]
    return run_plan.verdicts.verdicts(plan, model, [name], {}, list(plan["trays"]), probes={name: probe})[0]


def test_a_healthy_probe_proves_the_domain_and_says_what_it_saw():
    trays = RACK18["rack1"]
    addresses = ["198.18.1.%d" % (11 + index) for index in range(18)]
    healthy = probe_result("N_json_580.95.09_up_18nodes_compact.json", addresses, trays)
    report = judged_with(healthy, domains=RACK18)
    assert report["ok"] is True and report["verdict"] == "healthy", report
    assert report["message"].endswith("; a probe job in partition gpu on %s saw the domain UP, every node READY and "
                                      "every pair connected" % ", ".join(trays))
    assert report["status"]["domain_state"] == "UP"


def test_a_probe_that_sees_a_broken_pair_fails_the_domain_naming_the_pair():
    trays = RACK18["rack1"]
    addresses = ["198.18.1.%d" % (11 + index) for index in range(18)]
    broken = probe_result("N_580.95.09_pair_3_7_recovering.txt", addresses, trays)
    report = judged_with(broken, domains=RACK18)
    assert report["ok"] is False and report["verdict"] == "unhealthy"
    assert any(problem.startswith("a probe job in partition gpu on rack1-tray01, ") and "rack1-tray04" in problem
               and "rack1-tray08" in problem for problem in report["problems"]), report["problems"]
    assert "domain rack1" in report["message"] and [(pair["from_index"], pair["to_index"]) for pair in
                                                    report["status"]["broken_pairs"]] == [(3, 7), (7, 3)]


def test_a_probe_slurm_could_not_place_leaves_the_domain_judged_by_its_installation():
    report = judged_with(probe_result(None, None, None, busy="srun: error: Unable to allocate resources: Requested "
                                                             "nodes are busy"))
    assert report["ok"] is True
    assert report["message"].endswith("; a probe job in partition gpu on a1, a2, a3 was not run, as Slurm could not "
                                      "give the nodes at once: srun: error: Unable to allocate resources: Requested "
                                      "nodes are busy")


def test_a_probe_that_failed_as_a_task_fails_the_domain_with_its_message():
    report = judged_with({"failed": True, "msg": "the probe job printed no nvidia-imex-ctl matrix (srun rc 1)"})
    assert report["ok"] is False
    assert report["problems"] == ["a probe job in partition gpu on a1, a2, a3 failed: the probe job printed no "
                                  "nvidia-imex-ctl matrix (srun rc 1)"]
    report = judged_with(None)
    assert report["ok"] is False and report["problems"] == ["a probe job in partition gpu on a1, a2, a3 did not run "
                                                            "(no result)"]


def test_a_probe_whose_tray_was_unreachable_fails_the_domain():
    report = judged_with({"unreachable": True, "msg": "Failed to connect to the host via ssh"})
    assert report["ok"] is False and report["problems"] == [
        "a probe job in partition gpu on a1, a2, a3 failed: Failed to connect to the host via ssh"]


# --- the channel pool by slurmctld's release, and the prolog's time limit ----------------------------

def _with(name, **changes):
    """A sample of a real slurmctld's `scontrol show config`, with lines changed as slurm.conf would change them."""
    text = read_sample("slurm", name)
    for key, value in changes.items():
        text, count = re.subn(r"(?m)^%s(\s*)= .*$" % key, lambda match, v=value, k=key: "%s%s= %s" % (k, match.group(1), v), text)
        if not count:
            # A key this release does not print goes into the main section, beside PrologEpilogTimeout.
            text = text.replace("PrologEpilogTimeout", "%s = %s\nPrologEpilogTimeout" % (key, value), 1)
    return {"installed": True, "error": None, "config": channel_plugin_config(parse_show_config(text))}


@pytest.mark.parametrize("version, plugin_count, driver, accepted", [
    # before 25.11: channels 1..count-1, so the counts are equal
    ("24.11.5", 2048, 2048, True), ("25.05.3", 2048, 2048, True), ("24.11.5", 2047, 2048, False),
    # from 25.11: channels 1..count, so the pool is at most the driver's count - 1
    ("25.11.0", 2047, 2048, True), ("26.05.5", 2047, 2048, True), ("26.05.5", 1024, 2048, True),
    ("25.11.0", 2048, 2048, False), ("26.05.5", 2048, 2048, False), ("26.05.0-0rc1", 2048, 2048, False),
])
def test_the_channel_pool_is_checked_by_the_rule_of_slurmctlds_release(version, plugin_count, driver, accepted):
    config = _with(BED, SLURM_VERSION=version, SwitchParameters="imex_channel_count=%d" % plugin_count)
    count = {"value": driver, "source": "/proc/driver/nvidia/params"}
    model, options, plan, reads = per_job(config=None, count=count)
    for tray in reads:
        reads[tray]["slurm_config"] = config
    if accepted:
        assert after(model, options, plan, reads)["warnings"] == []
        return
    problems = [problem for problem in refused(after, model, options, plan, reads) if "imex_channel_count" in problem]
    assert len(problems) == 1, problems
    assert "Slurm %s's switch/nvidia_imex" % version in problems[0]
    if version.startswith(("25.11", "26.")):
        assert "hands out channels 1 to %d" % plugin_count in problems[0]
        assert "from Slurm 25.11 imex_channel_count must be at most NVreg_ImexChannelCount - 1" in problems[0]
        assert "SwitchParameters=imex_channel_count=%d in slurm.conf" % (driver - 1) in problems[0]
    else:
        assert "before Slurm 25.11 the two counts must be one value" in problems[0]


def test_an_unknown_slurmctld_release_refuses_only_what_no_release_accepts():
    count = {"value": 2048, "source": "/proc/driver/nvidia/params"}
    for plugin_count, accepted in ((2048, True), (2047, True), (4096, False)):
        config = _with(BED, SLURM_VERSION="(null)", SwitchParameters="imex_channel_count=%d" % plugin_count)
        model, options, plan, reads = per_job(config=None, count=count)
        for tray in reads:
            reads[tray]["slurm_config"] = config
        if accepted:
            warnings = after(model, options, plan, reads)["warnings"]
            assert any("slurmctld's release (SLURM_VERSION=not shown) is unknown" in warning for warning in warnings)
        else:
            problems = refused(after, model, options, plan, reads)
            assert any("imex_channel_count=4096; SLURM_VERSION not shown unknown" in problem for problem in problems)


@pytest.mark.parametrize("changes, refused_phases", [
    ({"PrologEpilogTimeout": "65534"}, []),
    ({"PrologEpilogTimeout": "240"}, []),
    ({"PrologEpilogTimeout": "300"}, []),
    ({"PrologEpilogTimeout": "120"}, ["prolog", "epilog"]),
    ({"PrologEpilogTimeout": "65534", "PrologTimeout": "60"}, ["prolog"]),
    ({"PrologEpilogTimeout": "120", "PrologTimeout": "600", "EpilogTimeout": "600"}, []),
    ({"PrologEpilogTimeout": "600", "EpilogTimeout": "30"}, ["epilog"]),
])
def test_a_slurm_limit_shorter_than_the_programs_own_bound_is_refused_naming_both(changes, refused_phases):
    total = run_plan.SLURM_JOB_BOUNDS["total_timeout_s"]
    model, options, plan, reads = per_job(config=None)
    config = _with(BED, **changes)
    for tray in reads:
        reads[tray]["slurm_config"] = config
    if not refused_phases:
        assert after(model, options, plan, reads)["warnings"] == []
        return
    problems = [problem for problem in refused(after, model, options, plan, reads) if "total_timeout_s" in problem]
    assert len(problems) == len(refused_phases), problems
    for phase, problem in zip(refused_phases, problems):
        limit = int(changes.get("%sTimeout" % phase.capitalize(), changes["PrologEpilogTimeout"]))
        assert problem.startswith("domain rackA, trays a1, a2, a3: slurm.conf gives the per-job %s %d s" % (phase, limit))
        assert "less than the %d s the program may take" % total in problem
        assert "to %d or more in slurm.conf" % total in problem


def test_the_static_mode_does_not_care_for_the_prolog_limit():
    config = _with(BED, PrologEpilogTimeout="10")
    model, options, plan, reads = static(config, every={"imex_mode": "slurm", "imex_channel0": False})
    assert not [problem for problem in after(model, options, plan, reads)["warnings"] if "total_timeout_s" in problem]


@pytest.mark.parametrize("text, expected", [
    ("24.11.5", (24, 11, 5)), ("26.05.0-0rc1", (26, 5, 0)), ("25.11", (25, 11, 0)), (None, None), ("(null)", None),
])
def test_slurm_releases_read_as_numbers(text, expected):
    assert release(text) == expected
