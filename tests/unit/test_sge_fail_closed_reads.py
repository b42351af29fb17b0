"""Reads of Grid Engine that fail closed: what cannot be read is never guessed into work.

- ``qstat -xml -j`` (a waiting job's ``qsub -a`` time) that fails, hangs or prints what cannot be
  read: its jobs are not demand this pass (a start time can only take a job out of the demand),
  each reported with why, and counted again once the read works;
- ``qstat -f``'s queue instances against ``qhost -q``'s: a queue instance listed twice, or with
  other slots than qhost gives it, is a pair of reads that disagree: refused, naming the host and
  both numbers;
- an array job's ``<tasks>`` that is empty: refused, naming the job, never read as one task;
- their siblings, fields SGE always prints whose absence would be read as a default that adds or
  takes away work: a job entry without any time, a queue instance without ``slots_resv``, an
  empty ``<hard_req_queue>``, a ``<requested_pe>`` without its range, a job of 0 slots, a
  waiting entry listed twice: each refused.

Every document is real-shaped: the recorded outputs of tests/fixtures/sge/recorded, edited only
where each defect is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from elb.core.config import Config, parse_config
from elb.core.model import Job
from elb.core.scheduler import SchedulerError
from elb.schedulers.sge.commands import CommandResult, SgeCommands
from elb.schedulers.sge.config import SgeConfig
from elb.schedulers.sge.driver import GridEngine
from elb.schedulers.sge.errors import SgeParseError, SgeTimeoutError
from elb.schedulers.sge.parse import check_agree, join_snapshot, parse_qhost, parse_qstat, parse_snapshot
from elb.schedulers.sge.starttimes import BATCH, StartTimes
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.unit.factories import T0, pending
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge
from tests.unit.test_sge_parse_paths import check

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "recorded"
DJOB = (RECORDED / "qstat-j-execution-time.djob.txt").read_text()
QSTAT = (RECORDED / "busy-2-nodes.qstat-f.xml").read_text()  # job 7: tasks 2-10:1 waiting, task 1 running
QHOST = (RECORDED / "busy-2-nodes.qhost.xml").read_text()
LONG = 30 * 60  # waited well past every wait rule
LATER = T0 + 3 * 3600  # the qsub -a time of the held job


@pytest.fixture(autouse=True)
def master_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    yield


def once(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def djob(starts: Mapping[int, int]) -> bytes:
    """``qstat -xml -j`` as SGE 8.1.9 prints it, for these jobs (job number -> JB_execution_time,
    0: no ``qsub -a``): the recorded answer's first entry, once per job."""
    head, rest = DJOB.split("    <element>\n      <JB_job_number>1<", 1)
    entry = (
        "    <element>\n      <JB_job_number>1<" + rest[: rest.index("\n    </element>\n") + len("\n    </element>\n")]
    )
    tail = DJOB[DJOB.index("  </djob_info>") :]
    entries = [
        once(
            once(entry, "<JB_job_number>1<", f"<JB_job_number>{job}<"),
            "<JB_execution_time>1827662400<",
            f"<JB_execution_time>{when}<",
        )
        for job, when in starts.items()
    ]
    return (head + "".join(entries) + tail).encode()


Answer = Callable[[tuple[str, ...]], CommandResult]


class QstatJ(FakeSge):
    """The in-memory SGE of tests/unit/fakes.py, but ``qstat -xml -j`` is the real client's,
    over whatever ``answer`` prints for it (real-shaped XML, garbage, an exit status, a hang)."""

    answer: Answer

    def start_times(self, job_ids: Sequence[int]) -> dict[int, float | None]:
        self.calls.append(f"qstat -j {','.join(map(str, job_ids))}")
        return self.client.start_times(job_ids)

    def use(self, answer: Answer, bin_dir: Path) -> None:
        def runner(argv: Sequence[str], *, timeout: float, env: Mapping[str, str]) -> CommandResult:
            return answer(tuple(argv))

        self.client = SgeCommands(SgeConfig(bin_dir=bin_dir), runner=runner)


def answers(body: bytes, returncode: int = 0, stderr: str = "") -> Answer:
    return lambda argv: CommandResult(argv, returncode, body, stderr)


def hangs(argv: tuple[str, ...]) -> CommandResult:
    raise SgeTimeoutError("no answer within 30 s; killed its process group", command=argv)


