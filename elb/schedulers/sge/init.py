"""``elb init`` on a Grid Engine master: a config from what the master shows.

``gather`` reads the facts (the qmaster's name, SGE's queues and host groups); ``render`` writes
the file (pure; the ``cloud`` section and the sections after it are ``elb.cli.init``'s, which
reads this instance on EC2 and asks the driver's ``init``). What could not be read is said in a
comment, never guessed.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from elb.schedulers.sge.commands import SgeCommands
from elb.schedulers.sge.config import SgeConfig
from elb.schedulers.sge.errors import SgeError


@dataclass(frozen=True, slots=True)
class Facts:
    master: str
    sge_root: str
    sge_cell: str
    queues: tuple[str, ...] = ()
    hostgroups: tuple[str, ...] = ()
    sge_problem: str | None = None  # why SGE could not be read


def answers(sge_config: SgeConfig) -> bool:
    """Whether Grid Engine answers (its queues can be listed)."""
    try:
        SgeCommands(sge_config).queue_names()
    except SgeError:
        return False
    return True


def master_name(sge: SgeConfig) -> str:
    """The qmaster's host as SGE names it (``act_qmaster``), else this host's short name."""
    try:
        name = (sge.root / sge.cell / "common" / "act_qmaster").read_text(encoding="utf-8").strip()
    except OSError:
        name = ""
    return (name or socket.gethostname()).split(".")[0]


def gather(sge_config: SgeConfig) -> Facts:
    queues: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    sge_problem = None
    try:
        sge = SgeCommands(sge_config)
        queues, groups = sge.queue_names(), sge.hostgroup_names()
    except SgeError as err:
        sge_problem = str(err)
    return Facts(
        master=master_name(sge_config),
        sge_root=str(sge_config.root),
        sge_cell=sge_config.cell,
        queues=queues,
        hostgroups=groups,
        sge_problem=sge_problem,
    )


def _pick(found: Sequence[str], preferred: str) -> str:
    return preferred if preferred in found or not found else found[0]


def _one_line(text: str) -> str:
    """Text safe in a YAML comment: one line."""
    return " ".join(text.split())


def _yaml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a YAML string


def render(f: Facts, cloud: Sequence[str] = (), tail: Sequence[str] = ("",)) -> str:
    """The config file for these facts: every choice made, and its alternatives, in comments
    (``cloud``: the ``cloud`` section, ``tail``: the sections after it)."""
    queue, group = _pick(f.queues, "all.q"), _pick(f.hostgroups, "@allhosts")
    lines = [
        "# elb's configuration, written by elb init. Every key left out has its default",
        "# (docs/configuration.md). Check it with: elb validate",
        "",
        "poll_interval: 60  # seconds between two passes",
        "",
        "cluster:",
        f"  master: {_yaml_str(f.master)}  # the SGE qmaster, never a worker",
        "  name: elb  # tags the cloud instances elb launches (elb:cluster)",
        "  node_prefix: node  # new nodes are node001, node002, ...",
        "",
        "sge:",
        f"  root: {_yaml_str(f.sge_root)}",
        f"  cell: {_yaml_str(f.sge_cell)}",
    ]
    if f.sge_problem is not None:
        lines.append(f"  # SGE could not be read when this file was written: {_one_line(f.sge_problem)}")
    lines.append(f"  queue: {_yaml_str(queue)}  # the queue new nodes join")
    if len(f.queues) > 1:
        lines.append(f"  # queues SGE lists: {', '.join(f.queues)}")
    lines.append(f"  hostgroup: {_yaml_str(group)}  # the host group new nodes join")
    if len(f.hostgroups) > 1:
        lines.append(f"  # host groups SGE lists: {', '.join(f.hostgroups)}")
    lines += [
        "",
        "policy:",
        "  min_nodes: 0",
        "  max_nodes: 10  # the most nodes elb runs at once: the bound on what it spends",
        "  billing: hour  # hour: nodes are kept to the end of their paid hour; second: removed when idle",
        "",
    ]
    lines += cloud
    lines += tail
    return "\n".join(lines)


__all__: Sequence[str] = ("Facts", "answers", "gather", "master_name", "render")
