"""The pure SGE XML parsers, on hand-made XML in the 8.1.9 format (tests/fixtures/sge/handmade)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from xml.sax.saxutils import escape
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elb.core.model import NO_FLAGS, Host, Job, QueueFlags, QueueInstance
from elb.schedulers.sge.errors import SgeParseError
from elb.schedulers.sge.parse import (
    QstatResult,
    _time_of_parts,
    check_agree,
    count_tasks,
    join_snapshot,
    parse_qhost,
    parse_qstat,
    parse_sge_time,
    parse_snapshot,
    parse_timestamp,
)
from elb.schedulers.sge.states import queue_flags

HANDMADE = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "handmade"
QSTAT_HEAD = (
    "<?xml version='1.0'?>\n<job_info  xmlns:xsd=\"http://gridengine.sunsource.net/source/browse/"
    '*checkout*/gridengine/source/dist/util/resources/schemas/qstat/qstat.xsd?revision=1.11">\n'
)


def fixture(name: str) -> bytes:
    return (HANDMADE / name).read_bytes()


@pytest.fixture
def local_tz(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run the test in a known local time zone (qstat prints the master's local time)."""
    zone = "America/New_York"
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    yield zone
    monkeypatch.undo()
    time.tzset()


def local(zone: str, year: int, month: int, day: int, hour: int, minute: int, second: int) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=ZoneInfo(zone)).timestamp()


def pending_xml(entries: list[str]) -> str:
    return (
        QSTAT_HEAD
        + "  <queue_info>\n  </queue_info>\n  <job_info>\n"
        + "".join(entries)
        + "  </job_info>\n</job_info>\n"
    )


def job_xml(
    job_id: int = 1,
    name: str = "job",
    state: str = "qw",
    slots: str = "1",
    tasks: str | None = None,
    submitted: str = "2026-11-22T05:00:00",
    extra: str = "",
) -> str:
    t = f"      <tasks>{tasks}</tasks>\n" if tasks is not None else ""
    return (
        '    <job_list state="pending">\n'
        f"      <JB_job_number>{job_id}</JB_job_number>\n"
        "      <JAT_prio>0.00000</JAT_prio>\n"
        f"      <JB_name>{name}</JB_name>\n"
        "      <JB_owner>sgeuser</JB_owner>\n"
        f"      <state>{state}</state>\n"
        f"      <JB_submission_time>{submitted}</JB_submission_time>\n"
        f"      <slots>{slots}</slots>\n"
        f"{t}{extra}"
        "    </job_list>\n"
    )


def by_key(jobs: tuple[Job, ...]) -> dict[tuple[int, str, str | None], Job]:
    return {(j.job_id, j.state, j.queue or j.task_ids): j for j in jobs}


# -- the mixed fixture ------------------------------------------------------------------------


def test_running_jobs_one_entry_per_queue_instance(local_tz: str) -> None:
    res = parse_qstat(fixture("qstat_mixed.xml"))
    running = [j for j in res.jobs if j.state == "r"]
    assert [(j.job_id, j.queue, j.slots) for j in running] == [
        (101, "all.q@node001", 1),
        (102, "all.q@node001", 1),
        (103, "all.q@node001", 2),
        (103, "all.q@node002", 4),
    ]
    sleeper = running[0]
    assert sleeper.host == "node001"
    assert sleeper.started == local(local_tz, 2026, 11, 22, 5, 10, 0)
    assert sleeper.submitted is None  # qstat gives running jobs their start time only
    assert sleeper.priority == pytest.approx(0.555)
    assert sleeper.hard_runtime == 3600.0
    array_task = running[1]
    assert (array_task.task_ids, array_task.tasks) == ("3", 1)
    mpi = running[2]
    assert (mpi.pe, mpi.pe_range, mpi.owner) == ("mpi", "6", "alice")


