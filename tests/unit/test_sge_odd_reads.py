"""Reads of SGE that are well-formed XML but cannot be true, refused by both readers alike.

- a host that only qstat lists (a queue instance on a host qhost does not list): one of the two
  reads is stale or partial, and taken as a worker it would count toward max_nodes and move
  elb's numbering; the pair is refused;
- two host names that differ only in case (``NODE001`` and ``node001``): one host to DNS, so
  SGE never lists both; the read is refused rather than folded (which queue values would win?);
- ``slots_used`` greater than ``slots_total`` (400 of 4);
- numbers written with digits other than ASCII ``0``-``9`` (Python's ``int`` and ``float``
  read ``'٣'`` and ``'３'`` as 3), in every numeric field.

Each document goes through both readers (``tests.unit.test_sge_parse_paths.check``): the quick
one declines, the careful one refuses, and ``parse_qstat``/``parse_qhost`` give its error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from elb.schedulers.sge.commands import SgeCommands
from elb.schedulers.sge.complexes import parse_memory, parse_number
from elb.schedulers.sge.errors import SgeError, SgeParseError
from elb.schedulers.sge.parse import (
    _DECIMAL,
    check_agree,
    count_tasks,
    decimal,
    join_snapshot,
    parse_qhost,
    parse_qstat,
    parse_sge_time,
    parse_snapshot,
    parse_start_times,
    parse_timestamp,
)
from tests.unit.test_sge_parse_paths import check, check_qhost

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "recorded"
QSTAT = (RECORDED / "busy-2-nodes.qstat-f.xml").read_bytes().decode()
QHOST = (RECORDED / "busy-2-nodes.qhost.xml").read_bytes().decode()
# Digits Python's int() and float() read, that SGE never writes.
ARABIC_THREE, FULLWIDTH_THREE, BOLD_THREE = "\u0663", "\uff13", "\U0001d7d1"


@pytest.fixture(autouse=True)
def master_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    yield


def refused_qstat(text: str, message: str) -> None:
    assert check(text.encode()) is None  # the quick reader declines ...
    with pytest.raises(SgeParseError, match=message):  # ... and the careful one refuses
        parse_qstat(text.encode())


def refused_qhost(text: str, message: str) -> None:
    assert check_qhost(text.encode()) is None
    with pytest.raises(SgeParseError, match=message):
        parse_qhost(text.encode())


def once(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


# -- a host only qstat lists ----------------------------------------------------------------------


def test_a_host_only_qstat_lists_is_refused_not_taken_for_a_worker() -> None:
    qstat = once(QSTAT, "<name>all.q@node002</name>", "<name>all.q@node099</name>")
    jobs, hosts = parse_qstat(qstat.encode()), parse_qhost(QHOST.encode())
    with pytest.raises(SgeParseError, match=r"qstat lists queue instance all\.q@node099, on node099, which qhost"):
        check_agree(jobs, hosts)
    with pytest.raises(SgeParseError, match="node099"):
        parse_snapshot(qstat.encode(), QHOST.encode(), 0.0)
    assert "node099" not in {h.name for h in join_snapshot(jobs, hosts, 0.0).hosts}


def test_a_host_only_qhost_lists_is_fine() -> None:
    """A host with no queue instance (not in any queue's host list) is listed by qhost alone."""
    node003 = " <host name='node003'>\n   <hostvalue name='num_proc'>2</hostvalue>\n </host>\n"
    qhost = once(QHOST, "</qhost>", node003 + "</qhost>")
    snap = parse_snapshot(QSTAT.encode(), qhost.encode(), 0.0)
    assert [h.name for h in snap.hosts] == ["node001", "node002", "node003"]


# -- host names that differ only in case ----------------------------------------------------------


def test_host_names_differing_only_in_case_are_refused_in_qhost() -> None:
    node001 = QHOST[QHOST.index(" <host name='node001'>") : QHOST.index(" <host name='node002'>")]
    qhost = once(QHOST, "</qhost>", node001.replace("node001", "NODE001") + "</qhost>")
    refused_qhost(qhost, r"qhost: host 'NODE001' is listed twice: as 'node001' too \(one host to DNS")


def test_qstat_naming_a_host_in_another_case_than_qhost_is_refused() -> None:
    qstat = once(QSTAT, "<name>all.q@node002</name>", "<name>all.q@NODE002</name>")
    with pytest.raises(SgeParseError, match="NODE002"):
        parse_snapshot(qstat.encode(), QHOST.encode(), 0.0)


# -- more slots used than there are -----------------------------------------------------------------


def test_more_slots_used_than_total_is_refused_in_qstat() -> None:
    qstat = once(QSTAT, "<slots_used>4</slots_used>", "<slots_used>400</slots_used>")
    refused_qstat(qstat, r"all\.q@node001\): slots_used 400 is more than slots_total 4")


def test_more_slots_used_than_total_is_refused_in_qhost() -> None:
    qhost = once(QHOST, "name='slots_used'>4<", "name='slots_used'>400<")
    refused_qhost(qhost, r"host 'node001' queue 'all\.q': slots_used 400 is more than slots 4")


# -- digits other than ASCII ----------------------------------------------------------------------

QSTAT_NUMBERS = [
    ("<JB_job_number>3</JB_job_number>", f"<JB_job_number>{ARABIC_THREE}</JB_job_number>", "JB_job_number"),
    ("<slots>1</slots>", f"<slots>{FULLWIDTH_THREE}</slots>", "slots"),
    ("<JAT_prio>0.25008</JAT_prio>", f"<JAT_prio>0.2500{BOLD_THREE}</JAT_prio>", "JAT_prio"),
    ("<JAT_start_time>2026-", f"<JAT_start_time>202{ARABIC_THREE}-", "JAT_start_time"),
    ("<slots_used>4</slots_used>", f"<slots_used>{ARABIC_THREE}</slots_used>", "slots_used"),
    ("<slots_total>4</slots_total>", f"<slots_total>{FULLWIDTH_THREE}</slots_total>", "slots_total"),
    ("<slots_resv>0</slots_resv>", f"<slots_resv>{ARABIC_THREE}</slots_resv>", "slots_resv"),
    (">3600</hard_request>", f">{ARABIC_THREE}600</hard_request>", "h_rt"),
    ('<requested_pe name="mpi">3<', f'<requested_pe name="mpi">{ARABIC_THREE}<', "requested_pe"),
]


@pytest.mark.parametrize(("old", "new", "field"), QSTAT_NUMBERS, ids=[f for *_, f in QSTAT_NUMBERS])
def test_qstat_numbers_in_other_digits_are_refused(old: str, new: str, field: str) -> None:
    refused_qstat(once(QSTAT, old, new), field)


def test_task_ranges_in_other_digits_are_refused() -> None:
    pending = (RECORDED / "groups-waiting.qstat-r-f.xml").read_bytes().decode()
    start = pending.index("<tasks>") + len("<tasks>")
    bad = pending[:start] + ARABIC_THREE + pending[start + 1 :]
    refused_qstat(bad, "tasks")


QHOST_NUMBERS = [
    ("name='slots'>4<", f"name='slots'>{ARABIC_THREE}<", "slots"),
    ("name='slots_used'>4<", f"name='slots_used'>{FULLWIDTH_THREE}<", "slots_used"),
    ("name='slots_resv'>0<", f"name='slots_resv'>{ARABIC_THREE}<", "slots_resv"),
    ("name='num_proc'>2<", f"name='num_proc'>{BOLD_THREE}<", "num_proc"),
]


@pytest.mark.parametrize(("old", "new", "field"), QHOST_NUMBERS, ids=[f for *_, f in QHOST_NUMBERS])
def test_qhost_numbers_in_other_digits_are_refused(old: str, new: str, field: str) -> None:
    refused_qhost(once(QHOST, old, new), field)


@pytest.mark.parametrize("digit", [ARABIC_THREE, FULLWIDTH_THREE, BOLD_THREE])
def test_value_parsers_take_ascii_digits_only(digit: str) -> None:
    for bad in (digit, f"1{digit}", f"{digit}-5:1"):
        with pytest.raises(ValueError):
            count_tasks(bad)
    for bad in (digit, f"1:{digit}0:00", f"{digit}.5"):
        with pytest.raises(ValueError):
            parse_sge_time(bad)
    with pytest.raises(ValueError):
        parse_timestamp(f"202{digit}-11-22T05:00:00")
    with pytest.raises(ValueError):
        parse_memory(f"{digit}G")
    from elb.schedulers.sge.complexes import ComplexType

    for kind in (ComplexType.INT, ComplexType.DOUBLE, ComplexType.MEMORY, ComplexType.TIME):
        with pytest.raises(ValueError):
            parse_number(f"1{digit}", kind)


def test_start_times_in_other_digits_are_refused() -> None:
    doc = (
        "<?xml version='1.0'?>\n<detailed_job_info><djob_info><element>"
        f"<JB_job_number>7</JB_job_number><JB_execution_time>1{ARABIC_THREE}00000000</JB_execution_time>"
        "</element></djob_info></detailed_job_info>"
    )
    with pytest.raises(SgeParseError, match="JB_execution_time"):
        parse_start_times(doc.encode())
    with pytest.raises(SgeParseError, match="JB_job_number"):
        parse_start_times(doc.replace("<JB_job_number>7<", f"<JB_job_number>{ARABIC_THREE}<").encode())


def test_qmod_answers_in_other_digits_are_refused() -> None:
    from elb.schedulers.sge.commands import CommandResult

    def runner(argv: object, *, timeout: float, env: object) -> CommandResult:
        del timeout, env
        text = f"Pushed rescheduling of job {ARABIC_THREE} on host node001\n"
        return CommandResult(tuple(argv), 0, text.encode(), "")  # type: ignore[arg-type]

    sge = SgeCommands(runner=runner, environ={"PATH": "/usr/bin:/bin"})
    sge._executable = lambda name: name  # type: ignore[method-assign]
    with pytest.raises(SgeError, match="unexpected answer"):
        sge.reschedule_host("node001")


@settings(max_examples=2000, deadline=None)
@given(
    st.one_of(
        st.text(alphabet=st.sampled_from(list("0123456789+-.eE _nNaAiIfFtTyY \t\n\x0b\x0c")), max_size=12),
        st.text(max_size=8),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.sampled_from(["1e999", "-1e-999", "1.", ".5", "+.5e+3", "\u0663", "\uff13.5", "1_0", "nan", "Infinity"]),
    )
)
@example("0\xa0")  # white space around it that is not ASCII (a no-break space): refused
@example("0\x1c")  # ASCII white space to Python (a file separator): taken, as float takes it
def test_decimal_takes_what_the_regular_expression_of_ascii_numbers_takes(text: str) -> None:
    try:
        ascii_number = text.isascii() and _DECIMAL.fullmatch(text.strip())
        expected: float | None = float(text) if ascii_number else None
    except ValueError:
        expected = None
    try:
        got: float | None = decimal(text)
    except ValueError:
        got = None
    assert got == expected or (got is not None and expected is not None and got != got and expected != expected)
