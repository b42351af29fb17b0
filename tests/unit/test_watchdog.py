"""The systemd watchdog: keep-alives come from a thread of their own every WatchdogSec/2, so a
poll interval of WatchdogSec or more no longer gets elb killed; they stop when no pass has
started for long (a hung pass), so systemd still restarts a hung elb; ``elb validate`` warns
when the installed unit's WatchdogSec does not fit the config."""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from apscheduler.events import EVENT_JOB_SUBMITTED
from apscheduler.schedulers.background import BackgroundScheduler

from elb.cli.validate import check_watchdog, systemd_seconds, unit_setting
from elb.core.checks import Check
from elb.core.config import Config, parse_config
from elb.service.daemon import run_forever
from elb.service.executor import Executor
from elb.service.sdnotify import HUNG_POLLS, KeepAlive, Notifier, hung_after
from tests.clock import Clock

WATCHDOG = 600.0


class Recorder(Notifier):
    """A notifier whose datagrams are kept, not sent."""

    def __init__(self, watchdog: float | None = WATCHDOG) -> None:
        super().__init__({} if watchdog is None else {"WATCHDOG_USEC": str(int(watchdog * 1e6))})
        self.sent: list[dict[str, str | int]] = []

    def send(self, **fields: str | int) -> bool:
        self.sent.append(fields)
        return True


def keepalives(n: Recorder) -> int:
    return sum(1 for f in n.sent if f == {"watchdog": 1})


def test_a_poll_longer_than_the_watchdog_is_kept_alive() -> None:
    """poll_interval 900 s under WatchdogSec 600: a keep-alive only after each pass came every
    900 s, and systemd killed elb every ten minutes. The thread sends one every 300 s."""
    clock, n = Clock(), Recorder()
    ka = KeepAlive(n, 900, running=lambda: True, clock=clock)
    assert ka.period == WATCHDOG / 2 and ka.hung_after == 3 * 900
    gaps = []
    last = clock.t
    for tick in range(1, 31):  # 2.5 hours of ticks, a pass starting every 900 s
        clock.t = 1000.0 + tick * ka.period
        if tick % 3 == 0:
            ka.pass_started()
        if ka.tick():
            gaps.append(clock.t - last)
            last = clock.t
    assert keepalives(n) == 30 and max(gaps) <= WATCHDOG / 2


def test_a_hung_pass_stops_the_keepalives_and_a_new_pass_brings_them_back(caplog: pytest.LogCaptureFixture) -> None:
    clock, n = Clock(), Recorder()
    ka = KeepAlive(n, 60, running=lambda: True, clock=clock)
    assert ka.hung_after == max(HUNG_POLLS * 60, WATCHDOG) == hung_after(60, WATCHDOG)
    ka.pass_started()  # and never another: it hangs
    sent = []
    for tick in range(1, 7):
        clock.t = 1000.0 + tick * 300
        sent.append(ka.tick())
    assert sent == [True, False, False, False, False, False]  # from 600 s on: withheld
    assert caplog.text.count("no pass has started for") == 1  # said once
    assert "keep-alives stop, systemd restarts elb" in caplog.text
    ka.pass_started()
    assert ka.tick()


def test_no_keepalive_while_the_scheduler_is_not_running() -> None:
    clock, n = Clock(), Recorder()
    running = False
    ka = KeepAlive(n, 60, running=lambda: running, clock=clock)
    assert not ka.tick()
    running = True
    assert ka.tick() and keepalives(n) == 1


def test_without_watchdog_usec_no_thread_is_started() -> None:
    ka = KeepAlive(Recorder(watchdog=None), 60, running=lambda: True).start()
    assert ka.period is None and ka._thread is None


def test_the_scheduler_s_submissions_are_the_passes_started() -> None:
    """With a real scheduler: a pass that blocks starts no other (max_instances=1), so its
    keep-alives stop once it is hung; a pass that starts again brings them back."""
    clock, n = Clock(), Recorder()
    sched = BackgroundScheduler()
    ka = KeepAlive.watch(sched, n, 0.05)
    ka._clock = clock  # the time seen by tick, not the scheduler's
    ka.stop()  # ticks by hand below
    entered, release, submitted = threading.Event(), threading.Event(), threading.Event()
    sched.add_listener(lambda _e: submitted.set(), EVENT_JOB_SUBMITTED)  # after the keep-alive's own

    def one_pass() -> None:
        entered.set()
        release.wait(10)

    sched.add_job(one_pass, "interval", seconds=0.05, max_instances=1, coalesce=True, id="pass")
    assert not ka.tick()  # not running yet
    sched.start()
    try:
        assert entered.wait(10) and submitted.wait(10)
        clock.t += ka.hung_after - 1
        assert ka.tick()
        clock.t += 2
        assert not ka.tick()  # the pass hangs: no other starts
        submitted.clear()
        release.set()
        assert submitted.wait(10)  # the next pass starts: it is seen at the (fake) time now
        assert ka.tick()
    finally:
        release.set()
        sched.shutdown(wait=True)
    assert not ka.tick()  # shut down: no keep-alive


