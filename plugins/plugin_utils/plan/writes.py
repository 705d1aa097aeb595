# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""What a wave wrote for real, and how a refusal says it."""
from __future__ import annotations

from ansible_collections.rackscale.imex.plugins.plugin_utils.plan.records import UNSET


def written(run, trays, writes):
    """{tray: [what]} this wave wrote for real on ``trays``: not the predictions (--check, a domain that is
    busy or only partly in the run), which ran in check mode."""
    found = {}
    for tray in trays:
        entry = run.trays[tray]
        real = [what for what, result in sorted((writes.get(tray) or {}).items()) if (result or {}).get("changed")
                and not _predicted(entry, what)]
        if real:
            found[tray] = real
    return found


def _predicted(entry, what):
    """Whether the write of ``what`` ran in check mode: TLS material and the node list (with its hosts block)
    have their own flag, as they may be written where the domain's other writes are held back."""
    flag = {"TLS material": entry.tls_predicted, "node list": entry.node_list_predicted}.get(what, entry.predicted)
    return entry.predicted if flag is UNSET else flag


def written_sentence(written_now):
    """What a refusal says was written before it: exactly the writes made, tray by tray."""
    if not written_now:
        return "Nothing was written."
    return "Written before this refusal: %s." % "; ".join(
        "%s on %s" % (" and ".join(what), tray) for tray, what in sorted(written_now.items()))
