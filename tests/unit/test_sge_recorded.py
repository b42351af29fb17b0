"""The parsers on XML recorded from the real test cluster (Debian gridengine 8.1.9).

The recordings (tests/fixtures/sge/recorded/, made by ``python -m elbdev.testcluster.record``) come
in scenarios, each saved as ``<scenario>.qstat-f.xml`` (``qstat -u '*' -xml -r -f``, what elb
runs), ``<scenario>.qhost.xml`` (``qhost -xml -q -j``) and for some ``<scenario>.qstat.xml``
(without ``-f``) and ``<scenario>.qstat-f-pri-urg.xml`` (with ``-pri -urg``). Every file must
parse; the outputs of one scenario must agree with each other; and each known scenario must show
what the recorder set up. The master's time zone when recording was UTC.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from elb.core.model import NO_FLAGS, Job, QueueFlags, Snapshot
from elb.schedulers.sge.parse import QstatResult, parse_qhost, parse_qstat, parse_snapshot

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "recorded"
FILES = sorted(RECORDED.glob("*.xml"))
SCENARIOS = sorted({p.name.split(".", 1)[0] for p in FILES if p.name.endswith(".qstat-f.xml")})


@pytest.fixture(autouse=True)
def master_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def snapshot(scenario: str) -> Snapshot:
    qstat = (RECORDED / f"{scenario}.qstat-f.xml").read_bytes()
    qhost = (RECORDED / f"{scenario}.qhost.xml").read_bytes()
    return parse_snapshot(qstat, qhost, now=2_000_000_000.0)


def named(snap: Snapshot | QstatResult, name: str) -> list[Job]:
    return [j for j in snap.jobs if j.name == name]


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_recording_parses_and_is_sane(path: Path) -> None:
    data = path.read_bytes()
    if ".qhost." in path.name:
        hosts = parse_qhost(data)
        assert all(h.name != "global" for h in hosts)
        for h in hosts:
            for q in h.queues:
                assert q.host == h.name
                assert 0 <= q.slots_used <= q.slots_total
        return
    res = parse_qstat(data)
    for j in res.jobs:
        assert j.job_id > 0 and j.slots >= 1 and j.tasks >= 1
        assert (j.started is None) != (j.submitted is None)  # waiting: submitted; running: started
        if j.queue is not None:
            assert j.started is not None
        for stamp in (j.submitted, j.started):
            if stamp is not None:  # recorded in 2026: a wrong format or zone would show here
                assert 1_767_225_600 <= stamp < 1_798_761_600
    for q in res.queues:
        assert 0 <= q.slots_used <= q.slots_total


def _key(j: Job) -> tuple[object, ...]:
    return (j.job_id, j.name, j.owner, j.state, j.slots, j.tasks, j.task_ids, j.submitted, j.started, j.queue)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_outputs_of_one_scenario_agree(scenario: str) -> None:
    snap = snapshot(scenario)
    hosts = {h.name for h in snap.hosts}
    for j in snap.jobs:
        if j.queue is not None:
            assert j.host in hosts, j

    fpri = RECORDED / f"{scenario}.qstat-f-pri-urg.xml"
    if fpri.exists():  # -pri -urg only add fields elb does not read
        other = parse_qstat(fpri.read_bytes())
        assert [_key(j) for j in other.jobs] == [_key(j) for j in snap.jobs]
        with_f = parse_qstat((RECORDED / f"{scenario}.qstat-f.xml").read_bytes())
        assert [(q.name, q.slots_total, q.flags) for q in other.queues] == [
            (q.name, q.slots_total, q.flags) for q in with_f.queues
        ]

    plain = RECORDED / f"{scenario}.qstat.xml"
    if plain.exists():  # without -f: waiting entries alike; a running task once, with all its slots
        flat = parse_qstat(plain.read_bytes())
        assert flat.queues == ()
        waiting = [_key(j) for j in snap.jobs if j.queue is None]
        assert [_key(j) for j in flat.jobs if j.started is None] == waiting
        per_task: Counter[tuple[int, str | None]] = Counter()
        for j in snap.jobs:
            if j.queue is not None:
                per_task[(j.job_id, j.task_ids)] += j.slots
        running = {(j.job_id, j.task_ids): j.slots for j in flat.jobs if j.started is not None}
        assert running == dict(per_task)
        assert all(j.host in hosts for j in flat.jobs if j.started is not None)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_qhost_jobs_agree_with_qstat(scenario: str) -> None:
    """qhost -j prints each running job's start as POSIX seconds: qstat's local times must match."""
    root = ET.fromstring((RECORDED / f"{scenario}.qhost.xml").read_bytes())
    from_qhost: set[tuple[int, str, int]] = set()
    for host in root.iter("host"):
        for job in host.iter("job"):
            values = {v.get("name"): (v.text or "") for v in job.iter("jobvalue")}
            from_qhost.add((int(job.get("name") or 0), values["qinstance_name"], int(values["start_time"])))
    from_qstat = {(j.job_id, j.queue or "", int(j.started or 0)) for j in snapshot(scenario).jobs if j.queue}
    assert from_qstat == from_qhost


# -- what each known scenario holds (tests/fixtures/sge/recorded/README.md) ------------------


def entries(snap: Snapshot) -> set[tuple[int, str, str, int, str | None, str | None]]:
    """(id, name, state, slots, tasks, queue) of every entry."""
    return {(j.job_id, j.name, j.state, j.slots, j.task_ids, j.queue) for j in snap.jobs}


T1 = (1, "t1", "Eqw", 1, None, None)  # in every recording: a real job in error


def _empty_no_nodes(snap: Snapshot) -> None:
    assert snap.hosts == ()
    assert entries(snap) == {T1}
    assert snap.pending == ()  # a job in error is not eligible


def _idle_2_nodes(snap: Snapshot) -> None:
    assert [h.name for h in snap.hosts] == ["node001", "node002"]
    for h in snap.hosts:
        assert [(q.queue, q.slots_total, q.slots_used, q.flags) for q in h.queues] == [("all.q", 4, 0, NO_FLAGS)]
        assert h.up and not h.busy and h.free_slots == 4
        assert h.num_proc is not None and h.num_proc >= 1
        assert "load_avg" in h.load
    assert entries(snap) == {T1}


BUSY_RUNNING = {
    (3, "serial1", "r", 1, None, "all.q@node001"),
    (4, "serial2", "r", 1, None, "all.q@node001"),
    (6, "mpi3", "r", 2, None, "all.q@node001"),
    (5, "smp2", "r", 2, None, "all.q@node002"),
    (6, "mpi3", "r", 1, None, "all.q@node002"),
    (7, "array10", "r", 1, "1", "all.q@node002"),
}


def _busy_2_nodes(snap: Snapshot) -> None:
    assert entries(snap) == BUSY_RUNNING | {
        (7, "array10", "qw", 1, "2-10:1", None),
        (8, "held", "hqw", 1, None, None),
        (9, "error", "qw", 1, None, None),
        (10, "smp8", "qw", 8, None, None),
        T1,
    }
    n1, n2 = snap.host("node001"), snap.host("node002")
    assert n1 is not None and n2 is not None
    assert (n1.slots_used, n1.free_slots, n1.queues[0].flags) == (4, 0, NO_FLAGS)
    assert n2.queues[0].flags == QueueFlags.DISABLED and n2.queues[0].disabled and n2.free_slots == 0 and n2.up
    (serial2,) = named(snap, "serial2")
    assert serial2.hard_runtime == 3600.0  # submitted as h_rt=01:00:00; SGE prints seconds
    (smp2,) = named(snap, "smp2")
    assert (smp2.pe, smp2.pe_range) == ("smp", "2")
    assert {(j.pe, j.pe_range) for j in named(snap, "mpi3")} == {("mpi", "3")}
    (smp8,) = named(snap, "smp8")
    assert (smp8.pe, smp8.pe_range, smp8.total_slots, smp8.is_pending) == ("smp", "8", 8, True)
    waiting = [j for j in named(snap, "array10") if j.queue is None]
    assert [(j.tasks, j.total_slots, j.is_pending) for j in waiting] == [(9, 9, True)]
    assert {j.job_id for j in snap.pending} == {7, 9, 10}
    assert sum(j.total_slots for j in snap.pending) == 9 + 1 + 8
    (held,) = named(snap, "held")
    assert not held.is_pending


def _node_died(snap: Snapshot) -> None:
    n2 = snap.host("node002")
    assert n2 is not None
    assert n2.queues[0].flags == QueueFlags.DISABLED | QueueFlags.UNREACHABLE
    assert not n2.up and n2.queues[0].unreachable and n2.free_slots == 0
    assert "load_avg" not in n2.load and n2.load["mem_total"] == "23.5G"
    # SGE still lists the jobs of the dead node as running
    on2 = {(j.job_id, j.name, j.state, j.slots, j.task_ids, j.queue) for j in snap.jobs_on("node002")}
    assert on2 == {e for e in BUSY_RUNNING if e[5] == "all.q@node002"}
    n1 = snap.host("node001")
    assert n1 is not None and n1.up


KNOWN: dict[str, Callable[[Snapshot], None]] = {
    "empty-no-nodes": _empty_no_nodes,
    "idle-2-nodes": _idle_2_nodes,
    "busy-2-nodes": _busy_2_nodes,
    "node-died": _node_died,
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario_shows_what_was_set_up(scenario: str) -> None:
    if scenario not in KNOWN:
        pytest.fail(f"recorded scenario {scenario!r} has no assertions here: add them to KNOWN")
    KNOWN[scenario](snapshot(scenario))
