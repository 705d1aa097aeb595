"""discover.yml on a bed of two racks: an inventory of ungrouped trays becomes one IMEX domain
group per NVLink partition, which site.yml then converges; and the README's quick start, as written,
from the built tarball in an operator's own directory. (A tray not registered on the fabric is refused
by name and nothing written: tests/unit, see tests/README.md.)"""
from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from conftest import REPO, requires_rack, run_playbook, write_inventory

pytestmark = requires_rack
RACK_SHAPE = (2, 3)


@pytest.fixture(scope="module")
def ungrouped(simulated_rack, tmp_path_factory):
    """The bed's trays as an operator's flat host list: no domain groups, only how to reach each tray."""
    with open(simulated_rack.inventory) as handle:
        bed = yaml.safe_load(handle)
    hosts = {}
    for rack in bed["all"]["children"]["imex_domains"]["children"].values():
        for name, host_vars in rack["hosts"].items():
            hosts[name] = {key: value for key, value in host_vars.items() if key != "imex_address"}
    return write_inventory(tmp_path_factory.mktemp("flat"), {"all": {"hosts": hosts}})


def domains_of(path):
    with open(path) as handle:
        return yaml.safe_load(handle)["all"]["children"]["imex_domains"]["children"]


def test_discover_groups_the_trays_by_rack_and_site_converges_from_it(simulated_rack, ungrouped, tmp_path):
    output = tmp_path / "discovered.yml"
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
        assert all(host_vars["ansible_host"].startswith("198.18.") for host_vars in group["hosts"].values())

    # Stable: a second discovery writes the same file.
    before = output.read_text()
    again = run_playbook("discover.yml", ungrouped, extravars={"imex_discover_output": str(output)})
    assert again.rc == 0 and output.read_text() == before and again.changed_hosts() == []

    site = run_playbook("site.yml", str(output), extravars={"imex_report_dir": str(tmp_path / "reports")})
    assert site.rc == 0, site.stdout[-4000:]
    assert sorted(os.listdir(tmp_path / "reports")) == sorted([name + ".json" for name in groups] + ["summary.md"])


def test_the_readme_quick_start_as_written_with_the_built_tarball(simulated_rack, ungrouped, tmp_path):
    """The README's quick start, step by step, from the built tarball in a directory of the operator's
    own (neither this checkout nor its ansible.cfg), logged in as a user with sudo and
    ansible_become in group_vars/all.yml: discover, check mode, site, validate, and the reports where
    the README says they are (imex-reports under the working directory)."""
    with open(ungrouped) as handle:
        trays = yaml.safe_load(handle)
    for host_vars in trays["all"]["hosts"].values():
        host_vars["ansible_user"] = "imexop"   # the bed's non-root login (sudo without a password)
    write_inventory(tmp_path, trays, "trays.yml")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars/all.yml").write_text("ansible_become: true\n")
    dist, collections = tmp_path / "dist", tmp_path / "collections"
    environment = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    (tmp_path / "ansible.cfg").write_text(
        "[defaults]\nforks = 50\n"
        "collections_path = %s\n\n[ssh_connection]\npipelining = true\n" % collections)

    def run(*args):
        result = subprocess.run(list(args), cwd=tmp_path, env=environment, capture_output=True, text=True,
                                timeout=900, check=False)
        assert result.returncode == 0, "%s:\n%s%s" % (" ".join(args), result.stdout[-3000:], result.stderr[-2000:])
        return result.stdout

    run("ansible-galaxy", "collection", "build", "--output-path", str(dist), REPO)
    tarball = next(dist.glob("rackscale-imex-*.tar.gz"))
    run("ansible-galaxy", "collection", "install", "-p", str(collections), str(tarball))

    # The login is not root; become is what gives the modules root.
    login = run("ansible", "-i", "trays.yml", "all", "-m", "ansible.builtin.command", "-a", "id -un",
                "-e", "ansible_become=false")
    assert login.count("imexop") == len(trays["all"]["hosts"]) and "root" not in login, login

    run("ansible-playbook", "-i", "trays.yml", "rackscale.imex.discover", "-e", "imex_discover_output=inventory.yml")
    domains = domains_of(tmp_path / "inventory.yml")
    assert len(domains) == 2
    assert {host_vars["ansible_user"] for domain in domains.values() for host_vars in domain["hosts"].values()} \
        == {"imexop"}
    predicted = run("ansible-playbook", "-i", "inventory.yml", "rackscale.imex.site", "--check", "--diff")
    assert "failed=0" in predicted
    converged = run("ansible-playbook", "-i", "inventory.yml", "rackscale.imex.site")
    reports = tmp_path / "imex-reports"
    assert str(reports) in converged, converged[-3000:]
    validated = run("ansible-playbook", "-i", "inventory.yml", "rackscale.imex.validate")
    assert "changed=0" in validated and str(reports) in validated
    assert sorted(os.listdir(reports)) == sorted([name + ".json" for name in domains] + ["summary.md"])
    for name in domains:
        with open(reports / (name + ".json")) as handle:
            assert yaml.safe_load(handle)["verdict"] == "healthy"

