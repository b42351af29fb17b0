"""Grid Engine's peek (``elb.core.scheduler.PeeksDemand``): between passes, which jobs wait and
may run, far cheaper than the pass's read.

The peek is ``qstat -s p -u '*'``: every user's pending jobs in qstat's plain format, one line a
job (an array job's waiting tasks on one line), and from it the numbers of the jobs whose state
is plain waiting (``qw``, a rescheduled ``Rq``), not held (``h``) nor in error (``E``). A number
the last peek did not list is new work for a pass: a job submitted, released from its hold,
cleared of its error, or sent back to wait.

Why this command, of what Grid Engine 8.1.9 offers:

- the pass's read (``qstat -u '*' -xml -r -f`` and ``qhost -xml -q``) lists every queue instance
  with its jobs and every job's requests, in XML (29 MB at 50,000 waiting entries: 0.7x of a
  pass's time is its parse); the peek lists the waiting jobs only, with no queue, no host and no
  request, as text of about a hundred bytes a job, and elb splits lines instead of parsing XML;
- a count alone (``qstat -s p | wc -l``) misses a job that comes as another starts, and the
  highest job number misses a job released from its hold or sent back to wait, and goes back
  to 1 when the numbers wrap (``MAX_JOBID``): the set of numbers catches each;
- the qmaster's job sequence number (``$SGE_ROOT/$SGE_CELL/spool/qmaster/jobseqnum``) is a file
  in its spool directory, not an interface: it exists only with classic spooling on the
  master's host and is written when the qmaster chooses, not at each submission, and it says
  nothing of a job that started at once on a free slot (no pass is needed then) or of a job
  released from its hold.

Any output that is not this format is an ``SgeParseError``: the peek then fails, and the daemon
keeps to its poll.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from elb.schedulers.sge.errors import SgeParseError

# qstat: the pending jobs (-s p) of every user (-u '*', passed literally, no shell), plain text.
PEEK_ARGS: tuple[str, ...] = ("-s", "p", "-u", "*")

# A job's line: its number first, then its priority, name, owner and state, then its submission
# time ("11/28/2026 10:00:00"). A job's name and its owner's never hold a "/", so the line's first
# "/" is in the date, and the state is the word before the date. A line is split in two at most
# (str.find and str.split, in C): the peek's cost is its parse, and a regular expression's scan of
# each line cost three to four times as much at 50,000 jobs (benchmarks/bench_peek.py). An output
# the same as the last peek's is not parsed again (``SgeCommands.waiting_jobs``).
_HEADER = "job-ID "
_DATE = re.compile(r"[0-9]{2}/[0-9]{2}/[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}")


def waiting_jobs(out: bytes) -> frozenset[str]:
    """The numbers of the jobs ``qstat -s p -u '*'`` shows waiting and eligible to run (``qw``,
    ``Rq``: no ``h`` for a hold, no ``E`` for an error); ``SgeParseError`` for a line that is not
    a job's, qstat's header or its rule."""
    found: list[str] = []
    lines = out.decode("utf-8", errors="replace").splitlines()
    if lines and lines[0].lstrip().startswith(_HEADER):  # qstat's header and its rule, then the jobs
        if len(lines) < 2 or lines[1].strip("-").strip():
            raise SgeParseError(f"qstat -s p: no rule under its header: {lines[1:2]!r}")
        lines = lines[2:]
    for line in lines:
        slash = line.find("/")
        head = line[: slash - 2].split() if slash > 2 else ()
        if len(head) < 3 or not head[0].isdigit() or not _DATE.match(line, slash - 2):
            if not line.strip():
                continue
            raise SgeParseError(f"qstat -s p: not a job's line: {line[:120]!r}")
        state = head[-1]
        if "q" in state and "h" not in state and "E" not in state:
            found.append(head[0])
    return frozenset(found)


__all__: Sequence[str] = ("PEEK_ARGS", "waiting_jobs")