FAILURES = {
    "garbled XML": answers(djob({50: int(LATER)})[:700]),
    "a time-out": hangs,
    "exit status 1": answers(b"", 1, "error: failed receiving gdi request response for mid=1 (got syncron message)"),
    "no JB_execution_time": answers(
        once(djob({50: int(LATER)}).decode(), "<JB_execution_time>", "<JB_x>")
        .replace("</JB_execution_time>", "</JB_x>", 1)
        .encode()
    ),
}


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return parse_config({"state_dir": str(tmp_path / "state"), "policy": {"max_nodes": 4, "slots_per_node": 2}})


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    path = tmp_path / "bin"
    path.mkdir()
    exe = path / "qstat"
    exe.write_text("#!/bin/sh\nexit 1\n")
    exe.chmod(0o755)
    return path


def balancer_over(cfg: Config, sge: FakeSge) -> tuple[Balancer, FakeCloud]:
    """A balancer over ``sge``, with a cloud of its own."""
    cloud = FakeCloud(T0)
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=Journal(cfg.journal_path),
        cloud=cloud,
        provisioner=FakeProvisioner(sge),
    )
    return bal, cloud


def balancer(cfg: Config, jobs: list[Job], answer: Answer, bin_dir: Path) -> tuple[Balancer, QstatJ, FakeCloud]:
    sge = QstatJ(T0, jobs=list(jobs))
    sge.use(answer, bin_dir)
    bal, cloud = balancer_over(cfg, sge)
    return bal, sge, cloud


# -- qstat -xml -j that fails -----------------------------------------------------------------------


@pytest.mark.parametrize("failure", FAILURES.values(), ids=FAILURES.keys())
def test_a_job_held_by_qsub_a_is_not_demand_while_qstat_j_fails(cfg: Config, bin_dir: Path, failure: Answer) -> None:
    bal, sge, cloud = balancer(cfg, [pending(50, LONG, slots=2)], failure, bin_dir)
    for _ in range(3):  # pass after pass: asked again each time, never launched for
        assert bal.run_pass().ok
        assert cloud.counter == 0
        (refused,) = bal.last.not_demand
        assert refused.held and not refused.unservable
        assert refused.describe().startswith("job 50: held: its details could not be read: ")
        assert bal.last.unservable_jobs == 0
    assert len([c for c in sge.calls if c.startswith("qstat -j")]) == 3
    sge.use(answers(djob({50: int(LATER)})), bin_dir)  # the read works: held by qsub -a, not demand
    bal.run_pass()
    assert cloud.counter == 0
    (refused,) = bal.last.not_demand
    assert refused.until == LATER and refused.describe().startswith("job 50: not yet: qsub -a")
    sge.now = LATER + 1  # its time has come: it is demand
    bal.run_pass()
    assert [i.name for i in cloud.instances.values()] == ["node001"]


@pytest.mark.parametrize("failure", FAILURES.values(), ids=FAILURES.keys())
def test_a_job_whose_qstat_j_failed_counts_again_once_the_read_works(
    cfg: Config, bin_dir: Path, failure: Answer
) -> None:
    bal, sge, cloud = balancer(cfg, [pending(50, LONG, slots=2)], failure, bin_dir)
    bal.run_pass()
    assert cloud.counter == 0 and [n.job.job_id for n in bal.last.not_demand] == [50]
    sge.use(answers(djob({50: 0})), bin_dir)  # no qsub -a: demand
    bal.run_pass()
    assert bal.last.not_demand == ()
    assert [i.name for i in cloud.instances.values()] == ["node001"]


def test_only_the_jobs_asked_about_in_vain_are_held_back(bin_dir: Path) -> None:
    """The answer leaves job 8 out (it lists 7 only): 8 is unread, 7 is known; the next update
    asks about 8 alone."""
    sge = QstatJ(T0)
    sge.use(answers(djob({7: int(LATER)})), bin_dir)
    times = StartTimes()
    jobs = [pending(7, 60), pending(8, 50)]
    assert times.update(sge, jobs) == {7: LATER}
    assert dict(times.unread) == {8: "qstat -j did not show its start time (qsub -a)"}
    sge.use(answers(djob({8: 0})), bin_dir)
    assert times.update(sge, jobs) == {7: LATER}
    assert dict(times.unread) == {}
    assert sge.calls == ["qstat -j 7,8", "qstat -j 8"]


# -- an array job's <tasks> that is empty -----------------------------------------------------------


