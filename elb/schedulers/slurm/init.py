"""``elb init`` on a Slurm controller: a Slurm config from what ``scontrol show config``,
``scontrol -o show partition`` and ``scontrol -o show node`` say.

``gather`` reads the facts (slurm.conf as the controller has it: ``elb.schedulers.slurm.conf``);
``render`` writes the file (pure; the ``cloud`` section and the sections after it are
``elb.cli.init``'s, which reads this instance on EC2 and asks the driver's ``init``):
``scheduler: slurm``, the ``slurm`` section (slurm.conf's path, the commands' directory when
they are not on PATH), and a node group for each cloud partition (a partition with
``State=CLOUD`` nodes: the least of their CPUs its ``slots``, of their ``RealMemory`` its
``memory``, their number its ``max_nodes``; ``slurm.partition_groups`` maps the partition to it).
``elb.schedulers.slurm.driver.init`` writes it and adds what ``elb validate`` would fail in
slurm.conf with that config (``conf_missing``): the lines to add or change. What could not be read
is said in a comment, never guessed.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from elb.core.groups import MAX_SLOTS
from elb.schedulers.slurm.commands import SlurmCommands, SlurmError
from elb.schedulers.slurm.conf import NodeConf, SlurmFacts, master_name, read_facts
from elb.schedulers.slurm.config import SlurmConfig
from elb.schedulers.slurm.parse import compress

_GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")


@dataclass(frozen=True, slots=True)
class SlurmInitFacts:
    master: str
    conf: str | None  # slurm.conf's path (the controller's SLURM_CONF, or --slurm-conf)
    bin_dir: str | None  # where scontrol is, when not on PATH
    slurm: SlurmFacts | None = None
    slurm_problem: str | None = None  # why Slurm could not be read


@dataclass(frozen=True, slots=True)
class Group:
    """A node group made of a cloud partition."""

    name: str
    partition: str
    nodes: tuple[str, ...]
    slots: int | None
    memory_mb: int | None


def read_slurm(config: SlurmConfig) -> tuple[SlurmFacts | None, str | None]:
    """slurm.conf as the controller has it, or why it could not be read (one line)."""
    try:
        return read_facts(SlurmCommands(config)), None
    except SlurmError as err:
        return None, str(err)


def gather(
    *,
    slurm_config: SlurmConfig,
    read: tuple[SlurmFacts | None, str | None] | None = None,
) -> SlurmInitFacts:
    """The facts for a Slurm config (``read``: Slurm read already, as ``read_slurm`` returns it;
    this instance's EC2 facts are ``elb.cli.init``'s)."""
    facts, problem = read if read is not None else read_slurm(slurm_config)
    conf = str(slurm_config.conf) if slurm_config.conf is not None else None
    if conf is None and facts is not None:
        conf = facts.config.get("SLURM_CONF") or None
    master = (master_name(facts.config) if facts is not None else None) or socket.gethostname()
    return SlurmInitFacts(
        master=master.split(".")[0],
        conf=conf,
        bin_dir=str(slurm_config.bin_dir) if slurm_config.bin_dir is not None else None,
        slurm=facts,
        slurm_problem=problem,
    )


def groups(facts: SlurmFacts) -> tuple[list[Group], dict[str, str], list[str]]:
    """A group for each cloud partition, the partitions' groups, and what was left out and why
    (a node in two cloud partitions counts in the first)."""
    by_name = {n.name: n for n in facts.cloud_nodes()}
    counted: dict[str, str] = {}  # node -> its group
    out: list[Group] = []
    mapping: dict[str, str] = {}
    notes: list[str] = []
    for p in facts.cloud_partitions():
        mine = tuple(n for n in p.nodes if n in by_name and n not in counted)
        if not mine:
            first = next((counted[n] for n in p.nodes if n in counted), None)
            if first is not None:
                mapping[p.name] = first
            continue
        group = _partition_group(p.name, mine, by_name, taken={g.name for g in out}, notes=notes)
        if group is None:
            continue
        out.append(group)
        mapping[p.name] = group.name
        counted.update((n, group.name) for n in mine)
    return out, mapping, notes


def _partition_group(
    partition: str, mine: tuple[str, ...], by_name: Mapping[str, NodeConf], *, taken: Set[str], notes: list[str]
) -> Group | None:
    """The group of a cloud partition's nodes ``mine``: named for it, as many slots as the least
    of their CPUs, as much memory as the least of theirs; None (why in ``notes``) when no free
    group name can be made of it or their CPUs cannot be read."""
    name = _group_name(partition)
    if not name or not _GROUP_NAME.fullmatch(name) or name in taken:
        notes.append(f"partition {partition}: no group name can be made of it; its nodes {compress(mine)} left out")
        return None
    cpus = [c for n in mine if (c := by_name[n].cpus) is not None]
    memory = [m for n in mine if (m := by_name[n].memory_mb) is not None]
    slots = min(cpus) if len(cpus) == len(mine) else None
    if slots is not None and slots > MAX_SLOTS:
        notes.append(f"partition {partition}: {slots} CPUs, more than a node's most slots ({MAX_SLOTS})")
        slots = None
    if slots is None:
        notes.append(f"partition {partition}: the CPUs of {compress(mine)} could not be read: set its group by hand")
        return None
    return Group(name, partition, mine, slots, min(memory) if len(memory) == len(mine) and memory else None)


def _group_name(partition: str) -> str:
    """A partition's name as a group name: as it is when it is one, else its other characters
    made dashes, trimmed, and cut to 63."""
    if _GROUP_NAME.fullmatch(partition):
        return partition
    return re.sub(r"[^A-Za-z0-9_-]", "-", partition).strip("-_")[:63]


def _one_line(text: str) -> str:
    """Text safe in a YAML comment: one line."""
    return " ".join(text.split())


def render(f: SlurmInitFacts, cloud: Sequence[str] = (), tail: Sequence[str] = ("",)) -> str:
    """The config file for these facts: every choice made, and what could not be read, in
    comments (``cloud``: the ``cloud`` section, ``tail``: the sections after it, as
    ``elb.cli.init`` gives them to every scheduler's ``init``)."""

    def s(value: str) -> str:
        return json.dumps(value)  # a JSON string is a YAML string

    lines = [
        "# elb's configuration, written by elb init on a Slurm controller. Every key left out has its",
        "# default (docs/configuration.md, docs/slurm.md). Check it with: elb validate",
        "",
        "poll_interval: 60  # seconds between two passes",
        "scheduler: slurm  # Slurm's power saving asks for the nodes; elb launches and removes them",
        "",
        "cluster:",
        f"  master: {s(f.master)}  # the Slurm controller, never a worker",
        "  name: elb  # tags the cloud instances elb launches (elb:cluster)",
        "  node_prefix: node  # Slurm names the nodes; this names none of them",
        "",
        "slurm:",
        "  requests: /var/spool/elb/slurm  # where elb's programs leave Slurm's requests (group: SlurmUser's)",
    ]
    if f.conf is not None:
        lines.append(f"  conf: {s(f.conf)}  # slurm.conf (SLURM_CONF for Slurm's commands)")
    else:
        lines.append("  # conf: left out: Slurm's commands find slurm.conf where they were built to look")
    if f.bin_dir is not None:
        lines.append(f"  bin_dir: {s(f.bin_dir)}  # scontrol, sinfo and squeue are not on PATH")
    if f.slurm_problem is not None:
        lines.append(f"  # Slurm could not be read when this file was written: {_one_line(f.slurm_problem)}")
    made: list[Group] = []
    notes: list[str] = []
    if f.slurm is not None:
        made, mapping, notes = groups(f.slurm)
        if mapping:
            lines.append("  partition_groups:  # each cloud partition's node group")
            lines += [f"    {s(p)}: {s(g)}" for p, g in mapping.items()]
        elif not notes:
            notes.append("no partition has State=CLOUD nodes: define them in slurm.conf (docs/slurm.md)")
    lines += [f"  # {_one_line(n)}" for n in notes]
    lines += ["", "policy:"]
    if made:
        lines.append("  # max_nodes: left out: the sum of the groups' max_nodes")
    else:
        lines += [
            "  max_nodes: 10  # the most nodes elb runs at once: no more than slurm.conf's State=CLOUD nodes",
            "  # slots_per_node: the CPUs slurm.conf gives a cloud node (not read: set it)",
        ]
    lines += [
        "  billing: hour  # hour: nodes are kept to the end of their paid hour; second: removed when idle",
        "",
    ]
    if made:
        lines.append("node_groups:  # one for each cloud partition (docs/groups.md)")
        for g in made:
            lines += [
                f"  - name: {s(g.name)}  # partition {g.partition}: {compress(list(g.nodes))}",
                f"    slots: {g.slots}  # the CPUs Slurm counts on each (the least of them)",
            ]
            if g.memory_mb is not None:
                lines.append(f"    memory: {g.memory_mb}M  # RealMemory (MiB)")
            lines.append(f"    max_nodes: {len(g.nodes)}  # its State=CLOUD nodes")
        lines.append("")
    lines += cloud
    lines += tail
    return "\n".join(lines)


__all__: Sequence[str] = ("SlurmInitFacts", "gather", "groups", "read_slurm", "render")
