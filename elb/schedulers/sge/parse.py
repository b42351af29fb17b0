"""Pure parsers: the XML of ``qstat -u '*' -xml -r -f`` and ``qhost -xml -q`` into elb's values.

Written for the format of Son of Grid Engine 8.1.9 (Debian's ``gridengine``):

- ``qstat -xml -f``: ``<job_info>`` holds ``<queue_info>`` with one ``<Queue-List>`` per queue
  instance (``name``, ``qtype``, ``slots_used``, ``slots_resv``, ``slots_total``, optional
  ``load_avg``/``arch``, ``state``) whose ``<job_list state="running">`` children are the jobs on
  it, and a second ``<job_info>`` with the ``<job_list state="pending">`` entries (also
  ``error``/``zombie``/``finished``). A job entry has ``JB_job_number``, ``JAT_prio``,
  ``JB_name``, ``JB_owner``, ``state``, ``JB_submission_time`` (waiting) or
  ``JAT_start_time`` (running), ``slots``, ``tasks`` (array jobs) and, with ``-r``,
  ``requested_pe name=".."``, ``hard_request name=".."``, ``hard_req_queue`` (one per queue of
  ``qsub -q``) and more.
- Open Cluster Scheduler 9.x (hpc-gridware) prints the same, except: a waiting job's time is
  ``JAT_submission_time``, timestamps carry microseconds (``2026-11-24T10:00:00.123456``), and
  requests scoped with ``qsub -scope`` are ``master_hard_request``/``slave_hard_request`` (read
  into ``Job.master_requests``/``slave_requests``) and ``master_soft_request`` & co. (soft: not
  read).
- A parallel job that spans hosts is listed under every queue instance it occupies, each entry
  with the slots it holds there; elb keeps one entry per queue instance.
- ``qhost -xml -q``: ``<qhost>`` of ``<host name='..'>`` with ``<hostvalue name='..'>`` (``-``
  when unknown) and ``<queue name='..'>`` of ``<queuevalue qname='..' name='..'>`` (``slots``,
  ``slots_used``, ``slots_resv``, ``state_string``). The ``global`` pseudo-host is skipped.
- Timestamps are ``YYYY-MM-DDTHH:MM:SS`` in the master's local time, without a zone: they are
  converted with this process's local time zone (elb runs on the master).
- SGE writes ``<`` in names as ``%lt;`` (a bug of its XML escaping); it is read back as ``<``.

Anything unexpected (truncated XML, a missing field, an unknown state letter, a DTD or entity
declaration) raises ``SgeParseError`` naming what and where; nothing is returned half-read.
"""

from __future__ import annotations

import io
import re
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from dataclasses import replace as dataclass_replace
from operator import itemgetter
from types import MappingProxyType
from typing import Any, AnyStr, cast

import defusedxml
import defusedxml.ElementTree as DET
from lxml import etree as LET

from elb.core.gcpause import paused
from elb.core.model import (
    NO_FLAGS,
    NO_MOVED_PRIORITIES,
    Host,
    Job,
    JobPhase,
    MovedPriorities,
    QueueFlags,
    QueueInstance,
    Snapshot,
)
from elb.schedulers.sge.errors import SgeParseError
from elb.schedulers.sge.states import job_phase, queue_flags
from elb.schedulers.timestamps import TIMESTAMP, parse_timestamp

# Letters of SGE job states (sge_job.c, job_get_state_string): d E S T h R q r s t w x, z for zombies.
JOB_STATE_LETTERS = frozenset("dESThRqrstwxz")
# Letters of queue-instance states (qstat(1)): a c d o s u A C D E S.
QUEUE_STATE_LETTERS = frozenset("acdosuACDES")

# Numbers are ASCII digits only: SGE writes no other, and Python's int() and float() would read
# other scripts' digits ("\u0663" is 3) and more ("1_000", "nan").
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_TIME_PART = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
# Characters XML 1.0 forbids; SGE copies job names verbatim, so a hostile name can carry them.
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_MAX_TASK_ID = 2**31
_NO_REQUESTS: Mapping[str, str] = MappingProxyType({})
# Open Cluster Scheduler 9's scoped hard requests (master task, other tasks), in Job's order.
# Soft requests of any scope (soft_request, master_soft_request, ...) never bind a job: not read.
_SCOPED_REQUESTS = ("master_hard_request", "slave_hard_request")


@dataclass(frozen=True, slots=True)
class QstatResult:
    """What ``qstat -xml -f`` showed: its job entries and its queue instances; the priorities of
    entries read before that moved since (their jobs kept: ``MovedPriorities``)."""

    jobs: tuple[Job, ...]
    queues: tuple[QueueInstance, ...]
    moved_priorities: MovedPriorities = NO_MOVED_PRIORITIES

    def priority_of(self, job: Job) -> float:
        """The priority qstat showed for ``job`` (one of ``jobs``)."""
        return self.moved_priorities.of(job)


# -- XML loading --------------------------------------------------------------------------------


def _load(data: bytes | str, source: str, root_tag: str) -> ET.Element:
    """Parse safely; name the failure.

    A document whose prolog holds a DTD (the only place entities can be declared, and SGE never
    writes one) goes to defusedxml, which refuses it. A document without one cannot declare or
    reference any entity beyond XML's five, so it is parsed with the C parser, which is twice as
    fast as defusedxml's pure-Python one on 50,000 jobs.
    """
    if not data or data.isspace():
        raise SgeParseError(f"{source}: empty output, expected <{root_tag}> XML")
    with paused(keep=True):
        try:
            root = _fromstring(data)
        except ET.ParseError as err:
            cleaned = _clean(data)
            if cleaned is None:
                raise SgeParseError(f"{source}: XML is not well-formed: {err}") from None
            # SGE copies job names byte for byte: a name in Latin-1 or with control characters
            # makes its output invalid XML. Read such text with those characters replaced.
            try:
                root = _fromstring(cleaned)
            except ET.ParseError as err2:
                raise SgeParseError(f"{source}: XML is not well-formed: {err2}") from None
    if root.tag != root_tag:
        raise SgeParseError(f"{source}: root element is <{root.tag}>, expected <{root_tag}>")
    return root


def _fromstring(data: bytes | str) -> ET.Element:
    if _root_start(data) is not None:
        parser = ET.XMLParser()  # noqa: S314 (no DTD: nothing to expand or fetch; see _load)
        parser.feed(data)
        root: ET.Element = parser.close()
        return root
    try:
        root = DET.fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except defusedxml.DefusedXmlException as err:
        raise SgeParseError(
            f"refused XML with a DTD, entity declaration or external reference (SGE writes none): {err!r}"
        ) from None
    return root


_WHITESPACE = frozenset(" \t\r\n")
_PROLOG_LIMIT = 65536  # a longer prolog is left to defusedxml


def _root_start(data: bytes | str) -> int | None:
    """Offset of the root element's "<" when the prolog before it holds only an XML
    declaration, processing instructions, comments and white space; None otherwise (a DTD,
    or something odd that the careful parser should judge)."""
    head = data[:_PROLOG_LIMIT]
    text = head.decode("latin-1") if isinstance(head, bytes) else head
    i = 0
    if text.startswith("\ufeff"):
        i = 1
    elif text.startswith("\xef\xbb\xbf"):  # UTF-8 byte order mark, read as Latin-1
        i = 3
    n = len(text)
    while i < n:
        if text[i] in _WHITESPACE:
            i += 1
        elif text.startswith("<?", i):
            end = text.find("?>", i + 2)
            if end == -1:
                return None
            i = end + 2
        elif text.startswith("<!--", i):
            end = text.find("-->", i + 4)
            if end == -1:
                return None
            i = end + 3
        elif text.startswith("<", i) and i + 1 < n and (text[i + 1].isalpha() or text[i + 1] in "_:"):
            return i
        else:
            return None
    return None


def _clean(data: bytes | str) -> str | None:
    """Text with undecodable bytes and XML-forbidden characters replaced; None if nothing changed."""
    if isinstance(data, bytes):
        text = data.decode("utf-8", errors="replace")
        changed = "\ufffd" in text
    else:
        text = data
        changed = False
    cleaned = _XML_FORBIDDEN.sub("\ufffd", text)
    changed = changed or cleaned != text
    if not changed:
        return None
    # A declaration naming an encoding is wrong for a str that is already decoded.
    if cleaned.startswith("<?xml"):
        end = cleaned.find("?>")
        if end != -1:
            cleaned = cleaned[end + 2 :]
    return cleaned


# -- small value parsers ------------------------------------------------------------------------


def _local_seconds(text: str, hours: dict[str, float | None]) -> float:
    """parse_timestamp with mktime called about once per distinct hour (50,000 jobs have
    thousands of distinct seconds but few hours). An hour in which the local offset changes
    (daylight saving, a half-hour shift) is converted second by second."""
    stamp = text.strip()
    if len(stamp) == 19 and stamp[13] == ":" and stamp[16] == ":":  # the usual form, read without a regex
        mm, ss = stamp[14:16], stamp[17:19]
        if not (mm.isascii() and mm.isdigit() and ss.isascii() and ss.isdigit()):
            raise ValueError(f"timestamp {text!r} is not YYYY-MM-DDTHH:MM:SS")
        minute, second, fraction = int(mm), int(ss), None
    else:
        m = TIMESTAMP.fullmatch(stamp)
        if m is None:
            raise ValueError(f"timestamp {text!r} is not YYYY-MM-DDTHH:MM:SS")
        minute, second, fraction = int(m.group(5)), int(m.group(6)), m.group(7)
    if minute > 59 or second > 61:
        raise ValueError(f"timestamp {text!r} is out of range")
    hour_key = stamp[:13]
    if hour_key in hours:
        base = hours[hour_key]
    else:
        base = parse_timestamp(hour_key + ":00:00")  # checks the date and hour part
        if parse_timestamp(hour_key + ":59:59") != base + 3599:
            base = None  # the offset changes within this hour
        hours[hour_key] = base
    if base is None:
        return parse_timestamp(stamp)
    seconds = base + minute * 60 + second
    if fraction:
        seconds += float("0." + fraction)
    return seconds


def count_tasks(spec: str) -> int:
    """Number of task ids in an SGE id list: ``1-20:1`` -> 20, ``1-10:3`` -> 4, ``5,7,9`` -> 3.

    Each part is ``N``, ``N-M`` or ``N-M:S`` of ASCII digits (cut with string methods: an array
    queue has tens of thousands of distinct lists)."""
    total = 0
    digits = str.isdigit if spec.isascii() else _digits  # an ASCII list's parts are ASCII
    for part in spec.strip().split(","):
        first, dash, rest = part.strip().partition("-")
        last, colon, every = rest.partition(":")
        if not (digits(first) and (not dash or (digits(last) and (not colon or digits(every))))):
            raise ValueError(f"task range {spec!r} is not like 1-20:1, 1-10:3 or 5,7,9")
        start = int(first)
        end = int(last) if dash else start
        step = int(every) if colon else 1
        if start < 1 or end < start or step < 1 or end > _MAX_TASK_ID:
            raise ValueError(f"task range {spec!r} has an impossible part {part!r}")
        total += (end - start) // step + 1
    return total


