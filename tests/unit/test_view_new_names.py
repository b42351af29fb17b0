"""``elb.core.policy.view.new_names`` keeps the highest number in use while the hosts' and records'
names and the prefix are the same, and its last answer while the count and digits are too: each
answer is ``next_names`` over every name in use, through calls whose names and arguments change
one at a time."""

from __future__ import annotations

from elb.core.model import Host, Node
from elb.core.naming import next_names
from elb.core.policy.view import new_names
from tests.unit.factories import host, node


def _plain(hosts: list[Host], records: list[Node], count: int, prefix: str, digits: int) -> tuple[str, ...]:
    return next_names({h.name for h in hosts} | {r.name for r in records}, count, prefix, digits)


def test_new_names_are_next_names_of_the_names_in_use_call_after_call() -> None:
    hosts = [host(f"node{k:03d}") for k in range(1, 5)]
    records = [node(f"node{k:03d}", 600.0) for k in range(1, 6)]
    more = [*hosts, host("node012")]
    calls: list[tuple[list[Host], list[Node], int, str, int]] = [  # each unlike the one before in one thing
        (hosts, records, 2, "node", 3),
        (list(hosts), list(records), 2, "node", 3),  # the same names, other lists
        (hosts, [*records[:-1], node("node009", 600.0)], 2, "node", 3),  # a record's name changed
        (hosts, records, 2, "node", 3),
        (more, records, 2, "node", 3),  # a host more
        (more, records, 3, "node", 3),  # another count
        (more, records, 1, "node", 3),  # and another (a demand's one name between two scalings')
        (more, records, 3, "node", 3),
        (more, records, 3, "node", 4),  # other digits
        (more, records, 3, "nod", 4),  # another prefix: no name is one of its numbers
        ([host("node015"), *more[1:]], records, 3, "nod", 4),  # a host's name changed in place
        ([host("node015"), *more[1:]], records, 3, "node", 4),
        ([], [], 1, "node", 3),
    ]
    for hs, rs, count, prefix, digits in calls:
        assert new_names(hs, rs, count, prefix, digits) == _plain(hs, rs, count, prefix, digits)


def test_the_last_answer_is_given_again_for_the_same_names() -> None:
    hosts = [host("node001"), host("node002")]
    records = [node("node002", 600.0), node("node003", 600.0)]
    first = new_names(hosts, records, 2, "node", 3)
    assert first == ("node004", "node005")
    assert new_names([host("node001"), host("node002")], list(records), 2, "node", 3) is first
