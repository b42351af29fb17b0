"""Parallel environments as ``qconf -sp NAME`` prints them (8.1.9)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from elb.schedulers.sge.errors import SgeParseError
from elb.schedulers.sge.pe import AllocationRule, Spread, parse_allocation_rule, parse_pe

HANDMADE = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "handmade"
SMP = (HANDMADE / "qconf-sp-smp.txt").read_text()


@pytest.mark.parametrize(
    ("fixture", "name", "slots", "rule", "control_slaves", "first_task"),
    [
        ("qconf-sp-smp.txt", "smp", 9999, AllocationRule(Spread.PE_SLOTS), False, True),
        ("qconf-sp-mpi.txt", "mpi", 9999, AllocationRule(Spread.FILL_UP), False, True),
        ("qconf-sp-mpi-rr.txt", "mpi-rr", 64, AllocationRule(Spread.ROUND_ROBIN), True, False),
    ],
)
def test_recorded_layout(
    fixture: str, name: str, slots: int, rule: AllocationRule, control_slaves: bool, first_task: bool
) -> None:
    pe = parse_pe((HANDMADE / fixture).read_text())
    assert (pe.name, pe.slots, pe.allocation_rule, pe.control_slaves, pe.job_is_first_task) == (
        name,
        slots,
        rule,
        control_slaves,
        first_task,
    )
    assert pe.urgency_slots == "min"
    assert pe.user_lists == ()


def test_continued_line_is_joined() -> None:
    pe = parse_pe((HANDMADE / "qconf-sp-mpi-rr.txt").read_text())
    assert pe.extra["start_proc_args"] == "/usr/share/gridengine/mpi/startmpi.sh -catch_rsh $pe_hostfile"


@pytest.mark.parametrize(
    ("text", "rule", "shown"),
    [
        ("$pe_slots", AllocationRule(Spread.PE_SLOTS), "$pe_slots"),
        ("$fill_up", AllocationRule(Spread.FILL_UP), "$fill_up"),
        ("$round_robin", AllocationRule(Spread.ROUND_ROBIN), "$round_robin"),
        ("4", AllocationRule(Spread.FIXED, 4), "4"),
    ],
)
def test_allocation_rules(text: str, rule: AllocationRule, shown: str) -> None:
    assert parse_allocation_rule(text) == rule
    assert str(rule) == shown


def test_user_lists() -> None:
    pe = parse_pe(SMP.replace("user_lists         NONE", "user_lists         staff,students"))
    assert pe.user_lists == ("staff", "students")


MALFORMED = [
    pytest.param("", "qconf -sp: empty output", id="empty"),
    pytest.param(
        SMP.replace("allocation_rule    $pe_slots\n", ""), "qconf -sp smp: missing allocation_rule", id="rule"
    ),
    pytest.param(SMP.replace("pe_name            smp\n", ""), "qconf -sp ?: missing pe_name", id="name"),
    pytest.param(
        SMP.replace("slots              9999", "slots              many"), "slots 'many' is not a whole", id="s"
    ),
    pytest.param(
        SMP.replace("$pe_slots", "$fillup"),
        "qconf -sp smp: allocation_rule '$fillup' is not $pe_slots, $fill_up, $round_robin or a whole number > 0",
        id="bad-rule",
    ),
    pytest.param(SMP.replace("$pe_slots", "0"), "allocation_rule '0' is not", id="zero-rule"),
    pytest.param(SMP.replace("control_slaves     FALSE", "control_slaves     maybe"), "control_slaves 'maybe'", id="b"),
    pytest.param(SMP + "slots 4\n", "qconf -sp: line 13: slots is given twice", id="twice"),
    pytest.param(SMP + "qsort_args\n", "qconf -sp: line 13: 'qsort_args' is not 'key value'", id="no-value"),
    pytest.param(SMP + "stop_proc_args a \\\n", "line 13: continued with '\\' but the output ends", id="continued"),
]


@pytest.mark.parametrize(("text", "message"), MALFORMED)
def test_malformed_qconf_sp(text: str, message: str) -> None:
    with pytest.raises(SgeParseError, match=re.escape(message)):
        parse_pe(text)
