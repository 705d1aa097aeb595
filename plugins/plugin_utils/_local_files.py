# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Files written on the controller (reports), where no AnsibleModule and no atomic_move exist."""
from __future__ import annotations

import os

from ansible_collections.rackscale.imex.plugins.module_utils._files import (
    FileOpError,
    _discard,
    _encode,
    _os_reason,
    _write_temp,
)


def replace_local(path, content, mode):
    """Make ``path`` hold exactly ``content`` (str or bytes) with ``mode``, without an AnsibleModule.

    For controller-side writers (action plugins), which have no ``module.atomic_move``: a
    temporary file in the target's directory, flushed to disk and given ``mode``, then
    ``os.replace``. The target keeps its old content or has the complete new one, and a failure
    leaves no temporary file behind. The file is always rewritten (no comparison, no diff).
    """
    target = os.path.abspath(path)
    tmp_path = _write_temp(os.path.dirname(target), os.path.basename(target), _encode(content),
                           None, None, mode, path)
    try:
        os.replace(tmp_path, target)
    except OSError as exc:
        _discard(tmp_path)
        raise FileOpError("cannot replace %s: %s" % (path, _os_reason(exc))) from exc
