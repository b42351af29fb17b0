"""slurm.conf as the controller has it: ``scontrol show config``, ``scontrol -o show partition``
and ``scontrol -o show node``, read and parsed (for ``elb validate`` and ``elb init``).

``scontrol show config`` prints ``Key = value`` lines (the first of a key counts: later sections,
such as the cgroup plugin's, repeat none of slurm.conf's keys); ``show partition`` and ``show
node`` print one record a partition or node, ``Key=Value`` pairs, each record starting with its
name (``PartitionName=``, ``NodeName=``). A value with spaces (a node's ``Reason``, its ``OS``)
keeps the words up to the next ``Key=``. Output that is not of this shape raises
``SlurmConfError``, one line, never a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elb.core.groups import memory_bytes
from elb.schedulers.slurm.commands import SlurmCommands, SlurmError
from elb.schedulers.slurm.parse import expand

SHOW_CONFIG = ("scontrol", "show", "config")
SHOW_PARTITIONS = ("scontrol", "-a", "-o", "show", "partition")  # -a: hidden partitions too
SHOW_NODES = ("scontrol", "-o", "show", "node")
_CONFIG_LINE = re.compile(r"([A-Za-z][A-Za-z0-9_]*(?:\[\d+\])?)\s*=\s*(.*)")
_PAIR = re.compile(r"([A-Za-z][A-Za-z0-9_:]*)=(.*)", re.DOTALL)
_UNSET = frozenset({"NONE", "INFINITE", "UNLIMITED", "(null)", "(NULL)", "N/A"})


class SlurmConfError(SlurmError):
    """What ``scontrol show`` printed is not what elb reads (one line)."""


@dataclass(frozen=True, slots=True)
class NodeConf:
    """One node as ``scontrol show node`` has it."""

    name: str
    states: frozenset[str]  # upper case: IDLE, CLOUD, POWERED_DOWN, ...
    cpus: int | None
    memory_mb: int | None  # RealMemory, Slurm's megabytes (MiB)
    partitions: tuple[str, ...]

    @property
    def cloud(self) -> bool:
        return "CLOUD" in self.states


@dataclass(frozen=True, slots=True)
class PartitionConf:
    """One partition as ``scontrol show partition`` has it."""

    name: str
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SlurmFacts:
    """slurm.conf as the controller has it."""

    config: Mapping[str, str]
    partitions: tuple[PartitionConf, ...]
    nodes: tuple[NodeConf, ...]

    def cloud_partitions(self) -> tuple[PartitionConf, ...]:
        """The partitions with cloud nodes, in Slurm's order."""
        cloud = {n.name for n in self.nodes if n.cloud}
        return tuple(p for p in self.partitions if any(n in cloud for n in p.nodes))

    def cloud_nodes(self) -> tuple[NodeConf, ...]:
        return tuple(n for n in self.nodes if n.cloud)