def test_pending_entries(local_tz: str) -> None:
    res = parse_qstat(fixture("qstat_mixed.xml"))
    jobs = by_key(res.jobs)
    plain = jobs[(201, "qw", None)]
    assert plain.submitted == local(local_tz, 2026, 11, 22, 5, 0, 0)
    assert plain.started is None
    assert plain.queue is None and plain.host is None
    assert dict(plain.hard_requests) == {"h_vmem": "2G", "h_rt": "1:30:00"}
    assert plain.hard_runtime == 5400.0
    assert (plain.tasks, plain.task_ids) == (1, None)

    assert (jobs[(202, "qw", "1-20:1")].tasks, jobs[(202, "qw", "1-20:1")].total_slots) == (20, 20)
    assert jobs[(102, "qw", "4-10:3")].tasks == 3  # 4, 7, 10 (tasks 1-3 ran or run)
    assert jobs[(203, "qw", "5,7,9")].tasks == 3

    smp = jobs[(204, "qw", None)]
    assert (smp.pe, smp.pe_range, smp.slots, smp.total_slots) == ("smp", "4", 4, 4)
    wide = jobs[(205, "qw", None)]
    assert (wide.pe, wide.pe_range, wide.slots) == ("mpi", "8-16", 8)
    assert wide.hard_runtime is None  # h_rt=INFINITY: no limit
    assert dict(wide.hard_requests) == {"h_rt": "INFINITY"}


def test_held_error_and_requeued_states_are_kept_as_sge_shows_them() -> None:
    res = parse_qstat(fixture("qstat_mixed.xml"))
    states = {(j.job_id, j.task_ids): j.state for j in res.jobs if j.job_id in (206, 207, 210, 211)}
    assert states == {
        (206, None): "hqw",
        (207, None): "Eqw",
        (210, "1-3:1"): "hqw",
        (210, "4-6:1"): "qw",
        (211, None): "Rq",
    }
    jobs = by_key(res.jobs)
    assert not jobs[(206, "hqw", None)].is_pending
    assert not jobs[(207, "Eqw", None)].is_pending
    assert jobs[(210, "qw", "4-6:1")].is_pending
    assert not jobs[(210, "hqw", "1-3:1")].is_pending


def test_hostile_names_are_plain_data() -> None:
    jobs = by_key(parse_qstat(fixture("qstat_mixed.xml")).jobs)
    assert jobs[(208, "qw", None)].name == "$(rm -rf /)"
    # SGE writes "<" as "%lt;" (its escaping bug); the rest are real XML entities.
    assert jobs[(209, "qw", None)].name == "a<b>c & \"q\" 's'; `id`"
    assert jobs[(210, "qw", "4-6:1")].name == "données-日本語-✓"


def test_queue_instances_from_qstat() -> None:
    res = parse_qstat(fixture("qstat_mixed.xml"))
    assert [(q.name, q.slots_total, q.slots_used, q.slots_reserved, q.flags) for q in res.queues] == [
        ("all.q@master", 0, 0, 0, NO_FLAGS),
        ("all.q@node001", 4, 4, 0, NO_FLAGS),
        ("all.q@node002", 4, 4, 0, QueueFlags.ALARM | QueueFlags.UNREACHABLE),
        ("all.q@node003", 4, 0, 2, QueueFlags.DISABLED),
        ("long.q@node001", 2, 0, 0, NO_FLAGS),
    ]


def test_qhost_hosts() -> None:
    hosts = {h.name: h for h in parse_qhost(fixture("qhost_mixed.xml"))}
    assert list(hosts) == ["master", "node001", "node002", "node003", "node004"]  # no "global"
    n1 = hosts["node001"]
    assert n1.num_proc == 4
    assert n1.load["load_avg"] == "3.91"
    assert n1.load["mem_total"] == "7.8G"
    assert [(q.queue, q.slots_total, q.slots_used) for q in n1.queues] == [("all.q", 4, 4), ("long.q", 2, 0)]
    assert (n1.slots_total, n1.free_slots, n1.busy) == (6, 2, True)
    n2 = hosts["node002"]
    assert n2.queues[0].flags == QueueFlags.ALARM | QueueFlags.UNREACHABLE
    assert not n2.up and n2.free_slots == 0
    assert "load_avg" not in n2.load  # "-" is unknown, not a value
    n3 = hosts["node003"]
    assert n3.queues[0].disabled and n3.busy  # idle but holds a reservation
    n4 = hosts["node004"]
    assert (n4.num_proc, dict(n4.load), n4.queues, n4.up) == (None, {}, (), False)


