"""``elb init``: write a commented config from what this machine shows.

The scheduler's part is its driver's (``elb.core.drivers.SchedulerModule.init``: Grid Engine's
queues and host groups, Slurm's cloud partitions), chosen by ``--scheduler`` or, with ``auto``,
by which one answers here (``init_answers``); this module reads this instance on EC2 (the
instance metadata service, IMDSv2) for the ``cloud.ec2`` lines, adds the sections after them,
and writes the file, refusing to overwrite an existing one without ``--force``. What could not
be read is said in a comment, never guessed.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elb.core.config import DEFAULT_CONFIG_PATH, Config
from elb.core.drivers import scheduler_module
from elb.core.exitcodes import Exit
from elb.core.registry import SCHEDULERS, known

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


# -- the file -------------------------------------------------------------------------------


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


def cloud_lines(e: Ec2Facts | None, problem: str | None) -> list[str]:
    """The ``cloud`` section: EC2, with this instance's facts (``ec2_lines``)."""
    return ["cloud:", "  provider: ec2", *ec2_lines(e, problem)]


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
        default="auto",
        help=f"the scheduler to write a config for: {', '.join(SCHEDULERS)} (default auto: the config's default "
        "one unless another answers here and it does not)",
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


def _write(path: Path, text: str) -> bool:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as err:
        print(f"elb: cannot write {path}: {err.strerror or err}", file=sys.stderr)
        return False
    print(f"wrote {path}")
    return True


def read_ec2(*, offline: bool, fetch: Fetch = _http) -> tuple[Ec2Facts | None, str | None]:
    """This instance's EC2 facts, or why there are none (one line)."""
    if offline:
        return None, "not asked (--offline)"
    try:
        return read_imds(fetch), None
    except (OSError, ValueError, KeyError) as err:
        return None, imds_problem(err)


def _detect(args: argparse.Namespace) -> str:
    """The scheduler ``--scheduler auto`` writes for: the config's default one, unless another
    answers here and it does not."""
    default = str(Config.model_fields["scheduler"].default)
    first = scheduler_module(default)
    for name in SCHEDULERS:
        if name == default:
            continue
        other = scheduler_module(name)
        answer = other.init_answers(args)
        if answer is None:
            continue
        if first.init_answers(args) is not None:
            print(
                f"note: both {other.TITLE} and {first.TITLE} answer: a {first.TITLE} config "
                f"(--scheduler {name} for {other.TITLE})"
            )
            return default
        print(f"{answer} and {first.TITLE} does not: a {other.TITLE} config")
        return name
    return default


def cmd_init(args: argparse.Namespace) -> int:
    path: Path = args.config
    if path.exists() and not args.force:
        print(f"elb: {path} exists; not overwritten (--force to replace it)", file=sys.stderr)
        return Exit.CONFIG
    try:
        name = _detect(args) if args.scheduler == "auto" else known(SCHEDULERS, args.scheduler, "scheduler")
    except ValueError as err:
        print(f"elb: {err}", file=sys.stderr)
        return Exit.CONFIG
    ec2, ec2_problem = read_ec2(offline=args.offline)
    draft = scheduler_module(name).init(args, cloud_lines(ec2, ec2_problem), TAIL)
    if not _write(path, draft.text):
        return Exit.CONFIG
    for problem in (*draft.notes, ec2_problem and f"EC2: {ec2_problem}"):
        if problem:
            print(f"  note: {_one_line(problem)}")
    for line in draft.after:
        print(line)
    print(f"next: read it, then elb validate -c {path}")
    return Exit.OK
