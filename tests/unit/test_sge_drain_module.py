"""The sge_decommission role's module (roles/sge_decommission/library/elb_sge_drain.py) against a
stand-in for qconf, qmod and qhost that answers as Grid Engine 8.1.9's do (their messages and
layout taken from the test cluster, among them qhost -j's one header above the first host's
jobs only): which nodes are busy, that only the idle ones stay disabled, the few commands a
batch costs, failures, check mode, and the module as Ansible runs it. The real qmaster runs it
in the cluster tests (remove_node.yml, a busy node kept)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.unit import role_modules

MODULE_PATH = role_modules.module_path("sge_decommission", "elb_sge_drain")
M = role_modules.load("sge_decommission", "elb_sge_drain")

HEADER = (
    "HOSTNAME                ARCH         NCPU NSOC NCOR NTHR  LOAD  MEMTOT  MEMUSE  SWAPTO  SWAPUS\n"
    "----------------------------------------------------------------------------------------------\n"
    "global                  -               -    -    -    -     -       -       -       -       -\n"
)
HOST = "{name:<23} lx-amd64        2    1    2    2  0.53   23.5G  703.4M     0.0     0.0\n"
JOBS_HEADER = (
    "   job-ID  prior   name       user         state submit/start at     queue      master ja-task-ID \n"
    "   ----------------------------------------------------------------------------------------------\n"
)
JOB = "        {id} 0.50000 sleep      sgeuser      r     11/28/2026 20:55:12 all.q@node MASTER        \n"


class Sge:
    """The exec hosts, their queue instances' states and the jobs on each."""

    def __init__(self, execs: Sequence[str], jobs: dict[str, int] | None = None) -> None:
        self.execs = list(execs)
        self.jobs = jobs or {}  # host -> a job's id
        self.disabled: set[str] = set()
        self.calls: list[list[str]] = []
        self.fail: str | None = None  # a command that fails

    def run(self, argv: Sequence[str]) -> tuple[int, str, str]:
        self.calls.append(list(argv))
        if self.fail == argv[0]:
            return 1, "", "error: commlib error: got select error (Connection refused)\n"
        if argv[:2] == ["qconf", "-sel"]:
            return (0, "\n".join(self.execs) + "\n", "") if self.execs else (1, "", "no execution host defined\n")
        if argv[0] == "qmod":
            out, rc = "", 0
            for pattern in argv[2].split(","):
                host = pattern.removeprefix("*@")
                if host not in self.execs:
                    rc, out = 1, out + f'invalid queue "{pattern}"\n'
                    continue
                state = "disabled" if argv[1] == "-d" else "enabled"
                if (host in self.disabled) == (argv[1] == "-d"):
                    out += f'Queue instance "all.q@{host}" is already in the specified state: {state}\n'
                    continue
                (self.disabled.add if argv[1] == "-d" else self.disabled.discard)(host)
                out += f'root@master changed state of "all.q@{host}" ({state})\n'
            return rc, out, ""
        if argv[:3] == ["qhost", "-j", "-h"]:
            out, header = HEADER, True
            for host in argv[3].split(","):
                out += HOST.format(name=host)
                if host in self.jobs:
                    out += (JOBS_HEADER if header else "") + JOB.format(id=self.jobs[host])
                    header = False
            return 0, out, ""
        raise AssertionError(f"{argv} is not part of the stand-in")


def test_every_node_with_a_job_is_busy_though_qhost_heads_only_the_first_hosts_jobs() -> None:
    sge = Sge(["node001", "node002", "node003", "node004"], jobs={"node002": 7, "node004": 9})
    busy, idle, commands = M.drain(["node001", "node002", "node003", "node004"], sge.run)
    assert busy == ["node002", "node004"] and idle == ["node001", "node003"]
    assert sge.disabled == {"node001", "node003"}  # the busy ones enabled again
    assert [c[:2] for c in commands] == [["qmod", "-d"], ["qmod", "-e"]]
    assert commands[1] == ["qmod", "-e", "*@node002,*@node004"]
    # one read, one qmod, one qhost and one qmod for the whole batch
    assert [c[0] for c in sge.calls] == ["qconf", "qmod", "qhost", "qmod"]


