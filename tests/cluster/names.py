"""One counter of node names for the whole test session, so no Grid Engine test gives a name again.

The session's qmaster outlives each test. elb never gives a name twice (its journal keeps gone
nodes), but each test's elb starts from a fresh journal and would name its first node node001
again. A name given again within minutes to a container with another address meets the qmaster's
cache of that name: its registration waits 30-40 s for the cache to let go, or the new execd is
refused and the add play fails (seen once in CI, when two nodes launched together got each other's
former addresses). So a test's fresh journal starts after the highest name the session used.

The counter is the test cluster's own (``LAST_NODE``, the last name ``TestCluster.launch`` gave),
raised past the names in every journal ``start_after_used`` was handed: ``note_used`` reads them
(tests/conftest.py calls it after each test on the test cluster). Slurm's node names are Slurm's
(``node[001-...]`` in its slurm.conf); its tests do not use this.
"""

from __future__ import annotations

import time
from pathlib import Path

from elb.core.model import NodeState
from elb.core.naming import node_number
from elb.service.journal import Journal
from elbdev.testcluster import constants as C
from elbdev.testcluster.cluster import LAST_NODE

PREFIX = "node"
DIGITS = 3
_journals: list[Path] = []  # the session's journals, each read again by note_used


def _counter() -> int:
    try:
        return node_number(LAST_NODE.read_text().strip(), PREFIX) or 0
    except FileNotFoundError:
        return 0


def note_used() -> int:
    """Raise the counter past every name in the journals handed to ``start_after_used`` that
    are still there; the counter's value."""
    highest = _counter()
    for path in _journals:
        if not path.exists():
            continue
        journal = Journal.read_only(path)
        try:
            numbers = [node_number(n.name, PREFIX) for n in journal.nodes(include_gone=True)]
        finally:
            journal.close()
        highest = max([highest, *(n for n in numbers if n is not None)])
    _raise_counter(highest)
    return max(highest, _counter())


def _raise_counter(number: int) -> None:
    if number > _counter():
        C.RUN_DIR.mkdir(parents=True, exist_ok=True)
        LAST_NODE.write_text(f"{PREFIX}{number:0{DIGITS}d}\n")


def start_names_after(journal_path: Path, number: int) -> None:
    """The journal at ``journal_path`` names its first node after ``number`` (a gone node of that
    number); a journal that has nodes already is left as it is."""
    journal = Journal(journal_path)
    try:
        if not journal.nodes(include_gone=True):
            name = f"{PREFIX}{number:0{DIGITS}d}"
            journal.record(name, NodeState.TERMINATED, time.time(), detail="used earlier in this test session")
    finally:
        journal.close()


def start_after_used(journal_path: Path) -> None:
    """The fresh journal at ``journal_path`` starts after the session's highest name, and is read
    again by ``note_used``."""
    highest = note_used()
    if highest:
        start_names_after(journal_path, highest)
    if journal_path not in _journals:
        _journals.append(journal_path)


def reserve(number: int) -> None:
    """Raise the counter to at least ``number``: names up to it are another's (Slurm's
    ``node001``-``node008``, whose tests may run beside Grid Engine's: tests/lanes.py)."""
    note_used()
    _raise_counter(number)
