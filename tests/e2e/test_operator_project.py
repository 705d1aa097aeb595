"""The README followed literally by an operator, on a 3-tray bed: the shell blocks of its "Install"
and "Quick start on your racks" sections, then those of molecule/staging/README.md, extracted from the
Markdown and run as written in a fresh HOME outside this checkout (so `~/imex-racks`, the README's
project directory, is a new directory there). Only the checkout's path (`/path/to/checkout`) and the
trays (the README's example lines `name: {ansible_host: address}`) are replaced by this checkout's
and the bed's; SSH reaches the trays as the operator's own SSH set-up would (the bed's ssh_config in
ANSIBLE_SSH_COMMON_ARGS: the README assumes working SSH to the trays and says nothing of keys).
Then the same project as AWX runs it (docs/awx.md): the project update's `ansible-galaxy` run with
the environment AWX gives it, the job's private data dir as AWX lays it out, `ansible-runner run`,
and the verdicts read from the job's artifacts.

Each tray's domain comes from `imex_domain` in the domain group's group vars; neither project
enables the collection's vars plugin. No command here sees this checkout's ansible.cfg, an
ANSIBLE_* setting of the test run or anything under the real HOME."""
from __future__ import annotations

import configparser
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml
from ansible.release import __version__ as ANSIBLE_CORE_VERSION

from conftest import READ_INTERVAL, REPO, requires_rack

pytestmark = requires_rack
RACK_SHAPE = (1, 3)

BIN = os.path.dirname(sys.executable)
with open(os.path.join(REPO, "galaxy.yml")) as _galaxy:
    GALAXY_VERSION = str(yaml.safe_load(_galaxy)["version"])
# ansible-core 2.19 dropped ANSIBLE_COLLECTIONS_PATHS (plural), which AWX's project update still sets.
READS_PLURAL_COLLECTIONS_PATHS = tuple(int(part) for part in ANSIBLE_CORE_VERSION.split(".")[:2]) < (2, 19)

# What the README leaves to the reader, as it spells it.
# (The project directory, ~/imex-racks, is left as written: HOME is a fresh directory.)
README_CHECKOUT = "/path/to/checkout"
# An example tray line of the README's inventory: `    gb200-r07-t01: {ansible_host: 10.20.7.11}`.
README_TRAY = re.compile(r"^(?P<indent> +)[\w.-]+: \{ansible_host: [\w.:-]+\}$")


def markdown_section(path, title):
    """The text of the `## title` section of a Markdown file, up to the next `## ` heading."""
    with open(path) as handle:
        text = handle.read()
    match = re.search(r"^## %s\n(.*?)(?=^## |\Z)" % re.escape(title), text, re.S | re.M)
    assert match, "%s has no section '## %s'" % (path, title)
    return match.group(1)


def shell_blocks(section):
    """The ```sh blocks of a section, in order, each without the indent of the list item it sits in."""
    blocks = []
    for match in re.finditer(r"^( *)```sh\n(.*?)^\1```$", section, re.S | re.M):
        indent = len(match.group(1))
        blocks.append("".join(line[indent:] if line[:indent].strip() == "" else line
                              for line in match.group(2).splitlines(keepends=True)))
    return blocks


def with_trays(block, trays):
    """The block with the README's example tray lines replaced by the bed's, in the same form."""
    lines, replaced = [], False
    for line in block.splitlines(keepends=True):
        found = README_TRAY.match(line.rstrip("\n"))
        if not found:
            lines.append(line)
        elif not replaced:
            lines.extend("%s%s: {ansible_host: %s}\n" % (found.group("indent"), name, address)
                         for name, address in trays)
            replaced = True
    return "".join(lines)


def readme_script(blocks, trays):
    """One bash script of the blocks as written, with a marker line before each so that the output
    of each block can be told apart; it stops at the first command that fails."""
    parts = ["set -euxo pipefail\n"]
    for number, block in enumerate(blocks):
        parts.append("echo '=== block %d ==='\n" % number)
        parts.append(with_trays(block, trays).replace(README_CHECKOUT, REPO))
    return "".join(parts)


def block_outputs(stdout):
    """{block number: its stdout} of a readme_script run."""
    pieces = re.split(r"^=== block (\d+) ===$", stdout, flags=re.M)
    return {int(number): text for number, text in zip(pieces[1::2], pieces[2::2])}


def readme_ansible_cfg():
    """The project ansible.cfg the README's Install writes (its here-document)."""
    (block,) = [block for block in shell_blocks(markdown_section(os.path.join(REPO, "README.md"), "Install"))
                if "cat > ansible.cfg" in block]
    return re.search(r"cat > ansible\.cfg <<'EOF'\n(.*?\n)EOF\n", block, re.S).group(1)


