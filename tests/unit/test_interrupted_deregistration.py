"""Regression (found by tests/faults): elb killed in the middle of the deregistration play, after
SGE dropped the host but before the play took it out of the hostgroup, /etc/hosts and the
exports. On restart the node must not be terminated half-registered: the play runs again."""

from __future__ import annotations

from pathlib import Path

from elb.core.model import NodeState
from tests.unit.factories import T0, small_config
from tests.unit.test_daemon import _one_ready_node, parts


def test_drain_interrupted_after_sge_dropped_the_host_reruns_the_deregistration(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, shrink="timer")
    r = parts(cfg)
    _one_ready_node(r, 50 * 60)
    r.journal.record("node001", NodeState.DRAINING, T0 - 10)
    r.sge.hosts.pop("node001")  # the play got past SGE, then elb died
    result = r.bal.run_pass()
    assert result.outcomes.removed == ["node001"]
    assert r.prov.log == ["remove node001"]  # the rest of the deregistration ran before the terminate
    assert r.cloud.terminated == ["i-0001"]
    assert [e.state for e in r.journal.events("node001")][-2:] == [NodeState.DEREGISTERED, NodeState.TERMINATED]


def test_node_left_deregistered_is_only_terminated(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, shrink="timer")
    r = parts(cfg)
    _one_ready_node(r, 50 * 60)
    r.journal.record("node001", NodeState.DEREGISTERED, T0 - 10)  # the play finished, then elb died
    r.sge.hosts.pop("node001")
    result = r.bal.run_pass()
    assert result.outcomes.removed == ["node001"]
    assert r.prov.log == []
    assert r.cloud.terminated == ["i-0001"]
