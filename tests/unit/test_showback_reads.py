"""``elb spend`` charges a parallel job for every host it held even where Grid Engine's accounting
does not say which (no task lines: ``accounting_summary TRUE`` or ``control_slaves FALSE``): each
pass, elb's own read shows which hosts each running job holds and how many slots on each, and
the journal keeps that for the jobs that span hosts; the bill spreads such a job's slots as the
reads saw them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.attribution import JobUse, SeenOn, placed, spanning_jobs
from elb.schedulers.sge.parse import parse_qstat
from elb.service.journal import Journal
from tests.unit.test_showback_pe import CONFIG, FIXTURE, T0, parts, two_nodes

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "recorded"


def test_the_jobs_a_read_shows_on_several_hosts_and_their_slots_there() -> None:
    jobs = parse_qstat((RECORDED / "busy-2-nodes.qstat-f.xml").read_bytes()).jobs
    # job 6 (mpi, 3 slots): 2 on node001, 1 on node002; every other running job is on one host
    assert spanning_jobs(jobs) == {"6": {"node001": 2, "node002": 1}}


def test_a_job_charged_to_its_master_host_alone_is_spread_as_the_reads_saw_it() -> None:
    alone = JobUse("10", "node001", T0, T0 + 100, 8, "u", "p", "q", master_only=True)
    other = JobUse("11", "node001", T0, T0 + 100, 1, "u")
    unseen = JobUse("12", "node002", T0, T0 + 100, 8, "u", master_only=True)
    seen = {
        "10": [SeenOn("node001", 3, T0 + 5, T0 + 90), SeenOn("node002", 5, T0 + 5, T0 + 90)],
        "11": [SeenOn("node001", 1, T0, T0 + 100), SeenOn("node003", 1, T0, T0 + 100)],
        "12": [SeenOn("node001", 4, T0 + 500, T0 + 900), SeenOn("node002", 4, T0 + 500, T0 + 900)],  # another run
    }
    out = placed([alone, other, unseen], seen)
    assert [(u.job, u.host, u.slots, u.master_only) for u in out] == [
        ("10", "node001", 3, False),
        ("10", "node002", 5, False),
        ("11", "node001", 1, False),  # its accounting said where: kept
        ("12", "node002", 8, True),  # not seen on several hosts during its run: as the accounting has it
    ]
    assert all((u.start, u.end, u.user) == (T0, T0 + 100, "u") for u in out)
    # the reads saw fewer (or more) slots than the job holds: shared out in proportion
    half = placed([alone], {"10": [SeenOn("node001", 1, T0, T0), SeenOn("node002", 1, T0, T0)]})
    assert [(u.host, u.slots) for u in half] == [("node001", 4), ("node002", 4)]


def test_the_journal_keeps_each_spanning_jobs_hosts_over_the_passes(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.sqlite")
    j.mark_seen(T0, job_hosts={"10": {"node001": 4, "node002": 2}})
    j.mark_seen(T0 + 60, job_hosts={"10": {"node001": 4, "node002": 4}})  # a task more on node002
    j.mark_seen(T0 + 120)
    assert j.job_hosts(T0 - 10, T0 + 200) == {
        "10": [SeenOn("node001", 4, T0, T0 + 60), SeenOn("node002", 4, T0, T0 + 60)]
    }
    j.mark_seen(T0 + 60 + 901, job_hosts={"10": {"node001": 4}})  # seen again past the gap: a new stretch
    assert [s.first for s in j.job_hosts(T0, T0 + 2000)["10"]] == [T0, T0, T0 + 961]
    assert j.job_hosts(T0 + 500, T0 + 900) == {}  # not seen in that window
    j.close()
    again = Journal(tmp_path / "journal.sqlite")  # kept across a restart
    assert len(again.job_hosts(T0, T0 + 60)["10"]) == 2
    again.close()


def test_elb_spend_spreads_a_job_without_task_lines_as_elbs_reads_saw_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("elb.cli.spend.time.time", lambda: T0 + 4000)
    j = two_nodes(tmp_path)
    for t in range(150, 1900, 60):  # PE job 10 (8 slots), 4 on each node, as each pass read it
        j.mark_seen(T0 + t, job_hosts={"10": {"node001": 4, "node002": 4}})
    j.close()
    cfg = tmp_path / "elb.yml"
    cfg.write_text(CONFIG.replace("STATE", str(tmp_path)))
    acct = tmp_path / "accounting"
    acct.write_text("\n".join(line for line in FIXTURE.read_text().splitlines() if ".node00" not in line) + "\n")
    assert main(["spend", "-c", str(cfg), "--since", "1d", "--accounting", str(acct), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by = {(p["key"] or p["kind"]): p["node_hours"] * 3600 for p in doc["parts"]}
    # the same bill as with the task lines (test_showback_pe): both nodes the job's for 1800 s
    assert by["sgeuser"] == pytest.approx(3600 + 450 + 450)
    assert doc["parallel_jobs_on_master_host_only"] == 0
    assert doc["parallel_jobs_placed_by_elbs_reads"] == 1
    # without elb's reads the same file leaves node002's half idle (test_showback_pe)
    assert parts(tmp_path / "bare", acct.read_text().splitlines())["master_only"] == 1
