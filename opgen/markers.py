"""Merge conflict markers in a file, found without the rest of :mod:`opgen.merge`: building an
op checks its sources for them on every load, and must not import the spec and the templates
for it (docs/benchmarks.md, "Start-up")."""

from __future__ import annotations

import re

#: A line that only a merge tool writes: ``<<<<<<< label``, ``=======`` or ``>>>>>>> label``.
_ANY_MARKER = re.compile(rb"^(?:<{7}(?: |$)|={7}$|>{7}(?: |$))")
#: What every marker line holds: a file with none of them has no marker.
_RUNS = (b"<" * 7, b"=" * 7, b">" * 7)


def conflict_marker_line(data: bytes) -> int | None:
    """The number (from 1) of the first line of ``data`` that is a conflict marker, left by a
    regenerate, ``opgen update`` or any git merge; None when there is none."""
    if not any(run in data for run in _RUNS):  # most files: no line to look at
        return None
    for number, line in enumerate(data.splitlines(), start=1):
        if _ANY_MARKER.match(line.rstrip(b"\r")):
            return number
    return None
