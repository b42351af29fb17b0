"""A read's lines found in order among the last read's (``elb.schedulers.slurm.aligned``) are
the ones a lookup of each line in the memo finds, whatever came, left or moved, and whatever
bounds cut the walk short."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from elb.schedulers.slurm.aligned import in_order, same_run

POOL = [f"{n}|cloud|PENDING|Priority|1|1||N/A|N/A|30:00|user|job{n}" for n in range(40)]


def entry(line: str) -> tuple[str]:
    return (line.upper(),)


@st.composite
def reads(draw: st.DrawFn) -> tuple[list[str], list[str], set[str]]:
    """The last read's lines, the next read's (the last one's with stretches cut out, lines put
    in and moved), and the lines a memo keeps besides the last read's."""
    before = draw(st.lists(st.sampled_from(POOL), max_size=120))
    after = list(before)
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(("cut", "insert", "move")))
        at = draw(st.integers(0, len(after)))
        if kind == "cut":
            del after[at : at + draw(st.integers(1, 30))]
        elif kind == "insert":
            after[at:at] = draw(st.lists(st.sampled_from([*POOL, "", "new"]), min_size=1, max_size=10))
        elif after:
            line = after.pop(min(at, len(after) - 1))
            after.insert(draw(st.integers(0, len(after))), line)
    also = draw(st.sets(st.sampled_from(POOL), max_size=10))
    return before, after, also


@settings(max_examples=300, deadline=None)
@given(reads(), st.none() | st.integers(0, 8), st.none() | st.integers(0, 200))
def test_lines_found_in_order_are_the_ones_looked_up(
    read: tuple[list[str], list[str], set[str]], turns: int | None, seek_budget: int | None
) -> None:
    before, after, also = read
    known = {line: entry(line) for line in [*before, *also]}
    entries = [known[line] for line in before]
    found, kept = in_order(list(after), before, entries, known, turns=turns, seek_budget=seek_budget)
    assert found == [known.get(line) for line in after]
    assert kept == after


def test_a_read_as_the_last_one_takes_its_entries_and_lines_as_they_are() -> None:
    before = POOL * 10
    after = ["".join(list(line)) for line in before]  # (the same texts, other objects)
    entries = [entry(line) for line in before]
    found, kept = in_order(after, before, entries, {})  # (an empty memo: what is found was found in place)
    assert all(a is not b for a, b in zip(after, before, strict=True))
    assert all(a is b for a, b in zip(found, entries, strict=True))
    assert all(a is b for a, b in zip(kept, before, strict=True))


def test_lines_that_left_are_passed_over_and_the_rest_found_in_place() -> None:
    before = POOL
    after = [*POOL[5:20], "new", *POOL[20:]]
    known = {line: entry(line) for line in before}
    entries = [known[line] for line in before]
    found, _ = in_order(after, before, entries, {POOL[5]: known[POOL[5]]}, turns=2, seek_budget=10)
    # (only the first line is looked up: the rest are in place after it, past the new line)
    assert found == [known.get(line) for line in after]


def test_a_run_in_place_is_counted_to_its_first_difference() -> None:
    assert same_run(POOL, 0, POOL, 0) == len(POOL)
    assert same_run(POOL, 3, [*POOL[:30], "x"], 3) == 27
    assert same_run(POOL, 0, [], 0) == 0
