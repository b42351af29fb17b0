"""The node operations a pass's plan hands the executor, one order of steps for each, for every
scheduler (``elb.core.scheduler.Scheduler``) and cloud (``elb.core.interfaces.Cloud``):

- **add**: launch -> running -> the scheduler's preparation (Slurm: the node's address) ->
  provisioning (the scheduler's add play) -> the scheduler has it up -> ready;
- **remove** (the safe drain): draining -> disabled in the scheduler -> a fresh read: anything
  there keeps it (enabled again, ready) -> the remove play -> deregistered -> out of the
  scheduler's service (Slurm: powered down) -> the scheduler no longer lists it -> terminated;
  a pass's removals go together: each node disabled, one read for all of them, one remove
  play for the idle ones, one read to see the scheduler no longer lists them;
- the warm pool: **stop** (the safe drain, then the instance stopped), **restart** (started, the
  add play when its address moved, back in the scheduler's service, ready) and **retire** (a
  pooled node deregistered and terminated), a pass's stops, restarts and retirements each
  together (one cloud call, one play);
- **repairs** (``elb.core.reconcile``), **retire on a notice** (disabled, its removal ordered with the
  notice as cause, its jobs requeued on a spot interruption), **give back** nodes the scheduler
  asked for, **bind** a job to on-demand nodes, **tag** workers with their node group (a cloud
  that ``TagsGroups``).

Every step is written to the journal before it starts. A node operation, once begun, is
finished before elb stops (the caller checks for shutdown only between operations). Nothing
here decides what to do: the verdicts it needs after a fresh read are the planner's
(``drain_verdict``, ``cleanup_verdict``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from elb.core.askplan import Decline, NameHolds, release_retry_at
from elb.core.durations import minutes
from elb.core.groups import NodeGroups
from elb.core.interfaces import (
    TAG_GROUP,
    Cloud,
    CloudError,
    HostResult,
    Instance,
    JobProcesses,
    NodeSpec,
    Outcome,
    Provisioner,
    RestartsServices,
    TagsGroups,
    Witness,
)
from elb.core.interruptions import Move, job_number
from elb.core.model import Cause, Node, NodeState, Removal, WitnessKeep
from elb.core.noticeplan import Retire
from elb.core.planner import Cleanup, Drain, cleanup_verdict, drain_verdict, witness_needed, witness_verdict
from elb.core.reconcile import Repair, RepairKind
from elb.core.scheduler import BindsOnDemand, HoldsNames, ParksNodes, Scheduler, SchedulerError
from elb.core.tagplan import TAG_RETRY, GroupTag, describe_tags
from elb.core.timeline import Step
from elb.service.journal import Journal

log = logging.getLogger("elb.service.actuator")

R = TypeVar("R")


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
    given_back: list[str] = field(default_factory=list)  # nodes the scheduler asked for, given back
    held: list[str] = field(default_factory=list)  # names kept from the scheduler's next asks
    reopened: list[str] = field(default_factory=list)  # names the scheduler may ask for again
    requeued: list[str] = field(default_factory=list)  # jobs sent back to wait by a spot interruption
    moved: list[int] = field(default_factory=list)  # jobs bound to on-demand nodes

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
        self.given_back += other.given_back
        self.held += other.held
        self.reopened += other.reopened
        self.requeued += other.requeued
        self.moved += other.moved


def node_spec(node: Node) -> NodeSpec | None:
    """What the provisioner needs of a journalled node; None without an address."""
    if node.private_ip is None:
        return None
    return NodeSpec(node.name, node.private_ip, node.slots, group=node.group)


def _master_side(node: Node | None, name: str) -> NodeSpec:
    """The node for a play that only edits the master (its address, if known, for the hosts line)."""
    spec = node_spec(node) if node is not None else None
    return spec or NodeSpec(name, "0.0.0.0")  # noqa: S104 (never connected to: master-side only)


def _describe(result: HostResult | None) -> str:
    if result is None:
        return "no result from provisioning"
    if result.outcome is Outcome.FAILED:
        where = f" at task {result.task!r}" if result.task else ""
        return f"provisioning failed{where}: {result.message or 'no message'}"
    if result.outcome is Outcome.UNREACHABLE:
        return f"unreachable: {result.message or 'no message'}"
    return result.outcome.value


class Actuator:
    """Carries out node operations on the journal, the scheduler, the cloud and the provisioner."""

    def __init__(
        self,
        journal: Journal,
        scheduler: Scheduler,
        cloud: Cloud,
        provisioner: Provisioner,
        clock: Callable[[], float],
        *,
        stopping: threading.Event | None = None,
        groups: NodeGroups | None = None,
        boot: bool = False,
    ) -> None:
        self.journal = journal
        self.scheduler = scheduler
        self.cloud = cloud
        self.provisioner = provisioner
        self.clock = clock
        self.stopping = stopping or threading.Event()
        self.groups = groups
        # provision.mode boot: new nodes configure themselves at boot (the provisioner's boot
        # plans go with the launch) and the master runs only the scheduler's admit play.
        self.boot = boot

    def _workers(self, exclude: Sequence[str] = ()) -> list[NodeSpec]:
        """The ready nodes (but ``exclude``), for the hosts lines a play updates on them."""
        out = []
        for n in self.journal.nodes():
            spec = node_spec(n)
            if n.state is NodeState.READY and n.name not in exclude and spec is not None:
                out.append(spec)
        return out

    def _add_play(self, specs: Sequence[NodeSpec], *, admit: bool = False) -> dict[str, HostResult]:
        """The add play, or with ``admit`` the admit play (nodes that configure themselves at
        boot: the play does not reach them)."""
        existing = self._workers([s.name for s in specs])
        if admit and self.scheduler.admit_playbook is not None:
            return self.provisioner.add_nodes(self.scheduler.admit_playbook, specs, existing)
        return self.provisioner.add_nodes(
            self.scheduler.add_playbook,
            specs,
            existing,
            on_reached=lambda name: self.journal.reach(name, Step.REACHABLE, self.clock()),
        )

    def _remove_play(self, spec: NodeSpec) -> HostResult | None:
        results = self.provisioner.remove_nodes(self.scheduler.remove_playbook, [spec], self._workers([spec.name]))
        return results.get(spec.name)

    # -- grow ----------------------------------------------------------------------------
    def request(self, names: Sequence[str], reason: str, groups: Mapping[str, str] | None = None) -> None:
        """Journal the new nodes as requested (they count as booting from now on), each with
        its node group when ``groups`` names one, and tell a driver that ``ParksNodes`` (in the
        pass: before their launch and the pass's give-backs start)."""
        for name in names:
            group = None if groups is None else groups.get(name)
            self.journal.record(
                name, NodeState.REQUESTED, self.clock(), detail=reason, group=group, step=Step.REQUESTED
            )
        if isinstance(self.scheduler, ParksNodes) and names:
            try:
                self.scheduler.before_launch(names)
            except SchedulerError as err:
                log.warning("%s: before their launch: %s", ", ".join(names), err)

    def launch(self, names: Sequence[str], out: Outcomes) -> None:
        """Launch requested nodes (each journalled ``launching`` first), then bring them up in one
        play; the ones the cloud could not start are failed with why."""
        groups: dict[str, str] = {}
        for name in names:
            node = self.journal.record(name, NodeState.LAUNCHING, self.clock())
            if node.group is not None:
                groups[name] = node.group
        try:
            boot = self.provisioner.boot_plans(list(names), groups or None) if self.boot else None
            result = self.cloud.launch(list(names), groups or None, boot, stopping=self.stopping)
        except (CloudError, ValueError) as err:  # ValueError: the nodes' boot plans could not be made
            # The cloud adapter starts nothing it cannot report; reconcile catches the rest by tags.
            throttled = isinstance(err, CloudError) and err.throttled
            for name in names:
                self._launch_failed(name, str(err), out, throttled=throttled)
            return
        finally:
            self.journal.note_change(self.clock())
        for name, why in result.failed.items():
            self._launch_failed(name, why, out, throttled=name in result.throttled)
        for name in result.not_started:  # nothing of theirs exists, and nothing failed
            log.info("%s: not launched: elb stops", name)
            self.journal.record(name, NodeState.TERMINATED, self.clock(), detail="not launched: elb stopped")
        self.provision([self._record_running(inst.name, inst) for inst in result.launched], out, admit=self.boot)

    def _launch_failed(self, name: str, why: str, out: Outcomes, *, throttled: bool) -> None:
        """The cloud gave ``name`` no running instance: failed, with the cause the launch
        back-off counts it by (``throttled``: refused for the account's API request rate)."""
        cause = Cause.THROTTLED if throttled else Cause.LAUNCH
        self.journal.record(name, NodeState.FAILED, self.clock(), detail=f"launch failed: {why}", cause=cause)
        out.failed[name] = f"launch failed: {why}"

    def _record_running(self, name: str, inst: Instance, detail: str | None = None, group: str | None = None) -> Node:
        """Node ``name`` runs on ``inst``: record it with what the cloud says of the instance (and,
        with an address, its ``running`` boot step); ``group``: its node group, when known."""
        return self.journal.record(
            name,
            NodeState.RUNNING,
            self.clock(),
            detail=detail,
            instance_id=inst.instance_id,
            private_ip=inst.private_ip,
            slots=inst.slots,
            instance_type=inst.instance_type,
            launched_at=inst.launched_at,
            group=group,
            step=Step.RUNNING if inst.private_ip is not None else None,
            template_version=inst.template_version,
        )

    def provision(
        self, nodes: Sequence[Node], out: Outcomes, *, admit: bool = False, busy: Mapping[str, str] | None = None
    ) -> None:
        """Bring running nodes up: the scheduler's preparation, the add play (``admit``: nodes
        launched to configure themselves at boot, the admit play), the scheduler has them up; a
        node that fails a step for its own fault (no address, its play failed on it, it was not
        up within the wait, the scheduler refused it) is cleaned out of the cluster and
        terminated, unless the scheduler lists work on it (``busy``: node -> what, an adopted
        worker running jobs): that one is kept, said, and provisioned again by the next pass
        (``_fail_and_terminate``). A scheduler that did not answer (a transient
        ``SchedulerError``, after the driver's retries) is no node's fault: the nodes stay in
        their step, said, and the next pass's reconcile provisions them again (``boot_timeout``
        bounds it)."""
        busy = busy or {}
        specs = self._prepared(nodes, out, busy)
        if not specs:
            return
        for s in specs:
            self.journal.record(s.name, NodeState.PROVISIONING, self.clock(), step=Step.PROVISIONING)
        results = self._add_play(specs, admit=admit)
        played: list[NodeSpec] = []
        for s in specs:
            res = results.get(s.name, HostResult(s.name, Outcome.FAILED, message="no result from provisioning"))
            if res.ok:
                self.journal.reach(s.name, Step.PROVISIONED, self.clock())
                played.append(s)
            else:
                self._fail_and_terminate(self._node(s.name), _describe(res), out, busy.get(s.name))
        if not played:
            return
        try:
            unheard = self.scheduler.await_registered([s.name for s in played], self.stopping)
        except SchedulerError as err:
            if not err.transient:
                raise
            self._not_their_fault([s.name for s in played], "after its play", err)
            return
        if unheard is None:
            return  # elb stops: the next start provisions them again where the journal left them
        for s in played:
            if s.name in unheard:
                self._fail_and_terminate(self._node(s.name), unheard[s.name], out, busy.get(s.name))
                continue
            self.journal.record(s.name, NodeState.READY, self.clock())
            out.added.append(s.name)
            log.info("%s: ready (%s)", s.name, s.private_ip)

    def _prepared(self, nodes: Sequence[Node], out: Outcomes, busy: Mapping[str, str]) -> list[NodeSpec]:
        """The scheduler's preparation of each node (see ``provision``): the nodes it prepared."""
        addressed: list[tuple[Node, NodeSpec]] = []
        for n in nodes:
            spec = node_spec(n)
            if spec is None:
                self._fail_and_terminate(n, "no private address", out, busy.get(n.name))
                continue
            addressed.append((n, spec))
        errors = self.scheduler.prepare([spec for _, spec in addressed]) if addressed else {}
        unanswered = [n.name for n, _ in addressed if (e := errors.get(n.name)) is not None and e.transient]
        if unanswered:
            self._not_their_fault(unanswered, "before its play", errors[unanswered[0]])
        specs: list[NodeSpec] = []
        for n, spec in addressed:
            err = errors.get(n.name)
            if err is None:
                specs.append(spec)
            elif not err.transient:
                self._fail_and_terminate(n, f"{self.scheduler.name}: {err}", out, busy.get(n.name))
        return specs

    def _not_their_fault(self, names: Sequence[str], when: str, err: SchedulerError) -> None:
        """The scheduler did not answer during these nodes' bring-up: left in their step."""
        log.warning(
            "%s: %s did not answer %s (%s); left as it is, provisioned again by a later pass",
            ", ".join(names),
            self.scheduler.name,
            when,
            err,
        )

    def _node(self, name: str) -> Node:
        node = self.journal.node(name)
        assert node is not None, name
        return node

    def _fail_and_terminate(self, node: Node, why: str, out: Outcomes, work: str | None = None) -> None:
        """Take a node that never became ready back out of the scheduler, hosts and exports, then
        terminate it. Not a node that runs a job: one the scheduler lists work on (``work``: what)
        is kept as it is, ALARM said, and provisioned again by the next pass's repair; one a read
        showed busy before is asked itself first (``_witnessed``: a node elb cannot reach with
        the host key it holds cannot answer, and is kept)."""
        if work is not None:
            self._keep_unready(node, f"{why}; {self.scheduler.name} lists {work} there", out)
            return
        fresh = self.journal.node(node.name) or node
        if witness_needed(fresh) and not self._witnessed([node.name], out):
            return
        log.error("%s: %s; removing it", node.name, why)
        self.journal.record(node.name, NodeState.DRAINING, self.clock(), detail=f"cleanup: {why}")
        spec = node_spec(node)
        if spec is not None:
            res = self._remove_play(spec)
            if res is None or not res.ok:
                detail = _describe(res)
                if not self._cleanup_anyway(node, detail, out):
                    out.failed[node.name] = f"{why}; cleanup failed: {detail}"
                return
            self._out_of_service({node.name: why})
        self.journal.record(node.name, NodeState.DEREGISTERED, self.clock(), detail=why)
        self._terminate(node, why, out)

    def _keep_unready(self, node: Node, why: str, out: Outcomes) -> None:
        """A node that is not ready and runs a job: kept running (the next pass's repair
        provisions it again), said with an ALARM, counted kept and failed."""
        why = f"{why}: kept, never removed while it runs a job; provisioned again next pass"
        log.error("ALARM: %s: %s", node.name, why)
        self.journal.record(node.name, NodeState.RUNNING, self.clock(), detail=f"kept: {why}")
        out.kept.append(node.name)
        out.failed[node.name] = why

    def _out_of_service(self, reasons: Mapping[str, str]) -> None:
        """What the scheduler needs once these nodes no longer serve, each with why (Slurm:
        power them down); a failure is said and left to the scheduler's own time-outs."""
        if not reasons:
            return
        try:
            self.scheduler.out_of_service(reasons)
        except SchedulerError as err:
            names = ", ".join(reasons)
            log.error("%s: %s could not be told they are out of service: %s", names, self.scheduler.name, err)

    def _cleanup_anyway(self, node: Node, failure: str, out: Outcomes) -> bool:
        """The deregistration play of ``node`` failed: terminate it if nothing can be left to
        deregister (see ``planner.cleanup_verdict``), else keep it draining. True if terminated."""
        try:
            listed: bool | None = node.name in self.scheduler.listed([node.name])
        except Exception as err:  # an unreadable scheduler: the node may be listed, so it is kept
            log.error("%s: cannot read %s after a failed deregistration: %s", node.name, self.scheduler.name, err)
            listed = None
        verdict, why = cleanup_verdict(node, listed, failure, self.scheduler.name)
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
    def remove_all(self, removals: Sequence[Removal], out: Outcomes) -> None:
        """The safe drain of a pass's removals together (``_drain_all``), then one remove play
        for the idle ones, one read to see the scheduler no longer lists them, each terminated."""
        self._finish_drains([(self._node(name), reason) for name, reason in self._drain_all(removals, out)], out)

    def _drain_all(self, removals: Sequence[Removal], out: Outcomes) -> list[tuple[str, str]]:
        """The safe drain of ready nodes together: each journalled draining and disabled, then one
        fresh read for all of them (anything there keeps a node, see ``_idle``), then one probe of
        the idle ones the scheduler showed busy before (``_witnessed``: a node that runs job
        processes, or cannot say, is kept). The idle ones, each with its reason. A node that is
        no longer a ready node elb manages is left out. When elb starts stopping, the nodes not
        yet disabled stay ready, postponed (the next start decides again); the others go on."""
        disabled: list[tuple[str, str]] = []
        for i, r in enumerate(removals):
            if self.stopping.is_set():
                rest = [x.node for x in removals[i:]]
                log.info("stopping: %s not removed (the next start decides again)", ", ".join(rest))
                out.postponed += rest
                break
            node = self.journal.node(r.node)
            if node is None or node.state is not NodeState.READY:
                log.warning("%s: left alone: not a ready node elb manages", r.node)
                continue
            self.journal.record(r.node, NodeState.DRAINING, self.clock(), detail=r.reason)
            if self._disable(r.node, r.reason, "kept: {} while draining", out):
                disabled.append((r.node, r.reason))
            else:
                out.kept.append(r.node)
        idle = set(self._idle([name for name, _ in disabled], "kept: {} while draining", out))
        out.kept += [name for name, _ in disabled if name not in idle]
        agreed = set(self._witnessed([name for name, _ in disabled if name in idle], out))
        return [(name, reason) for name, reason in disabled if name in agreed]

    def _disable(self, name: str, reason: str, kept_why: str, out: Outcomes) -> bool:
        """Disable the node in the scheduler; False (the node kept, see ``_keep``) if it
        cannot be told."""
        try:
            self.scheduler.disable_host(name, reason)
        except SchedulerError as err:
            self._keep(name, kept_why, f"drain failed: {err}", out)
            return False
        return True

    def _idle(self, names: Sequence[str], kept_why: str, out: Outcomes) -> list[str]:
        """Read the disabled nodes ``names`` again, once for all of them: the ones with nothing
        there.

        Anything there (a job running, transferring or just dispatched, or a slot reserved for
        a waiting job) re-enables the node and records it ready again with ``kept_why``; so does
        a scheduler that cannot be read, or a read that does not show the node (said in ``out``).
        """
        if not names:
            return []
        try:
            checks = self.scheduler.drain_checks(names)
        except SchedulerError as err:
            for name in names:
                self._keep(name, kept_why, f"drain failed: {err}", out)
            return []
        idle = []
        for name in names:
            check = checks.get(name)
            if check is None:
                self._keep(name, kept_why, f"drain failed: {self.scheduler.name} does not show the host", out)
                continue
            verdict = drain_verdict(check.jobs, check.reserved)
            if verdict.verdict is Drain.GO:
                idle.append(name)
                continue
            self._enable(name)
            self.journal.record(name, NodeState.READY, self.clock(), detail=kept_why.format(verdict.reason))
        return idle

    def _witnessed(self, names: Sequence[str], out: Outcomes) -> list[str]:
        """Of ``names`` (nodes the scheduler shows idle, on their way out), the ones that may go:
        each the scheduler showed busy at a read elb trusted (``planner.witness_needed``) is asked
        itself, all of them in one probe (``Provisioner.probe_jobs``), and goes only if it runs no
        job process, or cannot say and an admin ordered its removal (``planner.witness_verdict``).
        A node kept is journalled with why and what it answered (``_keep_witnessed``: the
        planner's ``witness_hold`` reads it), an ALARM said, and counted kept and failed."""
        nodes = [n for n in (self.journal.node(name) for name in names) if n is not None]
        ask = [n for n in nodes if witness_needed(n)]
        if not ask:
            return list(names)
        answers = self._probe(ask)
        ordered = self.journal.orders().by_admin
        keep = set()
        for n in ask:
            answer = answers.get(n.name)
            verdict = witness_verdict(n.name, answer, ordered=n.name in ordered)
            if verdict.verdict is Drain.GO:  # the two witnesses agree: the usual scale-down
                log.info("%s: %s: it goes", n.name, verdict.reason)
                continue
            keep.add(n.name)
            found = answer is not None and answer.answer is JobProcesses.FOUND
            self._keep_witnessed(n, WitnessKeep(self.clock(), n.last_busy_at, found, verdict.reason), out)
        return [name for name in names if name not in keep]

    def _probe(self, nodes: Sequence[Node]) -> dict[str, Witness]:
        """The nodes' own answers, one probe for all that have an address; a node without one, or
        a probe that breaks, has ``UNKNOWN`` with why."""
        specs = [spec for n in nodes if (spec := node_spec(n)) is not None]
        answers = {n.name: Witness(n.name, JobProcesses.UNKNOWN, "no address in the journal") for n in nodes}
        if not specs:
            return answers
        try:
            answers.update(self.provisioner.probe_jobs(specs))
        except Exception as err:  # the probe is the provisioner's: whatever breaks, nothing is removed on it
            log.exception("asking %s for job processes failed", ", ".join(s.name for s in specs))
            answers.update({s.name: Witness(s.name, JobProcesses.UNKNOWN, f"the probe failed: {err}") for s in specs})
        return answers

    def _keep_witnessed(self, node: Node, keep: WitnessKeep, out: Outcomes) -> None:
        """Keep a node the witnesses disagree on (``keep``: when, what it answered, why): enabled
        again (when the drain disabled it) and ready; a node left deregistered stays so (it is
        out of the scheduler), one that never became ready stays running (provisioned again);
        journalled with ``keep``, an ALARM said, counted kept and failed."""
        name, why = node.name, keep.why
        log.error("ALARM: %s: %s", name, why)
        state = NodeState.READY
        if node.state is NodeState.DEREGISTERED:
            state = NodeState.DEREGISTERED
        elif node.state.booting:  # never ready: the next pass's repair provisions it again
            state = NodeState.RUNNING
        elif node.state is not NodeState.READY:  # disabled by the drain (a ready one never was)
            self._enable(name)
        self.journal.record(name, state, self.clock(), detail=f"kept: {why}", witness_keep=keep)
        out.kept.append(name)
        out.failed[name] = why

    def _drained(self, name: str, reason: str, kept_why: str, out: Outcomes) -> bool:
        """Disable one node, then read it again: True if nothing is there (see ``_idle``)."""
        return self._disable(name, reason, kept_why, out) and bool(self._idle([name], kept_why, out))

    def _keep(self, name: str, kept_why: str, why: str, out: Outcomes) -> None:
        """A drain that failed (``why``): the node enabled again and ready, the failure said."""
        self._enable(name)
        log.error("%s: %s", name, why)
        self.journal.record(name, NodeState.READY, self.clock(), detail=kept_why.format(why))
        out.failed[name] = why

    def _enable(self, name: str) -> None:
        try:
            self.scheduler.enable_host(name)
        except SchedulerError as err:
            log.error("%s: cannot enable it again in %s: %s", name, self.scheduler.name, err)

    def finish_drain(self, node: Node, reason: str, out: Outcomes) -> None:
        """Deregister a disabled, jobless node and terminate it once the scheduler no longer
        lists it."""
        self._finish_drains([(node, reason)], out)

    def _finish_drains(self, drained: Sequence[tuple[Node, str]], out: Outcomes) -> None:
        """``finish_drain`` for disabled, jobless nodes (each with its reason): one remove play
        for all of them, then one read for the ones it deregistered. A node the play found busy
        is kept (enabled again); a failed one is cleaned up if it can be (``_cleanup_anyway``); a
        deregistered one is terminated once the scheduler no longer lists it."""
        if not drained:
            return
        specs = [_master_side(node, node.name) for node, _ in drained]
        results = self.provisioner.remove_nodes(
            self.scheduler.remove_playbook, specs, self._workers([s.name for s in specs])
        )
        gone: list[tuple[Node, str]] = []
        for node, reason in drained:
            name, res = node.name, results.get(node.name)
            if res is not None and res.outcome is Outcome.BUSY:
                self._enable(name)
                self.journal.record(name, NodeState.READY, self.clock(), detail="kept: busy at deregistration")
                out.kept.append(name)
            elif res is None or not res.ok:
                self._cleanup_anyway(node, _describe(res), out)
            else:
                self.journal.record(name, NodeState.DEREGISTERED, self.clock(), detail=reason)
                gone.append((node, reason))
        if not gone:
            return
        self._out_of_service({node.name: reason for node, reason in gone})
        try:
            listed = self.scheduler.listed([node.name for node, _ in gone])
        except SchedulerError as err:
            for node, _ in gone:
                msg = f"{self.scheduler.name} cannot be read after deregistration ({err}); not terminating"
                out.failed[node.name] = msg
            return
        for node, reason in gone:
            if node.name in listed:
                msg = f"{self.scheduler.name} still lists the host after deregistration; not terminating"
                self.journal.record(node.name, NodeState.DEREGISTERED, self.clock(), detail=msg)
                out.failed[node.name] = msg
                continue
            if self._terminate(node, reason, out, failed=False):
                out.removed.append(node.name)
            self.journal.note_removal(self.clock())

    # -- warm pool -----------------------------------------------------------------------
    def stop_all(self, stops: Sequence[Removal], out: Outcomes) -> None:
        """The safe drain of these nodes together (``_drain_all``), then their instances stopped
        in one call (``_together``), out of the scheduler's service. With Grid Engine their queue
        instances stay disabled and they stay exec hosts, their hosts lines and exports kept. A
        node whose stop fails is removed for good (deregistered, terminated)."""
        drained = self._drain_all(stops, out)
        if not drained:
            return
        nodes = [self.journal.record(name, NodeState.STOPPING, self.clock(), detail=reason) for name, reason in drained]
        _, failed = self._together(self.cloud.stop, nodes)
        stopped = {name: reason for name, reason in drained if name not in failed}
        self._out_of_service(stopped)
        for name, reason in stopped.items():
            self.journal.record(name, NodeState.STOPPED, self.clock(), detail=reason)
            self.journal.note_removal(self.clock())
            out.stopped.append(name)
        self._remove_for_good({name: f"stop failed ({err}); removed instead" for name, err in failed.items()}, out)

    def _together(self, call: Callable[[Sequence[str]], R], nodes: Sequence[Node]) -> tuple[list[R], dict[str, str]]:
        """``call`` (the cloud's stop or start) on the nodes' instances in one call: what it
        returned, and the nodes it failed for, with why. A call the cloud refuses outright (an
        error not worth trying again: one instance it will not stop or start refuses them all,
        and nothing was done) is made again for each node alone, so that one node's refusal is
        only its own; an error worth trying again later (a time-out, no capacity, a throttle)
        fails them all, as it would each of them."""
        ids = {n.name: n.instance_id for n in nodes}
        missing = {name: "no instance id in the journal" for name, iid in ids.items() if iid is None}
        known = {name: iid for name, iid in ids.items() if iid is not None}
        try:
            return ([call(list(known.values()))] if known else []), missing
        except CloudError as err:
            if err.retryable or len(known) == 1:
                return [], missing | dict.fromkeys(known, str(err))
            log.warning("%s: %s; each on its own", ", ".join(known), err)
        results, failed = [], dict(missing)
        for name, iid in known.items():
            try:
                results.append(call([iid]))
            except CloudError as err:
                failed[name] = str(err)
        return results, failed

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

    def restart_all(self, names: Sequence[str], out: Outcomes) -> None:
        """Start nodes ``begin_restart`` journalled as starting, together, without provisioning
        them again: one start call and the scheduler's preparation (``_start_pooled``), one add
        play where needed and back in the scheduler's service (``_back_in_service``), one wait
        until the scheduler has them up. A node that fails a step is removed for good (one remove
        play for all that failed); the others go on. When elb stops during the wait, or the
        scheduler did not answer it (a transient ``SchedulerError``: no node's fault), the nodes
        not yet up stay starting: the next pass provisions again the ones whose instance runs."""
        nodes = []
        for name in names:
            node = self.journal.node(name)
            if node is None or node.state is not NodeState.STARTING or node.instance_id is None:
                log.warning("%s: not restarted: not a starting node of the warm pool", name)
                continue
            nodes.append(node)
        failed: dict[str, str] = {}
        back = self._back_in_service(self._start_pooled(nodes, failed), failed)
        try:
            unheard = self.scheduler.await_registered(back, self.stopping) if back else {}
        except SchedulerError as err:
            if not err.transient:
                raise
            self._not_their_fault(back, "after its restart", err)
            unheard = None  # left starting: the next pass provisions them again (``reconcile``)
        if unheard is not None:
            for name in back:
                if name in unheard:
                    failed[name] = unheard[name]
                    continue
                self.journal.record(name, NodeState.READY, self.clock(), detail="restarted from the warm pool")
                out.restarted.append(name)
        self._remove_for_good({name: f"restart failed ({step}); removed" for name, step in failed.items()}, out)

    def _start_pooled(self, nodes: Sequence[Node], failed: dict[str, str]) -> list[tuple[NodeSpec, bool]]:
        """Start the pooled nodes' instances in one call and prepare each in the scheduler: the
        ones that got that far, each with whether the add play must run on it again (its address
        moved, or the cloud's instances do not start their services by themselves,
        ``restart_runs_services``); the others into ``failed`` with why."""
        results, refused = self._together(self.cloud.start, nodes)
        failed.update((name, f"start failed: {err}") for name, err in refused.items())
        running = {i.instance_id: i for r in results for i in r.launched if i.private_ip is not None}
        not_run = {name: why for r in results for name, why in r.failed.items()}
        services = self.cloud.restart_runs_services if isinstance(self.cloud, RestartsServices) else True
        up: list[tuple[NodeSpec, bool]] = []
        for n in nodes:
            inst = running.get(n.instance_id or "")
            if n.name in refused:
                continue
            if inst is None:
                failed[n.name] = f"start failed: {not_run.get(n.name, 'not running')}"
                continue
            rec = self.journal.record(
                n.name, NodeState.STARTING, self.clock(), detail="instance running", private_ip=inst.private_ip
            )
            spec = node_spec(rec)
            assert spec is not None
            up.append((spec, inst.private_ip != n.private_ip or not services))
        errors = self.scheduler.prepare([spec for spec, _ in up]) if up else {}
        failed.update((name, f"{self.scheduler.name}: {err}") for name, err in errors.items())
        return [(spec, again) for spec, again in up if spec.name not in errors]

    def _back_in_service(self, started: Sequence[tuple[NodeSpec, bool]], failed: dict[str, str]) -> list[str]:
        """The add play, in one run, on the started nodes that need it (idempotent: it rewrites
        the hosts lines and brings back what the stop lost), then each back in the scheduler's
        service: the names that got there; the others into ``failed`` with why."""
        replay = [spec for spec, again in started if again]
        if replay:
            results = self._add_play(replay)
            for spec in replay:
                res = results.get(spec.name)
                if res is None or not res.ok:
                    failed[spec.name] = _describe(res)
        back = []
        for spec, _ in started:
            if spec.name in failed:
                continue
            try:
                self.scheduler.resumed(spec.name)
            except SchedulerError as err:
                failed[spec.name] = f"{self.scheduler.name}: {err}"
                continue
            back.append(spec.name)
        return back

    def _remove_for_good(self, failed: Mapping[str, str], out: Outcomes) -> None:
        """Remove for good the warm pool's nodes whose stop or restart failed (each with why, said
        as the failure), in one remove play."""
        drained = []
        for name, why in failed.items():
            log.error("%s: %s", name, why)
            out.failed[name] = why
            drained.append((self.journal.record(name, NodeState.DRAINING, self.clock(), detail=why), why))
        self._finish_drains(drained, out)

    def retire_all(self, expired: Sequence[Removal], out: Outcomes) -> None:
        """Remove pooled nodes for good: deregister them (from the master's side: they are
        stopped) in one remove play and terminate each once the scheduler no longer lists it."""
        todo = []
        for r in expired:
            node = self.journal.node(r.node)
            if node is None or node.state is not NodeState.STOPPED:
                log.warning("%s: not terminated: not a stopped node of the warm pool", r.node)
                continue
            todo.append((self.journal.record(r.node, NodeState.DRAINING, self.clock(), detail=r.reason), r.reason))
        self._finish_drains(todo, out)

    # -- the cloud's notices, the scheduler's asks -----------------------------------------
    def retire_doomed(self, r: Retire, out: Outcomes) -> None:
        """A node the cloud is taking back (or put at risk): its removal ordered with the notice
        as cause (journalled first: a later pass never orders it twice), disabled so no new job
        lands on it, and on a spot interruption its rerunnable jobs requeued at once, those
        sent back once too often bound to on-demand nodes (``r.moves``, planned)."""
        if r.order:
            log.warning("%s: %s notice: %s: disabling it and ordering its removal", r.node, r.cloud, r.reason)
            self.journal.set_order("remove", r.node, on=True, cause=(r.kind.value, r.reason))
        try:
            self.scheduler.disable_host(r.node, f"{r.cloud} {r.kind.value} notice")
        except SchedulerError as err:  # the order stands; the drain disables it again
            log.error("%s: could not disable it in %s: %s", r.node, self.scheduler.name, err)
        if not r.requeue:
            return
        pushed = self._requeue(r.node, out)
        for move in r.moves:
            if move.job in pushed:
                self.bind(move, out)

    def _requeue(self, name: str, out: Outcomes) -> set[int]:
        """Requeue the node's rerunnable jobs, each interruption counted; the jobs sent back."""
        try:
            done = self.scheduler.requeue(name)
        except SchedulerError as err:  # the node goes anyway: said, and the pass goes on
            log.error("%s: could not requeue its jobs: %s", name, err)
            out.failed[name] = f"requeue failed: {err}"
            return set()
        jobs = [job_number(p) for p in done.pushed]
        if done.pushed:
            log.warning("%s: requeued job %s: they start again on another node", name, ", ".join(done.pushed))
            self.journal.count_interruptions(jobs, self.clock())
            out.requeued += list(done.pushed)
        if done.not_restartable:
            ids = ", ".join(str(j) for j in done.not_restartable)
            log.error("ALARM: %s: job %s not rerunnable: lost with the node unless it ends in time", name, ids)
        return set(jobs)

    def give_back(self, d: Decline, out: Outcomes) -> None:
        """Give one node the scheduler asked for back to it (``give_back_all``)."""
        self.give_back_all([d], out)

    def give_back_all(self, declines: Sequence[Decline], out: Outcomes) -> None:
        """Give nodes the scheduler asked for back to it (their jobs wait again): one release for
        the nodes that share a reason (the driver splits a long list into its commands' batches:
        Slurm's ``scontrol update`` names at most a hundred), not one a node. Each ask is answered
        once its release went through, else tried again later (``askplan.release_retry_at``)."""
        by_reason: dict[str, list[Decline]] = {}
        for d in declines:
            by_reason.setdefault(d.reason, []).append(d)
        for reason, group in by_reason.items():
            for d in group:
                log.warning("%s: given back to %s: %s", d.node, self.scheduler.name, reason)
            try:
                self.scheduler.release([d.node for d in group], reason)
            except SchedulerError as err:
                attempts = {a.node: a.attempts for a in self.journal.asks()}
                for d in group:
                    retry = release_retry_at(1 + attempts.get(d.node, 0), self.clock())
                    log.error("%s: cannot give it back (%s); tried again in %.0f s", d.node, err, retry - self.clock())
                    self.journal.ask_failed(d.node, d.since, retry)
                    out.failed[d.node] = f"give back failed: {err}"
                continue
            for d in group:
                self.journal.answer_ask(d.node, d.since, f"given back: {reason}", self.clock())
                out.given_back.append(d.node)

    def hold_names(self, holds: NameHolds, out: Outcomes) -> None:
        """Keep names from the scheduler's next asks and open others to them (``HoldsNames``; a
        scheduler without it gets nothing: its asks past the limits are given back). A refusal is
        said; the next pass reads what stuck and plans again."""
        sched = self.scheduler
        if not isinstance(sched, HoldsNames):
            return
        if holds.reopen:
            try:
                sched.reopen(holds.reopen)
                out.reopened += holds.reopen
            except SchedulerError as err:
                log.error("cannot open %s to %s's asks again: %s", ", ".join(holds.reopen), sched.name, err)
        if holds.hold:
            try:
                sched.hold(holds.hold, holds.reason)
                out.held += holds.hold
            except SchedulerError as err:
                log.error("cannot hold %s from %s's asks: %s", ", ".join(holds.hold), sched.name, err)

    def bind(self, move: Move, out: Outcomes) -> None:
        """Bind a job spot interruptions keep sending back to on-demand nodes, once, the way its
        scheduler's driver does it (``BindsOnDemand``): a binding that fails is said (ALARM) and
        not tried again; a driver that cannot bind leaves the job as it is, said once."""
        sched = self.scheduler
        if not isinstance(sched, BindsOnDemand):
            log.warning(
                "job %d: %s; %s cannot bind a job to on-demand nodes: it may land on spot again",
                move.job,
                move.reason,
                sched.name,
            )
        else:
            assert self.groups is not None
            try:
                how = sched.bind_on_demand(move.job, move.hard_requests, self.groups)
            except SchedulerError as err:
                log.error("ALARM: job %d: %s; cannot bind it to on-demand nodes: %s", move.job, move.reason, err)
            else:
                log.warning("job %d: %s: %s", move.job, move.reason, how)
                out.moved.append(move.job)
        self.journal.mark_moved(move.job)

    def tag_groups(self, tags: Sequence[GroupTag]) -> str | None:
        """Give the planned workers their node group's tag, in one call to a cloud that
        ``TagsGroups``: said per group when done. The cloud's error when it refused: said once,
        fails no node (a later pass, finding them untagged still, plans them again: ``tags_due``)."""
        cloud = self.cloud
        if not tags or not isinstance(cloud, TagsGroups):
            return None
        try:
            cloud.tag_groups({t.instance_id: t.group for t in tags})
        except CloudError as err:  # the workers serve as they did; their tags wait
            names = ", ".join(t.node for t in tags[:5]) + (f" and {len(tags) - 5} more" if len(tags) > 5 else "")
            log.warning(
                "%s: cannot tag them with their node group (%s): %s; tried again in %s",
                names,
                TAG_GROUP,
                err,
                minutes(TAG_RETRY),
            )
            return str(err)
        for line in describe_tags(tags):
            log.info("tagged %s", line.removeprefix("tag "))
        return None

    # -- reconcile -----------------------------------------------------------------------
    def repair(self, r: Repair, out: Outcomes) -> None:
        """Carry out one repair planned by ``elb.core.reconcile.repairs_of``."""
        log.warning("reconcile %s: %s: %s", r.node, r.kind.value, r.reason)
        out.repaired.append(f"{r.node}: {r.kind.value} ({r.reason})")
        j = self.journal
        inst = r.instance
        node = j.node(r.node)
        if r.kind in (RepairKind.PROVISION, RepairKind.ADOPT):
            assert inst is not None
            node = self._record_running(r.node, inst, r.reason, group=r.group)
            busy = None
            if r.work is not None:  # this pass's read showed it busy: remembered, as for any node it shows so
                self.journal.mark_seen(self.clock(), busy=[r.node])
                node, busy = self._node(r.node), {r.node: r.work}
            self.provision([node], out, busy=busy)
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
            if inst is None or self._witnessed([r.node], out):  # an instance not running runs no job
                self._finish_interrupted_drain(node, r.reason, out)
        elif r.kind is RepairKind.UNREACHABLE:
            assert node is not None
            if not self._witnessed([r.node], out):
                return
            # The safe drain, from the master's side: the node itself is only asked whether job
            # processes run there (when the scheduler showed it busy), never changed.
            node = j.record(r.node, NodeState.DRAINING, self.clock(), detail=r.reason)
            self._finish_interrupted_drain(node, r.reason, out)

    def _deregister_only(self, node: Node | None, r: Repair, out: Outcomes) -> None:
        """Take a node whose instance is gone out of the scheduler, hosts and exports (master side only)."""
        name = r.node
        res = self._remove_play(_master_side(node, name))
        if res is None or not res.ok:
            out.failed[name] = f"deregistration failed: {_describe(res)}"
            return
        self._out_of_service({name: r.reason})
        if node is not None and node.state not in (NodeState.TERMINATED, NodeState.FAILED):
            self.journal.record(name, NodeState.FAILED, self.clock(), detail=r.reason)

    def _finish_interrupted_drain(self, node: Node, reason: str, out: Outcomes) -> None:
        name = node.name
        if name not in self.scheduler.listed([name]):
            if node.state is NodeState.DRAINING:
                # The deregistration play may have stopped after the scheduler and before the
                # hostgroup, /etc/hosts and the exports: run it again (it is idempotent), then terminate.
                self.finish_drain(node, reason, out)
                return
            # Deregistered: the deregistration went through before elb stopped.
            if node.state is not NodeState.DEREGISTERED:
                self.journal.record(name, NodeState.DEREGISTERED, self.clock(), detail="already out of the scheduler")
            if self._terminate(node, reason, out, failed=False):
                out.removed.append(name)
            return
        if self._drained(name, reason, "drain abandoned: {}", out):
            self.finish_drain(node, reason, out)
        else:
            out.kept.append(name)


__all__: Sequence[str] = ("Actuator", "Outcomes", "node_spec")
