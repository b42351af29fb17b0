"""The demand model: which node group a waiting job needs, why none can run it, or not yet.

Complex tables are the 8.1.9 default one and a site variant (h_vmem consumable per slot, set per
host; a gpu consumable), tests/fixtures/sge/handmade/qconf-sc-*.txt; PEs as ``qconf -sp`` prints
them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elb.core.groups import NodeGroup, NodeGroups
from elb.core.model import Job
from elb.schedulers.sge.complexes import parse_complexes
from elb.schedulers.sge.demand import (
    DemandError,
    JobBinding,
    NotYet,
    Placements,
    Servable,
    Site,
    Unservable,
    check_offers,
    place,
    place_all,
    place_shapes,
)
from elb.schedulers.sge.pe import AllocationRule, ParallelEnvironment, Spread, parse_pe
from elb.schedulers.sge.states import job_phase

HANDMADE = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "handmade"
NOW = 1_800_000_000.0

DEFAULT_TABLE = parse_complexes((HANDMADE / "qconf-sc-default.txt").read_text())
SITE_TABLE = parse_complexes((HANDMADE / "qconf-sc-site.txt").read_text())
# A site with a FORCED complex, a JOB consumable, an exclusive-host complex and a license count.
EXTRA_TEXT = (
    (HANDMADE / "qconf-sc-site.txt").read_text()
    + "bigdisk             bd         BOOL        ==      FORCED      NO         0        0\n"
    + "scratch             scr        MEMORY      <=      YES         JOB        0        0\n"
    + "exclusive           excl       BOOL        EXCL    YES         YES        0        1000\n"
    + "matlab              ml         INT         <=      YES         YES        0        0\n"
)
EXTRA_TABLE = parse_complexes(EXTRA_TEXT)


def _pe(name: str, rule: str, slots: int = 9999) -> ParallelEnvironment:
    text = (HANDMADE / "qconf-sp-smp.txt").read_text()
    text = text.replace("pe_name            smp", f"pe_name            {name}")
    text = text.replace("slots              9999", f"slots              {slots}")
    return parse_pe(text.replace("$pe_slots", rule))


PES = {
    "smp": parse_pe((HANDMADE / "qconf-sp-smp.txt").read_text()),
    "mpi": _pe("mpi", "$round_robin"),
    "mpifill": parse_pe((HANDMADE / "qconf-sp-mpi.txt").read_text().replace(" mpi\n", " mpifill\n")),
    "mpi-rr": parse_pe((HANDMADE / "qconf-sp-mpi-rr.txt").read_text()),
    "four": _pe("four", "4"),
}
SITE = Site(SITE_TABLE, PES)
PLAIN = Site(DEFAULT_TABLE, PES)
EXTRA = Site(EXTRA_TABLE, PES, global_values={"matlab": "10"})


def group(name: str = "default", slots: int = 8, max_nodes: int = 5, **kw: Any) -> NodeGroup:
    return NodeGroup(name=name, slots=slots, max_nodes=max_nodes, **kw)


def groups(*gs: NodeGroup, max_nodes: int | None = None) -> NodeGroups:
    return NodeGroups(groups=list(gs), max_nodes=max_nodes)


def job(slots: int = 1, tasks: int = 1, pe: str | None = None, pe_range: str | None = None, **requests: str) -> Job:
    return Job(
        42,
        "job",
        "sgeuser",
        "qw",
        job_phase("qw"),
        slots,
        submitted=NOW - 600,
        tasks=tasks,
        task_ids=f"1-{tasks}:1" if tasks > 1 else None,
        pe=pe,
        pe_range=pe_range,
        hard_requests=requests,
    )


DEFAULT = group(offers={"h_vmem": "23.5G"})  # the measured cluster: 8 slots, 23.5G per host, 5 nodes
TWO_SLOTS = group("small", slots=2)
C5 = group("default", slots=8, max_nodes=10, offers={"h_vmem": "15G"}, price_per_hour=0.34)
R5 = group(
    "bigmem",
    slots=16,
    max_nodes=10,
    offers={"h_vmem": "120G"},
    market="spot",
    price_per_hour=0.40,
    queues=["all.q", "big.q"],
)

# The measured cases: each was demand for a node that could never run it.
MEASURED = [
    pytest.param(
        job(h_vmem="64G"),
        JobBinding(),
        "requests h_vmem=64G: more than any node group offers (default: 23.5G)",
        id="h_vmem-over-host-value",
    ),
    pytest.param(job(gpu="1"), JobBinding(), "requests gpu=1: no node group offers gpu", id="gpu-nowhere"),
    pytest.param(
        job(), JobBinding(hard_queues=("other.q",)), "bound to queue other.q: no node group joins it", id="queue-other"
    ),
    pytest.param(
        job(hostname="foo"),
        JobBinding(),
        "bound to host foo (hostname=foo): new nodes never have that name",
        id="bound-to-host",
    ),
    pytest.param(
        job(slots=64, pe="mpi", pe_range="64"),
        JobBinding(),
        "64 slots in PE mpi ($round_robin): more than the 40 slots of group default at max_nodes 5",
        id="pe-wider-than-max-nodes",
    ),
]


@pytest.mark.parametrize(("j", "binding", "reason"), MEASURED)
def test_measured_jobs_are_never_demand(j: Job, binding: JobBinding, reason: str) -> None:
    got = place(j, groups(DEFAULT), SITE, NOW, binding=binding, new_node_name="node006")
    assert got == Unservable(reason)


def test_smp_job_wider_than_every_node_is_unservable() -> None:
    got = place(job(slots=4, pe="smp", pe_range="4"), groups(TWO_SLOTS, group("small2", slots=2)), SITE, NOW)
    assert got == Unservable("4 slots in PE smp ($pe_slots: one host): more than the 2 slots of any group's node")


def test_start_time_in_the_future_is_not_yet() -> None:
    start = NOW + 3 * 3600
    got = place(job(), groups(DEFAULT), SITE, NOW, binding=JobBinding(start_time=start))
    assert isinstance(got, NotYet)
    assert got.start_time == start
    assert got.reason.startswith("qsub -a: not before 2027-01-15 11:00:00 UTC (in 3h00m); then 1 slot on 1 node")


def test_start_time_passed_is_servable() -> None:
    got = place(job(), groups(DEFAULT), SITE, NOW, binding=JobBinding(start_time=NOW - 1))
    assert isinstance(got, Servable)


def test_unservable_wins_over_not_yet() -> None:
    got = place(job(gpu="1"), groups(DEFAULT), SITE, NOW, binding=JobBinding(start_time=NOW + 3600))
    assert got == Unservable("requests gpu=1: no node group offers gpu")


# (job, binding, groups, site, expected group, nodes, slots per node)
SERVABLE = [
    pytest.param(job(), JobBinding(), [DEFAULT], SITE, "default", 1, 1, id="one-slot"),
    pytest.param(job(h_vmem="4G"), JobBinding(), [DEFAULT], SITE, "default", 1, 1, id="h_vmem-fits"),
    pytest.param(job(h_vmem="4G"), JobBinding(), [group()], PLAIN, "default", 1, 1, id="h_vmem-queue-limit"),
    pytest.param(job(h_vmem="64G"), JobBinding(), [group()], SITE, "default", 1, 1, id="h_vmem-not-set-per-host"),
    pytest.param(job(tasks=20), JobBinding(), [DEFAULT], SITE, "default", 3, 8, id="array-packs-8-per-node"),
    pytest.param(job(tasks=10**9), JobBinding(), [DEFAULT], SITE, "default", 5, 8, id="array-capped-at-max"),
    pytest.param(
        job(tasks=20, h_vmem="8G"), JobBinding(), [DEFAULT], SITE, "default", 5, 2, id="array-h_vmem-limits-per-node"
    ),
    pytest.param(job(slots=4, pe="smp", pe_range="4"), JobBinding(), [DEFAULT], SITE, "default", 1, 4, id="smp"),
    pytest.param(
        job(slots=4, tasks=10, pe="smp", pe_range="4"), JobBinding(), [DEFAULT], SITE, "default", 5, 8, id="smp-array"
    ),
    pytest.param(job(slots=4, pe="smp", pe_range="4-16"), JobBinding(), [DEFAULT], SITE, "default", 1, 8, id="smp-rng"),
    pytest.param(job(slots=20, pe="mpifill", pe_range="20"), JobBinding(), [DEFAULT], SITE, "default", 3, 8, id="fill"),
    pytest.param(
        job(slots=4, pe="mpifill", pe_range="4-100"), JobBinding(), [DEFAULT], SITE, "default", 5, 8, id="range-capped"
    ),
    pytest.param(
        job(slots=16, tasks=3, pe="mpi", pe_range="16"), JobBinding(), [DEFAULT], SITE, "default", 4, 8, id="pe-array"
    ),
    pytest.param(job(slots=12, pe="four", pe_range="12"), JobBinding(), [DEFAULT], SITE, "default", 3, 4, id="fixed"),
    pytest.param(
        job(slots=5, pe="four", pe_range="5-10"), JobBinding(), [DEFAULT], SITE, "default", 2, 4, id="fixed-multiple"
    ),
    pytest.param(job(slots=2, pe="mp*", pe_range="2"), JobBinding(), [DEFAULT], SITE, "default", 1, 2, id="pe-pattern"),
    pytest.param(job(), JobBinding(("all.q@*",)), [DEFAULT], SITE, "default", 1, 1, id="queue-any-host"),
    pytest.param(job(), JobBinding(("*@node*",)), [DEFAULT], SITE, "default", 1, 1, id="queue-host-pattern"),
    pytest.param(job(), JobBinding(("all.q@@allhosts",)), [DEFAULT], SITE, "default", 1, 1, id="queue-hostgroup"),
    pytest.param(job(), JobBinding(("big.q",)), [C5, R5], SITE, "bigmem", 1, 1, id="queue-only-bigmem-joins"),
    pytest.param(job(), JobBinding(("other.q", "all.q")), [DEFAULT], SITE, "default", 1, 1, id="queue-list-any"),
    pytest.param(job(hostname="node0*"), JobBinding(), [DEFAULT], SITE, "default", 1, 1, id="hostname-pattern"),
    pytest.param(job(h="NODE006"), JobBinding(), [DEFAULT], SITE, "default", 1, 1, id="hostname-shortcut-case"),
    pytest.param(job(q="big.q"), JobBinding(), [C5, R5], SITE, "bigmem", 1, 1, id="qname-request"),
    pytest.param(job(arch="lx-*|sol*"), JobBinding(), [DEFAULT], SITE, "default", 1, 1, id="arch-reported-later"),
    pytest.param(
        job(arch="lx-*"), JobBinding(), [group(offers={"arch": "lx-amd64"})], SITE, "default", 1, 1, id="arch-offered"
    ),
    pytest.param(job(mf="12G"), JobBinding(), [group(memory="16G")], SITE, "default", 1, 1, id="mem_free-implied"),
    pytest.param(job(num_proc="8"), JobBinding(), [DEFAULT], SITE, "default", 1, 1, id="num_proc-is-slots"),
    pytest.param(job(h_rt="3600", s_rt="1:00:00"), JobBinding(), [DEFAULT], SITE, "default", 1, 1, id="queue-limits"),
    pytest.param(
        job(gpu="1", tasks=4),
        JobBinding(),
        [DEFAULT, group("gpu", slots=8, offers={"gpu": "2"})],
        SITE,
        "gpu",
        2,
        2,
        id="gpu-offered-2-per-node",
    ),
    pytest.param(
        job(bigdisk="true"),
        JobBinding(),
        [DEFAULT, group("disk", offers={"bigdisk": "true"})],
        EXTRA,
        "disk",
        1,
        1,
        id="forced-requested",
    ),
    pytest.param(
        job(tasks=6, scratch="100G"),
        JobBinding(),
        [group(offers={"scratch": "250G"})],
        EXTRA,
        "default",
        3,
        2,
        id="job-consumable-per-task",
    ),
    pytest.param(
        job(tasks=3, exclusive="true"),
        JobBinding(),
        [group(offers={"exclusive": "true"})],
        EXTRA,
        "default",
        3,
        1,
        id="exclusive-one-task-a-node",
    ),
    pytest.param(job(ml="4"), JobBinding(), [DEFAULT], EXTRA, "default", 1, 1, id="global-license"),
]


@pytest.mark.parametrize(("j", "binding", "gs", "site", "name", "nodes", "per_node"), SERVABLE)
def test_servable(
    j: Job, binding: JobBinding, gs: list[NodeGroup], site: Site, name: str, nodes: int, per_node: int
) -> None:
    got = place(j, groups(*gs), site, NOW, binding=binding, new_node_name="node006")
    assert isinstance(got, Servable), got
    assert (got.group.name, got.nodes, got.slots_per_node) == (name, nodes, per_node), got.reason


# (job, binding, groups, site, reason)
UNSERVABLE = [
    pytest.param(
        job(foo="1"), JobBinding(), [DEFAULT], SITE, "requests foo=1: unknown complex foo (not in qconf -sc)", id="unk"
    ),
    pytest.param(
        job(load_avg="2"), JobBinding(), [DEFAULT], SITE, "requests load_avg=2: load_avg is not requestable", id="noreq"
    ),
    pytest.param(
        job(h_vmem="lots"),
        JobBinding(),
        [DEFAULT],
        SITE,
        "requests h_vmem=lots: 'lots' is not a MEMORY value (a number with an optional k K m M g G t T)",
        id="bad-value",
    ),
    pytest.param(
        job(num_proc="9" * 400),  # an INT past a float's range: refused, not a traceback
        JobBinding(),
        [DEFAULT],
        SITE,
        f"requests num_proc={'9' * 400}: {'9' * 400!r} is not an INT value (out of range)",
        id="int-out-of-range",
    ),
    pytest.param(
        job(hostname="foo"),
        JobBinding(),
        [DEFAULT],
        SITE,
        "bound to host foo (hostname=foo): new nodes never have that name",
        id="host-without-name",
    ),
    pytest.param(
        job(),
        JobBinding(("*@node00[1-3]",)),
        [DEFAULT],
        SITE,
        "bound to queue *@node00[1-3]: no node group joins it",
        id="queue-old-hosts",
    ),
    pytest.param(
        job(),
        JobBinding(("all.q@@gpuhosts",)),
        [DEFAULT],
        SITE,
        "bound to queue all.q@@gpuhosts: no node group joins it",
        id="queue-other-hostgroup",
    ),
    pytest.param(
        job(q="other.q"), JobBinding(), [DEFAULT], SITE, "requests q=other.q: no node group joins such a queue", id="q"
    ),
    pytest.param(
        job(slots=2, pe="openmp", pe_range="2"),
        JobBinding(),
        [DEFAULT],
        SITE,
        "requests parallel environment openmp: no such PE (qconf -spl)",
        id="pe-undefined",
    ),
    pytest.param(
        job(slots=2, pe="mpi", pe_range="2"),
        JobBinding(),
        [group(pes=["smp"])],
        SITE,
        "parallel environment mpi: no node group serves it",
        id="pe-not-served",
    ),
    pytest.param(
        job(slots=128, pe="mpi-rr", pe_range="128"),
        JobBinding(),
        [group(max_nodes=100)],
        SITE,
        "128 slots in PE mpi-rr ($round_robin): more than the 64 slots of the PE",
        id="pe-total-slots",
    ),
    pytest.param(
        job(slots=48, pe="mpifill", pe_range="48-100"),
        JobBinding(),
        [DEFAULT],
        SITE,
        "48-100 slots in PE mpifill ($fill_up): more than the 40 slots of group default at max_nodes 5",
        id="range-minimum-too-big",
    ),
    pytest.param(
        job(slots=64, pe="mpi", pe_range="64"),
        JobBinding(),
        [DEFAULT, group("two", max_nodes=2)],
        SITE,
        "64 slots in PE mpi ($round_robin): more than any group gives at its max_nodes "
        "(default: 40 at 5, two: 16 at 2)",
        id="pe-wider-than-every-group",
    ),
    pytest.param(
        job(slots=64, pe="mpi", pe_range="64"),
        JobBinding(),
        groups(group(max_nodes=20), max_nodes=5),
        SITE,
        "64 slots in PE mpi ($round_robin): more than the 40 slots of group default at max_nodes 5",
        id="global-max-nodes",
    ),
    pytest.param(
        job(slots=6, pe="four", pe_range="6"),
        JobBinding(),
        [DEFAULT],
        SITE,
        "6 slots in PE four (4 per host): no slot count in the range is a multiple of 4",
        id="fixed-not-a-multiple",
    ),
    pytest.param(
        job(slots=4, pe="four", pe_range="4"),
        JobBinding(),
        [TWO_SLOTS],
        SITE,
        "4 slots in PE four (4 per host): more than the 2 slots of group small's node",
        id="fixed-wider-than-node",
    ),
    pytest.param(
        job(slots=4, pe="smp", pe_range="4", h_vmem="8G"),
        JobBinding(),
        [DEFAULT],
        SITE,
        "4 slots in PE smp ($pe_slots: one host): more than the 2 slots of group default's node "
        "(h_vmem=8G per slot, 23.5G per node)",
        id="smp-h_vmem-per-slot",
    ),
    pytest.param(
        job(slots=8, pe="smp", pe_range="8"),
        JobBinding(),
        [group(offers={"h_vmem": "4G"})],
        SITE,
        "8 slots in PE smp ($pe_slots: one host): more than the 4 slots of group default's node "
        "(h_vmem=1G (default) per slot, 4G per node)",
        id="consumable-default-per-slot",
    ),
    pytest.param(
        job(mem_total="32G"),
        JobBinding(),
        [group(memory="16G")],
        SITE,
        "requests mem_total=32G: more than any node group offers (default: 16G)",
        id="mem_total-implied",
    ),
    pytest.param(
        job(num_proc="16"),
        JobBinding(),
        [DEFAULT],
        SITE,
        "requests num_proc=16: no node group offers a match (default: 8)",
        id="num_proc-equal",
    ),
    pytest.param(
        job(arch="sol-*"),
        JobBinding(),
        [group(offers={"arch": "lx-amd64"})],
        SITE,
        "requests arch=sol-*: no node group offers a match (default: lx-amd64)",
        id="arch-mismatch",
    ),
    pytest.param(
        job(),
        JobBinding(),
        [group(offers={"bigdisk": "true"})],
        EXTRA,
        "does not request bigdisk, which every node group left offers as FORCED",
        id="forced-not-requested",
    ),
    pytest.param(
        job(scratch="300G"),
        JobBinding(),
        [group(offers={"scratch": "250G"})],
        EXTRA,
        "requests scratch=300G: more than any node group offers (default: 250G)",
        id="job-consumable",
    ),
    pytest.param(
        job(),
        JobBinding(),
        [group(offers={"scratch": "250G"})],
        Site(parse_complexes(EXTRA_TEXT.replace("YES         JOB        0 ", "YES         JOB        300G")), PES),
        "1 slot: more than the 0 slots of group default's node (scratch=300G (default) per job, 250G per node)",
        id="job-consumable-default",
    ),
    pytest.param(
        job(ml="11"),
        JobBinding(),
        [DEFAULT],
        EXTRA,
        "requests ml=11: more than the global host offers (10)",
        id="lic",
    ),
    pytest.param(
        job(gpu="1"),
        JobBinding(("big.q",)),
        [R5, group("gpu", offers={"gpu": "4"}, price_per_hour=0.9)],
        SITE,
        "requests gpu=1: no node group offers gpu (of the groups the other checks leave: bigmem)",
        id="narrowed-by-queue",
    ),
]


@pytest.mark.parametrize(("j", "binding", "gs", "site", "reason"), UNSERVABLE)
def test_unservable(j: Job, binding: JobBinding, gs: list[NodeGroup] | NodeGroups, site: Site, reason: str) -> None:
    gl = gs if isinstance(gs, NodeGroups) else groups(*gs)
    assert place(j, gl, site, NOW, binding=binding) == Unservable(reason)


# Two groups can run the job: the cheaper for the nodes it needs wins (price, then nodes, then order).
CHEAPEST = [
    pytest.param(job(), [C5, R5], "default", 2, id="one-slot-cheaper-node"),
    pytest.param(job(h_vmem="64G"), [C5, R5], "bigmem", 1, id="only-bigmem-has-memory"),
    pytest.param(job(slots=64, pe="mpi", pe_range="64"), [C5, R5], "bigmem", 2, id="4-bigmem-cheaper-than-8-default"),
    pytest.param(job(tasks=100), [C5, R5], "bigmem", 2, id="array-cheaper-on-big-nodes"),
    pytest.param(
        job(slots=16, pe="mpi", pe_range="16"),
        [group("a", slots=8), group("b", slots=16)],
        "b",
        2,
        id="unpriced-fewer-nodes",
    ),
    pytest.param(job(), [group("a"), group("b")], "a", 2, id="unpriced-tie-first"),
    pytest.param(job(), [R5.model_copy(update={"price_per_hour": 0.34}), C5], "bigmem", 2, id="priced-tie-first"),
]


@pytest.mark.parametrize(("j", "gs", "name", "can"), CHEAPEST)
def test_cheapest_group_wins(j: Job, gs: list[NodeGroup], name: str, can: int) -> None:
    got = place(j, groups(*gs), SITE, NOW)
    assert isinstance(got, Servable)
    assert got.group.name == name, got.reason
    assert got.reason.endswith(f"the cheapest of {can} groups that can run it") == (can > 1), got.reason


def test_huge_array_is_arithmetic() -> None:
    """2**31 tasks are counted, never placed one by one (that would not end)."""
    got = place(job(slots=4, tasks=2**31, pe="smp", pe_range="4-"), groups(DEFAULT), SITE, NOW)
    assert isinstance(got, Servable)
    assert (got.nodes, got.slots_per_node) == (5, 8)


@pytest.mark.parametrize(
    ("gs", "expected"),
    [
        (groups(group(max_nodes=0)), Unservable("no node group may have a node (max_nodes 0)")),
        (groups(DEFAULT, max_nodes=0), Unservable("no node group may have a node (max_nodes 0)")),
        (groups(group("none", max_nodes=0), group("some", max_nodes=1)), "some"),
    ],
)
def test_groups_without_nodes_run_nothing(gs: NodeGroups, expected: Unservable | str) -> None:
    got = place(job(), gs, SITE, NOW)
    if isinstance(got, Servable):
        assert (got.group.name, got.nodes) == (expected, 1)
    else:
        assert got == expected


def test_place_all_places_each_shape_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import elb.schedulers.sge.demand

    shapes = [job(), job(h_vmem="64G"), job(slots=4, pe="smp", pe_range="4"), job(tasks=20)]
    bindings = [None, None, None, JobBinding(start_time=NOW + 60)]
    jobs = [dataclasses.replace(j) for j in shapes * 12_500]  # equal jobs, none the same object
    expected = [place(j, groups(DEFAULT), SITE, NOW, binding=b) for j, b in zip(shapes, bindings, strict=True)]
    placed: list[Job] = []
    narrowed: list[Job] = []
    memo = elb.schedulers.sge.demand._Memo
    place_one, candidates = memo.place, memo._candidates

    def counted_place(self: Any, j: Job, *a: Any, **k: Any) -> object:
        placed.append(j)
        return place_one(self, j, *a, **k)

    def counted_candidates(self: Any, j: Job, *a: Any, **k: Any) -> object:
        narrowed.append(j)
        return candidates(self, j, *a, **k)

    monkeypatch.setattr(memo, "place", counted_place)
    monkeypatch.setattr(memo, "_candidates", counted_candidates)
    got = place_all(
        jobs, groups(DEFAULT), SITE, NOW, bindings=[dataclasses.replace(b) if b else b for b in bindings * 12_500]
    )
    assert got == expected * 12_500
    assert isinstance(got[3], NotYet)
    assert len(placed) == 4  # one place a shape
    assert len(narrowed) == 3  # job() and job(tasks=20) differ in their task count alone


def test_place_all_needs_one_binding_per_job() -> None:
    with pytest.raises(DemandError, match="1 bindings for 2 jobs"):
        place_all([job(), job()], groups(DEFAULT), SITE, NOW, bindings=[None])


def test_running_job_is_refused() -> None:
    running = Job(7, "r", "u", "r", job_phase("r"), 1, queue="all.q@node001")
    with pytest.raises(DemandError, match=r"job 7 runs in all\.q@node001: only waiting jobs are demand"):
        place(running, groups(DEFAULT), SITE, NOW)


@pytest.mark.parametrize(
    ("offers", "message"),
    [
        ({"gpus": "1"}, "node group g: offers gpus=1: no such complex"),
        ({"mf": "4G"}, "node group g: offers mf=4G: mf is the shortcut of mem_free; write the name"),
        ({"h_vmem": "lots"}, "node group g: offers h_vmem=lots: 'lots' is not a MEMORY value"),
        ({"gpu": "1.5"}, "node group g: offers gpu=1.5: '1.5' is not an INT value"),
        ({"hostname": "node001"}, "node group g: offers hostname=node001: set by SGE"),
    ],
)
def test_check_offers_names_the_group_and_key(offers: dict[str, str], message: str) -> None:
    with pytest.raises(DemandError, match=message):
        check_offers(groups(group("g", offers=offers)), SITE)


def test_check_offers_accepts_the_example_groups() -> None:
    check_offers(groups(C5, R5, group("gpu", offers={"gpu": "4", "arch": "lx-amd64"}, price_per_hour=0.9)), SITE)


def test_bad_pe_range_is_unservable() -> None:
    got = place(job(slots=4, pe="smp", pe_range="four"), groups(DEFAULT), SITE, NOW)
    assert got == Unservable("PE range 'four' is not like 4, 4-8, 4- or -8")


def test_pe_allocation_rule_values() -> None:
    assert PES["four"].allocation_rule == AllocationRule(Spread.FIXED, 4)
    assert PES["mpi"].allocation_rule == AllocationRule(Spread.ROUND_ROBIN)


# -- place_all is place, shape by shape ----------------------------------------------------------

# Shared request mappings (many jobs hold the very same object, as the quick reader makes them)
# and equal ones held apart (as the careful reader makes them).
_SHARED = [{}, {"h_vmem": "2G"}, {"h_vmem": "64G", "h_rt": "3600"}, {"gpu": "1"}, {"hostname": "node00*"}]
REQUESTS = st.one_of(
    st.sampled_from(_SHARED),
    st.dictionaries(
        st.sampled_from(["h_vmem", "h_rt", "gpu", "arch", "hostname", "q", "matlab", "scratch", "bigdisk", "nope"]),
        st.sampled_from(["1", "2G", "64G", "3600", "lx-*", "node002", "foo", "all.q", "big.q", "true", "lots"]),
        max_size=3,
    ),
)
PE_SHAPES = st.sampled_from(
    [(None, None), ("smp", "4"), ("smp", "4-16"), ("mpi", "16-32"), ("mpifill", "20"), ("four", "5-10"),
     ("mp*", "2"), ("mpi", "2-"), ("mpi", "-8"), ("smp", "four"), ("nosuch", "4"), ("mpi-rr", "2,4-6")]
)  # fmt: skip
BINDINGS = st.sampled_from(
    [None, None, JobBinding(), JobBinding(("all.q",)), JobBinding(("big.q",)), JobBinding(("*@node00*",)),
     JobBinding(start_time=NOW + 3600), JobBinding(start_time=NOW - 60), JobBinding(("other.q",), NOW + 60)]
)  # fmt: skip
GROUP_SETS = [
    groups(DEFAULT),
    groups(C5, R5),
    groups(TWO_SLOTS, group("gpu", slots=8, offers={"gpu": "2"}), max_nodes=6),
    groups(group(offers={"scratch": "250G", "bigdisk": "true"}), group("plain", slots=4)),
    groups(group(max_nodes=0)),
]


@st.composite
def waiting_jobs(draw: st.DrawFn) -> tuple[list[Job], list[JobBinding | None]]:
    jobs, bindings = [], []
    for n in range(draw(st.integers(0, 40))):
        pe, pe_range = draw(PE_SHAPES)
        scoped = draw(st.sampled_from([None, "master", "slave"]))
        requests = draw(REQUESTS)
        state = draw(st.sampled_from(["qw", "hqw"]))
        j = Job(
            n + 1,
            "job",
            "u",
            state,
            job_phase(state),
            draw(st.sampled_from([0, 1, 2, 4, 16, 64])),
            submitted=NOW - 600,
            tasks=draw(st.sampled_from([1, 1, 2, 3, 20, 499, 10**6])),
            pe=pe,
            pe_range=pe_range,
            hard_requests=requests if scoped is None else {},
            master_requests=requests if scoped == "master" else {},
            slave_requests=requests if scoped == "slave" else {},
        )
        jobs.append(j)
        bindings.append(draw(BINDINGS))
    return jobs, bindings


@settings(max_examples=150, deadline=None)
@given(
    waiting_jobs(),
    st.sampled_from(range(len(GROUP_SETS))),
    st.sampled_from([SITE, PLAIN, EXTRA]),
    st.sampled_from([None, "node002"]),
)
def test_place_all_answers_as_place_does_for_each_job(
    drawn: tuple[list[Job], list[JobBinding | None]], which: int, site: Site, name: str | None
) -> None:
    jobs, bindings = drawn
    gs = GROUP_SETS[which]
    expected = [place(j, gs, site, NOW, binding=b, new_node_name=name) for j, b in zip(jobs, bindings, strict=True)]
    assert place_all(jobs, gs, site, NOW, bindings=bindings, new_node_name=name) == expected
    no_bindings = [place(j, gs, site, NOW, new_node_name=name) for j in jobs]
    assert place_all(jobs, gs, site, NOW, new_node_name=name) == no_bindings


@settings(max_examples=100, deadline=None)
@given(
    waiting_jobs(),
    waiting_jobs(),
    st.sampled_from(range(len(GROUP_SETS))),
    st.sampled_from([SITE, PLAIN, EXTRA]),
    st.sampled_from([None, "node002"]),
)
def test_place_all_answers_the_same_in_any_order(
    first: tuple[list[Job], list[JobBinding | None]],
    second: tuple[list[Job], list[JobBinding | None]],
    which: int,
    site: Site,
    name: str | None,
) -> None:
    """What ``place_all`` works out for some jobs and keeps for the jobs after (a request met or
    not by each group, a queue list, a node's answer) does not depend on which job came first:
    two queues together, in either order and reversed, are answered job by job as ``place`` does."""
    jobs, bindings = first[0] + second[0], first[1] + second[1]
    gs = GROUP_SETS[which]
    expected = [place(j, gs, site, NOW, binding=b, new_node_name=name) for j, b in zip(jobs, bindings, strict=True)]
    assert place_all(jobs, gs, site, NOW, bindings=bindings, new_node_name=name) == expected
    swapped = place_all(second[0] + first[0], gs, site, NOW, bindings=second[1] + first[1], new_node_name=name)
    assert swapped == expected[len(first[0]) :] + expected[: len(first[0])]
    backwards = place_all(jobs[::-1], gs, site, NOW, bindings=bindings[::-1], new_node_name=name)
    assert backwards == expected[::-1]


# Array jobs' shapes (slots, PE and range), one request mapping for all, as the arrays queue.
ARRAY_SHAPES = st.sampled_from(
    [(1, None, None), (2, None, None), (4, None, None), (16, None, None), (4, "smp", "4"), (2, "mp*", "2-"),
     (4, "mp*", "4-16"), (2, "mpi-rr", "2,4-6"), (5, "four", "5-10"), (8, "four", "8"), (20, "mpifill", "20")]
)  # fmt: skip
TASK_COUNTS = st.one_of(st.sampled_from([1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 40, 41, 80, 81]), st.integers(1, 10**6))
_ARRAY_REQUESTS = {"h_rt": "3600"}


def array_jobs(drawn: list[tuple[tuple[int, str | None, str | None], int]]) -> list[Job]:
    """Array jobs of these shapes (slots, PE and range) and task counts, of one request mapping."""
    return [
        Job(n + 1, "job", "u", "qw", job_phase("qw"), slots, submitted=NOW - 600, tasks=tasks, pe=pe,
            pe_range=pe_range, hard_requests=_ARRAY_REQUESTS)
        for n, ((slots, pe, pe_range), tasks) in enumerate(drawn)
    ]  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(ARRAY_SHAPES, TASK_COUNTS), min_size=1, max_size=30),
    st.sampled_from([*range(len(GROUP_SETS)), -1]),
)
def test_place_all_weighs_each_task_count_as_place_does(
    drawn: list[tuple[tuple[int, str | None, str | None], int]], which: int
) -> None:
    """Array jobs of a few shapes and many task counts: ``place_all`` works out each shape's
    ways over each group's node once and weighs each task count with them; each job is answered
    as ``place`` answers it alone (the cheapest group and the PE of the fewest nodes move with
    the count)."""
    gs = GROUP_SETS[which] if which >= 0 else groups(group("a", slots=4, max_nodes=3, price_per_hour=0.1), C5, R5)
    jobs = array_jobs(drawn)
    expected = [place(j, gs, SITE, NOW) for j in jobs]
    assert place_all(jobs, gs, SITE, NOW) == expected


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(ARRAY_SHAPES, TASK_COUNTS), min_size=2, max_size=30),
    st.sampled_from(range(len(GROUP_SETS))),
)
def test_servable_answers_are_equal_when_what_they_say_is(
    drawn: list[tuple[tuple[int, str | None, str | None], int]], which: int
) -> None:
    """A ``Servable`` keeps the parts of its reason and makes the text when read: two answers
    are equal exactly when their group, node and slot counts and reasons are."""
    placed = [p for p in place_all(array_jobs(drawn), GROUP_SETS[which], SITE, NOW) if isinstance(p, Servable)]
    for a in placed:
        for b in placed:
            said = (a.group, a.nodes, a.slots_per_node, a.reason) == (b.group, b.nodes, b.slots_per_node, b.reason)
            assert (a == b) == said, (a.reason, b.reason)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(ARRAY_SHAPES, TASK_COUNTS), min_size=1, max_size=30),
    st.sampled_from([DEFAULT, TWO_SLOTS, group("few", slots=4, max_nodes=3), group("none", max_nodes=0)]),
)
def test_one_way_on_one_node_is_weighed_without_the_cheapest_of_all(
    drawn: list[tuple[tuple[int, str | None, str | None], int]], only: NodeGroup
) -> None:
    """A shape whose only candidate node has one way for its tasks (one group, one PE or none)
    is answered for each task count straight from that way (``_servable_alone``), not by
    weighing every node's fits (``_cheapest_of``); each job as ``place`` answers it alone."""
    import elb.schedulers.sge.demand as sge_demand

    gs = groups(only)
    jobs = array_jobs(drawn)
    expected = [place(j, gs, SITE, NOW) for j in jobs]
    weighed: list[int] = []
    cheapest_of = sge_demand._cheapest_of

    def counted(node_ways: Any, tasks: int, candidates: Any) -> Any:
        if len(node_ways) == 1 and isinstance(node_ways[0], tuple) and len(node_ways[0]) == 1:
            weighed.append(tasks)
        return cheapest_of(node_ways, tasks, candidates)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sge_demand, "_cheapest_of", counted)
        assert place_all(jobs, gs, SITE, NOW) == expected
    assert weighed == []


