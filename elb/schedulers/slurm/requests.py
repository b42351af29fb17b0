"""What Slurm's power saving asks of elb: resume, suspend or give up on nodes.

Slurm runs its ``ResumeProgram``, ``SuspendProgram`` and ``ResumeFailProgram`` as its
``SlurmUser`` with the nodes as one hostlist argument, waits for nothing, and keeps none of
their output. elb's programs (``elb slurm resume|suspend|resume-fail HOSTLIST``, and the
``elb-slurm-resume`` & co. commands for slurm.conf, which take no option) therefore only write
the request down and return at once: one small JSON file in the request directory
(``DEFAULT_DIR``, or ``$ELB_SLURM_REQUESTS``), written under a temporary name and renamed, so a
reader never sees half a request. The directory is the only thing Slurm's user must be able to
write; the programs read no config and no journal (elb's state stays root's).

The daemon takes the requests each pass, oldest first, into its journal, and removes each file
once journalled: a request survives a crash of either side. A file that is not a request is set
aside (renamed ``*.bad``) and reported, never acted on. Each pass that took the requests also
writes the heartbeat file (``HEARTBEAT``: when, and how long until it counts as stale); the
programs read it and fail (exit 1, said to Slurm and syslog) when the daemon has not taken
requests for that long, so that Slurm marks the nodes down at once instead of waiting for its
``ResumeTimeout``. The request is written all the same: a daemon that comes back finds it.

Slurm 23.02 and later give the resume program ``SLURM_RESUME_FILE``, a JSON file of the jobs the
nodes are for (their ids and partitions): ``resume_detail`` turns it into the request's detail.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from elb.schedulers.slurm.parse import expand

DEFAULT_DIR = Path("/var/spool/elb/slurm")
ENV_DIR = "ELB_SLURM_REQUESTS"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
MAX_NODES = 10_000  # a hostlist naming more nodes than this is not a request elb takes
MAX_BYTES = 1 << 20
HEARTBEAT = ".elb-taken"  # in the request directory: the daemon's last intake
MAX_DETAIL = 500


class RequestKind(enum.StrEnum):
    RESUME = "resume"
    SUSPEND = "suspend"
    RESUME_FAIL = "resume-fail"


class RequestError(ValueError):
    """A request that cannot be written or read; the message says why."""


@dataclass(frozen=True, slots=True)
class Request:
    kind: RequestKind
    nodes: tuple[str, ...]
    time: float  # when Slurm asked
    source: str = ""  # the file it was read from
    detail: str = ""  # what Slurm said of it (the jobs and partitions of a resume), for the log


def request_dir() -> Path:
    return Path(os.environ.get(ENV_DIR) or DEFAULT_DIR)


def parse_nodes(hostlist: str) -> tuple[str, ...]:
    """The node names of Slurm's hostlist argument; each a plain host name."""
    try:
        names = expand(hostlist)
    except ValueError as err:
        raise RequestError(str(err)) from None
    if not names:
        raise RequestError("no node named")
    if len(names) > MAX_NODES:
        raise RequestError(f"{len(names)} nodes named, more than {MAX_NODES}")
    bad = [n for n in names if not _NAME.match(n)]
    if bad:
        raise RequestError(f"not a node name: {bad[0]!r}")
    return names


def write(directory: Path, kind: RequestKind, hostlist: str, now: float, detail: str = "") -> Path:
    """Write one request (atomically); the path of the file."""
    nodes = parse_nodes(hostlist)
    body = json.dumps(
        {"kind": kind.value, "nodes": list(nodes), "time": now, "detail": _clean(detail)}, separators=(",", ":")
    )
    stem = f"{time.time_ns():020d}-{os.getpid()}-{kind.value}"
    tmp = directory / f".{stem}.tmp"
    final = directory / f"{stem}.json"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except OSError as err:
        raise RequestError(f"cannot write the request in {directory}: {err.strerror or err}") from None
    return final


def read(path: Path) -> Request:
    """One request file; ``RequestError`` when it is not one."""
    try:
        raw = path.read_bytes()[: MAX_BYTES + 1]
    except OSError as err:
        raise RequestError(f"{path.name}: cannot read: {err.strerror or err}") from None
    if len(raw) > MAX_BYTES:
        raise RequestError(f"{path.name}: larger than {MAX_BYTES} bytes")
    try:
        data = json.loads(raw)
        kind = RequestKind(data["kind"])
        nodes = data["nodes"]
        when = data["time"]
    except (ValueError, KeyError, TypeError) as err:
        raise RequestError(f"{path.name}: not a request: {err}") from None
    if not isinstance(nodes, list) or not all(isinstance(n, str) and _NAME.match(n) for n in nodes) or not nodes:
        raise RequestError(f"{path.name}: nodes must be a list of node names")
    if len(nodes) > MAX_NODES:
        raise RequestError(f"{path.name}: {len(nodes)} nodes, more than {MAX_NODES}")
    if isinstance(when, bool) or not isinstance(when, int | float) or not 0 < when < 1e11:
        raise RequestError(f"{path.name}: time must be POSIX seconds")
    detail = data.get("detail", "")
    if not isinstance(detail, str):
        raise RequestError(f"{path.name}: detail must be text")
    return Request(kind, tuple(nodes), float(when), path.name, _clean(detail))


