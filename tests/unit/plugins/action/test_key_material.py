# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""No TLS key material in what the plan returns, when the CA, certificates and keys are given as PEM
text (a vaulted variable, an AWX credential injected as an extra var) instead of controller paths.

The role gathers each tray's options (TLS text included) under no_log, and the plan's results are
registered, printed with -v and kept by AWX as job events: none of them may carry the key."""
from __future__ import annotations

import json
import time

import pytest

from ansible_collections.rackscale.imex.tests.unit.plugins.action.test_imex_plan import (
    ADDRESSES,
    hostvars_of,
    loop,
    planned,
    play,
    read_stage,
    status,
    verdicts_stage,
)
from ansible_collections.rackscale.imex.tests.unit.plugins.tls_material import material

# A throwaway CA, certificate and key that pass the controller's checks (valid now, SAN of every tray).
MATERIAL = material(ips=["198.18.1.11", "198.18.1.12", "198.18.2.11", "198.18.2.12"], now=time.time(), days=30)
KEY, CERT, CA = MATERIAL["imex_tls_key"], MATERIAL["imex_tls_cert"], MATERIAL["imex_tls_ca"]


def body_lines(pem):
    return [line for line in pem.splitlines() if line and not line.startswith("-----")]


def leaks(recorded):
    """The key lines (and header) found in ``recorded``; booleans only, never the text itself."""
    return ["PRIVATE KEY" in recorded] + [line in recorded for line in body_lines(KEY)]


@pytest.mark.parametrize("given", [
    KEY,                                   # a vaulted host var, as written
    "\n  " + KEY,                          # a YAML block scalar with leading blank lines
    KEY.replace("\n", "\r\n"),             # a credential pasted from a Windows browser
])
def test_no_stage_of_the_plan_returns_a_key_given_as_pem_text(given):
    tls = {"imex_tls": "true", "imex_tls_ca": CA, "imex_tls_cert": CERT, "imex_tls_key": given}
    task_vars = play(hostvars_of({tray: {"options": dict(tls)} for tray in ADDRESSES}))
    first = planned("preflight", task_vars)
    assert all(entry["tls_pem"] == [True, True, True] for entry in first["plan"]["trays"].values())
    task_vars, read = read_stage(task_vars)
    statuses = loop(("rackA", status(["198.18.1.11", "198.18.1.12"], down=["198.18.1.12"])),
                    ("rackB", status(["198.18.2.11", "198.18.2.12"])))
    _task_vars, judged = verdicts_stage(statuses=statuses, task_vars=task_vars, registered=read,
                                        domains=["rackA", "rackB"])
    assert [report["verdict"] for report in judged["plan"]["verdicts"]] == ["unhealthy", "healthy"]
    recorded = json.dumps([first, read, judged])
    assert not any(leaks(recorded)), "a line of the PEM key is in a result of the plan"
    # The test sees a leak where there is one.
    assert any(leaks(recorded + json.dumps(given)))