def parse_show_config(text: str) -> dict[str, str]:
    """``scontrol show config``'s ``Key = value`` lines (the first of each key); other lines
    (the heading, section titles, the controllers' status) are not keys."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _CONFIG_LINE.fullmatch(line.strip())
        if m is not None and " = " in line:
            out.setdefault(m.group(1), m.group(2).strip())
    if not out:
        raise SlurmConfError("scontrol show config: no 'Key = value' line: not Slurm's configuration")
    if "SLURM_VERSION" not in out and "ClusterName" not in out:
        raise SlurmConfError("scontrol show config: neither ClusterName nor SLURM_VERSION: a partial output")
    return out


def parse_records(text: str, first: str, what: str) -> list[dict[str, str]]:
    """Records of ``Key=Value`` pairs, each starting with ``first=`` (one a line with ``-o``; a
    record's indented lines join it without)."""
    records: list[dict[str, str]] = []
    last = ""
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        words = line.split()
        if words[0].startswith(f"{first}="):
            records.append({})
            last = ""
        elif not records or (not line[:1].isspace() and "=" not in words[0]):
            raise SlurmConfError(f"{what}: line {number} is not a {first}=... record: {line.strip()[:80]!r}")
        record = records[-1]
        for word in words:
            m = _PAIR.fullmatch(word)
            if m is not None:
                last = m.group(1)
                record[last] = m.group(2)
            elif last:
                record[last] = f"{record[last]} {word}"
            else:
                raise SlurmConfError(f"{what}: line {number}: {word[:40]!r} is not Key=Value")
    for r in records:
        if not r.get(first):
            raise SlurmConfError(f"{what}: a record without its {first}")
    return records


def _int(value: str | None, what: str) -> int | None:
    if value is None or value in _UNSET:
        return None
    if not value.isascii() or not value.isdigit():
        raise SlurmConfError(f"{what}: {value!r} is not a number")
    return int(value)


def parse_nodes(text: str) -> tuple[NodeConf, ...]:
    out = []
    for r in parse_records(text, "NodeName", "scontrol show node"):
        name = r["NodeName"]
        out.append(
            NodeConf(
                name=name,
                states=frozenset(s for s in r.get("State", "").upper().split("+") if s),
                cpus=_int(r.get("CPUTot", r.get("CPUs")), f"node {name}: CPUTot"),
                memory_mb=_int(r.get("RealMemory"), f"node {name}: RealMemory"),
                partitions=tuple(p for p in r.get("Partitions", "").split(",") if p and p not in _UNSET),
            )
        )
    return tuple(out)


def parse_partitions(text: str) -> tuple[PartitionConf, ...]:
    out = []
    for r in parse_records(text, "PartitionName", "scontrol show partition"):
        name, nodes = r["PartitionName"], r.get("Nodes", "")
        try:
            names = () if nodes in _UNSET or not nodes else expand(nodes)
        except ValueError as err:
            raise SlurmConfError(f"scontrol show partition: partition {name}: Nodes: {err}") from None
        out.append(PartitionConf(name, tuple(names)))
    return tuple(out)


def seconds(value: str | None) -> float | None:
    """A time of ``scontrol show config`` (``600 sec``, ``600``) in seconds; None for ``NONE``,
    ``INFINITE`` or not set. ``SlurmConfError`` for anything else."""
    if value is None or value.strip() in _UNSET or value.strip() == "-1":
        return None
    words = value.split()
    if words and words[0].isascii() and words[0].isdigit() and words[1:] in ([], ["sec"]):
        return float(words[0])
    raise SlurmConfError(f"scontrol show config: {value!r} is not a time in seconds")


def words(value: str | None) -> frozenset[str]:
    """A comma list of ``scontrol show config`` (``PrivateData``, ``SlurmctldParameters``), lower case."""
    if value is None:
        return frozenset()
    return frozenset(w.strip().lower() for w in value.split(",") if w.strip() and w.strip().upper() not in _UNSET)


def master_name(config: Mapping[str, str]) -> str | None:
    """The first controller's host (``SlurmctldHost[0] = master(10.77.0.1)``; older: ``ControlMachine``)."""
    value = config.get("SlurmctldHost[0]") or config.get("SlurmctldHost") or config.get("ControlMachine")
    if not value or value in _UNSET:
        return None
    return value.split("(", 1)[0].strip() or None


def _text(commands: SlurmCommands, argv: Sequence[str]) -> str:
    out = commands.run(argv).stdout
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SlurmConfError(f"{' '.join(argv)}: output is not UTF-8: {err}") from None


def read_facts(commands: SlurmCommands) -> SlurmFacts:
    """slurm.conf as the controller has it; ``SlurmError`` (one line) when it cannot be read."""
    config = parse_show_config(_text(commands, SHOW_CONFIG))
    partitions = parse_partitions(_text(commands, SHOW_PARTITIONS))
    nodes = parse_nodes(_text(commands, SHOW_NODES))
    return SlurmFacts(config, partitions, nodes)


__all__: Sequence[str] = (
    "NodeConf",
    "PartitionConf",
    "SlurmConfError",
    "SlurmFacts",
    "master_name",
    "memory_bytes",
    "parse_nodes",
    "parse_partitions",
    "parse_show_config",
    "read_facts",
    "seconds",
    "words",
)
