"""A demo killed with SIGTERM (or its terminal closed) ends as Ctrl-C ends it: the daemon it
started is stopped and the test cluster taken down. The demo runs in a child process with
Python's own signal handling, as `python -m elbdev demo` does; its cluster and daemon are
stand-ins (a recorder and a sleeping child process): the real demo needs root and the test
cluster, which this unit test does not stand up."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import argparse, json, os, signal, subprocess, sys, time
from pathlib import Path
from elbdev import demo
from elbdev.testcluster import cluster as testcluster

out = Path(sys.argv[1])
sig = signal.Signals[sys.argv[2]]
seen = {"downs": 0, "daemon": None}

class FakeCluster:
    def down(self):
        seen["downs"] += 1

def run(_cluster, _args, procs):
    daemon = subprocess.Popen(  # not holding the test's pipes: a failure is reported at once
        [sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    procs.append(daemon)
    seen["daemon"] = daemon
    os.kill(os.getpid(), sig)  # as `kill` from another shell would
    time.sleep(30)
    raise AssertionError("the signal did not end the demo")

demo.os.geteuid = lambda: 0
demo.LOCK = out.with_name("lock")
testcluster.TestCluster = FakeCluster
demo._run = run
before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}  # SIGHUP ignored under nohup
rc = demo.cmd_demo(argparse.Namespace(scheduler="sge", keep=False))
out.write_text(json.dumps({
    "rc": rc,
    "downs": seen["downs"],
    "daemon_ended": seen["daemon"].poll() is not None,
    "handlers_back": all(signal.getsignal(s) == h for s, h in before.items()),
}))
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_killed_demo_stops_its_daemon_and_takes_the_cluster_down(tmp_path: Path, sig: str) -> None:
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(out), sig],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # Killed by the signal (the default action) there is no report: the daemon was left running.
    assert proc.returncode == 0 and out.exists(), (proc.returncode, signal.Signals[sig], proc.stderr[-2000:])
    assert json.loads(out.read_text()) == {"rc": 130, "downs": 1, "daemon_ended": True, "handlers_back": True}
