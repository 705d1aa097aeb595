"""Entry point of every simulated tool in a tray; install-into copies it under each tool name.

The simulator package lives in <prefix>/lib/imexsim next to the <prefix>/bin or <prefix>/sbin
holding this file, so an installed tree also works when inspected from the host.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "lib", "imexsim"))

from imexsim.launch import run  # noqa: E402  pylint: disable=wrong-import-position

sys.exit(run(sys.argv[0], sys.argv[1:]))