def test_snapshot_joins_and_answers_questions(local_tz: str) -> None:
    now = local(local_tz, 2026, 11, 22, 5, 30, 0)
    snap = parse_snapshot(fixture("qstat_mixed.xml"), fixture("qhost_mixed.xml"), now)
    assert snap.now == now
    assert [h.name for h in snap.hosts] == ["master", "node001", "node002", "node003", "node004"]
    assert {j.job_id for j in snap.jobs_on("node001")} == {101, 102, 103}
    assert [j.job_id for j in snap.jobs_on("node002")] == [103]
    assert snap.jobs_on("node003") == ()
    waiting = {(j.job_id, j.task_ids) for j in snap.pending}
    assert waiting == {
        (201, None),
        (202, "1-20:1"),
        (102, "4-10:3"),
        (203, "5,7,9"),
        (204, None),
        (205, None),
        (208, None),
        (209, None),
        (210, "4-6:1"),
        (211, None),  # Rq: re-queued and waiting again
    }
    assert sum(j.total_slots for j in snap.pending) == 1 + 20 + 3 + 3 + 4 + 8 + 1 + 1 + 3 + 1  # the last: job 211 (Rq)


def test_join_prefers_qstat_queue_instances_and_keeps_the_hosts_of_qhost() -> None:
    qstat = QstatResult(
        jobs=(),
        queues=(
            QueueInstance("all.q", "node001", 4, 3, 0, queue_flags("")),  # read with the jobs: preferred
            QueueInstance("all.q", "node009", 8, 0, 0, queue_flags("")),  # a host qhost does not list: never a host
        ),
    )
    hosts = (
        Host(
            "node001",
            (
                QueueInstance("all.q", "node001", 4, 1, 0, queue_flags("")),
                QueueInstance("gpu.q", "node001", 1, 0, 0, queue_flags("")),
            ),
            4,
        ),
        Host("node002", (QueueInstance("all.q", "node002", 4, 0, 0, queue_flags("d")),), 4),
    )
    snap = join_snapshot(qstat, hosts, 5.0)
    got = {h.name: [(q.queue, q.slots_used) for q in h.queues] for h in snap.hosts}
    assert got == {
        "node001": [("all.q", 3), ("gpu.q", 0)],
        "node002": [("all.q", 0)],
    }
    assert snap.host("node001").num_proc == 4  # type: ignore[union-attr]
    with pytest.raises(SgeParseError, match=r"all\.q@node009, on node009, which qhost does not list"):
        check_agree(qstat, hosts)


def test_empty_queue_and_empty_cluster() -> None:
    res = parse_qstat(fixture("qstat_empty.xml"))
    assert res.jobs == ()
    assert [(q.name, q.slots_used, q.slots_total) for q in res.queues] == [("all.q@node001", 0, 4)]
    assert parse_qstat(fixture("qstat_no_queues.xml")) == QstatResult((), ())
    assert parse_qhost(fixture("qhost_global_only.xml")) == ()
    snap = parse_snapshot(fixture("qstat_no_queues.xml"), fixture("qhost_global_only.xml"), 1.0)
    assert (snap.jobs, snap.hosts, snap.pending) == ((), (), ())


