"""Transient scheduler errors: classified once per scheduler, tried again within bounds, and
said (``transient``) to the callers.

Slurm's commands run through a stand-in for ``run_command`` that records each command and its
time-out and answers from a script; Grid Engine's through an injected runner. No test sleeps:
the back-off goes to a list, the clock is a counter.
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from elb.core.scheduler import SchedulerError
from elb.schedulers import process
from elb.schedulers.process import CommandTimeout
from elb.schedulers.sge.commands import CommandResult, Retry, SgeCommands
from elb.schedulers.sge.config import SgeConfig
from elb.schedulers.sge.errors import SgeError, SgeParseError, SgeTimeoutError, is_transient
from elb.schedulers.slurm import commands as slurm_commands
from elb.schedulers.slurm.commands import TRANSIENT, UPDATE_BATCH, SlurmCommands, SlurmError
from elb.schedulers.slurm.config import SlurmConfig

SOCKET = "slurm_update error: Socket timed out on send/recv operation"


class Clock:
    """A monotonic clock that moves only when told (each call to ``tick``)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_each_table_names_what_a_scheduler_prints_when_its_controller_does_not_answer() -> None:
    for text in (
        'error: unable to contact qmaster using port 6444 on host "master"',
        "error: commlib error: got select error (Connection refused)",
        "can't find connection",
        "failed receiving gdi request response for mid=1 (got syncron message receive timeout error)",
    ):
        assert is_transient(text), text
    # A refusal is an answer, even through commlib.
    assert not is_transient('error: commlib error: access denied (client IP resolved to host name "")')
    assert not is_transient("denied: host master is neither submit nor admin host")
    for text in (
        SOCKET,
        "squeue: error: Unable to contact slurm controller (connect failure)",
        "sinfo: error: Zero Bytes were transmitted or received",
        "slurm_load_node: Transport endpoint is not connected",
        "error: slurm_persist_conn_open_without_init: failed to open persistent connection: Connection refused",
    ):
        assert process.is_transient(text, TRANSIENT), text
    assert not process.is_transient("scontrol: error: Invalid node name specified", TRANSIENT)


def test_an_sge_error_says_whether_it_is_transient() -> None:
    assert SgeTimeoutError("no answer within 30 s").transient
    assert SgeError("failed", stderr="error: unable to contact qmaster").transient
    assert not SgeError("failed", stderr="denied: access denied").transient
    assert not SgeParseError("bad XML", stderr="commlib error").transient  # an answer elb cannot use


def test_retry_tries_a_transient_error_again_with_a_back_off() -> None:
    slept: list[float] = []
    answers: list[Exception | str] = [SgeError("x", stderr="unable to contact qmaster"), "ok"]

    def call() -> str:
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    assert Retry(sleep=slept.append, clock=Clock()).run(call, SgeError, timeout=30, what="qstat") == "ok"
    assert slept == [1.5]


def test_retry_is_bounded_in_tries_and_says_the_last_error() -> None:
    slept: list[float] = []
    tries = []

    def call() -> None:
        tries.append(1)
        raise SgeError("x", stderr="unable to contact qmaster")

    with pytest.raises(SgeError) as info:
        Retry(sleep=slept.append, clock=Clock()).run(call, SgeError, timeout=30, what="qstat")
    assert info.value.transient
    assert len(tries) == 3 and slept == [1.5, 3.0]


def test_retry_is_bounded_in_time_a_command_that_timed_out_twice_is_not_run_again() -> None:
    clock = Clock()
    slept: list[float] = []
    tries = []

    def call() -> None:
        tries.append(1)
        clock.now += 30.0  # each try runs to its 30 s time-out
        raise SgeTimeoutError("no answer within 30 s")

    def sleep(s: float) -> None:
        slept.append(s)
        clock.now += s

    with pytest.raises(SgeTimeoutError):
        Retry(sleep=sleep, clock=clock).run(call, SgeError, timeout=30, what="qstat")
    # 30 s, then 1.5 s, 30 s: a third try would start 61.5 + 3 s after the first, past 2 x 30 s.
    assert len(tries) == 2 and slept == [1.5]


