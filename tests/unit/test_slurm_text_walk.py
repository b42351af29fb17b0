"""A read of squeue walked as text beside the last read's (``elb.schedulers.slurm.aligned.in_text``)
is the read of its lines (``in_order``) and each line read on its own: lines that change, leave,
come back, move or are there twice; and a text that cannot be walked so (a blank line, a line
break other than ``\\n``, a character past ASCII, no ``\\n`` at the end) is read as lines, and the
next one walked again."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import elb.schedulers.slurm.parse as parse_module
from elb.schedulers.slurm import aligned
from elb.schedulers.slurm.aligned import PATCH_MOVES, Stretch, in_order, in_text, passed_over, spliced
from elb.schedulers.slurm.held import Columns, Line, carried_columns, line_of
from elb.schedulers.slurm.parse import (
    SlurmJob,
    SlurmParseError,
    SqueueMemo,
    _squeue_line,
    read_entries,
    stale_bound,
)
from elb.schedulers.slurm.view import made_of
from tests.unit.test_slurm_memo_paths import assert_carried_as_made, assert_columns_of, squeue_line


def line_by_line(text: str) -> list[SlurmJob]:
    return [_squeue_line(line, n) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def assert_read_as_alone(text: str, memo: SqueueMemo[Line]) -> list[SlurmJob]:
    """``text`` read with ``memo``: each entry the job, and the parts, that its line read on its
    own gives; the memo's lines of the read (patched from the last read's when walked as text)
    its lines. The jobs."""
    entries = read_entries(text, memo)
    jobs = line_by_line(text)
    assert [e[0] for e in entries] == jobs and [e[1] for e in entries] == list(map(made_of, jobs))
    assert memo.last_lines() == [line for line in text.splitlines() if line.strip()]
    return jobs


def walk_texts(
    before: list[str],
    lines: list[str],
    entries: list[object],
    known: dict[str, object],
    turns: int | None,
    budget: int | None,
    stretches: list[Stretch],
) -> tuple[list[object | None], list[int], list[tuple[int, str]], list[str] | None] | None:
    """``in_text`` on the texts of ``lines`` and ``before`` (``entries`` those of ``before``'s lines)."""
    text, last = "".join(f"{line}\n" for line in lines), "".join(f"{line}\n" for line in before)
    return in_text(
        text,
        last,
        list(map(len, before)),
        entries,
        known,
        before_lines=before,
        turns=turns,
        seek_budget=budget,
        stretches=stretches,
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([f"line {k}" for k in range(12)]), max_size=60),
    st.lists(st.sampled_from([f"line {k}" for k in range(16)]), max_size=60),
    st.sampled_from([None, 0, 1, 3]),
    st.sampled_from([None, 0, 2, 10]),
)
def test_in_text_is_in_order(before: list[str], lines: list[str], turns: int | None, budget: int | None) -> None:
    """The entries (the very objects), the lines' lengths and the lines out of place of the walk
    on texts are ``in_order``'s on the texts' lines, whatever the bounds."""
    entries = [object() for _ in before]
    known = dict(zip(before, entries, strict=True)) | {"line 13": object()}
    stretches: list[Stretch] = []
    walked = walk_texts(before, lines, entries, known, turns, budget, stretches)
    assert walked is not None
    found, lengths, loose, left = walked
    taken: list[Stretch] = []
    want, kept = in_order(lines, before, entries, known, turns=turns, seek_budget=budget, stretches=taken)
    assert list(map(id, found)) == list(map(id, want)) and kept == lines and lengths == list(map(len, lines))
    assert stretches == taken  # (the lines taken in place, and where from)
    assert all(lines[i] == line for i, line in loose)
    assert {i for i, _ in loose} >= {i for i, entry in enumerate(found) if entry is None}
    if left is not None:  # the lines passed over: ``before``'s own, in its order, every one that left among them
        at = iter(map(id, before))
        assert all(id(line) in at for line in left)
        assert set(before) - set(lines) <= set(left)


# Lines of widths far apart: a line looked for may be further on than the lines' mean width says.
_WIDE = [f"line {k}" + "x" * (3000 if k % 5 == 0 else 0) for k in range(16)]