def operator_environment(home, **extra):
    """An operator's shell: the toolchain on PATH, a HOME of its own (nothing under ~/.ansible)
    and no ANSIBLE_* variable of this test run (ANSIBLE_CONFIG among them)."""
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("ANSIBLE_", "MOLECULE_", "IMEX_"))}
    home.mkdir(exist_ok=True)
    environment.update(PATH=BIN + os.pathsep + environment.get("PATH", ""), HOME=str(home), ANSIBLE_NOCOLOR="1",
                       NO_COLOR="1")
    environment.update(extra)
    return environment


def run(args, cwd, environment, check=True, timeout=900):
    result = subprocess.run([str(arg) for arg in args], cwd=cwd, env=environment, capture_output=True, text=True,
                            timeout=timeout, check=False)
    if check:
        assert result.returncode == 0, "%s (in %s):\n%s%s" % (" ".join(map(str, args)), cwd, result.stdout[-6000:],
                                                              result.stderr[-3000:])
    return result


def manifest_version(tarball):
    with tarfile.open(tarball) as archive:
        return json.load(archive.extractfile("MANIFEST.json"))["collection_info"]["version"]


def write_project(root, domain, hosts):
    """An operator's project: the README's ansible.cfg, inventory/ (hosts.yml, group_vars/<domain>.yml)
    and playbooks/ wrapping the collection's playbooks (an AWX job template runs a file of the project)."""
    (root / "inventory" / "group_vars").mkdir(parents=True)
    (root / "playbooks").mkdir()
    (root / "collections").mkdir()
    (root / "ansible.cfg").write_text(readme_ansible_cfg())
    (root / "inventory" / "hosts.yml").write_text(yaml.safe_dump(
        {"all": {"children": {"imex_domains": {"children": {domain: {"hosts": hosts}}}}}}, sort_keys=False))
    (root / "inventory" / "group_vars" / ("%s.yml" % domain)).write_text(yaml.safe_dump(
        {"imex_domain": domain, "imex_domain_size": len(hosts)}, sort_keys=False))
    for name in ("site", "validate"):
        (root / "playbooks" / ("%s.yml" % name)).write_text(
            "---\n- name: IMEX %s\n  ansible.builtin.import_playbook: rackscale.imex.%s\n" % (name, name))


@pytest.fixture(scope="module")
def bed(simulated_rack):
    """The bed's only domain: (its name, its trays with their connection variables)."""
    with open(simulated_rack.inventory) as handle:
        inventory = yaml.safe_load(handle)
    ((domain, group),) = inventory["all"]["children"]["imex_domains"]["children"].items()
    return domain, group["hosts"]


@pytest.fixture(scope="module")
def operator_shell(bed, tmp_path_factory):
    """An operator's shell environment: a fresh HOME outside the checkout, and SSH to the bed's trays."""
    _, hosts = bed
    (ssh_args,) = {host["ansible_ssh_common_args"] for host in hosts.values()}
    base = tmp_path_factory.mktemp("operator")
    return base, operator_environment(base / "home", ANSIBLE_SSH_COMMON_ARGS=ssh_args)


@pytest.fixture(scope="module")
def readme_run(bed, operator_shell):
    """README.md's "Install" and "Quick start on your racks" shell blocks, run as written in one shell.
    Returns (project dir, blocks, {block number: output}); the bed is converged afterwards."""
    _, hosts = bed
    base, environment = operator_shell
    readme = os.path.join(REPO, "README.md")
    blocks = shell_blocks(markdown_section(readme, "Install")) + \
        shell_blocks(markdown_section(readme, "Quick start on your racks"))
    trays = [(name, host["ansible_host"]) for name, host in hosts.items()]
    result = run(["bash", "-c", readme_script(blocks, trays)], base, environment, timeout=1800)
    project = base / "home" / "imex-racks"
    return project, blocks, block_outputs(result.stdout)


def output_of(blocks, outputs, command):
    """The output of the one block that runs `command`."""
    (number,) = [number for number, block in enumerate(blocks) if command in block]
    return outputs[number]


def test_the_readme_s_install_builds_a_version_of_this_commit_and_installs_it_into_the_project(readme_run):
    project, blocks, outputs = readme_run
    (tarball,) = (project / "vendor").glob("rackscale-imex-*.tar.gz")
    version = manifest_version(tarball)
    if "-" in GALAXY_VERSION:
        # A commit of this checkout (HEAD when it was built; others may have committed since), and the
        # number of commits in its history (no tag needed: a clone may have fetched none).
        stamp = re.fullmatch(re.escape(GALAXY_VERSION) + r"\.([0-9]+)\.g([0-9a-f]+)(\.dirty[0-9]+)?", version)
        assert stamp, version

        def git(*args):
            return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout.strip()
        assert subprocess.run(["git", "-C", REPO, "merge-base", "--is-ancestor", stamp.group(2), "HEAD"],
                              check=False).returncode == 0, version
        assert int(stamp.group(1)) == int(git("rev-list", "--count", stamp.group(2)))
    else:
        assert version == GALAXY_VERSION
    installed = project / "collections" / "ansible_collections" / "rackscale" / "imex"
    with open(installed / "MANIFEST.json") as handle:
        assert json.load(handle)["collection_info"]["version"] == version
    listed = output_of(blocks, outputs, "ansible-galaxy collection list rackscale.imex")
    assert str(project / "collections" / "ansible_collections") in listed and version in listed, listed
    # ansible.cfg came first: the install found its path configured.
    assert "is not part of the configured Ansible collections paths" not in \
        output_of(blocks, outputs, "ansible-galaxy collection install")


