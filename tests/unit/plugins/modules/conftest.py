# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared way to run a module's main() in-process and read its JSON result."""
from __future__ import annotations

import json

import pytest
from ansible.module_utils import _internal as ansible_internal
from ansible.module_utils.common import warnings as ansible_warnings
from ansible.module_utils.testing import patch_module_args


def _warning_text(entry):
    # ansible-core 2.19+ returns each warning as a serialized WarningSummary; older cores a plain string.
    return entry["event"]["msg"] if isinstance(entry, dict) else entry


@pytest.fixture
def run_module(capsys, monkeypatch):
    """run_module(module, args, check=False, diff=True) -> the module's result, plus _exit_code and _warnings.

    _exit_code is 0 after exit_json and 1 after fail_json; _warnings holds the text of every
    module.warn() of that run (the result's own warnings key is left as the module returned it).
    """
    # Other tests in the same process may import controller code, which flips this flag and makes
    # module.warn() print on the controller instead of returning warnings in the result.
    monkeypatch.setattr(ansible_internal, "is_controller", False)

    def _run(module, args, check=False, diff=True):
        # Warnings and deprecations are collected process-wide; start every run with none.
        monkeypatch.setattr(ansible_warnings, "_global_warnings", {})
        monkeypatch.setattr(ansible_warnings, "_global_deprecations", {})
        module_args = dict(args, _ansible_check_mode=check, _ansible_diff=diff)
        with patch_module_args(module_args):
            with pytest.raises(SystemExit) as exit_info:
                module.main()
        result = json.loads(capsys.readouterr().out)
        result["_exit_code"] = exit_info.value.code
        result["_warnings"] = [_warning_text(entry) for entry in result.get("warnings", [])]
        return result
    return _run
