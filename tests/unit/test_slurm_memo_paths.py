"""The memoised reads of Slurm against the plain ones, on generated squeue texts: ``parse_squeue``
(its lines looked up all at once) is each non-blank line read on its own, ``snapshot`` with its
memo is the one made without, and the driver's demand (each held job's reason found through the
neutral jobs the read made) is the one worked out line by line, the last pending entry of a
number giving the reason."""

from __future__ import annotations

import re
import time
from collections import Counter

from hypothesis import example, given, settings
from hypothesis import strategies as st

from elb.core import state
from elb.core.config import Config, parse_config
from elb.core.demand import NotDemand
from elb.core.model import Job, JobPhase, Node, NodeState
from elb.core.policy.view import Waiting, waiting_of
from elb.core.state import jobs_started_on, started_on
from elb.schedulers.slurm.commands import SlurmRead
from elb.schedulers.slurm.driver import _UNAVAILABLE, _WAITING_ON_NODES, Slurm, _named_by_jobs, _waiting_on_nodes
from elb.schedulers.slurm.held import (
    Columns,
    Line,
    carried_columns,
    columns,
    jobs,
    line_of,
    line_reason,
    pending_line,
    squeue_job,
)
from elb.schedulers.slurm.parse import (
    SlurmJob,
    SqueueMemo,
    _slurm_job,
    _squeue_fields,
    _squeue_line,
    expand,
    not_demand_reason,
    paired,
    parse_sinfo,
    parse_squeue,
    read_entries,
    read_squeue,
)
from elb.schedulers.slurm.view import MAX_TASKS, array_id, array_tasks, job_number, made_of, snapshot

SINFO = "node001|allocated+cloud|4|4/0/0/4|cloud*|none\nnode002|idle+cloud|4|0/4/0/4|cloud*|none\n"
REASONS = (
    "None",
    "Priority",
    "Resources",
    "JobHeldUser",
    "Dependency",
    "BeginTime",
    "QOSMaxJobsPerUserLimit",
    "ReqNodeNotAvail, UnavailableNodes:node[002-003]",
    "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions",
)
# (The start of the epoch in local time: a begin time of 0 s, which is no time for ``or``.)
EPOCH = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(0))
STAMPS = ("N/A", "2026-11-24T16:01:06", "2026-11-24T17:30:59", "2026-11-25T00:00:00", EPOCH)


@st.composite
def squeue_line(draw: st.DrawFn) -> str:
    """One line of ``SQUEUE_ARGV``'s output: plain, array task and array pending-task ids of a
    few numbers (so that numbers repeat), pending or running (on one node, two or none), with every
    kind of reason."""
    number = draw(st.integers(1, 12))
    job_id = draw(
        st.sampled_from(
            (str(number), f"{number}_{draw(st.integers(0, 9))}", f"{number}_[1-{draw(st.integers(1, 900))}%5]")
        )
    )
    pending = draw(st.booleans())
    state, nodelist = (
        ("PENDING", "") if pending else ("RUNNING", draw(st.sampled_from(("node001", "node[001-002]", ""))))
    )
    reason = draw(st.sampled_from(REASONS)) if pending else "None"
    nodes, cpus = draw(st.integers(1, 3)), draw(st.integers(1, 12))
    submitted, started = draw(st.sampled_from(STAMPS)), draw(st.sampled_from(STAMPS))
    limit = draw(st.sampled_from(("UNLIMITED", "30:00", "1-00:00:00")))
    name = draw(st.sampled_from(("a", "b|c", "job name")))
    return f"{job_id}|cloud|{state}|{reason}|{nodes}|{cpus}|{nodelist}|{submitted}|{started}|{limit}|user|{name}"


def _texts(draw: st.DrawFn) -> list[str]:
    """Reads in a row, drawn from one pool of lines (so lines come again), some blank lines."""
    pool = draw(st.lists(squeue_line(), min_size=1, max_size=30))
    reads = draw(st.lists(st.lists(st.sampled_from([*pool, "", "  "]), max_size=40), min_size=1, max_size=4))
    return ["\n".join(lines) + draw(st.sampled_from(("", "\n"))) for lines in reads]


texts = st.composite(_texts)


