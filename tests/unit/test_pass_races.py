"""A pass against operations that end while it reads: what the pass plans on must be one instant's.

The daemon runs node operations in the background (``elb.service.executor``). A pass that read the
journal's records before it asked which nodes have an operation in flight would see a node at an
older step (requested, provisioning) and, the operation having ended in between, no operation
owning it: it would repair a node that had just become ready (provision it again, or abandon it).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from elb.core.config import Config
from elb.core.interfaces import Instance
from elb.core.model import NodeState
from elb.service.actuator import Outcomes
from elb.service.executor import Executor, Operation
from tests.unit.factories import T0, pending, small_config
from tests.unit.fakes import FakeCloud
from tests.unit.test_daemon import parts


class HeldExecutor(Executor):
    """Holds each submitted operation until ``finish``: the test ends them between two reads of
    a pass, as a background operation may."""

    def __init__(self) -> None:
        super().__init__(inline=True)
        self.held: list[tuple[tuple[str, ...], Operation]] = []

    def submit(self, nodes: Iterable[str], what: str, op: Operation) -> bool:
        self.held.append((tuple(nodes), op))
        return True

    def finish(self) -> None:
        held, self.held = self.held, []
        for _names, op in held:
            op(Outcomes())

    def in_flight(self) -> frozenset[str]:
        return frozenset(n for names, _op in self.held for n in names)


class ListingEnds(FakeCloud):
    """A cloud whose listing of the workers is the moment the held operations end."""

    def __init__(self, now: float, executor: HeldExecutor) -> None:
        super().__init__(now)
        self.executor = executor
        self.end_on_listing = False

    def list_workers(self) -> list[Instance]:
        if self.end_on_listing:
            self.end_on_listing = False
            self.executor.finish()
        return super().list_workers()


def test_an_add_that_ends_while_the_pass_reads_is_not_repaired(tmp_path: Path) -> None:
    cfg: Config = small_config(tmp_path, add_nodes_per_iteration=1, shrink="timer")
    r = parts(cfg)
    executor = HeldExecutor()
    cloud = ListingEnds(T0, executor)
    r.bal.executor = executor
    r.bal.cloud = cloud
    r.sge.jobs = [pending(1, 20 * 60, slots=1, tasks=4)]
    r.bal.run_pass()  # plans the launch: node001 requested, its operation held (in flight)
    assert [names for names, _op in executor.held] == [("node001",)]
    node = r.journal.node("node001")
    assert node is not None and node.state is NodeState.REQUESTED

    cloud.end_on_listing = True  # the add ends while the next pass reads (after the journal, before the cloud)
    result = r.bal.run_pass()
    node = r.journal.node("node001")
    assert node is not None and node.state is NodeState.READY
    planned = result.planned
    assert planned is not None
    assert [(x.kind.value, x.node) for x in planned.repairs] == []
    assert r.prov.playbooks.count("add") <= 1, r.prov.playbooks  # provisioned once, not again
    assert executor.held == []
