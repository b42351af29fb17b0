"""The warm pool: the pure decisions (elb.core.warmpool), the config, and the simulator's model of it."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from elb.cli.main import main
from elb.core.config import Config
from elb.core.groups import NodeGroup
from elb.core.warmpool import Pooled, WarmPool, due, expired, keep_time, pick_restart, restart_saving, stop_or_terminate
from elb.schedulers.sge.driver import GridEngine
from elb.simulate.engine import SimSettings, Simulator
from elb.simulate.groups import one_group
from elb.simulate.report import floors, metrics, pool_table
from elb.simulate.runner import build_policy, prepare, replay
from elb.simulate.swf import SimJob, Workload

# -- decisions -----------------------------------------------------------------------------------

POOL = WarmPool(max_nodes=2, max_age=7200, volume_price_per_hour=0.01, restart_time=60)


def decide(pool: WarmPool = POOL, pooled: tuple[Pooled, ...] = (), **kw: float | None) -> tuple[bool, float, str]:
    args: dict[str, float | None] = {"boot_time": 300.0, "price_per_hour": 1.0, "poll_interval": 60.0, **kw}
    d = stop_or_terminate(pool, pooled, **args)  # type: ignore[arg-type]
    return d.stop, d.keep_for, d.reason


def test_no_pool_terminates() -> None:
    stop, keep, why = decide(WarmPool())
    assert not stop and keep == 0 and "no warm pool" in why


def test_full_pool_terminates_one_short_of_full_stops() -> None:
    one = (Pooled("node001", 0, 100),)
    assert decide(pooled=one)[0]
    stop, _, why = decide(pooled=(*one, Pooled("node002", 0, 100)))
    assert not stop and "full (2/2" in why


def test_restart_no_faster_than_a_boot_terminates() -> None:
    assert not decide(boot_time=60.0)[0]
    assert "nothing to save" in decide(boot_time=60.0)[2]
    assert decide(boot_time=60.5)[0] is False  # saves 0.5 s: keep 0.5 s x 1/0.01 = 50 s < a poll
    assert decide(boot_time=61.0)[0]  # saves 1 s of compute: 100 s of volumes at 1 % of the price


def test_keep_time_is_max_age_or_the_break_even_of_the_volumes() -> None:
    # saving: 240 s of compute at 1.0/h = 0.0667; volumes 0.01/h pay that in 24000 s > max_age 7200
    assert restart_saving(POOL, 300, 1.0) == pytest.approx(240 / 3600)
    assert keep_time(POOL, 300, 1.0) == 7200
    dear = POOL.model_copy(update={"volume_price_per_hour": 0.1})  # break-even 2400 s
    assert keep_time(dear, 300, 1.0) == pytest.approx(2400)
    stop, keep, why = decide(dear)
    assert stop and keep == pytest.approx(2400) and "have cost what a restart saves" in why
    # at the poll boundary: a keep of exactly one poll still stops, a hair less terminates
    at_poll = POOL.model_copy(update={"volume_price_per_hour": 240 / 60})
    assert keep_time(at_poll, 300, 1.0) == pytest.approx(60)
    assert decide(at_poll, poll_interval=60.0 - 1e-6)[0]
    assert not decide(at_poll, poll_interval=60.0 + 1e-6)[0]


def test_without_a_price_or_free_volumes_keep_is_max_age() -> None:
    assert keep_time(POOL, 300, None) == 7200
    assert keep_time(POOL.model_copy(update={"volume_price_per_hour": 0.0}), 300, 1.0) == 7200
    stop, keep, why = decide(price_per_hour=None)
    assert stop and keep == 7200 and "no price_per_hour" in why


def test_pick_restart_takes_the_youngest_not_yet_due() -> None:
    pooled = [Pooled("node001", 100, 5000), Pooled("node002", 300, 1000), Pooled("node003", 200, 5000)]
    pick = pick_restart(pooled, POOL, 900)
    assert pick is not None and pick[0].name == "node002" and "youngest of 3" in pick[1]
    pick = pick_restart(pooled, POOL, 1000)  # node002 is due at 1000: not started
    assert pick is not None and pick[0].name == "node003"
    assert pick_restart(pooled, POOL, 5000) is None
    assert pick_restart([], POOL, 0) is None


def test_expired_for_age_and_for_size() -> None:
    p = Pooled("node001", 0, 100_000)
    assert due(p, POOL) == 7200  # never past max_age
    assert expired([p], POOL, 7199.9) == []
    ((gone, at, why),) = expired([p], POOL, 9000)
    assert gone is p and at == 7200 and "max_age" in why
    early = Pooled("node002", 0, 500)
    ((_, at, why),) = expired([early], POOL, 600)
    assert at == 500 and "keep time" in why
    three = [Pooled(f"node00{i}", float(i), 9000) for i in (3, 1, 2)]
    over = expired(three, POOL, 10)
    assert [(g.name, at) for g, at, _ in over] == [("node001", 10)]  # the oldest beyond max_nodes 2
    assert "3 > max_nodes 2" in over[0][2]


# -- config --------------------------------------------------------------------------------------


def test_warm_pool_config_in_a_group_and_in_policy() -> None:
    g = NodeGroup.model_validate({"name": "c", "slots": 8, "max_nodes": 4, "warm_pool": {"max_nodes": 2}})
    assert g.warm_pool == WarmPool(max_nodes=2, max_age=86400, volume_price_per_hour=0, restart_time=60)
    assert NodeGroup(name="c", slots=8, max_nodes=4).warm_pool.enabled is False
    cfg = Config.model_validate(
        {"cloud": {"provider": "ec2"}, "policy": {"warm_pool": {"max_nodes": 3, "restart_time": 45}}}
    )
    (group,) = cfg.groups(8).groups
    assert group.warm_pool.max_nodes == 3 and group.warm_pool.restart_time == 45


@pytest.mark.parametrize(
    ("pool", "words"),
    [
        ({"max_nodes": -1}, "greater than or equal to 0"),
        ({"max_nodes": 1.5}, "valid integer"),
        ({"max_nodes": True}, "valid integer"),
        ({"max_age": 0}, "more than 0 s"),
        ({"restart_time": 0}, "more than 0 s"),
        ({"restart_time": "60 seconds"}, "not a duration"),
        ({"volume_price_per_hour": -0.1}, "greater than or equal to 0"),
        ({"volume_price_per_hour": math.inf}, "finite"),
        ({"size": 3}, "Extra inputs"),
    ],
)
def test_bad_warm_pool_values_are_clear_errors(pool: dict[str, object], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        NodeGroup.model_validate({"name": "c", "slots": 8, "max_nodes": 4, "warm_pool": pool})


def test_policy_warm_pool_clashes_with_node_groups() -> None:
    with pytest.raises(ValidationError, match=r"policy\.warm_pool cannot be set with node_groups"):
        Config.model_validate(
            {
                "cloud": {"provider": "ec2"},
                "policy": {"warm_pool": {"max_nodes": 1}},
                "node_groups": [{"name": "c", "slots": 8, "max_nodes": 4}],
            }
        )


# -- simulator -----------------------------------------------------------------------------------

# Two bursts of two 1-slot jobs on 1-slot nodes, 300 s boot, 60 s polls, per-second billing, elb's
# cost rule (an idle node goes after 0.5 x 300 s idle, at a poll). Burst 1 at 0: nodes launched at
# 0, ready at 300, jobs 300..900, idle from 900, removed at the poll at 1080. Burst 2 at 5040:
# without a pool two new nodes are ready at 5340 (jobs 5340..5940); with one the stopped nodes
# start at 5040 and are ready at 5100 (jobs 5100..5700). The gap 1080..5040 is longer than the idle
# rule and shorter than the pool's keep time (max_age 7200; break-even 24000 s).
BURSTS = [SimJob(1, 0, 600, 1), SimJob(2, 0, 600, 1), SimJob(3, 5040, 600, 1), SimJob(4, 5040, 600, 1)]
GAP = 5040 - 1080


def bursts(pool: WarmPool | None, jobs: list[SimJob] = BURSTS, **kw: object) -> tuple[Simulator, object]:
    groups = one_group(1, 2, pool)
    policy = build_policy("elb", billing="second", slots_per_node=1, boot_time=300, max_nodes=2, groups=None)
    settings = SimSettings(slots_per_node=1, max_nodes=2, boot_time=300, record=True, **kw)  # type: ignore[arg-type]
    sim = Simulator(jobs, policy, settings, groups=groups)
    return sim, sim.run()


def money(sim: Simulator) -> tuple[float, float, float]:
    m = metrics("x", "elb", sim.out, floors(sim.jobs, 1), billing="second", price=1.0, slots_per_node=1)
    return m.node_hours, m.pooled_node_hours, m.cost


def test_second_burst_restarts_from_the_pool_and_waits_less_by_boot_minus_restart() -> None:
    plain, _ = bursts(None)
    assert sorted(plain.out.waits) == [300, 300, 300, 300]
    assert (plain.out.launches, plain.out.restarts, plain.out.stops, plain.out.terminations) == (4, 0, 0, 2)
    node_h, pooled_h, cost = money(plain)
    assert node_h == pytest.approx(2 * (1080 + 900) / 3600)
    assert pooled_h == 0 and cost == pytest.approx(node_h)

    pool = WarmPool(max_nodes=2, max_age=7200, volume_price_per_hour=0.01, restart_time=60)
    warm, _ = bursts(pool)
    assert sorted(warm.out.waits) == [60, 60, 300, 300]  # 240 s less: boot 300 - restart 60
    assert (warm.out.launches, warm.out.restarts, warm.out.stops, warm.out.terminations) == (2, 2, 2, 0)
    assert sorted({n for p in warm.out.placements for n, _ in p.nodes}) == ["node001", "node002"]
    lives = sorted((n.name, n.launched_at, n.ready_at, n.terminated_at, n.restart) for n in warm.out.nodes)
    assert lives == [
        ("node001", 0, 300, 1080, False),
        ("node001", 5040, 5100, 5700, True),
        ("node002", 0, 300, 1080, False),
        ("node002", 5040, 5100, 5700, True),
    ]
    node_h, pooled_h, cost = money(warm)
    assert node_h == pytest.approx(2 * (1080 + 660) / 3600)
    assert pooled_h == pytest.approx(2 * GAP / 3600)
    assert cost == pytest.approx(node_h + 2 * GAP / 3600 * 0.01)
    assert any("stopped into the warm pool (1/2)" in r for r in warm.out.pool_reasons)
    assert any("starting node00" in r and "youngest of 2" in r for r in warm.out.pool_reasons)


def test_a_gap_past_the_keep_time_terminates_the_stopped_nodes_at_their_age() -> None:
    pool = WarmPool(max_nodes=2, max_age=3000, volume_price_per_hour=0.01, restart_time=60)
    warm, _ = bursts(pool)
    assert sorted(warm.out.waits) == [300, 300, 300, 300]  # no restart: new nodes for burst 2
    assert (warm.out.launches, warm.out.restarts, warm.out.pool_terminations) == (4, 0, 2)
    assert sum(warm.out.pooled_seconds.values()) == pytest.approx(2 * 3000)  # billed to their age only
    assert sum(warm.out.pool_cost.values()) == pytest.approx(2 * 3000 / 3600 * 0.01)
    # the same with the policy asked at every poll: the same figures
    slow, _ = bursts(pool, fast_forward=False)
    assert slow.out.pooled_seconds == warm.out.pooled_seconds and slow.out.waits == warm.out.waits


def test_a_pool_of_one_stops_one_node_and_terminates_the_other() -> None:
    warm, _ = bursts(WarmPool(max_nodes=1, volume_price_per_hour=0.01, restart_time=60))
    # burst 2: node001 restarted (ready 5100), node003 launched (ready 5340); node001 idles from
    # 5700 and is stopped again at 5880, before the last job ends at 5940
    assert (warm.out.stops, warm.out.terminations, warm.out.restarts, warm.out.launches) == (2, 1, 1, 3)
    assert sorted(warm.out.waits) == [60, 300, 300, 300]
    assert any("full (1/1" in r for r in warm.out.pool_reasons)


def test_a_pool_of_zero_gives_the_same_replay_as_no_pool() -> None:
    jobs = [SimJob(i, (i * 7919) % 20000, 300 + (i * 104729) % 3000, 1 + i % 3) for i in range(1, 80)]
    a, _ = bursts(None, jobs)
    b, _ = bursts(WarmPool(max_nodes=0, restart_time=10), jobs)
    assert a.out == b.out


def test_cli_prints_the_replay_without_and_with_the_pool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "b.swf"
    log.write_text(
        "\n".join(
            " ".join(str(f) for f in (j.job_id, j.submit, -1, j.run, 1, -1, -1, 1, -1, -1, 1, 1, 1, -1, -1, -1, -1, -1))
            for j in BURSTS
        )
        + "\n"
    )
    args = ["simulate", str(log), "--policies", "elb", "--slots-per-node", "1", "--max-nodes", "2"]
    assert main([*args, "--warm-pool", "2", "--volume-price", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "warm pool: up to 2 stopped nodes, restart 60 s" in out
    (row,) = [line for line in out.splitlines() if line.startswith("elb+pool2 ") and " 2 " in line][-1:]
    assert row.split()[1:3] == ["3.0m", "5.0m"]  # mean and p95 wait with the pool
    assert main([*args, "--warm-pool", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    plain, warm = doc["results"]
    assert (plain["restarts"], warm["restarts"], warm["launches"]) == (0, 2, 2)
    assert warm["wait_mean"] == pytest.approx(plain["wait_mean"] - 120)
    assert main([*args, "--warm-pool", "-1"]) == 2
    assert "--warm-pool: Input should be greater than or equal to 0" in capsys.readouterr().err
    assert main([*args, "--warm-pool", "1", "--restart-time", "0"]) == 2
    assert "--restart-time" in capsys.readouterr().err


def test_runner_replay_and_pool_table() -> None:
    wl = Workload("b", list(BURSTS), {})
    prepared = prepare(wl, 1, 2)
    policy = build_policy("elb", billing="second", slots_per_node=1, boot_time=300, max_nodes=2)
    settings = SimSettings(slots_per_node=1, max_nodes=2, boot_time=300)
    pool = WarmPool(max_nodes=2, volume_price_per_hour=0.01)
    pooled = dataclasses.replace(prepared, groups=one_group(1, 2, pool))
    a, _ = replay(prepared, policy, settings, billing="second", price=1.0)
    b, _ = replay(pooled, policy, settings, billing="second", price=1.0, label="elb+pool2")
    assert (b.restarts, b.stops) == (2, 2) and b.groups[0].restarts == 2 and b.groups[0].launches == 2
    assert b.cost == pytest.approx(b.node_hours + b.pool_cost)
    text = pool_table([(a, b)])
    assert "pool saves" in text and "elb+pool2" in text


def test_the_daemon_says_it_stops_idle_nodes_when_a_pool_is_set(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from elb.core.config import parse_config
    from elb.service.daemon import Balancer
    from elb.service.journal import Journal
    from tests.unit.factories import T0
    from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge

    cfg = parse_config(
        {"state_dir": str(tmp_path), "policy": {"max_nodes": 2, "slots_per_node": 8, "warm_pool": {"max_nodes": 2}}}
    )
    sge = FakeSge(T0)
    with caplog.at_level(logging.INFO, logger="elb"):
        Balancer(
            cfg,
            scheduler=GridEngine(cfg, sge),
            journal=Journal(cfg.journal_path),
            cloud=FakeCloud(T0),
            provisioner=FakeProvisioner(sge),
        )
    assert any("idle nodes are stopped, and started again for demand" in r.getMessage() for r in caplog.records)