def _clean(text: str) -> str:
    """``text`` on one line of printable characters, at most ``MAX_DETAIL`` of them."""
    return "".join(c if c.isprintable() else " " for c in text)[:MAX_DETAIL]


def resume_detail(path: Path) -> str:
    """The jobs of Slurm's resume file (``SLURM_RESUME_FILE``: ``{"jobs": [{"job_id": ..,
    "partition": .., "nodes_alloc": ..}, ...]}``) in words: ``job 12 (partition cloud) on
    node[001-002]; ...``; empty when it cannot be read (the request goes on without it)."""
    try:
        raw = path.read_bytes()[: MAX_BYTES + 1]
        data = json.loads(raw) if len(raw) <= MAX_BYTES else None
    except (OSError, ValueError):
        return ""
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list):
        return ""
    parts = []
    for job in jobs:
        if not isinstance(job, dict):
            continue
        number, partition, nodes = job.get("job_id"), job.get("partition"), job.get("nodes_alloc")
        if isinstance(number, int) and not isinstance(number, bool):
            where = f" (partition {partition})" if isinstance(partition, str) and partition else ""
            on = f" on {nodes}" if isinstance(nodes, str) and nodes else ""
            parts.append(f"job {number}{where}{on}")
    return _clean("; ".join(parts))


def touch_heartbeat(directory: Path, now: float, stale_after: float = 180.0) -> None:
    """Say that the daemon took the requests at ``now``; the programs count it stale after
    ``stale_after`` seconds. A directory that cannot be written is left as it is (the pass goes
    on; the programs then fail, which is what a stuck daemon should cause)."""
    body = json.dumps({"time": now, "stale_after": stale_after}, separators=(",", ":"))
    tmp = directory / f"{HEARTBEAT}.tmp"
    with contextlib.suppress(OSError):
        tmp.write_text(body, encoding="utf-8")
        os.replace(tmp, directory / HEARTBEAT)


def daemon_silence(directory: Path, now: float) -> str | None:
    """Why the daemon is not taking requests (no heartbeat, or a stale one), or None when it is."""
    path = directory / HEARTBEAT
    try:
        data = json.loads(path.read_bytes()[:4096])
        when, stale = float(data["time"]), float(data["stale_after"])
    except FileNotFoundError:
        return f"the elb daemon has never taken a request from {directory} (is elb running?)"
    except (OSError, ValueError, KeyError, TypeError):
        return f"the elb daemon's heartbeat {path} cannot be read"
    if now - when > stale:
        return f"the elb daemon has not taken requests for {now - when:.0f} s (more than {stale:.0f} s)"
    return None


@dataclass(frozen=True, slots=True)
class Taken:
    requests: tuple[Request, ...]
    bad: tuple[str, ...]  # why each file set aside was not a request


def _is_request(name: str) -> bool:
    """A request file's name (a temporary file, the heartbeat and a file set aside are not)."""
    return name.endswith(".json") and not name.startswith(".")


def waiting(directory: Path) -> frozenset[str]:
    """The names of the request files in ``directory`` (none when it does not exist): the peek
    (``elb.core.scheduler.PeeksDemand``), a listing of a local directory, nothing read. Raises
    ``OSError`` when it cannot be listed."""
    try:
        with os.scandir(directory) as entries:
            return frozenset(e.name for e in entries if _is_request(e.name))
    except FileNotFoundError:
        return frozenset()


def pending(directory: Path, limit: int = 1000) -> Taken:
    """The requests waiting in ``directory``, oldest first (at most ``limit``); files that are
    not requests are renamed ``*.bad`` and said why. Nothing is removed: ``done`` does that
    once the request is journalled."""
    try:
        names = sorted(p.name for p in directory.iterdir() if _is_request(p.name))
    except FileNotFoundError:
        return Taken((), ())
    except OSError as err:
        raise RequestError(f"cannot list {directory}: {err.strerror or err}") from None
    requests: list[Request] = []
    bad: list[str] = []
    for name in names[:limit]:
        path = directory / name
        try:
            requests.append(read(path))
        except RequestError as err:
            bad.append(str(err))
            with contextlib.suppress(OSError):  # if it cannot be set aside, it is said again next pass
                path.rename(path.with_suffix(".bad"))
    return Taken(tuple(requests), tuple(bad))


def done(directory: Path, request: Request) -> None:
    """Remove a journalled request's file (gone already: nothing to do)."""
    with contextlib.suppress(FileNotFoundError):
        (directory / request.source).unlink()


__all__: Sequence[str] = (
    "DEFAULT_DIR",
    "ENV_DIR",
    "HEARTBEAT",
    "Request",
    "RequestError",
    "RequestKind",
    "Taken",
    "daemon_silence",
    "done",
    "parse_nodes",
    "pending",
    "read",
    "request_dir",
    "resume_detail",
    "touch_heartbeat",
    "waiting",
    "write",
)
