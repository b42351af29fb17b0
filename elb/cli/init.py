"""``elb init``: write a commented config from what this machine shows.

``gather`` reads the facts (the master's name, SGE's queues and host groups, and on EC2 this
instance's subnet, security groups, type and AMI from the instance metadata service, IMDSv2);
``render`` turns them into the file (pure); ``cmd_init`` writes it, refusing to overwrite an
existing file without ``--force``. On a Slurm controller (``scontrol`` answers and SGE does not,
or ``--scheduler slurm``) ``elb.cli.init_slurm`` writes a Slurm config instead. What could not be
read is said in a comment, never guessed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elb.core.config import DEFAULT_CONFIG_PATH, SgeConfig, SlurmConfig
from elb.core.exitcodes import Exit
from elb.schedulers.sge.commands import SgeCommands
from elb.schedulers.sge.errors import SgeError

if TYPE_CHECKING:
    from elb.schedulers.slurm.conf import SlurmFacts

IMDS = "http://169.254.169.254"
IMDS_TIMEOUT = 1.0  # seconds per request: off EC2 the first one fails within this


@dataclass(frozen=True, slots=True)
class Ec2Facts:
    region: str
    instance_id: str
    instance_type: str
    ami: str
    subnet: str | None
    security_groups: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Facts:
    master: str
    sge_root: str
    sge_cell: str
    queues: tuple[str, ...] = ()
    hostgroups: tuple[str, ...] = ()
    sge_problem: str | None = None  # why SGE could not be read
    ec2: Ec2Facts | None = None
    ec2_problem: str | None = None  # why the metadata service could not be read
    notes: tuple[str, ...] = field(default=())


# -- reading ---------------------------------------------------------------------------------

Fetch = Callable[[str, str, dict[str, str]], str]


def _http(method: str, url: str, headers: dict[str, str]) -> str:
    req = urllib.request.Request(url, method=method, headers=headers)  # noqa: S310 (a fixed http URL)
    with urllib.request.urlopen(req, timeout=IMDS_TIMEOUT) as resp:  # noqa: S310
        return str(resp.read(65536).decode("utf-8", errors="replace"))


def read_imds(fetch: Fetch = _http, base: str = IMDS) -> Ec2Facts:
    """This instance's facts from IMDSv2 (a session token, then the metadata). Raises OSError."""
    token = fetch("PUT", f"{base}/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "60"})
    hdr = {"X-aws-ec2-metadata-token": token}

    def get(path: str) -> str:
        return fetch("GET", f"{base}/latest/meta-data/{path}", hdr).strip()

    ident: dict[str, Any] = json.loads(fetch("GET", f"{base}/latest/dynamic/instance-identity/document", hdr))
    mac = get("mac")
    try:
        subnet: str | None = get(f"network/interfaces/macs/{mac}/subnet-id")
    except OSError:
        subnet = None
    try:
        groups = tuple(get(f"network/interfaces/macs/{mac}/security-group-ids").split())
    except OSError:
        groups = ()
    return Ec2Facts(
        region=str(ident["region"]),
        instance_id=str(ident["instanceId"]),
        instance_type=str(ident["instanceType"]),
        ami=str(ident["imageId"]),
        subnet=subnet,
        security_groups=groups,
    )


def imds_problem(err: OSError | ValueError | KeyError) -> str:
    """Why ``read_imds`` found no facts, in one line: what the service answered (an HTTP error is
    an answer), or that it did not answer, and how."""
    service = f"the instance metadata service ({IMDS})"
    if isinstance(err, urllib.error.HTTPError):
        path = urllib.parse.urlsplit(err.url or "").path or "?"
        method = "PUT" if path.endswith("/api/token") else "GET"
        return f"{service} answered HTTP {err.code} {err.reason} to {method} {path}: not EC2's IMDSv2 (not on EC2?)"
    if isinstance(err, KeyError):
        return f"{service} answered with a document that is not EC2's instance identity (no {err})"
    if isinstance(err, ValueError):
        return f"{service} answered with a document that is not EC2's instance identity: not on EC2?"
    cause: object = err.reason if isinstance(err, urllib.error.URLError) else err
    if isinstance(cause, TimeoutError | socket.timeout):
        return f"{service} did not answer within {IMDS_TIMEOUT:g} s: not on EC2?"
    why = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(cause) or type(cause).__name__
    return f"{service} did not answer ({why}): not on EC2?"


def master_name(sge: SgeConfig) -> str:
    """The qmaster's host as SGE names it (``act_qmaster``), else this host's short name."""
    try:
        name = (sge.root / sge.cell / "common" / "act_qmaster").read_text(encoding="utf-8").strip()
    except OSError:
        name = ""
    return (name or socket.gethostname()).split(".")[0]


def gather(*, offline: bool, sge_config: SgeConfig, fetch: Fetch = _http) -> Facts:
    queues: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    sge_problem = None
    try:
        sge = SgeCommands(sge_config)
        queues, groups = sge.queue_names(), sge.hostgroup_names()
    except SgeError as err:
        sge_problem = str(err)
    ec2 = None
    ec2_problem = "not asked (--offline)" if offline else None
    if not offline:
        try:
            ec2 = read_imds(fetch)
        except (OSError, ValueError, KeyError) as err:
            ec2_problem = imds_problem(err)
    return Facts(
        master=master_name(sge_config),
        sge_root=str(sge_config.root),
        sge_cell=sge_config.cell,
        queues=queues,
        hostgroups=groups,
        sge_problem=sge_problem,
        ec2=ec2,
        ec2_problem=ec2_problem,
    )


# -- the file -------------------------------------------------------------------------------


def _pick(found: Sequence[str], preferred: str) -> str:
    return preferred if preferred in found or not found else found[0]


def _one_line(text: str) -> str:
    """Text safe in a YAML comment: one line."""
    return " ".join(text.split())


def _yaml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a YAML string


def ec2_lines(e: Ec2Facts | None, problem: str | None) -> list[str]:
    """The ``cloud.ec2`` lines: this instance's facts, or why there are none and what to set."""
    lines: list[str] = []
    if e is not None:
        lines += [
            "  ec2:",
            f"    # from this instance ({e.instance_id}): new nodes are launched like the master",
            f"    region: {_yaml_str(e.region)}",
            f"    ami: {_yaml_str(e.ami)}  # better: the AMI of a worker (left out: the newest worker's)",
            f"    instance_types: [{_yaml_str(e.instance_type)}]  # ordered; later types are fall-backs",
        ]
        if e.subnet:
            lines.append(f"    subnets: [{_yaml_str(e.subnet)}]")
        if e.security_groups:
            lines.append(f"    security_groups: [{', '.join(_yaml_str(g) for g in e.security_groups)}]")
    else:
        lines += [
            f"  # {_one_line(problem or 'no EC2 facts')}; left out, each comes from the newest worker:",
            "  # ec2:",
            "    # region: eu-west-1",
            "    # ami: ami-0123456789abcdef0",
            "    # instance_types: [c5.xlarge]",
            "    # subnets: [subnet-0123456789abcdef0]",
            "    # security_groups: [sg-0123456789abcdef0]",
        ]
    return lines


TAIL = [
    "",
    "provision:",
    "  ssh_user: root",
    "  # ssh_private_key: /root/.ssh/id_ed25519  # left out: ssh's own keys and agent",
    "",
    "state_dir: /var/lib/elb  # the journal, the stats file",
    "",
    "retention:",
    "  artifacts_days: 14  # Ansible run artifacts (failed runs: failed_factor x longer)",
    "  artifacts_mb: 500",
    "  journal_days: 90  # journal events",
    "",
]


def render(f: Facts) -> str:
    """The config file for these facts: every choice made, and its alternatives, in comments."""
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
        "cloud:",
        "  provider: ec2",
    ]
    lines += ec2_lines(f.ec2, f.ec2_problem)
    lines += TAIL
    return "\n".join(lines)


