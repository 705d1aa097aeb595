# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""Stage reread, once the run holds the locks of the domains it has something to do on (the read's plan names
them) and has read their trays again under those locks: another run may have changed them between the first
read and the take, one whose lock this run waited for (imex_lock_wait_s) say."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan import read


def after_reread(plan, model, tray_options, reads, **arguments):
    """The plan made again from the second read: the decisions of stage read on what the trays hold now. The other
    trays keep their first read, so their domains stay as it found them, with nothing to do; the locks stay
    those taken."""
    return read.after_read(plan, model, tray_options, reads, locked=True, **arguments)
