"""Logging in production: every line written to the journal carries its syslog priority (JSON
lines too), the level is configurable (``log_level``, ``elb -v``), ``elb -c FILE VERB`` works,
and an ALARM is said once per change and reminded slowly, not once per pass."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.config import ConfigError, load_config, parse_config
from elb.core.exitcodes import Exit
from elb.schedulers.sge.driver import GridEngine
from elb.schedulers.slurm.commands import SlurmError, SlurmRead
from elb.service import logs
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.clock import Clock
from tests.unit.factories import T0, pending
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge
from tests.unit.test_slurm_pass import rig

LEVELS = [(logging.DEBUG, 7), (logging.INFO, 6), (logging.WARNING, 4), (logging.ERROR, 3)]


@pytest.fixture
def root_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    logs.set_verbose(False)


def logged(tmp_path: Path, fmt: str, journald: bool, level: str = "debug") -> list[str]:
    """The lines ``setup_logging(fmt)`` writes for one record of each level, to a file that is the
    journal stream (``JOURNAL_STREAM`` names it) or not."""
    path = tmp_path / f"{fmt}-{journald}.log"
    with path.open("w") as out:
        st = os.fstat(out.fileno())
        environ = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"} if journald else {}
        logs.setup_logging(fmt, level, stream=out, environ=environ)
        for levelno, _ in LEVELS:
            logging.getLogger("elb.test").log(levelno, "line at %d", levelno)
        logging.getLogger().handlers[0].flush()
    return path.read_text().splitlines()


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_every_line_to_the_journal_starts_with_its_priority(tmp_path: Path, fmt: str, root_logging: None) -> None:
    lines = logged(tmp_path, fmt, journald=True)
    assert len(lines) == len(LEVELS)
    for line, (levelno, priority) in zip(lines, LEVELS, strict=True):
        assert line.startswith(f"<{priority}>"), line
        if fmt == "json":
            doc = json.loads(line.removeprefix(f"<{priority}>"))
            assert doc["message"] == f"line at {levelno}" and doc["level"] == logging.getLevelName(levelno).lower()


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_no_priority_prefix_off_the_journal(tmp_path: Path, fmt: str, root_logging: None) -> None:
    lines = logged(tmp_path, fmt, journald=False)
    assert len(lines) == len(LEVELS)
    assert not any(line.startswith("<") for line in lines), lines
    if fmt == "json":
        assert [json.loads(line)["level"] for line in lines] == ["debug", "info", "warning", "error"]


def test_log_level_is_a_config_key_and_sets_the_level(tmp_path: Path, root_logging: None) -> None:
    path = tmp_path / "elb.yml"
    path.write_text("log_level: warning\n")
    assert load_config(path).log_level == "warning"
    assert parse_config({}).log_level == "info"
    path.write_text("log_level: verbose\n")
    with pytest.raises(ConfigError, match="log_level: Input should be 'debug', 'info', 'warning' or 'error'"):
        load_config(path)
    assert logged(tmp_path, "text", journald=False, level="warning")[0].split()[2] == "WARNING"


def test_elb_v_logs_debug_whatever_the_level(tmp_path: Path, root_logging: None) -> None:
    missing = str(tmp_path / "none.yml")
    assert main(["-v", "status", "-c", missing]) == Exit.CONFIG
    assert len(logged(tmp_path, "text", journald=False, level="error")) == len(LEVELS)
    assert main(["--verbose", "status", "-c", missing]) == Exit.CONFIG
    assert main(["status", "-c", missing]) == Exit.CONFIG  # each run of the command line says again
    assert len(logged(tmp_path, "json", journald=False, level="error")) == 1


# -- -c before the command -------------------------------------------------------------------


def test_config_goes_before_the_command_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "elb.yml"
    path.write_text(
        f"cloud: {{provider: local}}\nstate_dir: {tmp_path / 's'}\nprovision: {{private_data_dir: {tmp_path / 'a'}}}\n"
    )
    assert main(["-c", str(path), "validate", "--offline"]) == Exit.OK
    assert capsys.readouterr().out.startswith(f"config: {path.resolve()}\n")
    assert main(["--config", str(path), "validate", "--offline", "-c", str(path)]) == Exit.OK  # the same: fine
    missing = tmp_path / "none.yml"
    assert main(["-c", str(missing), "status"]) == Exit.CONFIG
    assert f"config {missing}: no such file" in capsys.readouterr().err


def test_config_before_a_command_without_one_or_twice_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv, why in (
        (["-c", "a.yml", "status", "-c", "b.yml"], "given twice, before and after status, with different files"),
        (["-c", "a.yml", "simulate", "x.swf"], "simulate reads no config file"),
    ):
        with pytest.raises(SystemExit) as err:
            main(argv)
        assert err.value.code == Exit.USAGE
        assert why in capsys.readouterr().err


# -- alarms ----------------------------------------------------------------------------------


def errors(caplog: pytest.LogCaptureFixture, level: int = logging.ERROR) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def test_an_alarm_is_said_once_then_reminded_slowly_then_said_over(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    alarms = logs.Alarms(logging.getLogger("elb.test"), remind_every=600)
    for k in range(85):  # 7 minutes at a 5 s poll
        alarms.alarm("backoff", f"launch backed off for {420 - 5 * k} s more", T0 + 5 * k, changes_with="round 1")
        alarms.pass_ended(T0 + 5 * k)
    assert errors(caplog) == ["ALARM: launch backed off for 420 s more"]
    for k in range(85, 125):  # to 10 min 20 s: one reminder, with how long it has lasted
        alarms.alarm("backoff", f"launch backed off for {420 - 5 * k} s more", T0 + 5 * k, changes_with="round 1")
        alarms.pass_ended(T0 + 5 * k)
    assert errors(caplog)[1:] == ["ALARM (still, for 10 min): launch backed off for -180 s more"]
    alarms.alarm("backoff", "launch backed off (round 2)", T0 + 625, changes_with="round 2")  # a change: said
    alarms.pass_ended(T0 + 625)
    assert errors(caplog)[-1] == "ALARM: launch backed off (round 2)" and len(errors(caplog)) == 3
    assert alarms.pass_ended(T0 + 630, ok=False) == []  # a failed pass could not look: still on
    assert alarms.on == ("backoff",)
    assert alarms.pass_ended(T0 + 635) == ["backoff"]  # a good pass without it: over
    assert errors(caplog, logging.INFO) == ["ALARM over after 11 min: launch backed off (round 2)"]
    alarms.alarm("backoff", "launch backed off (round 2)", T0 + 640, changes_with="round 2")  # on again: said
    assert len(errors(caplog)) == 4


def test_an_alarm_without_changes_with_changes_with_its_message(caplog: pytest.LogCaptureFixture) -> None:
    alarms = logs.Alarms(logging.getLogger("elb.test"))
    for t, message in ((0, "a"), (5, "a"), (10, "b"), (15, "b")):
        alarms.alarm("k", message, T0 + t)
    assert errors(caplog) == ["ALARM: a", "ALARM: b"]
    alarms.log_at(logging.WARNING, "k", "below the threshold: a plain line each time", T0 + 20)
    alarms.log_at(logging.WARNING, "k", "below the threshold: a plain line each time", T0 + 25)
    assert len(errors(caplog, logging.WARNING)) == 2


def test_the_back_off_alarm_is_not_said_every_pass(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Provisioning fails for every node at a 5 s poll for 7 minutes: the back-off holds launches
    for most of those 85 passes; its ALARM is said when the back-off changes (a new round, a probe
    on its way), not each pass."""
    cfg = parse_config(
        {"state_dir": str(tmp_path), "poll_interval": 5, "policy": {"max_nodes": 7, "slots_per_node": 1}}
    )
    sge, cloud = FakeSge(T0), FakeCloud(T0)
    prov = FakeProvisioner(sge, unreachable_adds=True)
    clock = Clock(T0)
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=Journal(cfg.journal_path),
        cloud=cloud,
        provisioner=prov,
        clock=clock,
    )
    sge.jobs = [pending(1, 20 * 60, slots=1, tasks=50)]
    for k in range(85):
        clock.t = sge.now = T0 + 5 * k
        assert bal.run_pass().ok
    held = [m for m in errors(caplog) if m.startswith("ALARM") and "launch backed off" in m]
    assert bal.counters.launches_held > 0 and bal.last.backoff_rounds >= 2
    assert 1 <= len(held) <= 2 * bal.last.backoff_rounds + 1, held  # a line or two per round, not 80