@pytest.mark.parametrize("empty", ["<tasks></tasks>", "<tasks/>", "<tasks> </tasks>"])
def test_an_array_job_with_empty_tasks_is_refused_never_one_task(empty: str) -> None:
    text = once(QSTAT, "<tasks>2-10:1</tasks>", empty)
    assert check(text.encode()) is None  # the quick reader declines, the careful one refuses
    with pytest.raises(SgeParseError, match=r"job_list #\d+ \(job 7\): <tasks> is empty"):
        parse_qstat(text.encode())


def test_a_running_array_task_with_empty_tasks_is_refused() -> None:
    text = once(QSTAT, "<tasks>1</tasks>", "<tasks></tasks>")
    assert check(text.encode()) is None
    with pytest.raises(SgeParseError, match=r"\(job 7\): <tasks> is empty"):
        parse_qstat(text.encode())


@pytest.mark.parametrize(("spec", "tasks"), [("1-54:1", 54), ("3,5-9:2", 4), ("2-10:1", 9), ("7", 1)])
def test_task_ranges_are_counted(spec: str, tasks: int) -> None:
    text = once(QSTAT, "<tasks>2-10:1</tasks>", f"<tasks>{spec}</tasks>")
    quick = check(text.encode())
    assert quick is not None  # the quick reader reads it, as the careful one does
    (job,) = [j for j in quick.jobs if j.job_id == 7 and j.is_pending]
    assert (job.tasks, job.task_ids) == (tasks, spec)


# -- qstat's slots against qhost's -------------------------------------------------------------------

# node001 is full in busy-2-nodes (4 of its 4 slots used); a second, empty block for the same queue
# instance, as a garbled qstat -f could print it, would make it look free.
EMPTY_NODE001 = """    <Queue-List>
      <name>all.q@node001</name>
      <qtype>BIP</qtype>
      <slots_used>0</slots_used>
      <slots_resv>0</slots_resv>
      <slots_total>4</slots_total>
      <arch>lx-amd64</arch>
    </Queue-List>
"""
TWICE = once(QSTAT, "  </queue_info>", EMPTY_NODE001 + "  </queue_info>")
ABSURD = once(QSTAT, "<slots_total>4</slots_total>", "<slots_total>400</slots_total>")  # node001's


def test_the_reads_as_they_are_agree() -> None:
    snap = parse_snapshot(QSTAT.encode(), QHOST.encode(), T0)
    assert {h.name: h.free_slots for h in snap.hosts} == {"node001": 0, "node002": 0}


def test_a_queue_instance_qstat_lists_twice_is_refused_not_read_as_free() -> None:
    qstat, hosts = parse_qstat(TWICE.encode()), parse_qhost(QHOST.encode())
    assert join_snapshot(qstat, hosts, T0).host("node001").free_slots == 4  # type: ignore[union-attr]  # the last block wins
    with pytest.raises(
        SgeParseError,
        match=r"qstat -f lists queue instance all\.q@node001 twice \(slots_total 4 and 4, slots_used 4 and 0\)",
    ):
        check_agree(qstat, hosts)
    with pytest.raises(SgeParseError, match="node001"):
        parse_snapshot(TWICE.encode(), QHOST.encode(), T0)


def test_slots_total_qhost_does_not_give_the_queue_instance_is_refused() -> None:
    qstat, hosts = parse_qstat(ABSURD.encode()), parse_qhost(QHOST.encode())
    assert join_snapshot(qstat, hosts, T0).host("node001").free_slots == 396  # type: ignore[union-attr]  # taken as is
    with pytest.raises(
        SgeParseError,
        match=r"all\.q@node001 on node001 has 400 slots in qstat -f \(slots_total\) but 4 in qhost \(slots\)",
    ):
        check_agree(qstat, hosts)


def test_a_queue_instance_qhost_does_not_list_on_its_host_is_refused() -> None:
    """qstat -f lists big.q@node001 (4 free slots), qhost -q lists node001 with all.q alone."""
    extra = EMPTY_NODE001.replace("all.q@node001", "big.q@node001")
    qstat = once(QSTAT, "  </queue_info>", extra + "  </queue_info>")
    with pytest.raises(
        SgeParseError,
        match=r"node001 has 8 slots in qstat -f \(slots_total of its queue instances\) but 4 in qhost",
    ):
        parse_snapshot(qstat.encode(), QHOST.encode(), T0)


