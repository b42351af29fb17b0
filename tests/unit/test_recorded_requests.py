"""The demand model on output recorded from the test cluster (SGE 8.1.9): one waiting job per kind
of request (``tests/fixtures/sge/recorded/groups-waiting.*``, made by
``elbdev.testcluster.record_requests``), the site's ``qconf -sc`` with a ``bigmem`` consumable, and
the recorded PEs ``smp`` ($pe_slots) and ``mpi`` ($fill_up), against two node groups."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from elb.core.groups import NodeGroup, NodeGroups
from elb.core.model import Job, QueueFlags, Snapshot
from elb.schedulers.sge.demand import JobBinding, NotYet, Servable, Unservable, place
from elb.schedulers.sge.parse import parse_qstat, parse_start_times
from elb.schedulers.sge.servable import split_demand
from elb.schedulers.sge.site import Site, build_site

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "recorded"
GROUPS = NodeGroups(
    groups=[
        NodeGroup.model_validate(dict(name="small", slots=2, max_nodes=2, offers={"h_vmem": "8G"})),
        NodeGroup.model_validate(
            dict(name="big", slots=4, max_nodes=2, queues=["all.q", "big.q"], offers={"bigmem": "1", "h_vmem": "32G"})
        ),
    ]
)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")  # the test cluster's clock
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def site() -> Site:
    pes = {n: (RECORDED / f"qconf-sp-{n}.txt").read_text() for n in ("smp", "mpi")}
    return build_site(
        (RECORDED / "qconf-sc-bigmem.txt").read_text(), pes, (RECORDED / "qconf-se-global.txt").read_text()
    )


def waiting() -> dict[str, Job]:
    jobs = parse_qstat((RECORDED / "groups-waiting.qstat-r-f.xml").read_bytes()).jobs
    return {j.name: j for j in jobs if j.is_pending}


def test_the_recording_holds_every_kind_of_request() -> None:
    jobs = waiting()
    listed = [line.split()[1] for line in (RECORDED / "groups-waiting.jobs.txt").read_text().splitlines()]
    assert sorted(jobs) == sorted(listed) and len(jobs) == 11
    assert jobs["anyhost"].hard_queues == ("all.q@*",)
    assert jobs["range"].hard_queues == ("all.q", "big.q")
    assert (jobs["range"].pe, jobs["range"].pe_range) == ("mpi", "2-8")
    assert dict(jobs["bigmem"].hard_requests) == {"bigmem": "1"}
    assert dict(jobs["onhost"].hard_requests) == {"hostname": "master"}
    assert dict(jobs["array"].hard_requests) == {"mem_free": "2G", "arch": "lx-amd64"}
    assert jobs["array"].tasks == 5
    assert site().complexes["bm"].name == "bigmem"
    queues = parse_qstat((RECORDED / "groups-waiting.qstat-r-f.xml").read_bytes()).queues
    assert [(q.name, q.flags) for q in queues] == [
        ("all.q@node001", QueueFlags.DISABLED),
        ("big.q@node001", QueueFlags.DISABLED),
    ]
    plain = parse_qstat((RECORDED / "groups-waiting.qstat-r.xml").read_bytes()).jobs
    assert sorted(j.name for j in plain) == sorted(jobs)


EXPECTED = {
    "plain": ("small", 1, "1 slot on 1 node of group small (1 slot on each), the cheapest of 2 groups that can run it"),
    "anyhost": (
        "small",
        1,
        "1 slot on 1 node of group small (1 slot on each), the cheapest of 2 groups that can run it",
    ),
    "bigq": ("big", 1, "1 slot on 1 node of group big (1 slot on each)"),
    "bigmem": ("big", 1, "1 slot on 1 node of group big (1 slot on each)"),
    "smp4": ("big", 1, "4 slots in PE smp ($pe_slots) on 1 node of group big (4 slots on each)"),
    "array": (
        "big",
        2,
        "5 tasks of 1 slot on 2 nodes of group big (4 slots on each), the cheapest of 2 groups that can run it",
    ),
    "range": (
        "small",
        2,
        "4 slots in PE mpi ($fill_up) on 2 nodes of group small (2 slots on each), "
        "the cheapest of 2 groups that can run it",
    ),
    "vmem64": "requests h_vmem=64G: more than any node group offers (small: 8G, big: 32G)",
    "onhost": "bound to host master (hostname=master): new nodes never have that name",
    "mpi64": "64 slots in PE mpi ($fill_up): more than any group gives at its max_nodes (small: 4 at 2, big: 8 at 2)",
}


@pytest.mark.parametrize(("name", "expected"), EXPECTED.items(), ids=list(EXPECTED))
def test_each_recorded_job_is_placed(name: str, expected: tuple[str, int, str] | str) -> None:
    job = waiting()[name]
    got = place(job, GROUPS, site(), job.submitted or 0.0, binding=JobBinding(job.hard_queues), new_node_name="node002")
    if isinstance(expected, str):
        assert got == Unservable(expected)
    else:
        assert isinstance(got, Servable)
        assert (got.group.name, got.nodes, got.reason) == expected


def test_the_recorded_start_time_holds_the_job_until_then() -> None:
    job = waiting()["later"]
    starts = parse_start_times((RECORDED / "groups-waiting.qstat-j.djob.txt").read_bytes())
    assert starts == {9: 1827662400.0, 1: None}  # qsub -a 202712011200 (UTC); the plain job has none
    got = place(job, GROUPS, site(), job.submitted or 0.0, binding=JobBinding(start_time=starts[job.job_id]))
    assert isinstance(got, NotYet) and got.start_time == 1827662400.0
    assert got.reason.startswith("qsub -a: not before 2027-12-01 12:00:00 UTC")


def test_the_pass_split_of_the_recording() -> None:
    result = parse_qstat((RECORDED / "groups-waiting.qstat-r-f.xml").read_bytes())
    now = max(j.submitted or 0.0 for j in result.jobs) + 60
    snap = Snapshot(now, result.jobs, ())
    starts = {9: 1827662400.0}
    split = split_demand(snap, GROUPS, site(), new_node_name="node002", start_times=starts)
    refused = {n.job.name: n.unservable for n in split.not_demand}
    assert refused == {"vmem64": True, "onhost": True, "mpi64": True, "later": False}
    assert {j.name: split.group_of[j] for j in split.snapshot.pending} == {
        "plain": "small",
        "anyhost": "small",
        "bigq": "big",
        "bigmem": "big",
        "smp4": "big",
        "array": "big",
        "range": "small",
    }
