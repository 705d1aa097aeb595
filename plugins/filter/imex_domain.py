# Copyright: contributors to rackscale.imex
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters over the controller-side IMEX domain model (plugins/plugin_utils/_domain.py).

Documentation: the sibling file imex_domain_model.yml.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.rackscale.imex.plugins.plugin_utils._domain import (
    DEFAULT_MAX_NODES,
    DEFAULT_PARENT,
    HOST_VAR_KEYS,
    DomainModelError,
    build_model,
    check_play,
)


# Set on every host by the vars plugin rackscale.imex.group_tree: {group: [its direct child groups]}.
GROUP_CHILDREN_VAR = "imex_group_children"
# A tray's domain, named by a host variable (a domain group's group_vars, discover.yml, or a
# constructed inventory): no ansible.cfg setting needed.
DOMAIN_VAR = "imex_domain"
ENABLE_GROUP_TREE = (
    "set imex_domain on every tray to the name of its domain group (for example imex_domain: rack07 in "
    "group_vars/rack07.yml), or enable the vars plugin rackscale.imex.group_tree, which gives plays the "
    "inventory's group tree: vars_plugins_enabled = host_group_vars,rackscale.imex.group_tree in the "
    "[defaults] section of ansible.cfg (or ANSIBLE_VARS_ENABLED=host_group_vars,rackscale.imex.group_tree); "
    "the domain groups are the child groups of %s"
)


def _declared_domains(groups, hostvars, parent):
    """({host: domain} from imex_domain for the trays of ``parent`` that set it, [problem])."""
    declared, problems = {}, []
    for host in groups.get(parent) or ():
        try:
            value = hostvars[host].get(DOMAIN_VAR)
        except (KeyError, AnsibleError, AttributeError) as exc:
            problems.append("tray %s: %s cannot be read: %s" % (host, DOMAIN_VAR, exc))
            continue
        if value not in (None, ""):
            declared[str(host)] = str(value)
    return declared, problems


def _domains_from_variable(groups, declared, tree, parent):
    """(domain names, {domain: trays}, [problem]) from imex_domain, checked against the group tree
    where the vars plugin gives it: the two must agree."""
    problems = []
    hosts = [str(host) for host in groups.get(parent) or ()]
    missing = [host for host in hosts if host not in declared]
    if missing:
        problems.append("trays %s set no %s while other trays of %s do; set it on every tray (the name of its "
                        "domain group)" % (", ".join(missing), DOMAIN_VAR, parent))
    names, members = [], {}
    for host in hosts:
        if host in declared:
            name = declared[host]
            if name not in members:
                names.append(name)
                members[name] = []
            if host not in members[name]:
                members[name].append(host)
    if tree is not None:
        in_tree = {}
        for child in tree:
            for host in groups.get(child) or ():
                in_tree.setdefault(str(host), []).append(child)
        disagree = ["%s (%s = %s, group %s)" % (host, DOMAIN_VAR, declared[host], ", ".join(in_tree.get(host) or ["none"]))
                    for host in hosts if host in declared and in_tree.get(host, []) != [declared[host]]]
        if disagree:
            problems.append("%s and the child groups of %s disagree on trays %s; make them name the same domain"
                            % (DOMAIN_VAR, parent, "; ".join(disagree)))
    for name in names:
        grouped = [str(host) for host in groups.get(name) or () if str(host) in hosts]
        if name in groups and sorted(grouped) != sorted(members[name]):
            problems.append("%s = %s on %s, but group %s holds %s; make them name the same trays"
                            % (DOMAIN_VAR, name, ", ".join(members[name]), name, ", ".join(grouped) or "none of them"))
    return names, members, problems


def _child_groups(groups, hostvars, parent):
    """Names of the direct child groups of ``parent``, from the group_tree vars plugin's variable.

    The ``groups`` variable flattens the hierarchy (a group lists its descendants' hosts), so it
    cannot tell a rack's partitions from the rack; the vars plugin hands every host the child groups
    of each of its groups. Any host of the parent knows the parent's children. An unknown or empty
    parent gives [] here: build_model reports it from ``groups``. None when no host carries the
    variable (the plugin is not enabled).
    """
    hosts = groups.get(parent) or ()
    if not hosts:
        return []
    try:
        children = hostvars[hosts[0]].get(GROUP_CHILDREN_VAR)
    except (KeyError, AnsibleError, AttributeError):
        return None
    if not isinstance(children, Mapping):
        return None
    return [str(name) for name in children.get(parent) or ()]


