"""Node groups in a replay: which group each logged job goes to, and what it takes of a node.

A replay with groups reads a YAML file holding elb's own ``node_groups`` list (the same keys as
the live config, ``elb.core.groups.NodeGroup``), an optional ``max_nodes`` for all groups together,
and a ``swf`` section that says how the log's numbers map to what SGE sees::

    node_groups:
      - {name: compute, slots: 8, offers: {h_vmem: 32G}, max_nodes: 40, price_per_hour: 0.34}
      - {name: bigmem, slots: 8, offers: {h_vmem: 256G}, max_nodes: 4, price_per_hour: 1.01}
    swf:
      queues: {1: all.q, 2: big.q}      # SWF field 15 -> a hard queue request (qsub -q)
      partitions: {3: gpu.q}            # SWF field 16 -> a hard queue request
      memory: h_vmem                    # SWF field 10 (KB per processor) -> this per-slot request

Each job becomes the ``elb.core.model.Job`` a live ``qstat -r`` would show (its slots in PE ``mpi``
when it has more than one, its memory and queue as hard requests) and is placed by the live
demand model, ``elb.schedulers.sge.demand.place``: the cheapest group that can run it, or none, with the
reason the live pass would log. The site the jobs are matched against is a small Grid Engine
8.1.9 complex table with ``memory`` consumable per slot, every other complex a group offers added
(a number: an integer consumable; text: a string matched as a pattern), and two PEs: ``smp``
(``$pe_slots``) and ``mpi`` (``$fill_up``).

What a job takes of a node (``Assignment.footprint``) is counted in slots: its slots, or more
when its memory per slot is above the node's memory per slot (a node of 8 slots and 32G gives 4G
a slot; a 1-slot job asking 10G takes 3 slots' share). The simulated cluster schedules by slots
only, so this is how memory limits how many jobs share a node; a job wider than what one node
gives it takes whole nodes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from elb.core import yamlfile
from elb.core.groups import NodeGroup, NodeGroups
from elb.core.model import Job, JobPhase
from elb.core.warmpool import WarmPool
from elb.schedulers.sge.complexes import ComplexType, parse_complexes, parse_number
from elb.schedulers.sge.config import QueueName
from elb.schedulers.sge.demand import DemandError, JobBinding, Servable, Site, check_offers, place_all
from elb.schedulers.sge.groupoptions import sge_options
from elb.schedulers.sge.pe import parse_pe
from elb.simulate.swf import SimJob

MPI, SMP = "mpi", "smp"


class SimGroupsError(ValueError):
    """The groups file cannot be used; the message names the file and the key."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SwfMapping(_Model):
    """How an SWF log's fields become requests."""

    queues: dict[int, QueueName] = Field(default_factory=dict)  # field 15
    partitions: dict[int, QueueName] = Field(default_factory=dict)  # field 16
    memory: str = Field("h_vmem", pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")  # field 10, per slot


class _File(_Model):
    node_groups: list[NodeGroup] = Field(min_length=1)
    max_nodes: int | None = Field(None, ge=0)
    swf: SwfMapping = Field(default_factory=lambda: SwfMapping.model_validate({}))


@dataclass(frozen=True, slots=True)
class SimGroups:
    """The groups of a replay and how the log's fields map to requests."""

    groups: NodeGroups
    mapping: SwfMapping
    site: Site

    @property
    def slots(self) -> Mapping[str, int]:
        return MappingProxyType({g.name: g.slots for g in self.groups.groups})


def one_group(slots_per_node: int, max_nodes: int, warm_pool: WarmPool | None = None) -> SimGroups:
    """The one group a replay without a groups file has (what ``--slots-per-node``,
    ``--max-nodes`` and the ``--warm-pool`` options say)."""
    group = NodeGroup(name="default", slots=slots_per_node, max_nodes=max_nodes, warm_pool=warm_pool or WarmPool())
    groups = NodeGroups(groups=[group])
    mapping = SwfMapping.model_validate({})
    return SimGroups(groups, mapping, simulated_site(groups, mapping))


def load_groups(path: Path) -> SimGroups:
    """Read a groups file (see the module's description)."""
    source = f"groups file {path}"
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise SimGroupsError(f"{source}: cannot read: {err.strerror or type(err).__name__}") from None
    if len(raw) > yamlfile.MAX_BYTES:
        raise SimGroupsError(f"{source}: larger than {yamlfile.MAX_BYTES} bytes")
    try:
        doc = yamlfile.load(yamlfile.decode(raw))
    except yamlfile.YamlFileError as err:
        raise SimGroupsError(f"{source}: {err}") from None
    if not isinstance(doc.data, dict):
        raise SimGroupsError(f"{source}: the top level must be a mapping with node_groups")
    try:
        parsed = _File.model_validate(doc.data)
        groups = NodeGroups(groups=parsed.node_groups, max_nodes=parsed.max_nodes)
    except ValidationError as err:
        problems = []
        for e in err.errors():
            key = ".".join(str(p) for p in e["loc"]) or "(top level)"
            where = doc.position(tuple(e["loc"]))
            msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
            problems.append(f"{where}: {key}: {msg}" if where else f"{key}: {msg}")
        raise SimGroupsError(f"{source}: {'; '.join(problems)}") from None
    try:
        site = simulated_site(groups, parsed.swf)
        check_offers(groups, site)
    except (DemandError, ValueError) as err:
        raise SimGroupsError(f"{source}: {err}") from None
    return SimGroups(groups, parsed.swf, site)


_BASE_COMPLEXES = (
    # name       shortcut type      relop requestable consumable default urgency (qconf -sc)
    "arch        a        RESTRING  ==    YES         NO         NONE    0",
    "hostname    h        HOST      ==    YES         NO         NONE    0",
    "qname       q        RESTRING  ==    YES         NO         NONE    0",
    "slots       s        INT       <=    YES         YES        1       1000",
)
_PES = {
    SMP: "pe_name smp\nslots 99999999\nallocation_rule $pe_slots\n",
    MPI: "pe_name mpi\nslots 99999999\nallocation_rule $fill_up\n",
}


def simulated_site(groups: NodeGroups, mapping: SwfMapping) -> Site:
    """The complex table and PEs the replay's jobs are matched against (the module says which)."""
    lines = list(_BASE_COMPLEXES)
    known = {line.split()[0] for line in lines}
    lines.append(f"{mapping.memory} {mapping.memory} MEMORY <= YES YES 0 0")
    known.add(mapping.memory)
    for g in groups.groups:
        for name, value in sorted(sge_options(g).offers.items()):
            if name in known:
                continue
            known.add(name)
            try:
                parse_number(value, ComplexType.INT)
                lines.append(f"{name} {name} INT <= YES YES 0 0")
            except ValueError:
                lines.append(f"{name} {name} RESTRING == YES NO NONE 0")
    pes = MappingProxyType({k: parse_pe(v) for k, v in _PES.items()})
    return Site(complexes=parse_complexes("\n".join(lines)), pes=pes)


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where a logged job runs in the replay: its group and the slots it takes there
    (``footprint``), or no group and why (``reason``)."""

    group: str | None
    footprint: int
    reason: str


def job_value(job: SimJob, mapping: SwfMapping) -> tuple[Job, JobBinding | None]:
    """The waiting job as ``qstat -r`` would show it, and its queue binding."""
    requests: dict[str, str] = {}
    if job.memory_kb is not None:
        requests[mapping.memory] = f"{math.ceil(job.memory_kb)}K"
    queues = [
        q
        for q in (
            mapping.queues.get(job.queue) if job.queue is not None else None,
            mapping.partitions.get(job.partition) if job.partition is not None else None,
        )
        if q is not None
    ]
    value = Job(
        job_id=job.job_id,
        name=f"job{job.job_id}",
        owner="sgeuser",
        state="qw",
        phase=JobPhase.WAITING,
        slots=job.slots,
        submitted=job.submit,
        pe=MPI if job.slots > 1 else None,
        pe_range=str(job.slots) if job.slots > 1 else None,
        hard_runtime=job.requested,
        hard_requests=MappingProxyType(requests),
    )
    return value, (JobBinding(hard_queues=tuple(queues)) if queues else None)


def assign(jobs: Sequence[SimJob], sim: SimGroups) -> list[Assignment]:
    """Each job's group (``elb.schedulers.sge.demand.place_all``: the cheapest that can run it) and footprint."""
    values = [job_value(j, sim.mapping) for j in jobs]
    try:
        placements = place_all(
            [v for v, _ in values], sim.groups, sim.site, 0.0, bindings=[b for _, b in values], new_node_name=None
        )
    except DemandError as err:
        raise SimGroupsError(str(err)) from None
    out: list[Assignment] = []
    for job, placement in zip(jobs, placements, strict=True):
        if isinstance(placement, Servable):
            out.append(Assignment(placement.group.name, footprint(job, placement.group, sim.mapping), placement.reason))
        else:
            out.append(Assignment(None, 0, placement.reason))
    return out


def footprint(job: SimJob, group: NodeGroup, mapping: SwfMapping) -> int:
    """The slots ``job`` takes on nodes of ``group``, its memory counted as slot shares."""
    offered = sge_options(group).offers.get(mapping.memory)
    if job.memory_kb is None or offered is None:
        return job.slots
    node = parse_number(offered, ComplexType.MEMORY)
    need = job.memory_kb * 1024.0
    if need * job.slots <= 0 or node <= 0:
        return job.slots
    per_node = max(1, math.floor(node / need + 1e-9))  # slots of this job one node holds
    if job.slots > per_node:  # wide: whole nodes, each giving it per_node slots
        return math.ceil(job.slots / per_node) * group.slots
    share = node / group.slots
    return min(group.slots, max(job.slots, math.ceil(job.slots * need / share - 1e-9)))


__all__: Sequence[str] = (
    "Assignment",
    "SimGroups",
    "SimGroupsError",
    "SwfMapping",
    "assign",
    "footprint",
    "job_value",
    "load_groups",
    "one_group",
    "simulated_site",
)