def _digits(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits."""
    return text.isdigit() and text.isascii()


def parse_sge_time(value: str) -> float | None:
    """An SGE time value in seconds: ``3600``, ``1:00:00``, ``90:00``, ``::30``; None for INFINITY."""
    if value.isdigit() and value.isascii():  # seconds alone, as most are written: one part
        return float(value)
    return _time_of_parts(value)


def _time_of_parts(value: str) -> float | None:
    """``parse_sge_time`` part by part."""
    text = value.strip()
    if text.upper() in ("INFINITY", "INF"):
        return None
    parts = text.split(":")
    if not text or len(parts) > 3:
        raise ValueError(f"time value {value!r} is not [[hours:]minutes:]seconds")
    total = 0.0
    for part in parts:
        if part == "":
            number = 0.0
        else:
            if not _TIME_PART.fullmatch(part):
                raise ValueError(f"time value {value!r} is not [[hours:]minutes:]seconds")
            number = float(part)
        total = total * 60 + number
    return total


def _unescape(text: str) -> str:
    # SGE's escape_string() writes "<" as "%lt;" (sic).
    return text.replace("%lt;", "<") if "%lt;" in text else text


def _check_job_state(state: str) -> bool:
    return bool(state) and len(set(state)) == len(state) and JOB_STATE_LETTERS.issuperset(state)


def _queue_states(text: str | None, where: str) -> QueueFlags:
    states = (text or "").strip()
    if states == "-":
        return NO_FLAGS
    if not QUEUE_STATE_LETTERS.issuperset(states):
        unknown = "".join(sorted(set(states) - QUEUE_STATE_LETTERS))
        raise SgeParseError(f"{where}: unknown queue state letter(s) {unknown!r} in {states!r}")
    return queue_flags(states)


def ascii_int(text: str) -> int:
    """``text`` (white space around it aside) as a whole number of ASCII digits; ValueError for
    anything else, a sign included."""
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError(f"{text!r} is not a whole number in ASCII digits")
    return int(digits)


def decimal(text: str) -> float:
    """``text`` as a decimal number of ASCII digits (sign, point and exponent allowed; white
    space around it).

    The numbers ``float`` reads, less those it reads beyond that: other scripts' digits and
    spaces (not ASCII), ``1_000``, and ``nan``/``inf``/``infinity`` (the only words it takes, each
    with an "n"). ``tests/unit/test_sge_odd_reads.py`` holds it to the regular expression
    ``_DECIMAL``."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number in ASCII digits") from None
    if not text.isascii() or "_" in text or "n" in text or "N" in text:
        raise ValueError(f"{text!r} is not a number in ASCII digits")
    return value


def _int(text: str | None, what: str, where: str, minimum: int = 0) -> int:
    if text is None:
        raise SgeParseError(f"{where}: missing <{what}>")
    number = text.strip()
    negative = number.startswith("-")
    try:
        value = -ascii_int(number[1:]) if negative else ascii_int(number)
    except ValueError:
        raise SgeParseError(f"{where}: <{what}> is {text!r}, not a whole number in ASCII digits") from None
    if value < minimum:
        raise SgeParseError(f"{where}: <{what}> is {value}, less than {minimum}")
    return value


# -- qstat --------------------------------------------------------------------------------------


def _named_children(el: ET.Element, tag: str, where: str) -> dict[str, str]:
    """The ``<tag name="...">value</tag>`` children of a job as name -> value (a request list)."""
    found: dict[str, str] = {}
    for child in el.iterchildren(tag):  # type: ignore[attr-defined]  # lxml element
        name = child.get("name")
        if not name:
            raise SgeParseError(f"{where}: <{tag}> without a name")
        found[name] = (child.text or "").strip()
    return found


def _requested_pe(el: ET.Element, fields: Mapping[str, str | None], where: str) -> tuple[str, str | None]:
    """A job's ``<requested_pe name="...">range</requested_pe>``: the PE and its range."""
    pe_el = el.find("requested_pe")
    pe = pe_el.get("name") if pe_el is not None else None
    if not pe:
        raise SgeParseError(f"{where}: <requested_pe> without a name")
    pe_range = (fields["requested_pe"] or "").strip() or None
    if pe_range is None:  # qsub -pe always gives one: without it the job's width is unknown
        raise SgeParseError(f'{where}: <requested_pe name="{pe}"> without its range')
    if not pe_range.isascii():
        raise SgeParseError(f"{where}: <requested_pe> range {pe_range!r} is not ASCII digits")
    return pe, pe_range


class _JobReader:
    """Turns ``<job_list>`` elements into Jobs; caches the values many jobs share.

    This is the hot loop of a pass (50,000 waiting jobs are 50,000 calls): messages naming
    where a problem is are only built when there is one.
    """

    def __init__(self) -> None:
        self._times: dict[str, float] = {}
        self._hours: dict[str, float | None] = {}
        self._tasks: dict[str, int] = {}
        self._runtimes: dict[str, float | None] = {}
        self._states: set[str] = set()

    def _time(self, text: str, what: str, section: str, n: int, job_id: int) -> float:
        cached = self._times.get(text)
        if cached is None:
            try:
                cached = _local_seconds(text, self._hours)
            except ValueError as err:
                raise SgeParseError(f"{_at(section, n, job_id)}: <{what}>: {err}") from None
            self._times[text] = cached
        return cached

    def _count(self, spec: str, section: str, n: int, job_id: int) -> int:
        cached = self._tasks.get(spec)
        if cached is None:
            try:
                cached = count_tasks(spec)
            except ValueError as err:
                raise SgeParseError(f"{_at(section, n, job_id)}: <tasks>: {err}") from None
            self._tasks[spec] = cached
        return cached

    def _runtime(self, text: str, section: str, n: int, job_id: int) -> float | None:
        if text in self._runtimes:
            return self._runtimes[text]
        try:
            value = parse_sge_time(text)
        except ValueError as err:
            raise SgeParseError(f"{_at(section, n, job_id)}: hard request h_rt: {err}") from None
        self._runtimes[text] = value
        return value

    def _job_times(
        self, fields: Mapping[str, str | None], section: str, n: int, job_id: int
    ) -> tuple[float | None, float | None]:
        """An entry's submission time (waiting) and start time (running); it has one or both."""
        times = self._times
        tag = "JB_submission_time" if "JB_submission_time" in fields else "JAT_submission_time"  # 8.1.9, OCS 9
        text = fields.get(tag)
        submitted = (times.get(text) or self._time(text, tag, section, n, job_id)) if text else None
        text = fields.get("JAT_start_time")
        started = (times.get(text) or self._time(text, "JAT_start_time", section, n, job_id)) if text else None
        if submitted is None and started is None:  # read as waiting for ever, it would be past every delay
            raise SgeParseError(
                f"{_at(section, n, job_id)}: no <JB_submission_time>, <JAT_submission_time> or <JAT_start_time>"
            )
        return submitted, started

    def _task_ids(self, fields: Mapping[str, str | None], section: str, n: int, job_id: int) -> tuple[str | None, int]:
        """An entry's task ids and how many they are (one task for an entry without ``<tasks>``).
        Only an array job's entry has ``<tasks>``; an empty one says nothing of how many: refused."""
        if "tasks" not in fields:
            return None, 1
        task_ids = (fields["tasks"] or "").strip()
        if not task_ids:
            raise SgeParseError(f"{_at(section, n, job_id)}: <tasks> is empty: the array job's task ids are missing")
        return task_ids, self._tasks.get(task_ids) or self._count(task_ids, section, n, job_id)

    def job(self, el: ET.Element, section: str, n: int, queue: str | None) -> Job:
        # One pass over the children for the fields (an lxml child is a Python object made on
        # demand, so the repeated ones are fetched by tag in C, and only when present).
        fields: dict[str, str | None] = {child.tag: child.text for child in el}
        where = f"{section}: job_list #{n}"
        hard = _named_children(el, "hard_request", where) if "hard_request" in fields else None
        scoped = [_named_children(el, tag, where) if tag in fields else {} for tag in _SCOPED_REQUESTS]
        job_id, state, slots, name, owner = _required(fields, section, n)
        hard_queues, pe, pe_range = _queues_and_pe(el, fields, section, n, job_id)
        self._check_state_and_slots(state, slots, section, n, job_id)
        submitted, started = self._job_times(fields, section, n, job_id)
        task_ids, tasks = self._task_ids(fields, section, n, job_id)
        priority = _job_priority(fields.get("JAT_prio"), section, n, job_id)
        text = fields.get("queue_name")
        if text and text.strip():
            queue = text.strip()
        runtime = None
        if hard is not None and "h_rt" in hard:
            runtime = self._runtime(hard["h_rt"], section, n, job_id)
        return Job(
            job_id,
            _unescape(name),
            _unescape(owner),
            state,
            job_phase(state),
            slots,
            submitted,
            started,
            tasks,
            task_ids,
            priority,
            pe,
            pe_range,
            _read_only(hard),
            queue,
            runtime,
            hard_queues,
            _read_only(scoped[0]),
            _read_only(scoped[1]),
        )

    def _check_state_and_slots(self, state: str, slots: int, section: str, n: int, job_id: int) -> None:
        """Refuses an unknown state (each known one checked once) and an entry of no slot."""
        if state not in self._states:
            if not _check_job_state(state):
                raise SgeParseError(f"{section}: job_list #{n} (job {job_id}): unknown job state {state!r}")
            self._states.add(state)
        if slots < 1:  # every entry holds or asks for a slot at least; the demand model would take 1
            raise SgeParseError(f"{_at(section, n, job_id)}: <slots> is 0: a job takes at least one slot")


def _required(fields: Mapping[str, str | None], section: str, n: int) -> tuple[int, str, int, str, str]:
    """An entry's job number, state, slots, name and owner; which one is wrong, if one is."""
    try:
        job_id = ascii_int(fields["JB_job_number"] or "")
        if job_id < 1:
            raise ValueError
        state = (fields["state"] or "").strip()
        slots = ascii_int(fields["slots"] or "")
        return job_id, state, slots, fields["JB_name"] or "", fields["JB_owner"] or ""
    except (KeyError, ValueError):
        _explain_job(fields, f"{section}: job_list #{n}")
        raise  # unreachable: _explain_job raises


def _job_priority(text: str | None, section: str, n: int, job_id: int) -> float:
    """An entry's ``<JAT_prio>`` (0 without one)."""
    try:
        return decimal(text) if text else 0.0
    except ValueError:
        raise SgeParseError(
            f"{_at(section, n, job_id)}: <JAT_prio> is {text!r}, not a number in ASCII digits"
        ) from None


def _read_only(requests: dict[str, str] | None) -> Mapping[str, str]:
    """Requests as a read-only mapping (the one empty mapping for none)."""
    return MappingProxyType(requests) if requests else _NO_REQUESTS


def _at(section: str, n: int, job_id: int) -> str:
    return f"{section}: job_list #{n} (job {job_id})"


def _queues_and_pe(
    el: ET.Element, fields: Mapping[str, str | None], section: str, n: int, job_id: int
) -> tuple[tuple[str, ...], str | None, str | None]:
    """A job's queues of ``qsub -q`` (``<hard_req_queue>``), and its PE and range."""
    hard_queues: tuple[str, ...] = ()
    if "hard_req_queue" in fields:
        hard_queues = tuple(
            _queue_request(child.text, section, n, job_id)
            for child in el.iterchildren("hard_req_queue")  # type: ignore[attr-defined]  # lxml element
        )
    if "requested_pe" not in fields:
        return hard_queues, None, None
    pe, pe_range = _requested_pe(el, fields, _at(section, n, job_id))
    return hard_queues, pe, pe_range


def _queue_request(text: str | None, section: str, n: int, job_id: int) -> str:
    """One ``<hard_req_queue>`` (a queue of ``qsub -q``); an empty one is refused: read as no
    ``-q``, a job bound to a queue elb's nodes do not join would be demand."""
    queue = (text or "").strip()
    if not queue:
        raise SgeParseError(f"{_at(section, n, job_id)}: an empty <hard_req_queue>")
    return queue


def _explain_job(fields: Mapping[str, str | None], where: str) -> None:
    """Raise the SgeParseError that says which required field of a job entry is wrong."""
    job_id = _int(fields.get("JB_job_number"), "JB_job_number", where, minimum=1)
    where = f"{where} (job {job_id})"
    for required in ("JB_name", "JB_owner", "state"):
        if required not in fields:
            raise SgeParseError(f"{where}: missing <{required}>")
    _int(fields.get("slots"), "slots", where)
    raise SgeParseError(f"{where}: unreadable job entry")  # pragma: no cover


def _queue_instance(fields: Mapping[str, str | None], where: str) -> QueueInstance:
    full = (fields.get("name") or "").strip()
    if "@" not in full:
        raise SgeParseError(f"{where}: queue instance name {full!r} is not queue@host")
    queue, host = full.split("@", 1)
    if not queue or not host:
        raise SgeParseError(f"{where}: queue instance name {full!r} is not queue@host")
    where = f"{where} ({full})"
    total = _int(fields.get("slots_total"), "slots_total", where)
    used = _int(fields.get("slots_used"), "slots_used", where)
    if used > total:
        raise SgeParseError(f"{where}: slots_used {used} is more than slots_total {total}")
    # qstat -f prints slots_resv for every queue instance: read as 0, a host holding a
    # reservation would look idle.
    resv = _int(fields.get("slots_resv"), "slots_resv", where)
    return QueueInstance(queue, host, total, used, resv, _queue_states(fields.get("state"), where))


