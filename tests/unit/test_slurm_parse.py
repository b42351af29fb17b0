"""elb.schedulers.slurm.parse on output recorded from Slurm 22.05's real daemons
(tests/fixtures/slurm/recorded/README.md says how), and on broken output."""

from __future__ import annotations

import operator
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from elb.core.demand import NotDemand
from elb.schedulers.sge.parse import parse_timestamp
from elb.schedulers.slurm.parse import (
    SinfoMemo,
    SlurmJob,
    SlurmNode,
    SlurmParseError,
    SqueueMemo,
    by_name,
    compress,
    expand,
    not_demand_reason,
    paired,
    parse_sinfo,
    parse_squeue,
    parse_time_limit,
    read_squeue,
    stale_bound,
)
from elb.schedulers.slurm.view import made_of, snapshot

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "recorded"


def read(name: str) -> str:
    return (RECORDED / name).read_text()


def test_squeue_jobs_of_every_kind() -> None:
    jobs = {j.job_id: j for j in parse_squeue(read("squeue.txt"))}
    assert len(jobs) == 16
    plain = jobs["1"]
    assert (plain.partition, plain.state, plain.reason, plain.nodelist) == (
        "cloud",
        "CONFIGURING",
        "None",
        ("node001",),
    )
    assert plain.submitted == parse_timestamp("2026-11-24T16:01:06") and plain.time_limit is None
    assert jobs["6"].nodelist == ("node001", "node002", "node003") and (jobs["6"].nodes, jobs["6"].cpus) == (3, 4)
    assert jobs["7"].name == "we|ird name"  # the name is the last field: a | stays in it
    assert jobs["14"].state == "RUNNING" and jobs["14"].time_limit == 3600.0 and jobs["14"].nodelist == ("static1",)
    assert jobs["15"].time_limit == 2 * 86400.0 and jobs["15"].started is None
    assert jobs["4"].started == parse_timestamp("2026-11-24T19:01:06")  # --begin: the time it may start
    pending = {j.job_id: j.demand for j in jobs.values() if j.pending}
    assert pending == {
        "2": False,  # JobHeldUser
        "3": False,  # Dependency
        "4": False,  # BeginTime
        "5": False,  # PartitionNodeLimit: 9 nodes in a partition of 8
        "8_[6-100%5]": False,  # JobArrayTaskLimit
        "15": True,  # Resources
    }


@pytest.mark.parametrize(
    ("reason", "demand"),
    [
        ("None", True),
        ("Resources", True),
        ("Priority", True),
        ("Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions", True),
        ("JobHeldAdmin", False),
        ("ReqNodeNotAvail, UnavailableNodes:node009", False),
        ("AssocGrpCPULimit", False),
        ("QOSMaxJobsPerUserLimit", False),
        ("DependencyNeverSatisfied", False),
        ("PartitionTimeLimit", False),
    ],
)
def test_pending_reasons(reason: str, demand: bool) -> None:
    assert (not_demand_reason(reason) is None) is demand


def test_sinfo_nodes_and_their_flags() -> None:
    nodes = by_name(parse_sinfo(read("sinfo.txt")))
    assert sorted(nodes) == [*(f"node{i:03d}" for i in range(1, 9)), "static1"]
    n1 = nodes["node001"]
    assert (n1.state, n1.powering_up, n1.cpus_allocated) == ("allocated", True, 2)
    assert (n1.cpus, n1.partitions) == (2, ("cloud",))
    assert "not_responding" in n1.flags and "cloud" in n1.flags
    n8 = nodes["node008"]
    assert (n8.state, n8.powered_down, n8.cpus_allocated > 0) == ("idle", True, False)
    assert nodes["node006"].state == "mixed" and nodes["node006"].cpus_allocated == 1
    assert nodes["static1"].flags == frozenset() and nodes["static1"].cpus_allocated > 0  # job 14 runs on it


def test_sinfo_draining_then_drained() -> None:
    draining = by_name(parse_sinfo(read("sinfo-draining.txt")))["static1"]
    assert (draining.state, draining.drain, draining.cpus_allocated > 0) == ("allocated", True, True)
    assert draining.reason == "elb: idle for 12 min|removing"  # the reason is the last field
    (drained,) = parse_sinfo(read("sinfo-drained.txt"))
    assert (drained.state, drained.drain, drained.cpus_allocated > 0) == ("idle", True, False)


