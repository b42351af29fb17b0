"""Config validation messages and node naming."""

from __future__ import annotations

from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.config import ConfigError, load_config, parse_config
from elb.core.exitcodes import Exit
from elb.core.naming import next_names, node_number


def test_defaults_are_the_documented_ones() -> None:
    cfg = parse_config({})
    assert cfg.poll_interval == 60
    assert cfg.policy.wait_time == 900
    assert cfg.policy.kill_after == 2700
    assert cfg.policy.billing_period == 3600
    assert cfg.policy.stabilization_time == 180
    assert cfg.policy.add_nodes_per_iteration == 1


def test_unknown_key_is_named() -> None:
    with pytest.raises(ConfigError, match=r"policy\.wait_tme: unknown key"):
        parse_config({"policy": {"wait_tme": 5}})


def test_bad_value_is_named() -> None:
    with pytest.raises(ConfigError, match=r"policy\.max_nodes: .*greater than or equal to 0"):
        parse_config({"policy": {"max_nodes": -1}})


def test_cross_field_rule() -> None:
    with pytest.raises(ConfigError, match=r"min_nodes .* greater than max_nodes"):
        parse_config({"policy": {"min_nodes": 5, "max_nodes": 2}})


def test_top_level_must_be_mapping(tmp_path: Path) -> None:
    f = tmp_path / "elb.yml"
    f.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(f)


def test_yaml_syntax_error(tmp_path: Path) -> None:
    f = tmp_path / "elb.yml"
    f.write_text("policy: {max_nodes: [\n")
    with pytest.raises(ConfigError, match=r"line 2, column 1: expected the node content"):
        load_config(f)


def test_validate_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.yml"
    good.write_text(
        f"policy:\n  max_nodes: 4\n  wait_time: 30\nstate_dir: {tmp_path / 'state'}\n"
        f"provision:\n  private_data_dir: {tmp_path / 'ansible'}\n"
    )
    bad = tmp_path / "bad.yml"
    bad.write_text("cluster:\n  node_prefix: 'Bad Prefix'\n")
    assert main(["validate", "--offline", "--config", str(good)]) == 0
    assert main(["validate", "--config", str(bad)]) == Exit.CONFIG
    assert "cluster.node_prefix" in capsys.readouterr().err


def test_next_names_after_highest_gaps_not_reused() -> None:
    assert next_names(["node001", "node003", "node005"], 1) == ("node006",)
    assert next_names(["master", "node009"], 2) == ("node010", "node011")
    assert next_names([], 1) == ("node001",)
    assert next_names(["gpu007", "node002"], 1, prefix="gpu") == ("gpu008",)
    assert next_names(["node999"], 1) == ("node1000",)


def test_node_number_ignores_foreign_names() -> None:
    assert node_number("node012", "node") == 12
    assert node_number("nodeX", "node") is None
    assert node_number("mynode001", "node") is None


def test_policy_plans_with_the_daemons_poll_interval() -> None:
    assert parse_config({"poll_interval": 20}).policy.poll_interval == 20
    assert parse_config({}).policy.poll_interval == parse_config({}).poll_interval == 60
    with pytest.raises(ConfigError, match="set it once, at the top level"):
        parse_config({"poll_interval": 20, "policy": {"poll_interval": 60}})