def test_a_queue_qhost_lists_twice_on_a_host_is_refused() -> None:
    start = QHOST.index(" <queue name='all.q'>")
    block = QHOST[start : QHOST.index(" </queue>", start) + len(" </queue>\n")]
    qhost = once(QHOST, block, block + block)
    with pytest.raises(SgeParseError, match=r"qhost lists queue all\.q twice on node001"):
        parse_snapshot(QSTAT.encode(), qhost.encode(), T0)


@pytest.mark.parametrize("qstat", [TWICE, ABSURD], ids=["listed twice", "absurd slots_total"])
def test_the_driver_refuses_the_read(tmp_path: Path, qstat: str) -> None:
    """Through the real client: the pass's read fails (SchedulerError), nothing is decided on it."""
    path = tmp_path / "bin"
    path.mkdir()
    for name in ("qstat", "qhost"):
        (path / name).write_text("#!/bin/sh\nexit 1\n")
        (path / name).chmod(0o755)
    out = {"qstat": qstat.encode(), "qhost": QHOST.encode()}

    def runner(argv: Sequence[str], *, timeout: float, env: Mapping[str, str]) -> CommandResult:
        return CommandResult(tuple(argv), 0, out[Path(argv[0]).name], "")

    cfg = parse_config({"state_dir": str(tmp_path / "state")})
    driver = GridEngine(cfg, SgeCommands(SgeConfig(bin_dir=path), runner=runner, clock=lambda: T0))
    with pytest.raises(SchedulerError, match="node001"):
        driver.read([], T0)


# -- siblings: other fields whose absence would be read as a default that adds or removes work -----

GROUPS = (RECORDED / "groups-waiting.qstat-r-f.xml").read_text()  # job 3: qsub -q big.q


def refused(text: str, message: str) -> None:
    assert check(text.encode()) is None  # the quick reader declines, the careful one refuses
    with pytest.raises(SgeParseError, match=message):
        parse_qstat(text.encode())


def test_a_waiting_job_without_its_submission_time_is_refused() -> None:
    """Read without one, the job would have waited for ever: past launch_delay at once."""
    text = once(QSTAT, "      <JB_submission_time>2026-11-22T05:16:12</JB_submission_time>\n", "")
    refused(text, r"\(job 10\): no <JB_submission_time>, <JAT_submission_time> or <JAT_start_time>")


def test_a_queue_instance_without_slots_resv_is_refused_in_qstat() -> None:
    """Read as 0, a host holding a reservation for a waiting job would look idle (removable)."""
    refused(once(QSTAT, "      <slots_resv>0</slots_resv>\n", ""), r"all\.q@node001\): missing <slots_resv>")
    refused(once(QSTAT, "<slots_resv>0</slots_resv>", "<slots_resv></slots_resv>"), r"all\.q@node001\): .*<slots_resv>")


def test_a_queue_without_slots_resv_is_refused_in_qhost() -> None:
    qhost = once(QHOST, "   <queuevalue qname='all.q' name='slots_resv'>0</queuevalue>\n", "")
    with pytest.raises(SgeParseError, match=r"host 'node001' queue 'all\.q': missing <queuevalue slots_resv>"):
        parse_qhost(qhost.encode())


def test_an_empty_hard_req_queue_is_refused_not_read_as_unbound() -> None:
    """Read as no -q, a job bound to a queue elb's nodes do not join would be demand."""
    refused(
        once(GROUPS, "<hard_req_queue>big.q</hard_req_queue>", "<hard_req_queue></hard_req_queue>"),
        r"\(job 3\): an empty <hard_req_queue>",
    )
    refused(
        once(GROUPS, "<hard_req_queue>big.q</hard_req_queue>", "<hard_req_queue/>"),
        r"\(job 3\): an empty <hard_req_queue>",
    )


def test_a_requested_pe_without_its_range_is_refused() -> None:
    """Read without a range, the job's slots (the range's smallest) would stand for its width."""
    refused(
        once(QSTAT, '<requested_pe name="smp">8</requested_pe>', '<requested_pe name="smp"></requested_pe>'),
        r"\(job 10\): <requested_pe name=\"smp\"> without its range",
    )


def _pending_entry(job: int) -> str:
    start = QSTAT.index(f'    <job_list state="pending">\n      <JB_job_number>{job}<')
    return QSTAT[start : QSTAT.index("    </job_list>\n", start) + len("    </job_list>\n")]


