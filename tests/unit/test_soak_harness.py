"""The random-fault soak's own counting and submitting (tests/faults/soak.py): a task's runs
from its start and done lines, as the busy-terminated count reads them; a job submitted once;
its workload and fault schedule, the hour's and the lean run's."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from elb.core.model import NodeState
from elb.service.journal import Journal
from tests.faults.soak import (
    FAULT_KINDS,
    HOUR,
    LEAN,
    clear_waits,
    fate,
    fault_schedule,
    journal_counts,
    listed_on,
    on_killed_node,
    slowest,
    submit_once,
    task_runs,
    tasks_of,
    workload,
)

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "recorded"


def test_a_run_that_started_again_elsewhere_ended_by_the_next_start() -> None:
    # s017.0 of a seed-7 soak: started on node001, whose container the soak killed; Slurm ran it
    # again on node003. node001 came back much later and was removed idle: the first run must not
    # count as running there then.
    starts = [("node001", 100.0), ("node003", 580.0)]
    done = [("node003", 700.0)]
    assert task_runs(starts, done) == [("node001", 100.0, 580.0), ("node003", 580.0, 700.0)]


def test_the_last_run_is_open_until_its_done_line() -> None:
    assert task_runs([("node002", 5.0)], []) == [("node002", 5.0, None)]
    assert task_runs([], []) == []


def test_a_run_on_a_node_the_soak_killed_ended_at_the_kill() -> None:
    # The soak killed node001 at 40 s while the task ran there; Slurm ran it again on node002
    # only at 560 s. A node001 launched again meanwhile (and removed idle at 500 s) did not run it.
    runs = task_runs([("node001", 30.0), ("node002", 560.0)], [("node002", 700.0)], {"node001": 40.0})
    assert runs == [("node001", 30.0, 40.0), ("node002", 560.0, 700.0)]
    # A run that began after the kill (on a node of the same name, launched again) is its own.
    assert task_runs([("node001", 300.0)], [("node001", 350.0)], {"node001": 40.0}) == [("node001", 300.0, 350.0)]


def test_a_run_on_a_node_of_the_same_name_launched_after_the_kill_is_not_the_faults() -> None:
    # A Slurm soak (seed 1): the soak killed node001 at 09:28:19 while s001.0 ran there; Slurm
    # gave the name to a new node001 at 09:35, and ran s008.0 there at 09:37:21. That run is on
    # a node the soak did not kill: not to be cancelled as the fault's, nor counted as killed by it.
    killed = {"node001": 1000.0}
    assert on_killed_node("node001", 990.0, killed)
    assert on_killed_node("node001", 1000.0, killed)
    assert not on_killed_node("node001", 1550.0, killed)
    assert not on_killed_node("node002", 990.0, killed)


def test_the_operator_deletes_every_job_sge_lists_on_a_dead_node() -> None:
    # A Grid Engine hour (seed 7): the soak killed node077 under job 283, and SGE also listed
    # job 287, dispatched there around the kill, whose start the soak never saw. The operator's
    # stand-in deleted only 283; SGE listed 287 on the dead node to the end, and elb rightly kept
    # it. The stand-in now deletes what SGE lists there (a recorded qstat -f: node002 died under
    # a PE job's master, a PE job's slave task and an array task).
    xml = (RECORDED / "node-died.qstat-f.xml").read_bytes()
    assert listed_on(xml, "node002") == ["5", "6", "7.1"]
    assert listed_on(xml, "node001") == ["3", "4", "6"]
    assert listed_on(xml, "node003") == []
    # qdel's ids back to the soak's (tag, task): a plain job is task 0.
    job_ids = {"s001": "5", "s002": "7", "s003": "ran", "s004": "6"}
    assert tasks_of(["5", "6", "7.1", "9"], job_ids) == [("s001", "0"), ("s004", "0"), ("s002", "1")]


def test_a_task_the_operator_deleted_off_a_dead_node_was_killed_by_the_fault() -> None:
    killed = {"node077": 1000.0}
    assert fate([("node003", 10.0)], [("node003", 50.0)], killed, released=False) == "done"
    assert fate([("node077", 990.0)], [], killed, released=False) == "killed by the fault"
    # dispatched to the dead node at the kill: it never wrote its start, and the operator deleted it
    assert fate([], [], killed, released=True) == "killed by the fault"
    assert fate([], [], killed, released=False) == "lost"
    # a run on a node of the same name launched after the kill is not the fault's
    assert fate([("node077", 1500.0)], [], killed, released=False) == "lost"


def test_a_submission_that_timed_out_but_got_in_is_not_submitted_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """slurmctld busy: sbatch said 'Socket timed out' though the job got in; submitted again, the
    job ran twice and the soak counted it started again by elb (seed 7, s024)."""
    monkeypatch.setattr(time, "sleep", lambda _s: None)
    submitted: list[str] = []
    said: list[str] = []

    def submit() -> str:
        submitted.append("98")
        raise RuntimeError("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation")

    answers: list[str | Exception | None] = [RuntimeError("squeue: timed out"), "98"]

    def find() -> str | None:
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    assert submit_once("s024", submit, find, said.append) == "98"
    assert submitted == ["98"]
    assert any("cannot tell" in s for s in said)


def test_a_submission_that_did_not_get_in_is_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda _s: None)
    tries = iter([RuntimeError("sbatch: Unable to contact slurm controller"), None])

    def submit() -> str:
        t = next(tries)
        if t is not None:
            raise t
        return "99"

    assert submit_once("s025", submit, lambda: None, lambda _m: None) == "99"


def test_a_node_left_is_counted_once_whatever_the_disagreements_say_of_it() -> None:
    """The hour of Grid Engine counted node088 twice: left after the wind-down, and the journal's
    disagreement about it ("journal: node088 ready but its container is gone")."""
    from tests.faults.soak import leaked_count

    said = ["journal: node088 ready but its container is gone", "/etc/hosts: a line for node0881"]
    assert leaked_count(["node088"], said) == 2  # node0881 is another node
    assert leaked_count(["node088"], said[:1]) == 1
    assert leaked_count([], said[:1]) == 1


def test_the_slowest_waits_name_the_faults_under_way_while_they_waited() -> None:
    faults = [
        {"at": 100.0, "kind": "capacity", "for": 60.0},
        {"at": 300.0, "kind": "elb_kill"},
        {"at": 500.0, "kind": "ctl_restart", "took": 5.0},
    ]
    waited = [(20.0, "s001.0", 10.0), (130.0, "s002.0", 90.0), (90.0, "s003.0", 280.0), (95.0, "s004.0", 700.0)]
    assert slowest(waited, 90.0, faults) == [
        "s002.0: waited 130 s from +90 s; faults under way: capacity@100",
        "s004.0: waited 95 s from +700 s; faults under way: none",
        "s003.0: waited 90 s from +280 s; faults under way: elb_kill@300",
    ]


def test_a_wait_is_clear_when_it_met_no_fault_that_stops_launching_or_scheduling() -> None:
    faults = [
        {"at": 100.0, "kind": "capacity", "for": 60.0},
        {"at": 300.0, "kind": "stress", "for": 50.0},
        {"at": 500.0, "kind": "ctl_restart", "took": 5.0},
    ]
    waited = [(30.0, "s001.0", 50.0), (80.0, "s002.0", 90.0), (60.0, "s003.0", 280.0), (20.0, "s004.0", 490.0)]
    # s002 waited through the capacity fault, s004 through the restart; s003 met only busy cores
    assert clear_waits(waited, faults) == [30.0, 60.0]


def test_a_node_the_soak_killed_is_paid_for_until_the_kill(tmp_path: Path) -> None:
    """A stopped instance bills no compute: node001, killed 100 s after its launch and kept
    registered 900 s more (its job still listed), costs 100 s; node002, never killed, costs its
    whole life (launch to termination), and node003, alive at the end, until ``now``."""
    path = tmp_path / "journal.sqlite"
    j = Journal(path)
    try:
        for name, t in (("node001", 1000.0), ("node002", 1000.0), ("node003", 1500.0)):
            j.record(name, NodeState.LAUNCHING, t)
            j.record(name, NodeState.RUNNING, t + 1)
            j.record(name, NodeState.READY, t + 30)
        j.record("node001", NodeState.TERMINATED, 2000.0)
        j.record("node002", NodeState.TERMINATED, 1600.0)
    finally:
        j.close()
    counts = journal_counts(path, {}, {"node001": 1100.0}, {}, since=900.0, now=1800.0)
    assert counts.launches == 3
    assert counts.node_seconds == 100.0 + 600.0 + 300.0


def _digest(minutes: float, seed: int) -> str:
    subs = [(s.at, s.tag, s.kind, s.seconds, s.tasks) for s in workload(minutes, seed)]
    faults = [(f.at, f.kind, f.seconds) for f in fault_schedule(minutes, seed)]
    return hashlib.sha256(repr(subs + faults).encode()).hexdigest()[:16]


def test_the_hours_workload_and_faults_stay_those_of_the_kept_runs() -> None:
    # benchmarks/bench_soak.py compares a faulted hour with a kept fault-free hour of the same seed
    # (--reuse-fault-free): the seed-7 hour's jobs and faults must stay what they were.
    assert _digest(60, 7) == "a684a2ae578efc42"
    assert workload(60, 7) == workload(60, 7, HOUR)
    assert fault_schedule(60, 7) == fault_schedule(60, 7, HOUR)


@pytest.mark.parametrize("seed", [1, 2, 7, 1234])
def test_the_lean_run_meets_every_fault_once_each_short(seed: int) -> None:
    faults = fault_schedule(3, seed, LEAN)
    assert sorted(f.kind for f in faults) == sorted(FAULT_KINDS)
    assert all(20 <= f.at <= 3 * 60 - 45 for f in faults)
    assert all(10 <= f.seconds <= 25 for f in faults)
    jobs = workload(3, seed, LEAN)
    assert jobs and max(j.seconds for j in jobs) <= 60
    assert max(j.seconds for j in jobs) < max(j.seconds for j in workload(3, seed))
