"""The collection in an operator's own project, outside this checkout, on a 3-tray bed: installed
from the built tarball with `ansible-galaxy collection install -p` (README, "Install") and found
through the project's own ansible.cfg; then the same project as AWX runs it (docs/awx.md): the
project update's `ansible-galaxy` run with the environment AWX gives it, the job's private data
dir as AWX lays it out, `ansible-runner run`, and the verdicts read from the job's artifacts.

Each tray's domain comes from `imex_domain` in the domain group's group vars; neither project
enables the collection's vars plugin. No command here sees this checkout's ansible.cfg, an
ANSIBLE_* setting of the test run or anything under the real HOME."""
from __future__ import annotations

import configparser
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from ansible.release import __version__ as ANSIBLE_CORE_VERSION

from conftest import READ_INTERVAL, REPO, requires_rack

pytestmark = requires_rack
RACK_SHAPE = (1, 3)

BIN = os.path.dirname(sys.executable)
with open(os.path.join(REPO, "galaxy.yml")) as _galaxy:
    VERSION = yaml.safe_load(_galaxy)["version"]
# ansible-core 2.19 dropped ANSIBLE_COLLECTIONS_PATHS (plural), which AWX's project update still sets.
READS_PLURAL_COLLECTIONS_PATHS = tuple(int(part) for part in ANSIBLE_CORE_VERSION.split(".")[:2]) < (2, 19)

# The operator's ansible.cfg: where the collection is installed (relative to this file), and the
# README's settings for a rack. No vars_plugins_enabled line: the group vars set imex_domain.
PROJECT_CFG = """\
[defaults]
collections_path = collections
forks = 50

[ssh_connection]
pipelining = true
ssh_args = -C -o ControlMaster=auto -o ControlPersist=60s -o ServerAliveInterval=15 -o ServerAliveCountMax=4
"""


def operator_environment(home, **extra):
    """An operator's shell: the toolchain on PATH, a HOME of its own (nothing under ~/.ansible)
    and no ANSIBLE_* variable of this test run (ANSIBLE_CONFIG among them)."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    home.mkdir(exist_ok=True)
    environment.update(PATH=BIN + os.pathsep + environment.get("PATH", ""), HOME=str(home), ANSIBLE_NOCOLOR="1")
    environment.update(extra)
    return environment


def run(args, cwd, environment, check=True, timeout=900):
    result = subprocess.run([str(arg) for arg in args], cwd=cwd, env=environment, capture_output=True, text=True,
                            timeout=timeout, check=False)
    if check:
        assert result.returncode == 0, "%s (in %s):\n%s%s" % (" ".join(map(str, args)), cwd, result.stdout[-4000:],
                                                              result.stderr[-3000:])
    return result


def write_project(root, domain, hosts):
    """An operator's project: ansible.cfg, inventory/ (hosts.yml, group_vars/<domain>.yml) and
    playbooks/ wrapping the collection's playbooks (an AWX job template runs a file of the project)."""
    (root / "inventory" / "group_vars").mkdir(parents=True)
    (root / "playbooks").mkdir()
    (root / "collections").mkdir()
    (root / "ansible.cfg").write_text(PROJECT_CFG)
    (root / "inventory" / "hosts.yml").write_text(yaml.safe_dump(
        {"all": {"children": {"imex_domains": {"children": {domain: {"hosts": hosts}}}}}}, sort_keys=False))
    (root / "inventory" / "group_vars" / ("%s.yml" % domain)).write_text(yaml.safe_dump(
        {"imex_domain": domain, "imex_domain_size": len(hosts)}, sort_keys=False))
    for name in ("site", "validate"):
        (root / "playbooks" / ("%s.yml" % name)).write_text(
            "---\n- name: IMEX %s\n  ansible.builtin.import_playbook: rackscale.imex.%s\n" % (name, name))


@pytest.fixture(scope="module")
def tarball(tmp_path_factory):
    """The collection as the README builds it: from the checkout, written outside it."""
    scratch = tmp_path_factory.mktemp("build")
    run(["ansible-galaxy", "collection", "build", "--output-path", scratch / "dist", REPO], scratch,
        operator_environment(scratch / "home"))
    (built,) = (scratch / "dist").glob("rackscale-imex-*.tar.gz")
    return built


