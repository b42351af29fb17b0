"""The programs Slurm's power saving runs: ``elb slurm resume|suspend|resume-fail HOSTLIST``.

slurm.conf names a program without arguments, so the same programs are installed as
``elb-slurm-resume``, ``elb-slurm-suspend`` and ``elb-slurm-resume-fail`` (pyproject's
scripts). Each writes one request (``elb.schedulers.slurm.requests``) and exits: 0 when written and the daemon takes
requests; 1 when the request could not be written, or when the daemon has not taken requests
for longer than its heartbeat allows (the request is written all the same): Slurm then marks the
nodes down at once rather than after ``ResumeTimeout``. The reason goes to stderr and to syslog,
since Slurm keeps no output. The resume program reads Slurm's ``SLURM_RESUME_FILE`` when Slurm
gives it (the jobs the nodes are for). They import nothing but the request module, so they
return in a few milliseconds.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from elb.schedulers.slurm.requests import RequestError, RequestKind, daemon_silence, request_dir, resume_detail, write

RESUME_FILE = "SLURM_RESUME_FILE"

log = logging.getLogger("elb.schedulers.slurm")


def _syslog(message: str) -> None:
    """Say ``message`` to syslog when there is one (Slurm keeps no output of its programs)."""
    if not Path("/dev/log").exists():
        return
    handler = logging.handlers.SysLogHandler(address="/dev/log")
    try:
        handler.emit(logging.LogRecord("elb-slurm", logging.ERROR, __file__, 0, message, None, None))
    finally:
        handler.close()


def run(kind: RequestKind, hostlist: str, directory: Path | None = None) -> int:
    """Write the request; 0 when written and the daemon takes requests, 1 (said on stderr and
    syslog) when not written or when the daemon is silent."""
    where = directory if directory is not None else request_dir()
    resume_file = os.environ.get(RESUME_FILE) if kind is RequestKind.RESUME else None
    detail = resume_detail(Path(resume_file)) if resume_file else ""
    now = time.time()
    try:
        path = write(where, kind, hostlist, now, detail)
    except RequestError as err:
        return _fail(f"elb slurm {kind.value}: {err}")
    print(f"elb slurm {kind.value}: {hostlist}: recorded in {path}")
    silence = daemon_silence(where, now)
    if silence is not None:
        return _fail(f"elb slurm {kind.value}: {hostlist}: {silence}")
    return 0


def _fail(message: str) -> int:
    print(message, file=sys.stderr)
    _syslog(message)
    return 1


def _main(kind: RequestKind, argv: Sequence[str] | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(f"usage: elb-slurm-{kind.value} HOSTLIST (as Slurm's power saving runs it)", file=sys.stderr)
        return 2
    return run(kind, args[0])


def resume(argv: Sequence[str] | None = None) -> int:
    return _main(RequestKind.RESUME, argv)


def suspend(argv: Sequence[str] | None = None) -> int:
    return _main(RequestKind.SUSPEND, argv)


def resume_fail(argv: Sequence[str] | None = None) -> int:
    return _main(RequestKind.RESUME_FAIL, argv)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "slurm",
        help="the programs Slurm's power saving runs (ResumeProgram, SuspendProgram, ResumeFailProgram)",
        description=(
            "Record what Slurm's power saving asks (resume, suspend, or give up on nodes) for the "
            "elb daemon, and return at once. slurm.conf names elb-slurm-resume, elb-slurm-suspend "
            "and elb-slurm-resume-fail, which do the same."
        ),
    )
    ssub = p.add_subparsers(dest="slurm_command", metavar="PROGRAM")
    ssub.required = True
    for kind in RequestKind:
        q = ssub.add_parser(
            kind.value,
            help=f"record a {kind.value} request for the nodes of HOSTLIST",
            description=f"Record Slurm's {kind.value} request for the nodes of HOSTLIST (e.g. node[001-004]).",
        )
        q.add_argument("hostlist", metavar="HOSTLIST", help="the nodes, as a Slurm hostlist")
        q.add_argument(
            "--dir",
            type=Path,
            default=None,
            help=f"the request directory (default ${'ELB_SLURM_REQUESTS'}, else /var/spool/elb/slurm)",
        )
        q.set_defaults(func=lambda args, kind=kind: run(kind, args.hostlist, args.dir))


__all__: Sequence[str] = ("register", "resume", "resume_fail", "run", "suspend")

if __name__ == "__main__":  # python -m elb.schedulers.slurm.programs resume|suspend|resume-fail HOSTLIST
    _KINDS = {k.value: k for k in RequestKind}
    if len(sys.argv) != 3 or sys.argv[1] not in _KINDS:
        print("usage: python -m elb.schedulers.slurm.programs resume|suspend|resume-fail HOSTLIST", file=sys.stderr)
        sys.exit(2)
    sys.exit(_main(_KINDS[sys.argv[1]], sys.argv[2:]))