def line_by_line(text: str) -> list[SlurmJob]:
    return [_squeue_line(line, n) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def _slurm_config() -> Config:
    """A Slurm config of 10 nodes of 4 slots that reads nothing from disk (its paths do not exist)."""
    return parse_config(
        {
            "scheduler": "slurm",
            "state_dir": "/nonexistent/state",
            "policy": {"max_nodes": 10, "slots_per_node": 4},
            "slurm": {"requests": "/nonexistent/requests"},
            "cloud": {"provider": "local"},
        }
    )


@settings(max_examples=150, deadline=None)
@given(texts())
def test_a_memoised_read_is_each_line_read_on_its_own(reads: list[str]) -> None:
    memo = SqueueMemo(paired(made_of))
    nodes = parse_sinfo(SINFO)
    for text in reads:
        jobs, made = read_squeue(text, memo)
        assert jobs == line_by_line(text)
        assert parse_squeue(text) == jobs
        assert made == list(map(made_of, jobs))
        assert snapshot(jobs, nodes, 5.0, made=made) == snapshot(jobs, nodes, 5.0)


def assert_columns_of(read: Columns, lines: list[Line]) -> None:
    """``read`` is each of ``lines``'s parts picked out plainly."""
    assert read.lines is lines
    made = [line[1] for line in lines]
    assert list(map(id, read.jobs)) == [id(job) for each in made for job in (each if type(each) is tuple else (each,))]
    assert list(map(id, read.answers)) == [id(line[3]) for line in lines]
    assert read.others == [i for i, line in enumerate(lines) if not squeue_job(line).pending]
    assert read.several == [i for i, each in enumerate(made) if type(each) is tuple]
    pending = Counter(line[2] for line in lines if line[2] is not None)
    assert read.shared == {n for n, times in pending.items() if times > 1}
    assert read.distinct == ([] if read.shared else [set(pending)])
    assert [read.job_at(i) for i in range(len(lines) + 1)] == [
        sum(len(each) if type(each) is tuple else 1 for each in made[:i]) for i in range(len(lines) + 1)
    ]


@settings(max_examples=150, deadline=None)
@given(texts())
def test_the_lines_of_other_than_one_job_are_found_by_their_numbers(reads: list[str]) -> None:
    """``several`` (the lines whose neutral jobs are a tuple: running over several nodes, or on
    none) is what the type of each line's jobs says, and the snapshot made with it the plain one."""
    memo = SqueueMemo(line_of)
    nodes = parse_sinfo(SINFO)
    for text in reads:
        lines = read_entries(text, memo)
        read = columns(lines)
        assert_columns_of(read, lines)
        made = [line[1] for line in lines]
        assert snapshot((), nodes, 5.0, made=made, several=read.several) == snapshot(jobs(lines), nodes, 5.0)
        assert snapshot((), nodes, 5.0, neutral=read.jobs) == snapshot(jobs(lines), nodes, 5.0)


def assert_carried_as_made(reads: list[str], *, hand_back: bool = False, fields: bool = False) -> int:
    """Each of ``reads`` read in a row with one memo: its lines' columns carried from the read
    before's (by the memo's splice) are the ones made of its lines. How many were carried.
    ``hand_back``: each read's lines handed back to the next (``read_entries``'s ``mine``, as
    the driver does), which may patch them into its own: each read is still its lines read on
    their own. ``fields``: pending lines made of their fields (``pending_line``, as
    ``SlurmCommands``' memo makes them)."""
    memo = SqueueMemo(line_of, pending_line if fields else None)
    last: Columns | None = None
    carried = 0
    for text in reads:
        lines = read_entries(text, memo, mine=last.lines if hand_back and last is not None else None)
        if hand_back:
            assert list(jobs(lines)) == line_by_line(text)
        splice = memo.splice
        read = carried_columns(lines, splice, last)
        assert_columns_of(read, lines)
        carried += splice is not None and last is not None
        last = read
    return carried


@settings(max_examples=300, deadline=None)
@given(texts())
def test_columns_carried_from_the_read_before_are_the_ones_made_of_the_lines(reads: list[str]) -> None:
    """Reads walked as text or as lines (blank lines, no ``\n`` at the end), lines coming, leaving,
    moving and there twice: the columns carried are each line's parts picked out."""
    assert_carried_as_made(reads)


@settings(max_examples=150, deadline=None)
@given(texts())
def test_columns_carried_from_lines_handed_back_are_the_ones_made_of_the_lines(reads: list[str]) -> None:
    """The same with each read's lines handed back to the next (which may patch them), pending
    lines made of their fields."""
    assert_carried_as_made(reads, hand_back=True, fields=True)


@settings(max_examples=200, deadline=None)
@given(texts())
@example(["7|cloud|PENDING|Priority|1|1|node002|N/A|N/A|UNLIMITED|user|a\n"])  # (a node list: kept as its job)
def test_a_pending_line_made_of_its_fields_is_the_line_of_its_job(reads: list[str]) -> None:
    """A memo that makes pending lines of their fields (``pending_line``, ``SlurmCommands``'):
    each entry is ``line_of`` its job's, but for the line's text in place of the job when the
    line is pending with no node list; the job read again of the text (``squeue_job``) and its
    reason (``line_reason``) are the job's."""
    memo = SqueueMemo(line_of, pending_line)
    for text in reads:
        entries = read_entries(text, memo)
        read = [line for line in text.splitlines() if line.strip()]
        for line, entry, job in zip(read, entries, line_by_line(text), strict=True):
            plain = line_of(job)
            assert entry[1:] == plain[1:] and squeue_job(entry) == job and line_reason(entry) == job.reason
            assert entry[0] == (line if job.pending and not job.nodelist else job)


@settings(max_examples=300, deadline=None)
@given(st.lists(squeue_line(), min_size=1, max_size=30))
def test_pending_line_is_line_of_the_job_of_its_fields(lines: list[str]) -> None:
    """``pending_line`` of a pending line's text and fields is ``line_of`` its job (the neutral
    job, the number, the answer from the line alone: held, for a begin time or none) with the
    text in place of the job."""
    for line in lines:
        fields = _squeue_fields(line, 1)
        job = _slurm_job(*fields)
        if job.pending:
            assert pending_line(line, fields) == (line, *line_of(job)[1:])


@settings(max_examples=150, deadline=None)
@given(texts(), st.sampled_from(("node001", "node002", "node003")))
def test_a_read_of_lines_made_of_their_fields_says_what_one_of_jobs_says(reads: list[str], name: str) -> None:
    """``SlurmRead`` of lines made as ``SlurmCommands`` makes them (pending ones of their
    fields) against their jobs: the jobs on a node, the names pending jobs wait for (by the
    reason Slurm gives them), whether one waits for nodes."""
    memo = SqueueMemo(line_of, pending_line)
    nodes = tuple(parse_sinfo(SINFO))
    for text in reads:
        read = SlurmRead(nodes, read_entries(text, memo), memo.splice)
        sjobs = line_by_line(text)
        assert read.jobs == tuple(sjobs)
        assert read.jobs_on(name) == tuple(j for j in sjobs if name in j.nodelist)
        pending = [j.reason for j in sjobs if j.pending]
        named = {n for r in pending if r.startswith(_UNAVAILABLE) for n in expand(r[len(_UNAVAILABLE) :])}
        assert _named_by_jobs(read) == tuple(sorted(named))
        assert _waiting_on_nodes(read) == any(r.startswith(_WAITING_ON_NODES) for r in pending)


def held_line_by_line(jobs: list[SlurmJob], now: float, due_since: dict[str, float]) -> list[NotDemand]:
    """The held jobs' answers worked out plainly: each pending squeue entry's number and the
    last pending entry of that number's reason; a begin time squeue no longer shows is due since
    the first read that showed it so (``due_since``, by squeue's id, kept across reads)."""
    last: dict[int, SlurmJob] = {}
    for sj in jobs:
        if sj.pending:
            last[int(sj.job_id.split("_", 1)[0])] = sj
    out = []
    seen: dict[str, float] = {}
    for job in snapshot(jobs, [], now).jobs:
        if job.phase is not JobPhase.HELD:
            continue
        line = last.get(job.job_id)
        reason = not_demand_reason(line.reason if line is not None else "") or "held by Slurm"
        until = None
        if line is not None and line.reason == "BeginTime":
            until = line.started or None  # (a begin time of 0 s is squeue's N/A too)
            if until is None:
                until = seen[line.job_id] = due_since.get(line.job_id, now)
        out.append(NotDemand(job, reason, until=until, held=until is None))
    due_since.clear()
    due_since.update(seen)
    return out


class Answers:
    """A Slurm client that answers each read with the next of ``reads``."""

    def __init__(self, reads: list[str]) -> None:
        self.reads = iter([*reads, reads[-1]])
        self.memo = SqueueMemo(line_of, pending_line)  # (``SlurmCommands``')

    def read(self, *, mine: object = None) -> SlurmRead:
        lines = read_entries(next(self.reads), self.memo, mine=mine)
        return SlurmRead(tuple(parse_sinfo(SINFO)), lines, self.memo.splice)

    def resume_timeout(self) -> float:
        return 600.0


class NoAsks:
    def add_slurm_request(self, kind: str, nodes: str, asked_at: float, source: str, now: float) -> bool:
        return False

    def add_asks(self, kind: object, nodes: object, since: float, detail: str, now: float) -> int:
        return 0

    def asks(self, *, open_only: bool = True) -> list[object]:
        return []


@settings(max_examples=150, deadline=None)
@given(texts())
@example([f"5|cloud|PENDING|BeginTime|1|1||{EPOCH}|{EPOCH}|UNLIMITED|user|a\n"])  # a begin time of 0 s: now
@example(  # a begin time passed, on a number whose last pending entry waits for nothing: not read due then
    [
        "1_[1-1%5]|cloud|PENDING|BeginTime|1|1||N/A|N/A|UNLIMITED|user|a\n"
        "1_[1-1%5]|cloud|PENDING|None|1|1||N/A|N/A|UNLIMITED|user|a",
        "1_[1-1%5]|cloud|PENDING|BeginTime|1|1||N/A|N/A|UNLIMITED|user|a",
    ]
)
@example(  # the last pending entry of a number is the one whose begin time passed: due since it was read so
    [
        "2|cloud|PENDING|JobHeldUser|1|1||N/A|N/A|UNLIMITED|user|a\n2|cloud|PENDING|BeginTime|1|1||N/A|N/A|UNLIMITED|user|a",
        "2|cloud|PENDING|JobHeldUser|1|1||N/A|N/A|UNLIMITED|user|a\n2|cloud|PENDING|BeginTime|1|1||N/A|N/A|UNLIMITED|user|a",
    ]
)
def test_the_drivers_held_jobs_are_the_ones_worked_out_line_by_line(reads: list[str]) -> None:
    """At each read, later each time, the held jobs' answers of the driver (the ones of the read
    before kept for the very same line) are the plain ones: lines come and go, a number's last
    pending entry changes, a begin time squeue no longer shows is due since the first read that
    showed it so."""
    cfg = _slurm_config()
    records = (Node("node001", NodeState.READY, 1.0, slots=4),)
    driver = Slurm(cfg, NoAsks(), Answers(reads))  # type: ignore[arg-type]
    due_since: dict[str, float] = {}
    for i, text in enumerate([*reads, reads[-1]]):  # the last read twice: the same lines at a later time
        now = 7.0 + i
        read = driver.read(records, now)
        demand = driver.demand(read, records, 4)
        assert list(demand.not_demand) == held_line_by_line(line_by_line(text), now, due_since)


@settings(max_examples=150, deadline=None)
@given(texts())
def test_the_jobs_started_on_each_host_a_read_gives_are_a_scans_of_its_jobs(reads: list[str]) -> None:
    """The driver's read hands ``jobs_started_on`` the jobs of its lines that are not pending
    (``started_among``): its answer for the snapshot's jobs is the one kept for them, and is
    ``started_on``'s scan of every job, read after read (lines running on one node, two, none)."""
    cfg = _slurm_config()
    records = (Node("node001", NodeState.READY, 1.0, slots=4),)
    driver = Slurm(cfg, NoAsks(), Answers(reads))  # type: ignore[arg-type]
    for i in range(len(reads)):
        snap = driver.read(records, 7.0 + i).snapshot
        kept = state._LAST_STARTED.pair
        assert kept is not None and kept[0] is snap.jobs
        assert jobs_started_on(snap.jobs) == {h: tuple(js) for h, js in started_on(snap.jobs).items()}


@settings(max_examples=200, deadline=None)
@given(texts())
def test_the_change_a_read_hands_over_takes_the_read_befores_jobs_to_its_own(reads: list[str]) -> None:
    """Each read of the driver that carried its lines from the read before's hands over how its
    jobs differ from that read's (``SchedulerRead.change``): the jobs of the read before less
    those that left, with those that came, are its jobs (each the very object, as many times),
    and the waiting jobs a view follows from it are a fresh view's; a read with its lines made
    anew (a blank line, the first) hands none."""
    cfg = _slurm_config()
    records = (Node("node001", NodeState.READY, 1.0, slots=4),)
    driver = Slurm(cfg, NoAsks(), Answers(reads))  # type: ignore[arg-type]
    before: tuple[Job, ...] | None = None
    last: Waiting | None = None
    for i, text in enumerate([*reads, reads[-1]]):
        now = 7.0 + i
        read = driver.read(records, now)
        jobs = read.snapshot.jobs
        change = read.change
        if before is None or "\n\n" in text or not text.endswith("\n"):
            assert change is None or change.before is before
        if change is not None:
            assert change.before is before and change.after is jobs
            count = Counter(map(id, change.before))
            count.subtract(map(id, change.left))
            count.update(map(id, change.came))
            assert +count == Counter(map(id, jobs))
        last = waiting_of(jobs, now, last, change)
        fresh = waiting_of(jobs, now)
        assert list(map(id, last.pending)) == list(map(id, fresh.pending))
        assert (last.slots, last.plain) == (fresh.slots, fresh.plain)
        before = jobs


_ARRAY = re.compile(r"^(\d+)(?:_(.*))?$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?(?::(\d+))?$")


def number_by_expression(job_id: str) -> int:
    """The job's number as ``_ARRAY`` reads it (the digits it starts with, before a ``_`` or the end)."""
    m = _ARRAY.match(job_id)
    return int(m.group(1)) if m else 0


def tasks_by_expression(job_id: str) -> int:
    """An entry's tasks as the expressions read them: ``_ARRAY``'s tail in brackets, each part
    of it ``_RANGE``'s."""
    m = _ARRAY.match(job_id)
    if m is None or not m.group(2) or not m.group(2).startswith("["):
        return 1
    total = 0
    for part in m.group(2).strip("[]").split("%", 1)[0].split(","):
        r = _RANGE.match(part)
        if r is None:
            return 1
        lo = int(r.group(1))
        hi = int(r.group(2)) if r.group(2) else lo
        step = int(r.group(3)) if r.group(3) else 1
        total += max(0, (hi - lo) // max(step, 1) + 1)
        if total >= MAX_TASKS:
            return MAX_TASKS
    return max(total, 1)


_ID_CHARS = st.sampled_from(["0", "7", "12", "_", "[", "]", "-", "%", ",", ":", "+", "a", " ", "٣", "²"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_ID_CHARS, max_size=8).map("".join))
def test_a_job_number_and_its_tasks_are_the_expressions(job_id: str) -> None:
    """``job_number`` and ``array_tasks`` (and ``array_id``, both of one split) are what the
    expressions read from every id of one line: numbers, arrays, heterogeneous ids, other
    decimal digits and digits that are not decimal."""
    assert job_number(job_id) == number_by_expression(job_id)
    assert array_tasks(job_id) == tasks_by_expression(job_id)
    assert array_id(job_id) == (number_by_expression(job_id), tasks_by_expression(job_id))


_ARRAY_PARTS = st.sampled_from(["3", "12", "٣", "²", "-", ":", ",", "%", "5", "]", "[", " ", "1000000"])


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["8_[", "8_", "٣_[", "x_[", "8_[1-", "_["]), st.lists(_ARRAY_PARTS, max_size=10).map("".join))
def test_an_arrays_tasks_are_the_expressions(head: str, tail: str) -> None:
    """``array_tasks`` of ids that mostly are arrays' pending tasks, of every form and many near
    misses (an empty part, a range without its end, a step of 0, digits that are not decimal, past
    ``MAX_TASKS``), is what the expressions read (``array_id`` too, with the job's number)."""
    job_id = head + tail
    assert array_tasks(job_id) == tasks_by_expression(job_id)
    assert array_id(job_id) == (number_by_expression(job_id), tasks_by_expression(job_id))


def test_a_snapshot_another_driver_read_has_its_held_jobs_held_by_slurm() -> None:
    """``elb status`` reads with one driver and splits the demand with another: the second has
    no squeue lines behind that snapshot, and answers each held job "held by Slurm" (its waiting
    jobs stay demand), where the driver that read it gives each its reason."""
    cfg = _slurm_config()
    text = (
        "5|cloud|PENDING|JobHeldUser|1|1||N/A|N/A|UNLIMITED|user|a\n"
        "6|cloud|PENDING|Priority|1|1||N/A|N/A|UNLIMITED|user|b\n"
    )
    records = (Node("node001", NodeState.READY, 1.0, slots=4),)
    reader = Slurm(cfg, NoAsks(), Answers([text]))  # type: ignore[arg-type]
    read = reader.read(records, 7.0)
    other = Slurm(cfg, NoAsks(), Answers([text]))  # type: ignore[arg-type]
    told = other.demand(read, records, 4).not_demand
    assert [(n.job.job_id, n.reason, n.held) for n in told] == [(5, "held by Slurm", True)]
    assert [n.reason for n in reader.demand(read, records, 4).not_demand] == ["Slurm holds it: JobHeldUser"]