@pytest.fixture(scope="module")
def bed(simulated_rack):
    """The bed's only domain: (its name, its trays with their connection variables)."""
    with open(simulated_rack.inventory) as handle:
        inventory = yaml.safe_load(handle)
    ((domain, group),) = inventory["all"]["children"]["imex_domains"]["children"].items()
    return domain, group["hosts"]


@pytest.fixture(scope="module")
def own_project(bed, tarball, tmp_path_factory):
    """README, "Install" and "Quick start", in a project directory of the operator's: install the
    tarball into the project's collections/ with -p, then site and validate by their FQCN from
    there. Returns (project dir, {step: CompletedProcess}); the bed is converged afterwards."""
    domain, hosts = bed
    base = tmp_path_factory.mktemp("operator")
    project = base / "imex-racks"
    write_project(project, domain, hosts)
    environment = operator_environment(base / "home", ANSIBLE_CONFIG=str(project / "ansible.cfg"))
    steps = {}
    steps["install"] = run(["ansible-galaxy", "collection", "install", "-p", "collections", tarball], project,
                           environment)
    # What the operators met: the install alone is not enough, ansible looks there only when told.
    (base / "bare.cfg").write_text("[defaults]\nforks = 50\n")
    steps["not_told"] = run(["ansible-doc", "-t", "module", "rackscale.imex.imex_status"], project,
                            dict(environment, ANSIBLE_CONFIG=str(base / "bare.cfg")), check=False)
    steps["list"] = run(["ansible-galaxy", "collection", "list", "rackscale.imex", "--format", "json"], project,
                        environment)
    interval = ["-e", "imex_validate_interval_s=%d" % READ_INTERVAL["imex_validate_interval_s"]]
    for name in ("site", "validate"):
        steps[name] = run(["ansible-playbook", "-i", "inventory", "rackscale.imex.%s" % name, *interval], project,
                          environment)
    return project, steps


def test_installed_from_the_tarball_in_a_project_of_its_own_site_and_validate_run_from_there(bed, own_project):
    domain, _ = bed
    project, steps = own_project
    installed = project / "collections" / "ansible_collections" / "rackscale" / "imex"
    assert "Installing 'rackscale.imex:%s' to '%s'" % (VERSION, installed) in steps["install"].stdout, \
        steps["install"].stdout
    assert "rackscale.imex.imex_status was not found" in steps["not_told"].stdout + steps["not_told"].stderr
    # The project's collections_path is the only place the collection is found.
    assert json.loads(steps["list"].stdout) == {
        str(project / "collections" / "ansible_collections"): {"rackscale.imex": {"version": VERSION}}}

    reports = project / "imex-reports"
    assert str(reports) in steps["site"].stdout, steps["site"].stdout[-3000:]
    assert "changed=0" in steps["validate"].stdout and str(reports) in steps["validate"].stdout
    assert sorted(os.listdir(reports)) == sorted(["%s.json" % domain, "summary.md"])
    with open(reports / ("%s.json" % domain)) as handle:
        assert json.load(handle)["verdict"] == "healthy"


# --- AWX, as awx/playbooks/project_update.yml and awx/main/tasks/jobs.py (RunProjectUpdate,
# RunJob) do it; /runner, the job's private data dir inside the execution environment, is the
# private data dir itself here.

# settings.GALAXY_TASK_ENV (awx/settings/defaults.py): the environment of the galaxy commands.
GALAXY_TASK_ENV = {"ANSIBLE_FORCE_COLOR": "false", "GIT_SSH_COMMAND": "ssh -o StrictHostKeyChecking=no"}


