"""A read's lines found among the read before's in their order, most without hashing a line.

From one poll of squeue to the next most lines are the very same text in the same order: jobs
leave and come in stretches, and the rest stay as they were. ``in_order`` walks the new lines
beside the last read's: a stretch equal in place (compared a slice at a time, in C: a line's
characters compared, not hashed) takes the last read's entries as they are; a line that is not
in place is looked up in the memo (``known``), and when the memo has it the walk looks for it a
little further on in the last read (lines that left) and goes on from there. The walk is
bounded: past ``turns`` lines out of place, or once it has looked through ``seek_budget`` of the
last read's lines, the rest is looked up line by line, what a read costs without it. Pure (but
for the lists it returns, and the ones a caller hands it to patch).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import compress, count
from operator import ne
from typing import TypeVar, cast

E = TypeVar("E")
T = TypeVar("T")

# Lines ``i`` to ``i + run`` of a read that are the last read's lines ``j`` to ``j + run``, in place
# (``in_order``'s and ``in_text``'s ``stretches``: in the order of both reads).
Stretch = tuple[int, int, int]

FIRST_SLICE = 64  # lines compared in place at once, doubled while they are equal
# The most lines of a text compared at once (``same_text_run``): each comparison copies its slice of
# the text before, and a slice of about 100 kB is made in memory already at hand, where one of
# megabytes is fresh memory each time.
TEXT_SLICE_MOST = 1_024
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
    stretches: list[Stretch] | None = None,
) -> tuple[list[E | None], list[str]]:
    """Each of ``lines``'s entries (None: a line ``known`` lacks) and the lines themselves, those
    found in place as ``before``'s objects (``before``: the last read's lines, ``entries`` theirs;
    ``known``: every line's entry a memo keeps, the last read's among them). At most ``turns``
    lines out of place (default: a thirty-second of ``before``'s) and ``seek_budget`` of ``before``'s
    lines looked through to find them (default: twice as many as it has); then the rest looked up.
    ``stretches``: given, each stretch of lines taken in place is added to it."""
    n, m = len(lines), len(before)
    turns_left = m // 32 if turns is None else turns
    budget = 2 * m if seek_budget is None else seek_budget
    found: list[E | None] = []
    kept: list[str] = []
    i = j = 0
    while i < n:
        if j < m:
            run = same_run(lines, i, before, j)
            if run:
                if stretches is not None:
                    stretches.append((i, j, run))
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


# What ``str.splitlines`` splits an ASCII text at besides ``\n``: a text with any of them is read as lines.
_OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e"


def plain_text(text: str) -> bool:
    """Whether ``text`` may be walked as text (``in_text``): ASCII, every line ended by ``\n``."""
    return text.isascii() and (not text or text[-1] == "\n")


def one_break(text: str) -> bool:
    """Whether ``str.splitlines`` splits the ASCII ``text`` at ``\n`` alone (a scan in C for each other)."""
    return not any(c in text for c in _OTHER_BREAKS)


def plain_lines(lines: list[str]) -> bool:
    """Whether none of ``lines`` (of an ASCII text split at ``\n``) is blank, and ``str.splitlines``
    splits none of them."""
    return all(map(str.strip, lines)) and one_break("".join(lines))


def same_text_run(text: str, pos: int, before: str, at: int, *, sizes: Sequence[int], j: int) -> tuple[int, int]:
    """How many of ``before``'s lines from line ``j`` (at character ``at``; ``sizes``: each line's
    length without its ``\n``) ``text`` has from character ``pos``, the very characters, and
    the characters they take. Compared the first line alone (a line out of place differs
    there), then a stretch of lines at a time (a slice of characters compared in C; doubled
    while equal, up to ``TEXT_SLICE_MOST`` lines), the first stretch that differs narrowed down
    by halves."""
    limit = len(sizes) - j
    if limit <= 0:
        return 0, 0
    first = sizes[j] + 1  # (most often the first line tells: a line out of place, or one that moved)
    if not text.startswith(before[at : at + first], pos):
        return 0, 0
    done, chars = 1, first
    width = FIRST_SLICE
    while done < limit:
        width = min(width, limit - done)
        span = sum(sizes[j + done : j + done + width]) + width
        if text.startswith(before[at + chars : at + chars + span], pos + chars):
            done += width
            chars += span
            width = min(2 * width, TEXT_SLICE_MOST)
            continue
        while width > 1:  # the first line that differs is within these ``width``
            half = width // 2
            span = sum(sizes[j + done : j + done + half]) + half
            if text.startswith(before[at + chars : at + chars + span], pos + chars):
                done += half
                chars += span
                width -= half
            else:
                width = half
        return done, chars
    return done, chars


def in_text(
    text: str,
    before: str,
    sizes: list[int],
    entries: list[E],
    known: Mapping[str, E],
    *,
    before_lines: Sequence[str],
    turns: int | None = None,
    seek_budget: int | None = None,
    stretches: list[Stretch] | None = None,
    passed: list[E] | None = None,
) -> tuple[list[E | None], list[int], list[tuple[int, str]], list[str] | None] | None:
    """``in_order`` on texts: each line's entry (None: a line ``known`` lacks), each line's
    length, the lines not taken in place (their index and text, in order), and the lines of
    ``before`` the walk passed over (``before_lines``' own objects: lines that left, or moved
    further than the walk looked; None when the walk stopped walking before the end of
    ``before``, past its bounds), of ``text`` beside ``before`` (the last read's text,
    ``before_lines`` its lines, ``sizes`` their lengths, ``entries`` their entries), without
    splitting the lines taken in place:
    a stretch of ``before``'s lines is compared with ``text`` as characters
    (``same_text_run``). Both texts are ``plain_text``, and ``before``'s lines ``plain_lines``;
    None when a line of ``text`` split out is not (then ``text`` is read as lines). The same
    walk, bounds and ``stretches`` as ``in_order``. ``passed``: given, ``entries`` and ``sizes``
    are the caller's to change, and the entries and lengths are they, patched in place when few
    lines moved (``spliced``); the entries of ``before``'s lines that no stretch took are added
    to ``passed`` first (``passed_over``)."""
    n, m = len(text), len(sizes)
    turns_left = m // 32 if turns is None else turns  # (``before``'s lines, as ``in_order``'s bounds count them)
    budget = 2 * m if seek_budget is None else seek_budget
    taken: list[Stretch] = []
    loose: list[tuple[int, str]] = []
    looked: list[E | None] = []  # the entries of the ``loose`` lines (``known``'s)
    left: list[str] | None = []
    i = pos = at = j = 0  # the line of ``text`` and where it starts; where ``before`` is, and its line
    while pos < n:
        if j < m:
            run, chars = same_text_run(text, pos, before, at, sizes=sizes, j=j)
            if run:
                taken.append((i, j, run))
                i, pos, at, j = i + run, pos + chars, at + chars, j + run
                continue
        if j >= m or turns_left <= 0:  # nothing left to compare in place, or too many lines out of it
            rest = text[pos:-1].split("\n")
            if not plain_lines(rest):
                return None
            loose += zip(count(i), rest)
            looked += map(known.get, rest)
            if j < m:  # (``before``'s lines from ``j`` not walked)
                left = None
            break
        turns_left -= 1
        end = text.index("\n", pos)
        line = text[pos:end]
        if not (line.strip() and one_break(line)):
            return None
        entry = known.get(line)
        loose.append((i, line))
        looked.append(entry)
        i, pos = i + 1, end + 1
        if entry is not None and budget > 0:  # a line read before: the lines up to it in ``before`` left
            lines = min(m - j, SEEK, budget)
            sought = _seek(before, line, at, sizes=sizes, j=j, lines=lines)
            if sought is None:
                budget -= lines
            else:
                where, skipped = sought
                budget -= skipped
                _passed(left, before_lines, j, j + skipped)
                j += skipped + 1
                at = where + len(line) + 1
    _passed(left, before_lines, j, m)  # (``text`` ended first)
    if stretches is not None:
        stretches += taken
    if passed is not None:
        passed += passed_over(entries, taken)
    found = spliced(cast("list[E | None]", entries), taken, looked, in_place=passed is not None)
    lengths = spliced(sizes, taken, [len(line) for _, line in loose], in_place=passed is not None)
    return found, lengths, loose, left


def _passed(left: list[str] | None, lines: Sequence[str], j: int, k: int) -> None:
    """Keeps in ``left`` (unless None) the lines ``j`` to ``k`` of ``lines``."""
    if left is not None:
        left += lines[j:k]


def _seek(before: str, line: str, at: int, *, sizes: list[int], j: int, lines: int) -> tuple[int, int] | None:
    """Where the whole ``line`` starts within ``before``'s ``lines`` lines from line ``j`` (at
    character ``at``; ``sizes``: each line's length), and how many lines before it; None when
    it is not there. Looked for first within as many characters as ``lines`` lines of twice the
    mean width take (most lines looked for are near: no width added up), then within the lines'
    own characters when they take more."""
    near = at + lines * 2 * (len(before) // len(sizes) + 1)
    where = _line_at(before, line, at, near)
    if where is None:
        stop = at + sum(sizes[j : j + lines]) + lines
        if stop <= near:
            return None
        where = _line_at(before, line, at, stop)
        if where is None:
            return None
    skipped = before.count("\n", at, where)
    return (where, skipped) if skipped < lines else None


def _line_at(text: str, line: str, start: int, stop: int) -> int | None:
    """Where the whole line ``line`` starts in ``text[start:stop]`` (``start`` a line's start)."""
    whole = line + "\n"
    where = text.find(whole, start, stop)
    while where > start and text[where - 1] != "\n":
        where = text.find(whole, where + 1, stop)
    return where if where >= 0 else None


# Lines ``i`` to ``k`` of a read: taken in place from the last read's lines from ``j`` on (a
# ``Stretch``), or, with ``j`` None, read anew (the lines between stretches).
Span = tuple[int, int, int | None]


def spans(stretches: Sequence[Stretch], size: int) -> list[Span]:
    """A read's ``size`` lines, in order, as the ``stretches`` it took in place and the spans of
    lines between them: what each of a read's carried values walks."""
    out: list[Span] = []
    at = 0
    for i, j, run in stretches:
        if i > at:
            out.append((at, i, None))
        out.append((i, i + run, j))
        at = i + run
    if size > at:
        out.append((at, size, None))
    return out


def carried(before: Sequence[T], spans: Sequence[Span], others: Callable[[int, int], Iterable[T]]) -> list[T]:
    """A value for each of a read's lines: ``before``'s (one for each of the last read's lines)
    for the lines of the ``spans`` taken in place, a stretch at a time, and ``others(i, k)`` for
    the lines ``i`` to ``k`` read anew."""
    out: list[T] = []
    for i, k, j in spans:
        out += others(i, k) if j is None else before[j : j + k - i]
    return out


def carried_indices(
    before: Sequence[int], spans: Sequence[Span], others: Callable[[int, int], Iterable[int]]
) -> list[int]:
    """The indices of a read's lines that are something, in order: ``before``'s (the last read's,
    in order) within the ``spans`` taken in place, each moved to its line's place now
    (``moved``), and ``others(i, k)``'s among the lines ``i`` to ``k`` read anew."""
    out: list[int] = []
    for i, k, j in spans:
        if j is None:
            out += others(i, k)
        else:
            start, end = within(before, j, k - i)
            if start < end:
                moved = i - j
                out += [n + moved for n in before[start:end]]
    return out


# A read's list patched in place only when at most this many of the spans between the stretches
# taken in place (the last aside) differ in length in the two reads: each such span moves the
# values after it.
PATCH_MOVES = 8


def spliced(before: list[T], stretches: Sequence[Stretch], others: Sequence[T], *, in_place: bool = False) -> list[T]:
    """A value for each of a read's lines: ``before``'s (the last read's lines') for the
    ``stretches`` taken in place, ``others`` (in order) for the lines between them. ``in_place``:
    ``before`` is the caller's to change, and becomes the read's when few of the spans between
    the stretches differ in length (``PATCH_MOVES``: each moves the values after it, where a new
    list copies every one); else, and without, a new list."""
    if in_place and _moves(stretches) <= PATCH_MOVES:
        shift = k = done = 0  # how far ``before``'s values have moved; ``others`` taken; ``before``'s lines passed
        at = 0  # the read's lines passed
        for i, j, run in stretches:
            came = i - at
            before[done + shift : j + shift] = others[k : k + came]
            k += came
            shift += came - (j - done)
            at, done = i + run, j + run
        before[done + shift :] = others[k:]
        return before
    out: list[T] = []
    at = k = 0
    for i, j, run in stretches:
        if i > at:
            out += others[k : k + i - at]
            k += i - at
        out += before[j : j + run]
        at = i + run
    out += others[k:]
    return out


def _moves(stretches: Sequence[Stretch]) -> int:
    """How many of the spans between ``stretches`` (before the last) differ in length in the two reads."""
    moves = at = done = 0
    for i, j, run in stretches:
        moves += i - at != j - done
        at, done = i + run, j + run
    return moves


def passed_over(before: Sequence[T], stretches: Sequence[Stretch]) -> list[T]:
    """``before``'s values (the last read's lines') that none of the ``stretches`` took, in order."""
    out: list[T] = []
    done = 0
    for _, j, run in stretches:
        out += before[done:j]
        done = j + run
    out += before[done:]
    return out


def within(before: Sequence[int], j: int, run: int) -> tuple[int, int]:
    """Where the indices ``j`` to ``j + run`` (a stretch of the last read's lines) are among
    ``before``'s (in order): a slice's start and end."""
    return bisect_left(before, j), bisect_left(before, j + run)


__all__: Sequence[str] = (
    "Span",
    "Stretch",
    "carried",
    "carried_indices",
    "in_order",
    "in_text",
    "one_break",
    "passed_over",
    "plain_lines",
    "plain_text",
    "same_run",
    "same_text_run",
    "spans",
    "spliced",
    "within",
)
