# Note that this module util is PRIVATE to the collection. It can have breaking changes at any time.
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Small text helpers shared by the parsers and the sentences the modules print."""
from __future__ import annotations


class ParseError(Exception):
    """A tool printed something a parser cannot read; ``raw`` holds the full text."""

    def __init__(self, message, raw):
        super().__init__(message)
        self.message = message
        self.raw = raw


class ProblemsError(ValueError):
    """Input is invalid; ``problems`` holds one message per problem, str() joins them with '; '."""

    def __init__(self, problems):
        if isinstance(problems, str):
            problems = [problems]
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


class DetailedError(Exception):
    """A step failed; ``message`` is for the operator, ``details`` go into the module result."""

    def __init__(self, message, **details):
        super().__init__(message)
        self.message = message
        self.details = details


def format_index_ranges(indices):
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'."""
    parts = []
    start = previous = None
    for index in sorted(set(indices)):
        if start is not None and index == previous + 1:
            previous = index
            continue
        if start is not None:
            parts.append(_range_text(start, previous))
        start = previous = index
    if start is not None:
        parts.append(_range_text(start, previous))
    return ', '.join(parts)


def _range_text(start, end):
    return str(start) if start == end else '%d-%d' % (start, end)