def test_retry_gives_up_at_once_on_an_error_that_is_not_transient() -> None:
    slept: list[float] = []
    tries = []

    def call() -> None:
        tries.append(1)
        raise SgeError("failed", stderr="denied: access denied")

    with pytest.raises(SgeError):
        Retry(sleep=slept.append, clock=Clock()).run(call, SgeError, timeout=30, what="qmod")
    assert len(tries) == 1 and not slept


class Script:
    """``run_command`` for SlurmCommands: records (argv, timeout) and answers in turn."""

    def __init__(self, *answers: tuple[int, str] | str) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[list[str], float]] = []

    def __call__(self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str]) -> CommandResult:
        self.calls.append(([Path(argv[0]).name, *argv[1:]], timeout))
        answer = self.answers.pop(0) if self.answers else (0, "")
        if answer == "timeout":
            raise CommandTimeout(f"no answer within {timeout:g} s; killed its process group", command=argv)
        code, stderr = answer if isinstance(answer, tuple) else (0, "")
        return CommandResult(tuple(argv), code, b"", stderr)


def slurm(monkeypatch: pytest.MonkeyPatch, script: Script, slept: list[float]) -> SlurmCommands:
    monkeypatch.setattr(slurm_commands, "run_command", script)
    cfg = SlurmConfig(bin_dir=Path("/nonexistent/bin"))
    return SlurmCommands(cfg, environ={"PATH": "/usr/bin"}, retry=Retry(sleep=slept.append, clock=Clock()))


def test_slurm_reads_have_30_s_and_changes_60_s(monkeypatch: pytest.MonkeyPatch) -> None:
    script = Script()
    client = slurm(monkeypatch, script, [])
    client.run(["sinfo", "--Node"])
    client.drain("node001", "elb: idle")
    client.requeue("7")
    assert [t for _, t in script.calls] == [30.0, 60.0, 60.0]


def test_a_slurm_update_that_slurmctld_does_not_answer_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    script = Script((1, SOCKET), "timeout", (0, ""))
    slurm(monkeypatch, script, slept).undrain(["node001"])
    assert len(script.calls) == 3 and slept == [1.5, 3.0]


def test_a_slurm_error_after_the_retries_is_transient_and_a_refusal_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    script = Script((1, SOCKET), (1, SOCKET), (1, SOCKET))
    with pytest.raises(SlurmError) as info:
        slurm(monkeypatch, script, slept).undrain(["node001"])
    assert info.value.transient and len(script.calls) == 3
    script = Script((1, "scontrol: error: Invalid node name specified"))
    with pytest.raises(SlurmError) as info:
        slurm(monkeypatch, script, slept).undrain(["node001"])
    assert not info.value.transient and len(script.calls) == 1


def test_a_requeue_is_never_run_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    script = Script("timeout")
    with pytest.raises(SlurmError) as info:
        slurm(monkeypatch, script, []).requeue("7")
    assert info.value.transient and len(script.calls) == 1


def test_scontrol_update_names_at_most_100_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    script = Script()
    names = [f"node{i:03d}" for i in range(1, 251)]
    slurm(monkeypatch, script, []).undrain(names)
    assert UPDATE_BATCH == 100
    assert [argv[2] for argv, _ in script.calls] == [
        "nodename=node[001-100]",
        "nodename=node[101-200]",
        "nodename=node[201-250]",
    ]


def test_a_power_down_can_park_the_nodes_at_the_address_of_no_host(monkeypatch: pytest.MonkeyPatch) -> None:
    # each node's address is NO_INSTANCE (one entry a node: slurmctld pairs the lists), its host
    # name its own name, in the command that powers it down
    script = Script()
    slurm(monkeypatch, script, []).power_down(["node001", "node002"], "elb: idle", force=True, park=True)
    assert script.calls[0][0] == [
        "scontrol",
        "update",
        "nodename=node[001-002]",
        "nodeaddr=255.255.255.255,255.255.255.255",
        "nodehostname=node[001-002]",
        "state=POWER_DOWN_FORCE",
        "reason=elb: idle",
    ]


