"""``elb simulate --scheduler slurm``: elb replayed behind Slurm, where Slurm's power saving
(``elb.simulate.powersave``) names the nodes and the planner's asks path acts on them: the launches
are Slurm's asks, the names past elb's room are held from Slurm (what it asked past ``max_nodes``
before is given back, its jobs held a while), idle nodes go by elb's rule or Slurm's SuspendTime,
and the outcome is that of the Grid Engine replay's within reason."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.askplan import Decline, NameHolds
from elb.core.model import History, Host, Job, JobPhase, Node, NodeState, QueueInstance, Snapshot
from elb.core.planner import PassPlan
from elb.core.scheduler import AskKind, NamePool, PoolName
from elb.core.warmpool import WarmPool
from elb.simulate.engine import SimOutcome, SimSettings, Simulator
from elb.simulate.groups import one_group
from elb.simulate.powersave import CRED_EXPIRE, Asked, Behind, PowerSaving
from elb.simulate.runner import build_policy, prepare, replay, with_param
from elb.simulate.swf import SimJob, Workload

BOOT = 300.0


def _replay(
    jobs: list[SimJob],
    *,
    scheduler: Behind,
    max_nodes: int = 4,
    sets: dict[str, str] | None = None,
    **kw: object,
) -> tuple[Simulator, SimOutcome]:
    policy = build_policy("elb", billing="second", slots_per_node=8, boot_time=BOOT, max_nodes=max_nodes)
    for key, value in (sets or {}).items():
        policy = with_param(policy, key, value)
    settings = SimSettings(
        slots_per_node=8,
        max_nodes=max_nodes,
        boot_time=BOOT,
        record=True,
        scheduler=scheduler,
        **kw,  # type: ignore[arg-type]
    )
    sim = Simulator(jobs, policy, settings)
    return sim, sim.run()


def _waiting(job_id: int, submitted: float, slots: int = 8) -> Job:
    return Job(job_id, f"job{job_id}", "u", "PD", JobPhase.WAITING, slots, submitted=submitted)


# -- the model ----------------------------------------------------------------------------------


def test_slurm_asks_for_the_nodes_its_waiting_jobs_need_once_and_holds_them_after_a_give_back() -> None:
    power = PowerSaving(nodes=10, slots_per_node=8)
    snapshot = Snapshot(0.0, (_waiting(1, 0.0), _waiting(2, 0.0), _waiting(3, 0.0, slots=4)), ())
    asked, asks = power.ask(Asked(), snapshot, (), History(), 0.0)
    assert [(a.node, a.kind) for a in asks] == [
        ("node001", AskKind.WANT),
        ("node002", AskKind.WANT),
        ("node003", AskKind.WANT),
    ]
    # Asked again: the nodes it asked for are powering up in its view, so nothing new.
    again, asks2 = power.ask(asked, dataclasses.replace(snapshot, now=30.0), (), History(), 30.0)
    assert [a.node for a in asks2] == ["node001", "node002", "node003"]
    assert again.asked == 3
    # elb gives node003 back: the jobs that waited then are held for cred_expire, and not asked for.
    plan = PassPlan(declines=(Decline("node003", 0.0, "max_nodes 2 reached"),))
    held = power.answered(again, plan, 30.0)
    assert set(held.wants) == {"node001", "node002"} and held.given_back == 1
    during, asks3 = power.ask(held, snapshot, (), History(), 30.0 + CRED_EXPIRE - 1)
    assert [a.node for a in asks3] == ["node001", "node002"]
    assert power.wake(during, snapshot, (), History(), 60.0) == 30.0 + CRED_EXPIRE
    _, asks4 = power.ask(during, snapshot, (), History(), 30.0 + CRED_EXPIRE)
    assert [a.node for a in asks4][2:] == ["node003"]  # the hold is over: asked for again


def test_slurm_asks_for_the_first_nodes_of_its_list_neither_up_nor_powering_up() -> None:
    power = PowerSaving(nodes=3, slots_per_node=8)
    up = Node("node002", NodeState.READY, 0.0, ready_at=300.0, slots=8)
    gone = Node("node001", NodeState.TERMINATED, 0.0, slots=8)
    pooled = Node("node003", NodeState.STOPPED, 0.0, slots=8, stopped_at=500.0)
    host = Host("node002", (QueueInstance("all.q", "node002", 8, 8),), num_proc=8)
    jobs = tuple(_waiting(i, 600.0) for i in (1, 2, 3))
    asked, asks = power.ask(Asked(), Snapshot(600.0, jobs, (host,)), (gone, up, pooled), History(), 600.0)
    assert [a.node for a in asks] == ["node001", "node003"]  # the list has three nodes, one is up
    assert asked.asked == 2


def test_slurm_asks_for_no_name_elb_drained_and_the_pass_reads_which_it_may_pick() -> None:
    power = PowerSaving(nodes=4, slots_per_node=8)
    up = Node("node001", NodeState.READY, 0.0, ready_at=300.0, slots=8)
    host = Host("node001", (QueueInstance("all.q", "node001", 8, 8),), num_proc=8)
    assert power.names(Asked(), (up,)) == NamePool(tuple(PoolName(f"node00{i}") for i in (2, 3, 4)))
    # elb holds two names: Slurm's drain keeps them from its asks, and the read lists them held.
    hold = PassPlan(names=NameHolds(hold=("node003", "node004"), reason="no room within max_nodes 2"))
    drained = power.answered(Asked(), hold, 600.0)
    assert drained.drained == {"node003", "node004"}
    assert power.names(drained, (up,)) == NamePool((PoolName("node002"),), (PoolName("node003"), PoolName("node004")))
    snapshot = Snapshot(600.0, tuple(_waiting(i, 600.0) for i in (1, 2, 3)), (host,))
    asked, asks = power.ask(drained, snapshot, (up,), History(), 600.0)
    assert [a.node for a in asks] == ["node002"]  # three jobs wait, one name is open
    assert power.names(asked, (up,)) == NamePool((), (PoolName("node003"), PoolName("node004")))
    # elb reopens node004 (undrained): Slurm may ask for it again, and does.
    reopened = power.answered(asked, PassPlan(names=NameHolds(reopen=("node004",))), 630.0)
    assert reopened.drained == {"node003"}
    _, asks = power.ask(reopened, dataclasses.replace(snapshot, now=660.0), (up,), History(), 660.0)
    assert [a.node for a in asks] == ["node002", "node004"]


def test_slurm_releases_a_node_idle_its_suspend_time() -> None:
    power = PowerSaving(nodes=4, slots_per_node=8, suspend_time=600.0)
    node = Node("node001", NodeState.READY, 0.0, ready_at=300.0, last_busy_at=1000.0, slots=8)
    host = Host("node001", (QueueInstance("all.q", "node001", 8, 0),), num_proc=8)
    snapshot = Snapshot(1500.0, (), (host,))
    _, asks = power.ask(Asked(), snapshot, (node,), History(), 1500.0)
    assert asks == ()
    assert power.wake(Asked(), snapshot, (node,), History(), 1500.0) == 1600.0
    _, asks = power.ask(Asked(), dataclasses.replace(snapshot, now=1600.0), (node,), History(), 1600.0)
    assert [(a.node, a.kind) for a in asks] == [("node001", AskKind.RELEASE)]


# -- replays ------------------------------------------------------------------------------------


def test_behind_slurm_elb_launches_what_slurm_asks_for_not_its_own_count() -> None:
    """elb's ``launch_delay`` is its policy's count, which the asks path does not use: behind
    Grid Engine the job waits the delay and a boot, behind Slurm the boot alone (Slurm asked)."""
    jobs = [SimJob(1, 0.0, 600.0, 8), SimJob(2, 0.0, 600.0, 16)]
    sge_sim, sge = _replay(jobs, scheduler=Behind.SGE, sets={"launch_delay": "600"})
    slurm_sim, slurm = _replay(jobs, scheduler=Behind.SLURM, sets={"launch_delay": "600"})
    assert min(sge.waits) >= 600 + BOOT
    assert slurm.waits == [BOOT, BOOT]
    assert slurm.launches == slurm_sim.asked.asked == 3 and slurm_sim.asked.given_back == 0
    assert sge_sim.power is None and sge_sim.last_inputs is not None and sge_sim.last_inputs.asks is None
    assert slurm_sim.last_inputs is not None and slurm_sim.last_inputs.asks is not None
    assert slurm_sim.last_inputs.scheduler == "Slurm"


def test_behind_slurm_what_is_asked_past_max_nodes_is_given_back_and_every_job_runs() -> None:
    """A burst Slurm asks for before elb's first pass: what is past ``max_nodes`` is given back
    (its jobs held a while), the names past elb's room are held from then on, every job runs."""
    jobs = [SimJob(i, 0.0, 1800.0, 8) for i in range(1, 7)]
    sim, out = _replay(jobs, scheduler=Behind.SLURM, max_nodes=2, slurm_nodes=8)
    assert out.never_started == 0 and len(out.waits) == 6
    assert out.launches == 2  # never more than max_nodes up: two nodes run all six jobs in turn
    assert _peak(out) == 2
    assert (sim.asked.asked, sim.asked.given_back) == (6, 4)  # asked once each, no name asked again
    assert sim.asked.held_until == CRED_EXPIRE
    # With no more cloud nodes in slurm.conf than elb may launch, nothing is given back.
    fit_sim, fit = _replay(jobs, scheduler=Behind.SLURM, max_nodes=2)
    assert fit_sim.asked.given_back == 0 and fit.waits == out.waits