def parse_qstat(data: bytes | str, *, memo: QstatMemo | None = None) -> QstatResult:
    """Parse ``qstat -u '*' -xml -r -f`` (also accepts the output without ``-f``).

    The quick reader (``_quick_qstat``) reads a document of the regular shape qstat writes; any
    other goes to the careful reader (``_careful_qstat``), which also gives every error message.
    ``memo``: the quick reader's memory of the last document it read whole (``QstatMemo``); the
    result is the same with it or without.
    """
    if not data or data.isspace():
        raise SgeParseError("qstat: empty output, expected <job_info> XML")
    with paused(keep=True):
        quick = _quick_qstat(data, memo)
    return quick if quick is not None else _careful_qstat(data)


def _careful_qstat(data: bytes | str) -> QstatResult:
    """The careful reader, for a document of any shape.

    The XML is read as a stream: each job entry becomes a Job as soon as it is complete and its
    elements are dropped, so 50,000 waiting jobs never sit in memory as a tree of half a
    million elements (17 MB at a time instead of 240 MB).
    """
    with paused(keep=True):
        try:
            return _stream_qstat(data)
        except ET.ParseError as err:
            cleaned = _clean(data)
            if cleaned is None:
                raise SgeParseError(f"qstat: XML is not well-formed: {err}") from None
            # SGE copies job names byte for byte: a name in Latin-1 or with control characters
            # makes its output invalid XML. Read such text with those characters replaced.
            try:
                return _stream_qstat(cleaned)
            except ET.ParseError as err2:
                raise SgeParseError(f"qstat: XML is not well-formed: {err2}") from None


def _stream_qstat(data: bytes | str) -> QstatResult:
    if _root_start(data) is None:
        _fromstring(data)  # an unusual prolog: defusedxml refuses a DTD, or it is harmless
    # From here the document has no DTD, so it can neither declare nor reference entities.
    # lxml's iterparse hands over only the elements asked for (job entries and queue
    # instances), which is what makes 50,000 jobs fast; entities are never resolved and
    # nothing is fetched from the network either way.
    reader = _JobReader()
    jobs: list[Job] = []
    queues: list[QueueInstance] = []
    raw = data.encode("utf-8") if isinstance(data, str) else data
    events = LET.iterparse(
        io.BytesIO(raw),
        events=("end",),
        tag=("job_list", "Queue-List"),
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
    )
    job, add = reader.job, jobs.append
    try:
        for _event, el in events:
            if el.tag == "job_list":
                # Running entries belong to the queue instance around them: read when it ends.
                if el.get("state") != "running":
                    add(job(el, "qstat: job_info", len(jobs) + 1, None))
                    el.clear()
            else:
                _read_queue_list(el, len(queues) + 1, reader, jobs, queues)
                el.clear()
        root = events.root
    except LET.XMLSyntaxError as err:
        raise ET.ParseError(str(err)) from None
    if root is None or root.tag != "job_info":
        found = root.tag if root is not None else "?"
        raise SgeParseError(f"qstat: root element is <{found}>, expected <job_info>")
    _read_leftovers(root, reader, jobs)
    return QstatResult(tuple(jobs), tuple(queues))


def _read_leftovers(root: ET.Element, reader: _JobReader, jobs: list[Job]) -> None:
    """Check the skeleton left after streaming; read running entries not inside a queue instance."""
    for section in root:
        if section.tag == "queue_info":
            for item in section:
                if item.tag == "job_list" and len(item):  # running jobs without -f
                    jobs.append(reader.job(item, "qstat: queue_info", len(jobs) + 1, None))
                elif item.tag not in ("Queue-List", "job_list"):
                    raise SgeParseError(f"qstat: unexpected <{item.tag}> in <queue_info>")
        elif section.tag == "job_info":
            for item in section:
                if item.tag != "job_list":
                    raise SgeParseError(f"qstat: unexpected <{item.tag}> in <job_info>")
                if len(item):  # a "running" entry outside a queue instance
                    jobs.append(reader.job(item, "qstat: job_info", len(jobs) + 1, None))
        else:
            raise SgeParseError(f"qstat: unexpected <{section.tag}> in <job_info>")


def _read_queue_list(
    item: ET.Element, qi: int, reader: _JobReader, jobs: list[Job], queues: list[QueueInstance]
) -> None:
    fields: dict[str, str | None] = {}
    entries: list[ET.Element] = []
    for child in item:
        if child.tag == "job_list":
            entries.append(child)
        elif child.tag not in fields:
            fields[child.tag] = child.text
    where = f"qstat: queue_info/Queue-List #{qi}"
    qinst = _queue_instance(fields, where)
    queues.append(qinst)
    for entry in entries:
        if not len(entry):
            raise SgeParseError(f'{where} ({qinst.name}): a job_list that is not state="running"')
        jobs.append(reader.job(entry, f"qstat: {qinst.name}", len(jobs) + 1, qinst.name))


# -- qstat: the quick reader ----------------------------------------------------------------------
#
# qstat writes its XML from fixed code: the same elements in the same order for every entry. The
# quick reader reads that regular shape with regular expressions over the text, builds no element
# tree, and makes the very values the careful reader above makes. Anything it does not know (an
# element or attribute out of place, a comment, CDATA, a DTD, an entity other than XML's five and
# character references, another encoding, a character XML forbids, a truncated or hollow
# document) makes it decline, and the careful reader reads the whole document: every refusal and
# every error message is the careful reader's. It accepts only what the careful reader accepts.
# What it made of each piece of a document can be kept for the next document (``QstatMemo``).


class _Decline(Exception):
    """The document is not of the regular shape the quick reader knows."""


_JOB_FIELDS = (
    "job_id",
    "name",
    "owner",
    "state",
    "phase",
    "slots",
    "submitted",
    "started",
    "tasks",
    "task_ids",
    "priority",
    "pe",
    "pe_range",
    "hard_requests",
    "queue",
    "hard_runtime",
    "hard_queues",
    "master_requests",
    "slave_requests",
)


class _JobBuilder:
    """An object with the very slots of ``Job``, set as plain attributes, then made a ``Job``.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``, which is
    most of the cost of making 50,000 jobs. The quick reader makes ``_JobBuilder`` objects, sets
    every field, then changes their class to ``Job`` (CPython allows it between classes of the
    same layout: the same slots in the same order). What comes out is a ``Job`` in every
    respect: its type, fields, equality and hash. ``_FAST_JOBS`` says the slots are Job's;
    when they are not, the quick reader declines every document.
    """

    __slots__ = _JOB_FIELDS
    job_id: int
    name: str
    owner: str
    state: str
    phase: JobPhase
    slots: int
    submitted: float | None
    started: float | None
    tasks: int
    task_ids: str | None
    priority: float
    pe: str | None
    pe_range: str | None
    hard_requests: Mapping[str, str]
    queue: str | None
    hard_runtime: float | None
    hard_queues: tuple[str, ...]
    master_requests: Mapping[str, str]
    slave_requests: Mapping[str, str]


_FAST_JOBS = Job.__slots__ == _JOB_FIELDS and tuple(f.name for f in dataclass_fields(Job)) == _JOB_FIELDS

# Characters that text (and, with its quote, an attribute value) may not hold here: "<", those XML
# forbids, and a carriage return (the careful reader turns it into a line feed). Every character
# of a document the quick reader accepts is matched by one of the expressions below.
_NOT_TEXT = "<\\x00-\\x08\\x0b-\\x1f\\ufffe\\uffff"
_TEXT = f"[^{_NOT_TEXT}]"
_VALUE = f"(?:\"[^\"\\t\\n{_NOT_TEXT}]{{0,65536}}\"|'[^'\\t\\n{_NOT_TEXT}]{{0,65536}}')"
_XML_DECLARATION = re.compile(
    r"<\?xml[ \t\n]+version[ \t\n]*=[ \t\n]*(['\"])1\.0\1"
    r"(?:[ \t\n]+encoding[ \t\n]*=[ \t\n]*(['\"])[Uu][Tt][Ff]-8\2)?[ \t\n]*\?>"
)
_ROOT_OPEN = re.compile(rf'[ \t\n]*<job_info(?:[ \t\n]+xmlns:xsd="[^"&\t\n{_NOT_TEXT}]{{1,4096}}")?[ \t\n]*>[ \t\n]*')
_SPACE = re.compile(r"[ \t\n]*")
_REFERENCE = re.compile(r"&(?:(amp|lt|gt|quot|apos)|#([0-9]{1,7})|#x([0-9a-fA-F]{1,6}));")
_REFERENCE_BYTES = re.compile(_REFERENCE.pattern.encode())
_PREDEFINED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}
# One job entry in the order qstat writes it, after its opening mark (the document is cut at each
# mark); what follows <full_job_name> (requests, the PE, binding, ...) is the "rest", read by
# _QuickReader.rest once per distinct text. The white space after each element is matched
# possessively (``*+``): what follows it starts with "<", so none of it is ever given back.
_ENTRY_MARK = '<job_list state="'
_PLAIN_PRIORITY = r"[0-9]{1,18}\.[0-9]{1,18}"
_JOB_ENTRY = re.compile(
    r'(?:pending|([a-z]{1,32}))">[ \t\n]*+'  # None for "pending": no str made
    r"<JB_job_number>([0-9]{1,18})</JB_job_number>[ \t\n]*+"
    # A priority of digits and a point (as SGE writes them: 0.50000) as a group of its own, read
    # by float() alone: it is a number of ASCII digits as it stands.
    rf"<JAT_prio>(?:({_PLAIN_PRIORITY})|({_TEXT}{{0,64}}))</JAT_prio>[ \t\n]*+"
    rf"<JB_name>({_TEXT}{{0,65536}})</JB_name>[ \t\n]*+"
    rf"<JB_owner>({_TEXT}{{0,65536}})</JB_owner>[ \t\n]*+"
    r"<state>([A-Za-z]{1,16})</state>[ \t\n]*+"
    # The time: a start time (running), or a submission time by 8.1.9's name or OCS 9's; the
    # groups are None for the usual JB_submission_time, so no str is made for it.
    r"<(?:(JAT_start_time)|(JAT_submission_time)|JB_submission_time)>"
    r"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}):([0-9]{2})(\.[0-9]{1,9})?"
    r"</(?(8)JAT_start_time|(?(9)JAT_submission_time|JB_submission_time))>[ \t\n]*+"
    rf"(?:<queue_name>({_TEXT}{{0,65536}})</queue_name>[ \t\n]*+)?"
    r"<slots>([0-9]{1,18})</slots>[ \t\n]*+"
    # An array job's task ids: one range of ASCII digits as SGE writes a waiting array's
    # (1-500:1) as a group of its own and its three numbers, counted by arithmetic alone
    # (``_range_count``); any other text as a group of its own, read by count_tasks.
    r"(?:<tasks>(?:(([0-9]{1,10})-([0-9]{1,10}):([0-9]{1,10}))"
    rf"|({_TEXT}{{0,65536}}))</tasks>[ \t\n]*+)?"
    rf"(?:<full_job_name>{_TEXT}{{0,65536}}</full_job_name>[ \t\n]*+)?"
    # The rest, up to the entry's end; possessive: nothing to give back. It holds no entry's mark,
    # nor does anything before it: matched in the whole text, an entry ends before the next mark.
    rf"([^<]*+(?:<(?!/job_list>|{re.escape(_ENTRY_MARK[1:])})[^<]*+)*+)</job_list>[ \t\n]*+"
)
# Any element of text only, or empty; its attributes are read by _attributes.
_ELEMENT = re.compile(
    r"<([A-Za-z_][A-Za-z0-9_.-]{0,255})"
    rf"((?:[ \t\n]+[A-Za-z_][A-Za-z0-9_.-]{{0,255}}[ \t\n]*=[ \t\n]*{_VALUE})*)"
    rf"[ \t\n]*(?:/>|>({_TEXT}{{0,65536}})</\1[ \t\n]*>)[ \t\n]*"
)
_ATTRIBUTE = re.compile(r"[ \t\n]+([A-Za-z_][A-Za-z0-9_.-]*)[ \t\n]*=[ \t\n]*(?:\"([^\"]*)\"|'([^']*)')")
# Elements of a job entry the fixed part reads (a second one is left to the careful reader) and
# elements that would be entries of their own.
_FIXED_PART = frozenset(
    (
        "JB_job_number",
        "JAT_prio",
        "JB_name",
        "JB_owner",
        "state",
        "JB_submission_time",
        "JAT_submission_time",
        "JAT_start_time",
        "queue_name",
        "slots",
        "tasks",
        "job_list",
        "Queue-List",
    )
)
_Rest = tuple[
    Mapping[str, str], str | None, str | None, tuple[str, ...], Mapping[str, str], Mapping[str, str], float | None
]