@pytest.mark.parametrize("job", [10, 7], ids=["a job", "an array job's tasks"])
def test_a_waiting_entry_qstat_lists_twice_is_refused_not_counted_twice(job: int) -> None:
    entry = _pending_entry(job)
    text = once(QSTAT, entry, entry + entry)
    with pytest.raises(SgeParseError, match=rf"qstat lists waiting job {job}(, tasks 2-10:1,)? twice"):
        parse_snapshot(text.encode(), QHOST.encode(), T0)


def test_an_array_job_in_two_entries_of_other_tasks_is_read() -> None:
    """SGE lists an array job's tasks in one entry per state: hqw 11-12:1 besides qw 2-10:1."""
    entry = _pending_entry(7)
    held = once(
        once(entry, "<tasks>2-10:1</tasks>", "<tasks>11-12:1</tasks>"), "<state>qw</state>", "<state>hqw</state>"
    )
    snap = parse_snapshot(once(QSTAT, entry, entry + held).encode(), QHOST.encode(), T0)
    assert [(j.state, j.task_ids) for j in snap.jobs if j.job_id == 7 and j.queue is None] == [
        ("qw", "2-10:1"),
        ("hqw", "11-12:1"),
    ]


def test_a_job_of_no_slots_is_refused() -> None:
    """SGE gives every entry at least one slot: 0 would be read as one slot by the demand model."""
    entry = _pending_entry(9)
    refused(once(QSTAT, entry, entry.replace("<slots>1</slots>", "<slots>0</slots>")), r"\(job 9\): <slots> is 0")


# -- more new waiting jobs than one qstat -j call asks about ------------------------------------------


def test_a_burst_of_qsub_a_jobs_is_read_in_one_pass_and_none_counts_before_it_is_read(cfg: Config) -> None:
    """120 new jobs, every one held by qsub -a until later: they are read in one pass (calls of
    at most ``BATCH`` jobs each), so no job counts as demand before its start time is read."""
    jobs = [pending(n, LONG, slots=2) for n in range(1, 121)]
    sge = FakeSge(T0, jobs=list(jobs), starts=dict.fromkeys(range(1, 121), LATER))
    bal, cloud = balancer_over(cfg, sge)
    assert bal.run_pass().ok
    assert cloud.counter == 0
    asked = [c for c in sge.calls if c.startswith("qstat -j")]
    assert len(asked) == 3 and all(len(c.split(",")) <= BATCH for c in asked)
    assert {n.job.job_id for n in bal.last.not_demand} == set(range(1, 121))
    assert all(n.until == LATER for n in bal.last.not_demand)


def test_jobs_past_the_passs_bound_are_held_until_asked_about() -> None:
    """More new jobs than a pass reads: the oldest are read, in calls of ``batch``; the others
    are not demand this pass (held, with why) and are read the next pass."""
    sge = FakeSge(T0, starts={})
    times = StartTimes(batch=2, per_pass=4)
    jobs = [pending(n, 100 - n) for n in range(1, 7)]
    assert times.update(sge, jobs) == {}
    assert sge.calls == ["qstat -j 1,2", "qstat -j 3,4"]
    assert set(times.unread) == {5, 6}
    assert all("not asked about it yet" in why for why in times.unread.values())
    sge.calls.clear()
    times.update(sge, jobs)
    assert sge.calls == ["qstat -j 5,6"] and dict(times.unread) == {}


def test_after_a_failed_qstat_j_call_the_pass_asks_no_more() -> None:
    """A call that fails (a time-out, qmaster down): its jobs and the ones not asked yet are
    held this pass; the pass does not wait on more calls."""

    class Down(FakeSge):
        def start_times(self, job_ids: Sequence[int]) -> dict[int, float | None]:
            self.calls.append(f"qstat -j {','.join(map(str, job_ids))}")
            raise SgeTimeoutError("no answer within 30 s", command=("qstat",))

    sge = Down(T0)
    times = StartTimes(batch=2, per_pass=6)
    jobs = [pending(n, 100 - n) for n in range(1, 7)]
    assert times.update(sge, jobs) == {}
    assert sge.calls == ["qstat -j 1,2"]
    assert set(times.unread) == set(range(1, 7))
    assert "no answer" in times.unread[1] and "not asked about it yet" in times.unread[3]
