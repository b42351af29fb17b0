"""Pure parsers of what Slurm 22.05 (Debian 12's ``slurm-wlm``) prints for elb's polling loop.

Fixed-format text, not ``--json``: 22.05's JSON output is schema-versioned (``data_parser``
v0.0.38) and builds every field of every job, where the loop needs a dozen. The formats are
fixed here (``SQUEUE_ARGV``, ``SINFO_ARGV``) and the parsers read exactly them, one record a
line, fields separated by ``|``; the one free-text field a user controls (the job's name, the
node's reason) is last, so a ``|`` in it stays in it. The fixtures in
tests/fixtures/slurm/recorded were printed by the real daemons.

- ``squeue``: job (``%i``: ``8``, ``8_3``, ``8_[6-100%5]`` for an array's pending tasks),
  partition, state (long form), reason, nodes, CPUs, node list (a hostlist, empty while
  pending), submit and start time (local time, ``N/A`` when unknown), time limit (``UNLIMITED``,
  ``[D-]HH:MM:SS``, ``MM:SS``), user, name.
- ``sinfo --Node``: node, its complete state (``idle+cloud+powered_down``: the base state and
  its flags), CPUs, CPUs allocated/idle/other/total, partition (``cloud*`` for the default),
  reason. A node in several partitions is printed once for each.

Anything else (a missing field, a number that is not one, an unknown base state) raises
``SlurmParseError`` naming the line.
"""

from __future__ import annotations

import functools
import itertools
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter, not_
from typing import Any, Generic, TypeVar, cast

import hostlist  # type: ignore[import-untyped]

from elb.core.frozen import maker, quick_init
from elb.core.gcpause import paused
from elb.schedulers.slurm.aligned import Stretch, in_order, in_text, one_break, passed_over, plain_text, spliced
from elb.schedulers.timestamps import TIMESTAMP, parse_timestamp

T = TypeVar("T")
E = TypeVar("E", bound=tuple[Any, ...])  # what a memo keeps of a line (``SqueueMemo``): a tuple, its job first

# A read's lines against the read before's: the read before's entries (the very list
# ``read_entries`` gave: patched into the read's own when its caller handed it back), the
# stretches of its lines the read took in place (``elb.schedulers.slurm.aligned.Stretch``), and the
# entries of its lines that none took, in order; every other line of the read was looked up or read.
Splice = tuple[list[E], list[Stretch], list[E]]

SQUEUE_FORMAT = "%i|%P|%T|%r|%D|%C|%N|%V|%S|%l|%u|%j"
SQUEUE_ARGV = (
    "squeue",
    "--noheader",
    "--states=PENDING,CONFIGURING,RUNNING,COMPLETING,SUSPENDED,REQUEUED,RESIZING",
    f"--format={SQUEUE_FORMAT}",
)
SINFO_FORMAT = "NodeList:0|,StateComplete:0|,CPUs:0|,CPUsState:0|,Partition:0|,Reason:0"
SINFO_ARGV = ("sinfo", "--noheader", "--Node", f"--Format={SINFO_FORMAT}")

# Base node states of Slurm 22.05 (``sinfo -O StateComplete``'s first word, node_state_string).
BASE_STATES = frozenset(
    {"allocated", "completing", "down", "drained", "draining", "error", "future", "idle", "mixed", "unknown"}
)

# Pending reasons of a job no new node would start (held, a dependency, a begin time, a
# partition or association limit, a node list that cannot be met). Any other reason (None,
# Resources, Priority, nodes powering up or required nodes down) is a job waiting for nodes.
NOT_DEMAND_PREFIXES = (
    "ReqNodeNotAvail",  # a requested node is down, drained or does not exist
    "Dependency",
    "DependencyNeverSatisfied",
    "BeginTime",
    "JobHeld",  # JobHeldUser, JobHeldAdmin
    "Partition",  # PartitionNodeLimit, PartitionTimeLimit, PartitionDown, PartitionInactive, PartitionConfig
    "JobArrayTaskLimit",
    "Assoc",  # AssocGrp*Limit, AssocMax*
    "QOS",
    "Reservation",
    "InvalidAccount",
    "InvalidQOS",
    "BadConstraints",
    "launch failed requeued held",
)