def test_without_f_running_jobs_carry_their_queue_name() -> None:
    xml = (
        QSTAT_HEAD + "  <queue_info>\n"
        '    <job_list state="running">\n'
        "      <JB_job_number>7</JB_job_number>\n      <JAT_prio>0.5</JAT_prio>\n"
        "      <JB_name>x</JB_name>\n      <JB_owner>u</JB_owner>\n      <state>r</state>\n"
        "      <JAT_start_time>2026-11-22T05:10:00</JAT_start_time>\n"
        "      <queue_name>all.q@node005</queue_name>\n      <slots>2</slots>\n"
        "    </job_list>\n  </queue_info>\n  <job_info>\n  </job_info>\n</job_info>\n"
    )
    (job,) = parse_qstat(xml).jobs
    assert (job.queue, job.host, job.slots) == ("all.q@node005", "node005", 2)


# -- values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "count"),
    [
        ("1-20:1", 20),
        ("1-10:3", 4),
        ("5,7,9", 3),
        ("7", 1),
        ("1-3:1,7,10-20:5", 7),
        ("2-2:1", 1),
        ("1-10", 10),
    ],
)
def test_count_tasks(spec: str, count: int) -> None:
    assert count_tasks(spec) == count


@pytest.mark.parametrize("spec", ["", "a", "1-", "0", "5-1:1", "1-10:0", "1-2:1,,3", "-1", "1:2"])
def test_count_tasks_rejects(spec: str) -> None:
    with pytest.raises(ValueError, match="task range"):
        count_tasks(spec)


@given(st.lists(st.tuples(st.integers(1, 5000), st.integers(0, 300), st.integers(1, 50)), min_size=1, max_size=6))
def test_count_tasks_matches_enumeration(parts: list[tuple[int, int, int]]) -> None:
    spec = ",".join(f"{a}-{a + span}:{step}" for a, span, step in parts)
    assert count_tasks(spec) == sum(len(range(a, a + span + 1, step)) for a, span, step in parts)


_TASK_PART = re.compile(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?")


def _count_by_expression(spec: str) -> int | None:
    """count_tasks by a regular expression of a part, None where it refuses the list."""
    total = 0
    for part in spec.strip().split(","):
        m = _TASK_PART.fullmatch(part.strip())
        if m is None:
            return None
        start = int(m.group(1))
        end = int(m.group(2)) if m.group(2) is not None else start
        step = int(m.group(3)) if m.group(3) is not None else 1
        if start < 1 or end < start or step < 1 or end > 2**31:
            return None
        total += (end - start) // step + 1
    return total


@given(st.text(st.sampled_from("0123456789-:, \t\u00b2\u0663+_"), max_size=20))
def test_count_tasks_takes_and_counts_what_the_expression_does(spec: str) -> None:
    """Any text of digits (ASCII or not), dashes, colons, commas and spaces: counted as a
    regular expression of ``N``, ``N-M`` and ``N-M:S`` parts counts it, refused where it refuses."""
    expected = _count_by_expression(spec)
    if expected is None:
        with pytest.raises(ValueError, match="task range"):
            count_tasks(spec)
    else:
        assert count_tasks(spec) == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("3600", 3600.0),
        ("1:00:00", 3600.0),
        ("1:30:00", 5400.0),
        ("90:00", 5400.0),
        ("::30", 30.0),
        ("0:0:1.5", 1.5),
        ("INFINITY", None),
        ("infinity", None),
    ],
)
def test_parse_sge_time(text: str, seconds: float | None) -> None:
    assert parse_sge_time(text) == seconds


@pytest.mark.parametrize("text", ["", "1:2:3:4", "abc", "-5", "1h", "1:-1:00"])
def test_parse_sge_time_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="time value"):
        parse_sge_time(text)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.integers(0, 10**400).map(str),
        st.text(st.sampled_from("0123456789:. \t\u0663\u00b2INFTY-"), max_size=12),
    )
)
def test_parse_sge_time_reads_seconds_alone_as_its_parts_do(text: str) -> None:
    """A time of seconds alone (read by float) is what reading it part by part gives; any other
    text too, or the same refusal."""
    try:
        expected: float | str | None = _time_of_parts(text)
    except ValueError:
        expected = "refused"
    try:
        got: float | str | None = parse_sge_time(text)
    except ValueError:
        got = "refused"
    assert got == expected