# -- the command ------------------------------------------------------------------------------


def register(sub: Any) -> None:
    p = sub.add_parser(
        "init",
        help="write a commented config from this machine (SGE or Slurm, EC2 metadata)",
        description="Writes a config file from what it sees: on a Grid Engine master the qmaster's name, "
        "SGE's queues and host groups; on a Slurm controller (scontrol answers and SGE does not, or "
        "--scheduler slurm) slurm.conf's path and a node group for each cloud partition, then prints the "
        "slurm.conf lines elb still needs; on EC2 this instance's region, AMI, type, subnet and security "
        "groups (IMDSv2). Refuses to overwrite a file without --force. Then: elb validate.",
    )
    p.add_argument("--config", "-c", type=Path, default=DEFAULT_CONFIG_PATH, help="file to write (default %(default)s)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.add_argument("--offline", action="store_true", help="do not ask the EC2 instance metadata service")
    p.add_argument(
        "--scheduler",
        choices=("auto", "sge", "slurm"),
        default="auto",
        help="the scheduler to write a config for (default auto: Slurm when scontrol answers and SGE does not)",
    )
    p.add_argument(
        "--sge-root", type=Path, default=None, help="SGE_ROOT (default: $SGE_ROOT, else /var/lib/gridengine)"
    )
    p.add_argument("--sge-cell", default=None, help="SGE_CELL (default: $SGE_CELL, else default)")
    p.add_argument("--slurm-conf", type=Path, default=None, help="slurm.conf (default: Slurm's own, or $SLURM_CONF)")
    p.add_argument(
        "--slurm-bin-dir", type=Path, default=None, help="where scontrol, sinfo and squeue are (default: PATH)"
    )
    p.set_defaults(func=cmd_init)


def sge_answers(sge_config: SgeConfig) -> bool:
    """Whether Grid Engine answers (its queues can be listed)."""
    try:
        SgeCommands(sge_config).queue_names()
    except SgeError:
        return False
    return True


def _write(path: Path, text: str) -> bool:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as err:
        print(f"elb: cannot write {path}: {err.strerror or err}", file=sys.stderr)
        return False
    print(f"wrote {path}")
    return True


def cmd_init(args: argparse.Namespace) -> int:
    from elb.cli import init_slurm  # noqa: PLC0415 (Slurm's modules only when asked)

    path: Path = args.config
    if path.exists() and not args.force:
        print(f"elb: {path} exists; not overwritten (--force to replace it)", file=sys.stderr)
        return Exit.CONFIG
    defaults = SgeConfig()
    root = args.sge_root or Path(os.environ.get("SGE_ROOT") or defaults.root)
    cell = args.sge_cell or os.environ.get("SGE_CELL") or defaults.cell
    sge_config = SgeConfig(root=root, cell=cell, timeout=10)
    slurm_config = SlurmConfig(conf=args.slurm_conf, bin_dir=args.slurm_bin_dir, timeout=10)
    scheduler: str = args.scheduler
    slurm_read = None
    if scheduler == "auto":
        slurm_read = init_slurm.read_slurm(slurm_config)
        scheduler = "sge"
        if slurm_read[0] is not None:
            if sge_answers(sge_config):
                print("note: both Slurm and Grid Engine answer: a Grid Engine config (--scheduler slurm for Slurm)")
            else:
                scheduler = "slurm"
                print("Slurm's scontrol answers and Grid Engine does not: a Slurm config")
    if scheduler == "slurm":
        return _init_slurm(path, args.offline, slurm_config, slurm_read)
    facts = gather(offline=args.offline, sge_config=sge_config)
    if not _write(path, render(facts)):
        return Exit.CONFIG
    for problem in (
        facts.sge_problem and f"SGE: {facts.sge_problem}",
        facts.ec2_problem and f"EC2: {facts.ec2_problem}",
    ):
        if problem:
            print(f"  note: {_one_line(problem)}")
    print(f"next: read it, then elb validate -c {path}")
    return Exit.OK


def _init_slurm(
    path: Path, offline: bool, slurm_config: SlurmConfig, read: tuple[SlurmFacts | None, str | None] | None
) -> int:
    from elb.cli import init_slurm  # noqa: PLC0415

    ec2 = None
    ec2_problem = "not asked (--offline)" if offline else None
    if not offline:
        try:
            ec2 = read_imds()
        except (OSError, ValueError, KeyError) as err:
            ec2_problem = imds_problem(err)
    facts = init_slurm.gather(slurm_config=slurm_config, read=read, ec2_problem=ec2_problem)
    text = init_slurm.render(facts, ec2_lines(ec2, ec2_problem), TAIL)
    if not _write(path, text):
        return Exit.CONFIG
    for problem in (
        facts.slurm_problem and f"Slurm: {facts.slurm_problem}",
        facts.ec2_problem and f"EC2: {facts.ec2_problem}",
    ):
        if problem:
            print(f"  note: {_one_line(problem)}")
    if facts.slurm is not None:
        lacking = init_slurm.missing(text, facts.slurm)
        if lacking:
            print("slurm.conf still needs (then scontrol reconfigure, or restart slurmctld):")
            for check in lacking:
                print(f"  {check.fix}    # {_one_line(check.detail)}")
        else:
            print("slurm.conf has what elb needs")
    print(f"next: read it, then elb validate -c {path}")
    return Exit.OK
