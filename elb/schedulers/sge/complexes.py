"""The complex table (``qconf -sc``) and how SGE compares a request with a value.

Written for the format of Son of Grid Engine 8.1.9: lines starting with ``#`` are comments (the
header and the trailer), every other line has eight columns::

    name  shortcut  type  relop  requestable  consumable  default  urgency

``type`` is one of INT, DOUBLE, MEMORY, TIME, STRING, CSTRING, RESTRING, HOST, BOOL;
``requestable`` YES, NO or FORCED; ``consumable`` NO, YES (per slot) or JOB (once per job).

A request is compared as ``request relop value`` (complex(5)): ``mem_free`` (``<=``) requested as
2G is met by a host whose mem_free is at least 2G; ``load_avg`` (``>=``) requested as 2 by a host
whose load is at most 2. String values (STRING, CSTRING, RESTRING, HOST) are requested as a
wildcard expression (sge_types(1)): fnmatch patterns (``*``, ``?``, ``[...]``) joined by ``|``
(or) and ``&`` (and), negated by ``!``, grouped by parentheses; CSTRING and HOST compare without
regard to case. Only ``==`` and ``!=`` apply to them. ``EXCL`` (a BOOL consumable such as
``exclusive``) is met like ``==``; that the job then holds the whole host is the caller's to model.

Nothing here does I/O. Malformed ``qconf -sc`` output raises ``SgeParseError`` naming the line;
a value that is not of its type raises ``ValueError`` naming the value and the type.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from types import MappingProxyType
from typing import TypeVar

from elb.schedulers.sge.errors import SgeParseError
from elb.schedulers.sge.parse import parse_sge_time


class ComplexType(enum.StrEnum):
    INT = "INT"
    DOUBLE = "DOUBLE"
    MEMORY = "MEMORY"
    TIME = "TIME"
    STRING = "STRING"
    CSTRING = "CSTRING"
    RESTRING = "RESTRING"
    HOST = "HOST"
    BOOL = "BOOL"

    @property
    def numeric(self) -> bool:
        return self in _NUMERIC

    @property
    def textual(self) -> bool:
        return self in _TEXTUAL


_NUMERIC = frozenset({ComplexType.INT, ComplexType.DOUBLE, ComplexType.MEMORY, ComplexType.TIME})
_TEXTUAL = frozenset({ComplexType.STRING, ComplexType.CSTRING, ComplexType.RESTRING, ComplexType.HOST})


class Relop(enum.StrEnum):
    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EXCL = "EXCL"  # a BOOL consumable: a job requesting it true holds the host alone


class Requestable(enum.StrEnum):
    YES = "YES"
    NO = "NO"
    FORCED = "FORCED"  # a host offering it runs only jobs that request it


class Consumable(enum.StrEnum):
    NO = "NO"
    YES = "YES"  # the request is debited once per slot on each host
    JOB = "JOB"  # the request is debited once per job (on the master task's host)


@dataclass(frozen=True, slots=True)
class Complex:
    """One line of ``qconf -sc``."""

    name: str
    shortcut: str
    type: ComplexType
    relop: Relop
    requestable: Requestable
    consumable: Consumable
    default: str
    urgency: float


Value = float | str | bool

# -- values -------------------------------------------------------------------------------------

# sge_types(1): k and m are powers of 1000, K and M powers of 1024; SoGE 8.1 adds g/G and t/T.
_MEMORY_FACTORS: Mapping[str, float] = MappingProxyType(
    {
        "k": 1e3,
        "K": 1024.0,
        "m": 1e6,
        "M": 1024.0**2,
        "g": 1e9,
        "G": 1024.0**3,
        "t": 1e12,
        "T": 1024.0**4,
    }
)
_NUMBER = re.compile(r"[+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")  # ASCII digits only
_INFINITY = frozenset({"INFINITY", "INF"})


def parse_memory(text: str) -> float:
    """A MEMORY value in bytes: ``23.5G`` -> 25232932864, ``2k`` -> 2000, ``INFINITY`` -> inf."""
    value = text.strip()
    if value.upper() in _INFINITY:
        return math.inf
    factor = 1.0
    if value and value[-1] in _MEMORY_FACTORS:
        factor = _MEMORY_FACTORS[value[-1]]
        value = value[:-1]
    if not _NUMBER.fullmatch(value):
        raise ValueError(f"{text!r} is not a MEMORY value (a number with an optional k K m M g G t T)")
    return float(value) * factor


def parse_number(text: str, kind: ComplexType) -> float:
    """An INT, DOUBLE, MEMORY or TIME value as a float (``INFINITY`` -> inf)."""
    value = text.strip()
    if kind is ComplexType.MEMORY:
        return parse_memory(value)
    if kind is ComplexType.TIME:
        try:
            seconds = parse_sge_time(value)
        except ValueError:
            raise ValueError(f"{text!r} is not a TIME value ([[hh:]mm:]ss or seconds)") from None
        return math.inf if seconds is None else seconds
    if value.upper() in _INFINITY:
        return math.inf
    if kind is ComplexType.INT:
        if not re.fullmatch(r"[+]?[0-9]+", value):
            raise ValueError(f"{text!r} is not an INT value")
        try:
            return float(int(value))
        except (OverflowError, ValueError):  # past a float's range, or int()'s limit on digits
            raise ValueError(f"{text!r} is not an INT value (out of range)") from None
    if kind is ComplexType.DOUBLE:
        if not _NUMBER.fullmatch(value):
            raise ValueError(f"{text!r} is not a DOUBLE value")
        return float(value)
    raise ValueError(f"{kind} is not a numeric type")


def parse_bool(text: str) -> bool:
    """A BOOL value: ``true``/``false``/``1``/``0`` (any case)."""
    value = text.strip().lower()
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise ValueError(f"{text!r} is not a BOOL value (true, false, 1 or 0)")


def check_value(c: Complex, value: str) -> None:
    """ValueError unless ``value`` is a well-formed value of complex ``c``'s type."""
    kind = c.type
    # ASCII digits alone (as most run times are written) are a DOUBLE, MEMORY or TIME value as
    # they stand. Not an INT's: int() refuses more than 4,300 digits.
    digits = value.isdigit() and value.isascii()
    if digits and (kind is ComplexType.TIME or kind is ComplexType.MEMORY or kind is ComplexType.DOUBLE):
        return
    if kind.textual:
        match_expression(value, "")
    else:
        parse_value(value, kind)