def test_timestamps_follow_the_local_zone_and_daylight_saving(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        for zone in ("Europe/Berlin", "Asia/Kolkata", "UTC", "America/Los_Angeles"):
            monkeypatch.setenv("TZ", zone)
            time.tzset()
            for stamp in ("2026-01-15T12:00:00", "2026-07-15T12:00:00", "2026-11-22T05:06:07"):
                expected = datetime.fromisoformat(stamp).replace(tzinfo=ZoneInfo(zone)).timestamp()
                assert parse_timestamp(stamp) == expected, (zone, stamp)
        # winter and summer differ by the DST hour in Berlin, not in Kolkata
        monkeypatch.setenv("TZ", "Europe/Berlin")
        time.tzset()
        jan, jul = parse_timestamp("2026-01-15T12:00:00"), parse_timestamp("2026-07-15T12:00:00")
        assert (jul - jan) % 86400 == 86400 - 3600
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize(
    "text", ["2026-13-01T00:00:00", "2026-11-22 05:00:00", "11/22/2026 05:00:00", "2026-11-22T25:00:00", "x"]
)
def test_parse_timestamp_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="timestamp"):
        parse_timestamp(text)


# -- bad input: never half a snapshot -------------------------------------------------------


def test_every_truncation_is_an_error() -> None:
    data = fixture("qstat_mixed.xml")
    end = data.rindex(b">")  # cutting anywhere before the root's closing ">" leaves it open
    for cut in [*range(0, end, 97), end]:
        with pytest.raises(SgeParseError):
            parse_qstat(data[:cut])
    qhost = fixture("qhost_mixed.xml")
    for cut in range(0, qhost.rindex(b">"), 89):
        with pytest.raises(SgeParseError):
            parse_qhost(qhost[:cut])


def test_truncation_after_a_complete_element_is_an_error() -> None:
    """A cut right after an inner </job_info> leaves a well-formed-looking prefix."""
    data = fixture("qstat_mixed.xml")
    inner_end = data.index(b"  </job_info>") + len(b"  </job_info>")
    cuts = [inner_end, inner_end + 1]
    for tag in (b"</job_list>", b"</Queue-List>", b"</queue_info>"):
        start = 0
        while (found := data.find(tag, start)) != -1:
            cuts.append(found + len(tag))
            start = found + 1
    for cut in cuts:
        with pytest.raises(SgeParseError, match="not well-formed"):
            parse_qstat(data[:cut])


def test_truncation_error_names_the_position() -> None:
    with pytest.raises(SgeParseError, match=r"qstat: XML is not well-formed: .*line \d+, column \d+"):
        parse_qstat(fixture("qstat_mixed.xml")[:1000])


@pytest.mark.parametrize("name", ["billion_laughs.xml", "external_entity.xml"])
def test_entity_tricks_are_refused(name: str) -> None:
    start = time.perf_counter()
    with pytest.raises(SgeParseError, match="refused XML with a DTD"):
        parse_qstat(fixture(name))
    assert time.perf_counter() - start < 5  # refused, not expanded (generous bound: no timing test)


