"""The SGE command runner, with real processes.

There is no qmaster here, so each test writes fake ``qstat``/``qhost``/``qmod``/``qconf``
executables into a temporary bin directory: small Python scripts that log how they were called
and then print XML, fail, or hang past the timeout. elb runs them exactly as it runs SGE's
(argument lists, own process group, timeout), so what is tested is the real plumbing; what the
fakes print is hand-made 8.1.9-format XML (tests/fixtures/sge/handmade).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from elb.schedulers.sge.commands import QHOST_ARGS, QSTAT_ARGS, Rescheduled, Retry, SgeCommands, run_command
from elb.schedulers.sge.config import SgeConfig
from elb.schedulers.sge.errors import SgeError, SgeParseError, SgeTimeoutError

HANDMADE = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "handmade"

PRELUDE = """#!{python}
import json, os, sys, time
with open({log!r}, "a") as f:
    f.write(json.dumps({{"argv": sys.argv, "env": dict(os.environ)}}) + "\\n")
"""


class FakeSge:
    """A bin directory of fake SGE commands and the log of their calls."""

    def __init__(self, tmp_path: Path) -> None:
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.log = tmp_path / "calls.jsonl"
        self.tmp = tmp_path
        self.slept: list[float] = []

    def command(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text(PRELUDE.format(python=sys.executable, log=str(self.log)) + body)
        path.chmod(0o755)

    def prints(self, name: str, fixture: str, code: int = 0) -> None:
        self.command(
            name, f"sys.stdout.buffer.write(open({str(HANDMADE / fixture)!r}, 'rb').read())\nsys.exit({code})\n"
        )

    def says(self, name: str, stdout: str = "", stderr: str = "", code: int = 0) -> None:
        self.command(name, f"sys.stdout.write({stdout!r})\nsys.stderr.write({stderr!r})\nsys.exit({code})\n")

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def argv(self) -> list[list[str]]:
        return [[Path(c["argv"][0]).name, *c["argv"][1:]] for c in self.calls()]

    def client(self, timeout: float = 20.0, clock: Any = None, **env: str) -> SgeCommands:
        cfg = SgeConfig(root=self.tmp / "sge-root", cell="testcell", bin_dir=self.bin, timeout=timeout)
        environ = {"PATH": "/usr/bin:/bin", **env}
        retry = Retry(sleep=self.slept.append)  # the back-off between tries recorded, not slept
        if clock is None:
            return SgeCommands(cfg, environ=environ, retry=retry)
        return SgeCommands(cfg, environ=environ, clock=clock, retry=retry)


@pytest.fixture
def fake(tmp_path: Path) -> FakeSge:
    return FakeSge(tmp_path)


def test_read_snapshot_runs_both_commands_and_reads_the_clock_once(fake: FakeSge) -> None:
    fake.prints("qstat", "qstat_mixed.xml")
    fake.prints("qhost", "qhost_mixed.xml")
    ticks: list[float] = []

    def clock() -> float:
        ticks.append(1_800_000_000.0)
        return ticks[-1]

    snap = fake.client(clock=clock, MORE_INFO="1").read_snapshot()
    assert ticks == [1_800_000_000.0]
    assert snap.now == 1_800_000_000.0
    assert [h.name for h in snap.hosts] == ["master", "node001", "node002", "node003", "node004"]
    assert len(snap.jobs) == 17
    assert fake.argv() == [["qstat", *QSTAT_ARGS], ["qhost", *QHOST_ARGS]]
    assert QSTAT_ARGS == ("-u", "*", "-xml", "-r", "-f")  # '*' reaches qstat literally: no shell
    for call in fake.calls():
        env = call["env"]
        assert env["SGE_ROOT"] == str(fake.tmp / "sge-root")
        assert env["SGE_CELL"] == "testcell"
        assert env["LC_ALL"] == "C"
        assert "MORE_INFO" not in env  # would make qstat print debug dumps instead of XML


def test_a_second_read_reuses_the_jobs_of_the_first(fake: FakeSge) -> None:
    """Each read of qstat remembers what its entries were made into (``QstatMemo``): the next
    read of the same text gives the very same jobs, equal to a read without memory."""
    fake.prints("qstat", "qstat_mixed.xml")
    fake.prints("qhost", "qhost_mixed.xml")
    client = fake.client()
    first, second = client.read_snapshot(), client.read_snapshot()
    assert second.jobs == first.jobs == fake.client().read_snapshot().jobs
    assert all(a is b for a, b in zip(second.jobs, first.jobs, strict=True))
    assert not any(a is b for a, b in zip(fake.client().read_snapshot().jobs, first.jobs, strict=True))


def test_commands_found_on_path_when_no_bin_dir(fake: FakeSge) -> None:
    fake.prints("qstat", "qstat_no_queues.xml")
    fake.prints("qhost", "qhost_global_only.xml")
    cfg = SgeConfig(timeout=20)
    snap = SgeCommands(cfg, environ={"PATH": f"{fake.bin}:/usr/bin"}, clock=lambda: 7.0).read_snapshot()
    assert (snap.now, snap.jobs, snap.hosts) == (7.0, (), ())
    assert fake.calls()[0]["env"]["SGE_ROOT"] == "/var/lib/gridengine"


def test_missing_command(fake: FakeSge) -> None:
    with pytest.raises(SgeError, match=r"qstat not found: .*bin/qstat is not an executable file"):
        fake.client().read_snapshot()
    with pytest.raises(SgeError, match=r"qstat not found on PATH; set sge.bin_dir"):
        SgeCommands(SgeConfig(), environ={"PATH": str(fake.tmp)}).read_snapshot()


def test_failing_qstat_names_command_status_and_stderr(fake: FakeSge) -> None:
    fake.says("qstat", stderr="error: commlib error: got select error (Connection refused)\n", code=1)
    fake.prints("qhost", "qhost_mixed.xml")
    with pytest.raises(SgeError) as info:
        fake.client().read_snapshot()
    err = info.value
    assert err.returncode == 1
    assert err.command is not None and err.command[1:] == QSTAT_ARGS
    assert "Connection refused" in err.stderr
    assert "exit status 1" in str(err) and "Connection refused" in str(err)
    # The qmaster did not answer: tried three times, 1.5 s then 3 s apart; qhost never ran.
    assert err.transient
    assert fake.argv() == [["qstat", *QSTAT_ARGS]] * 3
    assert fake.slept == [1.5, 3.0]


def test_a_queue_instance_on_a_host_qhost_does_not_list_is_refused(fake: FakeSge) -> None:
    fake.prints("qstat", "qstat_empty.xml")  # all.q@node001
    fake.prints("qhost", "qhost_global_only.xml")
    with pytest.raises(SgeParseError, match=r"all\.q@node001, on node001, which qhost does not list") as info:
        fake.client().read_snapshot()
    assert info.value.command is not None and Path(info.value.command[0]).name == "qstat"


def test_hollow_qstat_beside_a_qhost_with_queues_is_refused(fake: FakeSge) -> None:
    # Well-formed, exit 0, no queue instance and no job: read alone it is an empty queue, and every
    # node would look idle. qhost shows queue instances, so the pair is refused.
    fake.prints("qstat", "qstat_no_queues.xml")
    fake.prints("qhost", "qhost_mixed.xml")
    with pytest.raises(SgeParseError, match="the two reads disagree") as info:
        fake.client().read_snapshot()
    assert info.value.command is not None and Path(info.value.command[0]).name == "qstat"
    fake.prints("qhost", "qhost_global_only.xml")  # a cluster with no exec host: nothing to list
    assert fake.client().read_snapshot().jobs == ()


def test_long_stderr_is_cut_to_its_tail(fake: FakeSge) -> None:
    fake.says("qstat", stderr="x" * 10_000 + "THE END", code=2)
    with pytest.raises(SgeError) as info:
        fake.client().read_snapshot()
    assert info.value.stderr.endswith("THE END") and len(info.value.stderr) <= 2003


def test_garbage_or_truncated_output_is_a_parse_error_naming_the_command(fake: FakeSge) -> None:
    fake.says("qstat", stdout="this is not XML\n")
    fake.prints("qhost", "qhost_mixed.xml")
    with pytest.raises(SgeParseError) as info:
        fake.client().read_snapshot()
    assert info.value.command is not None and Path(info.value.command[0]).name == "qstat"
    assert "not well-formed" in str(info.value)

    data = (HANDMADE / "qstat_mixed.xml").read_bytes()
    (fake.tmp / "cut.xml").write_bytes(data[: len(data) // 2])
    fake.command("qstat", f"sys.stdout.buffer.write(open({str(fake.tmp / 'cut.xml')!r}, 'rb').read())\n")
    with pytest.raises(SgeParseError, match="qstat: XML is not well-formed"):
        fake.client().read_snapshot()


def test_unknown_state_from_qhost_is_a_parse_error(fake: FakeSge) -> None:
    fake.prints("qstat", "qstat_empty.xml")
    fake.says(
        "qhost",
        stdout="<?xml version='1.0'?>\n<qhost>\n <host name='n1'>\n <queue name='all.q'>\n"
        "   <queuevalue qname='all.q' name='slots'>4</queuevalue>\n"
        "   <queuevalue qname='all.q' name='slots_used'>0</queuevalue>\n"
        "   <queuevalue qname='all.q' name='slots_resv'>0</queuevalue>\n"
        "   <queuevalue qname='all.q' name='state_string'>X</queuevalue>\n </queue>\n </host>\n</qhost>\n",
    )
    with pytest.raises(SgeParseError, match=r"host 'n1' queue 'all.q': unknown queue state letter"):
        fake.client().read_snapshot()


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in status  # killed, waiting for its (new) parent to reap it


def test_hanging_qstat_is_killed_with_its_children(fake: FakeSge) -> None:
    pidfile = fake.tmp / "child.pid"
    fake.command(
        "qstat",
        "import subprocess\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(120)\n",
    )
    fake.prints("qhost", "qhost_mixed.xml")
    start = time.monotonic()
    with pytest.raises(SgeTimeoutError, match=r"no answer within 1 s; killed its process group") as info:
        fake.client(timeout=1.0).read_snapshot()
    elapsed = time.monotonic() - start
    assert info.value.returncode is None
    assert elapsed < 60, elapsed  # not the 120 s the fake would sleep
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child), "the fake's child survived the timeout"
    print(f"timeout 1 s: gave up after {elapsed:.2f} s")


def test_run_command_cannot_start() -> None:
    with pytest.raises(SgeError, match="cannot run"):
        run_command(["/nonexistent/qstat"], timeout=5, env={})


def test_disable_and_enable_all_queue_instances_of_a_host(fake: FakeSge) -> None:
    fake.says(
        "qmod",
        stdout='root@master changed state of "all.q@node001" (disabled)\n'
        'root@master changed state of "long.q@node001" (disabled)\n',
    )
    client = fake.client()
    client.disable_host("node001")
    fake.says("qmod", stdout='Queue instance "all.q@node001" is already in the specified state: enabled\n')
    client.enable_host("node001", queues=["all.q", "long.q"])
    assert fake.argv() == [["qmod", "-d", "*@node001"], ["qmod", "-e", "all.q@node001,long.q@node001"]]


@pytest.mark.parametrize(
    ("stdout", "stderr", "code", "message"),
    [
        ("", 'error: denied: host "node001" is neither submit nor admin host\n', 0, "unexpected answer 'error: denied"),
        ('invalid queue or job "*@node009"\n', "", 0, "unexpected answer 'invalid queue"),
        ("", "", 0, r"unexpected answer '\(no output\)'"),
        (
            'root@master changed state of "all.q@node001" (disabled)\nsomething odd\n',
            "",
            0,
            "unexpected answer 'something odd'",
        ),
        ("", "error: commlib error\n", 1, "exit status 1"),
    ],
)
def test_qmod_refusals_are_errors_even_with_exit_status_0(
    fake: FakeSge, stdout: str, stderr: str, code: int, message: str
) -> None:
    fake.says("qmod", stdout=stdout, stderr=stderr, code=code)
    with pytest.raises(SgeError, match=message):
        fake.client().disable_host("node001")


@pytest.mark.parametrize("host", ["$(rm -rf /)", "-e", "node001;id", "", "node 1", "global", "a" * 300, "*", "node@x"])
def test_hostile_host_names_never_reach_a_command(fake: FakeSge, host: str) -> None:
    fake.says("qmod", stdout='root@master changed state of "x" (disabled)\n')
    fake.prints("qstat", "qstat_mixed.xml")
    client = fake.client()
    for action in (client.disable_host, client.enable_host):
        with pytest.raises(SgeError, match="refusing host name"):
            action(host)
    with pytest.raises(SgeError, match="refusing queue name"):
        client.disable_host("node001", queues=["-f"])
    assert fake.calls() == []


def test_a_failure_that_says_nothing_is_an_error(fake: FakeSge) -> None:
    fake.says("qhost", code=1)
    with pytest.raises(SgeError, match=r"failed without saying why \(exit status 1\)"):
        fake.client().run("qhost", QHOST_ARGS)


def test_configured_exec_hosts_reads_qconf_sel(fake: FakeSge) -> None:
    fake.says("qconf", stdout="node001\nnode002.example.org\n")
    assert fake.client().configured_exec_hosts() == {"node001", "node002.example.org"}
    assert [a[1:] for a in fake.argv()] == [["-sel"]]


# SGE 8.1.9's qconf (show_object_list in qconf.c): with no execution host it prints
# "no execution host defined" and an empty line on stderr, and exits 1.
@pytest.mark.parametrize("code", [1, 0])
def test_no_execution_host_defined_is_the_empty_set(fake: FakeSge, code: int) -> None:
    fake.says("qconf", stderr="no execution host defined\n\n", code=code)
    assert fake.client().configured_exec_hosts() == frozenset()


@pytest.mark.parametrize(
    ("stdout", "stderr", "code", "error"),
    [
        # qconf exits 0 after some refusals: a line that is not a host name is an error
        ("", 'error: commlib error: access denied (client IP resolved to host name "")\n', 0, "unexpected answer"),
        ("", "", 0, r"unexpected answer '\(no output\)'"),  # a hollow answer is not an empty list
        ("node001\nglobal\n", "", 0, "unexpected answer 'global'"),
        ("", 'error: unable to contact qmaster using port 6444 on host "master"\n', 1, "unable to contact"),
        ("", "", 1, r"failed without saying why \(exit status 1\)"),
        ("node001\n", "no execution host defined\n", 1, "exit status 1"),  # both: not the empty list
    ],
)
def test_configured_exec_hosts_refuses_what_it_cannot_trust(
    fake: FakeSge, stdout: str, stderr: str, code: int, error: str
) -> None:
    fake.says("qconf", stdout=stdout, stderr=stderr, code=code)
    with pytest.raises(SgeError, match=error):
        fake.client().configured_exec_hosts()


def test_configured_exec_hosts_has_the_timeout_of_every_command(fake: FakeSge) -> None:
    fake.command("qconf", "time.sleep(30)\n")
    with pytest.raises(SgeTimeoutError, match=r"no answer within 0\.5 s"):
        fake.client(timeout=0.5).configured_exec_hosts()


def test_output_with_environment_of_the_caller(fake: FakeSge, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``environ``, the process environment is the base (PATH etc. survive)."""
    monkeypatch.setenv("ELB_TEST_MARK", "kept")
    before = dict(os.environ)
    fake.prints("qstat", "qstat_no_queues.xml")
    fake.prints("qhost", "qhost_global_only.xml")
    SgeCommands(SgeConfig(bin_dir=fake.bin, timeout=20), clock=lambda: 1.0).read_snapshot()
    env = fake.calls()[0]["env"]
    assert env["ELB_TEST_MARK"] == "kept" and env["SGE_CELL"] == "default"
    assert dict(os.environ) == before  # the caller's environment is not changed


