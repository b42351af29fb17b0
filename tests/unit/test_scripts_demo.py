"""scripts/demo on a machine where its installs print what apt, dpkg, pip and the image build
print: the terminal gets one line per phase with its time (``== NAME (at XmYs)``) and the
demo's own output, the installs' output goes to the log directory it names, and the demo is
told the installs are done."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOISE = ["(Reading database ... 5%", "invoke-rc.d: policy-rc.d denied execution of start.", "Collecting matplotlib"]


def stub(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_the_terminal_gets_a_line_per_phase_and_the_logs_get_the_installs_output(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "demo", checkout / "scripts" / "demo")
    noise = "".join(f"echo '{line}'; echo '{line}' >&2\n" for line in NOISE)
    stub(checkout / "scripts" / "install-system-deps.sh", noise)
    stub(checkout / "scripts" / "bootstrap", noise)
    stub(
        checkout / ".venv" / "bin" / "python",
        'if [ "$2" = "elbdev" ]; then\n'
        '    echo "the demo: installed=$ELB_DEMO_INSTALLED t0=$ELB_DEMO_T0 $*"; exit 0\n'
        f"fi\n{noise}",
    )
    stub(tmp_path / "bin" / "sudo", 'exec "$@"\n')  # when the test runs as another user than root
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(checkout / "scripts" / "demo"), "--jobs", "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert all(re.fullmatch(r"== .+ \(at \d+m\d+s\)", line) for line in lines[:-1]), lines
    assert [line.split(" (")[0] for line in lines[:-1]] == [
        "== installing",
        "== importing the node image into podman",
        "== starting the demo",
    ]
    assert re.fullmatch(r"the demo: installed=1 t0=\d+ -m elbdev demo --jobs 3", lines[-1]), lines[-1]
    assert not any(n in done.stdout + done.stderr for n in NOISE), (done.stdout, done.stderr)
    (logs,) = tmp_path.glob("elb-demo-install.*")
    assert str(logs) in lines[0]
    for step in ("image-tools", "venv", "packages", "bootstrap", "image", "image-import"):
        assert NOISE[0] in (logs / f"{step}.log").read_text(), step
