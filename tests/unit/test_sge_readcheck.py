"""The rule that refuses hollow or partial reads of SGE (elb.schedulers.sge.readcheck), on recorded output.

The reads are real SGE 8.1.9 output (tests/fixtures/sge/recorded/): ``busy-2-nodes`` (node001 and
node002 running jobs 3-7), ``idle-2-nodes`` (both up, nothing running), ``node-died`` (node002's
container gone: SGE still lists it, queue ``du``, jobs ``r``) and ``empty-no-nodes`` (no exec
host: qhost lists only ``global``, qstat no queue). The hollow variants are made from them:
``hollow`` is exactly what an empty cluster prints, ``busy-without-node002`` is ``busy-2-nodes``
with node002 cut out of both documents.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from elb.core.model import Job, NodeState, Snapshot
from elb.schedulers.sge.parse import parse_snapshot
from elb.schedulers.sge.readcheck import KnownHosts, Need, ReadVerdict, check_read, expected_hosts, running_jobs
from tests.unit.factories import T0, node

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "recorded"
BOTH = frozenset({"node001", "node002"})


@pytest.fixture(autouse=True)
def master_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    yield


def _without(xml: bytes, host: str) -> bytes:
    """The document with every trace of ``host`` cut out (its qhost entry, its queue instances)."""
    root = ET.fromstring(xml)
    for parent in root.iter():
        for child in list(parent):
            if (child.tag == "host" and child.get("name") == host) or (
                child.tag == "Queue-List" and (child.findtext("name") or "").endswith(f"@{host}")
            ):
                parent.remove(child)
    return ET.tostring(root)


@cache
def read(name: str) -> Snapshot:
    if name == "hollow":
        name = "empty-no-nodes"
    if name == "busy-without-node002":
        qstat = _without((RECORDED / "busy-2-nodes.qstat-f.xml").read_bytes(), "node002")
        qhost = _without((RECORDED / "busy-2-nodes.qhost.xml").read_bytes(), "node002")
        return parse_snapshot(qstat, qhost, T0)
    qstat = (RECORDED / f"{name}.qstat-f.xml").read_bytes()
    qhost = (RECORDED / f"{name}.qhost.xml").read_bytes()
    return parse_snapshot(qstat, qhost, T0)


def verdict(
    current: str,
    *,
    known: frozenset[str] = BOTH,
    before: str | None = "busy-2-nodes",
    configured: frozenset[str] | None = None,
    second: str | None = None,
) -> ReadVerdict:
    return check_read(
        read(current),
        configured_hosts=configured,
        known_up=known,
        running_before=running_jobs(read(before) if before else None),
        second_read=read(second) if second else None,
    )


def test_the_crafted_reads_are_what_they_claim() -> None:
    assert {h.name for h in read("busy-2-nodes").hosts} == BOTH
    assert {j.host for j in running_jobs(read("busy-2-nodes"))} == BOTH
    assert read("hollow").hosts == () and running_jobs(read("hollow")) == ()
    cut = read("busy-without-node002")
    assert [h.name for h in cut.hosts] == ["node001"] and {j.host for j in running_jobs(cut)} == {"node001"}
    died = read("node-died").host("node002")
    assert died is not None and not died.up  # SGE's own view of a dead execd: listed, state u


# (current read, hosts elb knew, qconf -sel, second read, verdict: (ok, what is needed, part of the reason),
#  the last whole read [busy-2-nodes])
CASES = {
    "whole, jobs running": ("busy-2-nodes", BOTH, None, None, (True, Need.NOTHING, "every host elb knows")),
    "whole, the jobs ended": ("idle-2-nodes", BOTH, None, None, (True, Need.NOTHING, "")),
    "an execd died: SGE still lists it": ("node-died", BOTH, None, None, (True, Need.NOTHING, "")),
    "empty cluster, nothing known": ("hollow", frozenset(), None, None, (True, Need.NOTHING, ""), None),
    "hollow: ask qconf -sel": (
        "hollow",
        BOTH,
        None,
        None,
        (False, Need.CONFIGURED_HOSTS, "node001, node002 vanished from qhost; jobs 3, 4, 5, 6, 7 ran there"),
    ),
    "hollow, SGE still has both": (
        "hollow",
        BOTH,
        BOTH,
        None,
        (
            False,
            Need.NOTHING,
            "partial read: node001, node002 vanished from qhost but SGE still has them configured (qconf -sel); "
            "jobs 3, 4, 5, 6, 7 ran there; no action",
        ),
    ),
    "one host cut out, SGE still has it": (
        "busy-without-node002",
        BOTH,
        BOTH,
        None,
        (
            False,
            Need.NOTHING,
            "partial read: node002 vanished from qhost but SGE still has it configured (qconf -sel); "
            "jobs 5, 6, 7 ran there; no action",
        ),
    ),
    "one host deregistered": (
        "busy-without-node002",
        BOTH,
        frozenset({"node001"}),
        None,
        (True, Need.NOTHING, "node002 left SGE's execution hosts (qconf -sel)"),
    ),
    "everything gone, SGE has no exec host: refused, no second read": (
        "hollow",
        BOTH,
        frozenset(),
        None,
        (
            False,
            Need.NOTHING,
            "partial read: node001, node002 vanished from qhost, every host elb knows to be up, and qconf -sel "
            "lists no execution host either; jobs 3, 4, 5, 6, 7 ran there; both can answer empty the same way",
        ),
    ),
    "everything gone, SGE has no exec host: a second read that agrees confirms nothing": (
        "hollow",
        BOTH,
        frozenset(),
        "hollow",
        (False, Need.NOTHING, "so neither confirms the other; no action"),
    ),
    "everything gone from qhost, qconf -sel lists a host qhost does not": (
        "hollow",
        BOTH,
        frozenset({"node003"}),
        None,
        (False, Need.NOTHING, "qconf -sel lists node003, which qhost does not; jobs 3, 4, 5, 6, 7 ran there; so"),
    ),
    "every host elb knew deregistered, SGE keeps another that qhost lists too": (
        "busy-without-node002",
        frozenset({"node002"}),
        frozenset({"node001"}),
        None,
        (True, Need.NOTHING, "node002 left SGE's execution hosts (qconf -sel), which lists node001 as qhost does"),
    ),
    "every known host gone, qconf -sel and qhost disagree on the others: refused": (
        "busy-without-node002",
        frozenset({"node002"}),
        frozenset({"node003"}),
        "busy-without-node002",
        (False, Need.NOTHING, "qhost lists node001, which qconf -sel does not and qconf -sel lists node003"),
    ),
    "every host of the running jobs gone, SGE empty, after a restart: refused": (
        "hollow",
        frozenset(),
        frozenset(),
        None,
        (False, Need.NOTHING, "vanished from qhost, every host of the running jobs, and qconf -sel lists no"),
    ),
    "some hosts gone, qconf -sel lists none while qhost lists some: qconf answered hollow": (
        "busy-without-node002",
        BOTH,
        frozenset(),
        None,
        (
            False,
            Need.NOTHING,
            "partial read: node002 vanished from qhost, and qconf -sel lists no execution host while qhost lists "
            "node001: it answered hollow, so it confirms nothing; no action",
        ),
    ),
    "some hosts gone, qconf -sel lists a host qhost does not: read again": (
        "busy-without-node002",
        BOTH,
        frozenset({"node001", "node003"}),
        None,
        (False, Need.SECOND_READ, "but qconf -sel lists node003, which qhost does not; reading SGE a second time"),
    ),
    "qconf -sel and qhost disagree: read again": (
        "busy-without-node002",
        BOTH,
        frozenset({"node003"}),
        None,
        (False, Need.SECOND_READ, "but qhost lists node001, which qconf -sel does not"),
    ),
    "qconf -sel and qhost disagree, a second read agrees": (
        "busy-without-node002",
        BOTH,
        frozenset({"node003"}),
        "busy-without-node002",
        (True, Need.NOTHING, "a second read agrees"),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_check_read(case: tuple[object, ...]) -> None:
    current, known, configured, second, expected, *before = case
    assert isinstance(current, str) and isinstance(known, frozenset) and isinstance(expected, tuple)
    ok, need, why = expected
    v = verdict(
        current,
        known=known,
        configured=configured,  # type: ignore[arg-type]
        second=second,  # type: ignore[arg-type]
        before=before[0] if before else "busy-2-nodes",  # type: ignore[arg-type]
    )
    assert (v.ok, v.need) == (ok, need), v.reason
    assert why in v.reason


def test_a_job_host_elb_never_knew_vanishing_with_its_jobs_is_partial() -> None:
    """elb restarted (the journal knows no node) but the last whole read ran jobs on both hosts."""
    v = verdict("hollow", known=frozenset(), configured=BOTH)
    assert not v.ok and "node001, node002 vanished from qhost" in v.reason


def test_only_the_jobs_of_hosts_sge_still_has_are_named() -> None:
    v = verdict("hollow", configured=frozenset({"node001", "node003"}))
    assert v.reason == (
        "partial read: node001 vanished from qhost but SGE still has it configured (qconf -sel); "
        "jobs 3, 4, 6 ran there; no action"
    )


def test_jobs_that_ended_on_a_listed_host_are_no_sign_of_a_partial_read() -> None:
    assert verdict("idle-2-nodes", known=frozenset(), configured=None).ok


def test_expected_hosts_come_from_the_journal_and_the_last_whole_read() -> None:
    nodes = [
        node("node001", 600),
        node("node003", 600, NodeState.DRAINING),
        node("node002", 600, NodeState.TERMINATED),  # elb took it out of SGE since the last read
        node("node004", 60, NodeState.PROVISIONING),  # not registered yet
    ]
    # mypy lets a frozenset equal a set, not a subclass of frozenset (KnownHosts); Python compares members.
    assert expected_hosts(nodes, read("busy-2-nodes")) == {"node001", "node003"}  # type: ignore[comparison-overlap]
    assert expected_hosts(nodes, read("busy-2-nodes")).leaving == {"node003"}  # elb's own play takes it out
    assert expected_hosts(nodes, None) == {"node001", "node003"}  # type: ignore[comparison-overlap]
    assert expected_hosts([], read("busy-2-nodes")) == BOTH  # hosts elb does not manage count too


def test_running_jobs_are_the_jobs_on_a_host() -> None:
    jobs = running_jobs(read("busy-2-nodes"))
    assert all(isinstance(j, Job) and j.host in BOTH for j in jobs)
    assert {j.job_id for j in jobs} == {3, 4, 5, 6, 7}
    assert running_jobs(None) == ()


def test_draining_hosts_gone_with_sge_empty_need_only_a_second_read() -> None:
    """elb's own deregistration play takes a draining node out of SGE (and it may be killed just
    after): the last draining nodes gone, SGE empty, is no total loss; a second read confirms it."""
    leaving = KnownHosts(BOTH, BOTH)
    v = check_read(read("hollow"), configured_hosts=frozenset(), known_up=leaving)
    assert (v.ok, v.need) == (False, Need.SECOND_READ), v.reason
    assert "and SGE has no execution host left; reading SGE a second time" in v.reason
    v = check_read(read("hollow"), configured_hosts=frozenset(), known_up=leaving, second_read=read("hollow"))
    assert v.ok, v.reason
    one_ready = KnownHosts(BOTH, {"node002"})
    v = check_read(read("hollow"), configured_hosts=frozenset(), known_up=one_ready, second_read=read("hollow"))
    assert not v.ok and "every host elb knows to be up, and qconf -sel lists no execution host" in v.reason
    v = check_read(read("hollow"), configured_hosts=frozenset(), known_up=BOTH, leaving=BOTH)
    assert v.need is Need.SECOND_READ  # ``leaving`` given outright
