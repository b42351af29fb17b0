"""elb's pass behind Slurm's power saving (``scheduler: slurm``): the imperative shell.

take Slurm's requests into the journal -> read Slurm (``sinfo``, ``squeue``) -> remember what it
showed -> list the cloud's workers -> plan (``elb.slurm.plan.plan``, pure) -> carry out -> record.
Launching, provisioning, draining and removing run in the background (``elb.executor``), one
operation per node, each journalled step by step, so that a restart takes every node up where
it was left. The quick changes of Slurm's node states (``scontrol update``) run in the pass.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from elb.actuator import Outcomes, launch_instances, node_spec, ready_specs, record_running
from elb.backoff import compute as compute_backoff
from elb.config import Config
from elb.daemon import Counters, LastPass, PassResult
from elb.executor import Executor
from elb.interfaces import Cloud, CloudError, HostResult, Instance, NodeSpec, Outcome
from elb.journal import Journal
from elb.logs import Alarms
from elb.metrics import PassMetrics
from elb.model import Node, NodeState, Plan, Removal
from elb.planner import Drain, drain_verdict
from elb.policy.base import Policy
from elb.policy.grouped import policy_for
from elb.policy.view import oldest_wait
from elb.slurm.commands import SlurmCommands, SlurmError, SlurmRead
from elb.slurm.intake import take
from elb.slurm.plan import SlurmInputs, SlurmPlan, plan
from elb.slurm.view import jobs_of, node_up, snapshot
from elb.timeline import Step

log = logging.getLogger("elb.slurm")

_REASON_CHARS = re.compile(r"[^A-Za-z0-9 _.,:;=()/+-]")
# How often a bring-up reads Slurm while it waits for the new nodes' slurmd to register.
REGISTER_POLL = 1.0


class PlaybookReport(Protocol):
    def for_hosts(self, names: Sequence[str]) -> dict[str, HostResult]: ...


class PlaybookRunner(Protocol):
    """Runs one of elb's playbooks over nodes (``elb.provision.ansible.AnsibleProvisioner``)."""

    def run(
        self,
        playbook: str,
        *,
        workers: Sequence[NodeSpec] = (),
        new_nodes: Sequence[NodeSpec] = (),
        old_nodes: Sequence[NodeSpec] = (),
        on_reached: Callable[[str], None] | None = None,
    ) -> PlaybookReport: ...


def slurm_reason(text: str) -> str:
    """``text`` as a reason ``scontrol`` takes (and ``SlurmCommands`` accepts)."""
    cleaned = _REASON_CHARS.sub(" ", f"elb: {text}").strip()
    return cleaned[:200] or "elb"


def gather(
    config: Config,
    journal: Journal,
    read: SlurmRead,
    instances: Sequence[Instance],
    in_flight: frozenset[str],
    *,
    watched_since: float | None = None,
) -> SlurmInputs:
    """The planner's inputs: this read of Slurm and the cloud's workers, with what the journal
    holds (node records, Slurm's open requests, history, the back-off its bring-ups set).
    ``watched_since``: this run's first live pass (None: trust the journal's times)."""
    b = config.backoff
    return SlurmInputs(
        read=read,
        nodes=tuple(journal.nodes(include_gone=True)),
        instances=tuple(instances),
        requests=tuple(journal.slurm_requests(open_only=True)),
        history=journal.history(),
        backoff=compute_backoff(journal.bring_up_events(), initial=b.initial, maximum=b.max),
        in_flight=in_flight,
        watched_since=watched_since,
    )


def dry_run(config: Config, slurm: SlurmCommands, journal: Journal, now: float) -> SlurmPlan:
    """What a pass would do now, read-only: Slurm read, the journal read (requests Slurm wrote
    since the last pass are not taken), the cloud not asked (no orphans, no take-ups)."""
    inputs = gather(config, journal, slurm.read(), (), frozenset())
    return plan(inputs, config, policy_for(config), now)