def test_wrong_document() -> None:
    with pytest.raises(SgeParseError, match=r"root element is <qhost>, expected <job_info>"):
        parse_qstat(fixture("qhost_mixed.xml"))
    with pytest.raises(SgeParseError, match="empty output"):
        parse_qstat(b"")
    with pytest.raises(SgeParseError, match="empty output"):
        parse_qhost("  \n")
    with pytest.raises(SgeParseError, match="not well-formed"):
        parse_qstat(b"error: commlib error: got select error (Connection refused)\n")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (job_xml(state="qX"), r"job_list #1 \(job 1\): unknown job state 'qX'"),
        (job_xml(state=""), r"unknown job state ''"),
        (job_xml(state="rr"), r"unknown job state 'rr'"),
        (job_xml(slots="four"), r"\(job 1\): <slots> is 'four', not a whole number"),
        (job_xml(slots="-1"), r"<slots> is -1, less than 0"),
        (job_xml(tasks="1-x"), r"\(job 1\): <tasks>: task range '1-x'"),
        (job_xml(submitted="yesterday"), r"\(job 1\): <JB_submission_time>: timestamp 'yesterday'"),
        (
            job_xml(extra='      <hard_request name="h_rt">soon</hard_request>\n'),
            r"hard request h_rt: time value 'soon'",
        ),
        (job_xml(extra="      <hard_request>1</hard_request>\n"), r"<hard_request> without a name"),
        (job_xml(job_id=0), r"<JB_job_number> is 0, less than 1"),
        (job_xml().replace("<JB_owner>sgeuser</JB_owner>", ""), r"\(job 1\): missing <JB_owner>"),
        (job_xml().replace("<JB_job_number>1</JB_job_number>", ""), r"job_list #1: missing <JB_job_number>"),
        (job_xml().replace("<slots>1</slots>", ""), r"missing <slots>"),
    ],
)
def test_bad_job_fields_name_what_and_where(entry: str, message: str) -> None:
    xml = pending_xml([job_xml(job_id=5), job_xml(job_id=6)]).replace(
        "  </job_info>\n</job_info>", entry + "  </job_info>\n</job_info>"
    )
    with pytest.raises(SgeParseError, match=message.replace("#1", "#3")):
        parse_qstat(xml)


def test_bad_queue_fields() -> None:
    good = fixture("qstat_empty.xml").decode()
    cases = {
        "<slots_total>4</slots_total>": (
            "<slots_total>x</slots_total>",
            r"Queue-List #1 \(all.q@node001\): <slots_total> is 'x'",
        ),
        "<name>all.q@node001</name>": (
            "<name>node001</name>",
            r"queue instance name 'node001' is not queue@host",
        ),
        "<arch>lx-amd64</arch>": (
            "<arch>lx-amd64</arch><state>aZ</state>",
            r"unknown queue state letter\(s\) 'Z'",
        ),
    }
    for old, (new, message) in cases.items():
        with pytest.raises(SgeParseError, match=message):
            parse_qstat(good.replace(old, new))


def test_bad_qhost_fields() -> None:
    good = fixture("qhost_mixed.xml").decode()
    cases = [
        (
            "<queuevalue qname='all.q' name='slots'>4</queuevalue>",
            "<queuevalue qname='all.q' name='slots'>lots</queuevalue>",
            r"host 'node001' queue 'all.q': <queuevalue slots> is 'lots'",
        ),
        (
            "<hostvalue name='num_proc'>4</hostvalue>",
            "<hostvalue name='num_proc'>4.5</hostvalue>",
            r"host 'node001': num_proc is '4.5'",
        ),
        ("<host name='node003'>", "<host name='node001'>", r"host 'node001' is listed twice"),
        ("<host name='node003'>", "<host>", r"host #5 has no name"),
        (
            "<queuevalue qname='all.q' name='state_string'>d</queuevalue>",
            "<queuevalue qname='all.q' name='state_string'>dq</queuevalue>",
            r"unknown queue state letter\(s\) 'q'",
        ),
    ]
    for old, new, message in cases:
        assert old in good
        with pytest.raises(SgeParseError, match=message):
            parse_qhost(good.replace(old, new, 1))


def test_undecodable_bytes_and_control_characters_in_names_are_replaced() -> None:
    xml = pending_xml([job_xml(job_id=1, name="caf\x01e"), job_xml(job_id=2, name="ok")]).encode()
    latin1 = (
        pending_xml([job_xml(job_id=3, name="PLACEHOLDER")]).encode().replace(b"PLACEHOLDER", "café".encode("latin-1"))
    )
    jobs = parse_qstat(xml).jobs
    assert [j.name for j in jobs] == ["caf\ufffde", "ok"]
    (job,) = parse_qstat(latin1).jobs
    assert job.name == "caf\ufffd"