def test_behind_slurm_the_names_past_max_nodes_are_held_so_slurm_asks_for_none_to_be_given_back() -> None:
    """Waves of jobs, each wider than ``max_nodes``, on a slurm.conf with four times the cloud
    nodes: elb holds (drains) the names past its room at its first pass, so what is given back is
    at most what Slurm asked for before that pass, whatever the waves; the waits are those of a
    slurm.conf with no more cloud nodes than ``max_nodes``."""
    jobs = [SimJob(10 * w + i, 3000.0 * w + 10.0 * i, 900.0, 8) for w in range(4) for i in range(1, 7)]
    sim, out = _replay(jobs, scheduler=Behind.SLURM, max_nodes=2, slurm_nodes=8)
    fit_sim, fit = _replay(jobs, scheduler=Behind.SLURM, max_nodes=2)
    assert out.never_started == 0 and len(out.waits) == len(jobs) and _peak(out) == 2
    assert sim.asked.given_back <= 8 - 2
    assert sim.asked.drained == {f"node00{i}" for i in range(3, 9)}  # no room for them now
    assert out.waits == fit.waits and fit_sim.asked.given_back == 0


def test_behind_slurm_the_cluster_scales_back_to_zero_by_elbs_rule_or_slurms_suspend_time() -> None:
    jobs = [SimJob(1, 0.0, 600.0, 8), SimJob(2, 0.0, 600.0, 8), SimJob(3, 50000.0, 60.0, 8)]
    _, sge = _replay(jobs, scheduler=Behind.SGE, sets={"idle_factor": "4"})  # elb keeps an idle node 4 boots
    _, slurm = _replay(jobs, scheduler=Behind.SLURM, sets={"idle_factor": "4"})
    first = [n for n in slurm.nodes if n.launched_at < 50000.0]
    assert len(first) == 2 and all(n.terminated_at < 50000.0 for n in first)  # none up between the bursts
    assert [n.terminated_at for n in slurm.nodes] == [n.terminated_at for n in sge.nodes]
    assert all(n.terminated_at - (BOOT + 600.0) >= 4 * BOOT for n in first)
    # A SuspendTime shorter than elb's keep: Slurm releases the idle node and elb removes it.
    _, short = _replay(jobs, scheduler=Behind.SLURM, sets={"idle_factor": "4"}, suspend_time=120.0)
    ended = BOOT + 600.0
    assert all(ended + 120.0 <= n.terminated_at <= ended + 120.0 + 60.0 for n in short.nodes[:2])


