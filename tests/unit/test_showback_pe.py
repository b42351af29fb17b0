"""``elb spend`` charges a parallel job for the slots it held on every host, as Grid Engine's
accounting records them (``tests/fixtures/sge/handmade/accounting-pe``): a PE job's master line
(all its slots) and its tasks' lines (one per ``qrsh -inherit``, on their own hosts, each with
the job's granted slots as SGE writes them: ``sge_rusage.c``), a serial job and an array job's
tasks; so "idle" is what the nodes really were."""

from __future__ import annotations

from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.attribution import UsageError, attribute
from elb.core.groups import NodeGroup, NodeGroups
from elb.core.model import NodeState
from elb.core.spend import lives
from elb.schedulers.sge.usage import sge_uses
from elb.service.journal import Journal

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "handmade" / "accounting-pe"
T0 = 1795528000.0
GROUPS = NodeGroups(groups=[NodeGroup(name="compute", slots=4, max_nodes=4, price_per_hour=1.0)])


def two_nodes(tmp_path: Path) -> Journal:
    """node001 and node002, 4 slots each: launched at T0, ready at T0 + 100, gone at T0 + 3700."""
    tmp_path.mkdir(exist_ok=True)
    j = Journal(tmp_path / "journal.sqlite")
    for n, name in enumerate(("node001", "node002"), 1):
        j.record(name, NodeState.REQUESTED, T0, group="compute")
        j.record(name, NodeState.RUNNING, T0, launched_at=T0, instance_id=f"i-{n}", slots=4)
        j.record(name, NodeState.READY, T0 + 100)
        j.record(name, NodeState.DRAINING, T0 + 3700)
        j.record(name, NodeState.TERMINATED, T0 + 3700)
    return j


def parts(tmp_path: Path, lines: list[str]) -> dict[str, float]:
    j = two_nodes(tmp_path)
    found = lives(j.nodes(include_gone=True), j.events(), GROUPS)
    j.close()
    uses = list(sge_uses(lines, T0 - 86400, T0 + 4000))
    result = attribute(found, uses, by="user", since=T0 - 86400, until=T0 + 4000, billing="second")
    assert result.node_seconds == pytest.approx(result.billed.node_seconds)
    return {p.key or p.kind: p.node_seconds for p in result.parts} | {"master_only": result.master_only}


def test_a_pe_job_is_charged_on_every_host_its_task_lines_name(tmp_path: Path) -> None:
    got = parts(tmp_path, FIXTURE.read_text().splitlines())
    # PE job 10: 8 slots, 4 on each node, 1800 s (T0+100..1900): both nodes whole, 3600 node-s;
    # serial job 11: 1 of node001's 4 slots for 1800 s, 450; array 12: 2 of node002's for 900 s, 450
    assert got["sgeuser"] == pytest.approx(3600 + 450 + 450)
    # idle: node001 3 slots for 1800 s, node002 4 slots for 900 s and 2 for 900 s (slot-s / 4)
    assert got["idle"] == pytest.approx((3 * 1800 + 4 * 900 + 2 * 900) / 4)
    assert got["booting"] == pytest.approx(200)
    assert got["master_only"] == 0


def test_a_pe_job_without_task_lines_is_charged_to_its_master_host_and_said(tmp_path: Path) -> None:
    # accounting_summary TRUE (or control_slaves FALSE): the master's line alone holds the 8 slots
    lines = [line for line in FIXTURE.read_text().splitlines() if line.startswith("#") or ":NONE:" in line[-60:]]
    assert len(lines) == 4 + 4  # the comments; job 10's master line, 11, 12.1, 12.2
    got = parts(tmp_path, lines)
    # node001 wholly the job's for 1800 s (8 slots on a 4-slot node: it has no more to give)
    assert got["sgeuser"] == pytest.approx(1800 + 450 + 450)
    assert got["master_only"] == 1
    # a job of 4 slots in a PE (smp: $pe_slots) fits its host: nothing to say
    smp = [line.replace(":mpi:8:", ":smp:4:") for line in lines]
    assert parts(tmp_path / "smp", smp)["master_only"] == 0


def test_none_written_in_lower_case_is_none(tmp_path: Path) -> None:
    # Sun Grid Engine 6 writes "none" where 8.1.9 writes NONE: a job's own line, not a task's
    lines = [line.replace(":NONE:", ":none:") for line in FIXTURE.read_text().splitlines()]
    assert parts(tmp_path, lines)["sgeuser"] == pytest.approx(3600 + 450 + 450)


def test_a_time_that_is_not_a_time_is_an_error_not_nan(tmp_path: Path) -> None:
    lines = FIXTURE.read_text().splitlines()
    fields = lines[-1].split(":")
    fields[10] = "nan"
    with pytest.raises(UsageError, match="end_time"):
        parts(tmp_path, [*lines[:-1], ":".join(fields)])


def test_one_task_line_per_host_fills_the_hosts_the_job_ran_on(tmp_path: Path) -> None:
    # Open MPI starts one task (orted) per other host: node002 has one line for its 4 slots; the
    # master's host cannot hold the 7 slots left, so the 3 over its 4 go to node002, the job's
    # other host, up to its slots
    lines = [line for line in FIXTURE.read_text().splitlines() if not any(f":{i}.node" in line for i in range(2, 8))]
    assert sum(":1.node002:" in line for line in lines) == 1
    got = parts(tmp_path, lines)
    assert got["sgeuser"] == pytest.approx(3600 + 450 + 450)
    assert got["idle"] == pytest.approx((3 * 1800 + 4 * 900 + 2 * 900) / 4)


CONFIG = """\
cloud: {provider: local}
state_dir: STATE
policy: {billing: second}
node_groups:
  - {name: compute, slots: 4, max_nodes: 4, price_per_hour: 1.0}
"""


def test_elb_spend_says_which_parallel_jobs_it_charged_to_their_master_host_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:

    monkeypatch.setattr("elb.cli.spend.time.time", lambda: T0 + 4000)
    two_nodes(tmp_path).close()
    cfg = tmp_path / "elb.yml"
    cfg.write_text(CONFIG.replace("STATE", str(tmp_path)))
    acct = tmp_path / "accounting"
    whole = FIXTURE.read_text().splitlines()
    acct.write_text("\n".join(whole) + "\n")
    assert main(["spend", "-c", str(cfg), "--since", "1d", "--accounting", str(acct)]) == 0
    assert "master's host alone" not in capsys.readouterr().out
    acct.write_text("\n".join(line for line in whole if ".node00" not in line) + "\n")  # no task lines
    assert main(["spend", "-c", str(cfg), "--since", "1d", "--accounting", str(acct)]) == 0
    out = capsys.readouterr().out
    assert "(1 parallel job(s) charged to their master's host alone" in out
