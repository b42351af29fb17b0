"""A stand-in for Slurm's commands (``squeue``, ``sinfo``, ``scontrol``) that keeps node states
as Slurm's power saving changes them, for the pass's tests with ``scheduler: slurm``.

Why a stand-in: these tests pin what the pass asks of Slurm, in which order, and inject what
Slurm alone decides (a job landing while a node drains, a slurmd that never registers, an
``scontrol`` that times out) on demand. The real ``slurmctld`` runs the same flows in
tests/cluster/test_slurm_e2e.py and tests/faults/test_slurm_faults.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from elb.schedulers.slurm.commands import NO_INSTANCE, SlurmError, SlurmRead
from elb.schedulers.slurm.parse import SlurmJob, SlurmNode

NOW = 1_000_000.0


def snode(name: str, state: str = "idle", *flags: str, alloc: int = 0, partition: str = "cloud") -> SlurmNode:
    return SlurmNode(name, state, frozenset(("cloud", *flags)), 2, alloc, (partition,), "none")


def sjob(job_id: str, state: str = "RUNNING", nodes: tuple[str, ...] = (), reason: str = "None") -> SlurmJob:
    return SlurmJob(job_id, "cloud", state, reason, max(1, len(nodes)), 2, nodes, NOW - 60, None, None, "u", "j")


@dataclass
class FakeSlurm:
    """Slurm's nodes and jobs, changed by the updates elb asks: an address makes the node
    register (up, idle) unless ``silent``; a power down makes it powered down; DRAIN and UNDRAIN
    set and clear the flag. ``fail`` names the updates that time out (``power_down_force``, ...,
    or ``*``: every one); ``on_drain`` injects a job landing as a node is drained."""

    nodes: dict[str, SlurmNode] = field(default_factory=dict)
    jobs: list[SlurmJob] = field(default_factory=list)
    calls: list[tuple[str, ...]] = field(default_factory=list)
    silent: set[str] = field(default_factory=set)  # their slurmd never registers
    fail: set[str] = field(default_factory=set)
    fail_transient: bool = False  # the failures of ``fail`` are transient (after the retries)
    addresses: dict[str, str] = field(default_factory=dict)  # each node's NodeAddr elb set
    address_batches: list[tuple[str, ...]] = field(default_factory=list)  # the names of each address update
    refuse_address: set[str] = field(default_factory=set)  # an address update naming one is refused
    on_drain: Callable[[str], None] | None = None
    resume_timeout_s: float = 600.0
    reads: int = 0

    def add(self, *names: str, state: str = "idle", flags: Sequence[str] = ("powered_down",)) -> None:
        for name in names:
            self.nodes[name] = snode(name, state, *flags)

    def set_flags(self, name: str, state: str, *flags: str) -> None:
        self.nodes[name] = replace(self.nodes[name], state=state, flags=frozenset(("cloud", *flags)))

    def ask(self, *names: str) -> None:
        """Slurm decides to resume these nodes: powering up (its ResumeProgram runs next)."""
        for name in names:
            self.set_flags(name, "idle", "powering_up")

    def read(self, *, mine: object = None) -> SlurmRead:
        del mine  # (each read's lines made anew)
        self.reads += 1
        return SlurmRead.of(self.jobs, tuple(self.nodes.values()))

    def _scontrol(self, *call: str) -> None:
        self.calls.append(call)
        if call[0] in self.fail or "*" in self.fail:
            raise SlurmError(
                "scontrol update nodename=node001: exit status 1: Socket timed out on send/recv operation",
                transient=self.fail_transient,
            )

    def set_addresses(self, pairs: Sequence[tuple[str, str]]) -> None:
        """One ``scontrol update`` for all of ``pairs``, as Slurm takes it: all or nothing; a
        batch naming a node of ``refuse_address`` is refused (an answer, not a time-out)."""
        self.address_batches.append(tuple(name for name, _ in pairs))
        for name, address in pairs:
            self.calls.append(("address", name, address))
        if "address" in self.fail or "*" in self.fail:
            raise SlurmError(
                "scontrol update nodename=node001: exit status 1: Socket timed out on send/recv operation",
                transient=self.fail_transient,
            )
        if refused := [name for name, _ in pairs if name in self.refuse_address]:
            raise SlurmError(
                f"scontrol update nodename={','.join(refused)}: exit status 1: Invalid node name specified"
            )
        for name, address in pairs:
            self.addresses[name] = address
            if name not in self.silent:
                self.set_flags(name, "idle")

    def set_address(self, name: str, address: str) -> None:
        self.set_addresses([(name, address)])

    def drain(self, name: str, reason: str) -> None:
        self._scontrol("drain", name)
        n = self.nodes[name]
        self.nodes[name] = replace(n, flags=n.flags | {"drain"})
        if self.on_drain is not None:
            self.on_drain(name)

    def drain_all(self, names: Sequence[str], reason: str) -> None:
        self._scontrol("drain_all", *names)
        for name in names:
            n = self.nodes[name]
            self.nodes[name] = replace(n, flags=n.flags | {"drain"}, reason=reason)

    def undrain(self, names: Sequence[str]) -> None:
        self._scontrol("undrain", *names)
        for name in names:
            n = self.nodes[name]
            self.nodes[name] = replace(n, flags=n.flags - {"drain"}, reason="none")

    def power_down(self, names: Sequence[str], reason: str, *, force: bool = False, park: bool = False) -> None:
        self._scontrol("power_down_force" if force else "power_down_asap", *names)
        for name in names:
            if park:
                self.addresses[name] = NO_INSTANCE
            # idle_on_node_suspend (elb validate requires it): the suspend clears the drain
            self.nodes[name] = replace(self.nodes[name], state="idle", flags=frozenset({"cloud", "powering_down"}))

    def park(self, names: Sequence[str]) -> None:
        self._scontrol("park", *names)
        self.addresses.update((name, NO_INSTANCE) for name in names)

    def requeue(self, job_id: str) -> None:
        self._scontrol("requeue", job_id)
        self.jobs = [replace(j, state="PENDING", nodelist=()) if j.job_id == job_id else j for j in self.jobs]

    def set_partitions(self, job: int, partitions: Sequence[str]) -> None:
        self._scontrol("partition", str(job), ",".join(partitions))

    def resume_timeout(self) -> float:
        return self.resume_timeout_s