def test_behind_slurm_a_node_stopped_into_the_warm_pool_is_started_again_when_slurm_asks_for_it() -> None:
    jobs = [SimJob(1, 0.0, 600.0, 8), SimJob(2, 2000.0, 600.0, 8), SimJob(3, 4000.0, 600.0, 8)]
    pool = WarmPool(max_nodes=2, restart_time=60.0)
    policy = build_policy("elb", billing="second", slots_per_node=8, boot_time=BOOT, max_nodes=2)
    settings = SimSettings(slots_per_node=8, max_nodes=2, boot_time=BOOT, record=True, scheduler=Behind.SLURM)
    sim = Simulator(jobs, policy, settings, groups=one_group(8, 2, pool))
    out = sim.run()
    assert (out.launches, out.stops, out.restarts) == (1, 2, 2)
    assert [n.name for n in out.nodes] == ["node001"] * 3
    assert out.waits == [BOOT, 40.0 + 60.0, 20.0 + 60.0]  # the next poll, then a restart, not a boot
    assert sim.asked.asked == 3


def _peak(out: SimOutcome) -> int:
    edges = sorted([(n.launched_at, 1) for n in out.nodes] + [(n.terminated_at, -1) for n in out.nodes])
    up = peak = 0
    for _, d in edges:
        up += d
        peak = max(peak, up)
    return peak