def parse_value(text: str, kind: ComplexType) -> Value:
    """A value of the complex type ``kind``: a float, a bool, or the text of a string type."""
    if kind.numeric:
        return parse_number(text, kind)
    if kind is ComplexType.BOOL:
        return parse_bool(text)
    return text.strip()


# -- wildcard expressions -----------------------------------------------------------------------


_EXPR_TOKEN = re.compile(r"\s*(?:([!&|()])|([^!&|()\s]+))")


def match_expression(expression: str, value: str, *, ignore_case: bool = False) -> bool:
    """Whether ``value`` matches an SGE wildcard expression (sge_types(1), "expression").

    ``lx-*|sol*`` matches ``lx-amd64``; ``!(node00[1-3])`` matches ``node004``; ``a*&*z``
    matches ``abcz``. ``!`` binds tightest, then ``&``, then ``|``.
    """
    tokens = _tokens(expression)
    if ignore_case:
        tokens = [t.lower() for t in tokens]
        value = value.lower()
    result, end = _or(tokens, 0, value, expression)
    if end != len(tokens):
        raise ValueError(f"expression {expression!r}: unexpected {tokens[end]!r}")
    return result


def _tokens(expression: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    text = expression.strip()
    while pos < len(text):
        m = _EXPR_TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"expression {expression!r} cannot be read at {text[pos:]!r}")
        tokens.append(m.group(1) or m.group(2))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    if not tokens:
        raise ValueError("empty expression")
    return tokens


def _or(tokens: list[str], i: int, value: str, source: str) -> tuple[bool, int]:
    result, i = _and(tokens, i, value, source)
    while i < len(tokens) and tokens[i] == "|":
        right, i = _and(tokens, i + 1, value, source)
        result = result or right
    return result, i


def _and(tokens: list[str], i: int, value: str, source: str) -> tuple[bool, int]:
    result, i = _factor(tokens, i, value, source)
    while i < len(tokens) and tokens[i] == "&":
        right, i = _factor(tokens, i + 1, value, source)
        result = result and right
    return result, i


def _factor(tokens: list[str], i: int, value: str, source: str) -> tuple[bool, int]:
    if i >= len(tokens):
        raise ValueError(f"expression {source!r} ends where a pattern is expected")
    part = tokens[i]
    if part == "!":
        result, i = _factor(tokens, i + 1, value, source)
        return not result, i
    if part == "(":
        result, i = _or(tokens, i + 1, value, source)
        if i >= len(tokens) or tokens[i] != ")":
            raise ValueError(f"expression {source!r}: '(' without ')'")
        return result, i + 1
    if part in ("&", "|", ")"):
        raise ValueError(f"expression {source!r}: {part!r} where a pattern is expected")
    return fnmatchcase(value, part), i + 1


# -- comparing a request with a value -----------------------------------------------------------


def satisfies(complex_: Complex, request: str, offered: str) -> bool:
    """Whether a host (or queue) offering ``offered`` meets the request, as ``request relop offered``.

    Raises ``ValueError`` when either value is not of the complex's type.
    """
    kind = complex_.type
    relop = complex_.relop
    if kind.textual:
        found = match_expression(request, offered.strip(), ignore_case=kind in (ComplexType.CSTRING, ComplexType.HOST))
        return found if relop is Relop.EQ else not found
    if kind is ComplexType.BOOL:
        wanted, has = parse_bool(request), parse_bool(offered)
        return wanted == has if relop is not Relop.NE else wanted != has
    return compare(relop, parse_number(request, kind), parse_number(offered, kind))