@pytest.fixture
def restore_signals() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_run_forever_keeps_alive_between_passes_of_a_long_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restore_signals: None
) -> None:
    """One pass, then an hour until the next: keep-alives still come (WatchdogSec 0.2 s here),
    from the thread, without a pass's status."""
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(10)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.setenv("WATCHDOG_USEC", "200000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    got: list[bytes] = []

    def listen() -> None:
        try:
            while sum(1 for m in got if m == b"WATCHDOG=1") < 3:
                got.append(sock.recv(1024))
        except TimeoutError:
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    class OnePass:
        stopping = threading.Event()
        provisioner = None
        config = Config()
        scheduler = SimpleNamespace(name="SGE")  # it cannot peek: a pass every poll
        executor = Executor(inline=True)

        def clock(self) -> float:
            return 0.0

        def collect_finished(self, result: object) -> None:
            del result

        def run_pass(self) -> SimpleNamespace:
            threading.Thread(target=listen, daemon=True).start()
            return SimpleNamespace(ok=True, summary=lambda: "nothing to do")

    with sock:
        run_forever(OnePass(), 3600)  # type: ignore[arg-type]
    assert got[0] == b"READY=1\nSTATUS=polling every 3600 s"
    assert got.count(b"WATCHDOG=1") == 3, got  # bare keep-alives: the thread's, between passes


# -- elb validate ----------------------------------------------------------------------------


def unit(tmp_path: Path, watchdog: str | None, dropin: str | None = None) -> Path:
    path = tmp_path / "elb.service"
    line = f"WatchdogSec={watchdog}\n" if watchdog is not None else ""
    path.write_text(f"[Unit]\nDescription=elb\n[Service]\nType=notify\n{line}ExecStart=/bin/true\n")
    if dropin is not None:
        (tmp_path / "elb.service.d").mkdir()
        (tmp_path / "elb.service.d" / "override.conf").write_text(f"[Service]\nWatchdogSec={dropin}\n")
    return path


def checks(tmp_path: Path, config: dict[str, object], path: Path) -> list[Check]:
    cfg = parse_config({"state_dir": str(tmp_path / "s"), **config})
    return list(check_watchdog(cfg, units=(tmp_path / "missing.service", path)))


def test_validate_is_quiet_when_the_watchdog_fits(tmp_path: Path) -> None:
    (c,) = checks(tmp_path, {"poll_interval": 3600}, unit(tmp_path, "10min"))
    assert c.ok and not c.warning
    assert c.line().startswith(f"ok   watchdog: {tmp_path / 'elb.service'}: WatchdogSec 600 s: keep-alives every 300 s")
    assert "restarted within 3.2 h" in c.line()  # 3 x 1 h, then 10 min


def test_validate_warns_when_a_slow_scheduler_would_look_hung(tmp_path: Path) -> None:
    (c,) = checks(tmp_path, {"sge": {"timeout": 90}}, unit(tmp_path, "600"))
    assert c.ok and c.warning
    assert c.line().startswith("warn watchdog: ")
    assert "10 commands of up to sge.timeout 90 s" in c.line() and "set WatchdogSec to at least 960 s" in c.line()
    other = tmp_path / "other"
    other.mkdir()
    (c,) = checks(other, {"poll_interval": 600}, unit(other, "600"))
    assert not c.warning  # a long poll is no mismatch: hung only after 3 polls


def test_validate_weighs_the_configured_schedulers_time_out(tmp_path: Path) -> None:
    timeouts = {"slurm": {"timeout": 90}, "sge": {"timeout": 5}}
    (c,) = checks(tmp_path, {"scheduler": "slurm", **timeouts}, unit(tmp_path, "600"))
    assert c.warning and "10 commands of up to slurm.timeout 90 s" in c.line()
    other = tmp_path / "other"
    other.mkdir()
    (c,) = checks(other, {"scheduler": "sge", **timeouts}, unit(other, "600"))
    assert not c.warning


def test_validate_reads_drop_ins_and_warns_of_a_tiny_or_missing_watchdog(tmp_path: Path) -> None:
    (c,) = checks(tmp_path, {}, unit(tmp_path, "600", dropin="5s"))
    assert c.warning and "WatchdogSec 5 s: keep-alives every 2.5 s may come late" in c.line()
    other = tmp_path / "other"
    other.mkdir()
    (c,) = checks(other, {}, unit(other, None))
    assert c.ok and c.warning and "no WatchdogSec: a hung elb is not restarted" in c.line()


def test_validate_without_an_installed_unit_says_it_did_not_check(tmp_path: Path) -> None:
    cfg = parse_config({})
    assert [c.line() for c in check_watchdog(cfg, units=(tmp_path / "none",))] == [
        "ok   watchdog: no elb.service installed: not checked"
    ]


def test_systemd_time_spans() -> None:
    assert [systemd_seconds(t) for t in ("600", "10min", "5m 30s", "1h", "500ms", "0")] == [600, 600, 330, 3600, 0.5, 0]
    assert systemd_seconds("infinity") is None
    for bad in ("", "ten", "5 parsecs"):
        with pytest.raises(ValueError, match="not a systemd time span"):
            systemd_seconds(bad)
    assert (
        unit_setting(
            ["[Service]\nWatchdogSec=1\n[Install]\nWatchdogSec=9\n", "[Service]\nWatchdogSec=2\n"], "WatchdogSec"
        )
        == "2"
    )
