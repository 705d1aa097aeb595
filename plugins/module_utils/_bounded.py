# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a tray command that can hang (nvidia-imex-ctl, nvidia-smi, systemctl) with a time limit.

One policy for every module: the command runs behind coreutils ``timeout``, which puts it in a
process group of its own and signals the whole group, so children the command started stop too;
``-k`` follows with SIGKILL when the command ignores the first signal. Without ``timeout`` the
call is refused: an unbounded call can hang a run on a wedged GPU or daemon, which is worse than
asking for coreutils, present on every distribution the collection supports.
"""
from __future__ import annotations

KILL_GRACE_SECONDS = 5
C_LOCALE = {'LANG': 'C', 'LC_ALL': 'C'}
# coreutils timeout: 124 = time limit reached, 137 = still running after -k and killed. A negative
# code is a process killed by a signal as Python reports it (-9: SIGKILL), seen when timeout itself
# is killed: every one of them means the command did not finish.
_TIMEOUT_RCS = (124, 137)


def is_hung(rc):
    return rc in _TIMEOUT_RCS or rc < 0


class BoundedRunner:
    """``run(args, seconds)`` -> (rc, stdout, stderr, hung), in the C locale."""

    def __init__(self, module):
        self.module = module
        self.timeout_path = module.get_bin_path('timeout', opt_dirs=['/usr/bin', '/bin'])
        if not self.timeout_path:
            module.fail_json(msg='coreutils timeout not found on PATH, /usr/bin or /bin: it bounds the calls of '
                                 'nvidia-imex-ctl, nvidia-smi and systemctl, which can hang')

    def run(self, args, seconds):
        argv = [self.timeout_path, '-k', str(KILL_GRACE_SECONDS), str(seconds)] + list(args)
        rc, out, err = self.module.run_command(argv, environ_update=C_LOCALE)
        return rc, out, err, is_hung(rc)