def assert_walks_alike(before: list[str], lines: list[str], turns: int | None, budget: int | None) -> None:
    """``in_text`` on the texts of ``before`` and ``lines`` finds the entries ``in_order`` finds."""
    entries = [object() for _ in before]
    known = dict(zip(before, entries, strict=True))
    walked: list[Stretch] = []
    taken: list[Stretch] = []
    text_walk = walk_texts(before, lines, entries, known, turns, budget, walked)
    assert text_walk is not None
    want, _ = in_order(lines, before, entries, known, turns=turns, seek_budget=budget, stretches=taken)
    assert list(map(id, text_walk[0])) == list(map(id, want)) and walked == taken


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_WIDE[:12]), max_size=60),
    st.lists(st.sampled_from(_WIDE), max_size=60),
    st.sampled_from([None, 0, 1, 3]),
    st.sampled_from([None, 2, 10]),
)
def test_in_text_over_lines_of_far_apart_widths_is_in_order(
    before: list[str], lines: list[str], turns: int | None, budget: int | None
) -> None:
    assert_walks_alike(before, lines, turns, budget)


def test_a_line_further_on_than_the_mean_width_says_is_found() -> None:
    """Lines that left, far wider than the last read's mean line, before one still there: the
    walk finds it past them, as ``in_order`` does."""
    narrow = [f"line {k}" for k in range(50)]
    before = [*narrow, *(f"wide {k}" + "x" * 1000 for k in range(5)), "kept", "kept too"]
    assert_walks_alike(before, [*narrow, "kept", "kept too"], None, None)


def _pool(rng: random.Random, size: int) -> list[str]:
    """Distinct squeue lines, pending and running (``squeue_line``'s kinds), each its own job."""
    states = ("PENDING", "RUNNING", "PENDING", "PENDING")
    lines = []
    for k in range(size):
        state = rng.choice(states)
        nodes = "" if state == "PENDING" else rng.choice(("node001", "node[001-002]"))
        reason = rng.choice(("Priority", "Resources", "JobHeldUser", "BeginTime")) if state == "PENDING" else "None"
        lines.append(
            f"{k + 1}|cloud|{state}|{reason}|1|{rng.randint(1, 8)}|{nodes}|2026-11-24T16:01:06|N/A|30:00|user|job {k}"
        )
    return lines


