# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared way to run a module's main() in-process and read its JSON result."""
from __future__ import annotations

import json

import pytest
from ansible.module_utils import _internal as ansible_internal
from ansible.module_utils.testing import patch_module_args


@pytest.fixture
def run_module(capsys, monkeypatch):
    """run_module(module, args, check=False, diff=True) -> the module's result, plus _exit_code."""
    # Other tests in the same process may import controller code, which flips this flag and makes
    # module.warn() print on the controller instead of returning warnings in the result.
    monkeypatch.setattr(ansible_internal, "is_controller", False)

    def _run(module, args, check=False, diff=True):
        module_args = dict(args, _ansible_check_mode=check, _ansible_diff=diff)
        with patch_module_args(module_args):
            with pytest.raises(SystemExit) as exit_info:
                module.main()
        result = json.loads(capsys.readouterr().out)
        result["_exit_code"] = exit_info.value.code
        return result
    return _run