def compare(relop: Relop, request: float, offered: float) -> bool:
    """``request relop offered`` on numbers."""
    if relop is Relop.EQ:
        return request == offered
    if relop is Relop.NE:
        return request != offered
    if relop is Relop.LT:
        return request < offered
    if relop is Relop.EXCL:
        raise ValueError("EXCL applies to BOOL values only")
    if relop is Relop.LE:
        return request <= offered
    if relop is Relop.GT:
        return request > offered
    return request >= offered


# -- the table ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ComplexTable:
    """Every complex the site defines, looked up by name or shortcut."""

    complexes: tuple[Complex, ...]
    _index: Mapping[str, Complex] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        index: dict[str, Complex] = {}
        for c in self.complexes:
            for key in {c.name, c.shortcut}:
                other = index.get(key)
                if other is not None and other is not c:
                    raise ValueError(f"complex {c.name!r}: {key!r} is also the name or shortcut of {other.name!r}")
                index[key] = c
        object.__setattr__(self, "_index", MappingProxyType(index))

    def get(self, name: str) -> Complex | None:
        """The complex called ``name`` or whose shortcut is ``name``; None when the site has none."""
        return self._index.get(name)

    def __getitem__(self, name: str) -> Complex:
        found = self._index.get(name)
        if found is None:
            raise KeyError(f"no complex {name!r}")
        return found

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._index

    def __iter__(self) -> Iterator[Complex]:
        return iter(self.complexes)

    def __len__(self) -> int:
        return len(self.complexes)


_E = TypeVar("_E", bound=enum.StrEnum)
_COLUMNS = ("name", "shortcut", "type", "relop", "requestable", "consumable", "default", "urgency")


def parse_complexes(text: str) -> ComplexTable:
    """Parse ``qconf -sc``. Raises ``SgeParseError`` naming the line and the column at fault."""
    complexes: list[Complex] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        complexes.append(_complex(stripped, f"qconf -sc: line {number}"))
    if not complexes:
        raise SgeParseError("qconf -sc: no complex found (expected lines of name shortcut type relop ...)")
    try:
        return ComplexTable(tuple(complexes))
    except ValueError as err:
        raise SgeParseError(f"qconf -sc: {err}") from None


def _complex(line: str, where: str) -> Complex:
    parts = line.split()
    if len(parts) != len(_COLUMNS):
        raise SgeParseError(f"{where}: {len(parts)} columns, expected {len(_COLUMNS)} ({' '.join(_COLUMNS)}): {line!r}")
    name, shortcut, type_, relop_, requestable_, consumable_, default, urgency_ = parts
    where = f"{where} ({name})"
    kind = _enum(ComplexType, type_, "type", where)
    relop = _enum(Relop, relop_, "relop", where)
    requestable = _enum(Requestable, requestable_, "requestable", where)
    consumable = _enum(Consumable, consumable_, "consumable", where)
    if relop is Relop.EXCL:
        if kind is not ComplexType.BOOL:
            raise SgeParseError(f"{where}: relop EXCL is only allowed for type BOOL")
    elif (kind.textual or kind is ComplexType.BOOL) and relop not in (Relop.EQ, Relop.NE):
        raise SgeParseError(f"{where}: relop {relop} is not allowed for type {kind} (only == and !=)")
    if consumable is not Consumable.NO and not kind.numeric and relop is not Relop.EXCL:
        raise SgeParseError(f"{where}: a {kind} complex cannot be consumable")
    try:
        urgency = float(urgency_)
    except ValueError:
        raise SgeParseError(f"{where}: urgency {urgency_!r} is not a number") from None
    if kind.numeric or kind is ComplexType.BOOL:
        try:
            parse_value(default, kind)
        except ValueError as err:
            raise SgeParseError(f"{where}: default: {err}") from None
    return Complex(name, shortcut, kind, relop, requestable, consumable, default, urgency)


def _enum(cls: type[_E], text: str, column: str, where: str) -> _E:
    try:
        return cls(text)
    except ValueError:
        choices = ", ".join(m.value for m in cls)
        raise SgeParseError(f"{where}: {column} {text!r} is not one of {choices}") from None


__all__: Sequence[str] = (
    "Complex",
    "ComplexTable",
    "ComplexType",
    "Consumable",
    "Relop",
    "Requestable",
    "Value",
    "compare",
    "match_expression",
    "parse_bool",
    "parse_complexes",
    "parse_memory",
    "parse_number",
    "parse_value",
    "satisfies",
)