def test_hostlists_as_scontrol_expands_them() -> None:
    assert list(expand("node[001-003,007],static1")) == read("scontrol-show-hostnames.txt").split()
    assert expand("") == () and expand("(null)") == ()
    assert compress(["node001", "node002", "node003", "node007"]) == "node[001-003,007]"
    with pytest.raises(ValueError, match="hostlist"):
        expand("node[3-1")


def test_a_node_in_two_partitions_is_one_node() -> None:
    text = "n1|idle|4|0/4/0/4|a*|none\nn1|idle|4|0/4/0/4|b|none\n"
    (node,) = parse_sinfo(text)
    assert node.partitions == ("a", "b")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1|cloud|PENDING|None\n", "4 fields, expected 12"),
        ("1|cloud|PENDING|None|x|1||N/A|N/A|UNLIMITED|u|n\n", "invalid literal"),
        ("1|cloud|PENDING|None|1|1||yesterday|N/A|UNLIMITED|u|n\n", "timestamp"),
        ("1|cloud|PENDING|None|1|1||N/A|N/A|soon|u|n\n", "time limit"),
        ("1|cloud|pending|None|1|1||N/A|N/A|UNLIMITED|u|n\n", "state"),
        ("1|cloud|RUNNING|None|1|1|node[1-|N/A|N/A|UNLIMITED|u|n\n", "hostlist"),
        # a job id squeue never prints (it starts with the job's number): no job 0 made of it
        ("x1|cloud|PENDING|None|1|1||N/A|N/A|UNLIMITED|u|n\n", "job 'x1'"),
        ("_3|cloud|PENDING|None|1|1||N/A|N/A|UNLIMITED|u|n\n", "job '_3'"),
    ],
)
def test_broken_squeue_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(SlurmParseError, match="squeue: line 1") as err:
        parse_squeue(text)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("n1|idle|4\n", "3 fields"),
        ("n1|sleepy+cloud|4|0/4/0/4|a|none\n", "unknown state"),
        ("n1|idle|4|0/4/0|a|none\n", "not enough values"),
        ("n1|idle|4|0/4/0/8|a|none\n", "CPUs 4 but 8"),
        ("|idle|4|0/4/0/4|a|none\n", "no node name"),
    ],
)
def test_broken_sinfo_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(SlurmParseError, match="sinfo: line 1") as err:
        parse_sinfo(text)
    assert message in str(err.value)


def test_time_limits() -> None:
    assert parse_time_limit("30:00") == 1800.0
    assert parse_time_limit("1:00:00") == 3600.0
    assert parse_time_limit("1-02:03:04") == 93784.0
    assert parse_time_limit("UNLIMITED") is None


# -- the memo of squeue's lines and of their neutral jobs -------------------------------------------


def _bench() -> Any:
    """benchmarks/bench_pass.py as a module (its squeue generator)."""
    import importlib.util
    import sys

    if "bench_pass" not in sys.modules:
        path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_pass.py"
        spec = importlib.util.spec_from_file_location("bench_pass", path)
        assert spec is not None and spec.loader is not None
        sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules["bench_pass"]


def test_a_memo_reads_squeue_as_without_and_reuses_the_lines_read_before() -> None:
    """Generated squeue texts, 5% of the lines new at each read, and the recorded one: with the
    memo carried, each read is the plain read, the jobs and the neutral jobs of the lines seen
    before are the very objects, and the neutral snapshot is the one made without the memo."""
    bench = _bench()
    texts = [bench.make_squeue(600, 40, turn=t, churn=0.05).decode() for t in range(4)]
    texts.insert(2, read("squeue.txt"))
    texts.append(texts[-1] + "\n\n")
    memo = SqueueMemo(paired(made_of))
    before: dict[str, tuple[SlurmJob, object]] = {}
    nodes = parse_sinfo(read("sinfo.txt"))
    for text in texts:
        jobs, made = read_squeue(text, memo)
        assert jobs == parse_squeue(text)
        assert made == list(map(made_of, jobs))
        lines = [line for line in text.splitlines() if line.strip()]
        pairs = list(zip(jobs, made, strict=True))
        again = [(line, p) for line, p in zip(lines, pairs, strict=True) if line in before]
        assert all(p[0] is before[line][0] and p[1] is before[line][1] for line, p in again)
        before = dict(zip(lines, pairs, strict=True))
        assert snapshot(jobs, nodes, 1.0, made=made) == snapshot(jobs, nodes, 1.0)