class SlurmParseError(ValueError):
    """Slurm's output is not what elb asked for; the message names the line."""


@quick_init
@dataclass(frozen=True, slots=True)
class SlurmJob:
    job_id: str  # 8, 8_3, or 8_[6-100%5] (an array's tasks still pending)
    partition: str
    state: str  # PENDING, CONFIGURING, RUNNING, COMPLETING, ...
    reason: str
    nodes: int
    cpus: int
    nodelist: tuple[str, ...]  # the nodes it holds (empty while pending)
    submitted: float | None
    started: float | None  # expected start while pending (N/A: unknown)
    time_limit: float | None  # seconds; None: UNLIMITED
    user: str
    name: str

    @property
    def pending(self) -> bool:
        return self.state == PENDING

    @property
    def configuring(self) -> bool:
        """Given its nodes, waiting for them to power up: started on none of them yet."""
        return self.state == "CONFIGURING"

    @property
    def demand(self) -> bool:
        """A pending job waiting for nodes (to free, or to come up), not for anything else."""
        return self.pending and not_demand_reason(self.reason) is None


PENDING = "PENDING"  # a pending job's state, as squeue shows it

# A SlurmJob made without a call of the class (``elb.core.frozen.maker``): a read makes one for each new line.
_slurm_job = maker(SlurmJob)

# A squeue line's fields as read and checked (``_squeue_fields``), in ``SlurmJob``'s order.
SqueueFields = tuple[str, str, str, str, int, int, tuple[str, ...], float | None, float | None, float | None, str, str]


@functools.lru_cache(maxsize=1024)
def not_demand_reason(reason: str) -> str | None:
    """Why a pending job with Slurm's ``reason`` is not demand for nodes; None when it is (each
    reason's answer kept: a queue has a few dozen reasons, each on thousands of jobs)."""
    if reason.startswith(NOT_DEMAND_PREFIXES):
        return f"Slurm holds it: {reason}"
    return None  # a reason this elb does not know counts as demand: Slurm powers nodes up for it


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    state: str  # the base state: idle, allocated, mixed, down, drained, ...
    flags: frozenset[str]  # cloud, powered_down, powering_up, powering_down, drain, not_responding, ...
    cpus: int
    cpus_allocated: int
    partitions: tuple[str, ...]
    reason: str  # "none" when there is none

    @property
    def shown(self) -> str:
        """The state with its flags as ``sinfo`` shows them (``idle+cloud+powering_up``)."""
        return "+".join([self.state, *sorted(self.flags)])

    @property
    def powered_down(self) -> bool:
        return "powered_down" in self.flags

    @property
    def powering_up(self) -> bool:
        return "powering_up" in self.flags

    @property
    def powering_down(self) -> bool:
        return "powering_down" in self.flags or "power_down" in self.flags

    @property
    def drain(self) -> bool:
        return "drain" in self.flags or self.state in ("drained", "draining")


def expand(nodelist: str) -> tuple[str, ...]:
    """A Slurm hostlist (``node[001-003,007]``) as names. python-hostlist implements Slurm's
    syntax (brackets, ranges with leading zeros, several bracket groups) and is kept by NSC."""
    text = nodelist.strip()
    if not text or text == "(null)":
        return ()
    try:
        return tuple(hostlist.expand_hostlist(text))
    except hostlist.BadHostlist as err:
        raise ValueError(f"hostlist {text!r}: {err}") from None


def compress(names: Sequence[str]) -> str:
    """Names as a Slurm hostlist, for ``scontrol``."""
    return str(hostlist.collect_hostlist(list(names)))


_LIMIT = re.compile(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)")