def _plain(value):
    """Copy templated data into plain Python types, so the model carries no lazy containers."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, Mapping):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _needed_host_vars(groups, hostvars, names):
    """{host: {key: value}} for the hosts of ``names``, reading only the keys the model uses.

    Reading a key of a HostVars entry templates it; a template error is reported with the tray
    and key instead of a bare traceback, and every such error is collected.
    """
    hosts = []
    for name in names:
        for host in groups.get(name) or ():
            if host not in hosts:
                hosts.append(host)
    found = {}
    problems = []
    for host in hosts:
        try:
            host_vars = hostvars[host]
        except (KeyError, AnsibleError) as exc:
            problems.append("tray %s: its variables cannot be read: %s" % (host, exc))
            continue
        if not isinstance(host_vars, Mapping):
            found[host] = {}
            continue
        values = {}
        for key in HOST_VAR_KEYS:
            if key not in host_vars:
                continue
            try:
                values[key] = _plain(host_vars[key])
            except AnsibleError as exc:
                problems.append("tray %s: %s cannot be templated: %s" % (host, key, exc))
        found[host] = values
    return found, problems


def _whole_number(value):
    """Extra vars given as key=value on the command line arrive as strings: accept '18' for 18."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return value


def _flag(value, argument):
    try:
        return boolean(value, strict=True)
    except TypeError:
        raise AnsibleFilterError("%s must be true or false, got %r" % (argument, value)) from None


def imex_domain_model(groups, hostvars, parent=DEFAULT_PARENT, max_nodes=DEFAULT_MAX_NODES,
                      allow_mixed_families=False, driver_version=None, domains=None,
                      require_declared_size=False, job_slice_count=1):
    """Build the IMEX domain model from ``groups`` and ``hostvars`` (see imex_domain_model.yml)."""
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError(
            "imex_domain_model input must be the groups mapping (use groups), got %s" % type(groups).__name__
        )
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError(
            "imex_domain_model needs hostvars as its first argument, got %s" % type(hostvars).__name__
        )
    plain_groups = {str(name): [str(host) for host in hosts or ()] for name, hosts in groups.items()}
    if domains is None:
        tree = _child_groups(groups, hostvars, parent)
        declared, problems = _declared_domains(plain_groups, hostvars, parent)
        if declared:
            domain_groups, members, more = _domains_from_variable(plain_groups, declared, tree, parent)
            problems.extend(more)
            # The variable names the trays of each domain, whether or not a group of that name exists.
            plain_groups.update(members)
        elif tree is None:
            raise AnsibleFilterError(
                "imex_domain_model cannot tell the IMEX domains (no tray of %s sets %s, and none has %s): %s"
                % (parent, DOMAIN_VAR, GROUP_CHILDREN_VAR, ENABLE_GROUP_TREE % parent)
            )
        else:
            domain_groups = tree
        if problems:
            raise AnsibleFilterError(str(DomainModelError(problems)))
    elif isinstance(domains, str) or not isinstance(domains, (list, tuple)):
        raise AnsibleFilterError("domains must be a list of group names, got %s" % type(domains).__name__)
    else:
        domain_groups = [str(name) for name in domains]

    host_vars, problems = _needed_host_vars(plain_groups, hostvars, [parent] + domain_groups)
    if problems:
        raise AnsibleFilterError(str(DomainModelError(problems)))
    try:
        return build_model(
            plain_groups, host_vars, parent=parent, max_nodes=_whole_number(max_nodes),
            allow_mixed_families=_flag(allow_mixed_families, "allow_mixed_families"),
            driver_version=driver_version, domain_groups=domain_groups,
            require_declared_size=_flag(require_declared_size, "require_declared_size"),
            job_slice_count=_whole_number(job_slice_count),
        )
    except DomainModelError as exc:
        raise AnsibleFilterError(str(exc)) from None


def model_or_problems(groups, hostvars, play_hosts, **options):
    """{model, problems}: the model and the trays of the play in no domain, or every problem found.

    For a caller that reports the problems itself, one sentence each, instead of a wrapped error.
    """
    try:
        model = imex_domain_model(groups, hostvars, **options)
        check_play(model, [str(host) for host in play_hosts])
    except DomainModelError as exc:
        return {"model": None, "problems": exc.problems}
    except AnsibleFilterError as exc:
        return {"model": None, "problems": _problem_lines(str(exc))}
    return {"model": model, "problems": []}


def _problem_lines(message):
    """The '- ' lines of a DomainModelError message, or the whole message when it has none."""
    lines = [line[2:] for line in message.splitlines() if line.startswith("- ")]
    return lines or [message]


class FilterModule(object):
    """IMEX domain model filters."""

    def filters(self):
        return {
            "imex_domain_model": imex_domain_model,
        }
