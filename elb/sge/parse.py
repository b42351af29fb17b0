"""Pure parsers: the XML of ``qstat -u '*' -xml -r -f`` and ``qhost -xml -q`` into elb's values.

Written for the format of Son of Grid Engine 8.1.9 (Debian's ``gridengine``):

- ``qstat -xml -f``: ``<job_info>`` holds ``<queue_info>`` with one ``<Queue-List>`` per queue
  instance (``name``, ``qtype``, ``slots_used``, ``slots_resv``, ``slots_total``, optional
  ``load_avg``/``arch``, ``state``) whose ``<job_list state="running">`` children are the jobs on
  it, and a second ``<job_info>`` with the ``<job_list state="pending">`` entries (also
  ``error``/``zombie``/``finished``). A job entry has ``JB_job_number``, ``JAT_prio``,
  ``JB_name``, ``JB_owner``, ``state``, ``JB_submission_time`` (waiting) or
  ``JAT_start_time`` (running), ``slots``, ``tasks`` (array jobs) and, with ``-r``,
  ``requested_pe name=".."``, ``hard_request name=".."`` and more.
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

import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import defusedxml
import defusedxml.ElementTree as DET

from elb.model import Host, Job, QueueInstance, Snapshot
from elb.sge.errors import SgeParseError

# Letters of SGE job states (sge_job.c, job_get_state_string): d E S T h R q r s t w x, z for zombies.
JOB_STATE_LETTERS = frozenset("dESThRqrstwxz")
# Letters of queue-instance states (qstat(1)): a c d o s u A C D E S.
QUEUE_STATE_LETTERS = frozenset("acdosuACDES")

_TIMESTAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?")
_TASK_RANGE = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")
# Characters XML 1.0 forbids; SGE copies job names verbatim, so a hostile name can carry them.
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_MAX_TASK_ID = 2**31
_NO_REQUESTS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class QstatResult:
    """What ``qstat -xml -f`` showed: its job entries and its queue instances."""

    jobs: tuple[Job, ...]
    queues: tuple[QueueInstance, ...]


# -- XML loading --------------------------------------------------------------------------------


def _load(data: bytes | str, source: str, root_tag: str) -> ET.Element:
    """Parse with defusedxml (no DTD, no entities, nothing external); name the failure."""
    if not data or not data.strip():
        raise SgeParseError(f"{source}: empty output, expected <{root_tag}> XML")
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
    try:
        root: ET.Element = DET.fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except defusedxml.DefusedXmlException as err:
        raise SgeParseError(
            f"refused XML with a DTD, entity declaration or external reference (SGE writes none): {err!r}"
        ) from None
    return root


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


def parse_timestamp(text: str) -> float:
    """``2026-11-22T04:05:06`` in the master's local time -> POSIX seconds."""
    m = _TIMESTAMP.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"timestamp {text!r} is not YYYY-MM-DDTHH:MM:SS")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59 and second <= 61):
        raise ValueError(f"timestamp {text!r} is out of range")
    try:
        seconds = time.mktime((year, month, day, hour, minute, second, 0, 0, -1))
    except (OverflowError, ValueError) as err:
        raise ValueError(f"timestamp {text!r}: {err}") from None
    if m.group(7):
        seconds += float("0." + m.group(7))
    return seconds


def count_tasks(spec: str) -> int:
    """Number of task ids in an SGE id list: ``1-20:1`` -> 20, ``1-10:3`` -> 4, ``5,7,9`` -> 3."""
    total = 0
    for part in spec.strip().split(","):
        m = _TASK_RANGE.fullmatch(part.strip())
        if m is None:
            raise ValueError(f"task range {spec!r} is not like 1-20:1, 1-10:3 or 5,7,9")
        start = int(m.group(1))
        end = int(m.group(2)) if m.group(2) is not None else start
        step = int(m.group(3)) if m.group(3) is not None else 1
        if start < 1 or end < start or step < 1 or end > _MAX_TASK_ID:
            raise ValueError(f"task range {spec!r} has an impossible part {part!r}")
        total += (end - start) // step + 1
    return total


def parse_sge_time(value: str) -> float | None:
    """An SGE time value in seconds: ``3600``, ``1:00:00``, ``90:00``, ``::30``; None for INFINITY."""
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
            try:
                number = float(part)
            except ValueError:
                raise ValueError(f"time value {value!r} is not [[hours:]minutes:]seconds") from None
            if not (number >= 0 and number != float("inf")):
                raise ValueError(f"time value {value!r} is negative or not finite")
        total = total * 60 + number
    return total


def _unescape(text: str) -> str:
    # SGE's escape_string() writes "<" as "%lt;" (sic).
    return text.replace("%lt;", "<") if "%lt;" in text else text


def _check_job_state(state: str) -> bool:
    return bool(state) and len(set(state)) == len(state) and JOB_STATE_LETTERS.issuperset(state)


