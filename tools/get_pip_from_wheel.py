"""Stand-in for ansible-test's pip bootstrap script (get-pip.py), built from PyPI's pip wheel.

ansible-test creates a virtual environment per sanity test and bootstraps pip in it with a
get-pip.py that it downloads from a host outside the package registries this project may use.
ansible-test reads that script from ~/.ansible/test/cache/get_pip_<version>.py when it exists;
tools/bootstrap places this file there, next to the pip wheel fetched from PyPI. Like get-pip.py,
it takes pip-install arguments and installs pip itself from the wheel.
"""
from __future__ import annotations

import glob
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_WHEELS = sorted(glob.glob(os.path.join(_HERE, "pip-*.whl")))
if not _WHEELS:
    sys.exit("no pip wheel next to %s; run tools/bootstrap again" % __file__)

sys.path.insert(0, _WHEELS[-1])
from pip._internal.cli.main import main  # noqa: E402  (importable only from the wheel path)

# get-pip.py understands these two itself; pip install does not.
_ARGS = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", "--find-links", _HERE] + _ARGS))