def sge_escape(text: str) -> str:
    """What SGE's escape_string() writes (note "<" -> "%lt;")."""
    return escape(text, {'"': "&quot;", "'": "&apos;"}).replace("&lt;", "%lt;")


@settings(max_examples=200, deadline=None)
@given(
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufffe\uffff"),
        min_size=1,
        max_size=40,
    ).filter(lambda s: "%lt;" not in s and s == s.strip())
)
def test_any_printable_name_survives(name: str) -> None:
    (job,) = parse_qstat(pending_xml([job_xml(name=sge_escape(name))])).jobs
    assert job.name == name


def test_thousands_of_jobs(local_tz: str) -> None:
    entries = []
    for i in range(1, 4001):
        kind = i % 4
        if kind == 0:
            entries.append(job_xml(job_id=i, tasks=f"1-{i % 50 + 1}:1"))
        elif kind == 1:
            extra = f'      <requested_pe name="smp">{i % 8 + 1}</requested_pe>\n'
            entries.append(job_xml(job_id=i, slots=str(i % 8 + 1), extra=extra))
        elif kind == 2:
            entries.append(job_xml(job_id=i, state="hqw"))
        else:
            entries.append(job_xml(job_id=i, submitted=f"2026-11-22T0{i % 10}:00:00"))
    jobs = parse_qstat(pending_xml(entries)).jobs
    assert len(jobs) == 4000
    assert [j.job_id for j in jobs] == list(range(1, 4001))
    assert sum(j.tasks for j in jobs) == sum(i % 50 + 1 if i % 4 == 0 else 1 for i in range(1, 4001))
    assert sum(j.total_slots for j in jobs if j.pe == "smp") == sum(i % 8 + 1 for i in range(1, 4001) if i % 4 == 1)
    assert sum(1 for j in jobs if j.is_pending) == 3000
    assert jobs[2].submitted == local(local_tz, 2026, 11, 22, 3, 0, 0)


# -- the streaming reader and its guard -----------------------------------------------------


def test_text_and_bytes_give_the_same_result() -> None:
    data = fixture("qstat_mixed.xml")
    whole = parse_qstat(data)
    assert len(whole.jobs) > 10
    assert parse_qstat(data.decode()) == whole


def test_prolog_with_comments_and_bom_is_read() -> None:
    body = fixture("qstat_mixed.xml").split(b"?>", 1)[1]
    expected = parse_qstat(fixture("qstat_mixed.xml"))
    for prolog in (
        b"\xef\xbb\xbf<?xml version='1.0'?>",
        b"<?xml version='1.0'?>\n<!-- written by hand -->\n<?pi x?>",
        b"<!--" + b"x" * 70_000 + b"-->",  # longer than the quick check looks: defusedxml judges it
    ):
        assert parse_qstat(prolog + body) == expected


def test_doctype_anywhere_in_the_prolog_is_refused() -> None:
    body = fixture("qstat_empty.xml").split(b"?>", 1)[1]
    for prolog in (
        b"<!DOCTYPE job_info>",
        b"<!-- <job_info> --><!DOCTYPE job_info [<!ENTITY a 'b'>]>",
        b"<!--" + b"x" * 70_000 + b'--><!DOCTYPE job_info SYSTEM "http://example.invalid/x.dtd">',
    ):
        with pytest.raises(SgeParseError, match="refused XML with a DTD"):
            parse_qstat(b"<?xml version='1.0'?>\n" + prolog + body)
        with pytest.raises(SgeParseError, match="refused XML with a DTD"):
            parse_qhost(b"<?xml version='1.0'?>\n" + prolog + b"<qhost></qhost>")


def test_undeclared_entity_is_not_well_formed() -> None:
    with pytest.raises(SgeParseError, match="not well-formed"):
        parse_qstat(pending_xml([job_xml(name="&lol9;")]))