def parse_time_limit(text: str) -> float | None:
    """``UNLIMITED`` -> None; ``[D-]HH:MM:SS`` or ``MM:SS`` -> seconds."""
    value = text.strip()
    if value in ("UNLIMITED", "INFINITE", "NOT_SET", "N/A"):
        return None
    m = _LIMIT.fullmatch(value)
    if m is None:
        raise ValueError(f"time limit {text!r} is not [D-]HH:MM:SS, MM:SS or UNLIMITED")
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


_SIXTY = {f"{n:02d}": n for n in range(60)}  # a minute's or a second's two digits


def _known_second(value: str, hours: dict[str, float | None]) -> float | None:
    """The stamp ``value`` of whole seconds (``YYYY-MM-DDTHH:MM:SS``) whose hour's start is in
    ``hours``, read off its characters (only the hour of a stamp that was read whole is kept);
    None for any other."""
    if len(value) != 19 or value[13] != ":" or value[16] != ":":
        return None
    start = hours.get(value[:13])
    minute, second = _SIXTY.get(value[14:16]), _SIXTY.get(value[17:19])
    if start is None or minute is None or second is None:
        return None
    return start + minute * 60 + second


def _time(text: str, hours: dict[str, float | None] | None = None) -> float | None:
    """A time stamp (``parse_timestamp``), None for none. ``hours``: each hour's start as worked
    out before (None: the local offset changes within it), so that a stamp whose hour is known
    is its hour's start plus its minutes and seconds, what ``parse_timestamp`` gives it (a stamp
    of whole seconds, its hour known, read off its characters)."""
    value = text.strip()
    if value in ("N/A", "Unknown", "None", ""):
        return None
    if hours is None:
        return parse_timestamp(value)
    known = _known_second(value, hours)
    return known if known is not None else _from_hour(value, hours)


def _from_hour(value: str, hours: dict[str, float | None]) -> float:
    """The stamp ``value`` as its hour's start (worked out and kept in ``hours`` the first time)
    plus its minutes and seconds; read whole when that hour is not plain (``_plain_hour``)."""
    m = TIMESTAMP.fullmatch(value)
    if m is None or int(m.group(5)) > 59 or int(m.group(6)) > 59:  # (a leap second: read whole)
        return parse_timestamp(value)
    hour = value[:13]
    if hour not in hours:
        try:
            first = parse_timestamp(hour + ":00:00")  # checks the date and the hour
        except ValueError:
            return parse_timestamp(value)  # refused as itself
        hours[hour] = first if _plain_hour(first, m) else None
    start = hours[hour]
    if start is None:
        return parse_timestamp(value)
    seconds = start + int(m.group(5)) * 60 + int(m.group(6))
    if m.group(7):
        seconds += float("0." + m.group(7))
    return seconds


def paired(derive: Callable[[SlurmJob], T]) -> Callable[[SlurmJob], tuple[SlurmJob, T]]:
    """A memo's ``derive`` of a line's job and what ``derive`` makes of it."""

    def pair(job: SlurmJob) -> tuple[SlurmJob, T]:
        return job, derive(job)

    return pair