def test_parking_250_nodes_is_three_commands_each_address_list_as_long_as_its_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = Script()
    names = [f"node{i:03d}" for i in range(1, 251)]
    slurm(monkeypatch, script, []).park(names)
    assert [argv for argv, _ in script.calls] == [
        [
            "scontrol",
            "update",
            f"nodename=node[{lo:03d}-{hi:03d}]",
            "nodeaddr=" + ",".join(["255.255.255.255"] * (hi - lo + 1)),
            f"nodehostname=node[{lo:03d}-{hi:03d}]",
        ]
        for lo, hi in ((1, 100), (101, 200), (201, 250))
    ]


def test_no_instance_is_an_address_a_tcp_connect_to_fails_at_once() -> None:
    """slurmctld's message to a parked node fails in its connect(): Linux refuses a TCP connection
    to the limited broadcast address (ENETUNREACH) before any packet leaves, so no host can answer
    and slurmctld spends no time-out on it (a routable address that does not answer costs
    TCPTimeout a try, one that refuses costs a second a try, about ten tries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        start = time.monotonic()
        with pytest.raises(OSError) as info:
            sock.connect((slurm_commands.NO_INSTANCE, 6818))
        assert info.value.errno == errno.ENETUNREACH
        assert time.monotonic() - start < 1


def test_sge_qmod_rq_is_never_run_twice() -> None:
    calls = []

    def runner(argv: Sequence[str], *, timeout: float, env: Mapping[str, str]) -> CommandResult:
        calls.append(list(argv))
        return CommandResult(tuple(argv), 1, b"", "error: unable to contact qmaster")

    sge = SgeCommands(SgeConfig(bin_dir=Path("/bin")), runner=runner, retry=Retry(sleep=lambda s: None))
    sge._executable = lambda name: name  # type: ignore[method-assign]
    with pytest.raises(SgeError):
        sge.reschedule_host("node001")
    assert len(calls) == 1
    with pytest.raises(SgeError) as info:
        sge.disable_host("node001")
    assert info.value.transient and len(calls) == 4


def test_the_slurm_driver_says_which_errors_are_transient() -> None:
    from elb.schedulers.slurm.driver import Slurm

    class Failing:
        def __init__(self, transient: bool) -> None:
            self.transient = transient

        def set_addresses(self, pairs: Sequence[tuple[str, str]]) -> None:
            raise SlurmError("scontrol update: " + SOCKET, transient=self.transient)

        def set_address(self, name: str, address: str) -> None:
            raise SlurmError("scontrol update: " + SOCKET, transient=self.transient)

    for transient in (True, False):
        driver = Slurm.__new__(Slurm)
        driver.slurm = Failing(transient)  # type: ignore[assignment]
        from elb.core.interfaces import NodeSpec

        errors = driver.prepare([NodeSpec("node001", "10.0.0.1", 2), NodeSpec("node002", "10.0.0.2", 2)])
        assert sorted(errors) == ["node001", "node002"]
        assert all(e.transient is transient for e in errors.values())


def test_the_grid_engine_driver_says_which_errors_are_transient(tmp_path: Path) -> None:
    from elb.core.config import parse_config
    from elb.schedulers.sge.driver import GridEngine

    class Failing:
        def __init__(self, err: SgeError) -> None:
            self.err = err

        def read_snapshot(self) -> None:
            raise self.err

        def disable_host(self, host: str) -> None:
            raise self.err

    cfg = parse_config({"state_dir": str(tmp_path)})
    for err, transient in (
        (SgeTimeoutError("no answer within 30 s"), True),
        (SgeError("failed", stderr="error: unable to contact qmaster"), True),
        (SgeError("failed", stderr="denied: access denied"), False),
    ):
        driver = GridEngine(cfg, Failing(err))  # type: ignore[arg-type]
        with pytest.raises(SchedulerError) as info:
            driver.read([], 0.0)
        assert info.value.transient is transient
        with pytest.raises(SchedulerError) as info:
            driver.disable_host("node001", "idle")
        assert info.value.transient is transient


def test_addresses_go_a_hundred_nodes_a_command_each_list_in_the_same_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # slurmctld pairs nodename, nodeaddr and nodehostname entry by entry; 250 nodes are 3 commands
    script = Script()
    pairs = [(f"node{i:03d}", f"10.78.{i // 250}.{i % 250 + 1}") for i in (3, 1, 2, *range(4, 251))]
    slurm(monkeypatch, script, []).set_addresses(pairs)
    assert len(script.calls) == 3
    for (argv, timeout), start in zip(script.calls, (0, 100, 200), strict=True):
        batch = pairs[start : start + UPDATE_BATCH]
        assert argv == [
            "scontrol",
            "update",
            "nodename=" + ",".join(n for n, _ in batch),
            "nodeaddr=" + ",".join(a for _, a in batch),
            "nodehostname=" + ",".join(n for n, _ in batch),
        ]
        assert timeout == 60.0
    assert script.calls[0][0][2].startswith("nodename=node003,node001,node002,node004")


def test_a_bad_address_anywhere_in_the_batch_runs_no_command(monkeypatch: pytest.MonkeyPatch) -> None:
    script = Script()
    with pytest.raises(SlurmError, match="refusing address"):
        slurm(monkeypatch, script, []).set_addresses([("node001", "10.0.0.1"), ("node002", "10.0.0.2 x=1")])
    assert script.calls == []


def test_an_error_names_a_long_batch_by_its_start(monkeypatch: pytest.MonkeyPatch) -> None:
    script = Script((1, "scontrol: error: Invalid node name specified"))
    pairs = [(f"node{i:03d}", f"10.78.0.{i}") for i in range(1, 101)]
    with pytest.raises(SlurmError) as info:
        slurm(monkeypatch, script, []).set_addresses(pairs)
    assert "scontrol update nodename=node001,node002," in str(info.value)
    assert "node100" not in str(info.value) and len(str(info.value)) < 200


def test_a_command_a_signal_ended_gave_no_answer_and_is_tried_again() -> None:
    """A scheduler command killed by a signal (an admin's kill, a stray SIGTERM, the OOM killer:
    ``subprocess``'s negative exit status) said nothing of the controller: it is transient and
    tried again, and the error names the signal instead of "failed without saying why"."""
    assert process.killed_by(-15) == "SIGTERM" and process.killed_by(-9) == "SIGKILL"
    assert process.killed_by(0) is None and process.killed_by(1) is None
    assert SgeError("killed by SIGTERM", returncode=-15).transient
    assert not SgeError("failed without saying why", returncode=1).transient

    answers = [(-15, b""), (0, b'root@master changed state of "all.q@node001" (disabled)\n')]
    calls = []

    def runner(argv: Sequence[str], *, timeout: float, env: Mapping[str, str]) -> CommandResult:
        calls.append(list(argv))
        code, stdout = answers.pop(0)
        return CommandResult(tuple(argv), code, stdout, "")

    slept: list[float] = []
    sge = SgeCommands(SgeConfig(bin_dir=Path("/bin")), runner=runner, retry=Retry(sleep=slept.append, clock=Clock()))
    sge._executable = lambda name: name  # type: ignore[method-assign]
    sge.disable_host("node001")
    assert len(calls) == 2 and slept == [1.5]
    answers[:] = [(-15, b"")]
    with pytest.raises(SgeError, match=r"killed by SIGTERM \(exit status -15\)") as info:
        sge.reschedule_host("node001")  # (never run twice: the error alone)
    assert info.value.transient


def test_a_slurm_command_a_signal_ended_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    script = Script((-15, ""), (0, ""))
    slurm(monkeypatch, script, slept).undrain(["node001"])
    assert len(script.calls) == 2 and slept == [1.5]
    script = Script((-9, ""), (-9, ""), (-9, ""))
    with pytest.raises(SlurmError, match="killed by SIGKILL") as info:
        slurm(monkeypatch, script, slept).undrain(["node001"])
    assert info.value.transient and len(script.calls) == 3