_ENTRY_PLACES = frozenset(("queue_info", "Queue-List", "job_info"))
_SECONDS = {f"{n:02d}": n for n in range(62)}  # 60 and 61: leap seconds, as parse_timestamp allows


def _priority(text: str) -> float:
    try:
        return decimal(text) if text else 0.0
    except ValueError:
        raise _Decline from None


def _range_count(start: int, end: int, step: int) -> int:
    """How many task ids ``start-end:step`` holds, as ``count_tasks`` counts that one part;
    declines a range ``count_tasks`` refuses (the careful reader says why)."""
    if start < 1 or end < start or step < 1 or end > _MAX_TASK_ID:
        raise _Decline
    return (end - start) // step + 1


def _xml_char(code: int) -> bool:
    return code in (9, 10, 13) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or 0x10000 <= code <= 0x10FFFF


def _reference(m: re.Match[str]) -> str:
    name, decimal, hexadecimal = m.groups()
    if name:
        return _PREDEFINED[name]
    return chr(int(decimal) if decimal else int(hexadecimal, 16))


def _resolve(text: str) -> str:
    """Text with its references replaced (each one checked beforehand by _QuickReader)."""
    return _REFERENCE.sub(_reference, text) if "&" in text else text


def _attributes(text: str) -> dict[str, str]:
    """The attributes of an element matched by _ELEMENT; declines a repeated or xml* name."""
    found: dict[str, str] = {}
    for name, double, single in _ATTRIBUTE.findall(text):
        if name in found or name[:3].lower() == "xml":
            raise _Decline
        found[name] = _resolve(double or single)
    return found


def _quick_qstat(data: bytes | str, memo: QstatMemo | None = None) -> QstatResult | None:
    """What ``_careful_qstat`` returns for a document of the regular shape; None for any other.
    ``memo``: what the last document read whole was made into (updated when this one is). A
    memo that keeps its pieces by their head has them as UTF-8 (``_Kept``): the document is
    then read as the bytes it is (``_plain_bytes``), each piece decoded only when it is read."""
    doc = _plain_bytes(data) if memo is not None and memo.by_head(_zone()) else _plain_text(data)
    if doc is None or not _FAST_JOBS:
        return None
    # An ASCII document's bytes are its text's UTF-8 as they stand (the same length decoded).
    raw = data if isinstance(data, bytes) and isinstance(doc, str) and len(data) == len(doc) else None
    reader = _QuickReader(doc, memo, raw)
    del doc  # the reader lets go of the whole text once it is read
    try:
        return reader.read()
    except (_Decline, SgeParseError):
        return None


def _plain_text(data: bytes | str) -> str | None:
    """The document as text, if it is UTF-8, holds no "]]>" and only references to XML's five
    entities and to characters XML allows; None otherwise."""
    try:
        if isinstance(data, bytes):
            text = data.decode("utf-8")
        else:
            data.encode("utf-8")  # the careful reader's first step; a lone surrogate fails it
            text = data
    except UnicodeError:
        return None
    if "]" in text and "]]>" in text:
        return None
    return text if _references_ok(text, _REFERENCE, "&") else None


def _plain_bytes(data: bytes | str) -> bytes | None:
    """``_plain_text``'s checks, the document as UTF-8 (bytes are checked, not decoded, when
    ASCII)."""
    try:
        if isinstance(data, str):
            raw = data.encode("utf-8")  # a lone surrogate fails it
        else:
            raw = data
            if not raw.isascii():
                raw.decode("utf-8")
    except UnicodeError:
        return None
    if b"]" in raw and b"]]>" in raw:
        return None
    return raw if _references_ok(raw, _REFERENCE_BYTES, b"&") else None


def _references_ok(text: AnyStr, reference: re.Pattern[AnyStr], amp: AnyStr) -> bool:
    """Whether each "&" of ``text`` starts a reference to one of XML's five entities or to a
    character XML allows (each "&" found with find: a document has few, and a search of the
    whole text by the expression costs more than its decoding)."""
    match, find = reference.match, text.find
    at = find(amp)
    while at >= 0:
        m = match(text, at)
        if m is None or (not m.group(1) and not _xml_char(int(m.group(2)) if m.group(2) else int(m.group(3), 16))):
            return False
        at = find(amp, m.end())
    return True


@dataclass(frozen=True, slots=True)
class _Piece:
    """What the quick reader made of one piece of a document (a job entry and what follows it,
    up to the next entry) that moved it: the job, whether it goes last (a running entry outside a
    queue instance), the queue instances read after it, and where the reader then stands
    (``place``, and the queue instance of the entries that follow). A piece that leaves the
    reader where it was, with a job that does not go last, is remembered as its ``Job`` alone.
    ``priority``: the priority its entry shows when it moved since the job was read (None: the
    job's own). (Not a tuple: the memo tells a ``_Moved`` by its type, ``tuple``.)"""

    job: Job
    late: bool
    queues: tuple[QueueInstance, ...]
    place: str
    queue: str | None
    priority: float | None = None


# A job entry read before whose priority alone moved since: the very job made then, and the
# priority its entry shows now (what ``MovedPriorities`` carries beside it). A plain tuple, told
# from the others by its type: one is made for each such entry at each read, and a named tuple
# costs five times as much to make.
_Moved = tuple[Job, float]


_Made = Job | _Piece | _Moved  # what the quick reader made of one piece, as its memo keeps it


# Where the reader stood when it read a piece: its place and the queue instance it was in.
_Place = tuple[str, str | None]
# A piece kept by its head (its text through the ``<JAT_prio>`` that opens before its first
# ``</JAT_prio>``: the entry's state and job number, as UTF-8): its tail (its text from that
# ``</JAT_prio>`` on, as UTF-8) and what it made.
_Kept = tuple[bytes, _Made]


class QstatMemo:
    """What the quick reader made of each piece of the last document it read whole, for the next.

    From one pass to the next most of qstat's entries are the very same text: a piece read from
    the same place gives the same job and queue instances (a pure function of its text and of
    where the reader stands; the local time zone aside, which is checked), so it is looked up
    instead of read again, and the jobs of the last read are reused. When most pieces are not
    found (SGE normalizes priorities anew when the highest or lowest job leaves, and every
    entry's ``<JAT_prio>`` changes), the rest are looked up by their head and compared by their
    tail (``_Kept``, ``_QuickReader.by_text``): when only the priority differs, the job is the
    remembered one, its new priority carried beside it (``_reprioritized``, ``_Moved``; the
    read's ``MovedPriorities``). Only the last document's pieces are kept; one memo serves one
    sequence of reads (``SgeCommands`` keeps one).

    When the priorities of many entries moved in a read (``REPRIORITIZED_AFTER``), they likely
    move again in the next (SGE normalizes them at each scheduling run over the jobs then
    waiting): its pieces are then kept by their head (``blanked``, ``heads``), and the next read
    looks each piece up so, the same way whether its priority moved or not, comparing its tail
    where it stands in the document's bytes (no key made of the piece's whole text, nor hashed,
    and the document not decoded). A read that finds few moved keeps its pieces by their text
    again (``pieces``).

    A read that finds nothing remembered (the first after a start) hands its pieces over in its
    order (``keep_unindexed``): they are indexed by their text when the next read asks for them
    (``pieces``), so the first read does not hash its 50,000 texts.
    """

    def __init__(self) -> None:
        # By where the reader stood, then by the piece's text (not ``blanked``).
        self._pieces: dict[_Place, dict[str, _Made]] = {}
        # A read that found nothing remembered (the first after a start) hands over its pieces
        # in its order, not yet indexed (``pieces`` indexes them when first asked for, at the
        # next read): ``_Unindexed``.
        self._unindexed: _Unindexed | None = None
        # By where the reader stood, then by the piece's head (``blanked``).
        self.heads: dict[_Place, dict[bytes, _Kept]] = {}
        self.zone: tuple[object, ...] = ()
        self.blanked = False

    def by_head(self, zone: tuple[object, ...]) -> bool:
        """Whether the next read looks its pieces up by their head: the memo keeps them so
        (``blanked``), some, and for the local time zone of today (``zone``)."""
        return self.blanked and bool(self.heads) and self.zone == zone

    @property
    def pieces(self) -> dict[_Place, dict[str, _Made]]:
        """The pieces kept by their text (none when ``blanked``), by where the reader stood, then
        by their text."""
        if self._unindexed is not None:
            self._pieces, self._unindexed = self._unindexed.index(), None
        return self._pieces

    def keep(self, zone: tuple[object, ...], pieces: dict[_Place, dict[str, _Made]]) -> None:
        """Keeps the pieces of a read by their text."""
        self.zone, self.blanked = zone, False
        self._pieces, self._unindexed, self.heads = pieces, None, {}

    def keep_heads(self, zone: tuple[object, ...], heads: dict[_Place, dict[bytes, _Kept]]) -> None:
        """Keeps the pieces of a read by their head (``blanked``)."""
        self.zone, self.blanked = zone, True
        self._pieces, self._unindexed, self.heads = {}, None, heads

    def keep_unindexed(self, zone: tuple[object, ...], pieces: _Unindexed) -> None:
        """Keeps the pieces of a read that found nothing remembered, by their text, indexed when
        the next read asks for them."""
        self.zone, self.blanked = zone, False
        self._pieces, self._unindexed, self.heads = {}, pieces, {}


@dataclass(frozen=True, slots=True)
class _Unindexed:
    """The pieces of one read, in its order: their texts, what each made, and where each run of
    pieces read from one place starts (the place, the index of its first piece). Indexing them
    (a dict keyed by each text, which hashes every text) is left to the read that looks them up:
    a read that finds nothing remembered has no use for the index."""

    texts: list[str]
    made: list[_Made]
    runs: list[tuple[_Place, int]]

    def index(self) -> dict[_Place, dict[str, _Made]]:
        """The pieces by place, then by text (of equal texts of one place, the last)."""
        pieces: dict[_Place, dict[str, _Made]] = {}
        texts, made, runs = self.texts, self.made, self.runs
        ends = [at for _, at in runs[1:]] + [len(texts)]
        for (place, begin), end in zip(runs, ends, strict=True):
            pieces.setdefault(place, {}).update(zip(texts[begin:end], made[begin:end], strict=True))
        return pieces


_PRIO_OPEN_TEXT, _PRIO_CLOSE_TEXT = "<JAT_prio>", "</JAT_prio>"
_PRIO_OPEN, _PRIO_CLOSE = _PRIO_OPEN_TEXT.encode(), _PRIO_CLOSE_TEXT.encode()
_MARK = _ENTRY_MARK.encode()
_NOTHING: dict[str, _Made] = {}  # the pieces remembered from a place the last document had none in
_NO_HEADS: dict[bytes, _Kept] = {}  # the same, kept by their head
_PRIO_TEXT = re.compile(f"{_TEXT}{{0,64}}")
_PLAIN_PRIO_TEXT = re.compile(_PLAIN_PRIORITY.encode())


# Pieces of a document not found in the memo by their text beyond which (and beyond one in ten of
# those read so far) the rest are looked up by their head (``_QuickReader.by_text``).
REPRIORITIZED_AFTER = 16


def _kept_by_head(pieces: dict[str, _Made]) -> dict[bytes, _Kept]:
    """Pieces kept by their text, kept instead by their head (``_Kept``); of pieces with the same
    head, the last is kept (the others are read again)."""
    heads: dict[bytes, _Kept] = {}
    for text, made in pieces.items():
        tail = text.find(_PRIO_CLOSE_TEXT)
        opened = text.find(_PRIO_OPEN_TEXT, 0, tail) if tail >= 0 else -1
        if opened >= 0:  # as every piece read has
            heads[text[: opened + len(_PRIO_OPEN_TEXT)].encode()] = (text[tail:].encode(), made)
    return heads


