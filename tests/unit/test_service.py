"""The systemd side of elb: the unit's sandbox, ``elb service``, sd_notify, journald logging."""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.cli.systemd import elb_command, render_unit
from elb.core.assets import systemd_unit
from elb.core.config import Config
from elb.service import logs
from elb.service.sdnotify import Notifier

SECURITY_TARGET = 4.0  # systemd-analyze security exposure, lower is safer


def _exposure(unit: Path) -> float:
    out = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        check=False,
        cwd=unit.parent,
    )
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", out.stdout + out.stderr)
    assert m, out.stdout + out.stderr
    return float(m.group(1))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_shipped_unit_is_sandboxed(tmp_path: Path) -> None:
    unit = tmp_path / "elb.service"
    shutil.copy(systemd_unit(), unit)
    score = _exposure(unit)
    print(f"FIGURES systemd-analyze security elb.service: {score} (target <= {SECURITY_TARGET})")
    assert score <= SECURITY_TARGET


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_security_check_sees_an_unsandboxed_unit(tmp_path: Path) -> None:
    """The measurement itself can fail: a unit without the sandbox is rated far above the target."""
    text = systemd_unit().read_text()
    bare = [line for line in text.splitlines() if line.startswith(("[", "Description", "ExecStart", "Type"))]
    unit = tmp_path / "elb.service"
    unit.write_text("\n".join(bare) + "\n")
    assert _exposure(unit) > SECURITY_TARGET


def test_the_unit_waits_for_debians_gridengine_master() -> None:
    text = systemd_unit().read_text()
    after = next(line for line in text.splitlines() if line.startswith("After="))
    assert "gridengine-master.service" in after.split("=", 1)[1].split()
    assert "sgemaster" not in text
    assert "Type=notify" in text


def test_the_unit_verifies_where_systemd_runs(tmp_path: Path) -> None:
    """Loading the unit needs systemd as PID 1 (a booted Debian master). The test machines run
    the test cluster in a sandbox whose PID 1 is not systemd: there only the offline checks run."""
    if not Path("/run/systemd/system").is_dir():
        pytest.skip(f"PID 1 is {Path('/proc/1/comm').read_text().strip()!r}, not systemd: the unit cannot start")
    unit = tmp_path / "elb.service"
    unit.write_text(render_unit(systemd_unit().read_text(), elb_command(), Path("/etc/elb/elb.yml")))
    out = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


def test_render_unit_points_execstart_at_this_elb(tmp_path: Path) -> None:
    text = render_unit(systemd_unit().read_text(), ["/srv/my elb/bin/elb"], Path("/etc/elb/site.yml"))
    starts = [line for line in text.splitlines() if line.startswith("ExecStart=")]
    assert starts == ["ExecStart='/srv/my elb/bin/elb' run --config /etc/elb/site.yml"]


def test_render_unit_refuses_a_line_break_in_a_path() -> None:
    with pytest.raises(ValueError, match="line break"):
        render_unit(systemd_unit().read_text(), ["/bin/elb\nExecStartPre=/bin/evil"], Path("/etc/elb/elb.yml"))


def test_elb_command_is_the_script_beside_the_interpreter(tmp_path: Path) -> None:
    (tmp_path / "python").touch()
    assert elb_command(str(tmp_path / "python")) == [str(tmp_path / "python"), "-m", "elb"]
    script = tmp_path / "elb"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert elb_command(str(tmp_path / "python")) == [str(script)]


def test_service_install_writes_the_unit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["service", "--install", "--unit-dir", str(tmp_path), "--config", "/etc/elb/x.yml"])
    assert rc == 0
    unit = tmp_path / "elb.service"
    text = unit.read_text()
    assert f"ExecStart={elb_command()[0]}" in text
    assert text.count("ExecStart=") == 1
    assert "--config /etc/elb/x.yml" in text
    assert unit.stat().st_mode & 0o777 == 0o644
    assert "systemctl daemon-reload" in capsys.readouterr().out


def test_service_prints_the_unit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["service"]) == 0
    assert "ExecStart=" in capsys.readouterr().out


# -- sd_notify -----------------------------------------------------------------------------


def _listener(tmp_path: Path) -> tuple[socket.socket, str]:
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    return sock, path


def test_notifier_sends_ready_and_watchdog(tmp_path: Path) -> None:
    sock, path = _listener(tmp_path)
    with sock:
        n = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())})
        assert n.enabled
        assert n.watchdog_interval == 30.0
        assert n.ready("first pass done")
        assert sock.recv(1024) == b"READY=1\nSTATUS=first pass done"
        assert n.alive()
        assert sock.recv(1024) == b"WATCHDOG=1"
        assert n.set_watchdog(180)
        assert sock.recv(1024) == b"WATCHDOG_USEC=180000000"
        assert n.watchdog_interval == 180


