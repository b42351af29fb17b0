"""Config values that used to slip through: times with units (as the command line takes them),
times so small they turn a safety off, NaN in the extra vars, YAML 1.1's surprising integers, an
unbounded max_nodes (a huge array job then built a name per node), and a spot group with a warm
pool (one-time spot instances cannot be stopped)."""

from __future__ import annotations

import argparse
import tracemalloc
from pathlib import Path

import pytest

import elb.core.policy.tally
import elb.core.policy.view
from elb.clouds.ec2.config import ec2_settings
from elb.core import durations
from elb.core.config import ClusterConfig, Config, ConfigError, PolicyConfig, load_config
from elb.core.model import History
from elb.core.naming import MAX_NODES, names_after, next_names
from elb.core.policy import POLICIES, make_policy
from elb.core.state import join
from elb.schedulers.sge.config import sge_settings
from tests.unit.factories import T0, host, node, pending, snap


def load(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "elb.yml"
    path.write_text(text)
    return load_config(path)


# -- durations -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "seconds"),
    [("90", 90), ("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86400), ("1.5h", 5400), ("1w", 604800)],
)
def test_config_times_take_units(tmp_path: Path, written: str, seconds: float) -> None:
    cfg = load(tmp_path, f"poll_interval: {written}\nbackoff: {{initial: {written}, max: 2w}}\n")
    assert cfg.poll_interval == seconds and cfg.policy.poll_interval == seconds
    assert cfg.backoff.initial == seconds


def test_every_kind_of_config_time_takes_units(tmp_path: Path) -> None:
    text = (
        "sge: {timeout: 1m}\npolicy: {wait_time: 15m, boot_time: 5m, warm_pool: {max_nodes: 1, max_age: 1d}}\n"
        "provision: {timeout: 2h}\ncloud: {ec2: {boot_timeout: 10m}}\n"
    )
    cfg = load(tmp_path, text)
    assert sge_settings(cfg).timeout == 60 and cfg.policy.wait_time == 900 and cfg.policy.boot_time == 300
    assert cfg.policy.warm_pool.max_age == 86400 and cfg.provision.timeout == 7200
    assert ec2_settings(cfg).boot_timeout == 600


def test_the_command_line_and_the_config_read_durations_alike(tmp_path: Path) -> None:
    for text in ("90", "90s", "15m", "2h", "1d", "4w"):
        assert durations.argument(text) == durations.parse(text)
        assert load(tmp_path, f"poll_interval: {text}\n").poll_interval == durations.parse(text)


def test_the_same_poll_in_the_policy_with_another_unit_is_the_same(tmp_path: Path) -> None:
    assert load(tmp_path, "poll_interval: 1m\npolicy: {poll_interval: 60}\n").policy.poll_interval == 60
    with pytest.raises(ConfigError, match="differs from poll_interval"):
        load(tmp_path, "poll_interval: 1m\npolicy: {poll_interval: 61}\n")


@pytest.mark.parametrize("written", ["90 min", "1h30m", "-5m", "5x", "''", "true", "[1]"])
def test_a_bad_duration_names_the_key_and_what_is_accepted(tmp_path: Path, written: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, f"policy:\n  wait_time: {written}\n")
    message = str(err.value)
    assert "line 2, column 3: policy.wait_time: not a duration" in message
    assert "seconds (90) or a number with a unit s, m, h, d or w (90s, 15m, 2h, 1d)" in message


def test_a_bad_duration_on_the_command_line_says_so() -> None:
    for bad in ("", "-1h", "7 days", "0", "1e-300"):
        with pytest.raises(argparse.ArgumentTypeError, match="not a duration"):
            durations.argument(bad)


# -- bounds ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "backoff: {initial: 1.0e-300}\n",
        "backoff: {initial: 0.5}\n",
        "poll_interval: 0.001\n",
        "backoff: {initial: 1, max: 0.5s}\n",
        "policy: {boot_time: 1.0e-9}\n",
        "poll_interval: 0.9s\n",
    ],
)
def test_a_time_too_short_to_mean_anything_is_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match=r": at least 1 s \(less would turn off what it paces\)"):
        load(tmp_path, text)


def test_time_outs_take_less_than_a_second_but_not_zero(tmp_path: Path) -> None:
    assert sge_settings(load(tmp_path, "sge: {timeout: 0.5s}\n")).timeout == 0.5
    with pytest.raises(ConfigError, match=r"sge\.timeout: more than 0 s"):
        load(tmp_path, "sge: {timeout: 0m}\n")


def test_times_where_zero_means_something_still_take_zero(tmp_path: Path) -> None:
    cfg = load(tmp_path, "provision: {timeout: 0}\npolicy: {wait_time: 0s, launch_delay: 0}\n")
    assert cfg.provision.timeout == 0 and cfg.policy.wait_time == 0


def test_retention_days_are_days_not_durations(tmp_path: Path) -> None:
    assert load(tmp_path, "retention: {artifacts_days: 7}\n").retention.artifacts_days == 7
    with pytest.raises(ConfigError, match=r"retention\.artifacts_days"):
        load(tmp_path, "retention: {artifacts_days: 7d}\n")


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        ("{a: .nan}", "a"),
        ("{a: {b: [1, 2, -.inf]}}", r"a\.b\[2\]"),
        ("{deep: [{x: 1}, {y: [.NaN]}]}", r"deep\[1\]\.y\[0\]"),
    ],
)
def test_extra_vars_refuse_nan_and_inf_at_any_depth(tmp_path: Path, extra: str, where: str) -> None:
    with pytest.raises(ConfigError, match=rf"provision\.extra_vars: {where}: \.nan and \.inf are not numbers"):
        load(tmp_path, f"provision:\n  extra_vars: {extra}\n")