def _reprioritized(done: _Made, prio: bytes, reader: _QuickReader) -> _Made | None:
    """What a remembered piece made (``done``) for a piece that differs from it only in what its
    first ``<JAT_prio>`` holds (``prio``, as UTF-8); None when that is not a priority
    ``_JOB_ENTRY`` reads.
    The job is kept, with the priority beside it when it differs from the job's own (``_Moved``,
    or the piece's ``priority`` for a piece that moves the reader). Counts the pieces whose
    priority moved since the read before (``moves``)."""
    if _PLAIN_PRIO_TEXT.fullmatch(prio):  # read as job reads it
        priority = float(prio)
    else:
        # What _JOB_ENTRY allows there (printable text without "<" is; the rest is checked).
        text = prio.decode()  # the document is UTF-8 (checked)
        if (len(text) > 64 or "<" in text or not text.isprintable()) and _PRIO_TEXT.fullmatch(text) is None:
            return None
        try:
            priority = reader.priority(_resolve(text) if reader.amp else text)
        except _Decline:
            return None
    if type(done) is tuple:  # a job entry, its priority moved before
        job, before = done
    elif type(done) is Job:
        job, before = done, done.priority
    else:
        piece = cast(_Piece, done)
        if priority == (piece.job.priority if piece.priority is None else piece.priority):
            return piece
        reader.moves += 1
        return dataclass_replace(piece, priority=None if priority == piece.job.priority else priority)
    if priority == before:
        return done
    reader.moves += 1
    return job if priority == job.priority else (job, priority)


def _zone() -> tuple[object, ...]:
    """What the conversion of local time stamps depends on (``time.tzset``'s results)."""
    return (time.timezone, time.altzone, time.daylight, time.tzname)


