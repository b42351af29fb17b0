"""The two readers of ``qstat -xml`` and ``qhost -xml``: the quick one gives the careful one's result or declines.

``parse_qstat`` and ``parse_qhost`` try a quick reader (regular expressions over the regular shape
SGE writes) and hand anything else to the careful reader (an element tree). For every document
here: when the quick reader answers, its answer equals the careful reader's, and the parser
answers exactly as the careful reader does (the same values, or the same error message).
"""

from __future__ import annotations

import contextvars
import dataclasses
import importlib.util
import random
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any
from xml.sax.saxutils import escape

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elb.core.model import Job, QueueInstance
from elb.schedulers.sge.errors import SgeParseError
from elb.schedulers.sge.parse import (
    _ENTRY_MARK,
    _FAST_JOBS,
    _JOB_ENTRY,
    REPRIORITIZED_AFTER,
    QstatMemo,
    QstatResult,
    _careful_qhost,
    _careful_qstat,
    _JobBuilder,
    _quick_qhost,
    _quick_qstat,
    _QuickReader,
    _zone,
    join_snapshot,
    parse_qhost,
    parse_qstat,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sge"
BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_pass.py"
QSTAT_FIXTURES = sorted(
    p for p in FIXTURES.rglob("*.xml") if "qhost" not in p.name and not p.name.endswith("_qstat_j.xml")
)
QHOST_FIXTURES = sorted(p for p in FIXTURES.rglob("*.xml") if "qhost" in p.name)
# Recorded and hand-made outputs of the shape qstat writes: the quick reader must read these.
READ_QUICKLY = {
    "qstat_mixed.xml",
    "qstat_empty.xml",
    "ocs9_qstat_r.xml",
    "busy-2-nodes.qstat-f.xml",
    "busy-2-nodes.qstat.xml",
    "empty-no-nodes.qstat-f.xml",
    "empty-no-nodes.qstat.xml",
    "groups-waiting.qstat-r-f.xml",
    "groups-waiting.qstat-r.xml",
    "idle-2-nodes.qstat-f.xml",
    "idle-2-nodes.qstat.xml",
    "node-died.qstat-f.xml",
}


def shown(result: QstatResult) -> tuple[tuple[Job, ...], tuple[QueueInstance, ...]]:
    """What a read says qstat showed: each job with the priority the read gives it (a job kept
    from a read before carries the priority its entry shows now beside it), and the queue
    instances."""
    return tuple(dataclasses.replace(j, priority=result.priority_of(j)) for j in result.jobs), result.queues


def outcome(read: object, data: bytes | str) -> object:
    """What the reader says qstat showed (``shown``), or the type and message of what it raised."""
    try:
        got = read(data)  # type: ignore[operator]
    except Exception as err:
        return (type(err).__name__, str(err))
    return shown(got) if isinstance(got, QstatResult) else got


# The quick reader's memory of the documents it read (QstatMemo), carried from each document
# checked to the next: whatever pieces it holds, a document reads as it does without it.
CARRIED = QstatMemo()


def check(data: bytes | str) -> QstatResult | None:
    """The rule of the two readers, on one document; the quick reader's answer. With a memo of
    the documents read before, and of this one, the quick reader answers as it does without."""
    careful = outcome(_careful_qstat, data)
    quick = _quick_qstat(data)
    if quick is not None:
        assert shown(quick) == careful, f"quick reader accepted what the careful one refuses: {careful}"
        assert not quick.moved_priorities  # without a memo, no job is kept from a read before
        assert [type(j) for j in quick.jobs] == [Job] * len(quick.jobs)
    assert outcome(lambda d: _quick_qstat(d, CARRIED), data) == outcome(_quick_qstat, data)
    # Every piece now from the memo, when it was read.
    assert outcome(lambda d: _quick_qstat(d, CARRIED), data) == outcome(_quick_qstat, data)
    if data and not (data.isspace()):
        assert outcome(parse_qstat, data) == careful
        assert outcome(lambda d: parse_qstat(d, memo=CARRIED), data) == careful
    return quick


# -- recorded and hand-made fixtures ------------------------------------------------------------


@pytest.mark.parametrize("path", QSTAT_FIXTURES, ids=lambda p: p.name)
def test_fixtures_read_alike(path: Path) -> None:
    data = path.read_bytes()
    quick = check(data)
    check(data.decode("utf-8", errors="replace"))
    if path.name in READ_QUICKLY:
        assert quick is not None, "the quick reader declined a document of the regular shape"


def test_every_regular_fixture_is_listed() -> None:
    assert {p.name for p in QSTAT_FIXTURES} >= READ_QUICKLY


def benchmark() -> Any:
    """benchmarks/bench_pass.py as a module (its queue generators)."""
    if "bench_pass" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_pass", BENCHMARK)
        assert spec is not None and spec.loader is not None
        sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # its dataclasses look their module up
        spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules["bench_pass"]


def test_the_benchmark_document_is_read_quickly() -> None:
    bench = benchmark()
    data = bench.make_qstat(300, 20, random.Random(7))
    quick = check(data)
    assert quick is not None
    assert len(quick.jobs) == 300 + sum(4 for h in range(1, 21) if h % 10)


# -- generated documents ------------------------------------------------------------------------

# Digits Python's int() and float() read, which SGE never writes: both readers refuse them.
ZERO, ONE, FOUR, FULLWIDTH_ZERO = "\u0660", "\u0661", "\u0664", "\uff10"


def sge_escape(text: str) -> str:
    """What SGE's escape_string() writes (note "<" -> "%lt;")."""
    return escape(text, {'"': "&quot;", "'": "&apos;"}).replace("&lt;", "%lt;")


@st.composite
def mostly(draw: st.DrawFn, usual: list[str], odd: list[str]) -> str:
    """One of the usual values, or (in a document that may be odd) sometimes an odd one."""
    return draw(st.sampled_from(usual * 3 + odd) if ODD.get() else st.sampled_from(usual))


# Whether the document being drawn may hold odd values: half of them do, so the other half is of
# the regular shape throughout and reaches the quick reader.
ODD: contextvars.ContextVar[bool] = contextvars.ContextVar("ODD", default=True)


NAMES = st.one_of(
    st.sampled_from(
        ["job", "a b", "x&amp;y", "&lt;tag&gt;", "caf&#233;", "&#x41;BC", "%lt;b", "&#37;lt;b", "données-日本語"]
    ),
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufffe\uffff"),
        max_size=12,
    ).map(sge_escape),
)
STAMPS = mostly(
    ["2026-11-22T05:00:00", "2026-11-22T05:59:59", "2026-03-29T02:30:00", "2026-10-25T02:30:00"],
    [
        "2026-11-24T10:00:01.123456",
        "2026-11-22T05:00:60",
        "2026-11-22T05:61:00",
        "2026-13-01T00:00:00",
        "yesterday",
        "202\u0663-11-22T05:00:00",  # digits int() reads but SGE never writes: refused by both readers
        "2026-11-22T05:00:0\uff13",
    ],
)
PRIORITIES = mostly(
    ["0.50500", "0.00000"], ["0", "", "high", "1e3", f"0.5{ZERO}", "nan", "1_0", "5.", ".5", "0" * 19 + ".5", "0.5 "]
)
SPACE = mostly(["\n      ", "\n        "], [" ", "", "\n\t", "\r\n  "])