RECORDED_QMOD_RQ = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "recorded" / "qmod-rq.txt"


def _qmod_rq_answers() -> list[str]:
    """The answers recorded from the test cluster (comment lines left out)."""
    return [line for line in RECORDED_QMOD_RQ.read_text().splitlines() if not line.startswith("#")]


def test_reschedule_host_reads_qmod_rq_as_recorded(fake: FakeSge) -> None:
    first, second, third, fourth, fifth, _invalid = _qmod_rq_answers()
    fake.says("qmod", stdout=f"{first}\n{second}\n")
    done = fake.client().reschedule_host("node001")
    assert done.pushed == ("1",) and done.not_restartable == (2,)
    assert fake.argv()[-1] == ["qmod", "-rq", "*@node001"]
    fake.says("qmod", stdout=f"{third}\n{fourth}\n")
    done = fake.client().reschedule_host("node001")
    assert done.pushed == ("5.1",) and done.not_restartable == (4,)
    fake.says("qmod", stdout=f"{fifth}\n")  # the same again: task 5.1 already pushed
    assert fake.client().reschedule_host("node001") == Rescheduled((), (4,))
    fake.says("qmod", stdout="")  # nothing running there
    assert fake.client().reschedule_host("node001").pushed == ()


def test_reschedule_host_refuses_what_it_does_not_know(fake: FakeSge) -> None:
    *_, invalid = _qmod_rq_answers()
    fake.says("qmod", stdout=f"{invalid}\n", code=1)
    with pytest.raises(SgeError, match="failed"):
        fake.client().reschedule_host("node099")
    fake.says("qmod", stdout="something else happened\n")
    with pytest.raises(SgeError, match="unexpected answer 'something else happened'"):
        fake.client().reschedule_host("node001")
    with pytest.raises(SgeError):
        fake.client().reschedule_host("node001;rm")