def _queue_states(text: str | None, where: str) -> str:
    states = (text or "").strip()
    if states == "-":
        return ""
    if not QUEUE_STATE_LETTERS.issuperset(states):
        unknown = "".join(sorted(set(states) - QUEUE_STATE_LETTERS))
        raise SgeParseError(f"{where}: unknown queue state letter(s) {unknown!r} in {states!r}")
    return states


def _int(text: str | None, what: str, where: str, minimum: int = 0) -> int:
    if text is None:
        raise SgeParseError(f"{where}: missing <{what}>")
    try:
        value = int(text.strip())
    except ValueError:
        raise SgeParseError(f"{where}: <{what}> is {text!r}, not a whole number") from None
    if value < minimum:
        raise SgeParseError(f"{where}: <{what}> is {value}, less than {minimum}")
    return value


# -- qstat --------------------------------------------------------------------------------------


class _JobReader:
    """Turns ``<job_list>`` elements into Jobs; caches the values jobs often share."""

    def __init__(self) -> None:
        self._times: dict[str, float] = {}
        self._tasks: dict[str, int] = {}
        self._runtimes: dict[str, float | None] = {}

    def _time(self, text: str, what: str, where: str) -> float:
        cached = self._times.get(text)
        if cached is None:
            try:
                cached = parse_timestamp(text)
            except ValueError as err:
                raise SgeParseError(f"{where}: <{what}>: {err}") from None
            self._times[text] = cached
        return cached

    def _count(self, spec: str, where: str) -> int:
        cached = self._tasks.get(spec)
        if cached is None:
            try:
                cached = count_tasks(spec)
            except ValueError as err:
                raise SgeParseError(f"{where}: <tasks>: {err}") from None
            self._tasks[spec] = cached
        return cached

    def _runtime(self, text: str, where: str) -> float | None:
        if text in self._runtimes:
            return self._runtimes[text]
        try:
            value = parse_sge_time(text)
        except ValueError as err:
            raise SgeParseError(f"{where}: hard request h_rt: {err}") from None
        self._runtimes[text] = value
        return value

    def job(self, el: ET.Element, where: str, queue: str | None) -> Job:
        fields, hard, pe, pe_range = _job_children(el, where)
        job_id = _int(fields.get("JB_job_number"), "JB_job_number", where, minimum=1)
        where = f"{where} (job {job_id})"
        for required in ("JB_name", "JB_owner", "state"):
            if required not in fields:
                raise SgeParseError(f"{where}: missing <{required}>")
        state = (fields["state"] or "").strip()
        if not _check_job_state(state):
            raise SgeParseError(f"{where}: unknown job state {state!r}")
        slots = _int(fields.get("slots"), "slots", where)

        text = fields.get("JB_submission_time")
        submitted = self._time(text, "JB_submission_time", where) if text else None
        text = fields.get("JAT_start_time")
        started = self._time(text, "JAT_start_time", where) if text else None

        task_ids = (fields.get("tasks") or "").strip() or None
        tasks = 1 if task_ids is None else self._count(task_ids, where)

        text = fields.get("JAT_prio")
        try:
            priority = float(text) if text else 0.0
        except ValueError:
            raise SgeParseError(f"{where}: <JAT_prio> is {text!r}, not a number") from None

        return Job(
            job_id=job_id,
            name=_unescape(fields["JB_name"] or ""),
            owner=_unescape(fields["JB_owner"] or ""),
            state=state,
            slots=slots,
            submitted=submitted,
            started=started,
            tasks=tasks,
            task_ids=task_ids,
            priority=priority,
            pe=pe,
            pe_range=pe_range,
            hard_requests=MappingProxyType(hard) if hard else _NO_REQUESTS,
            queue=(fields.get("queue_name") or "").strip() or queue,
            hard_runtime=self._runtime(hard["h_rt"], where) if "h_rt" in hard else None,
        )


def _job_children(
    el: ET.Element, where: str
) -> tuple[dict[str, str | None], dict[str, str], str | None, str | None]:
    """A job entry's simple fields (first of each tag), hard requests, and requested PE."""
    fields: dict[str, str | None] = {}
    hard: dict[str, str] = {}
    pe: str | None = None
    pe_range: str | None = None
    for child in el:
        tag = child.tag
        if tag == "hard_request":
            name = child.get("name")
            if not name:
                raise SgeParseError(f"{where}: <hard_request> without a name")
            hard[name] = (child.text or "").strip()
        elif tag == "requested_pe":
            pe = child.get("name")
            if not pe:
                raise SgeParseError(f"{where}: <requested_pe> without a name")
            pe_range = (child.text or "").strip() or None
        elif tag not in fields:
            fields[tag] = child.text
    return fields, hard, pe, pe_range


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
    resv = _int(fields["slots_resv"], "slots_resv", where) if fields.get("slots_resv") else 0
    return QueueInstance(queue, host, total, used, resv, _queue_states(fields.get("state"), where))