class _QuickReader:
    """One reading of one document by the quick reader (see above).

    The document is cut at each job entry's opening mark: each piece is a job entry (matched
    whole by ``_JOB_ENTRY``) and what follows it up to the next entry (section tags, queue
    instances, the end), read by ``between``, which knows where in the document it is (``place``)
    and declines anything out of place, so every character is read by one of the two. A piece
    already read from the same place in the last document read whole (``QstatMemo``) is not read
    again.
    """

    def __init__(self, text: str | bytes, memo: QstatMemo | None = None, raw: bytes | None = None) -> None:
        self.text = text  # as UTF-8 when the memo keeps its pieces by their head (``by_head``)
        self.memo = memo
        # The document's own bytes when they are ``text``'s UTF-8 as they stand (ASCII): a read
        # by text that goes on by head reads them, not a copy of the rest encoded (the caller
        # holds them anyway).
        self.raw = raw
        if isinstance(text, bytes):
            self.amp = b"&" in text
            self.lt = self.amp or (b"%" in text and b"%lt;" in text)
        else:
            self.amp = "&" in text
            self.lt = self.amp or ("%" in text and "%lt;" in text)  # "&#37;lt;" is "%lt;" too
        self.reader = _JobReader()
        self.jobs: list[Job] = []
        self.late: list[Job] = []  # running entries outside a queue instance: last, as the careful reader
        self.queues: list[QueueInstance] = []
        # What each rest met twice or more says (``kept_rest``), by its text; the hashes of the
        # rests met once.
        self.rests: dict[str, _Rest] = {}
        self.met: set[int] = set()
        self.attributes: dict[str, Mapping[str, str]] = {}  # an element's attributes by their text (rest)
        self.lines: dict[str, _Line] = {}  # what a line of a rest says, by its text
        self.prios: dict[str, float] = {}
        self.phases: dict[str, JobPhase] = {}  # of each job state met (its letters checked)
        self.minutes: dict[str, float] = {}  # "YYYY-MM-DDTHH:MM" -> its start in POSIX seconds
        self.place = "root"  # root, queue_info, Queue-List, job_info, end (after the root's end)
        self.fields: dict[str, str | None] | None = None  # of the Queue-List being read, until its first entry
        # The memo's pieces (if its zone is today's): by their text, or by their head
        # (``blanked``); the pieces not found in it so far, and the pieces by their head, once
        # most are not found by their text.
        self.remembered: dict[_Place, dict[str, _Made]] = {}
        self.heads: dict[_Place, dict[bytes, _Kept]] = {}
        self.blanked = False  # the memo's pieces are kept by their head
        # This document's pieces as the next memo keeps them: by their text, and, read from a
        # blanked memo, by their head.
        self.made: dict[_Place, dict[str, _Made]] = {}
        self.kept_heads: dict[_Place, dict[bytes, _Kept]] = {}
        self.moves = 0  # pieces found whose priority moved since the read before
        self.priorities: list[_Moved] = []  # the jobs kept whose priority moved (``MovedPriorities``)

    def read(self) -> QstatResult:
        whole = self.text
        self.text = ""
        memo, zone = self.memo, _zone()
        self.recall(memo, zone)
        if isinstance(whole, bytes):  # as UTF-8, for a memo that keeps its pieces by their head
            cut = whole.find(_MARK)
            queue = self.opening((whole if cut < 0 else whole[:cut]).decode())
            result = self.by_head(whole, cut, queue)
        else:
            cut = whole.find(_ENTRY_MARK)
            queue = self.opening(whole if cut < 0 else whole[:cut])
            if not self.remembered:  # nothing remembered by text: each piece is read, none looked up
                return self.fresh(whole, cut, queue, memo, zone)
            result = self.by_text(whole, cut, queue)
        if memo is not None:
            self.keep(memo, zone)
        return result

    def by_text(self, whole: str, cut: int, queue: str | None) -> QstatResult:
        """``read`` from a memo that keeps its pieces by their text, from the mark at ``cut`` on
        (in ``queue``): each piece looked up by its text, read when not found; the pieces kept so
        (``made``). When most pieces so far were not found (``REPRIORITIZED_AFTER``, and one in
        ten), the priorities moved: the memo's pieces not found yet are kept by their head
        (``_kept_by_head``), and the rest of the document is read so, as UTF-8 (``by_head``)."""
        mark, size, find = _ENTRY_MARK, len(_ENTRY_MARK), whole.find
        made, remembered, jobs = self.made, self.remembered, self.jobs
        place, count, misses = self.place, 0, 0
        known, mine = remembered.get((place, queue), _NOTHING), made.setdefault((place, queue), {})
        while cut >= 0:
            start = cut + size
            cut = find(mark, start)
            count += 1
            text = whole[start:cut] if cut >= 0 else whole[start:]
            done = known.pop(text, None)
            if done is None:
                misses += 1
                if misses > REPRIORITIZED_AFTER and misses * 10 > count:
                    self.place, self.heads = place, {at: _kept_by_head(kept) for at, kept in remembered.items()}
                    if self.raw is not None:
                        return self.by_head(self.raw, start - size, queue)
                    return self.by_head(whole[start - size :].encode(), 0, queue)
                done = self.piece(text, place, queue)
            mine[text] = done
            if type(done) is Job:  # the reader stays where it is (most pieces)
                jobs.append(done)
                continue
            moved = self.took(done)
            if moved is not None and moved != (place, queue):
                place, queue = moved
                known, mine = remembered.get(moved, _NOTHING), made.setdefault(moved, {})
        return self.result(place)

    def by_head(self, whole: bytes, cut: int, queue: str | None) -> QstatResult:
        """``read`` of the document as UTF-8 (``whole``) from the memo's pieces kept by their
        head (``heads``), from the mark at ``cut`` on (in ``queue``): each piece looked up by its
        head and compared by its tail where it stands (``_Kept``), then its priority read
        (``_reprioritized``); the piece found ends where its tail does (its text is decoded only
        when it is read, or kept by it). The pieces kept by their head (``kept_heads``), and by
        their text too (``made``) while few priorities moved.

        Two pieces with the same head and tail differ only in what their first ``<JAT_prio>``
        holds: the head ends with the one ``<JAT_prio>`` before any ``</JAT_prio>``, the tail
        starts with ``</JAT_prio>``; ``_JOB_ENTRY`` reads what it holds (no "<" in it) as the
        job's priority, and nothing else of the entry, nor what follows it, depends on it. Nor
        does any mark start within the piece so found (so it ends where its text found by its
        mark would): not in its head or tail (none did in the kept piece's, whose tail was
        followed by a mark or the end too, and the mark overlaps no copy of itself), nor in its
        priority (no "<" in one ``_reprioritized`` reads). A kept piece whose head is this
        piece's but not its tail (another entry of the same job number and state in the same
        place: an array job's tasks over several entries) is left for another piece; of pieces
        kept with the same head, the last (the others are read again). A piece without a
        ``<JAT_prio>`` before its first ``</JAT_prio>`` is no entry of the regular shape:
        declined."""
        mark, size, find, startswith, length = _MARK, len(_MARK), whole.find, whole.startswith, len(whole)
        made, heads, remembered = self.made, self.kept_heads, self.heads
        place, both = self.place, True
        known, mine = remembered.get((place, queue), _NO_HEADS), heads.setdefault((place, queue), {})
        mine_plain = made.setdefault((place, queue), {})
        while cut >= 0:
            start = cut + size
            tail = find(_PRIO_CLOSE, start)
            if tail < 0 or (head := find(_PRIO_OPEN, start, tail)) < 0:
                raise _Decline
            head += len(_PRIO_OPEN)
            key = whole[start:head]
            kept = known.pop(key, None)
            end = tail + len(kept[0]) if kept is not None else -1
            if (
                kept is not None
                and startswith(kept[0], tail)
                and (end == length or startswith(mark, end))
                and (done := _reprioritized(kept[1], whole[head:tail], self)) is not None
            ):
                mine[key] = kept if done is kept[1] else (kept[0], done)
                cut = end if end < length else -1
                if both:
                    text = whole[start:end].decode()
            else:
                if kept is not None:
                    known[key] = kept  # another piece's (or this one's priority is declined)
                cut = find(mark, start)
                piece = whole[start:cut] if cut >= 0 else whole[start:]
                text = piece.decode()
                done = self.piece(text, place, queue)
                mine[key] = (piece[tail - start :], done)
            if both:
                mine_plain[text] = done
                both = self.moves <= REPRIORITIZED_AFTER
            moved = self.took(done)
            if moved is not None and moved != (place, queue):
                place, queue = moved
                known, mine = remembered.get(moved, _NO_HEADS), heads.setdefault(moved, {})
                if both:
                    mine_plain = made.setdefault(moved, {})
        return self.result(place)

    def result(self, place: str) -> QstatResult:
        """What the document showed, once the reader stands at ``place`` after its last piece;
        declines a document not ended, or hollow (the careful reader judges it)."""
        self.place = place
        if place != "end" or (not self.jobs and not self.late and not self.queues):
            raise _Decline
        return QstatResult(
            tuple(self.jobs + self.late),
            tuple(self.queues),
            MovedPriorities(self.priorities) if self.priorities else NO_MOVED_PRIORITIES,
        )

    def fresh(
        self, whole: str, cut: int, queue: str | None, memo: QstatMemo | None, zone: tuple[object, ...]
    ) -> QstatResult:
        """``read`` when nothing is remembered, from the mark at ``cut`` on (in ``queue``): each
        piece read (``piece``), the pieces handed to ``memo`` in their order, not indexed
        (``QstatMemo.keep_unindexed``).

        An entry is matched where it stands in ``whole``: when the next mark follows it, its
        piece is the entry alone and ends there (``_JOB_ENTRY`` matches no mark past its start,
        so that is where the next mark is), and is read from that match (``entry``); else the
        piece is cut at the next mark and read whole (``piece``)."""
        mark, size, find, append, piece = _ENTRY_MARK, len(_ENTRY_MARK), whole.find, self.jobs.append, self.piece
        match, followed, entry = _JOB_ENTRY.match, whole.startswith, self.entry
        place = self.place
        texts: list[str] = []
        made: list[_Made] = []
        runs = [((place, queue), 0)]
        keep_text, keep_made = texts.append, made.append
        while cut >= 0:
            start = cut + size
            m = match(whole, start)
            if m is not None and followed(mark, m.end()):  # an entry alone: the reader stays
                cut = m.end()
                text = whole[start:cut]
                done = entry(m.groups(), text, place, queue)
            else:
                cut = find(mark, start)
                text = whole[start:cut] if cut >= 0 else whole[start:]
                done = piece(text, place, queue)
            keep_text(text)
            keep_made(done)
            if type(done) is Job:  # the reader stays where it is
                append(done)
                continue
            moved = self.moved(cast(_Piece, done))
            if moved != (place, queue):
                place, queue = moved
                runs.append((moved, len(texts)))
        result = self.result(place)
        if memo is not None:
            memo.keep_unindexed(zone, _Unindexed(texts, made, runs))
        return result

    def recall(self, memo: QstatMemo | None, zone: tuple[object, ...]) -> None:
        """Take the memo's pieces, if its zone is today's: by their head (``blanked``) or by
        their text."""
        # A remembered piece is let go as soon as it is read again, so the last document's pieces
        # and this one's are never all held at once.
        if memo is None or memo.zone != zone:
            return
        self.blanked = memo.by_head(zone)
        if self.blanked:
            self.heads = memo.heads
        else:
            self.remembered = memo.pieces

    def opening(self, first: str) -> str | None:
        """Read the text before the first job entry (the declaration, the root, what the
        sections hold up to it); the queue instance the first entry is in (None outside one)."""
        m = _XML_DECLARATION.match(first)
        m = _ROOT_OPEN.match(first, m.end() if m else 0)
        if m is None:
            raise _Decline
        return self.between(first, m.end())

    def keep(self, memo: QstatMemo, zone: tuple[object, ...]) -> None:
        """Keep this document's pieces for the next read: by their text while few priorities
        moved (``REPRIORITIZED_AFTER``: then ``made`` holds them all), else by their head (those
        read by their head, and those read by their text before, kept by their head)."""
        if self.moves <= REPRIORITIZED_AFTER:
            memo.keep(zone, self.made)
            return
        heads = self.kept_heads
        for at, pieces in self.made.items():
            by_head = _kept_by_head(pieces)
            by_head.update(heads.get(at, _NO_HEADS))
            heads[at] = by_head
        memo.keep_heads(zone, heads)

    def took(self, done: _Made) -> _Place | None:
        """Takes in what a piece made: its job (a job read before with the priority its entry
        shows now beside it: ``priorities``), and when it moves the reader, its queue instances
        (``moved``); where the reader then stands, None when it stays."""
        if type(done) is Job:
            self.jobs.append(done)
            return None
        if type(done) is tuple:
            self.jobs.append(done[0])
            self.priorities.append(done)
            return None
        return self.moved(cast(_Piece, done))

    def moved(self, piece: _Piece) -> tuple[str, str | None]:
        """Takes in a piece that moves the reader (its job, its queue instances); where the
        reader then stands."""
        (self.late if piece.late else self.jobs).append(piece.job)
        if piece.priority is not None:
            self.priorities.append((piece.job, piece.priority))
        self.queues.extend(piece.queues)
        return piece.place, piece.queue

    def piece(self, text: str, place: str, queue: str | None) -> Job | _Piece:
        """Read one piece (a job entry after its mark, and what follows) from ``place``, in the
        queue instance ``queue`` (None outside one)."""
        m = _JOB_ENTRY.match(text)
        if m is None:
            raise _Decline  # not an entry of the regular shape
        alone = self.entry(m.groups(), text, place, queue)
        if m.end() == len(text):  # nothing after the entry but white space: the reader stays
            return alone
        job, last = (alone, False) if type(alone) is Job else (cast(_Piece, alone).job, True)
        self.place, had = place, len(self.queues)
        after = self.between(text, m.end())
        made = tuple(self.queues[had:])
        del self.queues[had:]
        return _Piece(job, last, made, self.place, after)

    def entry(self, fields: tuple[Any, ...], text: str, place: str, queue: str | None) -> Job | _Piece:
        """What one entry makes, from the groups of its ``_JOB_ENTRY`` match (its piece's
        ``text`` holds it) read from ``place``, in ``queue``, as a piece of that entry alone
        (the reader stays): its Job, or a ``_Piece`` for a running entry outside a queue
        instance (its job goes last)."""
        if place not in _ENTRY_PLACES:
            raise _Decline  # outside the sections
        running = fields[0] == "running"
        if queue is not None and not running:
            raise _Decline  # not running inside a queue instance
        # Only an entry with a "&" or "%" in its text may hold a reference or an escaped "<".
        job = self.job(fields, queue, self.lt and ("&" in text or "%" in text))
        return _Piece(job, True, (), place, queue) if running and queue is None else job

    def between(self, text: str, pos: int = 0) -> str | None:
        """Read what lies between two job entries (or before the first, or after the last); the
        queue instance of the entries that follow (None outside one). One step of the state
        machine for each place the reader may stand in (``_STEPS``)."""
        end = len(text)
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        while pos < end:
            step = _STEPS.get(self.place)
            if step is None:  # after the root's end
                raise _Decline
            pos = _SPACE.match(text, step(self, text, pos)).end()  # type: ignore[union-attr]
        if self.place == "Queue-List":
            if self.fields is not None:
                self.queue_instance()
            return self.queues[-1].name
        return None

    def in_queue_list(self, text: str, pos: int) -> int:
        """One field of a queue instance, or its end."""
        if text.startswith("</Queue-List>", pos):
            if self.fields is not None:
                self.queue_instance()
            self.place = "queue_info"
            return pos + 13
        m = _ELEMENT.match(text, pos)
        fields = self.fields
        if m is None or fields is None:  # a field after the entries is left to the careful reader
            raise _Decline
        tag, attributes, value = m.groups()
        if tag in ("job_list", "Queue-List"):
            raise _Decline
        if attributes:
            _attributes(attributes)
        if tag not in fields:
            fields[tag] = self.value(value) or None
        return m.end()

    def in_queue_info(self, text: str, pos: int) -> int:
        """A queue instance's start, or the section's end."""
        if text.startswith("<Queue-List>", pos):
            self.place, self.fields = "Queue-List", {}
            return pos + 12
        if text.startswith("</queue_info>", pos):
            self.place = "root"
            return pos + 13
        raise _Decline

    def in_job_info(self, text: str, pos: int) -> int:
        """The section's end."""
        if not text.startswith("</job_info>", pos):
            raise _Decline
        self.place = "root"
        return pos + 11

    def in_root(self, text: str, pos: int) -> int:
        """A section's start, an empty section, or the root's end."""
        for mark, place in _ROOT_MARKS:
            if text.startswith(mark, pos):
                self.place = place
                return pos + len(mark)
        if text.startswith("<queue_info/>", pos) or text.startswith("<job_info/>", pos):
            return text.index(">", pos) + 1
        raise _Decline

    def queue_instance(self) -> None:
        assert self.fields is not None
        self.queues.append(_queue_instance(self.fields, "qstat: queue_info/Queue-List"))
        self.fields = None

    def job(self, fields: tuple[Any, ...], queue: str | None, escaped: bool) -> Job:
        """The Job of one entry's fields (a str each, None for an optional one it lacks);
        ``queue``: the queue instance around it; ``escaped``: whether the entry's text may hold
        a reference or an escaped "<" (else its fields are read as they stand).

        This runs once per new entry (50,000 times for a large queue read the first time): values
        that repeat (priorities, task ranges, the minute of a timestamp) are worked out once each,
        requests twice at most (``kept_rest``), and the Job is made in place (``_JobBuilder``)."""
        (_entry_state, number, plain_prio, prio, name, owner, state, start_tag, submission_tag, minute, second,
         fraction, queue_name, slots, task_range, first, last, step, task_ids, rest) = fields  # fmt: skip
        priority = float(plain_prio) if plain_prio is not None else self.priority(_resolve(prio) if self.amp else prio)
        if escaped:
            if self.amp:
                # The entry's own text, with its references resolved.
                name, owner = _resolve(name), _resolve(owner)
                queue_name = _resolve(queue_name) if queue_name else queue_name
                task_ids = _resolve(task_ids) if task_ids else task_ids
            name, owner = _unescape(name), _unescape(owner)
        job = object.__new__(_JobBuilder)
        job.job_id = job_id = int(number)
        job.slots = int(slots)
        if job_id < 1 or not job.slots:  # the careful reader refuses a job of no slots
            raise _Decline
        phase = self.phases.get(state)
        if phase is None:
            if not _check_job_state(state):
                raise _Decline
            phase = self.phases[state] = job_phase(state)
        start = self.minutes.get(minute)
        seconds_in_minute = _SECONDS.get(second)
        if start is None or seconds_in_minute is None or fraction:
            seconds = self.seconds(minute, second, fraction, start_tag or submission_tag or "JB_submission_time")
        else:
            seconds = start + seconds_in_minute
        if start_tag:
            job.submitted, job.started = None, seconds
        else:
            job.submitted, job.started = seconds, None
        if task_range is not None:
            ids, job.tasks = task_range, _range_count(int(first), int(last), int(step))
        else:
            ids, job.tasks = (None, 1) if task_ids is None else self.tasks(task_ids)
        requests = self.rests.get(rest) or self.kept_rest(rest)
        (job.hard_requests, job.pe, job.pe_range, job.hard_queues, job.master_requests, job.slave_requests,
         job.hard_runtime) = requests  # fmt: skip
        job.name, job.owner, job.state, job.phase = name, owner, state, phase
        job.task_ids, job.priority = ids, priority
        job.queue = queue_name.strip() if queue_name and queue_name.strip() else queue
        job.__class__ = Job  # type: ignore[assignment]  # see _JobBuilder
        return cast(Job, job)

    def tasks(self, text: str) -> tuple[str, int]:
        """An array job's ``<tasks>``: its task ids and how many they are."""
        ids = text.strip()
        if not ids:
            raise _Decline  # an empty <tasks>: the careful reader refuses it
        counted = self.reader._tasks
        count = counted.get(ids)
        if count is None:
            try:
                count = counted[ids] = count_tasks(ids)
            except ValueError:
                raise _Decline from None  # the careful reader says where
        return ids, count

    def priority(self, text: str) -> float:
        """The value of a ``<JAT_prio>`` (its references resolved), worked out once a document."""
        found = self.prios.get(text)
        if found is None:
            found = self.prios[text] = _priority(text)
        return found

    def seconds(self, minute: str, second: str, fraction: str | None, tag: str) -> float:
        """_local_seconds of ``minute:second[fraction]``, keeping the minute's start (the hour's
        start plus its minutes, in _local_seconds's order of operations) for the next ones."""
        base = self.hour_start(minute[:13])
        minutes, seconds = int(minute[14:16]), _SECONDS.get(second)
        if base is None or minutes > 59 or seconds is None:  # the offset changes in this hour, or out of range
            return self.reader._time(f"{minute}:{second}{fraction or ''}", tag, "", 0, 0)
        start = self.minutes[minute] = base + minutes * 60
        value = start + seconds
        if fraction:
            value += float("0" + fraction)
        return value

    def hour_start(self, hour: str) -> float | None:
        """The hour's start as _local_seconds caches it (None: the local offset changes within it)."""
        hours = self.reader._hours
        if hour not in hours:
            try:
                _local_seconds(hour + ":00:00", hours)
            except ValueError:
                raise _Decline from None
        return hours[hour]

    def kept_rest(self, text: str) -> _Rest:
        """``rest`` of a text not kept yet, kept for the entries after (``rests``) when a text of
        its hash was met before in this document (``met``): a rest seen twice is likely seen
        again, and a queue of entries with requests of their own (thousands of combinations)
        keeps few of their texts, each a copy of most of its entry."""
        found = self.rest(text)
        seen = hash(text)
        if seen in self.met:
            self.rests[text] = found
        else:
            self.met.add(seen)
        return found

    def rest(self, text: str) -> _Rest:
        """The requests and PE of what follows <full_job_name> in an entry.

        Read line by line, each line once a document (``line``): a queue of many combinations of
        requests repeats each request, one a line as qstat writes them, in many of them. A text
        with a line that is not elements whole (an element over two lines) is read element by
        element (``read_rest``), as is one that does not start with an element."""
        if text[:1] != "<":
            return self.read_rest(text)
        hard: dict[str, str] = {}
        said: list[tuple[str, str, str]] = []
        lines = self.lines
        for line in text.split("\n"):
            found = lines.get(line)
            if found is None:
                found = self.line(line)
                if found is None:
                    return self.read_rest(text)
            if not isinstance(found, _Said):  # a lone hard request, as qstat writes most lines
                hard[found[0]] = found[1]
            elif found:
                _sort_said(found, hard, said)
        return self.requests(hard, said)

    def line(self, text: str) -> _Line | None:
        """What one line after <full_job_name> says (white space before, between and after its
        elements): the name and value of a lone hard request, else ``said`` of its elements but
        those that say nothing; None when the line is not elements whole. Kept for the lines
        after with the same text.

        Lines joined by line feeds are what they are apart: an element read in its line ends
        where it ends in the whole text (at the first "<" after its start tag, then its end tag
        and the white space after it), and the line feed is white space between two elements."""
        m = _LONE_HARD_REQUEST.fullmatch(text)
        if m is not None:  # as qstat writes a request: no reference, no other attribute
            found: _Line = (m[1], m[2].strip())
        else:
            elements = self.said(text, _SPACE.match(text).end())  # type: ignore[union-attr]
            if elements is None:
                return None
            if len(elements) == 1 and elements[0][0] == "hard_request":
                found = elements[0][1:]
            else:
                found = _Said(filter(itemgetter(0), elements))
        self.lines[text] = found
        return found

    def read_rest(self, text: str) -> _Rest:
        """``rest``, reading the text element by element."""
        elements = self.said(text, 0)
        if elements is None:
            raise _Decline
        hard: dict[str, str] = {}
        said: list[tuple[str, str, str]] = []
        _sort_said(elements, hard, said)
        return self.requests(hard, said)

    def said(self, text: str, pos: int) -> tuple[tuple[str, str, str], ...] | None:
        """What each element of ``text`` from ``pos`` on says: its tag, and the name and value of a
        request (``hard_request`` or scoped), "" and the queue of a ``hard_req_queue``, the PE and
        range of a ``requested_pe``; ("", "", "") for another element, read and checked, that
        says nothing here. None when the text is not elements whole."""
        found: list[tuple[str, str, str]] = []
        end = len(text)
        while pos < end:
            got = self.element(text, pos)
            if got is None:
                return None
            pos, tag, attributes, value = got
            if tag == "hard_request" or tag in _SCOPED_REQUESTS:
                found.append((tag, _request_name(attributes), value.strip()))
            elif tag == "hard_req_queue":
                found.append((tag, "", _quick_queue(value)))
            elif tag == "requested_pe":
                found.append((tag, *_quick_pe(attributes, value, None)))
            else:
                found.append(("", "", ""))
        return tuple(found)

    def element(self, text: str, pos: int) -> tuple[int, str, Mapping[str, str], str] | None:
        """The element that starts at ``pos``: where it ends (the white space after it too), its
        tag, attributes and text (references resolved); None when no whole element starts there.
        An element of an entry's fixed part declines the quick read (``_Decline``)."""
        m = _ELEMENT.match(text, pos)
        if m is None:
            return None
        tag, attribute_text, value = m.groups()
        if tag in _FIXED_PART:
            raise _Decline
        attributes = (
            (self.attributes.get(attribute_text) or self.attributes_of(attribute_text)) if attribute_text else {}
        )
        return m.end(), tag, attributes, self.value(value)

    def requests(self, hard: dict[str, str], said: Sequence[tuple[str, str, str]]) -> _Rest:
        """The requests and PE of an entry, from its hard requests (``hard``) and what its other
        elements after <full_job_name> said (``said``, by ``_sort_said``: most entries have none);
        declines a second PE. (A scope's mapping is made only when it has a request: most entries
        have none.)"""
        master: dict[str, str] | None = None
        slave: dict[str, str] | None = None
        queues: tuple[str, ...] = ()
        pe: tuple[str, str] | None = None
        if said:
            listed: list[str] = []
            for tag, key, value in said:
                if tag == "hard_req_queue":
                    listed.append(value)
                elif tag == "requested_pe":
                    if pe is not None:
                        raise _Decline  # a second one: the careful reader refuses it
                    pe = (key, value)
                elif tag == "master_hard_request":
                    if master is None:
                        master = {}
                    master[key] = value
                else:
                    if slave is None:
                        slave = {}
                    slave[key] = value
            queues = tuple(listed)
        h_rt = hard.get("h_rt")
        runtime = None if h_rt is None else self.reader._runtime(h_rt, "", 0, 0)
        pe_name, pe_range = pe if pe is not None else (None, None)
        return (
            MappingProxyType(hard) if hard else _NO_REQUESTS,
            pe_name,
            pe_range,
            queues,
            _NO_REQUESTS if master is None else MappingProxyType(master),
            _NO_REQUESTS if slave is None else MappingProxyType(slave),
            runtime,
        )

    def attributes_of(self, text: str) -> Mapping[str, str]:
        """``_attributes(text)``, kept for the elements after with the same (``attributes``)."""
        found = self.attributes[text] = _attributes(text)
        return found

    def value(self, text: str | None) -> str:
        """An element's text, its references resolved ("" for none)."""
        return (_resolve(text) if text and self.amp else text) or ""


