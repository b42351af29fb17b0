"""A parallel environment (``qconf -sp NAME``, sge_pe(5)) and how it spreads a job's slots.

8.1.9 prints one ``key value`` line per attribute (``pe_name``, ``slots``, ``user_lists``,
``xuser_lists``, ``start_proc_args``, ``stop_proc_args``, ``allocation_rule``,
``control_slaves``, ``job_is_first_task``, ``urgency_slots``, ``accounting_summary``,
``qsort_args``); a long value is continued on the next line after a trailing backslash.
``pe_name``, ``slots`` and ``allocation_rule`` are required; keys elb does not use are kept in
``extra``. Malformed output raises ``SgeParseError`` naming the line.

``allocation_rule`` is ``$pe_slots`` (every slot on one host), ``$fill_up`` (fill each host
before the next), ``$round_robin`` (one slot per host in turn) or a whole number N (exactly N
slots on each host; a job whose slot count is not a multiple of N never starts).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from elb.schedulers.sge.errors import SgeParseError


class Spread(enum.StrEnum):
    PE_SLOTS = "$pe_slots"
    FILL_UP = "$fill_up"
    ROUND_ROBIN = "$round_robin"
    FIXED = "fixed"  # an integer allocation rule: ``per_host`` slots on each host


@dataclass(frozen=True, slots=True)
class AllocationRule:
    spread: Spread
    per_host: int | None = None  # for Spread.FIXED

    def __str__(self) -> str:
        return str(self.per_host) if self.spread is Spread.FIXED else self.spread.value


@dataclass(frozen=True, slots=True)
class ParallelEnvironment:
    name: str
    slots: int  # most slots all jobs in this PE may hold at once, cluster-wide
    allocation_rule: AllocationRule
    control_slaves: bool = False
    job_is_first_task: bool = True
    urgency_slots: str = "min"
    user_lists: tuple[str, ...] = ()
    xuser_lists: tuple[str, ...] = ()
    extra: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)


_REQUIRED = ("pe_name", "slots", "allocation_rule")
_KNOWN = frozenset(
    {
        *_REQUIRED,
        "control_slaves",
        "job_is_first_task",
        "urgency_slots",
        "user_lists",
        "xuser_lists",
    }
)


def parse_allocation_rule(text: str) -> AllocationRule:
    value = text.strip()
    for spread in (Spread.PE_SLOTS, Spread.FILL_UP, Spread.ROUND_ROBIN):
        if value == spread.value:
            return AllocationRule(spread)
    if value.isascii() and value.isdigit() and int(value) > 0:
        return AllocationRule(Spread.FIXED, int(value))
    raise ValueError(f"allocation_rule {text!r} is not $pe_slots, $fill_up, $round_robin or a whole number > 0")


def parse_pe(text: str) -> ParallelEnvironment:
    """Parse ``qconf -sp NAME``."""
    values = _lines(text)
    where = f"qconf -sp {values.get('pe_name', '?')}"
    for key in _REQUIRED:
        if key not in values:
            raise SgeParseError(f"{where}: missing {key}")
    name = values["pe_name"]
    if not name or any(c.isspace() for c in name):
        raise SgeParseError(f"{where}: pe_name {name!r} is not a name")
    slots_text = values["slots"]
    if not (slots_text.isascii() and slots_text.isdigit()):
        raise SgeParseError(f"{where}: slots {slots_text!r} is not a whole number")
    try:
        rule = parse_allocation_rule(values["allocation_rule"])
    except ValueError as err:
        raise SgeParseError(f"{where}: {err}") from None
    return ParallelEnvironment(
        name=name,
        slots=int(slots_text),
        allocation_rule=rule,
        control_slaves=_bool(values.get("control_slaves", "FALSE"), "control_slaves", where),
        job_is_first_task=_bool(values.get("job_is_first_task", "TRUE"), "job_is_first_task", where),
        urgency_slots=values.get("urgency_slots", "min"),
        user_lists=_list(values.get("user_lists", "NONE")),
        xuser_lists=_list(values.get("xuser_lists", "NONE")),
        extra=MappingProxyType({k: v for k, v in values.items() if k not in _KNOWN}),
    )


def _lines(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    logical: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append((start, pending + line))
        pending = ""
    if pending:
        raise SgeParseError(f"qconf -sp: line {start}: continued with '\\' but the output ends")
    for number, line in logical:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split(None, 1)
        if len(parts) != 2:
            raise SgeParseError(f"qconf -sp: line {number}: {line.strip()!r} is not 'key value'")
        key, value = parts[0], " ".join(parts[1].split())
        if key in values:
            raise SgeParseError(f"qconf -sp: line {number}: {key} is given twice")
        values[key] = value
    if not values:
        raise SgeParseError("qconf -sp: empty output, expected pe_name, slots, allocation_rule ...")
    return values


def _bool(text: str, key: str, where: str) -> bool:
    value = text.strip().upper()
    if value in ("TRUE", "1"):
        return True
    if value in ("FALSE", "0"):
        return False
    raise SgeParseError(f"{where}: {key} {text!r} is not TRUE or FALSE")


def _list(text: str) -> tuple[str, ...]:
    items = tuple(p for p in text.replace(",", " ").split() if p)
    return () if items in ((), ("NONE",)) else items


__all__: Sequence[str] = ("AllocationRule", "ParallelEnvironment", "Spread", "parse_allocation_rule", "parse_pe")
