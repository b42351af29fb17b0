"""Carry out a plan: launch -> provision -> ready, and drain -> deregister -> terminate; for a
warm pool, drain -> stop, start -> ready, and a pooled node's deregister -> terminate.

Every step is written to the journal before it starts. A node operation, once begun, is
finished before elb stops (the caller checks for shutdown only between operations).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from elb.demand import Site
from elb.interfaces import Cloud, CloudError, HostResult, Instance, NodeSpec, Outcome, Provisioner
from elb.journal import Journal
from elb.model import Job, Node, NodeState, Snapshot
from elb.planner import Cleanup, Drain, cleanup_verdict, drain_verdict
from elb.reconcile import Repair, RepairKind
from elb.sge.commands import Rescheduled
from elb.timeline import Step

log = logging.getLogger("elb.actuator")

# The tag EC2 puts on an instance launched from a launch template: the version it was launched with.
TEMPLATE_VERSION_TAG = "aws:ec2launchtemplate:version"


class SgeClient(Protocol):
    """What the daemon needs of SGE (implemented by ``elb.sge``)."""

    def read_snapshot(self) -> Snapshot: ...

    def disable_host(self, host: str) -> None: ...

    def enable_host(self, host: str) -> None: ...

    def reschedule_host(self, host: str) -> Rescheduled: ...

    def set_hard_requests(self, job: int, requests: Mapping[str, str]) -> None: ...

    def jobs_on(self, host: str) -> Sequence[Job]: ...

    def configured_exec_hosts(self) -> frozenset[str]: ...

    def read_site(self) -> Site: ...

    def start_times(self, job_ids: Sequence[int]) -> dict[int, float | None]: ...


@dataclass
class Outcomes:
    """What one pass's actions achieved, for logs and stats."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # removals refused: a job landed while draining
    failed: dict[str, str] = field(default_factory=dict)
    repaired: list[str] = field(default_factory=list)  # "node: what was repaired"
    postponed: list[str] = field(default_factory=list)  # not started: elb was stopping
    stopped: list[str] = field(default_factory=list)  # stopped into the warm pool
    restarted: list[str] = field(default_factory=list)  # started again from the warm pool, ready

    def absorb(self, other: Outcomes) -> None:
        """Add what ``other`` achieved to this."""
        self.added += other.added
        self.removed += other.removed
        self.kept += other.kept
        self.failed.update(other.failed)
        self.repaired += other.repaired
        self.postponed += other.postponed
        self.stopped += other.stopped
        self.restarted += other.restarted


def node_spec(node: Node) -> NodeSpec | None:
    """What the provisioner needs of a journalled node; None without an address."""
    if node.private_ip is None:
        return None
    return NodeSpec(node.name, node.private_ip, node.slots, group=node.group)


def ready_specs(journal: Journal, exclude: Sequence[str] = ()) -> list[NodeSpec]:
    """The ready nodes (but ``exclude``), for the hosts lines a play updates on them."""
    out = []
    for n in journal.nodes():
        spec = node_spec(n)
        if n.state is NodeState.READY and n.name not in exclude and spec is not None:
            out.append(spec)
    return out


def launch_instances(
    journal: Journal, cloud: Cloud, clock: Callable[[], float], names: Sequence[str], out: Outcomes
) -> tuple[Instance, ...]:
    """Launch requested nodes, each journalled ``launching`` first (with the node group its
    record has); the ones the cloud could not start are journalled failed with why. The
    instances that run."""
    groups: dict[str, str] = {}
    for name in names:
        node = journal.record(name, NodeState.LAUNCHING, clock())
        if node.group is not None:
            groups[name] = node.group
    try:
        result = cloud.launch(list(names), groups or None)
    except CloudError as err:
        # The cloud adapter starts nothing it cannot report; reconcile catches the rest by tags.
        for name in names:
            journal.record(name, NodeState.FAILED, clock(), detail=f"launch failed: {err}")
            out.failed[name] = f"launch failed: {err}"
        return ()
    finally:
        journal.note_change(clock())
    for name, why in result.failed.items():
        journal.record(name, NodeState.FAILED, clock(), detail=f"launch failed: {why}")
        out.failed[name] = f"launch failed: {why}"
    return result.launched