def test_the_readme_s_quick_start_discovers_the_domain_predicts_converges_and_validates(bed, readme_run):
    _, hosts = bed
    project, blocks, outputs = readme_run
    with open(project / "inventory.yml") as handle:
        discovered = yaml.safe_load(handle)
    ((domain, group),) = discovered["all"]["children"]["imex_domains"]["children"].items()
    assert sorted(group["hosts"]) == sorted(hosts)
    assert group["vars"] == {"imex_domain": domain, "imex_domain_size": len(hosts)}
    # The become/login step is in the trays' inventory that discover read, and kept per tray.
    assert all(host["ansible_user"] == "root" for host in group["hosts"].values())

    predicted = output_of(blocks, outputs, "rackscale.imex.site --check --diff")
    assert re.search(r"changed=[1-9]", predicted), predicted[-3000:]
    converged = output_of(blocks, outputs, "ansible-playbook -i inventory.yml rackscale.imex.site\n")
    reports = project / "imex-reports"
    assert str(reports) in converged, converged[-3000:]
    # Step 6's block runs site, then validate: the last recap is validate's.
    validated = output_of(blocks, outputs, "rackscale.imex.validate").rsplit("PLAY RECAP", 1)[-1]
    assert "changed=0" in validated and "failed=0" in validated, validated[-3000:]
    assert sorted(os.listdir(reports)) == sorted(["%s.json" % domain, "summary.md"])
    with open(reports / ("%s.json" % domain)) as handle:
        assert json.load(handle)["verdict"] == "healthy"


def test_the_readme_s_hook_examples_are_copied_from_the_installed_collection(readme_run):
    project, _, _ = readme_run
    for name in ("slurm_drain.yml", "slurm_resume.yml"):
        assert filecmp.cmp(project / "hooks" / name, os.path.join(REPO, "docs", "examples", name), shallow=False)


def test_without_collections_path_ansible_does_not_find_the_installed_collection(readme_run, operator_shell):
    """What the README says happens when ansible is not told where the collection is."""
    project, _, _ = readme_run
    base, environment = operator_shell
    (base / "bare.cfg").write_text("[defaults]\nforks = 50\n")
    result = run(["ansible-doc", "-t", "module", "rackscale.imex.imex_status"], project,
                 dict(environment, ANSIBLE_CONFIG=str(base / "bare.cfg")), check=False)
    assert "rackscale.imex.imex_status was not found" in result.stdout + result.stderr


def test_the_staging_scenario_s_readme_runs_as_written_against_the_converged_rack(readme_run, operator_shell):
    project, _, _ = readme_run
    base, environment = operator_shell
    staging_readme = os.path.join(REPO, "molecule", "staging", "README.md")
    blocks = shell_blocks(markdown_section(staging_readme, "Take it into your repository")) + \
        shell_blocks(markdown_section(staging_readme, "Run it"))
    assert any("molecule test -s staging" in block for block in blocks)
    result = run(["bash", "-c", readme_script(blocks, [])], base, environment, timeout=1800)
    assert re.search(r"verify.*(completed|executed)|Verifier completed", result.stdout + result.stderr, re.I), \
        (result.stdout + result.stderr)[-4000:]
    # The project's settings for a rack reach the ansible.cfg molecule writes for the scenario.
    # Molecule's ephemeral directory of the scenario (in the project's .ansible/tmp with molecule 26).
    (molecule_cfg,) = [path for path in base.rglob("ansible.cfg") if re.fullmatch(r"molecule\..*\.staging",
                                                                                     path.parent.name)]
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(molecule_cfg)
    assert parser.get("defaults", "forks") == "50" and parser.getboolean("ssh_connection", "pipelining")
    assert "ServerAliveInterval=15" in parser.get("ssh_connection", "ssh_args")
    reports = project / "molecule" / "staging" / "imex-reports"
    with open(reports / "summary.md") as handle:
        assert "healthy" in handle.read()


