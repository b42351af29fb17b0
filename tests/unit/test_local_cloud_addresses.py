"""How the local cloud (the test cluster's podman nodes) chooses a new node's address: a name keeps
its address while it is free, an address no name had comes next, then the one given longest ago."""

from __future__ import annotations

from elb.clouds.local import choose_address

FREE = ["10.9.0.2", "10.9.0.3", "10.9.0.4", "10.9.0.5"]


def test_a_name_keeps_the_address_it_had_while_that_is_free() -> None:
    book = {"node001": "10.9.0.4", "node002": "10.9.0.2"}
    assert choose_address("node001", FREE, book) == "10.9.0.4"
    assert choose_address("node001", ["10.9.0.3"], book) == "10.9.0.3"  # taken by a container now


def test_a_new_name_gets_the_first_unbooked_address_after_the_last_given() -> None:
    assert choose_address("node001", FREE, {}) == "10.9.0.2"
    assert choose_address("node003", FREE, {"node001": "10.9.0.2", "node002": "10.9.0.4"}) == "10.9.0.5"
    # past the subnet's end: from its start again, still skipping booked addresses
    assert choose_address("node003", FREE, {"node001": "10.9.0.3", "node002": "10.9.0.5"}) == "10.9.0.2"


def test_when_every_free_address_was_given_the_one_given_longest_ago_comes_back() -> None:
    book = {"node001": "10.9.0.3", "node002": "10.9.0.2", "node004": "10.9.0.5", "node005": "10.9.0.4"}
    assert choose_address("node009", FREE, book) == "10.9.0.3"
    assert choose_address("node009", ["10.9.0.5", "10.9.0.4"], book) == "10.9.0.5"
    assert choose_address("node009", [], book) is None