RECORDED_QALTER_L = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "recorded" / "qalter-l.txt"


def test_set_hard_requests_reads_qalter_as_recorded(fake: FakeSge) -> None:
    done, unknown = [line for line in RECORDED_QALTER_L.read_text().splitlines() if not line.startswith("#")]
    fake.says("qalter", stdout=f"{done}\n")
    fake.client().set_hard_requests(2, {"h_rt": "3600", "arch": "lx-amd64"})
    assert fake.argv()[-1] == ["qalter", "-l", "h_rt=3600,arch=lx-amd64", "2"]
    fake.says("qalter", stdout=f"{unknown}\n", code=1)
    with pytest.raises(SgeError, match="failed"):
        fake.client().set_hard_requests(2, {"market": "on-demand"})
    fake.says("qalter", stdout="something else\n")
    with pytest.raises(SgeError, match="unexpected answer"):
        fake.client().set_hard_requests(2, {"market": "on-demand"})


@pytest.mark.parametrize("requests", [{}, {"a b": "1"}, {"market": "on,demand"}, {"x": "$(id)"}, {"x": "1=2"}])
def test_set_hard_requests_refuses_what_a_list_cannot_carry(fake: FakeSge, requests: dict[str, str]) -> None:
    with pytest.raises(SgeError):
        fake.client().set_hard_requests(2, requests)
    assert not any(a[0] == "qalter" for a in fake.argv())
