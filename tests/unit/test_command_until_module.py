"""The module elb_command_until (plugins/modules/elb_command_until.py, linked from the sge_exec
role's library/): a command tried until it exits 0 within one module run, with a
stand-in for the command, then as Ansible runs it with real commands (a Python one-liner that
exits 0 at its Nth run, one that always fails): the bound, the failure's last stderr, the
argument list passed as is (no shell), check mode. The boot-mode cluster test runs it at a
node's boot (mount, qconf -se)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit import role_modules

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "plugins" / "modules" / "elb_command_until.py"
MODULE_PATH = role_modules.module_path("sge_exec", "elb_command_until")
M = role_modules.load("sge_exec", "elb_command_until")

# Exits 0 at its Nth run (counted in a file), else 3 with its run's number on stderr.
NTH = (
    "import sys, pathlib; p = pathlib.Path(sys.argv[1]); n = int(p.read_text()) + 1 if p.exists() else 1; "
    "p.write_text(str(n)); print(f'run {n}'); sys.stderr.write(f'not yet, run {n}\\n'); "
    "sys.exit(0 if n >= int(sys.argv[2]) else 3)"
)


class Command:
    """A command that fails until its Nth run; the argument lists it was given."""

    def __init__(self, ok_at: int) -> None:
        self.ok_at = ok_at
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str]) -> tuple[int, str, str]:
        self.calls.append(list(argv))
        n = len(self.calls)
        if n >= self.ok_at:
            return 0, "done\n", ""
        return 32, "", f"mount.nfs: access denied by server (try {n})\n"


def test_the_command_runs_until_it_exits_0_sleeping_between_tries() -> None:
    command = Command(ok_at=4)
    sleeps: list[float] = []
    outcome = M.until_ok(["mount", "/home"], command.run, tries=150, delay=2, sleep=sleeps.append)
    assert outcome.ok and outcome.tries == 4 and outcome.stdout == "done\n"
    assert command.calls == [["mount", "/home"]] * 4
    assert sleeps == [2, 2, 2]  # between tries only


def test_a_command_that_never_succeeds_stops_at_the_bound_and_says_its_last_stderr() -> None:
    command = Command(ok_at=99)
    sleeps: list[float] = []
    outcome = M.until_ok(["mount", "/home"], command.run, tries=5, delay=2, sleep=sleeps.append)
    assert not outcome.ok and outcome.tries == 5 and len(command.calls) == 5 and len(sleeps) == 4
    msg = M.failure("the export could not be mounted", ["mount", "/home"], outcome, 2)
    assert msg == (
        "the export could not be mounted: mount /home failed 5 times over 8 s; "
        "the last exited 32: mount.nfs: access denied by server (try 5)"
    )


def test_one_try_runs_once_and_never_sleeps() -> None:
    command = Command(ok_at=2)
    outcome = M.until_ok(["qconf", "-se", "n1"], command.run, tries=1, delay=5, sleep=pytest.fail)
    assert (outcome.rc, outcome.tries) == (32, 1)
    assert M.failure("", ["qconf", "-se", "n1"], outcome, 5).startswith(
        "qconf -se n1 failed 1 time; the last exited 32"
    )


def test_the_failure_says_stdout_when_stderr_is_empty() -> None:
    outcome = M.Outcome(1, "error: no such host\n", "", 2)
    assert M.failure("", ["qconf"], outcome, 0.5).endswith(
        "failed 2 times over 0.5 s; the last exited 1: error: no such host"
    )


@pytest.mark.parametrize(("tries", "delay"), [(0, 2), (-1, 2), (3, -1)])
def test_a_bound_that_cannot_be_waited_is_refused(tries: int, delay: float) -> None:
    with pytest.raises(ValueError, match=r"^(tries|delay) must"):
        M.until_ok(["true"], Command(1).run, tries=tries, delay=delay, sleep=time.sleep)


def run_module(tmp_path: Path, **args: Any) -> tuple[int, dict[str, Any]]:
    return role_modules.run(MODULE_PATH, tmp_path, **args)


def test_the_module_succeeds_at_the_nth_try_in_one_run(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    rc, out = run_module(tmp_path, argv=[sys.executable, "-c", NTH, str(counter), "3"], tries=10, delay=0.01)
    assert rc == 0, out
    assert (out["rc"], out["tries"], out["stdout"], out["changed"]) == (0, 3, "run 3\n", True)
    assert counter.read_text() == "3"


def test_the_module_fails_after_the_bound_with_the_last_stderr(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    start = time.monotonic()
    rc, out = run_module(
        tmp_path, argv=[sys.executable, "-c", NTH, str(counter), "99"], tries=3, delay=0.2, msg="never ready"
    )
    elapsed = time.monotonic() - start
    assert rc != 0 and out["failed"] is True and out["changed"] is False
    assert out["tries"] == 3 and out["rc"] == 3 and counter.read_text() == "3"
    assert out["msg"].startswith("never ready: ") and out["msg"].endswith(
        "failed 3 times over 0.4 s; the last exited 3: not yet, run 3"
    )
    assert elapsed >= 0.4  # it slept between the tries


def test_the_arguments_reach_the_command_as_they_are_with_no_shell(tmp_path: Path) -> None:
    args = ["$HOME", "~", "a b", "; touch {}".format(tmp_path / "shell"), "*", "`id`", "'q'"]
    echo = "import sys, json; print(json.dumps(sys.argv[1:]))"
    rc, out = run_module(tmp_path, argv=[sys.executable, "-c", echo, *args], read_only=True)
    assert rc == 0, out
    assert yaml.safe_load(out["stdout"]) == args
    assert not (tmp_path / "shell").exists()
    assert out["cmd"][0] == sys.executable and out["changed"] is False


def test_check_mode_runs_a_read_only_command_and_not_one_that_changes(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    argv = [sys.executable, "-c", NTH, str(counter), "1"]
    rc, out = run_module(tmp_path, argv=argv, tries=5, delay=0.01, _ansible_check_mode=True)
    assert rc == 0 and out["changed"] is True and out["tries"] == 0 and "rc" not in out
    assert not counter.exists()
    rc, out = run_module(tmp_path, argv=argv, tries=5, delay=0.01, read_only=True, _ansible_check_mode=True)
    assert rc == 0 and out["changed"] is False and out["tries"] == 1
    assert counter.read_text() == "1"


def test_a_missing_command_or_a_bad_bound_fails_at_once(tmp_path: Path) -> None:
    rc, out = run_module(tmp_path, argv=["elb-no-such-command"], tries=100, delay=5)
    assert rc != 0 and "elb-no-such-command" in out["msg"]
    rc, out = run_module(tmp_path, argv=["true"], tries=0)
    assert rc != 0 and out["msg"] == "tries must be at least 1: 0"


def test_the_roles_run_the_shipped_module() -> None:
    link = role_modules.module_path("sge_exec", "elb_command_until")
    assert link.is_symlink() and link.resolve() == PLUGIN.resolve()
    assert not PLUGIN.is_symlink() and os.access(PLUGIN, os.R_OK)


@pytest.mark.parametrize(
    ("tasks", "module"),
    [
        ("roles/nfs_client/tasks/main.yml", "elb_nfs_mounts"),
        ("roles/sge_exec/tasks/admission.yml", "elb_command_until"),
        ("roles/node_boot/tasks/main.yml", "ansible.builtin.wait_for"),
    ],
)
def test_the_boot_waits_are_one_module_run_not_an_until_loop(tasks: str, module: str) -> None:
    loaded = yaml.safe_load((REPO / tasks).read_text())
    assert [t["name"] for t in loaded if "until" in t or "retries" in t] == []
    assert any(module in t for t in loaded)