class SlurmBalancer:
    """Wires Slurm's requests and state, the policy's cost rule, the cloud, the playbooks and
    the journal together (the Slurm counterpart of ``elb.daemon.Balancer``)."""

    def __init__(
        self,
        config: Config,
        *,
        slurm: SlurmCommands,
        journal: Journal,
        cloud: Cloud,
        provisioner: PlaybookRunner,
        policy: Policy | None = None,
        clock: Callable[[], float] = time.time,
        executor: Executor | None = None,
    ) -> None:
        self.config = config
        self.slurm = slurm
        self.journal = journal
        self.cloud = cloud
        self.provisioner = provisioner
        self.policy = policy or policy_for(config)
        self.clock = clock
        self.executor = executor or Executor(inline=True)
        self.stopping = threading.Event()
        self.metrics = PassMetrics()
        self.last = LastPass()  # the figures of the last pass, for the metrics (elb.metrics)
        self.counters = Counters()
        self.failed_in_a_row = 0
        self.alarms = Alarms(log)  # ALARM lines once per change (elb.logs)
        self.last_plan: SlurmPlan | None = None
        self.watched_since: float | None = None  # this run's first live pass
        reap = getattr(provisioner, "reap_leftovers", None)
        if callable(reap):
            reap()

    # -- the pass ------------------------------------------------------------------------------
    def run_pass(self, *, dry_run: bool = False) -> PassResult:
        """One pass; any exception in it is a failed pass (logged, counted), never the daemon's end."""
        started = time.monotonic()
        now = self.clock()
        try:
            self.journal.ensure_open()
            result = self._pass(dry_run)
        except SlurmError as err:
            result = self._failed(now, f"reading Slurm: {err}")
        except CloudError as err:
            result = self._failed(now, f"listing the cloud's workers: {err}")
        except Exception as err:
            log.exception("pass failed")
            result = self._failed(now, f"{type(err).__name__}: {err}")
        self.last.duration = time.monotonic() - started
        if not dry_run:
            self.metrics.observe_pass(self.last.duration, result.ok)
        self.alarms.pass_ended(now, result.ok)
        return result

    def _pass(self, dry_run: bool) -> PassResult:
        now = self.clock()
        if not dry_run:
            self._take_requests(now)
        read = self.slurm.read()
        instances = () if dry_run else tuple(self.cloud.list_workers())
        if not dry_run:
            self._remember_seen(read, now)
            if self.watched_since is None:
                self.watched_since = now
        inputs = gather(
            self.config, self.journal, read, instances, self.executor.in_flight(), watched_since=self.watched_since
        )
        p = plan(inputs, self.config, self.policy, now)
        self.last_plan = p
        result = PassResult(True, now, Plan(reason="; ".join(p.describe())))
        if dry_run:
            return result
        self._carry_out(p, inputs, result.outcomes)
        self.collect_finished(result)
        self.failed_in_a_row = 0
        self._count(result, inputs, p)
        self.journal.record_pass(now, True, result.summary(), len(result.outcomes.added), len(result.outcomes.removed))
        return result

    def _take_requests(self, now: float) -> None:
        intake = take(self.config.slurm.requests, self.journal, now)
        for r in intake.new:
            log.info("Slurm asks to %s %s", r.kind.value, ", ".join(r.nodes))
        for bad in intake.bad:
            log.error("a request file elb cannot read was set aside: %s", bad)

    def _remember_seen(self, read: SlurmRead, now: float) -> None:
        busy = {n.name for n in read.nodes if n.busy} | {name for j in read.jobs for name in j.nodelist}
        up = [n.name for n in read.nodes if node_up(n)]
        self.journal.mark_seen(now, busy=sorted(busy), up=up)

    def _count(self, result: PassResult, inputs: SlurmInputs, p: SlurmPlan) -> None:
        """The figures of a good pass the metrics read: Slurm's jobs waiting for nodes, the
        back-off the pass planned with, the launches it held, what the operations achieved."""
        pending = snapshot(inputs.read.jobs, inputs.read.nodes, result.now).pending
        last = self.last
        last.pending_jobs = len(pending)
        last.pending_slots = sum(j.total_slots for j in pending)
        last.oldest_wait = oldest_wait(pending, result.now)
        last.backoff_rounds = inputs.backoff.rounds
        last.backoff_wait = inputs.backoff.waiting(result.now)
        last.last_good = result.now
        self.counters.launches_held += p.launches_held
        self.counters.count(result.outcomes)

    def _failed(self, now: float, error: str) -> PassResult:
        self.failed_in_a_row += 1
        self.counters.failed_passes += 1
        level = logging.ERROR if self.failed_in_a_row >= self.config.failed_passes_alarm else logging.WARNING
        self.alarms.log_at(
            level,
            "failed passes",
            f"pass failed ({self.failed_in_a_row} in a row), nothing changed: {error}",
            now,
            changes_with=None,
        )
        try:
            self.journal.record_pass(now, False, error)
        except Exception as err:
            log.error("cannot journal the failed pass: %s", err)
        return PassResult(False, now, error=error)

    def collect_finished(self, result: PassResult) -> None:
        """Merge what the background operations that ended achieved into ``result``."""
        done = self.executor.collect()
        result.outcomes.absorb(done)
        self.metrics.observe_added(self.journal, done.added)

    # -- carrying the plan out -----------------------------------------------------------------
    def _carry_out(self, p: SlurmPlan, inputs: SlurmInputs, out: Outcomes) -> None:
        now = self.clock()
        for line in p.notes:
            log.info("%s", line)
        for r in p.forget:
            log.warning("%s: %s; failed", r.node, r.reason)
            out.repaired.append(f"{r.node}: forget ({r.reason})")
            self.journal.record(r.node, NodeState.FAILED, now, detail=r.reason)
        for r in p.give_back:
            log.warning("%s: given back to Slurm: %s", r.node, r.reason)
            self._give_back(r, out)
        for request_id, outcome in p.close:
            self.journal.close_slurm_request(request_id, now, outcome)
        if p.orphans:
            ids = [i.instance_id for i in p.orphans]
            log.warning("terminating instances no record accounts for: %s", ", ".join(ids))
            out.repaired += [f"{i.name}: orphan ({i.instance_id})" for i in p.orphans]
            try:
                self.cloud.terminate(ids)
            except CloudError as err:
                log.error("terminating orphans failed: %s", err)
        if not self.stopping.is_set():
            self._start_operations(p, out)

    def _start_operations(self, p: SlurmPlan, out: Outcomes) -> None:
        """The plan's background operations (one per node): bring-ups, take-outs, drains, removals."""
        if p.launch:
            names = p.launch
            self.executor.submit(names, f"launch {', '.join(names)}", lambda o: self.launch(names, p, o))
        for b in p.boot:
            log.info("%s: %s", b.node, b.reason)
            out.repaired.append(f"{b.node}: take up ({b.reason})")
            self.executor.submit([b.node], f"boot {b.node}", functools.partial(self._bring_up, [(b.node, b.instance)]))
        for r in p.lost:
            log.warning("%s: %s; giving it back to Slurm and taking it out", r.node, r.reason)
            if self._give_back(r, out):
                self.executor.submit([r.node], f"take out {r.node}", functools.partial(self.take_out, r.node, r.reason))
        for r in p.drain:
            self.executor.submit([r.node], f"drain {r.node}", functools.partial(self.drain, r.node, r.reason))
        for r in p.remove:
            self.executor.submit([r.node], f"remove {r.node}", functools.partial(self.remove, r.node, r.reason))

    def _give_back(self, r: Removal, out: Outcomes) -> bool:
        """``POWER_DOWN_FORCE`` in Slurm: the node powers down and can be asked for again; a job
        waiting for it is requeued. False (said in ``out``) when scontrol failed."""
        try:
            self.slurm.power_down([r.node], slurm_reason(r.reason), force=True)
        except SlurmError as err:
            log.error("%s: cannot power it down in Slurm: %s", r.node, err)
            out.failed[r.node] = f"give back failed: {err}"
            return False
        return True

    # -- operations (background) -----------------------------------------------------------------
    def launch(self, names: Sequence[str], p: SlurmPlan, out: Outcomes) -> None:
        """Launch the nodes Slurm asked for, then bring them up in one playbook run."""
        for name in names:
            self.journal.record(
                name,
                NodeState.REQUESTED,
                self.clock(),
                detail=p.launch_reason,
                group=p.groups.get(name),
                step=Step.REQUESTED,
            )
        launched = launch_instances(self.journal, self.cloud, self.clock, names, out)
        self._bring_up([(i.name, i) for i in launched], out)

    def _bring_up(self, started: Sequence[tuple[str, Instance]], out: Outcomes) -> None:
        """Running instances -> their address in Slurm -> provisioned (slurmd up) -> ready."""
        specs: list[NodeSpec] = []
        for name, inst in started:
            node = record_running(self.journal, self.clock, name, inst)
            spec = node_spec(node)
            if spec is None:
                self._fail(node, "no private address", out)
                continue
            try:
                self.slurm.set_address(name, spec.private_ip)
            except SlurmError as err:
                self._fail(node, f"setting its address in Slurm: {err}", out)
                continue
            self.journal.record(name, NodeState.PROVISIONING, self.clock(), step=Step.PROVISIONING)
            specs.append(spec)
        if not specs:
            return
        report = self.provisioner.run(
            self.config.slurm.add_playbook,
            new_nodes=specs,
            workers=ready_specs(self.journal, [s.name for s in specs]),
            on_reached=lambda n: self.journal.reach(n, Step.REACHABLE, self.clock()),
        )
        results = report.for_hosts([s.name for s in specs])
        provisioned: list[NodeSpec] = []
        for s in specs:
            res = results.get(s.name, HostResult(s.name, Outcome.FAILED, message="no result from provisioning"))
            if res.ok:
                self.journal.reach(s.name, Step.PROVISIONED, self.clock())
                provisioned.append(s)
            else:
                why = f"provisioning failed at {res.task or 'a task'}: {res.message or res.outcome.value}"
                self._fail(self._record(s.name), why, out)
        if not provisioned:
            return
        unheard = self._await_registration([s.name for s in provisioned])
        if unheard is None:
            return  # elb stops: the next run takes the nodes up again where the journal left them
        for s in provisioned:
            if s.name in unheard:
                self._fail(self._record(s.name), unheard[s.name], out)
                continue
            self.journal.record(s.name, NodeState.READY, self.clock(), step=Step.REGISTERED)
            out.added.append(s.name)
            log.info("%s: ready (%s)", s.name, s.private_ip)

    def _record(self, name: str) -> Node:
        node = self.journal.node(name)
        assert node is not None, name
        return node

    def _await_registration(self, names: Sequence[str]) -> dict[str, str] | None:
        """Wait until Slurm has each node up (its slurmd registered with the controller), for at
        most ``slurm.register_timeout``: the nodes that are not by then, each with why; None
        when elb stops meanwhile. A slurmd that runs but never registers would otherwise hold
        its node (and the job waiting for it) until Slurm's ResumeTimeout."""
        timeout = self.config.slurm.register_timeout
        deadline = time.monotonic() + timeout
        waiting = set(names)
        seen: dict[str, str] = {}
        while True:
            try:
                read = self.slurm.read()
            except SlurmError as err:
                seen.update((name, f"reading Slurm: {err}") for name in waiting)
            else:
                for name in sorted(waiting):
                    sn = read.node(name)
                    if sn is not None and node_up(sn):
                        waiting.discard(name)
                    else:
                        seen[name] = "not in Slurm" if sn is None else sn.shown
            if not waiting:
                return {}
            if time.monotonic() >= deadline:
                return {
                    name: f"its slurmd did not register within {timeout:g} s of its play (Slurm: {seen[name]})"
                    for name in waiting
                }
            if self.stopping.wait(REGISTER_POLL):
                return None

    def take_out(self, name: str, why: str, out: Outcomes) -> None:
        """A ready node Slurm lost (given back to Slurm already): out of hosts and exports,
        terminated, journalled failed."""
        node = self.journal.node(name)
        if node is not None and node.state is NodeState.READY:
            self._fail(node, why, out)

    def _fail(self, node: Node, why: str, out: Outcomes) -> None:
        """A node that did not come up: out of hosts and exports again, terminated, journalled
        failed (the next pass gives it back to Slurm, or launches it again when the back-off allows)."""
        log.error("%s: %s; removing it", node.name, why)
        self._deregister_and_terminate(node, why, out, final=NodeState.FAILED)
        out.failed[node.name] = why

    def drain(self, name: str, reason: str, out: Outcomes) -> None:
        """Safe drain: DRAIN, read Slurm again, no job on it (one just allocated included) ->
        power it down after its jobs (``POWER_DOWN_ASAP``); a job there -> undrain, kept."""
        node = self.journal.node(name)
        if node is None or node.state not in (NodeState.READY, NodeState.DRAINING):
            return
        self.journal.record(name, NodeState.DRAINING, self.clock(), detail=reason)
        try:
            self.slurm.drain(name, slurm_reason(reason))
            read = self.slurm.read()
        except SlurmError as err:
            log.error("%s: drain: %s", name, err)
            self._keep(name, f"drain failed: {err}")
            out.failed[name] = f"drain failed: {err}"
            return
        sn = read.node(name)
        if sn is not None and (sn.powered_down or sn.powering_down):
            return  # Slurm takes it down already; the next passes remove it
        jobs = [j for job in read.jobs_on(name) for j in jobs_of(job) if j.host == name]
        verdict = drain_verdict(jobs, sn.cpus_allocated if sn is not None else 0)
        if sn is None or verdict.verdict is Drain.KEEP:
            why = verdict.reason if sn is not None else "Slurm lost it"
            try:
                self.slurm.undrain(name)
            except SlurmError as err:
                log.error("%s: undrain: %s", name, err)
            self._keep(name, f"kept: {why} while draining")
            out.kept.append(name)
            return
        try:
            self.slurm.power_down([name], slurm_reason(reason))
        except SlurmError as err:
            log.error("%s: power down: %s", name, err)
            self.slurm.undrain(name)
            self._keep(name, f"power down failed: {err}")
            out.failed[name] = f"power down failed: {err}"
            return
        log.info("%s: drained and powering down: %s", name, reason)

    def _keep(self, name: str, why: str) -> None:
        self.journal.record(name, NodeState.READY, self.clock(), detail=why)

    def remove(self, name: str, reason: str, out: Outcomes) -> None:
        """Slurm has the node powered down: out of hosts and exports, then terminated."""
        found = self.journal.node(name)
        if found is None or not found.state.alive:
            return
        node = found
        if node.state is not NodeState.DRAINING:
            node = self.journal.record(name, NodeState.DRAINING, self.clock(), detail=reason)
        if self._deregister_and_terminate(node, reason, out, final=NodeState.TERMINATED):
            out.removed.append(name)
            self.journal.note_removal(self.clock())

    def _deregister_and_terminate(self, node: Node, why: str, out: Outcomes, *, final: NodeState) -> bool:
        """The remove play (hosts lines, exports; the node itself when reachable), then the
        instance terminated: Slurm runs nothing on it, so its bill stops even if the play
        failed (the ALARM says what may be left on the master). True when terminated."""
        spec = node_spec(node) or NodeSpec(node.name, "0.0.0.0")  # noqa: S104 (master-side only)
        report = self.provisioner.run(
            self.config.slurm.remove_playbook, old_nodes=[spec], workers=ready_specs(self.journal, [node.name])
        )
        res = report.for_hosts([node.name]).get(node.name)
        detail = why
        if res is None or not res.ok:
            what = f"{res.task or 'a task'}: {res.message or res.outcome.value}" if res else "no result"
            log.error("ALARM: %s: the remove play failed (%s); terminating it anyway", node.name, what)
            detail = f"{why}; remove play failed ({what}): its hosts lines and exports may be left"
        else:
            self.journal.record(node.name, NodeState.DEREGISTERED, self.clock(), detail=why)
        if node.instance_id is not None:
            try:
                self.cloud.terminate([node.instance_id])
            except CloudError as err:
                log.error("%s: terminate %s failed: %s", node.name, node.instance_id, err)
                out.failed[node.name] = f"terminate failed: {err}"
                return False
        self.journal.record(node.name, final, self.clock(), detail=detail)
        return True


__all__: Sequence[str] = ("SlurmBalancer", "dry_run", "gather", "slurm_reason")