def awx_project_update(project_path, stage, environment):
    """The install step of project_update.yml: `ansible-galaxy collection install -r
    <project_path>/collections/requirements.yml` with chdir the project, and its additional_galaxy_env
    (which names no -p: ANSIBLE_COLLECTIONS_PATHS says where to install)."""
    galaxy_env = dict(environment, **GALAXY_TASK_ENV)
    galaxy_env.update(ANSIBLE_COLLECTIONS_PATHS=str(stage / "requirements_collections"),
                      ANSIBLE_ROLES_PATH=str(stage / "requirements_roles"), ANSIBLE_LOCAL_TEMP=str(stage / "tmp"))
    return run(["ansible-galaxy", "collection", "install", "-r", project_path / "collections" / "requirements.yml"],
               project_path, galaxy_env)


def awx_job_collections_paths(private_data_dir):
    """RunJob.build_env's path_vars: the job's ANSIBLE_COLLECTIONS_PATHS and ANSIBLE_COLLECTIONS_PATH,
    each <private data dir>/requirements_collections, then the project's ansible.cfg value as written
    (read_ansible_config), then the defaults."""
    parser = configparser.ConfigParser()
    parser.read(["/etc/ansible/ansible.cfg", str(private_data_dir / "project" / "ansible.cfg")])
    defaults = parser["defaults"] if "defaults" in parser else {}
    envvars = {}
    for key, setting in (("ANSIBLE_COLLECTIONS_PATHS", "collections_paths"),
                         ("ANSIBLE_COLLECTIONS_PATH", "collections_path")):
        paths = ["~/.ansible/collections", "/usr/share/ansible/collections"]
        if setting in defaults and any(path not in paths for path in defaults[setting].split(":")):
            paths = [defaults[setting]] + paths
        envvars[key] = os.pathsep.join([str(private_data_dir / "requirements_collections")] + paths)
    return envvars


def awx_job(private_data_dir, project_path, cache, inventory_data, playbook):
    """A job's private data dir as RunJob lays it out: project/ (a copy of the project's checkout,
    what the project update installed into it included), requirements_collections/ (from the
    project's content cache), inventory/hosts (AWX's script printing the inventory it imported),
    env/envvars, env/extravars (the awx_* meta variables), env/settings."""
    shutil.copytree(project_path, private_data_dir / "project", ignore=shutil.ignore_patterns(".git"), symlinks=True)
    if (cache / "requirements_collections").exists():
        shutil.copytree(cache / "requirements_collections", private_data_dir / "requirements_collections",
                        symlinks=True)
    (private_data_dir / "inventory").mkdir()
    script = private_data_dir / "inventory" / "hosts"
    script.write_text("#! /usr/bin/env python3\n# -*- coding: utf-8 -*-\nprint(%r)\n" % json.dumps(inventory_data))
    script.chmod(0o700)
    (private_data_dir / "env").mkdir()
    (private_data_dir / "cp").mkdir(mode=0o700)
    envvars = {"JOB_ID": "1", "INVENTORY_ID": "1", "ANSIBLE_RETRY_FILES_ENABLED": "False",
               "ANSIBLE_SSH_CONTROL_PATH_DIR": str(private_data_dir / "cp"),
               "ANSIBLE_ROLES_PATH": os.pathsep.join([str(private_data_dir / "requirements_roles"), "~/.ansible/roles",
                                                      "/usr/share/ansible/roles", "/etc/ansible/roles"])}
    envvars.update(awx_job_collections_paths(private_data_dir))
    (private_data_dir / "env" / "envvars").write_text(yaml.safe_dump(envvars))
    extravars = {"awx_job_id": 1, "tower_job_id": 1, "awx_job_launch_type": "manual",
                 "awx_job_template_name": "IMEX converge", "awx_project_revision": "0" * 40}
    extravars.update(READ_INTERVAL)
    (private_data_dir / "env" / "extravars").write_text(yaml.safe_dump(extravars))
    # AWX also suppresses the stdout file; it is kept here for the failure message.
    (private_data_dir / "env" / "settings").write_text(json.dumps({"job_timeout": 0, "suppress_ansible_output": True}))
    return ["ansible-runner", "run", private_data_dir, "-p", playbook, "--ident", "1"]