class SqueueMemo(Generic[E]):
    """What the last reads of squeue made of each line, for the next read: its entry, what
    ``derive`` makes of the line's job (a tuple, the job first: the driver's
    ``elb.schedulers.slurm.held.Line``; ``paired``: the job and what another function makes of
    it), so that a line read before costs one lookup, or none: the last read's lines and entries
    are kept in their order (``last``), and a line in its place there takes its entry with no
    lookup (``elb.schedulers.slurm.aligned``); when the last read's text is kept (``text``), the
    new text is walked beside it as text, and only the lines out of place are split out.

    From one poll to the next most of squeue's lines are the very same text, and a line's job
    is a pure function of its text (and of the local time zone, which its time stamps are read
    in: checked), so a line read before is looked up instead of read again. The lines of the
    last read are kept, and those of the reads before until more than ``stale_bound`` of them (a
    quarter of the last read's lines, at least ``STALE_LEAST``) are not in the last read: then
    the lines the walks passed over since (``left``) are taken out of it, or, when they are not
    known or the memo is still past the bound, the memo is made anew of the last read's lines
    alone (a dict of every line built once in several reads, and its size bounded). One memo
    serves one sequence of reads (``SlurmCommands`` keeps one). ``pending``: what a pending line
    (no node list) is kept as, made of its text and fields (``_squeue_fields``) instead of
    ``derive`` of its ``SlurmJob``: a read makes no ``SlurmJob`` of such a line (its entry's
    first item is then what ``pending`` puts there).
    """

    def __init__(
        self, derive: Callable[[SlurmJob], E], pending: Callable[[str, SqueueFields], E] | None = None
    ) -> None:
        self.derive = derive  # a line's entry of its job (the job its first item)
        # A pending line's entry of its text and fields, its job not made (None: ``derive``'s of its job).
        self.pending = pending
        self.lines: dict[str, E] = {}
        self.zone: tuple[object, ...] = ()
        self.hours: dict[str, float | None] = {}  # each hour's start (``_time``), in ``zone``
        self.limits: dict[str, float | None] = {}  # time limits read (``parse_time_limit``)
        self.minutes: dict[str, float] = {}  # each minute's start (``_stamp``), in ``zone``
        self.words: dict[str, str] = {}  # the texts of fields many lines share, each once (``_squeue_line``)
        self.last: list[str] | None = []  # the last read's lines (no blank one), in its order (None: ``text``'s)
        self.last_entries: list[E] = []  # their entries
        # The last read's text when ``in_text`` may walk it (``plain_text``, no blank line, ``\n``
        # its only line break), and its lines' lengths; else None.
        self.text: str | None = None
        self.sizes: list[int] = []
        # The lines the walks of the texts passed over (``in_text``'s, the last reads' own line
        # objects, as ``last`` keeps them: lines that left a read) since the memo was last made
        # anew or pruned; None: not known (a read walked as lines, but the first into a memo of
        # none, or one past the walk's bounds).
        self.left: list[str] | None = []
        # The last read's lines against the read before's (None: not known, a read with blank lines).
        self.splice: Splice[E] | None = None

    def last_lines(self) -> list[str]:
        """The last read's lines (no blank one), in its order."""
        if self.last is None:
            self.last = self.text.splitlines() if self.text is not None else []
        return self.last


STALE_LEAST = 1_000  # lines no longer read a memo keeps at least before it is made anew