def _random_jobs(seed: int, count: int = 150) -> list[SimJob]:
    rng = random.Random(seed)
    t = 0.0
    jobs = []
    for i in range(1, count + 1):
        t += rng.expovariate(1 / 400.0)
        run = rng.choice((60.0, 600.0, 3600.0, 7200.0))
        jobs.append(SimJob(i, t, run, rng.choice((1, 2, 4, 8, 16, 24)), requested=run * rng.choice((1.0, 2.0))))
    return jobs


@pytest.mark.parametrize("seed", [1, 2])
def test_behind_slurm_the_same_jobs_run_as_behind_grid_engine_at_a_like_cost(seed: int) -> None:
    jobs = _random_jobs(seed)
    _, sge = _replay(jobs, scheduler=Behind.SGE, max_nodes=8)
    sim, slurm = _replay(jobs, scheduler=Behind.SLURM, max_nodes=8)
    assert slurm.never_started == sge.never_started == 0
    assert sorted(p.job_id for p in slurm.placements) == sorted(p.job_id for p in sge.placements)
    assert slurm.slot_seconds == sge.slot_seconds
    node_s = sum(n.terminated_at - n.launched_at for n in slurm.nodes)
    sge_node_s = sum(n.terminated_at - n.launched_at for n in sge.nodes)
    assert 0.8 <= node_s / sge_node_s <= 1.25
    assert sim.asked.asked == slurm.launches and sim.asked.given_back == 0


