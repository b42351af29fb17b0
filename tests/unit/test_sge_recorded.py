"""The parsers on XML recorded from the real test cluster (Debian gridengine 8.1.9).

The recordings (tests/fixtures/sge/recorded/, made by ``python -m elb.testcluster.record``) come
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

from elb.model import Job, Snapshot
from elb.sge.parse import QstatResult, parse_qhost, parse_qstat, parse_snapshot

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
        assert [(q.name, q.slots_total, q.states) for q in other.queues] == [
            (q.name, q.slots_total, q.states) for q in with_f.queues
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


# -- what each known scenario holds (see elb/testcluster/record.py) ----------------------------


def _empty_no_nodes(snap: Snapshot) -> None:
    assert snap.hosts == ()
    assert all(j.queue is None for j in snap.jobs)
    assert snap.pending == ()  # what waits is in error (Eqw), not eligible


def _idle_2_nodes(snap: Snapshot) -> None:
    assert [h.name for h in snap.hosts] == ["node001", "node002"]
    for h in snap.hosts:
        assert [(q.queue, q.slots_total, q.slots_used, q.states) for q in h.queues] == [("all.q", 4, 0, "")]
        assert h.up and not h.busy and h.free_slots == 4
        assert h.num_proc is not None and h.num_proc >= 1
        assert "load_avg" in h.load
    assert all(j.queue is None for j in snap.jobs)


def _busy_2_nodes(snap: Snapshot) -> None:
    n1, n2 = snap.host("node001"), snap.host("node002")
    assert n1 is not None and n2 is not None
    assert (n1.slots_used, n1.free_slots, n1.queues[0].states) == (4, 0, "")
    assert n2.queues[0].states == "d" and n2.queues[0].disabled and n2.free_slots == 0
    on1 = Counter(j.name for j in snap.jobs_on("node001") for _ in range(j.slots))
    on2 = Counter(j.name for j in snap.jobs_on("node002") for _ in range(j.slots))
    assert sum(on1.values()) == 4 and sum(on2.values()) == 4
    assert on1["mpi3"] + on2["mpi3"] == 3  # one parallel job across both hosts
    (serial2,) = named(snap, "serial2")
    assert serial2.hard_runtime == 3600.0  # submitted as h_rt=01:00:00; SGE prints seconds
    (smp2,) = named(snap, "smp2")
    assert (smp2.pe, smp2.pe_range, smp2.slots, smp2.host) == ("smp", "2", 2, "node002")
    (smp8,) = named(snap, "smp8")
    assert (smp8.state, smp8.pe, smp8.slots, smp8.is_pending) == ("qw", "smp", 8, True)
    array = named(snap, "array10")
    running = [j for j in array if j.queue is not None]
    waiting = [j for j in array if j.queue is None]
    assert sum(j.tasks for j in array) == 10
    assert all(j.tasks == 1 and j.task_ids is not None for j in running)
    assert len(waiting) == 1 and waiting[0].is_pending and waiting[0].task_ids is not None
    (held,) = named(snap, "held")
    assert held.state == "hqw" and not held.is_pending
    (error,) = named(snap, "error")
    assert error.state in ("qw", "Eqw")  # it goes to Eqw once SGE tried to start it


def _node_died(snap: Snapshot) -> None:
    dead = [h for h in snap.hosts if any("u" in q.states for q in h.queues)]
    assert dead, "a host in state u (unknown/unreachable)"
    for h in dead:
        assert not h.up and h.free_slots == 0


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