def test_equal_request_mappings_are_decided_once() -> None:
    """Jobs whose request mappings are equal (each its own object, as the careful reader makes
    them, or the same one) have what decides of them worked out once for all: the requests of
    one mapping looked up, not of each. Unequal ones held by many jobs each, as the quick reader
    makes them, each once; unequal ones each held by one job, each as it comes."""
    import elb.schedulers.sge.demand as sge_demand

    memo = sge_demand._Memo(groups(DEFAULT), SITE, None)
    looked: list[tuple[str, str]] = []
    verdicts = memo.verdicts[0]

    class Counted(dict[tuple[str, str], object]):
        def __getitem__(self, item: tuple[str, str]) -> object:
            looked.append(item)
            return verdicts[item]

    memo.verdicts = (Counted(), *memo.verdicts[1:])  # type: ignore[arg-type]
    equal = [{"h_vmem": "2G", "h_rt": "3600"} for _ in range(50)]
    decided = memo.decided(equal, 0)  # type: ignore[arg-type]
    assert decided == [(("h_vmem", "2G"),)] * 50 and len({id(d) for d in decided}) == 1
    assert len(looked) == 2
    looked.clear()
    unequal = [*equal[:49], {"h_vmem": "4G"}, equal[0]]
    assert memo.decided(unequal, 0) == [(("h_vmem", "2G"),)] * 49 + [(("h_vmem", "4G"),), (("h_vmem", "2G"),)]  # type: ignore[arg-type]
    assert len(looked) == 49 * 2 + 1 + 2  # mostly each its own object: each mapping as it comes
    looked.clear()
    shared = [*(equal[n % 3] for n in range(60)), {"h_vmem": "4G"}]
    assert memo.decided(shared, 0) == [(("h_vmem", "2G"),)] * 60 + [(("h_vmem", "4G"),)]  # type: ignore[arg-type]
    assert len(looked) == 3 * 2 + 1  # objects held by many jobs: each once