def test_an_indented_line_qhost_might_print_keeps_the_node_in_service() -> None:
    out = HEADER + HOST.format(name="node001") + "   something new\n" + HOST.format(name="node002")
    assert M.busy_hosts(out, ["node001", "node002"]) == {"node001"}


def test_a_node_that_is_no_exec_host_is_idle_and_a_batch_of_none_runs_nothing_else() -> None:
    sge = Sge(["node001"])
    assert M.drain(["node009", "node001"], sge.run) == (
        [],
        ["node009", "node001"],
        [["qmod", "-d", "*@node001"]],
    )
    sge2 = Sge([])
    assert M.drain(["node001"], sge2.run) == ([], ["node001"], [])
    assert sge2.calls == [["qconf", "-sel"]]


def test_a_second_drain_changes_nothing_and_check_mode_disables_nothing() -> None:
    sge = Sge(["node001", "node002"], jobs={"node002": 3})
    M.drain(["node001", "node002"], sge.run)
    assert M.drain(["node001"], sge.run) == ([], ["node001"], [])  # disabled already
    assert "node002" not in sge.disabled
    sge2 = Sge(["node001", "node002"], jobs={"node002": 3})
    assert M.drain(["node001", "node002"], sge2.run, apply=False) == (["node002"], ["node001"], [])
    assert not sge2.disabled and [c[0] for c in sge2.calls] == ["qconf", "qhost"]


@pytest.mark.parametrize("failing", ["qconf", "qmod", "qhost"])
def test_a_failed_command_fails_the_drain_with_what_it_said(failing: str) -> None:
    sge = Sge(["node001"], jobs={"node001": 1})
    sge.fail = failing
    with pytest.raises(M.DrainError, match=rf"{failing} .*failed \(exit 1\): error: commlib error"):
        M.drain(["node001"], sge.run)


@pytest.mark.parametrize("name", ["node 1", "node*", "@allhosts", "a,b", ""])
def test_a_name_qmod_would_take_as_a_pattern_or_list_is_refused_before_any_command(name: str) -> None:
    sge = Sge(["node001"])
    with pytest.raises(ValueError, match="hosts must be host names"):
        M.drain(["node001", name], sge.run)
    assert sge.calls == []


# The module as Ansible runs it: its arguments on stdin, qconf, qmod and qhost on PATH answering
# from the stand-in's state kept in a file between calls.
FAKE = """#!{python}
import os, pickle, sys
sys.path.insert(0, {repo!r})
from tests.unit.test_sge_drain_module import Sge
state = {state!r}
sge = pickle.load(open(state, "rb"))
assert os.environ["SGE_ROOT"] == "/opt/sge" and os.environ["SGE_CELL"] == "c1", os.environ
rc, out, err = sge.run([os.path.basename(sys.argv[0]), *sys.argv[1:]])
pickle.dump(sge, open(state, "wb"))
sys.stdout.write(out); sys.stderr.write(err); sys.exit(rc)
"""


def test_the_module_as_ansible_runs_it(tmp_path: Path) -> None:
    import pickle

    state = tmp_path / "sge.pickle"
    state.write_bytes(pickle.dumps(Sge(["node001", "node002"], jobs={"node001": 5})))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for command in ("qconf", "qmod", "qhost"):
        (bindir / command).write_text(
            FAKE.format(python=sys.executable, repo=str(role_modules.ROLES.parent), state=str(state))
        )
        (bindir / command).chmod(0o755)
    proc = subprocess.run(
        [sys.executable, str(MODULE_PATH)],
        input=json.dumps(
            {"ANSIBLE_MODULE_ARGS": {"hosts": ["node001", "node002"], "sge_root": "/opt/sge", "sge_cell": "c1"}}
        ),
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"},
        timeout=60,
        check=False,
    )
    out = json.loads(proc.stdout)
    assert out["changed"] is True and out["busy"] == ["node001"] and out["idle"] == ["node002"], out
    assert pickle.loads(state.read_bytes()).disabled == {"node002"}