def _reads(rng: random.Random, pool: list[str], count: int) -> list[list[str]]:
    """Reads in a row: most lines as they were, a stretch gone, some new, some back, one moved,
    one replaced, now and then a line twice."""
    read = pool[: len(pool) // 2]
    reads = [read]
    for _ in range(count):
        read = list(read)
        at = rng.randrange(max(1, len(read)))
        del read[at : at + rng.choice((1, 5, 40, 300))]
        for _ in range(rng.randint(0, 4)):
            where = rng.randint(0, len(read))
            read[where:where] = rng.sample(pool, rng.choice((1, 3, 30)))
        if read:
            read[rng.randrange(len(read))] = rng.choice(pool)
            read.insert(rng.randint(0, len(read)), read.pop(rng.randrange(len(read))))
        reads.append(read)
    return reads


def _sliding(rng: random.Random, pool: list[str], count: int) -> list[list[str]]:
    """Reads in a row of a sixth of ``pool``: some lines gone from the start, as many new at the
    end, and in some a line replaced, or one back from a read before (lines that move are the
    other tests': a small read's walk gives up on them soon)."""
    start, width = 0, len(pool) // 6
    reads = []
    for _ in range(count):
        read = pool[start : start + width]
        at = rng.randrange(len(read) - 10)
        change = rng.choice(("none", "replaced", "back"))
        if change == "replaced":
            read[at] = read[at] + " changed"
        elif change == "back" and start:
            read.insert(at, pool[rng.randrange(start)])
        reads.append(read)
        start = min(start + rng.randint(20, 60), len(pool) - width)
    return reads


@pytest.mark.parametrize("seed", range(3))
def test_a_memo_of_reads_walked_as_text_takes_out_the_lines_that_left(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads walked as text in a row (the first as lines, into a memo of none), lines leaving,
    coming, changing and coming back: past the memo's bound the lines the walks passed over are
    taken out (the memo is never made anew), each
    read is its lines read on their own, and the memo keeps at most ``stale_bound`` lines that
    are not in the last read."""
    rng = random.Random(seed)
    pool = _pool(rng, 6000)
    pruned: list[int] = []
    prune = parse_module._prune

    def counted(known: dict[str, Any], left: list[str]) -> None:
        pruned.append(len(known))
        prune(known, left)

    monkeypatch.setattr(parse_module, "_prune", counted)
    memo = SqueueMemo(line_of)
    kept: list[dict[str, Any]] = []
    for lines in _sliding(rng, pool, 80):
        text = "".join(f"{line}\n" for line in lines)
        jobs = assert_read_as_alone(text, memo)
        kept = kept or [memo.lines]
        assert len(memo.lines.keys() - set(lines)) <= stale_bound(len(lines))
        assert all(memo.lines[line][0] == job for line, job in zip(lines, jobs, strict=True) if line in memo.lines)
    assert pruned
    assert memo.lines is kept[0]  # (never made anew: the first read, into a memo of no line, left none behind)


@pytest.mark.parametrize("seed", range(12))
def test_reads_walked_as_text_are_the_lines_read_on_their_own(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    pool = _pool(rng, rng.choice((40, 400, 3000)))
    walks: list[bool] = []
    walk = aligned.in_text

    def counted(*args: object, **kw: object) -> object:
        found = walk(*args, **kw)  # type: ignore[arg-type]
        walks.append(found is not None)
        return found

    monkeypatch.setattr(parse_module, "in_text", counted)
    memo = SqueueMemo(line_of)
    for lines in _reads(rng, pool, 8):
        text = "".join(f"{line}\n" for line in lines)
        assert_read_as_alone(text, memo)
        assert memo.text == text
    assert walks and all(walks)


_LINE = "{}|cloud|PENDING|Priority|1|1||N/A|N/A|30:00|user|{}"
ODD = (
    _LINE.format(20, "a") + "\r" + _LINE.format(21, "b") + "\n",  # another break: two lines
    _LINE.format(20, "a") + "\x1c" + _LINE.format(21, "b") + "\n",
    _LINE.format(20, "a") + "\r\n",
    _LINE.format(22, "caf\u00e9") + "\n",  # past ASCII
    _LINE.format(20, "x") + "\u2028" + _LINE.format(21, "y") + "\n",
    "\n",  # a blank line
    "   \n",
)


@settings(max_examples=200, deadline=None)
@given(st.lists(squeue_line(), min_size=1, max_size=20, unique=True), st.data())
def test_a_text_not_walked_is_read_as_lines_and_the_next_walked_again(pool: list[str], data: st.DataObject) -> None:
    memo = SqueueMemo(line_of)
    for _ in range(4):
        lines = data.draw(st.lists(st.sampled_from(pool), max_size=25))
        text = "".join(f"{line}\n" for line in lines)
        odd = data.draw(st.sampled_from(("", *ODD)))
        if odd:
            at = data.draw(st.integers(0, len(lines)))
            text = "".join(f"{line}\n" for line in lines[:at]) + odd + "".join(f"{line}\n" for line in lines[at:])
        if data.draw(st.booleans()):
            text = text.removesuffix("\n")  # no ``\n`` at the end
        assert_read_as_alone(text, memo)


@pytest.mark.parametrize("odd", ODD)
def test_a_line_not_walked_within_a_text_walked_so_far(odd: str) -> None:
    """A line out of place that cannot be walked (among lines in place, so looked at on its own)
    has the text read as lines; the next text, plain, is walked again."""
    lines = _pool(random.Random(1), 300)
    memo = SqueueMemo(line_of)
    for text in (
        "".join(f"{line}\n" for line in lines),
        "".join(f"{line}\n" for line in lines[:150]) + odd + "".join(f"{line}\n" for line in lines[150:]),
        "".join(f"{line}\n" for line in lines[1:]),
    ):
        entries = read_entries(text, memo)
        assert [e[0] for e in entries] == line_by_line(text)
    assert memo.text is not None


@pytest.mark.parametrize("end", ["\n", ""])
@pytest.mark.parametrize("seed", range(4))
def test_columns_carried_over_long_reads_are_the_ones_made_of_the_lines(seed: int, end: str) -> None:
    """The same over reads of hundreds or thousands of lines, most in place (long stretches
    carried), some gone, new, back, moved or replaced, walked as text (each line ended by
    ``\\n``) or as lines (the last one not): each read but the first carried."""
    rng = random.Random(seed)
    pool = _pool(rng, rng.choice((400, 3000)))
    reads = ["\n".join(lines) + end for lines in _reads(rng, pool, 10)]
    assert assert_carried_as_made(reads) == len(reads) - 1


@pytest.mark.parametrize("seed", range(40))
def test_in_text_with_stretches_compared_a_few_lines_at_most_is_in_order(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stretches in place longer than the most lines compared at once are compared a slice at a
    time, each as wide as the bound, and the walk is ``in_order``'s."""
    monkeypatch.setattr(aligned, "FIRST_SLICE", 1)
    monkeypatch.setattr(aligned, "TEXT_SLICE_MOST", 2)
    draw = random.Random(seed)
    pool = [f"line {k}" for k in range(40)]
    before = draw.sample(pool, 30)
    lines = [line for line in before if draw.random() > 0.1]
    for _ in range(draw.randint(0, 4)):
        lines.insert(draw.randint(0, len(lines)), draw.choice(pool))
    assert_walks_alike(before, lines, None, None)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([f"line {k}" for k in range(12)]), max_size=60),
    st.lists(st.sampled_from([f"line {k}" for k in range(16)]), max_size=60),
)
def test_a_list_spliced_in_place_is_the_one_made_anew(before: list[str], lines: list[str]) -> None:
    """A read's values spliced from the last read's by the stretches a walk took (``spliced``):
    patched in place, the very list handed in when few spans between them change its length
    (``PATCH_MOVES``), else a new one; either way the values ``in_order`` finds, and the values
    no stretch took are the last read's lines it passed over."""
    entries = [object() for _ in before]
    known = dict(zip(before, entries, strict=True)) | {line: object() for line in lines if line not in before}
    taken: list[Stretch] = []
    want, _ = in_order(lines, before, entries, known, stretches=taken)
    others = [want[i] for i in range(len(lines)) if not any(k <= i < k + run for k, _, run in taken)]
    made = spliced(entries, taken, others)
    assert made is not entries and list(map(id, made)) == list(map(id, want))
    gone = passed_over(entries, taken)
    assert sorted(map(id, gone)) == sorted(
        id(entries[j]) for j in range(len(before)) if not any(k <= j < k + run for _, k, run in taken)
    )
    starts = [(0, 0), *((i + run, j + run) for i, j, run in taken)]  # where each span between stretches starts
    moved = sum(i - at != j - done for (i, j, _), (at, done) in zip(taken, starts, strict=False))
    patched = list(entries)
    got = spliced(patched, taken, others, in_place=True)
    assert list(map(id, got)) == list(map(id, want))
    assert (got is patched) == (moved <= PATCH_MOVES)