@pytest.fixture(scope="module")
def tarball(readme_run):
    """The tarball the README's Install built into the project's vendor/."""
    project, _, _ = readme_run
    (built,) = (project / "vendor").glob("rackscale-imex-*.tar.gz")
    return built


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


def awx_job(private_data_dir, project_path, cache, inventory_data, playbook, survey=None):
    """A job's private data dir as RunJob lays it out: project/ (a copy of the project's checkout,
    what the project update installed into it included), requirements_collections/ (from the
    project's content cache), inventory/hosts (AWX's script printing the inventory it imported),
    env/envvars, env/extravars (the awx_* meta variables and the survey answers, typed as AWX types
    them), env/settings."""
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
    extravars.update(survey or {})
    (private_data_dir / "env" / "extravars").write_text(yaml.safe_dump(extravars))
    # AWX also suppresses the stdout file; it is kept here for the failure message.
    (private_data_dir / "env" / "settings").write_text(json.dumps({"job_timeout": 0, "suppress_ansible_output": True}))
    return ["ansible-runner", "run", private_data_dir, "-p", playbook, "--ident", "1"]


@pytest.mark.usefixtures("readme_run")   # the bed converged: this job proves that it changes nothing
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
    assert "Installing 'rackscale.imex:%s' to '%s'" % (manifest_version(tarball), target / "ansible_collections" / "rackscale" / "imex") \
        in installed.stdout, installed.stdout
    cache = stage.parent / "1"
    stage.rename(cache)   # post_run_hook: the stage becomes the cache of this project update

    # Without the collections_path line, that install lands in the execution environment's home,
    # which dies with the project update's container: no job would find it.
    bare = tmp_path / "bare_project"
    shutil.copytree(project_path, bare, ignore=shutil.ignore_patterns("ansible_collections"))
    (bare / "ansible.cfg").write_text(readme_ansible_cfg().replace("collections_path = collections\n", ""))
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
    assert report["collection_version"] == manifest_version(tarball)


def job_outcome(private_data_dir):
    """(status, stats event data, stdout) of the ansible-runner job in private_data_dir."""
    artifacts = private_data_dir / "artifacts" / "1"
    events = []
    for name in os.listdir(artifacts / "job_events"):
        with open(artifacts / "job_events" / name) as handle:
            events.append(json.load(handle))
    (stats,) = [event["event_data"] for event in events if event["event"] == "playbook_on_stats"]
    return (artifacts / "status").read_text(), stats, (artifacts / "stdout").read_text()


# Survey answers as AWX hands them to the job (env/extravars): multiple choice and text answers are
# strings, integer answers integers, multiple select answers lists of strings.
SURVEY_ANSWERS = {
    "imex_allow_busy_restart": "false",     # multiple choice
    "imex_rolling": "true",                 # multiple choice
    "imex_validate_timeout_s": 300,         # integer
    "imex_lock_stale_after_s": "3600",      # text
    "imex_trays_out_of_service": [],        # multiple select, nothing chosen
}


@pytest.mark.usefixtures("readme_run")   # the bed converged: a converge job changes nothing
def test_awx_survey_answers_of_each_type_reach_the_role_as_awx_types_them_and_a_bad_one_is_refused(
        bed, tarball, tmp_path):
    domain, hosts = bed
    project_path = tmp_path / "project"
    write_project(project_path, domain, hosts)
    environment = operator_environment(tmp_path / "home")
    run(["ansible-galaxy", "collection", "install", "-p", "collections", tarball], project_path, environment)
    exported = run(["ansible-inventory", "-i", project_path / "inventory" / "hosts.yml", "--list", "--export"],
                   project_path, environment)
    inventory_data = json.loads(exported.stdout)
    empty_cache = tmp_path / "cache"
    empty_cache.mkdir()

    answered = tmp_path / "answered"
    answered.mkdir()
    run(awx_job(answered, project_path, empty_cache, inventory_data, "playbooks/site.yml", survey=SURVEY_ANSWERS),
        tmp_path, environment, check=False)
    status, stats, output = job_outcome(answered)
    assert status == "successful", output[-4000:]
    assert stats["changed"] == {} and stats["failures"] == {}, stats
    assert stats["artifact_data"]["imex_domains"] == {domain: "healthy"}, stats

    refused = tmp_path / "refused"
    refused.mkdir()
    run(awx_job(refused, project_path, empty_cache, inventory_data, "playbooks/site.yml",
                survey=dict(SURVEY_ANSWERS, imex_rolling="maybe")), tmp_path, environment, check=False)
    status, stats, output = job_outcome(refused)
    assert status == "failed" and stats["changed"] == {}, output[-4000:]
    assert "imex_rolling" in output and "maybe" in output, output[-4000:]
    assert stats["artifact_data"]["imex_domains"] == {domain: "not_proven"}, stats
    assert stats["artifact_data"]["imex_run"]["stopped"]["stage"] == "arguments", stats
