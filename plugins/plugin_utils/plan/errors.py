# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is PRIVATE to the collection. It can have breaking changes at any time.
"""What stops a run: the problems a stage found."""
from __future__ import annotations


class PlanError(ValueError):
    """Problems that stop the run; each one sentence naming the tray, group, key or value at fault."""

    def __init__(self, problems):
        super().__init__("\n".join(problems))
        self.problems = list(problems)