def test_a_new_value_of_a_request_met_alike_is_checked_for_its_type() -> None:
    """Once a request of a complex every node meets alike is resolved, other values of it are
    looked at by their type alone: a well-formed one is left out as the first was, one of the
    wrong type stops the job with the reason a memo that never met the complex gives."""
    import elb.schedulers.sge.demand as sge_demand

    gs = groups(DEFAULT)
    memo = sge_demand._Memo(gs, SITE, None)
    values = ["3600", "1:00:00", "7200", "1G", "lx-amd64", "60", "x:y"]
    mappings = [{"h_rt": v, "h_vmem": "2G"} for v in values]
    got = memo.decided(mappings, 0)  # type: ignore[arg-type]
    fresh = [sge_demand._Memo(gs, SITE, None).decided([m], 0)[0] for m in mappings]
    assert got == fresh
    assert [isinstance(d, str) for d in got] == [False, False, False, True, True, False, True]
    assert got[3] == fresh[3] and "h_rt=1G" in str(got[3])
    jobs = [job(h_rt=v) for v in values]
    assert place_all(jobs, gs, SITE, NOW) == [place(j, gs, SITE, NOW) for j in jobs]


def test_placing_jobs_leaves_no_reference_cycle() -> None:
    """Unservable shapes (a request no group offers, a queue none joins, a hostname) leave no
    garbage only the cycle collector would free: the split pauses it over 50,000 jobs, and
    cycles left there (an exception kept with its traceback, whose frames hold the memo that
    holds it) cost a pass more than the placing itself."""
    import gc

    jobs = [job(gpu="1"), job(h_vmem="64G"), job(hostname="elsewhere"), job(), job(slots=4, pe="nosuch", pe_range="4")]
    bindings = [None, None, None, JobBinding(("other.q",)), None]
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        placed = place_all(jobs, groups(DEFAULT), SITE, NOW, bindings=bindings)
        assert sum(isinstance(p, Unservable) for p in placed) == 5
        del placed
        assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()