def test_running_entry_outside_a_queue_instance_and_pending_inside_one() -> None:
    running = job_xml(job_id=9, state="r").replace('state="pending"', 'state="running"')
    (job,) = parse_qstat(pending_xml([running])).jobs
    assert (job.job_id, job.state, job.queue) == (9, "r", None)

    inside = fixture("qstat_empty.xml").decode().replace("    </Queue-List>", job_xml(job_id=4) + "    </Queue-List>")
    with pytest.raises(SgeParseError, match=r"Queue-List #1 \(all.q@node001\): a job_list that is not"):
        parse_qstat(inside)


def test_unexpected_elements_are_errors() -> None:
    good = fixture("qstat_empty.xml").decode()
    with pytest.raises(SgeParseError, match=r"unexpected <cluster_queue_summary> in <job_info>"):
        parse_qstat(good.replace("  <job_info>\n", "  <cluster_queue_summary/>\n  <job_info>\n"))
    with pytest.raises(SgeParseError, match=r"unexpected <foo> in <queue_info>"):
        parse_qstat(good.replace("  </queue_info>", "<foo/>  </queue_info>"))
    with pytest.raises(SgeParseError, match=r"unexpected <bar> in <qhost>"):
        parse_qhost(b"<qhost><bar/></qhost>")


def test_garbage_collection_is_back_on_after_parsing() -> None:
    import gc

    assert gc.isenabled()
    parse_snapshot(fixture("qstat_mixed.xml"), fixture("qhost_mixed.xml"), 0.0)
    assert gc.isenabled()
    with pytest.raises(SgeParseError):
        parse_qstat(fixture("qstat_mixed.xml")[:500])
    with pytest.raises(SgeParseError):
        parse_qhost(b"<qhost><host/></qhost>")
    assert gc.isenabled()


@settings(max_examples=300, deadline=None)
@given(
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2037, 12, 31)),
    st.sampled_from(["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "UTC"]),
)
def test_cached_conversion_matches_the_zone_database(moment: datetime, zone: str) -> None:
    """The hot path converts once per hour and adds minutes and seconds: same answer as tzdata."""
    from elb.schedulers.sge.parse import _local_seconds

    moment = moment.replace(microsecond=0)
    aware = moment.replace(tzinfo=ZoneInfo(zone))
    if aware.replace(fold=0).utcoffset() != aware.replace(fold=1).utcoffset():
        return  # an hour that happens twice at the end of daylight saving: either reading is right
    if datetime.fromtimestamp(aware.timestamp(), ZoneInfo(zone)).replace(tzinfo=None) != moment:
        return  # a time that does not exist (skipped at the start of daylight saving)
    old = time.tzname
    try:
        import os

        saved = os.environ.get("TZ")
        os.environ["TZ"] = zone
        time.tzset()
        cache: dict[str, float | None] = {}
        stamp = moment.strftime("%Y-%m-%dT%H:%M:%S")
        assert _local_seconds(stamp, cache) == aware.timestamp()
        assert _local_seconds(stamp, cache) == aware.timestamp()  # from the cache
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()
        assert time.tzname == old


@pytest.mark.parametrize(
    ("zone", "stamps"),
    [
        # Lord Howe Island moves its clocks by half an hour at 02:00
        ("Australia/Lord_Howe", ["2026-10-04T01:59:59", "2026-10-04T02:30:00", "2026-10-04T02:45:00"]),
        ("Australia/Lord_Howe", ["2026-04-05T01:10:00", "2026-04-05T02:10:00", "2026-04-05T02:59:59"]),
        ("Europe/Berlin", ["2026-03-29T01:59:59", "2026-03-29T03:00:00", "2026-10-25T03:30:00"]),
    ],
)
def test_cached_conversion_around_clock_changes(monkeypatch: pytest.MonkeyPatch, zone: str, stamps: list[str]) -> None:
    from elb.schedulers.sge.parse import _local_seconds

    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        cache: dict[str, float | None] = {}
        for stamp in stamps:
            expected = datetime.fromisoformat(stamp).replace(tzinfo=ZoneInfo(zone)).timestamp()
            assert _local_seconds(stamp, cache) == expected, stamp
    finally:
        monkeypatch.undo()
        time.tzset()
