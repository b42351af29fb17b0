"""A read's lines found among the read before's in their order, most without hashing a line.

From one poll of squeue to the next most lines are the very same text in the same order: jobs
leave and come in stretches, and the rest stay as they were. ``in_order`` walks the new lines
beside the last read's: a stretch equal in place (compared a slice at a time, in C: a line's
characters compared, not hashed) takes the last read's entries as they are; a line that is not
in place is looked up in the memo (``known``), and when the memo has it the walk looks for it a
little further on in the last read (lines that left) and goes on from there. The walk is
bounded: past ``turns`` lines out of place, or once it has looked through ``seek_budget`` of the
last read's lines, the rest is looked up line by line, what a read costs without it. Pure (but
for the lists it returns).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress, count
from operator import ne
from typing import TypeVar

E = TypeVar("E")

FIRST_SLICE = 64  # lines compared in place at once, doubled while they are equal
SEEK = 4_096  # how far on in the last read a line out of place is looked for


def same_run(lines: Sequence[str], i: int, before: Sequence[str], j: int) -> int:
    """How many of ``lines`` from ``i`` are, in their order, ``before``'s from ``j``."""
    limit = min(len(lines) - i, len(before) - j)
    done, width = 0, FIRST_SLICE
    while done < limit:
        width = min(width, limit - done)
        ours, theirs = lines[i + done : i + done + width], before[j + done : j + done + width]
        if ours == theirs:
            done += width
            width *= 2
            continue
        return done + next(compress(count(), map(ne, ours, theirs)))
    return done


def in_order(
    lines: list[str],
    before: list[str],
    entries: list[E],
    known: Mapping[str, E],
    *,
    turns: int | None = None,
    seek_budget: int | None = None,
) -> tuple[list[E | None], list[str]]:
    """Each of ``lines``'s entries (None: a line ``known`` lacks) and the lines themselves, those
    found in place as ``before``'s objects (``before``: the last read's lines, ``entries`` theirs;
    ``known``: every line's entry a memo keeps, the last read's among them). At most ``turns``
    lines out of place (default: a thirty-second of ``lines``) and ``seek_budget`` of ``before``'s
    lines looked through to find them (default: twice ``lines``); then the rest looked up."""
    n, m = len(lines), len(before)
    turns_left = n // 32 if turns is None else turns
    budget = 2 * n if seek_budget is None else seek_budget
    found: list[E | None] = []
    kept: list[str] = []
    i = j = 0
    while i < n:
        if j < m:
            run = same_run(lines, i, before, j)
            if run:
                found += entries[j : j + run]
                kept += before[j : j + run]
                i += run
                j += run
                continue
        if j >= m or turns_left <= 0:  # nothing left to compare in place, or too many lines out of it
            rest = lines[i:]
            found += map(known.get, rest)
            kept += rest
            break
        turns_left -= 1
        line = lines[i]
        entry = known.get(line)
        found.append(entry)
        kept.append(line)
        i += 1
        if entry is not None and budget > 0:  # a line read before: the lines up to it in ``before`` left
            end = min(m, j + SEEK, j + budget)
            try:
                at = before.index(line, j, end)
            except ValueError:
                budget -= end - j
            else:
                budget -= at - j
                j = at + 1
    return found, kept


__all__: Sequence[str] = ("in_order", "same_run")