@pytest.mark.parametrize("shape", ["requests", "pe", "arrays", "held"])
def test_place_all_answers_as_place_does_on_the_benchmarks_queues(shape: str) -> None:
    """The shapes of benchmarks/bench_pass.py (thousands of distinct requests, PE ranges, task
    ranges, queue bindings, host names), read as the daemon reads them: place_all, with what it
    keeps from one job to the next, answers as place does for each job alone."""
    import importlib.util
    import random
    import sys
    from pathlib import Path

    from elb.schedulers.sge.parse import parse_qstat

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_pass.py"
    if "bench_pass" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_pass", path)
        assert spec is not None and spec.loader is not None
        sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[spec.name])
    bench = sys.modules["bench_pass"]
    data = bench.make_qstat(3000, 10, random.Random(3), shape=bench.SHAPES[shape])
    jobs = [j for j in parse_qstat(data).jobs if j.queue is None]
    site = bench.MemorySge().site
    bindings = [JobBinding(j.hard_queues, NOW + 60 if j.job_id % 7 == 0 else None) for j in jobs]
    for gs in (groups(DEFAULT), groups(C5, R5)):
        expected = [
            place(j, gs, site, NOW, binding=b, new_node_name="node0012") for j, b in zip(jobs, bindings, strict=True)
        ]
        assert place_all(jobs, gs, site, NOW, bindings=bindings, new_node_name="node0012") == expected
        assert {type(p) for p in expected} >= {Servable, NotYet}


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            waiting_jobs(),
            st.sampled_from(range(len(GROUP_SETS))),
            st.sampled_from([SITE, PLAIN, EXTRA]),
            st.sampled_from([None, "node002"]),
            st.sampled_from([NOW, NOW + 120]),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_placements_kept_from_call_to_call_answer_as_place_does(
    calls: list[tuple[tuple[list[Job], list[JobBinding | None]], int, Site, str | None, float]],
) -> None:
    """Calls in a row with what the one before kept (``Placements``), the groups, site, name and
    now changing or not, the jobs often the same: each job answered as ``place`` does alone."""
    keep = Placements()
    for (jobs, bindings), which, site, name, now in calls:
        gs = GROUP_SETS[which]
        expected = [place(j, gs, site, now, binding=b, new_node_name=name) for j, b in zip(jobs, bindings, strict=True)]
        got, _ = place_shapes(jobs, gs, site, now, bindings=bindings, new_node_name=name, keep=keep)
        assert got == expected
        again, _ = place_shapes(jobs, gs, site, now + 60, bindings=bindings, new_node_name=name, keep=keep)
        assert again == [
            place(j, gs, site, now + 60, binding=b, new_node_name=name) for j, b in zip(jobs, bindings, strict=True)
        ]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(waiting_jobs(), st.sampled_from(range(len(GROUP_SETS)))), min_size=1, max_size=4))