@pytest.mark.parametrize("seed", [3, 4])
def test_behind_slurm_fast_forward_changes_nothing(seed: int) -> None:
    """Skipping the polls at which nothing can change (the policy's and Slurm's wake-ups) gives
    the replay of every poll, give-backs (a burst before elb's first pass), held names and a
    short SuspendTime included."""
    jobs = [SimJob(1000 + i, 0.0, 600.0, 8) for i in range(1, 5)] + _random_jobs(seed, 80)
    kw = {"max_nodes": 3, "slurm_nodes": 6, "suspend_time": 240.0, "peek_interval": 5.0}
    fast_sim, fast = _replay(jobs, scheduler=Behind.SLURM, **kw)  # type: ignore[arg-type]
    slow_sim, slow = _replay(jobs, scheduler=Behind.SLURM, fast_forward=False, **kw)  # type: ignore[arg-type]
    assert fast_sim.asked.given_back > 0 and fast_sim.asked.drained
    assert fast.placements == slow.placements
    assert fast.nodes == slow.nodes
    assert fast_sim.asked == slow_sim.asked
    assert fast.decisions < slow.decisions


def test_a_peer_is_replayed_as_itself_behind_either_scheduler() -> None:
    jobs = _random_jobs(5, 40)
    prepared = prepare(Workload("hand", jobs), 8, 4)
    kw = {"billing": "second", "slots_per_node": 8, "boot_time": BOOT, "max_nodes": 4}
    settings = SimSettings(slots_per_node=8, max_nodes=4, boot_time=BOOT)
    for name in ("slurm", "parallelcluster"):
        policy = build_policy(name, **kw)  # type: ignore[arg-type]
        m_sge, sge = replay(prepared, policy, settings, billing="second", price=1.0)
        policy = build_policy(name, **kw)  # type: ignore[arg-type]
        behind = dataclasses.replace(settings, scheduler=Behind.SLURM)
        m_slurm, slurm = replay(prepared, policy, behind, billing="second", price=1.0)
        assert (slurm.waits, slurm.launches) == (sge.waits, sge.launches)
        assert m_slurm.scheduler == m_sge.scheduler == "sge"
    m, _ = replay(prepared, build_policy("elb", **kw), behind, billing="second", price=1.0)  # type: ignore[arg-type]
    assert (m.scheduler, m.asked, m.given_back) == ("slurm", m.launches, 0)


# -- the command --------------------------------------------------------------------------------


def _log(tmp_path: Path) -> Path:
    lines = ["; MaxProcs: 32"]
    for j in _random_jobs(6, 30):
        fields = [j.job_id, j.submit, -1, j.run, j.slots, -1, -1, j.slots, j.requested, -1, 1, 1, 1, -1, -1, -1, -1, -1]
        lines.append(" ".join(str(f) for f in fields))
    path = tmp_path / "log.swf"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_cli_replays_behind_slurm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _log(tmp_path)
    args = ["simulate", str(log), "--policies", "elb,slurm", "--max-nodes", "2", "--workers", "1"]
    assert main([*args, "--scheduler", "slurm", "--slurm-nodes", "6", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["settings"]["scheduler"] == "slurm"
    assert doc["settings"]["slurm"] == {"nodes": 6, "suspend_time": 86400.0}
    elb, peer = doc["results"]
    assert (elb["scheduler"], peer["scheduler"]) == ("slurm", "sge")
    assert elb["asked"] > 0 and elb["given_back"] <= 6 - 2 and elb["never_started"] == 0
    assert main([*args, "--scheduler", "slurm"]) == 0
    out = capsys.readouterr().out
    assert "behind Slurm: its power saving asks elb for nodes by name (2 cloud nodes" in out
    assert "elb behind Slurm: " in out and " given back" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--slurm-nodes", "4"], "go with --scheduler slurm"),
        (["--suspend-time", "60"], "go with --scheduler slurm"),
        (["--scheduler", "slurm", "--slurm-nodes", "0"], "--slurm-nodes must be from 1"),
        (["--scheduler", "slurm", "--suspend-time", "0"], "--suspend-time must be above 0"),
        (["--scheduler", "slurm", "--groups", "docs/examples/simulate-two-groups.yml"], "one node group"),
    ],
)
def test_cli_refuses_slurms_options_out_of_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["simulate", str(_log(tmp_path)), "--policies", "elb", *extra]) == 2
    assert message in capsys.readouterr().err
