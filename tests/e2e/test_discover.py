"""discover.yml on a bed of two racks, logged in as a user that is not root (the bed's imexop, sudo
without a password, and ansible_become in group_vars/all.yml, as the README's quick start allows): an
inventory of ungrouped trays becomes one IMEX domain group per NVLink partition, each tray's login
kept, which site.yml then converges. (The README's quick start as written, from the built tarball in
an operator's own directory, is test_operator_project.py's; a tray not registered on the fabric is
refused by name and nothing written: tests/unit, see tests/README.md.)"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import ANSIBLE_ENV, requires_rack, run_playbook, write_inventory

pytestmark = requires_rack
RACK_SHAPE = (2, 3)
LOGIN = "imexop"   # the bed's login that is not root (sudo without a password)


@pytest.fixture(scope="module")
def ungrouped(simulated_rack, tmp_path_factory):
    """The bed's trays as an operator's flat host list: no domain groups, only how to reach each tray,
    as LOGIN; become from group_vars/all.yml beside it (and beside the inventory discover writes)."""
    with open(simulated_rack.inventory) as handle:
        bed = yaml.safe_load(handle)
    hosts = {}
    for rack in bed["all"]["children"]["imex_domains"]["children"].values():
        for name, host_vars in rack["hosts"].items():
            hosts[name] = {key: value for key, value in host_vars.items() if key != "imex_address"}
            hosts[name]["ansible_user"] = LOGIN
    directory = tmp_path_factory.mktemp("flat")
    (directory / "group_vars").mkdir()
    (directory / "group_vars" / "all.yml").write_text("ansible_become: true\n")
    return write_inventory(directory, {"all": {"hosts": hosts}})


def domains_of(path):
    with open(path) as handle:
        return yaml.safe_load(handle)["all"]["children"]["imex_domains"]["children"]


def test_discover_groups_the_trays_by_rack_and_site_converges_from_it(simulated_rack, ungrouped, tmp_path):
    # The login is not root; become is what gives the modules root.
    login = subprocess.run(["ansible", "-i", ungrouped, "all", "-m", "ansible.builtin.command", "-a", "id -un",
                            "-e", "ansible_become=false"], env=dict(os.environ, **ANSIBLE_ENV),
                           capture_output=True, text=True, timeout=300, check=False)
    assert login.returncode == 0, login.stdout[-3000:] + login.stderr[-2000:]
    assert login.stdout.count(LOGIN) == len(simulated_rack.trays_of(1) + simulated_rack.trays_of(2)), login.stdout
    assert "root" not in login.stdout, login.stdout

    # Beside the flat inventory: group_vars/all.yml gives the written inventory's trays become too.
    output = Path(ungrouped).parent / "discovered.yml"
    predicted = run_playbook("discover.yml", ungrouped, extravars={"imex_discover_output": str(output)}, check=True)
    assert predicted.rc == 0, predicted.stdout[-3000:]
    assert not output.exists() and "Would write %s" % output in predicted.stdout

    run = run_playbook("discover.yml", ungrouped, extravars={"imex_discover_output": str(output)})
    assert run.rc == 0, run.stdout[-3000:]
    assert "Wrote %s" % output in run.stdout
    groups = domains_of(output)
    assert len(groups) == 2 and all(name.startswith("nvl_") and name.endswith("_32766") for name in groups)
    by_trays = {tuple(group["hosts"]): group for group in groups.values()}
    assert set(by_trays) == {tuple(simulated_rack.trays_of(1)), tuple(simulated_rack.trays_of(2))}
    for name, group in groups.items():
        assert group["vars"] == {"imex_domain_size": 3, "imex_domain": name}
        assert all(host_vars["ansible_host"] == simulated_rack.address(tray) for tray, host_vars in group["hosts"].items())
        assert {host_vars["ansible_user"] for host_vars in group["hosts"].values()} == {LOGIN}

    # Stable: a second discovery writes the same file.
    before = output.read_text()
    again = run_playbook("discover.yml", ungrouped, extravars={"imex_discover_output": str(output)})
    assert again.rc == 0 and output.read_text() == before and again.changed_hosts() == []

    site = run_playbook("site.yml", str(output), extravars={"imex_report_dir": str(tmp_path / "reports")})
    assert site.rc == 0, site.stdout[-4000:]
    assert sorted(os.listdir(tmp_path / "reports")) == sorted([name + ".json" for name in groups] + ["summary.md"])