def pending_lines(numbers: range, reason: str = "Priority") -> list[str]:
    return [f"{n}|cloud|PENDING|{reason}|1|1||2026-11-24T16:01:06|N/A|30:00|user|job{n}" for n in numbers]


def squeue_text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def test_a_memo_keeps_the_lines_that_left_up_to_its_bound_then_only_the_last_reads() -> None:
    """Lines that left a read stay in the memo (a read that brings them back finds their very
    jobs) until more than ``stale_bound`` of the memo's lines are not in the last read: then the
    memo holds the last read's lines alone. A changed line is read anew."""
    memo = SqueueMemo(paired(made_of))
    first = pending_lines(range(1, 2001))
    jobs_first, made_first = read_squeue(squeue_text(first), memo)
    second = pending_lines(range(101, 2101))  # 100 left, 100 came
    second[5] = second[5].replace("Priority", "Resources")  # a line changed
    jobs, made = read_squeue(squeue_text(second), memo)
    assert jobs == parse_squeue(squeue_text(second)) and made == list(map(made_of, jobs))
    assert jobs[5].reason == "Resources"
    assert set(first) | set(second) == memo.lines.keys()  # 101 not in the last read: kept
    again, made_again = read_squeue(squeue_text(first), memo)  # they come back
    assert all(map(operator.is_, again, jobs_first)) and all(map(operator.is_, made_again, made_first))
    assert stale_bound(2000) == 1000
    third = pending_lines(range(3001, 4001)) + first[1000:]  # 1000 of the last read's left, and 101 before
    jobs, made = read_squeue(squeue_text(third), memo)
    assert jobs == parse_squeue(squeue_text(third)) and made == list(map(made_of, jobs))
    assert memo.lines.keys() == set(third)  # made anew: the lines that left are gone


def test_a_memo_stays_within_its_bound_over_many_reads() -> None:
    """Reads in a row, each with a tenth of its lines new: the memo holds every line of the last
    read and at most ``stale_bound`` others."""
    memo = SqueueMemo(paired(made_of))
    for turn in range(30):
        lines = pending_lines(range(1 + turn * 300, 3001 + turn * 300))
        read_squeue(squeue_text(lines), memo)
        assert set(lines) <= memo.lines.keys()
        assert len(memo.lines) - len(lines) <= stale_bound(len(lines))


def test_a_memo_reads_a_bad_line_as_without() -> None:
    memo = SqueueMemo(paired(made_of))
    good = read("squeue.txt")
    parse_squeue(good, memo=memo)
    bad = good + "9|cloud|PENDING|None|x|1||N/A|N/A|UNLIMITED|root|bad\n"
    with pytest.raises(SlurmParseError) as plain:
        parse_squeue(bad)
    with pytest.raises(SlurmParseError) as remembered:
        parse_squeue(bad, memo=memo)
    assert str(remembered.value) == str(plain.value)


def test_a_squeue_memo_is_not_used_across_a_change_of_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    text = read("squeue.txt")
    memo = SqueueMemo(paired(made_of))
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    in_utc = parse_squeue(text, memo=memo)
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        in_new_york = parse_squeue(text, memo=memo)
        assert in_new_york == parse_squeue(text)
        assert in_new_york[0].submitted == in_utc[0].submitted + 5 * 3600  # type: ignore[operator]
    finally:
        monkeypatch.undo()
        time.tzset()