def record_running(
    journal: Journal, clock: Callable[[], float], name: str, inst: Instance, detail: str | None = None
) -> Node:
    """Node ``name`` runs on ``inst``: record it with what the cloud says of the instance (and,
    with an address, its ``running`` boot step)."""
    return journal.record(
        name,
        NodeState.RUNNING,
        clock(),
        detail=detail,
        instance_id=inst.instance_id,
        private_ip=inst.private_ip,
        slots=inst.slots,
        instance_type=inst.instance_type,
        launched_at=inst.launched_at,
        step=Step.RUNNING if inst.private_ip is not None else None,
        template_version=inst.tags.get(TEMPLATE_VERSION_TAG),
    )


def _describe(result: HostResult) -> str:
    if result.outcome is Outcome.FAILED:
        where = f" at task {result.task!r}" if result.task else ""
        return f"provisioning failed{where}: {result.message or 'no message'}"
    if result.outcome is Outcome.UNREACHABLE:
        return f"unreachable: {result.message or 'no message'}"
    return result.outcome.value


class Actuator:
    def __init__(
        self,
        journal: Journal,
        sge: SgeClient,
        cloud: Cloud,
        provisioner: Provisioner,
        clock: Callable[[], float],
    ) -> None:
        self.journal = journal
        self.sge = sge
        self.cloud = cloud
        self.provisioner = provisioner
        self.clock = clock

    # -- grow ----------------------------------------------------------------------------
    def add(self, names: Sequence[str], reason: str, out: Outcomes) -> None:
        self.request(names, reason)
        self.launch(names, out)

    def request(self, names: Sequence[str], reason: str, groups: Mapping[str, str] | None = None) -> None:
        """Journal the new nodes as requested (they count as booting from now on), each with
        its node group when ``groups`` names one."""
        for name in names:
            group = None if groups is None else groups.get(name)
            self.journal.record(
                name, NodeState.REQUESTED, self.clock(), detail=reason, group=group, step=Step.REQUESTED
            )

    def launch(self, names: Sequence[str], out: Outcomes) -> None:
        """Launch requested nodes and provision them in one playbook run."""
        launched = launch_instances(self.journal, self.cloud, self.clock, names, out)
        self.provision([self._record_running(inst.name, inst) for inst in launched], out)

    def _record_running(self, name: str, inst: Instance, detail: str | None = None) -> Node:
        return record_running(self.journal, self.clock, name, inst, detail)

    def _reached(self, name: str) -> None:
        """The provisioning play reached ``name`` over SSH: its ``reachable`` boot step."""
        self.journal.reach(name, Step.REACHABLE, self.clock())

    def provision(self, nodes: Sequence[Node], out: Outcomes) -> None:
        """Provision running nodes; a node that fails is cleaned out of the cluster and terminated."""
        specs = [s for s in (node_spec(n) for n in nodes) if s is not None]
        for n in nodes:
            if node_spec(n) is None:
                self._fail_and_terminate(n, "no private address", out)
        if not specs:
            return
        for s in specs:
            self.journal.record(s.name, NodeState.PROVISIONING, self.clock(), step=Step.PROVISIONING)
        results = self.provisioner.add_nodes(
            specs, ready_specs(self.journal, [s.name for s in specs]), on_reached=self._reached
        )
        for s in specs:
            res = results.get(s.name, HostResult(s.name, Outcome.FAILED, message="no result from provisioning"))
            node = self.journal.node(s.name)
            assert node is not None
            if res.ok:
                self.journal.record(s.name, NodeState.READY, self.clock(), step=Step.PROVISIONED)
                out.added.append(s.name)
            else:
                self._fail_and_terminate(node, _describe(res), out)

    def _fail_and_terminate(self, node: Node, why: str, out: Outcomes) -> None:
        """Take a node that never became ready back out of SGE, hosts and exports, then terminate it."""
        log.error("%s: %s; removing it", node.name, why)
        self.journal.record(node.name, NodeState.DRAINING, self.clock(), detail=f"cleanup: {why}")
        spec = node_spec(node)
        if spec is not None:
            res = self.provisioner.remove_nodes([spec], ready_specs(self.journal, [node.name]))
            r = res.get(node.name)
            if r is None or not r.ok:
                detail = _describe(r) if r else "no result"
                if not self._cleanup_anyway(node, detail, out):
                    out.failed[node.name] = f"{why}; cleanup failed: {detail}"
                return
        self.journal.record(node.name, NodeState.DEREGISTERED, self.clock(), detail=why)
        self._terminate(node, why, out)

    def _cleanup_anyway(self, node: Node, failure: str, out: Outcomes) -> bool:
        """The deregistration play of ``node`` failed: terminate it if nothing can be left to
        deregister (see ``planner.cleanup_verdict``), else keep it draining. True if terminated."""
        try:
            listed: bool | None = self.sge.read_snapshot().host(node.name) is not None
        except Exception as err:  # unreadable SGE: the node may be listed, so it is kept
            log.error("%s: cannot read SGE after a failed deregistration: %s", node.name, err)
            listed = None
        verdict, why = cleanup_verdict(node, listed, failure)
        if verdict is Cleanup.TERMINATE:
            # The instance goes now; the record stays draining, so that reconcile runs the
            # (master-side) deregistration again each pass until the hosts line and exports are gone.
            log.error("%s: %s", node.name, why)
            self.journal.record(node.name, NodeState.DRAINING, self.clock(), detail=why)
            out.failed[node.name] = why
            if node.instance_id is not None:
                try:
                    self.cloud.terminate([node.instance_id])
                except CloudError as err:
                    log.error("%s: terminate %s failed: %s", node.name, node.instance_id, err)
            return True
        log.error("ALARM: %s: %s", node.name, why)
        self.journal.record(node.name, NodeState.DRAINING, self.clock(), detail=why)
        out.failed[node.name] = why
        return False

    def _terminate(self, node: Node, why: str, out: Outcomes, *, failed: bool = True) -> bool:
        final = NodeState.FAILED if failed else NodeState.TERMINATED
        self.journal.record(node.name, final, self.clock(), detail=why)
        if node.instance_id is None:
            return True
        try:
            self.cloud.terminate([node.instance_id])
        except CloudError as err:
            # Journal says gone; reconcile terminates tagged instances whose record is gone.
            log.error("%s: terminate %s failed: %s", node.name, node.instance_id, err)
            out.failed[node.name] = f"terminate failed: {err}"
            return False
        if failed:
            out.failed[node.name] = why
        return True

    # -- shrink --------------------------------------------------------------------------
    def remove(self, name: str, reason: str, out: Outcomes) -> None:
        """Safe drain: disable, re-read SGE, no job -> deregister -> SGE no longer lists it -> terminate."""
        node = self.journal.node(name)
        if node is None or node.state is not NodeState.READY:
            log.warning("%s: not removed: not a ready node elb manages", name)
            return
        self.journal.record(name, NodeState.DRAINING, self.clock(), detail=reason)
        if self._drained(name, "kept: {} while draining"):
            self.finish_drain(self.journal.node(name) or node, reason, out)
        else:
            out.kept.append(name)

    def _drained(self, name: str, kept_why: str) -> bool:
        """Disable the node's queue instances, then read SGE again: True if nothing is there.

        Anything there (a job running, transferring or just dispatched, or a slot reserved for
        a waiting job) re-enables the node and records it ready again with ``kept_why``.
        """
        self.sge.disable_host(name)
        jobs = self.sge.jobs_on(name)
        host = self.sge.read_snapshot().host(name)
        verdict = drain_verdict(jobs, host.slots_reserved if host is not None else 0)
        if verdict.verdict is Drain.GO:
            return True
        self.sge.enable_host(name)
        self.journal.record(name, NodeState.READY, self.clock(), detail=kept_why.format(verdict.reason))
        return False

    def finish_drain(self, node: Node, reason: str, out: Outcomes) -> None:
        """Deregister a disabled, jobless node and terminate it once SGE no longer lists it."""
        name = node.name
        spec = node_spec(node) or NodeSpec(name, "0.0.0.0")  # noqa: S104 (never connected to: master-side only)
        res = self.provisioner.remove_nodes([spec], ready_specs(self.journal, [name])).get(name)
        if res is not None and res.outcome is Outcome.BUSY:
            self.sge.enable_host(name)
            self.journal.record(name, NodeState.READY, self.clock(), detail="kept: busy at deregistration")
            out.kept.append(name)
            return
        if res is None or not res.ok:
            detail = _describe(res) if res else "no result from provisioning"
            self._cleanup_anyway(node, detail, out)
            return
        self.journal.record(name, NodeState.DEREGISTERED, self.clock(), detail=reason)
        if self.sge.read_snapshot().host(name) is not None:
            msg = "SGE still lists the host after deregistration; not terminating"
            self.journal.record(name, NodeState.DEREGISTERED, self.clock(), detail=msg)
            out.failed[name] = msg
            return
        if self._terminate(node, reason, out, failed=False):
            out.removed.append(name)
        self.journal.note_removal(self.clock())

    # -- warm pool -----------------------------------------------------------------------
    def stop(self, name: str, reason: str, out: Outcomes) -> None:
        """The safe drain (disable, re-read SGE, nothing there), then stop the instance. Its queue
        instances stay disabled; it stays an exec host, its hosts lines and exports stay. A stop
        that fails removes the node for good (deregistered, terminated)."""
        node = self.journal.node(name)
        if node is None or node.state is not NodeState.READY:
            log.warning("%s: not stopped: not a ready node elb manages", name)
            return
        self.journal.record(name, NodeState.DRAINING, self.clock(), detail=reason)
        if not self._drained(name, "kept: {} while draining"):
            out.kept.append(name)
            return
        node = self.journal.record(name, NodeState.STOPPING, self.clock(), detail=reason)
        try:
            if node.instance_id is None:
                raise CloudError("no instance id in the journal")
            self.cloud.stop([node.instance_id])
        except CloudError as err:
            why = f"stop failed ({err}); removed instead"
            log.error("%s: %s", name, why)
            out.failed[name] = why
            self.finish_drain(self.journal.record(name, NodeState.DRAINING, self.clock(), detail=why), why, out)
            return
        self.journal.record(name, NodeState.STOPPED, self.clock(), detail=reason)
        self.journal.note_removal(self.clock())
        out.stopped.append(name)

    def begin_restart(self, name: str, reason: str) -> bool:
        """Journal a pooled node as starting (it counts as booting from now on); False if it is
        not a stopped node elb manages."""
        node = self.journal.node(name)
        if node is None or node.state is not NodeState.STOPPED:
            log.warning("%s: not restarted: not a stopped node of the warm pool", name)
            return False
        # Billed again from now; ready again once started (its idle time counts from then).
        self.journal.record(name, NodeState.STARTING, self.clock(), detail=reason, launched_at=self.clock())
        self.journal.note_change(self.clock())
        return True

    def restart(self, name: str, out: Outcomes) -> None:
        """Start a node ``begin_restart`` journalled as starting, without provisioning it again:
        if its address changed, or the cloud's instances do not start their services by
        themselves (``restart_runs_services``), the add playbook runs on it (idempotent: it
        rewrites the hosts lines and brings back what the stop lost); then its queue instances
        are enabled. A restart that fails removes the node for good."""
        node = self.journal.node(name)
        if node is None or node.state is not NodeState.STARTING or node.instance_id is None:
            log.warning("%s: not restarted: not a starting node of the warm pool", name)
            return
        try:
            result = self.cloud.start([node.instance_id])
        except CloudError as err:
            self._restart_failed(node, f"start failed: {err}", out)
            return
        inst = next((i for i in result.launched if i.instance_id == node.instance_id), None)
        if inst is None or inst.private_ip is None:
            self._restart_failed(node, f"start failed: {result.failed.get(name, 'not running')}", out)
            return
        moved = inst.private_ip != node.private_ip
        node = self.journal.record(
            name, NodeState.STARTING, self.clock(), detail="instance running", private_ip=inst.private_ip
        )
        if moved or not getattr(self.cloud, "restart_runs_services", True):
            spec = node_spec(node)
            assert spec is not None
            res = self.provisioner.add_nodes([spec], ready_specs(self.journal, [name])).get(name)
            if res is None or not res.ok:
                self._restart_failed(node, _describe(res) if res else "no result from provisioning", out)
                return
        self.sge.enable_host(name)
        self.journal.record(name, NodeState.READY, self.clock(), detail="restarted from the warm pool")
        out.restarted.append(name)

    def _restart_failed(self, node: Node, why: str, out: Outcomes) -> None:
        why = f"restart failed ({why}); removed"
        log.error("%s: %s", node.name, why)
        out.failed[node.name] = why
        self.finish_drain(self.journal.record(node.name, NodeState.DRAINING, self.clock(), detail=why), why, out)

    def retire(self, name: str, reason: str, out: Outcomes) -> None:
        """Remove a pooled node for good: deregister it (from the master's side: it is stopped)
        and terminate it once SGE no longer lists it."""
        node = self.journal.node(name)
        if node is None or node.state is not NodeState.STOPPED:
            log.warning("%s: not terminated: not a stopped node of the warm pool", name)
            return
        self.finish_drain(self.journal.record(name, NodeState.DRAINING, self.clock(), detail=reason), reason, out)

    # -- reconcile -----------------------------------------------------------------------
    def repair(self, r: Repair, out: Outcomes) -> None:
        """Carry out one repair planned by ``elb.reconcile.plan_repairs``."""
        log.warning("reconcile %s: %s: %s", r.node, r.kind.value, r.reason)
        out.repaired.append(f"{r.node}: {r.kind.value} ({r.reason})")
        j = self.journal
        inst = r.instance
        node = j.node(r.node)
        if r.kind in (RepairKind.PROVISION, RepairKind.ADOPT):
            assert inst is not None
            self.provision([self._record_running(r.node, inst, r.reason)], out)
        elif r.kind is RepairKind.ABANDON:
            assert node is not None
            self._fail_and_terminate(node, r.reason, out)
        elif r.kind is RepairKind.FORGET:
            j.record(r.node, NodeState.FAILED, self.clock(), detail=r.reason)
        elif r.kind in (RepairKind.VANISHED, RepairKind.DEREGISTER_STALE):
            self._deregister_only(node, r, out)
        elif r.kind in (RepairKind.ORPHAN, RepairKind.TERMINATE_GONE):
            assert inst is not None
            try:
                self.cloud.terminate([inst.instance_id])
            except CloudError as err:
                out.failed[r.node] = f"terminate {inst.instance_id} failed: {err}"
        elif r.kind is RepairKind.FINISH_DRAIN:
            assert node is not None
            self._finish_interrupted_drain(node, r.reason, out)
        elif r.kind is RepairKind.UNREACHABLE:
            assert node is not None
            # The safe drain, from the master's side only: a node out of reach is never logged into.
            node = j.record(r.node, NodeState.DRAINING, self.clock(), detail=r.reason)
            self._finish_interrupted_drain(node, r.reason, out)

    def _deregister_only(self, node: Node | None, r: Repair, out: Outcomes) -> None:
        """Take a node whose instance is gone out of SGE, hosts and exports (master side only)."""
        name = r.node
        ip = node.private_ip if node is not None and node.private_ip else "0.0.0.0"  # noqa: S104
        res = self.provisioner.remove_nodes([NodeSpec(name, ip)], ready_specs(self.journal, [name])).get(name)
        if res is None or not res.ok:
            out.failed[name] = f"deregistration failed: {_describe(res) if res else 'no result'}"
            return
        if node is not None and node.state not in (NodeState.TERMINATED, NodeState.FAILED):
            self.journal.record(name, NodeState.FAILED, self.clock(), detail=r.reason)

    def _finish_interrupted_drain(self, node: Node, reason: str, out: Outcomes) -> None:
        name = node.name
        if self.sge.read_snapshot().host(name) is None:
            if node.state is NodeState.DRAINING:
                # The deregistration play may have stopped after SGE and before the hostgroup,
                # /etc/hosts and the exports: run it again (it is idempotent), then terminate.
                self.finish_drain(node, reason, out)
                return
            # Deregistered: the deregistration went through before elb stopped.
            if node.state is not NodeState.DEREGISTERED:
                self.journal.record(name, NodeState.DEREGISTERED, self.clock(), detail="already out of SGE")
            if self._terminate(node, reason, out, failed=False):
                out.removed.append(name)
            return
        if self._drained(name, "drain abandoned: {}"):
            self.finish_drain(node, reason, out)
        else:
            out.kept.append(name)
