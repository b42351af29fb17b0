"""``elb validate``: each check of a first run's needs, one line with ok/FAIL and a fix.

SGE is a command on PATH here (a script standing in for qstat: the real one is tested on the
test cluster, tests/package); the unwritable directory is sysfs, where even root cannot create
a file (root passes every permission check, so a chmod could not stand in).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.exitcodes import Exit


def write_config(tmp_path: Path, extra: str = "", provision: str = "") -> Path:
    """A config of tmp paths only (validate writes a probe file into an existing state_dir or
    provision.private_data_dir, or their parent: never elb's own /var/lib/elb)."""
    path = tmp_path / "elb.yml"
    settings = ", ".join((f"private_data_dir: {tmp_path / 'ansible'}", *([provision] if provision else [])))
    path.write_text(f"state_dir: {tmp_path / 'state'}\nprovision: {{{settings}}}\ncloud: {{provider: local}}\n{extra}")
    return path


def fake_qstat(tmp_path: Path, body: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    qstat = bin_dir / "qstat"
    qstat.write_text(f"#!/bin/sh\n{body}\n")
    qstat.chmod(0o755)
    return bin_dir


def run(path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, list[str]]:
    code = main(["validate", *flags, "-c", str(path)])
    return code, capsys.readouterr().out.splitlines()


def test_offline_ok_and_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path)
    code, out = run(path, capsys, "--offline")
    assert code == Exit.OK
    assert out[0] == f"config: {path.resolve()}"
    assert all(line.startswith(("ok", "config:", "(offline")) for line in out), out
    assert any("state directory" in line and "does not exist yet" in line for line in out)
    assert not (tmp_path / "state").exists()  # never created by a check


def test_unreadable_ssh_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "missing_key"
    code, out = run(write_config(tmp_path, provision=f"ssh_private_key: {key}"), capsys, "--offline")
    assert code == Exit.CONFIG
    assert f"FAIL SSH key: {key}: cannot be read: No such file or directory" in "\n".join(out)


def test_unwritable_state_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "elb.yml"
    ansible = f"provision: {{private_data_dir: {tmp_path / 'ansible'}}}\n"
    path.write_text("state_dir: /sys/kernel\ncloud: {provider: local}\n" + ansible)
    code, out = run(path, capsys, "--offline")
    assert code == Exit.CONFIG
    assert any(line.startswith("FAIL state directory: /sys/kernel is not writable") for line in out), out
    path.write_text("state_dir: /sys/elb-test/state\ncloud: {provider: local}\n" + ansible)
    code, out = run(path, capsys, "--offline")
    assert code == Exit.CONFIG
    assert any("/sys/elb-test/state does not exist and /sys is not writable" in line for line in out), out


def test_qstat_that_fails_or_hangs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bin_dir = fake_qstat(tmp_path, "echo 'unable to contact qmaster' >&2; exit 1")
    path = write_config(tmp_path, f"sge: {{bin_dir: {bin_dir}, timeout: 1}}\n")
    code, out = run(path, capsys)
    assert code == Exit.CONFIG
    assert any(line.startswith("FAIL SGE:") and "unable to contact qmaster" in line for line in out), out
    assert not any("set sge.root" in line for line in out), out  # SGE's answer has its own hint
    (bin_dir / "qstat").write_text("#!/bin/sh\necho 'error: qstat is broken' >&2; exit 1\n")
    code, out = run(path, capsys)
    assert any("is broken" in line and "-> set sge.root, sge.cell and sge.bin_dir" in line for line in out), out
    (bin_dir / "qstat").write_text("#!/bin/sh\nexec sleep 30\n")
    code, out = run(path, capsys)
    assert code == Exit.CONFIG
    assert any(line.startswith("FAIL SGE: qstat did not answer within 1s") for line in out), out


def test_qstat_that_answers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bin_dir = fake_qstat(tmp_path, "exit 0")
    path = write_config(tmp_path, f"sge: {{bin_dir: {bin_dir}}}\n")
    main(["validate", "-c", str(path)])
    out = capsys.readouterr().out
    assert "ok   SGE: qstat answers" in out


def test_a_peek_that_cannot_be_read_is_a_warning_not_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = fake_qstat(tmp_path, 'if [ "$1" = "-s" ] && [ "$2" = "p" ]; then echo "something else"; fi; exit 0')
    path = write_config(tmp_path, f"sge: {{bin_dir: {bin_dir}}}\n")
    _, out = run(path, capsys)
    assert any(line.startswith("warn SGE peek: qstat -s p -u '*' cannot be read") for line in out), out
    assert not any(line.startswith("FAIL SGE") for line in out), out
    (bin_dir / "qstat").write_text("#!/bin/sh\nexit 0\n")
    _, out = run(path, capsys)
    assert any(line.startswith("ok   SGE peek: qstat -s p -u '*' read (0 jobs waiting)") for line in out), out
    path.write_text(path.read_text() + "policy: {peek_interval: 0}\n")
    _, out = run(path, capsys)
    assert not any("SGE peek" in line for line in out), out


def test_a_journal_from_a_newer_elb_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3

    (tmp_path / "state").mkdir()
    db = sqlite3.connect(tmp_path / "state" / "journal.sqlite")
    db.execute("PRAGMA user_version = 999")
    db.close()
    code, out = run(write_config(tmp_path), capsys, "--offline")
    assert code == Exit.CONFIG
    assert any(line.startswith("FAIL journal:") and "newer elb" in line for line in out), out


def test_a_bad_config_is_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, "policy: {max_nodes: -1}\n")
    assert main(["validate", "--offline", "-c", str(path)]) == Exit.CONFIG
    assert "policy.max_nodes" in capsys.readouterr().err
    assert os.path.exists(path)


def test_a_check_is_one_line() -> None:
    from elb.core.checks import Check

    line = Check("SGE", False, "qstat failed\nerror: unable to contact qmaster", "fix it").line()
    assert line == "FAIL SGE: qstat failed error: unable to contact qmaster -> fix it"
    assert Check("x", True, "fine", "unused").line() == "ok   x: fine"


def test_slurm_scheduler_checks_slurm_and_its_request_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With scheduler: slurm, Slurm is checked instead of SGE (scripts stand in for sinfo and
    squeue; the real ones answer in tests/cluster/test_slurm_e2e.py)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, answer in (("sinfo", "node001|idle+cloud+powered_down|2|0/2/0/2|cloud*|none"), ("squeue", "")):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\necho '{answer}'\n")
        script.chmod(0o755)
    requests = tmp_path / "requests"
    path = write_config(tmp_path, f"scheduler: slurm\nslurm: {{bin_dir: {bin_dir}, requests: {requests}}}\n")
    code, out = run(path, capsys)
    assert any(line.startswith("ok   Slurm: sinfo lists 1 node(s), 1 of them cloud nodes") for line in out), out
    assert any(line.startswith("FAIL Slurm requests:") and "mode 2770" in line for line in out), out
    assert not any("SGE" in line for line in out)
    assert code == Exit.CONFIG
    requests.mkdir()
    code, out = run(path, capsys)
    assert any(line.startswith("ok   Slurm requests:") for line in out), out