@pytest.mark.parametrize("seed", range(6))
def test_reads_that_hand_back_their_lines_are_patched_into_the_next(seed: int) -> None:
    """Reads in a row whose caller hands each read's lines back to the next (``read_entries``'s
    ``mine``, as the driver does), walked as text, lines gone from the start and new at the end,
    one replaced or back: each read after the first is the very list of the read before,
    patched, its lines read on their own, and the columns carried from the read before's are
    the ones made of its lines. A list not handed back is never changed."""
    rng = random.Random(seed)
    pool = _pool(rng, 3000)
    memo = SqueueMemo(line_of)
    last: Columns | None = None
    patched = 0
    for lines in _sliding(rng, pool, 12):
        text = "".join(f"{line}\n" for line in lines)
        entries = read_entries(text, memo, mine=last.lines if last is not None else None)
        assert [e[0] for e in entries] == line_by_line(text)
        patched += last is not None and entries is last.lines
        read = carried_columns(entries, memo.splice, last)
        assert_columns_of(read, entries)
        last = read
    assert patched == 11
    kept = list(memo.last_entries)
    text = "".join(f"{line}\n" for line in pool[100:500])
    assert read_entries(text, memo) is not kept and memo.last_entries is not kept  # (not handed back)


def test_a_read_that_fails_after_patching_its_lines_leaves_a_memo_made_anew() -> None:
    """A line that cannot be read, new in a read that patches the lines handed back: the read
    fails, and the next read (its lines handed back, changed half way) is its lines read on their
    own."""
    lines = _pool(random.Random(3), 400)
    memo = SqueueMemo(line_of)
    first = read_entries("".join(f"{line}\n" for line in lines), memo)
    second = read_entries("".join(f"{line}\n" for line in lines[1:]), memo, mine=first)
    assert second is first
    broken = [*lines[2:200], "9999|cloud|PENDING|Priority|one|1||N/A|N/A|30:00|user|bad", *lines[200:]]
    with pytest.raises(SlurmParseError):
        read_entries("".join(f"{line}\n" for line in broken), memo, mine=second)
    text = "".join(f"{line}\n" for line in lines[2:])
    assert [e[0] for e in read_entries(text, memo, mine=second)] == line_by_line(text)