@st.composite
def entries(draw: st.DrawFn, running: bool) -> str:
    """One <job_list>: mostly the regular shape, sometimes odd."""
    ws = draw(SPACE)
    job_id = draw(st.integers(1, 10**6).map(str) | mostly(["42"], ["0", "007", "x", "4\u0662", "\uff14"]))
    usual = ["r", "t", "Rr", "dr"] if running else ["qw", "hqw", "Eqw", "Rq"]
    state = draw(mostly(usual, ["qX", "", "rr"]))
    time_tag = "JAT_start_time" if running else draw(st.sampled_from(["JB_submission_time", "JAT_submission_time"]))
    parts = [
        f"<JB_job_number>{job_id}</JB_job_number>",
        f"<JAT_prio>{draw(PRIORITIES)}</JAT_prio>",
        f"<JB_name>{draw(NAMES)}</JB_name>",
        f"<JB_owner>{draw(NAMES)}</JB_owner>",
        f"<state>{state}</state>",
        f"<{time_tag}>{draw(STAMPS)}</{time_tag}>",
    ]
    if draw(st.integers(0, 4)) == 0:
        parts.append(f"<queue_name>{draw(st.sampled_from(['all.q@node001', '', ' ', ' big.q@n2 ']))}</queue_name>")
    parts.append(f"<slots>{draw(mostly(['1', '4', '16'], ['-1', 'four', FOUR, '1_6']))}</slots>")
    if draw(st.booleans()):
        tasks = draw(mostly(["1-20:1", "4-10:3", "5,7,9", "3"], ["1-x", " 2-4:1 ", "", "1-\u0662\u0660:1"]))
        parts.append(f"<tasks>{tasks}</tasks>")
    parts.append(f"<full_job_name>{draw(NAMES)}</full_job_name>")
    for _ in range(draw(st.integers(0, 3))):
        name = draw(mostly(["h_rt", "h_vmem", "bigmem", "arch"], [""]))
        value = draw(mostly(["3600", "1:30:00", "INFINITY", "2G", " 64G "], ["soon", "\u0663600", "1:\uff130:00"]))
        tag = draw(st.sampled_from(["hard_request", "hard_request", "master_hard_request", "slave_hard_request"]))
        attributes = draw(
            mostly(
                [f'name="{name}" resource_contribution="0.000000"', f'resource_contribution="0.000000" name="{name}"'],
                [f"name='{name}'", f'name="{name}" name="{name}"', f'name = "{name}"', f'name="{name}"'],
            )
        )
        parts.append(f"<{tag} {attributes}>{value}</{tag}>")
    if draw(st.booleans()):
        pe = draw(mostly(['name="smp">4', 'name="mpi">16-32', 'name="mpi"> 8 '], ['name="">4', f'name="mpi">{ONE}6']))
        parts.append(f"<requested_pe {pe}</requested_pe>")
        if draw(st.booleans()):
            parts.append(f"<granted_pe {pe}</granted_pe>")
    for _ in range(draw(st.integers(0, 2))):
        parts.append(
            draw(st.sampled_from(["<hard_req_queue>all.q@*</hard_req_queue>", "<hard_req_queue> </hard_req_queue>"]))
        )
    extra = draw(
        mostly(
            [
                "<binding>NONE</binding>",
                "<master_queue>all.q@node001</master_queue>",
                '<soft_request name="arch">lx-amd64</soft_request>',
                "<predecessor_jobs/>",
                "",
            ],
            [
                "<JB_name>again</JB_name>",
                "<!-- note -->",
                "<![CDATA[x]]>",
                "<binding><inner/></binding>",
                '<binding xmlns="urn:x">NONE</binding>',
                '<job_list state="pending"/>',
            ],
        )
    )
    parts.append(extra)
    if ODD.get() and draw(st.integers(0, 9)) == 0:  # fields out of their usual order
        draw(st.randoms()).shuffle(parts)
    state_attribute = "running" if running else draw(mostly(["pending"], ["zombie", "running"]))
    return f'<job_list state="{state_attribute}">' + ws + ws.join(p for p in parts if p) + ws + "</job_list>"


@st.composite
def documents(draw: st.DrawFn) -> str:
    token = ODD.set(draw(st.booleans()))
    try:
        return draw(document())
    finally:
        ODD.reset(token)


@st.composite
def document(draw: st.DrawFn) -> str:
    queues = []
    for i in range(draw(st.integers(0, 3))):
        fields = [
            f"<name>all.q@node{i:03d}</name>",
            "<qtype>BIP</qtype>",
            f"<slots_used>{draw(mostly(['0', '1'], ['x', '400', ONE]))}</slots_used>",
            f"<slots_resv>{draw(mostly(['0'], [FULLWIDTH_ZERO]))}</slots_resv>",
            f"<slots_total>{draw(st.sampled_from(['4', '2']))}</slots_total>",
        ]
        fields += draw(
            st.lists(
                mostly(
                    ["<load_avg>0.5</load_avg>", "<arch>lx-amd64</arch>", "<state>d</state>", "<state>au</state>"],
                    ["<state>q</state>", '<resource name="arch" type="hl">lx-amd64</resource>', "<state/>"],
                ),
                max_size=3,
            )
        )
        jobs = draw(st.lists(entries(running=True), max_size=3))
        if ODD.get() and draw(st.integers(0, 9)) == 0:
            jobs.append(draw(entries(running=False)))
        queues.append("<Queue-List>\n" + "\n".join(fields + jobs) + "\n</Queue-List>")
    loose = draw(st.lists(entries(running=True), max_size=2)) if draw(st.integers(0, 4)) == 0 else []
    pending = draw(st.lists(entries(running=False), max_size=5))
    declaration = draw(
        mostly(
            ["<?xml version='1.0'?>\n", '<?xml version="1.0" encoding="UTF-8"?>\n', ""],
            ["<?xml version='1.0' encoding='ISO-8859-1'?>\n", "<?xml version='1.0'?>\n<!-- c -->\n"],
        )
    )
    return (
        declaration
        + '<job_info  xmlns:xsd="http://example.invalid/qstat.xsd">\n  <queue_info>\n'
        + "\n".join(queues + loose)
        + "\n  </queue_info>\n  <job_info>\n"
        + "\n".join(pending)
        + "\n  </job_info>\n</job_info>\n"
    )


