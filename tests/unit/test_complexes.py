"""The complex table (qconf -sc) and SGE's comparison of a request with a host's value."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elb.schedulers.sge.complexes import (
    Complex,
    ComplexType,
    Consumable,
    Relop,
    Requestable,
    check_value,
    match_expression,
    parse_bool,
    parse_complexes,
    parse_memory,
    parse_number,
    parse_value,
    satisfies,
)
from elb.schedulers.sge.errors import SgeParseError

HANDMADE = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "handmade"
DEFAULT = parse_complexes((HANDMADE / "qconf-sc-default.txt").read_text())
SITE = parse_complexes((HANDMADE / "qconf-sc-site.txt").read_text())


def test_default_table_has_every_default_complex() -> None:
    names = [c.name for c in DEFAULT]
    assert len(DEFAULT) == 52
    assert names[0] == "arch"
    assert names[-1] == "virtual_used"
    assert {"h_vmem", "mem_free", "num_proc", "slots", "qname", "hostname", "m_topology_inuse"} <= set(names)


@pytest.mark.parametrize(
    ("key", "name", "kind", "relop", "requestable", "consumable", "default"),
    [
        ("mf", "mem_free", ComplexType.MEMORY, Relop.LE, Requestable.YES, Consumable.NO, "0"),
        ("h", "hostname", ComplexType.HOST, Relop.EQ, Requestable.YES, Consumable.NO, "NONE"),
        ("q", "qname", ComplexType.RESTRING, Relop.EQ, Requestable.YES, Consumable.NO, "NONE"),
        ("la", "load_avg", ComplexType.DOUBLE, Relop.GE, Requestable.NO, Consumable.NO, "0"),
        ("s", "slots", ComplexType.INT, Relop.LE, Requestable.YES, Consumable.YES, "1"),
        ("h_rt", "h_rt", ComplexType.TIME, Relop.LE, Requestable.YES, Consumable.NO, "0:0:0"),
        ("dwg", "display_win_gui", ComplexType.BOOL, Relop.EQ, Requestable.YES, Consumable.NO, "0"),
        ("p", "num_proc", ComplexType.INT, Relop.EQ, Requestable.YES, Consumable.NO, "0"),
    ],
)
def test_lookup_by_name_or_shortcut(
    key: str,
    name: str,
    kind: ComplexType,
    relop: Relop,
    requestable: Requestable,
    consumable: Consumable,
    default: str,
) -> None:
    c = DEFAULT.get(key)
    assert c is not None
    assert c is DEFAULT[name]
    assert (c.name, c.type, c.relop, c.requestable, c.consumable, c.default) == (
        name,
        kind,
        relop,
        requestable,
        consumable,
        default,
    )


def test_site_variant() -> None:
    assert DEFAULT["h_vmem"].consumable is Consumable.NO
    assert (SITE["h_vmem"].consumable, SITE["h_vmem"].default) == (Consumable.YES, "1G")
    assert (SITE["gpu"].type, SITE["gpu"].consumable) == (ComplexType.INT, Consumable.YES)
    assert "gpu" not in DEFAULT
    assert DEFAULT.get("gpu") is None
    with pytest.raises(KeyError, match="no complex 'gpu'"):
        DEFAULT["gpu"]


@pytest.mark.parametrize(
    ("text", "bytes_"),
    [
        ("512", 512),
        ("1k", 1000),
        ("1K", 1024),
        ("2m", 2_000_000),
        ("2M", 2 * 1024**2),
        ("1.5g", 1_500_000_000),
        ("23.5G", 23.5 * 1024**3),
        ("120G", 120 * 1024**3),
        ("1t", 10**12),
        ("2T", 2 * 1024**4),
        (".5G", 512 * 1024**2),
        ("INFINITY", math.inf),
        ("infinity", math.inf),
    ],
)
def test_memory_suffixes(text: str, bytes_: float) -> None:
    assert parse_memory(text) == bytes_


@pytest.mark.parametrize("text", ["", "G", "1X", "-1G", "1.2.3G", "1 G", "lots"])
def test_bad_memory(text: str) -> None:
    with pytest.raises(ValueError, match="is not a MEMORY value"):
        parse_memory(text)


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("1:00:00", ComplexType.TIME, 3600),
        ("3600", ComplexType.TIME, 3600),
        ("0:0:0", ComplexType.TIME, 0),
        ("::30", ComplexType.TIME, 30),
        ("1:30", ComplexType.TIME, 90),
        ("INFINITY", ComplexType.TIME, math.inf),
        ("4", ComplexType.INT, 4),
        ("1.25", ComplexType.DOUBLE, 1.25),
        ("INFINITY", ComplexType.INT, math.inf),
    ],
)
def test_numbers(text: str, kind: ComplexType, value: float) -> None:
    assert parse_number(text, kind) == value


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        ("1:2:3:4", ComplexType.TIME, "is not a TIME value"),
        ("soon", ComplexType.TIME, "is not a TIME value"),
        ("1.5", ComplexType.INT, "is not an INT value"),
        ("x", ComplexType.DOUBLE, "is not a DOUBLE value"),
    ],
)
def test_bad_numbers(text: str, kind: ComplexType, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_number(text, kind)


@pytest.mark.parametrize(
    ("text", "value"), [("true", True), ("TRUE", True), ("1", True), ("false", False), ("False", False), ("0", False)]
)
def test_bool(text: str, value: bool) -> None:
    assert parse_bool(text) is value


def test_bad_bool() -> None:
    with pytest.raises(ValueError, match="'yes' is not a BOOL value"):
        parse_bool("yes")


def _c(kind: ComplexType, relop: Relop) -> Complex:
    return Complex("x", "x", kind, relop, Requestable.YES, Consumable.NO, "0", 0)


# request relop offered, as SGE compares them
SATISFIES = [
    pytest.param(DEFAULT["mem_free"], "2G", "4G", True, id="mem_free-host-has-more"),
    pytest.param(DEFAULT["mem_free"], "4G", "2G", False, id="mem_free-host-has-less"),
    pytest.param(DEFAULT["mem_free"], "2048M", "2G", True, id="mem_free-equal-in-other-unit"),
    pytest.param(DEFAULT["mem_free"], "2g", "2G", True, id="mem_free-2g-below-2G"),
    pytest.param(DEFAULT["mem_free"], "2G", "2g", False, id="mem_free-2G-above-2g"),
    pytest.param(DEFAULT["mem_used"], "1G", "2G", False, id="mem_used-ge-host-above"),
    pytest.param(DEFAULT["load_avg"], "2", "1.5", True, id="load_avg-host-below"),
    pytest.param(DEFAULT["load_avg"], "2", "3", False, id="load_avg-host-above"),
    pytest.param(DEFAULT["num_proc"], "8", "8", True, id="num_proc-equal"),
    pytest.param(DEFAULT["num_proc"], "8", "16", False, id="num_proc-not-equal"),
    pytest.param(DEFAULT["h_rt"], "1:00:00", "2:00:00", True, id="h_rt-within-limit"),
    pytest.param(DEFAULT["h_rt"], "3:00:00", "7200", False, id="h_rt-over-limit"),
    pytest.param(DEFAULT["h_rt"], "99:00:00", "INFINITY", True, id="h_rt-infinite-limit"),
    pytest.param(DEFAULT["arch"], "lx-*|sol*", "lx-amd64", True, id="arch-alternatives"),
    pytest.param(DEFAULT["arch"], "lx-*", "darwin", False, id="arch-no-match"),
    pytest.param(DEFAULT["arch"], "!lx-*", "darwin", True, id="arch-negated"),
    pytest.param(DEFAULT["arch"], "LX-*", "lx-amd64", False, id="restring-case-sensitive"),
    pytest.param(DEFAULT["hostname"], "NODE00?", "node001", True, id="host-case-insensitive"),
    pytest.param(DEFAULT["hostname"], "node00[2-4]", "node001", False, id="host-bracket"),
    pytest.param(DEFAULT["display_win_gui"], "true", "1", True, id="bool-equal"),
    pytest.param(DEFAULT["display_win_gui"], "true", "false", False, id="bool-not-equal"),
    pytest.param(_c(ComplexType.CSTRING, Relop.EQ), "Fast", "FAST", True, id="cstring-case"),
    pytest.param(_c(ComplexType.STRING, Relop.NE), "a*", "bcd", True, id="string-ne"),
    pytest.param(_c(ComplexType.INT, Relop.GT), "3", "2", True, id="int-gt"),
    pytest.param(_c(ComplexType.INT, Relop.LT), "3", "2", False, id="int-lt"),
    pytest.param(_c(ComplexType.DOUBLE, Relop.NE), "1.5", "1.5", False, id="double-ne"),
]


@pytest.mark.parametrize(("complex_", "wanted", "offered", "met"), SATISFIES)
def test_satisfies(complex_: Complex, wanted: str, offered: str, met: bool) -> None:
    assert satisfies(complex_, wanted, offered) is met


@pytest.mark.parametrize(
    ("expression", "value", "met"),
    [
        ("(a*|b*)&*z", "abz", True),
        ("(a*|b*)&*z", "abc", False),
        ("!(node00[1-3])", "node004", True),
        ("!a*|b*", "abc", False),
        ("a* | b*", "bee", True),
    ],
)
def test_expressions(expression: str, value: str, met: bool) -> None:
    assert match_expression(expression, value) is met


@pytest.mark.parametrize("expression", ["", "a|", "(a", "a)", "&a", "a||b"])
def test_bad_expressions(expression: str) -> None:
    with pytest.raises(ValueError, match="expression"):
        match_expression(expression, "a")


def _table(line: str) -> str:
    return "#name shortcut type relop requestable consumable default urgency\n" + line + "\n"


MALFORMED = [
    pytest.param("", "no complex found", id="empty"),
    pytest.param("# only comments\n#----\n", "no complex found", id="only-comments"),
    pytest.param(_table("gpu gpu INT <= YES YES 0"), "line 2: 7 columns, expected 8", id="columns"),
    pytest.param(_table("gpu gpu FLOAT <= YES YES 0 0"), "line 2 (gpu): type 'FLOAT' is not one of INT", id="type"),
    pytest.param(_table("gpu gpu INT =< YES YES 0 0"), "line 2 (gpu): relop '=<' is not one of ==", id="relop"),
    pytest.param(_table("gpu gpu INT <= MAYBE YES 0 0"), "requestable 'MAYBE' is not one of YES", id="requestable"),
    pytest.param(_table("gpu gpu INT <= YES PERHOST 0 0"), "consumable 'PERHOST' is not one of NO", id="consumable"),
    pytest.param(_table("site s STRING == YES YES NONE 0"), "a STRING complex cannot be consumable", id="str-consum"),
    pytest.param(_table("site s STRING <= YES NO NONE 0"), "relop <= is not allowed for type STRING", id="str-relop"),
    pytest.param(_table("gpu gpu INT EXCL YES YES 0 0"), "relop EXCL is only allowed for type BOOL", id="excl-int"),
    pytest.param(_table("gpu gpu INT <= YES YES 0 high"), "urgency 'high' is not a number", id="urgency"),
    pytest.param(_table("scratch scr MEMORY <= YES YES lots 0"), "default: 'lots' is not a MEMORY value", id="default"),
    pytest.param(
        _table("gpu g INT <= YES YES 0 0\ngrid g INT <= YES YES 0 0"),
        "complex 'grid': 'g' is also the name or shortcut of 'gpu'",
        id="duplicate-shortcut",
    ),
    pytest.param(
        _table("gpu gpu INT <= YES YES 0 0\ngpu gpu INT <= YES YES 0 0"),
        "'gpu' is also the name or shortcut of 'gpu'",
        id="duplicate-name",
    ),
]


@pytest.mark.parametrize(("text", "message"), MALFORMED)
def test_malformed_qconf_sc(text: str, message: str) -> None:
    with pytest.raises(SgeParseError, match=f"^qconf -sc: .*{re.escape(message)}"):
        parse_complexes(text)


def test_exclusive_complex_parses() -> None:
    table = parse_complexes(_table("exclusive excl BOOL EXCL YES YES 0 1000"))
    assert table["excl"].relop is Relop.EXCL
    assert satisfies(table["exclusive"], "true", "true")


@given(
    st.one_of(
        st.text("0123456789", min_size=1, max_size=12),
        st.text("0123456789", min_size=4290, max_size=4310),
        st.text("0123456789\u0661\u0662\uff13\u00b2 .:+-eEkKGINF", max_size=8),
    ),
    st.sampled_from(list(ComplexType)),
)
def test_a_value_is_checked_as_it_is_read(value: str, kind: ComplexType) -> None:
    """``check_value`` (ASCII digits alone taken as they stand where its type reads them so) says
    well-formed just where reading the value as its type (a number, a bool, an expression) does,
    and refuses the rest as that reading does: digits of other scripts, an INT of more digits
    than int() reads or than a float holds, any other text."""
    c = Complex("c", "c", kind, Relop.EQ if not kind.numeric else Relop.LE, Requestable.YES, Consumable.NO, "0", 0.0)

    def read() -> None:
        if kind.textual:
            match_expression(value, "")
        else:
            parse_value(value, kind)

    assert _refusal(lambda: check_value(c, value)) is _refusal(read)


def _refusal(check: Callable[[], object]) -> type[Exception] | None:
    """The kind of error ``check`` raises, None if none."""
    try:
        check()
    except (ValueError, OverflowError) as err:
        return type(err)
    return None
