"""Slurm at hundreds of nodes: a resume request of 250 and of 1,000 names is read whole, journalled
as each node's ask and answered; every ``scontrol update`` names at most ``UPDATE_BATCH`` (100)
nodes, and the nodes a pass gives back go in one operation, not one command a node."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from elb.schedulers.process import CommandResult
from elb.schedulers.slurm.commands import NO_INSTANCE, UPDATE_BATCH, SlurmCommands
from elb.schedulers.slurm.config import SlurmConfig
from elb.schedulers.slurm.parse import expand
from elb.schedulers.slurm.requests import RequestKind, pending, write
from tests.unit.test_slurm_pass import rig


def names(n: int) -> list[str]:
    return [f"node{i:04d}" for i in range(1, n + 1)]


class Recorded(SlurmCommands):
    """SlurmCommands that record each command instead of running it."""

    def __init__(self) -> None:
        super().__init__(SlurmConfig(), environ={})
        self.argvs: list[list[str]] = []

    def run(self, argv: Sequence[str], *, change: bool = False, retry: bool = True) -> CommandResult:
        self.argvs.append(list(argv))
        return CommandResult(tuple(argv), 0, b"", "")


def named(argv: Sequence[str]) -> list[str]:
    (field,) = [a for a in argv if a.startswith("nodename=")]
    return list(expand(field.split("=", 1)[1]))


@pytest.mark.parametrize("n", [250, 1000])
def test_an_update_of_hundreds_of_names_is_one_scontrol_a_hundred(n: int) -> None:
    cmd = Recorded()
    cmd.power_down(names(n), "elb: max_nodes reached", force=True, park=True)
    assert len(cmd.argvs) == -(-n // UPDATE_BATCH)
    batches = [named(a) for a in cmd.argvs]
    assert all(len(b) <= UPDATE_BATCH for b in batches)
    assert [name for b in batches for name in b] == names(n)  # each once, in order
    assert all("state=POWER_DOWN_FORCE" in a for a in cmd.argvs)
    # slurmctld refuses a nodeaddr list whose length is not the nodename list's
    for argv, batch in zip(cmd.argvs, batches, strict=True):
        (addresses,) = [a.split("=", 1)[1].split(",") for a in argv if a.startswith("nodeaddr=")]
        assert addresses == [NO_INSTANCE] * len(batch)


def test_a_give_back_of_1000_nodes_parks_them_all_before_it_powers_any_down() -> None:
    """Powering down one node of a job requeues the job, and slurmctld sends the kill to every
    node of the job at once: each given-back node has its parked address before the first power
    down, the hundred-name batches after the first included."""
    from elb.schedulers.slurm.driver import Slurm

    cmd = Recorded()
    driver = Slurm.__new__(Slurm)
    driver.slurm = cmd
    driver.release(names(1000), "max_nodes reached")
    parks, downs = cmd.argvs[:10], cmd.argvs[10:]
    assert len(downs) == 10
    assert [name for a in parks for name in named(a)] == names(1000)
    assert [name for a in downs for name in named(a)] == names(1000)
    for argv in parks:
        (addresses,) = [a.split("=", 1)[1].split(",") for a in argv if a.startswith("nodeaddr=")]
        assert addresses == [NO_INSTANCE] * len(named(argv)) and not any(a.startswith("state=") for a in argv)
    for argv in downs:
        assert "state=POWER_DOWN_FORCE" in argv and "reason=elb: max_nodes reached" in argv


@pytest.mark.parametrize("n", [250, 1000])
def test_a_resume_of_hundreds_of_names_is_read_whole_from_one_file(tmp_path: Path, n: int) -> None:
    write(tmp_path, RequestKind.RESUME, f"node[0001-{n:04d}]", 1_000_000.0)
    taken = pending(tmp_path)
    (request,) = taken.requests
    assert request.nodes == tuple(names(n)) and taken.bad == ()


def test_a_resume_of_250_nodes_is_launched_provisioned_and_answered_in_one_pass_each(tmp_path: Path) -> None:
    r = rig(tmp_path, policy={"max_nodes": 250})
    wanted = names(250)
    r.slurm.add(*wanted)
    r.slurm.ask(*wanted)
    r.ask(RequestKind.RESUME, "node[0001-0250]")
    r.run()
    assert sorted(r.cloud.launched) == wanted
    assert r.books.runs == [("slurm_add_node.yml", tuple(wanted))]  # one play for the launch round
    assert {r.state(n) for n in wanted} == {r.state("node0001")} and r.state("node0001") is not None
    r.run(5)
    assert r.journal.asks() == [] and len(r.journal.answered_asks(limit=2000)) == 250


def test_a_resume_of_1000_nodes_over_max_nodes_is_given_back_in_one_operation(tmp_path: Path) -> None:
    r = rig(tmp_path, policy={"max_nodes": 4})
    wanted = names(1000)
    r.slurm.add(*wanted)
    r.slurm.ask(*wanted)
    r.ask(RequestKind.RESUME, "node[0001-1000]")
    r.run()
    assert len(r.cloud.launched) == 4
    given_back = r.scontrol("power_down_force")
    assert len(given_back) == 1  # one release for the pass (the commands split it by hundreds)
    assert sorted(given_back[0][1:]) == wanted[4:]
    r.run(5)
    assert r.journal.asks() == [] and len(r.journal.answered_asks(limit=2000)) == 1000