# Where the quick reader stands between entries: what it reads there.
_STEPS: dict[str, Callable[[_QuickReader, str, int], int]] = {
    "Queue-List": _QuickReader.in_queue_list,
    "queue_info": _QuickReader.in_queue_info,
    "job_info": _QuickReader.in_job_info,
    "root": _QuickReader.in_root,
}
_ROOT_MARKS = (("<queue_info>", "queue_info"), ("<job_info>", "job_info"), ("</job_info>", "end"))


class _Said(tuple[tuple[str, str, str], ...]):
    """What a line of an entry's rest says that is not a lone hard request: ``said`` of its
    elements, but those that say nothing."""

    __slots__ = ()


# What a line of an entry's rest says (``_QuickReader.line``): a lone hard request's name and
# value, or ``_Said``.
_Line = tuple[str, str] | _Said
# A line of one hard request as qstat writes it: its name and value (then stripped) hold no
# reference, and its only other attribute is resource_contribution. ``_ELEMENT`` reads it so too.
_LONE_HARD_REQUEST = re.compile(
    rf'[ \t\n]*<hard_request name="([^"&\t\n{_NOT_TEXT}]{{1,4096}})"(?: resource_contribution="[0-9.]{{0,64}}")?>'
    rf"([^&{_NOT_TEXT}]{{0,65536}})</hard_request>[ \t\n]*"
)


def _sort_said(
    elements: Iterable[tuple[str, str, str]], hard: dict[str, str], said: list[tuple[str, str, str]]
) -> None:
    """Sorts ``said`` of elements of an entry's rest, in their order: each hard request into
    ``hard`` (by its name: a later one of the same name wins), every other element that says
    something onto ``said``."""
    for element in elements:
        tag = element[0]
        if tag == "hard_request":
            hard[element[1]] = element[2]
        elif tag:
            said.append(element)


def _request_name(attributes: Mapping[str, str]) -> str:
    """The ``name`` of a request element; declines one without."""
    name = attributes.get("name")
    if not name:
        raise _Decline
    return name


def _quick_queue(value: str) -> str:
    """A ``<hard_req_queue>``'s queue; declines an empty one (the careful reader refuses it)."""
    if not value.strip():
        raise _Decline
    return value.strip()


def _quick_pe(attributes: Mapping[str, str], value: str, seen: tuple[str, str] | None) -> tuple[str, str]:
    """A ``<requested_pe>``'s PE and range; declines a second one (``seen``: the first), one
    without a name or range, or a range not in ASCII."""
    pe, pe_range = attributes.get("name"), value.strip()
    if seen is not None or not pe or not pe_range or not pe_range.isascii():
        raise _Decline
    return pe, pe_range


# -- qhost --------------------------------------------------------------------------------------


def _num_proc(text: str | None, where: str) -> int | None:
    if text is None or text.strip() in ("", "-"):
        return None
    try:
        value = decimal(text)
    except ValueError:
        raise SgeParseError(f"{where}: num_proc is {text!r}, not a number in ASCII digits") from None
    if value < 0 or value != int(value):
        raise SgeParseError(f"{where}: num_proc is {text!r}, not a whole number")
    return int(value)


def parse_qhost(data: bytes | str) -> tuple[Host, ...]:
    """Parse ``qhost -xml -q``: execution hosts with load values and queue instances.

    The quick reader (``_quick_qhost``) reads a document of the regular shape qhost writes; any
    other goes to the careful reader (``_careful_qhost``), which also gives every error message.
    """
    if data and not data.isspace():
        quick = _quick_qhost(data)
        if quick is not None:
            return quick
    return _careful_qhost(data)


def _careful_qhost(data: bytes | str) -> tuple[Host, ...]:
    """The careful reader: the document as an element tree (``_load``), any shape."""
    root = _load(data, "qhost", "qhost")
    hosts: list[Host] = []
    seen: dict[str, str] = {}  # by the name in lower case: one host to DNS
    for i, el in enumerate(root, 1):
        if el.tag != "host":
            raise SgeParseError(f"qhost: unexpected <{el.tag}> in <qhost>")
        name = (el.get("name") or "").strip()
        if not name:
            raise SgeParseError(f"qhost: host #{i} has no name")
        if name == "global":
            continue
        where = f"qhost: host {name!r}"
        other = seen.setdefault(name.lower(), name)
        if other is not name:
            also = f": as {other!r} too (one host to DNS, whatever the case of its letters)" if other != name else ""
            raise SgeParseError(f"{where} is listed twice{also}")
        values: dict[str, str] = {}
        queues: list[QueueInstance] = []
        for child in el:
            if child.tag == "hostvalue":
                key = child.get("name")
                if not key:
                    raise SgeParseError(f"{where}: <hostvalue> without a name")
                values[key] = (child.text or "").strip()
            elif child.tag == "queue":
                queues.append(_qhost_queue(child, name, where))
            # resourcevalue (-F) and job (-j) entries are not needed: jobs come from qstat.
        num_proc = _num_proc(values.get("num_proc"), where)
        load = {k: v for k, v in values.items() if v not in ("", "-")}
        hosts.append(Host(name, tuple(queues), num_proc, MappingProxyType(load)))
    return tuple(hosts)


def _qhost_queue(el: ET.Element, host: str, where: str) -> QueueInstance:
    qname = (el.get("name") or "").strip()
    if not qname:
        raise SgeParseError(f"{where}: <queue> without a name")
    where = f"{where} queue {qname!r}"
    values: dict[str, str | None] = {}
    for child in el:
        if child.tag == "queuevalue":
            key = child.get("name")
            if not key:
                raise SgeParseError(f"{where}: <queuevalue> without a name")
            values[key] = child.text
    return _qhost_queue_values(qname, host, values, where)


def _qhost_queue_values(qname: str, host: str, values: Mapping[str, str | None], where: str) -> QueueInstance:
    total = _int(values.get("slots"), "queuevalue slots", where)
    used = _int(values.get("slots_used"), "queuevalue slots_used", where)
    if used > total:
        raise SgeParseError(f"{where}: slots_used {used} is more than slots {total}")
    resv = _int(values.get("slots_resv"), "queuevalue slots_resv", where)  # printed for every queue: never 0 by default
    return QueueInstance(qname, host, total, used, resv, _queue_states(values.get("state_string"), where))


# One <host> of the regular shape: its load values, its queue instances (and the jobs on it, with
# -j, read by nobody); each part is then read by findall, as every character of it was matched.
_QHOST_ATTRIBUTE = f"'[^'\\t\\n{_NOT_TEXT}]{{0,4096}}'"
_QHOST_NAME = f"'[^'\\t\\n{_NOT_TEXT}]{{1,256}}'"
_HOSTVALUE = f"<hostvalue name=({_QHOST_NAME})>({_TEXT}{{0,65536}})</hostvalue>"
_QUEUEVALUE = f"<queuevalue qname={_QHOST_ATTRIBUTE} name=({_QHOST_NAME})>({_TEXT}{{0,65536}})</queuevalue>"
_QHOST_JOB = (
    f"<job name={_QHOST_ATTRIBUTE}>(?:[ \\t\\n]*<jobvalue jobid={_QHOST_ATTRIBUTE} name={_QHOST_ATTRIBUTE}>"
    f"{_TEXT}{{0,65536}}</jobvalue>)*[ \\t\\n]*</job>"
)


def _uncaptured(pattern: str) -> str:
    """The pattern with its groups made non-capturing (for one within a larger one)."""
    return pattern.replace("(", "(?:").replace("(?:?:", "(?:")


