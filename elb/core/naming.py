"""Node names: the next number after the highest in use (gaps are not reused), and the most
nodes elb manages in one cluster."""

from __future__ import annotations

from collections.abc import Iterable

# The most workers of one cluster (policy.max_nodes, a node group's max_nodes and warm pool): a
# pass plans, names and journals each node to add one by one, so this also bounds what one pass
# builds, whatever the queue asks for.
MAX_NODES = 10_000


def node_number(name: str, prefix: str) -> int | None:
    """The number in ``node006`` for prefix ``node``; None if the name is not one of ours (the
    prefix then ASCII digits only). String tests, not a regular expression: the policies ask it of
    every name in use."""
    digits = name[len(prefix) :]
    if name.startswith(prefix) and digits.isascii() and digits.isdigit():
        return int(digits)
    return None


def next_names(in_use: Iterable[str], count: int, prefix: str = "node", digits: int = 3) -> tuple[str, ...]:
    """``count`` new names after the highest number in use: node001, node003, node005 -> node006.

    ``in_use`` should hold every name the cluster knows (the scheduler's hosts, journal, cloud), so that
    a name is never given twice even while a node is still booting or being removed. More than
    ``MAX_NODES`` names at once is a ``ValueError`` (a plan never launches that many; a bug that
    asks for more fails its pass instead of filling the memory).
    """
    return names_after(highest_number(in_use, prefix), count, prefix, digits)


def highest_number(in_use: Iterable[str], prefix: str = "node") -> int:
    """The highest number of the names in use that are ``prefix``'s (``node_number``); 0 with none."""
    return max((n for n in (node_number(x, prefix) for x in in_use) if n is not None), default=0)


def names_after(highest: int, count: int, prefix: str = "node", digits: int = 3) -> tuple[str, ...]:
    """``count`` new names after the number ``highest`` (``next_names``' answer when that is the
    highest in use), bounded as it is."""
    return tuple(f"{prefix}{i:0{digits}d}" for i in range(highest + 1, highest + 1 + _bounded(count)))


def _bounded(count: int) -> int:
    """``count``, or a ``ValueError`` past ``MAX_NODES`` (see ``next_names``)."""
    if count > MAX_NODES:
        raise ValueError(f"{count} new node names asked for: at most {MAX_NODES} (max_nodes' bound)")
    return count
