"""The launch back-off is kept per node group: one group's failed bring-ups (a bad AMI, a launch
template no instance boots from) hold back that group's launches, never another group's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from elb.core.backoff import Backoff, Backoffs, Cause, by_group
from elb.core.interfaces import HostResult, NodeSpec
from elb.core.model import Event, NodeState, Plan
from elb.core.planner import limit_launches
from tests.clock import Clock
from tests.unit.factories import T0, pending
from tests.unit.fakes import FakeProvisioner
from tests.unit.test_policy_groups import GPU, SMALL, balancer, config, gpu_job

R, OK, F = NodeState.REQUESTED, NodeState.READY, NodeState.FAILED


def ev(t: float, node: str, state: NodeState, detail: str | None = None) -> Event:
    return Event(t, node, state, None, detail)


def test_each_group_folds_its_own_bring_ups() -> None:
    groups = {"node001": "gpu", "node002": "gpu", "node003": "small"}
    events = [
        ev(0, "node001", R),
        ev(0, "node003", R),
        ev(40, "node001", F, "provisioning failed: bad AMI"),
        ev(50, "node003", OK),
        ev(200, "node002", R),
        ev(240, "node002", F, "provisioning failed: bad AMI"),
    ]
    b = by_group(events, groups.__getitem__, initial=60, maximum=3600)
    assert b.of("gpu").rounds == 2 and b.of("gpu").cause is Cause.PROVISION
    assert not b.of("small").active
    assert not b.of("never-launched").active
    assert b.rounds == 2  # the worst group's, for the metrics
    assert b.waiting(240) == 120.0


def test_a_group_backed_off_holds_only_its_own_launches() -> None:
    held = Backoff(2, T0 + 300, Cause.PROVISION, "node001: provisioning failed: bad AMI")
    backoffs = Backoffs(groups=(("gpu", held),))
    plan = Plan(
        add=4,
        add_names=("node004", "node005", "node006", "node007"),
        add_reason="jobs wait",
        add_groups={"node004": "gpu", "node005": "small", "node006": "gpu", "node007": "small"},
    )
    out = limit_launches(plan, backoffs, T0, group_of=lambda name: plan.add_groups.get(name, "small"))
    assert out.add_names == ("node005", "node007")
    assert out.add == 2
    assert dict(out.add_groups) == {"node005": "small", "node007": "small"}
    assert "gpu" in out.reason and "failed launch round" in out.reason


def test_the_default_applies_to_every_group_without_its_own() -> None:
    every = Backoffs(default=Backoff(1, T0 + 100, Cause.LAUNCH, "n1: x"))
    plan = Plan(add=3, add_names=("a", "b", "c"), add_reason="jobs wait")
    assert limit_launches(plan, every, T0, group_of=lambda _n: "small").add == 0
    assert limit_launches(plan, every, T0 + 100, group_of=lambda _n: "small").add == 1  # a probe


class GpuNodesFail(FakeProvisioner):
    """Every node of the gpu group fails its play (a broken image of that group alone)."""

    def add_nodes(
        self,
        playbook: str,
        nodes: Sequence[NodeSpec],
        existing: Sequence[NodeSpec],
        on_reached: Callable[[str], None] | None = None,
    ) -> dict[str, HostResult]:
        for n in nodes:
            if n.group == "gpu":
                self.fail[n.name] = "Register the exec host"
        return super().add_nodes(playbook, nodes, existing, on_reached)


def test_the_daemon_keeps_launching_a_group_while_another_is_backed_off(tmp_path: Path) -> None:
    # priced: a job either group can run goes to the cheaper small nodes
    cfg = config(tmp_path, {**SMALL, "price_per_hour": 0.1}, {**GPU, "price_per_hour": 3.0})
    bal, sge, _cloud, journal = balancer(cfg, [gpu_job(1)])
    bal.provisioner = GpuNodesFail(sge)
    clock = Clock(T0)
    bal.clock = clock
    assert bal.run_pass().ok
    gpu = journal.nodes(include_gone=True)
    assert gpu and all(n.group == "gpu" and not n.state.alive for n in gpu), gpu
    # Work for the small group arrives while the gpu group is backed off: it launches at once.
    sge.jobs.append(pending(2, 30 * 60, slots=2, tasks=3))
    clock.t = sge.now = T0 + 10  # within the gpu group's wait
    second = bal.run_pass()
    assert second.ok and second.planned is not None and second.planned.scaling is not None
    scaling = second.planned.scaling
    assert scaling.add >= 1, scaling.describe()
    assert {journal.node(n).group for n in scaling.add_names} == {"small"}  # type: ignore[union-attr]
    # The gpu job still waits for its own group's wait to end, and the plan says so.
    assert "launch of group gpu backed off" in scaling.reason, scaling.reason
    assert bal.last.backoff_rounds == 1