def test_placements_keep_by_shape_the_answers_they_keep_by_job(
    calls: list[tuple[tuple[list[Job], list[JobBinding | None]], int]],
) -> None:
    """Each answer ``Placements`` keeps by job holds at any time (no start time) and is the very
    answer it keeps by the job's shape, whether the answers by shape were taken from the call's
    own (none with a start time) or picked from the records (some with one), and when the
    answers of the calls before are dropped (no slack: as soon as they outnumber twice the
    call's jobs, here when a call has a third of the jobs of the one before, found by job): then
    those of this call alone are kept."""
    import elb.schedulers.sge.demand as sge_demand

    keep = Placements()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sge_demand, "_SLACK", 0)
        for (jobs, bindings), which in calls:
            for some in (jobs, jobs[: len(jobs) // 3]):  # then a few of them, found by job
                before = len(keep.by_shape)
                place_shapes(
                    some, GROUP_SETS[which], SITE, NOW, bindings=bindings[: len(some)], new_node_name=None, keep=keep
                )
                kept = list(keep.by_job.values())
                assert all(timeless and keep.by_shape[shape] is placed for shape, placed, timeless, _ in kept)
                assert all(shape[-1] is None for shape in keep.by_shape)  # no start time
                if before > 2 * len(keep.by_job):
                    assert set(keep.by_shape) == {shape for shape, *_ in kept}


def test_placements_are_reused_only_for_the_same_groups_site_and_name() -> None:
    keep = Placements()
    jobs = [job(h_vmem="2G"), job(slots=4, pe="smp", pe_range="4")]
    first, _ = place_shapes(jobs, groups(DEFAULT), SITE, NOW, bindings=None, new_node_name="node002", keep=keep)
    again, _ = place_shapes(jobs, groups(DEFAULT), SITE, NOW, bindings=None, new_node_name="node002", keep=keep)
    assert all(a is b for a, b in zip(again, first, strict=True))
    other, _ = place_shapes(jobs, groups(C5, R5), SITE, NOW, bindings=None, new_node_name="node002", keep=keep)
    assert other == place_all(jobs, groups(C5, R5), SITE, NOW, new_node_name="node002") != first


def test_place_all_reads_a_groups_value_only_where_place_does() -> None:
    """A group whose offered value cannot be read (no ``check_offers`` before): ``place`` reads
    it only for the jobs its other checks leave it to, and raises ``DemandError`` there alone;
    ``place_all``, which works out each request against all the groups at once, does the same."""
    bad = group("bad", offers={"h_vmem": "lots"}, queues=["bad.q"])
    gs = groups(DEFAULT, bad)
    jobs = [job(h_vmem="2G"), job(h_vmem="64G"), job(h_vmem="2G")]
    bindings = [JobBinding(("all.q",)), JobBinding(("all.q",)), None]
    expected = [place(j, gs, SITE, NOW, binding=b) for j, b in zip(jobs[:2], bindings[:2], strict=True)]
    assert place_all(jobs[:2], gs, SITE, NOW, bindings=bindings[:2]) == expected
    assert [type(p) for p in expected] == [Servable, Unservable]
    with pytest.raises(DemandError, match="node group bad: h_vmem='lots'") as alone:
        place(jobs[2], gs, SITE, NOW)
    with pytest.raises(DemandError) as together:
        place_all(jobs, gs, SITE, NOW, bindings=bindings)
    assert str(together.value) == str(alone.value)


# Requests every group's node meets alike (a run time, a queue limit, a load value no group
# declares) and requests some group reads: memory and processors a group implies, a value it
# offers, a global value, a queue, one not requestable.
_ALIKE_SITE = Site(
    parse_complexes(EXTRA_TEXT.replace("virtual_free        vf         MEMORY      <=      YES         NO         0 ",
                                       "virtual_free        vf         MEMORY      <=      YES         YES        1G")),
    PES,
    global_values={"matlab": "10", "swap_free": "4G"},
)  # fmt: skip
ALIKE_GROUP_SETS = [
    groups(group("plain", slots=4), group("mem", slots=16, memory="32G")),
    groups(group("mem", slots=8, memory="8G"), group("vf", slots=16, offers={"virtual_free": "8G"})),
    groups(group("a", slots=4, queues=["a.q"]), group("b", slots=8, offers={"h_vmem": "16G"}, queues=["b.q"])),
]
ALIKE_REQUESTS = st.dictionaries(
    st.sampled_from(
        ["h_rt", "s_rt", "h_cpu", "arch", "mem_free", "mf", "mem_total", "num_proc", "p", "h_vmem", "virtual_free",
         "swap_free", "matlab", "q", "tmpdir"]
    ),
    st.sampled_from(["1", "2", "4", "8", "16", "1G", "4G", "16G", "64G", "3600", "1:00:00", "lx-amd64", "a.q", "b*"]),
    max_size=5,
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(ALIKE_REQUESTS, st.sampled_from([0, 1, 2]), st.sampled_from([1, 2, 4, 8])), max_size=30),
    st.sampled_from(range(len(ALIKE_GROUP_SETS))),
)
def test_place_all_leaves_out_only_the_requests_every_node_meets_alike(
    drawn: list[tuple[dict[str, str], int, int]], which: int
) -> None:
    """``place_all`` keys the jobs' shapes by the requests that decide, leaving out those every
    group's node meets whatever the job; jobs that differ in any other request (memory or
    processors a group implies, a value a group offers, a global value, a queue name,
    a request that stops the job, in any scope) are answered as ``place`` answers each alone."""
    gs = ALIKE_GROUP_SETS[which]
    jobs = [
        Job(n + 1, "job", "u", "qw", job_phase("qw"), slots, submitted=NOW - 600,
            hard_requests=requests if scope == 0 else {"h_rt": "60"},
            master_requests=requests if scope == 1 else {}, slave_requests=requests if scope == 2 else {})
        for n, (requests, scope, slots) in enumerate(drawn)
    ]  # fmt: skip
    expected = [place(j, gs, _ALIKE_SITE, NOW) for j in jobs]
    assert place_all(jobs, gs, _ALIKE_SITE, NOW) == expected


def test_requests_met_alike_make_one_shape() -> None:
    """Jobs that differ only in requests every node meets alike are placed once; a request a group
    reads makes a shape of its own."""
    import elb.schedulers.sge.demand

    jobs = [job(h_rt=str(60 * n), s_rt=str(n), arch="lx-amd64") for n in range(1, 200)]
    jobs += [job(h_rt="60", h_vmem="2G"), job(h_rt="60", h_vmem="64G")]
    memo = elb.schedulers.sge.demand._Memo
    narrowed: list[Job] = []
    candidates = memo._candidates

    def counted(self: Any, j: Job, *a: Any, **k: Any) -> object:
        narrowed.append(j)
        return candidates(self, j, *a, **k)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memo, "_candidates", counted)
        got = place_all(jobs, groups(DEFAULT), SITE, NOW)
    assert got == [place(j, groups(DEFAULT), SITE, NOW) for j in jobs]
    assert len(narrowed) == 3


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.one_of(ALIKE_REQUESTS, REQUESTS), min_size=1, max_size=6),
    st.lists(st.integers(0, 5), min_size=1, max_size=60),
    st.sampled_from(["shared", "copies", "some copies"]),
    st.sampled_from([0, 1, 2]),
    st.sampled_from(range(len(ALIKE_GROUP_SETS))),
    st.sampled_from([_ALIKE_SITE, SITE]),
)
def test_what_decides_of_request_mappings_is_the_same_shared_or_not(
    pool: list[dict[str, str]], picks: list[int], held: str, scope: int, which: int, site: Site
) -> None:
    """What decides of each request mapping is what decides of it alone, the very same object,
    whether jobs share mapping objects (each looked at once) or each holds its own (each looked
    at as it comes), or some do."""
    from elb.schedulers.sge.demand import _Memo

    gs = ALIKE_GROUP_SETS[which]
    mappings: list[Mapping[str, str]] = [pool[i % len(pool)] for i in picks]
    if held == "copies":
        mappings = [dict(m) for m in mappings]
    elif held == "some copies":
        mappings = [dict(m) if n % 4 == 0 else m for n, m in enumerate(mappings)]
    memo = _Memo(gs, site, "node002")
    got = memo.decided(mappings, scope)
    alone = [memo.decided([m], scope)[0] for m in mappings]
    assert len(got) == len(alone) and all(a is b for a, b in zip(got, alone, strict=True))
    assert [_Memo(gs, site, "node002").decided([m], scope)[0] for m in mappings] == got


@pytest.mark.parametrize(("tasks", "nodes"), [(3, 3), (8, 8), (20, 8), (499, 8)])
def test_a_pes_slots_bound_an_arrays_tasks_at_once(tasks: int, nodes: int) -> None:
    """The 64 slots of PE mpi-rr run at most eight tasks of 8 slots at once, a node each: the
    nodes an array job of more tasks can use, for one count or many placed together."""
    gs = groups(group(max_nodes=50))
    jobs = [job(slots=8, tasks=n, pe="mpi-rr", pe_range="8") for n in (tasks, 1, 2, 5, 30, 10**6)]
    alone = place(jobs[0], gs, SITE, NOW)
    assert isinstance(alone, Servable) and (alone.nodes, alone.slots_per_node) == (nodes, 8)
    assert place_all(jobs, gs, SITE, NOW) == [place(j, gs, SITE, NOW) for j in jobs]
    assert place_all(jobs, gs, SITE, NOW)[0] == alone
