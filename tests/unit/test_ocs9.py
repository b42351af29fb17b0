"""Open Cluster Scheduler 9.x output (hpc-gridware/clusterscheduler): what differs from 8.1.9.

Facts from its sources (``ocs_QStatDefaultViewXML.cc``, ``sge_time.cc``, ``sge_job_JB_L.h``):
a waiting job's time is ``JAT_submission_time``; XML timestamps carry microseconds; requests
scoped with ``qsub -scope master|slave`` are ``master_hard_request``/``slave_hard_request``
(and ``master_soft_request`` & co. for soft ones); ``JB_execution_time`` in ``qstat -j`` counts
microseconds. The fixtures are written by hand in that shape (no 9.x cluster runs here); the
recorded 8.1.9 output stays the reference (test_sge_recorded.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from elb.core.groups import NodeGroup, NodeGroups
from elb.schedulers.sge.complexes import parse_complexes
from elb.schedulers.sge.demand import JobBinding, Servable, Site, Unservable, place
from elb.schedulers.sge.parse import parse_qstat, parse_start_times
from elb.schedulers.sge.pe import parse_pe

HANDMADE = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "handmade"


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_waiting_jobs_have_their_submission_time_with_microseconds() -> None:
    found = parse_qstat((HANDMADE / "ocs9_qstat_r.xml").read_bytes()).jobs
    by_id = {j.job_id: j for j in found}
    assert by_id[302].submitted == pytest.approx(1795514401.123456, abs=1e-6)
    assert by_id[303].submitted == pytest.approx(1795514402.000001, abs=1e-6)
    assert by_id[301].started == pytest.approx(1795514405.25, abs=1e-6)


def test_scoped_hard_requests_are_read_and_soft_ones_are_not() -> None:
    by_id = {j.job_id: j for j in parse_qstat((HANDMADE / "ocs9_qstat_r.xml").read_bytes()).jobs}
    scoped = by_id[302]
    assert dict(scoped.hard_requests) == {"h_rt": "3600"}
    assert dict(scoped.master_requests) == {"h_vmem": "64G"}
    assert dict(scoped.slave_requests) == {"h_vmem": "2G"}
    assert scoped.hard_queues == ("all.q@*",)  # master_/slave_hard_req_queue are not the job's list
    assert (scoped.pe, scoped.pe_range, scoped.hard_runtime) == ("mpi", "8", 3600.0)
    later = by_id[303]
    assert (dict(later.hard_requests), later.hard_queues) == ({}, ())  # soft_req_queue binds nothing


def test_execution_time_in_microseconds() -> None:
    times = parse_start_times((HANDMADE / "ocs9_qstat_j.xml").read_bytes())
    assert times == {303: 1827662400.0, 302: None}


def site() -> Site:
    table = parse_complexes((HANDMADE / "qconf-sc-site.txt").read_text())  # h_vmem consumable per slot
    pes = {"mpi": parse_pe((HANDMADE / "qconf-sp-mpi.txt").read_text())}
    return Site(table, pes)


def test_a_master_task_request_no_node_offers_makes_the_job_unservable() -> None:
    scoped = {j.job_id: j for j in parse_qstat((HANDMADE / "ocs9_qstat_r.xml").read_bytes()).jobs}[302]
    small = NodeGroups(
        groups=[NodeGroup.model_validate(dict(name="small", slots=4, max_nodes=4, offers={"h_vmem": "16G"}))]
    )
    placed = place(scoped, small, site(), 1795514500.0, binding=JobBinding(scoped.hard_queues))
    assert placed == Unservable("requests h_vmem=64G for the master task: more than any node group offers (small: 16G)")


def test_a_master_task_request_is_needed_once_not_per_slot() -> None:
    scoped = {j.job_id: j for j in parse_qstat((HANDMADE / "ocs9_qstat_r.xml").read_bytes()).jobs}[302]
    big = NodeGroups(
        groups=[NodeGroup.model_validate(dict(name="big", slots=4, max_nodes=4, offers={"h_vmem": "64G"}))]
    )
    placed = place(scoped, big, site(), 1795514500.0, binding=JobBinding(scoped.hard_queues))
    # 64G for the master task fits a node once; the other tasks' 2G a slot leave the 4 slots a node
    assert isinstance(placed, Servable)
    assert (placed.group.name, placed.nodes, placed.slots_per_node) == ("big", 2, 4)


def test_the_other_tasks_request_is_per_slot() -> None:
    scoped = {j.job_id: j for j in parse_qstat((HANDMADE / "ocs9_qstat_r.xml").read_bytes()).jobs}[302]
    tight = NodeGroups(
        groups=[NodeGroup.model_validate(dict(name="tight", slots=4, max_nodes=2, offers={"h_vmem": "64G"}))]
    )
    from dataclasses import replace

    wide = replace(scoped, slave_requests={"h_vmem": "32G"})  # two slots a node: 8 slots need 4 nodes
    placed = place(wide, tight, site(), 1795514500.0, binding=JobBinding(scoped.hard_queues))
    # 32G a slot on 64G nodes: 2 slots a node, 4 at max_nodes 2, fewer than the job's 8
    assert placed == Unservable("8 slots in PE mpi ($fill_up): more than the 4 slots of group tight at max_nodes 2")