@pytest.mark.usefixtures("own_project")   # the bed converged: this job proves that it changes nothing
def test_as_an_awx_project_the_job_finds_the_collection_changes_nothing_and_its_artifacts_carry_the_verdict(
        bed, tarball, tmp_path):
    domain, hosts = bed
    projects_root, local_path = tmp_path / "projects", "_8__imex_racks"
    project_path = projects_root / local_path
    write_project(project_path, domain, hosts)
    (project_path / "vendor").mkdir()
    shutil.copy(tarball, project_path / "vendor")
    (project_path / "collections" / "requirements.yml").write_text(
        "---\ncollections:\n  - name: vendor/%s\n    type: file\n" % tarball.name)
    environment = operator_environment(tmp_path / "home")

    # Project update. ansible-core 2.19+ ignores the plural variable: ansible-galaxy installs into the
    # project's own collections_path (its ansible.cfg, read from the working directory), inside the
    # checkout that every job copies; older ansible-core installs into the stage of the cache.
    stage = projects_root / ".__awx_cache" / local_path / "stage"
    installed = awx_project_update(project_path, stage, environment)
    target = (stage / "requirements_collections") if READS_PLURAL_COLLECTIONS_PATHS else (project_path / "collections")
    assert "Installing 'rackscale.imex:%s' to '%s'" % (VERSION, target / "ansible_collections" / "rackscale" / "imex") \
        in installed.stdout, installed.stdout
    cache = stage.parent / "1"
    stage.rename(cache)   # post_run_hook: the stage becomes the cache of this project update

    # Without the collections_path line, that install lands in the execution environment's home,
    # which dies with the project update's container: no job would find it.
    bare = tmp_path / "bare_project"
    shutil.copytree(project_path, bare, ignore=shutil.ignore_patterns("ansible_collections"))
    (bare / "ansible.cfg").write_text(PROJECT_CFG.replace("collections_path = collections\n", ""))
    lost = awx_project_update(bare, tmp_path / "bare_stage", operator_environment(tmp_path / "ee_home"))
    if not READS_PLURAL_COLLECTIONS_PATHS:
        assert "to '%s" % (tmp_path / "ee_home" / ".ansible" / "collections") in lost.stdout, lost.stdout

    # Inventory sync: the SCM inventory source imported with its group_vars (imex_domain among them),
    # served to the job as AWX's inventory script.
    exported = run(["ansible-inventory", "-i", project_path / "inventory" / "hosts.yml", "--list", "--export"],
                   project_path, environment)
    inventory_data = json.loads(exported.stdout)
    assert inventory_data[domain]["vars"] == {"imex_domain": domain, "imex_domain_size": len(hosts)}

    private_data_dir = tmp_path / "job"
    private_data_dir.mkdir()
    job = run(awx_job(private_data_dir, project_path, cache, inventory_data, "playbooks/site.yml"), tmp_path,
              environment, check=False)
    artifacts = private_data_dir / "artifacts" / "1"
    output = (artifacts / "stdout").read_text() if (artifacts / "stdout").exists() else job.stdout + job.stderr
    assert (artifacts / "status").read_text() == "successful", output[-4000:]
    assert (artifacts / "rc").read_text() == "0" and job.returncode == 0

    events = []
    for name in os.listdir(artifacts / "job_events"):
        with open(artifacts / "job_events" / name) as handle:
            events.append(json.load(handle))
    (stats,) = [event["event_data"] for event in events if event["event"] == "playbook_on_stats"]
    assert set(hosts) <= set(stats["ok"]) and stats["changed"] == {} and stats["failures"] == {}, stats
    # ansible-runner hands the set_stats data over as the stats event's artifact_data (AWX: the job's artifacts).
    artifact_data = stats["artifact_data"]
    assert artifact_data["imex_domains"] == {domain: "healthy"}, artifact_data
    assert list(artifact_data["imex_domain_problems"]) == [domain] and not artifact_data["imex_domain_problems"][domain]
    reports = private_data_dir / "project" / "imex-reports"
    assert artifact_data["imex_run"]["report_dir"] == str(reports) and artifact_data["imex_run"]["id"]
    with open(reports / ("%s.json" % domain)) as handle:
        report = json.load(handle)
    assert report["verdict"] == "healthy" and report["run_id"] == artifact_data["imex_run"]["id"]
    assert report["collection_version"] == VERSION