@pytest.fixture(params=["UTC", "Europe/Berlin", "America/New_York"])
def zone(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    import time

    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield request.param
    monkeypatch.undo()
    time.tzset()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(documents())
def test_generated_documents_read_alike(zone: str, doc: str) -> None:
    check(doc.encode())
    check(doc)


def test_plain_documents_are_read_quickly() -> None:
    """Documents of the regular shape, with references in names, reach the quick reader."""
    answered = 0
    for seed in range(200):
        rng = random.Random(seed)
        entries_xml = "".join(
            f'<job_list state="pending">\n<JB_job_number>{i}</JB_job_number>\n<JAT_prio>0.5</JAT_prio>\n'
            f"<JB_name>j{i}&amp;x</JB_name>\n<JB_owner>u</JB_owner>\n<state>qw</state>\n"
            f"<JB_submission_time>2026-11-22T0{rng.randint(0, 9)}:00:00</JB_submission_time>\n"
            f"<slots>{rng.randint(1, 8)}</slots>\n</job_list>\n"
            for i in range(1, rng.randint(2, 6))
        )
        doc = f"<?xml version='1.0'?>\n<job_info>\n<job_info>\n{entries_xml}</job_info>\n</job_info>\n"
        answered += check(doc.encode()) is not None
    assert answered == 200


# -- the requests of an entry, line by line -----------------------------------------------------

REST_ELEMENTS = st.sampled_from(
    [
        '<hard_request name="h_rt" resource_contribution="0.000000">3600</hard_request>',
        '<hard_request name="h_vmem" resource_contribution="0.000000">2G</hard_request>',
        '<hard_request name="h_vmem">16G</hard_request>',
        '<hard_request name="h_vmem" resource_contribution="0.000000">8G</hard_request>',  # a name again
        '<hard_request name="s_rt" resource_contribution="0.000000"> 90 </hard_request>',  # stripped
        '<hard_request name="s_rt" resource_contribution="0.000000"></hard_request>',
        '<hard_request name="s_rt" resource_contribution="0.000000">9&#48;</hard_request>',
        '<hard_request name="s&#95;rt" resource_contribution="0.000000">90</hard_request>',
        '<hard_request resource_contribution="0.000000" name="h_rt">60</hard_request>',
        '<hard_request name="h_rt" resource_contribution="0.000000">60</hard_request\n>',
        '<hard_request\n        name="arch">lx-amd64</hard_request>',  # white space in the tag over two lines
        '<hard_request name="h_rt">1:00\n:00</hard_request>',  # a value over two lines
        '<hard_request name="h_rt">soon</hard_request>',
        '<hard_request name="x&amp;y">a&lt;b</hard_request>',
        "<hard_request>2G</hard_request>",
        '<master_hard_request name="h_vmem">4G</master_hard_request>',
        '<slave_hard_request name="h_vmem">1G</slave_hard_request>',
        "<hard_req_queue>all.q@*</hard_req_queue>",
        "<hard_req_queue> </hard_req_queue>",
        '<requested_pe name="smp">4</requested_pe>',
        '<requested_pe name="mpi">8-\n16</requested_pe>',
        '<requested_pe name="mpi"></requested_pe>',
        "<binding>NONE</binding>",
        "<binding>NONE</binding\n>",
        "<predecessor_jobs/>",
        "<predecessor_jobs\n/>",
        '<soft_request name="arch">lx-amd64</soft_request>',
        "<JB_name>again</JB_name>",
        "<binding><inner/></binding>",
        '<hard_request name="a" name="b">1</hard_request>',
    ]
)
REST_SPACES = st.sampled_from(["\n      ", "\n", " ", "", "\n\n  ", "\t\n ", "\n    "])


@st.composite
def rests(draw: st.DrawFn) -> str:
    """What may follow <full_job_name> in an entry: elements one a line as qstat writes them,
    several on a line, none, and elements over two lines."""
    elements = draw(st.lists(REST_ELEMENTS, max_size=6))
    return "".join(e + draw(REST_SPACES) for e in elements) + draw(st.sampled_from(["", "    ", "\n  "]))


def rest_entry(rest: str) -> str:
    return (
        "<?xml version='1.0'?>\n<job_info xmlns:xsd=\"http://example.invalid/qstat.xsd\">\n  <queue_info>\n"
        '  </queue_info>\n  <job_info>\n    <job_list state="pending">\n'
        "      <JB_job_number>7</JB_job_number>\n      <JAT_prio>0.50000</JAT_prio>\n"
        "      <JB_name>j</JB_name>\n      <JB_owner>u</JB_owner>\n      <state>qw</state>\n"
        "      <JB_submission_time>2026-11-22T05:00:00</JB_submission_time>\n      <slots>1</slots>\n"
        f"      <full_job_name>j</full_job_name>\n      {rest}</job_list>\n  </job_info>\n</job_info>\n"
    )


@settings(max_examples=300, deadline=None)
@given(rests(), st.lists(rests(), max_size=3), st.booleans())
def test_requests_read_line_by_line_are_those_read_element_by_element(rest: str, before: list[str], amp: bool) -> None:
    """An entry's requests read line by line (each line's elements once a document, some lines
    known from the rests read before) are what reading them element by element gives, or the
    same refusal; and a document with them reads as the careful reader reads it."""
    lines = _QuickReader("&amp;" if amp else "")
    for other in before:
        outcome(lines.rest, other)
    by_element = _QuickReader("&amp;" if amp else "")
    assert outcome(lines.rest, rest) == outcome(by_element.read_rest, rest)
    check(rest_entry(rest).encode())


def tasks_entry(tasks: str) -> str:
    """A document of one waiting array job whose ``<tasks>`` holds ``tasks``."""
    return rest_entry("").replace("<slots>1</slots>\n", f"<slots>1</slots>\n      <tasks>{tasks}</tasks>\n")


# Numbers of a task range: around the bounds count_tasks checks (a first id of 1, the last id
# 2**31), with leading zeros, and longer than the quick reader's ten digits.
TASK_NUMBERS = st.one_of(
    st.integers(0, 12).map(str),
    st.integers(2**31 - 2, 2**31 + 1).map(str),
    st.integers(0, 10**12).map(str),
    st.sampled_from(["00", "007", "0000000001", "00000000001", "02147483648"]),
)


@settings(max_examples=300, deadline=None)
@given(TASK_NUMBERS, TASK_NUMBERS, TASK_NUMBERS)
def test_a_range_of_tasks_is_counted_as_count_tasks_counts_it(first: str, last: str, step: str) -> None:
    """A waiting array job's ``first-last:step`` (counted by arithmetic by the quick reader) reads
    as the careful reader reads it, or is declined where the careful reader refuses it."""
    data = tasks_entry(f"{first}-{last}:{step}").encode()
    quick = check(data)
    try:
        careful = _careful_qstat(data)
    except SgeParseError:
        assert quick is None
    else:
        assert quick is not None and quick.jobs[0].tasks == careful.jobs[0].tasks
        assert quick.jobs[0].task_ids == f"{first}-{last}:{step}"


def test_the_requests_of_the_benchmark_are_read_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The queue of many combinations of requests is read a line at a time, none element by element."""

    def refused(self: _QuickReader, text: str) -> object:
        raise AssertionError(f"read element by element: {text!r}")

    bench = benchmark()
    data = bench.make_qstat(400, 12, random.Random(7), shape=bench.SHAPES["requests"])
    careful = _careful_qstat(data)
    monkeypatch.setattr(_QuickReader, "read_rest", refused)
    assert _quick_qstat(data) == careful


def test_the_requests_of_an_entry_are_kept_once_met_twice() -> None:
    """An entry's text after <full_job_name> (its rest) is kept for the entries after once it is
    met a second time in a document; one met once is not kept: in the queue of many combinations
    of requests, most are met once. The document reads as the careful reader reads it."""
    bench = benchmark()
    text = bench.make_qstat(2000, 12, random.Random(7), shape=bench.SHAPES["requests"]).decode()
    met = Counter(_JOB_ENTRY.match(piece).groups()[-1] for piece in text.split(_ENTRY_MARK)[1:])  # type: ignore[union-attr]
    again = {rest for rest, n in met.items() if n > 1}
    reader = _QuickReader(text)
    assert reader.read() == _careful_qstat(text)
    assert again and set(reader.rests) == again
    assert len(met) > 2 * len(again)


# -- one regular document, spoiled in many ways -------------------------------------------------


def spoiled(data: bytes) -> Iterator[bytes]:
    """The document with one thing the careful reader refuses or reads differently."""
    found = re.search(rb"<JB_name>[^<]*</JB_name>", data)
    assert found is not None
    first = found.group(0)

    def name(value: bytes) -> bytes:
        return data.replace(first, b"<JB_name>" + value + b"</JB_name>", 1)

    yield b"\xef\xbb\xbf" + data
    yield data.replace(b"\n", b"\r\n")
    yield data.replace(b"?>", b" encoding='ISO-8859-1'?>", 1)
    yield name("café".encode("latin-1"))
    yield name(b"pl\x01ain")
    yield name("pl\ufffeain".encode())
    yield name(b"a]]>b")
    yield name(b"&lol;")
    yield name(b"&#0;")
    yield name(b"&#x110000;")
    yield name(b"a & b")
    yield name(b"&amp;&#233;&#x41;%lt;")
    yield name(b"<![CDATA[plain]]>")
    yield name(b"pl<!-- x -->ain")
    yield name(b"pl<?pi?>ain")
    yield data.replace(first, first[:-2] + b">", 1)
    yield data.replace(b'<job_list state="pending">', b'<job_list state="pending" state="pending">', 1)
    yield data.replace(b'<job_list state="pending">', b"<job_list state='pending'>", 1)
    yield data.replace(b'<job_list state="pending">', b'<job_list  state="pending" >', 1)
    yield data.replace(b"</job_list>", b"</job_list >", 1)
    yield data.replace(b"</slots>", b"</slots><slots>2</slots>", 1)
    yield data.replace(b"</JB_submission_time>", b"</JAT_submission_time>", 1)
    yield data.replace(b"</JAT_start_time>", b"</JB_submission_time>", 1)
    yield data.replace(b"<JB_submission_time>", b"<JAT_start_time>", 1)
    yield data.replace(b"<queue_info>", b"<queue_info><foo/>", 1)
    yield data.replace(b"<job_info>\n    <job_list", b"<job_info>\n<!DOCTYPE x>    <job_list", 1)
    yield data.replace(b"<job_info  xmlns", b"<!DOCTYPE job_info>\n<job_info  xmlns", 1)
    yield data.replace(b"<job_info  xmlns", b"<job_info xmlns='urn:default'  xmlns", 1)
    yield data.replace(b"</job_info>\n</job_info>", b"</job_info>\n</job_info>\n<!-- trailing -->")
    yield data.replace(b"</job_info>\n</job_info>", b"</job_info>\n</job_info>\n<job_info/>")
    yield data + b"junk"
    yield data.replace(b"  <job_info>\n", b"  <job_info>\n  <job_info>\n", 1)
    yield name("\ud800".encode("utf-8", "surrogatepass"))
    for cut in range(0, len(data), max(1, len(data) // 150)):
        yield data[:cut]


@pytest.mark.parametrize("name", ["groups-waiting.qstat-r-f.xml", "busy-2-nodes.qstat.xml", "busy-2-nodes.qstat-f.xml"])
def test_spoiled_documents_read_alike(name: str) -> None:
    data = (FIXTURES / "recorded" / name).read_bytes()
    assert _quick_qstat(data) is not None
    for bad in spoiled(data):
        check(bad)
    surrogate = re.sub("<JB_name>[^<]*</JB_name>", "<JB_name>\ud800</JB_name>", data.decode(), count=1)
    assert _quick_qstat(surrogate) is None


def test_spoiled_documents_read_alike_from_a_memo_by_head(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spoiled documents (bytes not UTF-8, a lone surrogate, references, marks out of place,
    cut short, ...) read after reads whose priorities moved, from a memo that keeps its pieces by
    their head (the document read as bytes, each piece decoded when read): what they read as
    without a memo (the careful reader's answer, or its refusal)."""
    monkeypatch.setattr("elb.schedulers.sge.parse.REPRIORITIZED_AFTER", 0)
    data = (FIXTURES / "recorded" / "groups-waiting.qstat-r-f.xml").read_bytes()
    n = iter(range(10**6))
    moved = [
        re.sub(rb"<JAT_prio>[^<]*</JAT_prio>", lambda m: b"<JAT_prio>0.%05d</JAT_prio>" % next(n), data)
        for _ in range(2)
    ]
    surrogate = re.sub("<JB_name>[^<]*</JB_name>", "<JB_name>\ud800</JB_name>", data.decode(), count=1)
    documents: list[bytes | str] = [*spoiled(data), surrogate, moved[0].decode()]
    for bad in documents:
        memo = QstatMemo()
        for read in moved:
            parse_qstat(read, memo=memo)
        assert memo.by_head(_zone())
        assert outcome(lambda d, memo=memo: parse_qstat(d, memo=memo), bad) == outcome(parse_qstat, bad)


def test_hollow_document_goes_to_the_careful_reader() -> None:
    data = (FIXTURES / "handmade" / "qstat_no_queues.xml").read_bytes()
    assert _quick_qstat(data) is None
    assert parse_qstat(data) == QstatResult((), ())


# -- jobs made without Job's __init__ -----------------------------------------------------------


def test_jobs_made_in_place_are_jobs() -> None:
    assert _FAST_JOBS
    assert _JobBuilder.__slots__ == tuple(f.name for f in dataclasses.fields(Job))
    data = (FIXTURES / "handmade" / "qstat_mixed.xml").read_bytes()
    quick = _quick_qstat(data)
    assert quick is not None
    for job in quick.jobs:
        again = Job(*(getattr(job, f.name) for f in dataclasses.fields(Job)))
        assert type(job) is Job
        assert job == again
        assert hash(job) == hash(again)
        assert repr(job) == repr(again)
        with pytest.raises(dataclasses.FrozenInstanceError):
            job.name = "changed"  # type: ignore[misc]


def test_requests_are_shared_read_only_mappings() -> None:
    data = (FIXTURES / "handmade" / "qstat_mixed.xml").read_bytes()
    quick = _quick_qstat(data)
    assert quick is not None
    (job,) = [j for j in quick.jobs if j.job_id == 201]
    assert isinstance(job.hard_requests, MappingProxyType)
    assert dict(job.hard_requests) == {"h_vmem": "2G", "h_rt": "1:30:00"}
    with pytest.raises(TypeError):
        job.hard_requests["h_rt"] = "0"  # type: ignore[index]


def test_errors_are_the_careful_readers() -> None:
    data = (FIXTURES / "recorded" / "groups-waiting.qstat-r-f.xml").read_bytes()
    bad = data.replace(b"<state>qw</state>", b"<state>qX</state>", 1)
    with pytest.raises(SgeParseError, match=r"job_list #1 \(job 1\): unknown job state 'qX'"):
        parse_qstat(bad)


# -- qhost --------------------------------------------------------------------------------------


def check_qhost(data: bytes | str) -> object:
    careful = outcome(_careful_qhost, data)
    quick = _quick_qhost(data)
    if quick is not None:
        assert isinstance(careful, tuple), f"quick reader accepted what the careful one refuses: {careful}"
        assert quick == careful
    assert outcome(parse_qhost, data) == careful
    return quick


@pytest.mark.parametrize("path", QHOST_FIXTURES, ids=lambda p: p.name)
def test_qhost_fixtures_read_alike(path: Path) -> None:
    data = path.read_bytes()
    assert check_qhost(data) is not None
    assert check_qhost(data.decode()) is not None


@pytest.mark.parametrize("name", ["recorded/busy-2-nodes.qhost.xml", "handmade/qhost_mixed.xml"])
def test_spoiled_qhost_documents_read_alike(name: str) -> None:
    data = (FIXTURES / name).read_bytes()
    host = b"<host name='node001'>"
    spoils = [
        data.replace(b"\n", b"\r\n"),
        b"\xef\xbb\xbf" + data,
        data.replace(b"?>", b" encoding='ISO-8859-1'?>", 1),
        data.replace(host, b"<host name='node\x01'>"),
        data.replace(host, "<host name='nod\u00e9'>".encode("latin-1")),
        data.replace(host, b"<host name='n&amp;1'>"),
        data.replace(host, b"<host name='n&#x41;1'>"),
        data.replace(host, b"<host name='&bogus;'>"),
        data.replace(host, b"<host name=''>"),
        data.replace(host, b"<host name=' node001 '>"),
        data.replace(host, b"<host name='global'>"),
        data.replace(host, b'<host name="node001">'),
        data.replace(host, b"<host name='node001' name='x'>"),
        data.replace(host, b"<host name='node001'><!-- c -->"),
        data.replace(host, b"<host name='node001'><![CDATA[x]]>"),
        data.replace(host, b"<host name='node001'><resourcevalue name='x' dominance='hl'>1</resourcevalue>"),
        data.replace(host, b"<host name='node002'>"),
        data.replace(b"<queue name='all.q'>", b"<queue name=''>", 1),
        data.replace(b"<queue name='all.q'>", b"<queue name=' all.q '>", 1),
        data.replace(b"name='slots'>4<", b"name='slots'>four<", 1),
        data.replace(b"name='slots'>4<", b"name=''>4<", 1),
        data.replace(b"name='num_proc'>2<", b"name='num_proc'>2.5<", 1),
        data.replace(b"name='num_proc'>4<", b"name='num_proc'> 4 <", 1),
        data.replace(b"name='state_string'><", b"name='state_string'>au<", 1),
        data.replace(b"name='state_string'><", b"name='state_string'>&amp;<", 1),
        data.replace(b"name='load_avg'>", b"name='load_avg'>&#32;", 1),
        data.replace(b"<qhost xmlns", b"<!DOCTYPE qhost>\n<qhost xmlns", 1),
        data.replace(b"</qhost>", b"</qhost>\n<!-- trailing -->"),
        data.replace(b"</qhost>", b"<foo/></qhost>"),
        data + b"x",
    ]
    for bad in spoils:
        check_qhost(bad)
    for cut in range(0, len(data), max(1, len(data) // 150)):
        check_qhost(data[:cut])


HOST_NAMES = st.sampled_from(["node001", "node002", "NODE001", "Node002", "big&amp;1", "global", "", " n3 ", "n&#x34;"])
VALUES = st.sampled_from(["4", "-", "", " 2 ", "3.90", "15.6G", "x&lt;y", "400", "\u0664", "\uff12", "1_0", "nan"])


@st.composite
def qhost_documents(draw: st.DrawFn) -> str:
    hosts = []
    for name in draw(st.lists(HOST_NAMES, max_size=4)):
        keys = draw(st.lists(st.sampled_from(["arch_string", "num_proc", "load_avg", "mem_total"]), max_size=4))
        values = "".join(f"\n   <hostvalue name='{k}'>{draw(VALUES)}</hostvalue>" for k in keys)
        queues = ""
        for qname in draw(st.lists(st.sampled_from(["all.q", "long.q", ""]), max_size=2)):
            qvalues = "".join(
                f"\n   <queuevalue qname='{qname}' name='{k}'>{draw(VALUES)}</queuevalue>"
                for k in draw(
                    st.lists(st.sampled_from(["slots", "slots_used", "slots_resv", "state_string", "qtype_string"]))
                )
            )
            queues += f"\n <queue name='{qname}'>{qvalues}\n </queue>"
        hosts.append(f" <host name='{name}'>{values}{queues}\n </host>\n")
    return (
        "<?xml version='1.0'?>\n<qhost xmlns:xsd=\"http://example.invalid/qhost.xsd\">\n"
        + "".join(hosts)
        + "</qhost>\n"
    )


@settings(max_examples=300, deadline=None)
@given(qhost_documents())
def test_generated_qhost_documents_read_alike(doc: str) -> None:
    check_qhost(doc.encode())


# -- the memo ---------------------------------------------------------------------------------------


def test_a_memo_reads_again_only_what_changed_and_reuses_the_jobs() -> None:
    data = (FIXTURES / "recorded" / "groups-waiting.qstat-r-f.xml").read_bytes()
    memo = QstatMemo()
    first = parse_qstat(data, memo=memo)
    assert sum(map(len, memo.pieces.values())) == len(first.jobs) > 3
    again = parse_qstat(data, memo=memo)
    assert again == first and all(a is b for a, b in zip(again.jobs, first.jobs, strict=True))
    one = data.replace(b"<JB_name>", b"<JB_name>renamed-", 1)
    changed = parse_qstat(one, memo=memo)
    assert changed == parse_qstat(one)
    assert [a is b for a, b in zip(changed.jobs, first.jobs, strict=True)].count(False) == 1


@pytest.mark.parametrize("shape", ["mixed", "arrays", "requests"])
def test_a_first_read_hands_over_every_piece_where_the_next_read_finds_it(shape: str) -> None:
    """A read that found nothing remembered hands its pieces to the memo in its order, not
    indexed (``QstatMemo.keep_unindexed``); indexed at the next read, they are what the reader's
    own loop keeps: each piece by where the reader stood, so the same document read again finds
    every one (every job the very object of the first read), as a read from an indexed memo
    does."""
    bench = benchmark()
    data = bench.make_qstat(320, 12, random.Random(7), shape=bench.SHAPES[shape])
    memo = QstatMemo()
    first = parse_qstat(data, memo=memo)
    pieces = {at: dict(kept) for at, kept in memo.pieces.items()}  # indexed now (the next read takes them)
    assert {place for place, _ in pieces} >= {"Queue-List", "job_info"} and len(pieces) > 10
    again = parse_qstat(data, memo=memo)  # from the index, kept by the reader's own loop
    assert again == first and all(a is b for a, b in zip(again.jobs, first.jobs, strict=True))
    assert {at: list(kept) for at, kept in memo.pieces.items()} == {at: list(kept) for at, kept in pieces.items()}
    assert all(memo.pieces[at][text] is made for at, kept in pieces.items() for text, made in kept.items())


@settings(max_examples=200, deadline=None)
@given(documents())
def test_white_space_matched_possessively_is_matched_as_it_would_be_with_a_way_back(doc: str) -> None:
    """``_JOB_ENTRY`` matches the white space after each element possessively: on every piece of
    a document it matches what it matches with that white space free to be given back."""
    possessive = r"[ \t\n]*+"
    greedy = re.compile(_JOB_ENTRY.pattern.replace(possessive, r"[ \t\n]*"))
    assert possessive in _JOB_ENTRY.pattern
    for piece in doc.split(_ENTRY_MARK)[1:]:
        quick, backing = _JOB_ENTRY.match(piece), greedy.match(piece)
        assert (quick and (quick.groups(), quick.end())) == (backing and (backing.groups(), backing.end()))


def test_an_entry_matched_in_the_whole_text_ends_before_the_next_mark() -> None:
    """A first read matches each entry where it stands in the whole document, and takes its
    match's end for its piece's when the next mark follows: an entry without its end tag is not
    matched on into the next entry (up to that one's end tag, before a third entry's mark), and the
    document reads as the careful reader reads it."""
    data = (FIXTURES / "recorded" / "groups-waiting.qstat-r-f.xml").read_text()
    unended = data.replace("<binding>NONE</binding>\n    </job_list>", "<binding>NONE</binding>\n", 1)
    first = unended.index(_ENTRY_MARK) + len(_ENTRY_MARK)
    assert unended.find(_ENTRY_MARK, first) < unended.index("</job_list>", first)
    assert _JOB_ENTRY.match(unended, first) is None
    assert _JOB_ENTRY.match(data, first) is not None
    check(unended)


def test_new_priorities_are_taken_from_the_text() -> None:
    """SGE normalizes priorities over the waiting jobs: every entry's <JAT_prio> may change at once."""
    data = (FIXTURES / "recorded" / "groups-waiting.qstat-r-f.xml").read_bytes()
    memo = QstatMemo()
    parse_qstat(data, memo=memo)
    shifted = re.sub(rb"<JAT_prio>[^<]*</JAT_prio>", b"<JAT_prio>0.12345</JAT_prio>", data)
    again = parse_qstat(shifted, memo=memo)
    assert shown(again) == shown(parse_qstat(shifted)) and {again.priority_of(j) for j in again.jobs} == {0.12345}


def test_a_memo_is_not_used_across_a_change_of_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    data = (FIXTURES / "recorded" / "busy-2-nodes.qstat-f.xml").read_bytes()
    memo = QstatMemo()
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    in_utc = parse_qstat(data, memo=memo)
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        in_new_york = parse_qstat(data, memo=memo)
        assert in_new_york == parse_qstat(data)
        assert in_new_york.jobs[0].started == in_utc.jobs[0].started + 5 * 3600  # type: ignore[operator]
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize("shape", ["mixed", "arrays", "pe", "requests", "held", "users"])
def test_moved_priorities_are_looked_up_without_them(shape: str) -> None:
    """Queues of every shape of the benchmark whose priorities all move from one read to the
    next: with the memo carried, each read is the careful reader's and the plain quick
    reader's, and the jobs read before are reused but for their priority (their requests are
    the very mappings of the read before)."""
    bench = benchmark()
    memo = QstatMemo()
    before: QstatResult | None = None
    for turn in range(4):
        data = bench.make_qstat(
            320, 12, random.Random(7), turn=turn, churn=0.05, reprioritize=True,
            shape=bench.SHAPES[shape],
        )  # fmt: skip
        read = parse_qstat(data, memo=memo)
        assert shown(read) == outcome(_careful_qstat, data) == outcome(_quick_qstat, data)
        assert [type(j) for j in read.jobs] == [Job] * len(read.jobs)
        if before is not None:
            old = {(j.job_id, j.task_ids, j.queue): j for j in before.jobs}
            kept = [
                (j, old[(j.job_id, j.task_ids, j.queue)]) for j in read.jobs if (j.job_id, j.task_ids, j.queue) in old
            ]
            assert len(kept) > len(read.jobs) * 0.9
            assert all(read.priority_of(j) != before.priority_of(o) for j, o in kept)
            # The very jobs of the read before, their new priorities beside them: all but those
            # read before most pieces were not found, and the last entry's.
            assert sum(j is not o for j, o in kept) <= REPRIORITIZED_AFTER + 2
            # All but the pieces read before most were not found, and the entry that was last and
            # is no longer (its piece held the document's end).
            assert sum(j.hard_requests is not o.hard_requests for j, o in kept) <= REPRIORITIZED_AFTER + 2
        before = read


def test_a_job_whose_priority_alone_moved_is_kept_and_shows_its_new_priority() -> None:
    """A job whose entry differs from the read before only in its priority is the very job of
    that read, and the snapshot joined from the read shows the priority its entry shows now,
    as a snapshot of the careful reader's read does (not the job's own, read before)."""
    bench = benchmark()
    memo = QstatMemo()
    before = parse_qstat(bench.make_qstat(320, 12, random.Random(3), turn=1, reprioritize=True), memo=memo)
    data = bench.make_qstat(320, 12, random.Random(3), turn=2, reprioritize=True)
    snap = join_snapshot(parse_qstat(data, memo=memo), (), 0.0)
    fresh = join_snapshot(_careful_qstat(data), (), 0.0)
    assert [snap.priority_of(j) for j in snap.jobs] == [j.priority for j in fresh.jobs]
    kept = {id(j) for j in before.jobs} & {id(j) for j in snap.jobs}
    assert len(kept) > len(snap.jobs) * 0.9
    assert all(snap.priority_of(j) != j.priority for j in snap.jobs if id(j) in kept)


@pytest.mark.parametrize("shape", ["mixed", "arrays", "users"])
def test_a_memo_keeps_its_pieces_without_their_priorities_while_they_move(shape: str) -> None:
    """Reads whose priorities move (the benchmark's shift of them: the turn, or 0 when they do
    not move, so the first read of 0 after others moves them too), then stay, then move again:
    the memo keeps its pieces by their text without their priority after a read where many
    moved, by their text again after one where few did; every read is the careful reader's,
    and the jobs read before are kept."""
    bench = benchmark()
    memo = QstatMemo()
    before: QstatResult | None = None
    for turn, moving, blanked in [
        (0, True, False),
        (1, True, True),
        (2, True, True),
        (3, False, True),
        (4, False, False),
        (5, True, True),
        (6, True, True),
    ]:
        data = bench.make_qstat(
            320, 12, random.Random(11), turn=turn, churn=0.05, reprioritize=moving, shape=bench.SHAPES[shape]
        )
        read = parse_qstat(data, memo=memo)
        assert shown(read) == outcome(_careful_qstat, data)
        assert memo.blanked is blanked
        # Every piece kept for the next read, those read by their text before most were not
        # found too (each job's entry has a head of its own here).
        assert sum(map(len, (memo.heads if blanked else memo.pieces).values())) == len(read.jobs)
        if before is not None:
            kept = {id(j) for j in before.jobs} & {id(j) for j in read.jobs}
            assert len(kept) > len(read.jobs) * 0.8
        before = read


def test_an_entry_read_before_goes_to_one_entry_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry repeated, once with its priority moved and once as it was read before: the job
    read before goes to one of them (the other is read anew), so each shows its own priority."""
    monkeypatch.setattr("elb.schedulers.sge.parse.REPRIORITIZED_AFTER", 0)
    data = (FIXTURES / "recorded" / "groups-waiting.qstat-r-f.xml").read_text()
    memo = QstatMemo()
    parse_qstat(data, memo=memo)
    entry = re.search(r'<job_list state="pending">.*?</job_list>\s*', data, re.DOTALL)
    assert entry is not None
    moved = entry.group().replace("<JAT_prio>0.00000</JAT_prio>", "<JAT_prio>0.75000</JAT_prio>")
    assert moved != entry.group()
    twice = data.replace(entry.group(), moved + entry.group(), 1)
    read = _quick_qstat(twice, memo)
    assert read is not None and shown(read) == outcome(_careful_qstat, twice)
    assert len({id(j) for j in read.jobs}) == len(read.jobs)


def test_moved_priorities_of_entries_with_the_same_head_read_alike() -> None:
    """Entries of one job number and state in one place (an array job's tasks split over
    entries): the memo looks moved priorities up by an entry's text up to its ``<JAT_prio>``,
    which they share; each is still read as the careful reader reads it."""
    bench = benchmark()
    memo = QstatMemo()
    for turn in range(3):
        data = bench.make_qstat(200, 4, random.Random(5), turn=turn, churn=0.05, reprioritize=True)
        # Every even job number made the odd one before it: pairs of entries with one head.
        text = re.sub(
            r"<JB_job_number>(\d+)</JB_job_number>",
            lambda m: f"<JB_job_number>{int(m.group(1)) - (int(m.group(1)) % 2 == 0)}</JB_job_number>",
            data.decode(),
        )
        read = _quick_qstat(text, memo)  # not declined: read with the memo's pieces
        assert read is not None and shown(read) == outcome(_careful_qstat, text) == outcome(_quick_qstat, text)
        assert len({j.job_id for j in read.jobs}) < len(read.jobs)


@pytest.mark.parametrize("between", ["</job_info>\n  <job_info>\n    ", "<!-- a comment -->", "<job_lis"])
def test_a_piece_found_by_its_head_ends_at_the_next_mark(between: str) -> None:
    """From a memo that keeps its pieces by their head, a piece whose tail is a kept piece's but
    is followed by more text than the next entry's mark (a section closed and opened again,
    text the careful reader judges, the mark's start) is read whole: the careful reader's
    answer, and the quick reader's where it may read the text."""
    bench = benchmark()
    memo = QstatMemo()
    for turn in range(2):
        parse_qstat(bench.make_qstat(200, 4, random.Random(5), turn=turn, reprioritize=True), memo=memo)
    assert memo.blanked
    data = bench.make_qstat(200, 4, random.Random(5), turn=2, reprioritize=True).decode()
    entry = data.index('<job_list state="pending">', data.index("<job_info>", data.index("</queue_info>")))
    after = data.index('<job_list state="', entry + 1)
    text = data[:after] + between + data[after:]
    read = _quick_qstat(text, memo)
    careful = outcome(_careful_qstat, text)
    if between.startswith("</job_info>"):  # the quick reader reads it, from the memo
        assert read is not None and shown(read) == careful
        assert len(read.moved_priorities) > len(read.jobs) * 0.9
    else:
        assert read is None and outcome(lambda d: parse_qstat(d, memo=memo), text) == careful


PRIORITY_TEXTS = ["0.50000", "1", "-0.25", "1e3", "", " 0.5 ", "&#48;.5", "0.5&amp;", "x", "0.1.2", "9" * 70]
PRIORITY_TEXTS += ["12.25", "5.", ".5", "0" * 19 + ".5", "0.5" + "0" * 18]


@pytest.mark.parametrize("prio", PRIORITY_TEXTS)
def test_each_kind_of_priority_reads_alike_anew_and_from_the_memo(monkeypatch: pytest.MonkeyPatch, prio: str) -> None:
    """A regular document with every priority set to one text, read anew and after the memo read
    it with others (looked up without them from the first piece not found): the careful reader's
    answer, or its refusal."""
    monkeypatch.setattr("elb.schedulers.sge.parse.REPRIORITIZED_AFTER", 0)
    data = (FIXTURES / "recorded" / "groups-waiting.qstat-r-f.xml").read_bytes()
    memo = QstatMemo()
    parse_qstat(data, memo=memo)
    other = re.sub(rb"<JAT_prio>[^<]*</JAT_prio>", f"<JAT_prio>{prio}</JAT_prio>".encode(), data)
    careful = outcome(_careful_qstat, other)
    assert outcome(parse_qstat, other) == careful
    assert outcome(lambda d: parse_qstat(d, memo=memo), other) == careful


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(documents(), st.lists(st.sampled_from(PRIORITY_TEXTS), min_size=1, max_size=8))
def test_a_document_with_other_priorities_reads_alike_from_the_memo(
    monkeypatch: pytest.MonkeyPatch, doc: str, prios: list[str]
) -> None:
    """Generated documents read again with other priorities (odd ones too), the memo searched
    without them from the first piece not found: the careful reader's answer, or its refusal."""
    monkeypatch.setattr("elb.schedulers.sge.parse.REPRIORITIZED_AFTER", 0)
    memo = QstatMemo()
    outcome(lambda d: parse_qstat(d, memo=memo), doc)
    n = iter(range(10**6))
    other = re.sub(r"<JAT_prio>[^<]*</JAT_prio>", lambda m: f"<JAT_prio>{prios[next(n) % len(prios)]}</JAT_prio>", doc)
    careful = outcome(_careful_qstat, other)
    quick = _quick_qstat(other, memo)
    if quick is not None:
        assert shown(quick) == careful == outcome(_quick_qstat, other)
    if other and not other.isspace():
        assert outcome(lambda d: parse_qstat(d, memo=memo), other) == careful
    # Once more with the priorities moved again: from a memo that keeps its pieces without their
    # priorities, when one moved in the read before.
    again = re.sub(r"<JAT_prio>[^<]*</JAT_prio>", lambda m: f"<JAT_prio>{prios[next(n) % len(prios)]}</JAT_prio>", doc)
    if again and not again.isspace():
        assert outcome(lambda d: parse_qstat(d, memo=memo), again) == outcome(_careful_qstat, again)


@pytest.mark.parametrize("form", ["bytes", "text", "non-ASCII bytes"])
def test_a_read_that_goes_on_by_head_reads_alike_in_every_form(form: str) -> None:
    """Reads whose priorities start moving go on by head in the middle of the document: on an
    ASCII document's own bytes, on the text's rest encoded (a document handed as text, or as
    bytes that are not ASCII); each read is the careful reader's."""
    bench = benchmark()
    memo = QstatMemo()
    # (the benchmark's priorities shift by the turn when they move, else by 0: the reads of turns 1
    # and 5 find most priorities moved after a read kept by text, and go on by head)
    for turn, moving, blanked in [
        (0, True, False),
        (1, True, True),
        (3, False, True),
        (4, False, False),
        (5, True, True),
    ]:
        data = bench.make_qstat(320, 12, random.Random(5), turn=turn, churn=0.05, reprioritize=moving)
        doc: bytes | str = data
        if form == "text":
            doc = data.decode()
        elif form == "non-ASCII bytes":
            doc = data.replace(b"<JB_owner>", "<JB_owner>\u00e9".encode(), 7)
        read = parse_qstat(doc, memo=memo)
        assert shown(read) == outcome(_careful_qstat, doc)
        assert memo.blanked is blanked
