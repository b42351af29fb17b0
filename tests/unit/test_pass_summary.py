"""A pass's summary (the log's ``pass:`` line, the stats file's action, the demo's pass line)
says a reason shared by several nodes once, with the nodes named together."""

from __future__ import annotations

from elb.core.model import Plan
from elb.service.actuator import Outcomes
from elb.service.passrecord import PassResult
from tests.unit.factories import T0

WHY = "provisioning failed at task 'elb_sge_exec_host : register': qconf timed out after 60 s"


def summary(o: Outcomes) -> str:
    return PassResult(ok=True, now=T0, plan=Plan(reason="nothing to do"), outcomes=o).summary()


def test_nodes_failed_for_one_reason_share_it() -> None:
    o = Outcomes(failed={f"node00{i}": WHY for i in range(1, 5)} | {"node005": "launch failed: no capacity"})
    said = summary(o)
    assert said.count(WHY) == 1
    assert f"node001, node002, node003, node004: {WHY}" in said
    assert said.endswith("; node005: launch failed: no capacity")


def test_nodes_repaired_the_same_way_share_it() -> None:
    o = Outcomes(repaired=["node001: vanished (gone from the cloud)", "node002: vanished (gone from the cloud)"])
    said = summary(o)
    assert said.count("vanished") == 1
    assert "repaired node001, node002: vanished (gone from the cloud)" in said


def test_a_node_kept_for_a_reason_is_said_once_by_it_not_as_a_job_landed() -> None:
    """A node kept on its own word is kept and failed with why: said once, by why. Only the nodes
    kept without a reason (a job landed while draining) are said as such."""
    why = "the scheduler lists no job on node001 but the node runs job processes; so it is kept"
    o = Outcomes(kept=["node001", "node002"], failed={"node001": why})
    said = summary(o)
    assert said.count("node001") == 2  # its reason names it: "node001: ... no job on node001 ..."
    assert "kept (job landed) node002" in said
    assert f"node001: {why}" in said