def parse_qstat(data: bytes | str) -> QstatResult:
    """Parse ``qstat -u '*' -xml -r -f`` (also accepts the output without ``-f``)."""
    root = _load(data, "qstat", "job_info")
    reader = _JobReader()
    jobs: list[Job] = []
    queues: list[QueueInstance] = []
    for section in root:
        if section.tag == "queue_info":
            _read_queue_info(section, reader, jobs, queues)
        elif section.tag == "job_info":
            for item in section:
                if item.tag != "job_list":
                    raise SgeParseError(f"qstat: unexpected <{item.tag}> in <job_info>")
                jobs.append(reader.job(item, f"qstat: job_info/job_list #{len(jobs) + 1}", None))
        else:
            raise SgeParseError(f"qstat: unexpected <{section.tag}> in <job_info>")
    return QstatResult(tuple(jobs), tuple(queues))


def _read_queue_info(
    section: ET.Element, reader: _JobReader, jobs: list[Job], queues: list[QueueInstance]
) -> None:
    for qi, item in enumerate(section, 1):
        if item.tag == "Queue-List":
            fields: dict[str, str | None] = {}
            entries: list[ET.Element] = []
            for child in item:
                if child.tag == "job_list":
                    entries.append(child)
                elif child.tag not in fields:
                    fields[child.tag] = child.text
            qinst = _queue_instance(fields, f"qstat: queue_info/Queue-List #{qi}")
            queues.append(qinst)
            for entry in entries:
                where = f"qstat: {qinst.name}: job_list #{len(jobs) + 1}"
                jobs.append(reader.job(entry, where, qinst.name))
        elif item.tag == "job_list":  # running jobs without -f
            jobs.append(reader.job(item, f"qstat: queue_info/job_list #{len(jobs) + 1}", None))
        else:
            raise SgeParseError(f"qstat: unexpected <{item.tag}> in <queue_info>")


# -- qhost --------------------------------------------------------------------------------------


def _num_proc(text: str | None, where: str) -> int | None:
    if text is None or text.strip() in ("", "-"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise SgeParseError(f"{where}: num_proc is {text!r}, not a number") from None
    if value < 0 or value != int(value):
        raise SgeParseError(f"{where}: num_proc is {text!r}, not a whole number")
    return int(value)


def parse_qhost(data: bytes | str) -> tuple[Host, ...]:
    """Parse ``qhost -xml -q``: execution hosts with load values and queue instances."""
    root = _load(data, "qhost", "qhost")
    hosts: list[Host] = []
    seen: set[str] = set()
    for i, el in enumerate(root, 1):
        if el.tag != "host":
            raise SgeParseError(f"qhost: unexpected <{el.tag}> in <qhost>")
        name = (el.get("name") or "").strip()
        if not name:
            raise SgeParseError(f"qhost: host #{i} has no name")
        if name == "global":
            continue
        where = f"qhost: host {name!r}"
        if name in seen:
            raise SgeParseError(f"{where} is listed twice")
        seen.add(name)
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
    total = _int(values.get("slots"), "queuevalue slots", where)
    used = _int(values.get("slots_used"), "queuevalue slots_used", where)
    resv = _int(values["slots_resv"], "queuevalue slots_resv", where) if values.get("slots_resv") else 0
    return QueueInstance(qname, host, total, used, resv, _queue_states(values.get("state_string"), where))


# -- the snapshot -------------------------------------------------------------------------------


def join_snapshot(qstat: QstatResult, hosts: Iterable[Host], now: float) -> Snapshot:
    """Hosts from qhost, with the queue instances qstat showed next to its jobs where it has them.

    qstat's queue instances come from the same read as the jobs, so they are preferred; a queue
    instance only qhost shows is kept, and a host only qstat shows (added between the two reads)
    is included without load values.
    """
    by_host: dict[str, dict[str, QueueInstance]] = {}
    for q in qstat.queues:
        by_host.setdefault(q.host, {})[q.queue] = q
    joined: list[Host] = []
    for h in hosts:
        from_qstat = by_host.pop(h.name, None)
        if from_qstat is None:
            joined.append(h)
            continue
        merged = dict(from_qstat)
        for q in h.queues:
            merged.setdefault(q.queue, q)
        joined.append(Host(h.name, tuple(merged.values()), h.num_proc, h.load))
    for name, qs in by_host.items():
        joined.append(Host(name, tuple(qs.values())))
    return Snapshot(now=now, jobs=qstat.jobs, hosts=tuple(joined))


def parse_snapshot(qstat_xml: bytes | str, qhost_xml: bytes | str, now: float) -> Snapshot:
    """Both outputs into one Snapshot (``now``: the master's clock when they were read)."""
    return join_snapshot(parse_qstat(qstat_xml), parse_qhost(qhost_xml), now)


def parse_jobs(qstat_xml: bytes | str) -> tuple[Job, ...]:
    return parse_qstat(qstat_xml).jobs


__all__: Sequence[str] = (
    "JOB_STATE_LETTERS",
    "QUEUE_STATE_LETTERS",
    "QstatResult",
    "count_tasks",
    "join_snapshot",
    "parse_jobs",
    "parse_qhost",
    "parse_qstat",
    "parse_sge_time",
    "parse_snapshot",
    "parse_timestamp",
)