def test_extra_vars_keep_nan_as_text_when_quoted(tmp_path: Path) -> None:
    assert load(tmp_path, "provision: {extra_vars: {a: '.nan'}}\n").provision.extra_vars == {"a": ".nan"}


@pytest.mark.parametrize("written", ["0x10", "017", "0b11", "1_000", "+5", "1:30", "!!int '0x1'"])
def test_surprising_integers_are_refused_where_they_are(tmp_path: Path, written: str) -> None:
    with pytest.raises(ConfigError, match=r"line 2, column 14: an integer in another form than plain decimal"):
        load(tmp_path, f"policy:\n  max_nodes: {written}\n")
    with pytest.raises(ConfigError, match=r"line 1, column 29: an integer in another form"):
        load(tmp_path, f"provision: {{extra_vars: {{a: {written}}}}}\n")


@pytest.mark.parametrize("written", ["1_000.5", "+1.5", "1:30.5"])
def test_surprising_floats_are_refused(tmp_path: Path, written: str) -> None:
    with pytest.raises(ConfigError, match=r"line 1, column 16: a number written with _, a leading \+ or in base 60"):
        load(tmp_path, f"poll_interval: {written}\n")


def test_plain_numbers_and_quoted_forms_are_fine(tmp_path: Path) -> None:
    cfg = load(tmp_path, "policy: {max_nodes: 16}\nprovision: {extra_vars: {mode: '0x10', n: -3, f: .5}}\n")
    assert cfg.policy.max_nodes == 16
    assert cfg.provision.extra_vars == {"mode": "0x10", "n": -3, "f": 0.5}


@pytest.mark.parametrize(
    "text",
    [
        f"policy: {{max_nodes: {MAX_NODES + 1}}}\n",
        f"node_groups: [{{name: a, slots: 1, max_nodes: {MAX_NODES + 1}}}]\n",
        "policy: {max_nodes: 4}\nnode_groups: [{name: a, slots: 1, max_nodes: 2, warm_pool: {max_nodes: 20000}}]\n",
    ],
)
def test_max_nodes_is_bounded(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match=f"less than or equal to {MAX_NODES}"):
        load(tmp_path, text)


def test_groups_adding_up_past_the_bound_need_a_global_max(tmp_path: Path) -> None:
    groups = f"node_groups: [{{name: a, slots: 1, max_nodes: {MAX_NODES}}}, {{name: b, slots: 1, max_nodes: 1}}]\n"
    with pytest.raises(ConfigError, match=f"add up to {MAX_NODES + 1}, more than elb manages .*set policy.max_nodes"):
        load(tmp_path, groups)
    assert load(tmp_path, f"policy: {{max_nodes: {MAX_NODES}}}\n" + groups).policy.max_nodes == MAX_NODES


def test_next_names_refuses_more_than_the_bound_without_building_them() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=f"at most {MAX_NODES}"):
            next_names(["node007"], 10**9)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert next_names(["node007"], 2) == ("node008", "node009")


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_huge_array_job_at_the_bound_names_only_what_can_be_launched(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[int] = []

    def counting(highest: int, count: int, *args: object) -> tuple[str, ...]:
        names = names_after(highest, count, *args)  # type: ignore[arg-type]
        built.append(len(names))
        return names

    monkeypatch.setattr(elb.core.policy.view, "names_after", counting)
    monkeypatch.setattr(elb.core.policy.tally, "names_after", counting)
    cfg = PolicyConfig(name=name, max_nodes=MAX_NODES, slots_per_node=4, wait_time=0, stabilization_time=0)
    policy = make_policy(cfg, ClusterConfig())
    s = snap([pending(1, 6000.0, tasks=10**9)], [host("node001", used=8)])
    plan = policy.decide(join((node("node001", 3000.0, last_busy_at=T0),), (), s, now=T0), History())
    room = MAX_NODES - 1
    assert plan.add <= room and len(plan.add_names) == plan.add
    assert sum(built) <= room, built  # never a name per task, nor more than one list of them


# -- spot and the warm pool ------------------------------------------------------------------


def test_a_spot_group_with_a_warm_pool_is_refused(tmp_path: Path) -> None:
    text = "node_groups:\n  - {name: cheap, slots: 2, max_nodes: 4, market: spot, warm_pool: {max_nodes: 2}}\n"
    with pytest.raises(ConfigError, match=r"node_groups\.0: warm_pool: a warm pool stops idle nodes, .* cannot be"):
        load(tmp_path, text)
    assert load(tmp_path, text.replace("market: spot", "market: on-demand")).node_groups is not None
    assert load(tmp_path, text.replace("max_nodes: 2}", "max_nodes: 0}")).node_groups is not None


def test_the_one_group_on_spot_with_a_warm_pool_is_refused(tmp_path: Path) -> None:
    text = "cloud: {ec2: {spot: true}}\npolicy: {warm_pool: {max_nodes: 2}}\n"
    with pytest.raises(
        ConfigError, match=r"policy\.warm_pool: a warm pool stops .*cannot be stopped \(cloud\.ec2\.spot"
    ):
        load(tmp_path, text)
    assert load(tmp_path, text.replace("true", "false")).policy.warm_pool.enabled