def test_notifier_without_systemd_does_nothing() -> None:
    n = Notifier({})
    assert not n.enabled
    assert not n.ready("x")
    assert n.watchdog_interval is None


def test_watchdog_meant_for_another_process_is_ignored() -> None:
    n = Notifier({"NOTIFY_SOCKET": "/nonexistent", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"})
    assert n.watchdog_interval is None


def test_a_dead_notify_socket_is_not_fatal(tmp_path: Path) -> None:
    n = Notifier({"NOTIFY_SOCKET": str(tmp_path / "gone")})
    assert not n.ready("x")


# -- logging -------------------------------------------------------------------------------


def test_journald_lines_carry_priority_and_no_timestamp() -> None:
    f = logs.JournalFormatter()
    rec = logging.LogRecord("elb", logging.ERROR, __file__, 1, "pass failed: %s", ("x",), None)
    assert f.format(rec) == "<3>ERROR elb: pass failed: x"
    rec = logging.LogRecord("elb", logging.INFO, __file__, 1, "a\nb", (), None)
    assert f.format(rec) == "<6>INFO elb: a\n<6>b"
    assert logs.syslog_priority(logging.WARNING) == 4
    assert logs.syslog_priority(logging.DEBUG) == 7


def test_journald_is_detected_from_the_stream_itself(tmp_path: Path) -> None:
    with (tmp_path / "log").open("w") as f:
        st = os.fstat(f.fileno())
        assert logs.under_journald({"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}, f)
        # inherited by a child whose stderr went elsewhere: not the journal
        assert not logs.under_journald({"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino + 1}"}, f)
        assert not logs.under_journald({}, f)
        assert not logs.under_journald({"JOURNAL_STREAM": "garbage"}, f)


def test_setup_logging_under_journald_uses_the_journal_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = os.fstat(sys.stderr.fileno())
    monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        logs.setup_logging("text")
        assert isinstance(root.handlers[0].formatter, logs.JournalFormatter)
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])


def test_scheduler_noise_is_silenced() -> None:
    logs.quiet_scheduler()
    assert not logging.getLogger("apscheduler.executors.default").isEnabledFor(logging.INFO)
    assert not logging.getLogger("apscheduler.scheduler").isEnabledFor(logging.INFO)
    assert logging.getLogger("apscheduler.scheduler").isEnabledFor(logging.WARNING)


def test_overrun_warnings_are_throttled() -> None:
    flt = logs._OverrunThrottle(every=600)
    msg = 'Execution of job "pass" skipped: maximum number of running instances reached (1)'

    def rec(t: float) -> logging.LogRecord:
        r = logging.LogRecord("apscheduler.scheduler", logging.WARNING, __file__, 1, msg, (), None)
        r.created = t
        return r

    shown = [r for r in (rec(t) for t in range(0, 1300, 60)) if flt.filter(r)]
    assert len(shown) == 3  # t = 0, 600, 1200
    assert "10 runs skipped" in shown[1].getMessage()
    other = logging.LogRecord("apscheduler.scheduler", logging.WARNING, __file__, 1, "other", (), None)
    assert flt.filter(other)


def test_run_forever_tells_systemd_ready_alive_and_stopping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon loop under Type=notify: READY as the first pass starts, a keep-alive after each
    pass, STOPPING on SIGTERM (the loop runs in this process: its signal handlers are restored)."""
    import signal
    import threading
    from types import SimpleNamespace

    from elb.service.daemon import run_forever
    from elb.service.executor import Executor

    sock, path = _listener(tmp_path)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    passes = []

    class OnePassThenTerm:
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
            passes.append(1)
            os.kill(os.getpid(), signal.SIGTERM)
            return SimpleNamespace(ok=True, summary=lambda: "nothing to do")

    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        with sock:
            run_forever(OnePassThenTerm(), 3600)  # type: ignore[arg-type]
            got = [sock.recv(1024) for _ in range(3)]
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
    assert passes == [1]
    assert got[0] == b"READY=1\nSTATUS=polling every 3600 s"
    # the signal (main thread) and the pass's end (the scheduler's thread) race: either order
    assert sorted(got[1:]) == [
        b"STOPPING=1\nSTATUS=stopping: finishing the node operations under way",
        b"WATCHDOG=1\nSTATUS=last pass: ok",
    ]