def test_the_drivers_demand_with_its_memos_is_a_fresh_drivers() -> None:
    """Reads in a row (5% of squeue's lines new at each) through one driver, which keeps the
    lines, their neutral jobs and the held jobs' answers: each read and demand is the one a
    driver made anew gives."""
    from elb.core.config import parse_config
    from elb.core.model import Node, NodeState
    from elb.schedulers.slurm.driver import Slurm

    bench = _bench()
    cfg = parse_config(
        {
            "scheduler": "slurm",
            "state_dir": "/nonexistent/state",
            "policy": {"max_nodes": 100, "slots_per_node": 4},
            "slurm": {"requests": "/nonexistent/requests"},
            "cloud": {"provider": "local"},
        }
    )
    records = tuple(Node(f"node{h:04d}", NodeState.READY, 1.0, slots=4) for h in range(1, 41))
    outputs = {"sinfo": bench.make_sinfo(40)}
    journal = bench.AskJournal([])
    kept = Slurm(cfg, journal, bench.MemorySlurm(outputs))
    for turn in range(5):
        outputs["squeue"] = bench.make_squeue(600, 40, turn=turn, churn=0.05)
        read = kept.read(records, 1.0)
        fresh = Slurm(cfg, journal, bench.MemorySlurm(outputs))
        plain = fresh.read(records, 1.0)
        assert read == plain
        demand = kept.demand(read, records, 4)
        assert demand == fresh.demand(plain, records, 4)
        assert len(demand.not_demand) > 50


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"])
def test_time_stamps_from_their_hours_start_are_parse_timestamps(zone: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``_time`` with the hours' starts kept (``SqueueMemo.hours``), and ``_stamp`` with the
    minutes' starts kept too (``SqueueMemo.minutes``), give what ``parse_timestamp`` gives, or
    refuse alike, around the changes of the local offset too (Lord Howe's half hour)."""
    import random
    import time

    from elb.schedulers.slurm.parse import _stamp, _time

    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        rng = random.Random(zone)
        hours: dict[str, float | None] = {}
        stamp_hours: dict[str, float | None] = {}
        minutes: dict[str, float] = {}
        for _ in range(8000):
            month, day = rng.choice([3, 4, 10, 11, 13]), rng.choice([1, 2, 4, 5, 6, 7, 8, 29, 31, 32])
            hour, minute, second = rng.randint(0, 24), rng.choice([0, 1, 29, 30, 31, 59, 60]), rng.randint(0, 62)
            fraction = rng.choice(["", "", ".5", ".123456789"])
            stamp = f"2026-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}{fraction}"
            expected = outcome(parse_timestamp, stamp)
            assert outcome(_time, stamp, hours) == expected, stamp
            assert outcome(_stamp, stamp, stamp_hours, minutes) == expected, stamp
        assert len(minutes) > 100  # (most stamps of a minute read before)
    finally:
        monkeypatch.undo()
        time.tzset()


def outcome(read: Any, *args: object) -> object:
    try:
        return read(*args)
    except ValueError as err:
        return ("ValueError", str(err))


def test_the_drivers_held_answers_are_kept_with_their_lines_within_the_memos_bound() -> None:
    """Reads in a row through one driver, each with a tenth of its held jobs new: every held job's
    answer is a fresh driver's; a job whose line stays keeps its very answer (kept with the line
    in squeue's memo); the answers kept are those of the lines of the last read and at most
    ``stale_bound`` others."""
    from elb.core.config import parse_config
    from elb.core.model import Node, NodeState
    from elb.schedulers.slurm.driver import Slurm

    bench = _bench()
    cfg = parse_config(
        {
            "scheduler": "slurm",
            "state_dir": "/nonexistent/state",
            "policy": {"max_nodes": 100, "slots_per_node": 4},
            "slurm": {"requests": "/nonexistent/requests"},
            "cloud": {"provider": "local"},
        }
    )
    records = (Node("node0001", NodeState.READY, 1.0, slots=4),)
    outputs = {"sinfo": bench.make_sinfo(1)}
    client = bench.MemorySlurm(outputs)
    kept = Slurm(cfg, bench.AskJournal([]), client)
    before: dict[int, NotDemand] = {}
    sizes = []
    for turn in range(12):
        numbers = range(1 + turn * 300, 3001 + turn * 300)
        outputs["squeue"] = squeue_text(pending_lines(numbers, "JobHeldUser")).encode()
        read = kept.read(records, 1.0)
        demand = kept.demand(read, records, 4)
        fresh = Slurm(cfg, bench.AskJournal([]), bench.MemorySlurm(outputs))
        assert demand == fresh.demand(fresh.read(records, 1.0), records, 4)
        now = {n.job.job_id: n for n in demand.not_demand}
        assert len(now) == 3000
        stayed = now.keys() & before.keys()
        assert len(stayed) == (2700 if turn else 0) and all(now[n] is before[n] for n in stayed)
        memo = client._squeue_memo.lines
        assert len(memo) - 3000 <= stale_bound(3000)
        assert {id(line[3]) for line in memo.values()} >= {id(n) for n in demand.not_demand}
        sizes.append(len(memo))
        before = now
    assert 3000 in sizes[2:]  # made anew of the last read's lines alone
    assert max(sizes) > 3000  # and between, the ones that left kept


# -- the memo of sinfo's lines and of their hosts ---------------------------------------------------


def test_a_sinfo_memo_reads_as_without_and_keeps_the_nodes_whose_lines_are_the_same() -> None:
    """Reads in a row with the memo are the plain reads: a node of one line that did not change
    is the very node of the read before (and its host the very host, through ``HostsMemo``), a
    changed line is read anew, a node in two partitions whose lines did not change is the node
    the read before joined (and its host the very host), a line that left is forgotten, and the
    snapshot is the one made without its memos; a text read again (the same characters, a new
    string) is read as the first time, as is one of the same length that differs in a reason."""
    from elb.schedulers.slurm.view import HostsMemo

    bench = _bench()
    memo, hosts = SinfoMemo(), HostsMemo()
    two = bench.make_sinfo(30, "arrays").decode().splitlines()  # each node in two partitions
    one = bench.make_sinfo(5).decode().replace("node", "solo").splitlines()
    changed = [line.replace("|allocated+cloud|4|4/0/0/4|", "|mixed+cloud|4|2/2/0/4|", 1) for line in one[:2]]
    first = "\n".join(two + one) + "\n"
    solo3 = "solo0003|allocated+cloud|4|4/0/0/4|cloud*|"
    reasons = first.replace(solo3 + "none", solo3 + "gone")  # (a reason of the same length)
    assert len(reasons) == len(first) and reasons != first
    texts = [
        first,
        "".join(list(first)),  # (the same text, another string)
        reasons,
        "\n".join(two + changed + one[2:]),
        "\n".join(two + changed + one[2:-1]),
    ]
    last: dict[str, SlurmNode] = {}
    last_hosts: Mapping[str, object] = {}
    before: set[str] = set()
    for text in texts:
        nodes = parse_sinfo(text, memo=memo)
        assert nodes == parse_sinfo(text)
        snap = snapshot((), nodes, 1.0, hosts=hosts)
        assert snap == snapshot((), nodes, 1.0)
        assert memo.lines.keys() == {line for line in text.splitlines() if line.strip()}
        by = {n.name: n for n in nodes}
        lines = set(text.splitlines())
        solo = [line.split("|")[0] for line in lines & before if line.startswith("solo")]  # one line each, unchanged
        assert all(by[name] is last[name] for name in solo)
        if text is texts[3]:  # the two lines changed: read anew
            assert by["solo0001"] is not last["solo0001"] and by["solo0001"].state == "mixed"
        on = {h.name: h for h in snap.hosts}
        assert all(on[name] is last_hosts[name] for name in solo if name in on)
        pairs = [name for name in by if name.startswith("node")]  # two lines each, unchanged: joined once
        assert len(pairs) == 70 and all(len(by[name].partitions) == 2 for name in pairs)
        if last:
            assert all(by[name] is last[name] for name in pairs)
            assert all(on[name] is last_hosts[name] for name in pairs if name in on)
        last, last_hosts, before = by, on, lines
    assert changed != one[:2] and one[-1].split("|")[0] not in last
    assert by_name(parse_sinfo(texts[2]))["solo0003"].reason == "gone"


def test_a_sinfo_memo_reads_a_bad_line_as_without() -> None:
    memo = SinfoMemo()
    good = read("sinfo.txt")
    parse_sinfo(good, memo=memo)
    bad = good + "n1|sleepy+cloud|4|0/4/0/4|a|none\n"
    with pytest.raises(SlurmParseError) as plain:
        parse_sinfo(bad)
    with pytest.raises(SlurmParseError) as remembered:
        parse_sinfo(bad, memo=memo)
    assert str(remembered.value) == str(plain.value)
    assert parse_sinfo(good, memo=memo) == parse_sinfo(good)


def test_hosts_through_their_memo_are_the_plain_ones_for_a_node_given_twice() -> None:
    from elb.schedulers.slurm.view import HostsMemo

    nodes = parse_sinfo(read("sinfo.txt"))
    up = parse_sinfo("n1|idle+cloud|4|0/4/0/4|cloud*|none\n")[0]
    memo = HostsMemo()
    for given in ([up, up, *nodes], [*nodes, up, up]):
        assert snapshot((), given, 1.0, hosts=memo) == snapshot((), given, 1.0)
        assert len(snapshot((), given, 1.0, hosts=memo).hosts) >= 2


def test_a_job_slurm_gave_nodes_still_powering_up_runs_on_none_and_makes_none_busy() -> None:
    """CONFIGURING: Slurm gave the job node001 (powering up) and node002 (up); it runs on
    neither yet. node001 is not busy (its allocated CPUs wait for it to come up); node002's
    allocated CPUs still keep it taken, and the job is still listed on both (a drain sees it)."""
    from elb.core.model import JobPhase
    from elb.core.state import is_busy, jobs_started_on
    from elb.schedulers.slurm.view import host_of, jobs_of
    from tests.unit.slurm_fakes import sjob, snode

    job = sjob("7", "CONFIGURING", ("node001", "node002"))
    made = jobs_of(job)
    assert [j.phase for j in made] == [JobPhase.STARTING] * 2
    assert [j.host for j in made] == ["node001", "node002"]
    assert jobs_started_on(tuple(made)) == {}
    booting = host_of(snode("node001", "allocated", "powering_up", alloc=2))
    up = host_of(snode("node002", "allocated", alloc=2))
    assert not is_busy(False, booting.busy) and is_busy(False, up.busy)
    running = jobs_of(sjob("8", "RUNNING", ("node002",)))
    assert [j.phase for j in running] == [JobPhase.RUNNING] and set(jobs_started_on(tuple(running))) == {"node002"}


def _neutral(job: SlurmJob) -> list[Any]:
    """The neutral jobs of ``job`` built field by field (``Job``'s own defaults), to hold
    ``jobs_of`` and ``line_of`` to."""
    from elb.core.model import Job, JobPhase
    from elb.schedulers.slurm.view import array_tasks, job_number

    number = job_number(job.job_id)
    if job.pending:
        phase = JobPhase.WAITING if not_demand_reason(job.reason) is None else JobPhase.HELD
        return [
            Job(
                number,
                job.name,
                job.user,
                job.state,
                phase,
                job.cpus,
                submitted=job.submitted,
                tasks=array_tasks(job.job_id),
                hard_runtime=job.time_limit,
            )
        ]
    phase = JobPhase.STARTING if job.configuring else JobPhase.RUNNING
    per_node = max(1, job.cpus // max(job.nodes, 1))
    return [
        Job(
            number,
            job.name,
            job.user,
            job.state,
            phase,
            per_node,
            submitted=job.submitted,
            started=job.started,
            queue=f"{job.partition}@{n}",
            hard_runtime=job.time_limit,
        )
        for n in job.nodelist
    ]


def test_a_lines_neutral_jobs_are_its_jobs_field_by_field() -> None:
    """``jobs_of``, ``made_of`` and ``line_of`` (which share read-only empty request mappings)
    make the jobs a field-by-field build makes, equal and hashed alike: a pending id of digits
    alone (read as its number and one task, without ``job_number`` and ``array_tasks``) among
    them."""
    from elb.schedulers.slurm.held import line_of
    from elb.schedulers.slurm.view import jobs_of

    extra = (
        "9_[1-5,7-20:3%2]|long|PENDING|Priority|1|2||2026-11-24T16:01:06|N/A|1:00:00|u|arr\n"
        "10|cloud|PENDING|BeginTime|1|1||2026-11-24T16:01:06|2026-11-24T19:01:06|30:00|u|later\n"
        "11|cloud|PENDING|BeginTime|1|1||2026-11-24T16:01:06|N/A|UNLIMITED|u|due\n"
        "12|cloud|COMPLETING|None|2|8|n[1-2]|2026-11-24T16:01:06|2026-11-24T16:02:06|1-00:00:00|u|done\n"
        "13_4|cloud|PENDING|Priority|1|1||2026-11-24T16:01:06|N/A|UNLIMITED|u|task\n"
        "017|cloud|PENDING|Resources|1|3||2026-11-24T16:01:06|N/A|UNLIMITED|u|zero\n"
    )
    for job in parse_squeue(read("squeue.txt") + extra):
        want = _neutral(job)
        assert jobs_of(job) == want and list(map(hash, jobs_of(job))) == list(map(hash, want))
        line = line_of(job)
        assert line[1] == made_of(job) == (want[0] if len(want) == 1 else tuple(want))
        assert all(not j.hard_requests and not j.master_requests and not j.slave_requests for j in jobs_of(job))