_QHOST_QUEUE = f"<queue name=({_QHOST_ATTRIBUTE})>((?:[ \\t\\n]*{_uncaptured(_QUEUEVALUE)})*)[ \\t\\n]*</queue>"
_HOSTVALUES = re.compile(_HOSTVALUE)
_QUEUEVALUES = re.compile(_QUEUEVALUE)
_QHOST_QUEUES = re.compile(_QHOST_QUEUE)
_QHOST_HOST = re.compile(
    f"<host name=({_QHOST_ATTRIBUTE})>[ \\t\\n]*"
    f"((?:{_uncaptured(_HOSTVALUE)}[ \\t\\n]*)*)"
    f"((?:{_uncaptured(_QHOST_QUEUE)}[ \\t\\n]*)*)"
    f"(?:{_QHOST_JOB}[ \\t\\n]*)*"
    "</host>[ \\t\\n]*"
)
_QHOST_CLOSE = re.compile(r"</qhost>[ \t\n]*")
_QHOST_OPEN = re.compile(rf'[ \t\n]*<qhost(?:[ \t\n]+xmlns:xsd="[^"&\t\n{_NOT_TEXT}]{{1,4096}}")?[ \t\n]*>[ \t\n]*')


def _quick_qhost(data: bytes | str) -> tuple[Host, ...] | None:
    """What ``_careful_qhost`` returns for a document of the regular shape; None for any other
    (the rules of the quick qstat reader above)."""
    text = _plain_text(data)
    if text is None:
        return None
    pieces = _QHOST_HOST.split(text)
    width = _QHOST_HOST.groups + 1
    m = _XML_DECLARATION.match(pieces[0])
    m = _QHOST_OPEN.fullmatch(pieces[0], m.end() if m else 0)
    if (
        m is None
        or not _QHOST_CLOSE.fullmatch(pieces[-1])
        or len(pieces) == 1  # no host: the careful reader judges it
        or any(pieces[k] for k in range(width, len(pieces) - 1, width))  # something between two hosts
    ):
        return None
    amp = "&" in text

    def value(quoted: str) -> str:
        return _resolve(quoted[1:-1]) if amp else quoted[1:-1]

    def queue_list(text: str) -> list[QueueInstance]:
        """A host's queue instances, read for a host named "" (hosts in the same state have the
        same text: each text is read once per document)."""
        queues = []
        for quoted_queue, queue_values in _QHOST_QUEUES.findall(text):
            qname = value(quoted_queue).strip()
            if not qname:
                raise _Decline
            found = {value(key): (_resolve(v) if amp else v) or None for key, v in _QUEUEVALUES.findall(queue_values)}
            queues.append(_qhost_queue_values(qname, "", found, f"qhost: queue {qname!r}"))
        return queues

    hosts: list[Host] = []
    seen: set[str] = set()
    read: dict[str, list[QueueInstance]] = {}
    try:
        for k in range(1, len(pieces) - 1, width):
            quoted, load_values, queues_text = pieces[k : k + 3]
            name = value(quoted).strip()
            if not name or name.lower() in seen:
                return None
            if name == "global":
                continue
            seen.add(name.lower())
            values = {value(key): (_resolve(v) if amp else v).strip() for key, v in _HOSTVALUES.findall(load_values)}
            unnamed = read.get(queues_text)
            if unnamed is None:
                unnamed = read[queues_text] = queue_list(queues_text)
            queues = tuple(
                QueueInstance(q.queue, name, q.slots_total, q.slots_used, q.slots_reserved, q.flags) for q in unnamed
            )
            load = {key: v for key, v in values.items() if v not in ("", "-")}
            num_proc = _num_proc(values.get("num_proc"), f"qhost: host {name!r}")
            hosts.append(Host(name, queues, num_proc, MappingProxyType(load)))
    except (SgeParseError, _Decline):
        return None
    return tuple(hosts)


# -- the snapshot -------------------------------------------------------------------------------


def join_snapshot(qstat: QstatResult, hosts: Iterable[Host], now: float) -> Snapshot:
    """Hosts from qhost, with the queue instances qstat showed next to its jobs where it has them.

    qstat's queue instances come from the same read as the jobs, so their use is preferred
    (``check_agree`` has made sure both give each the same slots); a queue instance only qhost
    shows is kept. A host only qstat shows is left out: it is never a host of the snapshot
    (``check_agree`` refuses such a pair of reads).
    """
    by_host: dict[str, dict[str, QueueInstance]] = {}
    for q in qstat.queues:
        by_host.setdefault(q.host, {})[q.queue] = q
    joined: list[Host] = []
    for h in hosts:
        from_qstat = by_host.get(h.name)
        if from_qstat is None:
            joined.append(h)
            continue
        merged = dict(from_qstat)
        for q in h.queues:
            merged.setdefault(q.queue, q)
        joined.append(Host(h.name, tuple(merged.values()), h.num_proc, h.load))
    return Snapshot(now=now, jobs=qstat.jobs, hosts=tuple(joined), moved_priorities=qstat.moved_priorities)


def check_agree(qstat: QstatResult, hosts: Sequence[Host]) -> None:
    """Refuse a pair of reads that cannot both be whole.

    ``qstat -f`` lists every queue instance, busy or not. If it lists none while ``qhost`` shows
    some, qstat answered a hollow document (well-formed, no queue and no job: a qmaster restarting,
    a wrapper that lost its output): read as an empty queue, it would make every node look idle.

    ``qhost`` lists every execution host SGE has. A queue instance on a host qhost does not list
    (deregistered between the two reads, or a partial qhost, or the host named in another case)
    means one of the two is stale: taken as a host, it would count as a worker toward
    ``max_nodes`` and move elb's numbering; left out, its jobs would run nowhere. The pair is
    refused, and the next pass reads both again.

    The slots of the queue instances must agree too, or a full host can look free (its free
    slots are qstat's ``slots_total`` less its ``slots_used``). ``slots_total`` (qstat) and
    ``slots`` (qhost -q) are both the queue instance's configured slots, the same number in two
    reads a moment apart (what is used may change between them: it is not compared). Agree means:

    - no queue instance is listed twice, in qstat -f or under one host of qhost (which block
      would be the true one?);
    - a queue instance both list has the same ``slots_total`` in qstat as ``slots`` in qhost;
    - qstat lists no queue instance that qhost -q does not list on that host: its slots would
      be more than qhost gives the host (qhost -q lists each host's queue instances).

    Anything else is refused, naming the host and both numbers. The host's ``num_proc`` is not
    a bound: a queue may give a host more slots than it has processors (SGE allows it, and the
    test cluster's nodes have 4 slots on 2 processors).

    Nor may qstat list a waiting entry twice (``_check_waiting``): counted twice, it would be
    demand twice.
    """
    shown = sum(len(h.queues) for h in hosts)
    if shown and not qstat.queues:
        raise SgeParseError(
            f"qstat -f lists no queue instance while qhost shows {shown} on {len(hosts)} host(s): "
            "the two reads disagree, so neither is trusted"
        )
    listed = {h.name for h in hosts}
    stray = next((q for q in qstat.queues if q.host not in listed), None)
    if stray is not None:
        more = len({q.host for q in qstat.queues if q.host not in listed}) - 1
        others = f" (and {more} more host{'s' if more > 1 else ''})" if more else ""
        raise SgeParseError(
            f"qstat lists queue instance {stray.name}, on {stray.host}, which qhost does not list{others}: "
            "the two reads disagree, so neither is trusted"
        )
    _check_slots(qstat.queues, hosts)
    _check_waiting(qstat.jobs)


def _check_waiting(jobs: Sequence[Job]) -> None:
    """Each waiting entry (one not in a queue) once. SGE lists an array job's waiting tasks in one
    entry per state (``hqw 1-3:1``, ``qw 4-6:1``), each with its own task ids; a job without task
    ids, or the same task ids, listed twice is a read that would count the same work twice."""
    ids = [j.job_id for j in jobs if j.queue is None]
    if len(set(ids)) == len(ids):
        return
    for job_id in sorted(i for i, count in Counter(ids).items() if count > 1):
        entries = [j.task_ids for j in jobs if j.job_id == job_id and j.queue is None]
        twice = next((t for n, t in enumerate(entries) if t is None or t in entries[:n]), "")
        if twice != "":
            tasks = f", tasks {twice}," if twice is not None else ""
            raise SgeParseError(
                f"qstat lists waiting job {job_id}{tasks} twice: counted twice it would be demand twice, "
                "so the read is not trusted"
            )


def _check_slots(queues: Sequence[QueueInstance], hosts: Sequence[Host]) -> None:
    """``check_agree``'s rule on slots: each queue instance once, with the slots qhost gives it."""
    disagree = "the two reads disagree, so neither is trusted"
    in_qhost: dict[tuple[str, str], QueueInstance] = {}
    for h in hosts:
        for q in h.queues:
            other = in_qhost.setdefault((h.name, q.queue), q)
            if other is not q:
                raise SgeParseError(
                    f"qhost lists queue {q.queue} twice on {h.name} (slots {other.slots_total} and {q.slots_total}): "
                    f"{disagree}"
                )
    in_qstat: dict[str, QueueInstance] = {}
    for q in queues:
        other = in_qstat.setdefault(q.name, q)
        if other is not q:
            raise SgeParseError(
                f"qstat -f lists queue instance {q.name} twice (slots_total {other.slots_total} and "
                f"{q.slots_total}, slots_used {other.slots_used} and {q.slots_used}), on {q.host}: {disagree}"
            )
        shown = in_qhost.get((q.host, q.queue))
        if shown is None:
            host = next(h for h in hosts if h.name == q.host)  # check_agree: qhost lists every host of qstat's
            total = sum(x.slots_total for x in queues if x.host == q.host)
            raise SgeParseError(
                f"qstat -f lists queue instance {q.name}, which qhost -q does not list on {q.host}: {q.host} has "
                f"{total} slots in qstat -f (slots_total of its queue instances) but {host.slots_total} in qhost "
                f"(slots of its queue instances): {disagree}"
            )
        if shown.slots_total != q.slots_total:
            raise SgeParseError(
                f"queue instance {q.name} on {q.host} has {q.slots_total} slots in qstat -f (slots_total) but "
                f"{shown.slots_total} in qhost (slots): {disagree}"
            )


def parse_snapshot(qstat_xml: bytes | str, qhost_xml: bytes | str, now: float) -> Snapshot:
    """Both outputs into one Snapshot (``now``: the master's clock when they were read);
    ``SgeParseError`` when they disagree (``check_agree``)."""
    qstat, hosts = parse_qstat(qstat_xml), parse_qhost(qhost_xml)
    check_agree(qstat, hosts)
    return join_snapshot(qstat, hosts, now)


_MICROSECONDS_FROM = 10**11


def parse_start_times(data: bytes | str) -> dict[int, float | None]:
    """Parse ``qstat -xml -j ID,...``: each job's ``qsub -a`` time (``JB_execution_time``, POSIX
    seconds in 8.1.9, microseconds in Open Cluster Scheduler 9; 0: none), by job number.

    SGE prints ``JB_execution_time`` for every job, 0 when it has none: an entry without it
    says nothing of the job's start time, so the job is left out of the answer (as a job
    qstat did not list), never taken to have none."""
    root = _load(data, "qstat -j", "detailed_job_info")
    out: dict[int, float | None] = {}
    for info in root:
        if info.tag != "djob_info":
            continue
        for n, el in enumerate(info, 1):
            where = f"qstat -j: job #{n}"
            job_id = _int(el.findtext("JB_job_number"), "JB_job_number", where, minimum=1)
            text = el.findtext("JB_execution_time")
            if text is None:
                continue
            when = _int(text, "JB_execution_time", f"{where} (job {job_id})")
            # Open Cluster Scheduler 9 counts microseconds: no time in seconds is this large
            # before the year 5138, none in microseconds this small after 1970-01-12.
            out[job_id] = (when / 1e6 if when >= _MICROSECONDS_FROM else float(when)) if when > 0 else None
    return out


def parse_jobs(qstat_xml: bytes | str) -> tuple[Job, ...]:
    return parse_qstat(qstat_xml).jobs


__all__: Sequence[str] = (
    "JOB_STATE_LETTERS",
    "QUEUE_STATE_LETTERS",
    "QstatMemo",
    "QstatResult",
    "check_agree",
    "count_tasks",
    "join_snapshot",
    "parse_jobs",
    "parse_qhost",
    "parse_qstat",
    "parse_sge_time",
    "parse_snapshot",
    "parse_timestamp",
)
