"""The site's scheduling configuration that decides which jobs new nodes can serve.

``Site`` is read from three ``qconf`` answers, parsed here (pure):

- ``qconf -sc``: the complexes (``elb.schedulers.sge.complexes.parse_complexes``);
- ``qconf -spl`` then ``qconf -sp NAME`` for each: the parallel environments
  (``elb.schedulers.sge.pe.parse_pe``);
- ``qconf -se global``: the global host's ``complex_values`` (cluster-wide consumables such as
  licences), ``NONE`` when it has none.

``SgeCommands.read_site`` runs the commands; anything unreadable raises ``SgeParseError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from elb.schedulers.sge.complexes import ComplexTable, parse_complexes
from elb.schedulers.sge.errors import SgeParseError
from elb.schedulers.sge.pe import ParallelEnvironment, parse_pe

_NO_VALUES: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Site:
    """The cluster configuration a job is matched against.

    ``complexes``: ``qconf -sc``; ``pes``: every parallel environment by name (``qconf -spl`` and
    ``qconf -sp NAME``); ``global_values``: the complex values of the global host
    (``complex_values`` of ``qconf -se global``), such as license counts.
    """

    complexes: ComplexTable
    pes: Mapping[str, ParallelEnvironment]
    global_values: Mapping[str, str] = field(default_factory=lambda: _NO_VALUES)


def parse_names(text: str, what: str) -> tuple[str, ...]:
    """One name a line (``qconf -spl``); blank lines skipped, a name with spaces refused."""
    names: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        name = line.strip()
        if not name:
            continue
        if len(name.split()) != 1:
            raise SgeParseError(f"{what}: line {number}: {name!r} is not one name")
        names.append(name)
    return tuple(names)


def parse_complex_values(text: str, what: str = "qconf -se global") -> Mapping[str, str]:
    """The ``complex_values`` of an exec host's configuration: ``name=value`` pairs separated by
    commas (``NONE``: none); lines continued with a trailing backslash are joined."""
    joined: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    if pending:
        raise SgeParseError(f"{what}: a line is continued with '\\' but the output ends")
    found: str | None = None
    for line in joined:
        parts = line.split(None, 1)
        if parts and parts[0] == "complex_values":
            found = parts[1] if len(parts) == 2 else ""
    if found is None:
        raise SgeParseError(f"{what}: no complex_values line")
    values: dict[str, str] = {}
    for item in "".join(found.split()).split(","):
        if not item or item == "NONE":
            continue
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise SgeParseError(f"{what}: complex_values entry {item!r} is not name=value")
        values[name] = value
    return MappingProxyType(values)


def build_site(complexes_text: str, pe_texts: Mapping[str, str], global_host_text: str) -> Site:
    """The ``Site`` from ``qconf -sc``, ``qconf -sp NAME`` per PE, and ``qconf -se global``."""
    pes: dict[str, ParallelEnvironment] = {}
    for name, text in pe_texts.items():
        pe = parse_pe(text)
        if pe.name != name:
            raise SgeParseError(f"qconf -sp {name}: describes PE {pe.name!r}")
        pes[name] = pe
    return Site(
        complexes=parse_complexes(complexes_text),
        pes=MappingProxyType(pes),
        global_values=parse_complex_values(global_host_text),
    )


__all__: Sequence[str] = ("Site", "build_site", "parse_complex_values", "parse_names")
