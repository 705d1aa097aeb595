# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""What a wave wrote for real, and how a refusal says it."""
from __future__ import annotations


def written(run, trays, writes):
    """{tray: [what]} this wave wrote for real on ``trays``: not the predictions (--check, a domain that is
    busy or only partly in the run), which ran in check mode."""
    found = {}
    for tray in trays:
        entry = run.trays[tray]
        real = [what for what, result in sorted((writes.get(tray) or {}).items()) if (result or {}).get("changed")
                and not (entry.tls_predicted if what == "TLS material" else entry.predicted)]
        if real:
            found[tray] = real
    return found


def written_sentence(written_now):
    """What a refusal says was written before it: exactly the writes made, tray by tray."""
    if not written_now:
        return "Nothing was written."
    return "Written before this refusal: %s." % "; ".join(
        "%s on %s" % (" and ".join(what), tray) for tray, what in sorted(written_now.items()))