def test_failed_passes_alarm_once_and_say_when_over(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    cfg = parse_config({"state_dir": str(tmp_path), "policy": {"max_nodes": 4, "slots_per_node": 8}})
    sge, cloud = FakeSge(T0), FakeCloud(T0)
    clock = Clock(T0)
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=Journal(cfg.journal_path),
        cloud=cloud,
        provisioner=FakeProvisioner(sge),
        clock=clock,
    )
    sge.fail_reads = 20
    for k in range(20):
        clock.t = sge.now = T0 + 60 * k
        assert not bal.run_pass().ok
    assert [m for m in errors(caplog) if m.startswith("ALARM")] == [
        "ALARM: 3 passes in a row failed; elb is changing nothing until SGE can be read again",
        "ALARM (still, for 10 min): 13 passes in a row failed; elb is changing nothing until SGE can be read again",
    ]
    clock.t = sge.now = T0 + 60 * 20
    assert bal.run_pass().ok
    assert "ALARM over after 18 min: 20 passes in a row failed" in caplog.text


def test_slurm_failed_passes_alarm_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    r = rig(tmp_path)
    bal, slurm = r.bal, r.slurm
    good = slurm.read

    def broken(*, mine: object = None) -> SlurmRead:
        raise SlurmError("squeue: timed out")

    slurm.read = broken  # type: ignore[method-assign]
    for _ in range(10):
        assert not bal.run_pass().ok
    alarms = [m for m in errors(caplog) if "passes in a row failed" in m]
    assert alarms == ["ALARM: 3 passes in a row failed; elb is changing nothing until Slurm can be read again"]
    slurm.read = good  # type: ignore[method-assign]
    assert bal.run_pass().ok
    assert "ALARM over after 0 s: 10 passes in a row failed" in caplog.text