def stale_bound(lines: int) -> int:
    """How many lines that are not in a read of ``lines`` lines its memo keeps at most."""
    return max(STALE_LEAST, lines // 4)


def _zone() -> tuple[object, ...]:
    """What the conversion of local time stamps depends on (``time.tzset``'s results)."""
    return (time.timezone, time.altzone, time.daylight, time.tzname)


def _plain_hour(first: float, m: re.Match[str]) -> bool:
    """Whether the local hour of the stamp ``m`` that starts at ``first`` is there once, whole,
    at one offset: its start and its last second read back as themselves, and the seconds just
    before and just after it are in other hours (an hour the clock goes back over is there
    twice, and ``mktime`` may take either)."""
    day_hour = tuple(int(g) for g in m.groups()[:4])
    start, end = time.localtime(first), time.localtime(first + 3599)
    return (
        tuple(start[:6]) == (*day_hour, 0, 0)
        and tuple(end[:6]) == (*day_hour, 59, 59)
        and tuple(time.localtime(first - 1)[:4]) != day_hour
        and tuple(time.localtime(first + 3600)[:4]) != day_hour
    )


def _stamp(text: str, hours: dict[str, float | None] | None, minutes: dict[str, float] | None) -> float | None:
    """``_time`` of ``text``. ``minutes``: the start of each minute read before (in the same zone,
    ``SqueueMemo.minutes``), so that a stamp of whole seconds (``YYYY-MM-DDTHH:MM:SS``) of a known
    minute is that start plus its seconds, what ``_time`` works out from its hour's start (a new
    job's stamp is most often of a second not read before, but of a minute that was); a stamp of
    another minute is read by ``_time``, and its minute kept when its hour is plain."""
    if minutes is None:
        return _time(text, hours)
    if text == "N/A":  # (a pending job's start, most often)
        return None
    start = minutes.get(text[:16])
    if start is not None and len(text) == 19 and text[16] == ":":
        second = _SIXTY.get(text[17:19])
        if second is not None:
            return start + second
    value = _time(text, hours)
    if value is not None and hours is not None and len(text) == 19 and text[13] == ":" and text[16] == ":":
        hour, minute = hours.get(text[:13]), _SIXTY.get(text[14:16])
        if hour is not None and minute is not None:  # (``_known_second``'s start of the minute)
            minutes[text[:16]] = hour + minute * 60
    return value


_UNREAD: Any = object()  # a text not in ``limits`` (a lookup's default, replaced before any use)


def _limit(text: str, limits: dict[str, float | None] | None) -> float | None:
    """``parse_time_limit``, once for each text (``limits``: the texts read before)."""
    if limits is None:
        return parse_time_limit(text)
    if text not in limits:
        limits[text] = parse_time_limit(text)  # (a ValueError keeps nothing)
    return limits[text]


def parse_squeue(text: str, *, memo: SqueueMemo[Any] | None = None) -> list[SlurmJob]:
    """``SQUEUE_ARGV``'s output; ``memo``: the lines of the reads before (updated, ``read_entries``)."""
    if memo is not None:
        return list(map(_FIRST, read_entries(text, memo)))
    with paused(keep=True):
        return [_squeue_line(line, i) for i, line in enumerate(text.splitlines(), 1) if line.strip()]


def read_squeue(text: str, memo: SqueueMemo[tuple[SlurmJob, T]]) -> tuple[list[SlurmJob], list[T]]:
    """``SQUEUE_ARGV``'s output: its jobs, and what the memo's ``derive`` (``paired``) made of
    each, in their order (``read_entries``'s, apart)."""
    entries = read_entries(text, memo)
    return list(map(_FIRST, entries)), list(map(_SECOND, entries))


def read_entries(text: str, memo: SqueueMemo[E], *, mine: object = None) -> list[E]:
    """``SQUEUE_ARGV``'s output: each line's entry (``memo.derive`` of its job), in their order;
    ``memo``: the lines of the reads before (updated). The lines are compared in place with the
    last read's, in their order, and those out of place looked up in the memo
    (``elb.schedulers.slurm.aligned.in_order``, or ``in_text`` on the two texts when both are
    plain); only the ones it lacks are read; the cycle collector waits meanwhile
    (``elb.core.gcpause``: the jobs live until the next read). ``memo.splice``: how the lines
    were taken from the read before's (for what is kept of each line beside the memo).

    ``mine``: the list of entries the caller had of the memo's last read, handed back for this
    read to change into its own: when it is the memo's last list (no other read since), the text
    walk patches it (``in_text``'s ``passed``) instead of copying its 50,000 entries, and this
    read's list is that very object. Any other caller's read (or none handed back) makes a new
    list, so a list handed out changes only at its holder's word."""
    zone = _zone()
    if memo.zone != zone:
        memo.lines, memo.hours, memo.minutes, memo.zone, memo.left = {}, {}, {}, zone, []
        memo.last, memo.last_entries, memo.text, memo.sizes = [], [], None, []
    known = memo.lines
    fresh = not known  # (a memo of no line has none that left a read)
    before = memo.last_entries
    stretches: list[Stretch] = []
    passed: list[E] | None = [] if mine is before else None  # (patched: the entries no stretch took)
    with paused(keep=True):
        walked = None
        if memo.text is not None and plain_text(text):
            walked = in_text(
                text,
                memo.text,
                memo.sizes,
                before,
                known,
                before_lines=memo.last_lines(),
                stretches=stretches,
                passed=passed,
            )
        if walked is not None:
            found, sizes, loose, left = walked
            lines: list[str] | None = None  # (the last read's, patched once the new lines are read)
            out = [(i, line) for i, line in loose if found[i] is None]  # the lines not read before
            if memo.left is not None:
                memo.left = None if left is None else memo.left + left
        else:
            stretches = []  # (a walk of the text that gave up may have begun them)
            found, lines = in_order(text.splitlines(), memo.last_lines(), before, known, stretches=stretches)
            out = [(i, lines[i]) for i in itertools.compress(range(len(found)), map(not_, found))]
            memo.left = [] if fresh else None  # (the lines it passed over not known)
        if walked is None or passed is None:  # (``in_text`` did not take them: the entries before are as they were)
            passed = passed_over(before, stretches)
        try:
            new, blank = _read_new(memo, out, found, split=walked is not None)
        except BaseException:
            if found is before:  # its last entries and lengths patched half way: the memo made anew next
                memo.zone = ()
            raise
        if walked is not None:  # the read's lines: the last read's (the memo's own list) where taken in place
            lines = spliced(memo.last_lines(), stretches, [line for _, line in walked[2]], in_place=True)
        if blank:
            kept = [i for i, entry in enumerate(found) if entry is not None]
            lines, found = [cast("list[str]", lines)[i] for i in kept], [found[i] for i in kept]
        entries = cast("list[E]", found)
        _remember(memo, cast("list[str]", lines), entries, new)
        memo.last_entries = entries
        memo.splice = None if blank else (before, stretches, passed)
        if walked is not None:
            memo.last, memo.text, memo.sizes = lines, text, sizes
        else:
            read = cast("list[str]", lines)
            plain = plain_text(text) and not blank and one_break(text)
            memo.last, memo.text, memo.sizes = read, (text if plain else None), (list(map(len, read)) if plain else [])
    return entries


_FIRST, _SECOND = itemgetter(0), itemgetter(1)


def _read_new(
    memo: SqueueMemo[E], out: list[tuple[int, str]], found: list[E | None], *, split: bool
) -> tuple[list[tuple[str, E]], bool]:
    """Reads the lines ``out`` (each with its index) the memo lacks into their places in
    ``found``: the lines read and their entries, and whether one was blank (``split``: the text
    walk split them out, and it splits out no blank line)."""
    new: list[tuple[str, E]] = []
    blank = False
    derive, pending = memo.derive, memo.pending
    hours, limits, minutes, words = memo.hours, memo.limits, memo.minutes, memo.words
    for i, line in out:
        if split or line.strip():
            fields = _squeue_fields(line, i + 1, hours, limits, minutes, words=words)
            if pending is not None and fields[2] == PENDING and not fields[6]:  # (no SlurmJob made)
                found[i] = entry = pending(line, fields)
            else:
                found[i] = entry = derive(_slurm_job(*fields))
            new.append((line, entry))
        else:
            blank = True
    return new, blank


def _remember(memo: SqueueMemo[E], lines: list[str], entries: list[E], new: list[tuple[str, E]]) -> None:
    """Keeps a read's ``lines`` (no blank one) and their ``entries``, ``new`` the lines of them
    the memo lacked with theirs: added to the memo. When more than ``stale_bound`` of its lines
    are not in this read, the lines the walks passed over (``SqueueMemo.left``) are taken out
    first (one of them that moved or came back since is read again the next time it is out of
    place), and when that is not known or not enough the memo is made anew of this read's
    lines alone."""
    found_before = len(entries) - len(new)
    bound = stale_bound(len(entries))
    if len(memo.lines) - found_before > bound and memo.left is not None:
        _prune(memo.lines, memo.left)
        memo.left = []
    if len(memo.lines) - found_before > bound:
        memo.lines = dict(zip(lines, entries, strict=True))
        memo.left = []
    else:
        memo.lines.update(new)
    if max(len(memo.hours), len(memo.limits), len(memo.minutes), len(memo.words)) > _KEPT:  # bounded: begun again
        memo.hours, memo.limits, memo.minutes, memo.words = {}, {}, {}, {}


_KEPT = 100_000


def _prune(known: dict[str, E], left: list[str]) -> None:
    """Takes the lines of ``left`` out of ``known`` (each a read's own line, its hash worked out already)."""
    drop = known.pop
    for line in left:
        drop(line, None)


def _squeue_line(line: str, number: int) -> SlurmJob:
    """The job of one line of ``SQUEUE_ARGV``'s output read on its own (``_squeue_fields``, no
    texts of times nor fields read before)."""
    return _slurm_job(*_squeue_fields(line, number))


def _squeue_fields(
    line: str,
    number: int,
    hours: dict[str, float | None] | None = None,
    limits: dict[str, float | None] | None = None,
    minutes: dict[str, float] | None = None,
    *,
    words: dict[str, str] | None = None,
) -> SqueueFields:
    """The fields of one line of ``SQUEUE_ARGV``'s output as its job has them (``number``: the
    line's, for an error); ``hours``, ``limits``, ``minutes``: what texts of times were read as
    before (``SqueueMemo``'s); ``words``: the texts of the fields many lines share (partition,
    state, reason, user), each kept once: a line's are those very objects (a queue's lines hold
    a few dozen of each, not four strings a line)."""
    parts = line.split("|", 11)
    if len(parts) != 12:
        raise SlurmParseError(f"squeue: line {number}: {len(parts)} fields, expected 12 ({SQUEUE_FORMAT})")
    job_id, partition, state, reason, nodes, cpus, nodelist, submitted, started, limit, user, name = parts
    if words is not None:
        shared = words.setdefault
        partition, state, reason, user = (
            shared(partition, partition),
            shared(state, state),
            shared(reason, reason),
            shared(user, user),
        )
    try:
        if not job_id[:1].isdigit() or not state.isupper():  # squeue's ids start with the job's number
            raise ValueError(f"job {job_id!r} in state {state!r}")
        # A limit read before is looked up here (``_limit`` when it was not).
        when = _stamp(submitted, hours, minutes)
        start = None if started == "N/A" else _stamp(started, hours, minutes)  # (a pending job's, most often)
        seconds = _UNREAD if limits is None else limits.get(limit, _UNREAD)
        if seconds is _UNREAD:
            seconds = _limit(limit, limits)
        return (
            job_id,
            partition,
            state,
            reason,
            int(nodes),
            int(cpus),
            expand(nodelist) if nodelist else (),  # (a pending job's: none)
            when,
            start,
            seconds,
            user,
            name,
        )
    except ValueError as err:
        raise SlurmParseError(f"squeue: line {number}: {err}") from None


def job_of_text(line: str) -> SlurmJob:
    """The job of a line of ``SQUEUE_ARGV``'s output that a read read already (``_squeue_line``)."""
    return _squeue_line(line, 0)


def reason_of_text(line: str) -> str:
    """The reason of a line of ``SQUEUE_ARGV``'s output that a read read already (its fourth
    field, as ``_squeue_fields`` reads it)."""
    return line.split("|", 4)[3]


# A node of several sinfo lines as the read before joined it: the node of its lines before the
# last, the last line's node, and the node joined of them (``SinfoMemo.joined``).
_Joined = tuple[SlurmNode, SlurmNode, SlurmNode]


class SinfoMemo:
    """What the last read of sinfo made of each line (its node, in that line's partition), for
    the next read: a line's node is a pure function of its text; and the nodes it joined of
    several lines (a node in several partitions), by the identities of the nodes joined. Only
    the last read's are kept (a node a line: a thousand nodes are a dict of a thousand), and its
    text and nodes: a read of the very same text (the nodes' states unchanged since, as between
    most polls) is the last read's nodes. ``SlurmCommands`` keeps one."""

    def __init__(self) -> None:
        self.lines: dict[str, SlurmNode] = {}
        self.joined: dict[tuple[int, int], _Joined] = {}
        self.text: str | None = None  # the last read's text, and its nodes
        self.nodes: tuple[SlurmNode, ...] = ()


def parse_sinfo(text: str, *, memo: SinfoMemo | None = None) -> list[SlurmNode]:
    """``SINFO_ARGV``'s output, one node each (its partitions joined); ``memo``: the lines of the
    read before (updated), each found there read no more. A node whose lines are the very ones
    of the read before is the same object (its lines' node, when it has one line; the node the
    read before joined of them, when several), and a text that is the read before's gives its
    very nodes (what its lines would give)."""
    if memo is not None and text == memo.text:
        return list(memo.nodes)
    known = memo.lines if memo is not None else {}
    joins = memo.joined if memo is not None else {}
    kept: dict[str, SlurmNode] = {}
    joined: dict[tuple[int, int], _Joined] = {}
    found: dict[str, SlurmNode] = {}
    for number, line in enumerate(text.splitlines(), 1):
        node = known.get(line)
        if node is None:
            if not line.strip():
                continue
            node = _sinfo_line(line, number)
        kept[line] = node
        before = found.get(node.name)
        if before is not None:
            key = (id(before), id(node))
            hit = joins.get(key)
            if hit is not None and hit[0] is before and hit[1] is node:
                joined[key] = hit
                node = hit[2]
            else:
                both = SlurmNode(
                    node.name,
                    node.state,
                    node.flags,
                    node.cpus,
                    node.cpus_allocated,
                    before.partitions + node.partitions,
                    node.reason,
                )
                joined[key] = (before, node, both)
                node = both
        found[node.name] = node
    nodes = list(found.values())
    if memo is not None:
        memo.lines, memo.joined, memo.text, memo.nodes = kept, joined, text, tuple(nodes)
    return nodes


def _sinfo_line(line: str, number: int) -> SlurmNode:
    """One line of ``SINFO_ARGV``'s output (``number``: its line's, for an error): its node, in
    this line's partition."""
    parts = line.split("|", 5)
    if len(parts) != 6:
        raise SlurmParseError(f"sinfo: line {number}: {len(parts)} fields, expected 6 ({SINFO_FORMAT})")
    name, complete, cpus, cpu_states, partition, reason = parts
    words = complete.strip().lower().split("+")
    base = words[0].rstrip("*~#!%$@^-")
    if base not in BASE_STATES:
        raise SlurmParseError(f"sinfo: line {number}: node {name!r}: unknown state {complete!r}")
    try:
        allocated, _idle, _other, total = (int(x) for x in cpu_states.split("/"))
        node = SlurmNode(
            name=name.strip(),
            state=base,
            flags=frozenset(words[1:]),
            cpus=int(cpus),
            cpus_allocated=allocated,
            partitions=(partition.strip().rstrip("*"),),
            reason=reason.strip(),
        )
        if total != node.cpus:
            raise ValueError(f"CPUs {cpus} but {total} in {cpu_states!r}")
    except ValueError as err:
        raise SlurmParseError(f"sinfo: line {number}: node {name!r}: {err}") from None
    if not node.name:
        raise SlurmParseError(f"sinfo: line {number}: no node name")
    return node


def by_name(nodes: Sequence[SlurmNode]) -> Mapping[str, SlurmNode]:
    return {n.name: n for n in nodes}


__all__: Sequence[str] = (
    "PENDING",
    "SINFO_ARGV",
    "SQUEUE_ARGV",
    "SinfoMemo",
    "SlurmJob",
    "SlurmNode",
    "SlurmParseError",
    "Splice",
    "SqueueFields",
    "SqueueMemo",
    "by_name",
    "compress",
    "expand",
    "job_of_text",
    "not_demand_reason",
    "paired",
    "parse_sinfo",
    "parse_squeue",
    "parse_time_limit",
    "read_entries",
    "read_squeue",
    "reason_of_text",
    "stale_bound",
)
