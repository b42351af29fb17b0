"""The sge_exec role's module (roles/sge_exec/library/elb_sge_exec_host.py) against a stand-in
qmaster that answers qconf's commands as Grid Engine 8.1.9's qconf does (its messages and exit
codes, taken from the test cluster's qconf): what a registration runs, that a second one runs
nothing, the host group made or joined, slots and complex values changed, a missing queue, the
name the qmaster cannot resolve yet, check mode, and the module as Ansible runs it. The real
qmaster runs the module in the cluster tests and the Molecule scenarios."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

import pytest

from tests.unit import role_modules

MODULE_PATH = role_modules.module_path("sge_exec", "elb_sge_exec_host")
M = role_modules.load("sge_exec", "elb_sge_exec_host")


class Queue(TypedDict):
    """A cluster queue as the stand-in keeps it: its host list and its per-host slots."""

    hostlist: list[str]
    slots: dict[str, int]


# What qconf says while the qmaster restarts (Debian's gridengine 8.1.9).
RESTARTING = (
    "error: commlib error: got select error (Connection refused)\n"
    'unable to send message to qmaster using port 6444 on host "master": got send error\n'
)
# What qconf says when the qmaster's answer does not come in time (the change may be made).
LOST_REPLY = "error: failed receiving gdi request response for mid=3 (got syncron message receive timeout error).\n"


class Qmaster:
    """What one qmaster knows, changed and shown by qconf's argument lists."""

    def __init__(self) -> None:
        self.admin = ["master"]
        self.submit = ["master"]
        self.execs: dict[str, str] = {}
        self.groups: dict[str, list[str]] = {"@allhosts": []}
        self.queues: dict[str, Queue] = {"all.q": {"hostlist": ["@allhosts"], "slots": {}}}
        self.unresolvable: dict[str, int] = {}  # name -> how many more -ah fail to resolve it
        self.calls: list[list[str]] = []
        self.race_group = False  # another node's run makes the group just before -Ahgrp
        self.dead: set[str] = set()  # exec hosts whose execd does not answer
        self.race_member: str | None = None  # another run adds it to a host group just before -aattr
        self.restarting = 0  # how many more qconf calls find the qmaster down
        self.down_at: dict[str, int] = {}  # option -> the qmaster goes down for that many calls when it first comes
        self.lost_reply: set[str] = set()  # options whose change is made but whose reply qconf never gets

    def run(self, argv: Sequence[str]) -> tuple[int, str, str]:
        self.calls.append(list(argv))
        assert argv[0] == "qconf"
        self.restarting += self.down_at.pop(argv[1], 0)
        if self.restarting > 0:  # the qmaster restarting: qconf cannot reach it
            self.restarting -= 1
            return 1, "", RESTARTING
        opt, args = argv[1], list(argv[2:])
        if opt in self.lost_reply:  # the qmaster made the change; its answer was lost on the way
            self.lost_reply.discard(opt)
            self.run(argv)
            self.calls.pop()
            return 1, "", LOST_REPLY
        listed = {"-sh": (self.admin, "no admin host defined"), "-ss": (self.submit, "no submit host defined")}
        if opt in listed:
            hosts, empty = listed[opt]
            return (0, "\n".join(hosts) + "\n", "") if hosts else (1, "", empty + "\n")
        if opt == "-sel":
            return (0, "\n".join(self.execs) + "\n", "") if self.execs else (1, "", "no execution host defined\n")
        if opt == "-shgrpl":
            return (0, "\n".join(self.groups) + "\n", "") if self.groups else (1, "", "no host group list defined\n")
        if opt == "-shgrp":
            members = self.groups.get(args[0])
            if members is None:
                return 1, "", f'Host group "{args[0]}" does not exist\n'
            return 0, f"group_name {args[0]}\nhostlist {' '.join(members) or 'NONE'}\n", ""
        if opt == "-sq":
            q = self.queues.get(args[0])
            if q is None:
                return 1, "", f'No cluster queue or queue instance matches the phrase "{args[0]}"\n'
            slots = ["1", *(f"[{h}={n}]" for h, n in q["slots"].items())]
            hostlist = " ".join(q["hostlist"]) or "NONE"
            return (
                0,
                f"qname                 {args[0]}\nhostlist              {hostlist}\n"
                f"slots                 {','.join(slots)}\n",
                "",
            )
        if opt in ("-ah", "-as"):  # a comma-separated list: a line a host, exit 1 if one did not resolve
            rc, out, err = 0, "", ""
            for name in args[0].split(","):
                if opt == "-ah" and self.unresolvable.get(name, 0) > 0:
                    self.unresolvable[name] -= 1
                    rc, err = 1, err + f'can\'t resolve hostname "{name}"\n'
                    continue
                hosts, kind, what = (
                    (self.admin, "adminhost", "administrative")
                    if opt == "-ah"
                    else (self.submit, "submithost", "submit")
                )
                if name in hosts:  # said, but no failure: qconf exits 0
                    err += f'{kind} "{name}" already exists\n'
                    continue
                hosts.append(name)
                out += f"{name} added to {what} host list\n"
            return rc, out, err
        if opt in ("-Ae", "-Me"):
            text = Path(args[0]).read_text()
            name = text.split()[1]
            if opt == "-Ae" and name in self.execs:
                return 1, "", f'exechost "{name}" already exists\n'
            self.execs[name] = text
            return 0, f'root@master {"added" if opt == "-Ae" else "modified"} "{name}" to exechost list\n', ""
        if opt == "-Ahgrp":
            group, *members = Path(args[0]).read_text().replace("group_name", "").replace("hostlist", "").split()
            if self.race_group:
                self.groups[group] = ["othernode"]
            if group in self.groups:
                return 1, "", f'host group "{group}" already exists\n'
            self.groups[group] = members
            return 0, f'root@master added "{group}" to host group list\n', ""
        if opt in ("-aattr", "-mattr"):
            kind, attr, value, target = args
            if kind == "hostgroup":
                members = self.groups[target]
                if self.race_member:  # another run adds a node just before this command
                    members.append(self.race_member)
                    self.race_member = None
                names = value.split()
                there = [n for n in names if n in members]
                if there:  # qconf adds none of a list (or a single name) that names a member
                    return (
                        0,
                        f'No modification because "{there[0]}" already exists in "hostlist" of "hostgroup"\n'
                        f'root@master modified "{target}" in host group list\n',
                        "",
                    )
                members.extend(names)
                return 0, f'root@master modified "{target}" in host group list\n', ""
            q = self.queues[target]
            if attr == "hostlist":
                if value in q["hostlist"]:
                    return 0, f'No modification because "{value}" already exists in "hostlist" of "{target}"\n', ""
                q["hostlist"].append(value)
            else:  # "[host=n],[host=n]": -aattr and -mattr each add an entry or set one there
                entries = [entry.strip("[]").split("=") for entry in value.split(",")]
                for host, n in entries:
                    q["slots"][host] = int(n)
            return 0, f'root@master modified "{target}" in cluster queue list\n', ""
        if opt == "-sql":
            return (0, "\n".join(self.queues) + "\n", "") if self.queues else (1, "", "no cqueue list defined\n")
        if opt == "-ke":
            if args[0] not in self.execs:
                return 1, "", f'"{args[0]}" is not an execution host\n'
            if args[0] in self.dead:
                return 1, "", f'error: failed sending shutdown notification to execution host "{args[0]}"\n'
            return 0, f"root@master sent shutdown notification to execution host {args[0]}\n", ""
        if opt == "-purge":
            _, attr, instance = args
            queue, host = instance.split("@")
            q = self.queues.get(queue)
            if q is None or host not in q["slots"]:  # said, but no failure: qconf exits 0
                return 0, "", f'Attribute name ("{attr}") and/or value ("{host}") not found\n'
            del q["slots"][host]
            return 0, f'root@master modified "{queue}" in cluster queue list\n', ""
        if opt == "-dattr":  # a whitespace-separated list: qconf removes the members it names
            _, _, removed, group = args
            out = ""
            for host in removed.split():
                if host in self.groups[group]:
                    self.groups[group].remove(host)
                else:
                    out += f'"{host}" does not exist in "hostlist" of "hostgroup"\n'
            return 0, out + f'root@master modified "{group}" in host group list\n', ""
        if opt == "-de":  # qconf says a removed exec host on stderr
            host = args[0]
            if host not in self.execs:
                return 1, "", f'denied: execution host "{host}" does not exist\n'
            assert not any(host in q["slots"] for q in self.queues.values())
            del self.execs[host]
            return 0, "", f'root@master removed "{host}" from execution host list\n'
        if opt in ("-dh", "-ds"):  # a comma-separated list
            kind = {"-dh": "administrative", "-ds": "submit"}[opt]
            out = ""
            for host in args[0].split(","):
                (self.admin if opt == "-dh" else self.submit).remove(host)
                out += f'root@master removed "{host}" from {kind} host list\n'
            return 0, out, ""
        raise AssertionError(f"qconf {opt} is not part of the stand-in")


def register(qm: Qmaster, tmp: Path, *, apply: bool = True, retries: int = 24, **want: object) -> list[list[str]]:
    w = M.Want(**{"name": "node004", "slots": 2, **want})
    sleeps: list[float] = []
    commands: list[list[str]] = M.register(
        w,
        qm.run,
        files=M.ScratchFiles(str(tmp / "scratch"), check=not apply),
        retries=retries,
        delay=5,
        apply=apply,
        sleep=sleeps.append,
    )
    return commands


def changing(commands: list[list[str]]) -> list[str]:
    return [c[1] for c in commands]


def test_a_new_node_is_registered_in_full_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    qm = Qmaster()
    done = register(qm, tmp_path, complex_values={"bigmem": "1"})
    assert changing(done) == ["-ah", "-as", "-Ae", "-aattr", "-aattr"]
    assert "node004" in qm.admin and "node004" in qm.submit and qm.groups["@allhosts"] == ["node004"]
    assert "complex_values        slots=2,bigmem=1\n" in qm.execs["node004"]
    assert qm.queues["all.q"]["slots"] == {"node004": 2}
    assert (tmp_path / "scratch").stat().st_mode & 0o777 == 0o700
    qm.calls.clear()
    assert register(qm, tmp_path, complex_values={"bigmem": "1"}) == []
    assert [c[1] for c in qm.calls] == ["-sq", "-sh", "-ss", "-sel", "-shgrpl", "-shgrp"]  # reads only


def test_a_missing_host_group_is_made_with_the_node_and_put_on_each_queue(tmp_path: Path) -> None:
    qm = Qmaster()
    qm.queues["big.q"] = {"hostlist": [], "slots": {}}
    done = register(qm, tmp_path, hostgroup="@big", queues=["all.q", "big.q"])
    assert ["qconf", "-Ahgrp", str(tmp_path / "scratch" / "hostgroup-node004")] in done
    assert qm.groups["@big"] == ["node004"]
    assert qm.queues["all.q"]["hostlist"] == ["@allhosts", "@big"] and qm.queues["big.q"]["hostlist"] == ["@big"]
    assert qm.queues["big.q"]["slots"] == {"node004": 2}
    # a second node joins the group the first made
    again = register(qm, tmp_path, name="node005", hostgroup="@big", queues=["all.q", "big.q"])
    assert ["qconf", "-aattr", "hostgroup", "hostlist", "node005", "@big"] in again
    assert qm.groups["@big"] == ["node004", "node005"]
    assert not [c for c in again if c[1] == "-Ahgrp" or c[2:4] == ["queue", "hostlist"]]


def test_a_group_another_run_made_meanwhile_is_joined(tmp_path: Path) -> None:
    qm = Qmaster()
    qm.race_group = True
    done = register(qm, tmp_path, hostgroup="@big")
    assert ["qconf", "-aattr", "hostgroup", "hostlist", "node004", "@big"] in done
    assert qm.groups["@big"] == ["othernode", "node004"]


def test_new_slots_and_complex_values_change_the_exec_host_and_the_queue(tmp_path: Path) -> None:
    qm = Qmaster()
    register(qm, tmp_path)
    done = register(qm, tmp_path, slots=4, complex_values={"h_vmem": "120G"})
    assert changing(done) == ["-Me", "-mattr"]
    assert "complex_values        slots=4,h_vmem=120G\n" in qm.execs["node004"]
    assert qm.queues["all.q"]["slots"] == {"node004": 4}


def test_a_missing_queue_fails_before_anything_changes(tmp_path: Path) -> None:
    qm = Qmaster()
    with pytest.raises(M.RegisterError, match=r"queue nope\.q cannot be read .*No cluster queue"):
        register(qm, tmp_path, queues=["all.q", "nope.q"])
    assert [c[1] for c in qm.calls] == ["-sq", "-sq"] and "node004" not in qm.admin


def test_a_read_that_meets_the_qmaster_restarting_is_tried_again(tmp_path: Path) -> None:
    # A restart of the qmaster (seconds) during a node's play fails no node: qconf's reads that
    # cannot reach it are tried again, a bounded number of times, a few seconds apart.
    qm = Qmaster()
    qm.restarting = 2
    done = register(qm, tmp_path)
    assert changing(done) == ["-ah", "-as", "-Ae", "-aattr", "-aattr"]
    assert qm.queues["all.q"]["slots"] == {"node004": 2}
    assert [c[1] for c in qm.calls[:3]] == ["-sq", "-sq", "-sq"]
    qm2 = Qmaster()
    qm2.restarting = 100  # down for good: the node fails, saying why, after the bounded tries
    with pytest.raises(M.RegisterError, match=r"queue all\.q cannot be read .*commlib error"):
        register(qm2, tmp_path / "2")
    assert len(qm2.calls) == M.QMASTER_TRIES


@pytest.mark.parametrize("option", ["-as", "-Ae", "-aattr"])
def test_a_change_that_meets_the_qmaster_restarting_is_tried_again(tmp_path: Path, option: str) -> None:
    # The qmaster going down for a few seconds between a node's reads and its changes fails no
    # node: the change that could not reach it is made again, a bounded number of times.
    qm = Qmaster()
    qm.down_at[option] = 2
    done = register(qm, tmp_path)
    assert changing(done) == ["-ah", "-as", "-Ae", "-aattr", "-aattr"]
    assert "node004" in qm.submit and "node004" in qm.execs and qm.groups["@allhosts"] == ["node004"]
    assert qm.queues["all.q"]["slots"] == {"node004": 2}
    qm2 = Qmaster()
    qm2.down_at["-Ae"] = 100  # down for good: the node fails, saying why, after the bounded tries
    with pytest.raises(M.RegisterError, match=r"-Ae .* failed .*commlib error"):
        register(qm2, tmp_path / "2")
    assert [c[1] for c in qm2.calls].count("-Ae") == M.QMASTER_TRIES


@pytest.mark.parametrize("option", ["-as", "-Ae", "-Ahgrp"])
def test_a_change_made_whose_answer_was_lost_is_taken_as_made(tmp_path: Path, option: str) -> None:
    # qconf gave up waiting for the qmaster's answer after the qmaster made the change: asked
    # again, the qmaster says it is there already, and the node is registered.
    qm = Qmaster()
    if option == "-Ahgrp":
        del qm.groups["@allhosts"]
    qm.lost_reply.add(option)
    register(qm, tmp_path)
    assert "node004" in qm.submit and "node004" in qm.execs and qm.groups["@allhosts"] == ["node004"]
    assert qm.queues["all.q"]["slots"] == {"node004": 2}


def test_a_batch_whose_changes_meet_the_qmaster_restarting_registers_every_node(tmp_path: Path) -> None:
    qm = Qmaster()
    qm.down_at["-Ae"] = 3
    out = batch(qm, tmp_path, [{"name": "node001"}, {"name": "node002"}])
    assert not any(o["failed"] for o in out.values()), out
    assert list(qm.execs) == ["node001", "node002"]


def test_a_name_the_qmaster_cannot_resolve_yet_is_tried_again_then_fails(tmp_path: Path) -> None:
    qm = Qmaster()
    qm.unresolvable["node004"] = 2
    assert changing(register(qm, tmp_path, retries=2))[0] == "-ah"
    assert "node004" in qm.admin
    qm2 = Qmaster()
    qm2.unresolvable["node004"] = 5
    with pytest.raises(M.RegisterError, match=r"qconf -ah node004 failed 3 times.*can't resolve hostname"):
        register(qm2, tmp_path / "2", retries=2)
    assert "node004" not in qm2.submit


def test_check_mode_reads_only_and_says_what_would_change(tmp_path: Path) -> None:
    qm = Qmaster()
    would = register(qm, tmp_path, apply=False)
    assert changing(would) == ["-ah", "-as", "-Ae", "-aattr", "-aattr"]
    assert qm.admin == ["master"] and not qm.execs and not (tmp_path / "scratch").exists()
    register(qm, tmp_path)
    assert register(qm, tmp_path, apply=False) == []


@pytest.mark.parametrize(
    ("want", "match"),
    [
        ({"name": "node 4"}, "name must be one word"),
        ({"hostgroup": "allhosts"}, "hostgroup must start with '@'"),
        ({"slots": 0}, "slots must be at least 1"),
        ({"queues": []}, "queues must name at least one queue"),
        ({"queues": ["a.q,b.q"]}, "queue must be one word"),
        ({"complex_values": {"h_vmem": "1 G"}}, "complex value h_vmem=1 G"),
    ],
)
def test_input_qconf_would_take_wrongly_is_refused_before_any_command(
    tmp_path: Path, want: dict[str, Any], match: str
) -> None:
    qm = Qmaster()
    with pytest.raises(ValueError, match=match):
        register(qm, tmp_path, **want)
    assert qm.calls == []


def test_absent_takes_the_node_out_of_everything_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    qm = Qmaster()
    qm.queues["big.q"] = {"hostlist": [], "slots": {}}
    register(qm, tmp_path, hostgroup="@big", queues=["all.q", "big.q"])
    register(qm, tmp_path, name="node005")
    done = M.deregister("node004", qm.run)
    # the queue instances' settings go with "-purge queue *"; the slots' purge then finds nothing
    assert changing(done) == ["-ke", "-purge", "-purge", "-dattr", "-de", "-dh", "-ds"]
    assert "node004" not in qm.execs and "node004" not in qm.admin + qm.submit
    assert qm.groups == {"@allhosts": ["node005"], "@big": []}
    assert qm.queues["all.q"]["slots"] == {"node005": 2} and qm.queues["big.q"]["slots"] == {}
    assert M.deregister("node004", qm.run) == []
    assert "node005" in qm.execs  # the other node is untouched


def test_absent_on_a_dead_node_or_one_half_registered(tmp_path: Path) -> None:
    qm = Qmaster()
    register(qm, tmp_path)
    qm.dead.add("node004")
    assert changing(M.deregister("node004", qm.run)) == ["-purge", "-dattr", "-de", "-dh", "-ds"]
    qm2 = Qmaster()
    qm2.admin.append("node004")  # an add that failed after -ah
    assert M.deregister("node004", qm2.run) == [["qconf", "-dh", "node004"]]
    with pytest.raises(ValueError, match="not a pattern"):
        M.deregister("node*", qm2.run)


def test_absent_in_check_mode_changes_nothing(tmp_path: Path) -> None:
    qm = Qmaster()
    register(qm, tmp_path)
    would = M.deregister("node004", qm.run, apply=False)
    assert changing(would) == ["-ke", "-purge", "-dattr", "-purge", "-de", "-dh", "-ds"]  # every purge listed
    assert "node004" in qm.execs and qm.groups["@allhosts"] == ["node004"]


# The module as Ansible runs it: its arguments on stdin, a qconf on PATH that keeps the stand-in's
# state in a file between its calls.
FAKE_QCONF = """#!{python}
import json, os, pickle, sys
sys.path.insert(0, {repo!r})
from tests.unit.test_sge_exec_host_module import Qmaster
state = {state!r}
qm = pickle.load(open(state, "rb")) if os.path.exists(state) else Qmaster()
assert os.environ["SGE_ROOT"] == "/opt/sge" and os.environ["SGE_CELL"] == "c1", os.environ
rc, out, err = qm.run(["qconf", *sys.argv[1:]])
pickle.dump(qm, open(state, "wb"))
sys.stdout.write(out); sys.stderr.write(err); sys.exit(rc)
"""


def _run_module(tmp: Path, args: Mapping[str, object]) -> dict[str, Any]:
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    qconf = bindir / "qconf"
    qconf.write_text(
        FAKE_QCONF.format(python=sys.executable, repo=str(role_modules.ROLES.parent), state=str(tmp / "qmaster.pickle"))
    )
    qconf.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    proc = subprocess.run(
        [sys.executable, str(MODULE_PATH)],
        input=json.dumps({"ANSIBLE_MODULE_ARGS": args}),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def test_the_module_as_ansible_runs_it(tmp_path: Path) -> None:
    args = {"name": "node004", "slots": 2, "sge_root": "/opt/sge", "sge_cell": "c1", "tmpdir": str(tmp_path / "s")}
    first = _run_module(tmp_path, args)
    assert first["changed"] is True, first
    assert [c[1] for c in first["commands"]] == ["-ah", "-as", "-Ae", "-aattr", "-aattr"]
    assert _run_module(tmp_path, args)["changed"] is False
    failed = _run_module(tmp_path, {**args, "queues": ["nope.q"]})
    assert failed["failed"] is True and "queue nope.q cannot be read" in str(failed["msg"])
    absent = {k: v for k, v in args.items() if k != "slots"} | {"state": "absent"}
    assert [c[1] for c in _run_module(tmp_path, absent)["commands"]] == ["-ke", "-purge", "-dattr", "-de", "-dh", "-ds"]
    assert _run_module(tmp_path, absent)["changed"] is False
    missing = _run_module(tmp_path, {k: v for k, v in args.items() if k != "slots"})
    assert missing["failed"] is True and "slots" in str(missing["msg"])


def test_a_batch_is_registered_node_by_node_and_a_failing_node_stops_no_other(tmp_path: Path) -> None:
    args = {
        "hosts": [
            {"name": "node004", "slots": 2},
            {"name": "node005", "slots": 4, "queues": ["nope.q"]},  # fails alone
            {"name": "node006", "slots": 2, "complex_values": {"bigmem": "1"}},
            {"name": "node007"},  # no slots: fails alone, with why
        ],
        "sge_root": "/opt/sge",
        "sge_cell": "c1",
        "tmpdir": str(tmp_path / "s"),
    }
    out = _run_module(tmp_path, args)
    hosts = out["hosts"]
    assert out["changed"] is True and not out.get("failed"), out
    assert isinstance(hosts, dict)
    assert hosts["node004"]["failed"] is False and hosts["node004"]["changed"] is True
    assert hosts["node006"]["failed"] is False and [c[1] for c in hosts["node006"]["commands"]][:3] == [
        "-ah",
        "-as",
        "-Ae",
    ]
    assert hosts["node005"]["failed"] is True and "queue nope.q cannot be read" in hosts["node005"]["msg"]
    assert hosts["node007"]["failed"] is True and "slots must be at least 1" in hosts["node007"]["msg"]
    again = _run_module(
        tmp_path,
        {
            **args,
            "hosts": [
                {"name": "node004", "slots": 2},
                {"name": "node006", "slots": 2, "complex_values": {"bigmem": "1"}},
            ],
        },
    )
    assert again["changed"] is False


def batch(
    qm: Qmaster, tmp: Path, wants: Sequence[Mapping[str, object]], *, apply: bool = True, retries: int = 24
) -> dict[str, dict[str, Any]]:
    sleeps: list[float] = []
    out: dict[str, dict[str, Any]] = M.register_batch(
        [M.Want(**{"slots": 2, **w}) for w in wants],
        qm.run,
        files=M.ScratchFiles(str(tmp / "scratch"), check=not apply),
        retries=retries,
        delay=5,
        apply=apply,
        sleep=sleeps.append,
    )
    return out


def test_a_batch_reads_the_qmaster_once_and_runs_each_list_step_once_whatever_its_size(tmp_path: Path) -> None:
    qm = Qmaster()
    nodes = [{"name": f"node{i:03d}"} for i in range(1, 17)]
    out = batch(qm, tmp_path, nodes)
    assert all(o["failed"] is False and o["changed"] is True for o in out.values())
    names = [n["name"] for n in nodes]
    assert qm.admin == ["master", *names] and qm.submit == ["master", *names] and list(qm.execs) == names
    assert qm.groups["@allhosts"] == names and qm.queues["all.q"]["slots"] == dict.fromkeys(names, 2)
    # six reads, -ah, -as, the host group's members, the slots, the group and the queue read
    # again: twelve commands a batch, and one a node (-Ae), where a registration a node ran eleven
    assert len(qm.calls) == 12 + 16, [c[1] for c in qm.calls]
    assert [c[1] for c in out["node007"]["commands"]] == ["-ah", "-as", "-Ae", "-aattr", "-aattr"]
    qm.calls.clear()
    again = batch(qm, tmp_path, nodes)
    assert not any(o["changed"] for o in again.values())
    assert [c[1] for c in qm.calls] == ["-sq", "-sh", "-ss", "-sel", "-shgrpl", "-shgrp"]  # reads only


def test_a_node_a_list_step_did_not_take_is_tried_alone_and_fails_alone(tmp_path: Path) -> None:
    qm = Qmaster()
    qm.unresolvable = {"node002": 1, "node003": 99}  # node002 resolves on the second try
    out = batch(qm, tmp_path, [{"name": "node001"}, {"name": "node002"}, {"name": "node003"}], retries=2)
    assert out["node001"]["failed"] is False and out["node002"]["failed"] is False
    assert out["node003"]["failed"] is True and "qconf -ah node003 failed 3 times" in str(out["node003"]["msg"])
    assert ["qconf", "-ah", "node002"] in out["node002"]["commands"]
    assert qm.groups["@allhosts"] == ["node001", "node002"] and "node003" not in qm.submit
    assert qm.queues["all.q"]["slots"] == {"node001": 2, "node002": 2}


def test_a_member_added_meanwhile_makes_qconf_take_none_of_the_list_and_each_joins_alone(tmp_path: Path) -> None:
    qm = Qmaster()
    qm.groups["@allhosts"] = ["node000"]
    qm.race_member = "node002"  # another run adds node002 between the read and the list command
    out = batch(qm, tmp_path, [{"name": "node001"}, {"name": "node002"}, {"name": "node003"}])
    assert not any(o["failed"] for o in out.values()), out
    assert sorted(qm.groups["@allhosts"]) == ["node000", "node001", "node002", "node003"]
    assert ["qconf", "-aattr", "hostgroup", "hostlist", "node001", "@allhosts"] in out["node001"]["commands"]


def test_a_member_another_run_added_meanwhile_is_no_change_of_this_run(tmp_path: Path) -> None:
    qm = Qmaster()
    batch(qm, tmp_path, [{"name": "node001"}])
    qm.groups["@allhosts"].remove("node001")
    qm.race_member = "node001"  # another run adds it between the read and this run's command
    out = batch(qm, tmp_path, [{"name": "node001"}])
    # qconf said "No modification because ... already exists" (and "modified", exit 0): nothing changed
    assert out["node001"] == {"changed": False, "failed": False, "msg": "", "commands": []}
    assert qm.groups["@allhosts"] == ["node001"]


def test_a_batch_makes_a_missing_group_with_its_nodes_and_sets_new_and_changed_slots_once_each(
    tmp_path: Path,
) -> None:
    qm = Qmaster()
    qm.queues["big.q"] = {"hostlist": [], "slots": {}}
    batch(qm, tmp_path, [{"name": "node001"}])
    qm.calls.clear()
    out = batch(
        qm,
        tmp_path,
        [
            {"name": "node001", "slots": 4},
            {"name": "node002"},
            {"name": "node003", "hostgroup": "@big", "queues": ["big.q"]},
            {"name": "node004", "hostgroup": "@big", "queues": ["big.q"]},
        ],
    )
    assert not any(o["failed"] for o in out.values()), out
    changing_calls = [c for c in qm.calls if c[1] not in ("-sq", "-sh", "-ss", "-sel", "-shgrpl", "-shgrp")]
    assert [c[1] for c in changing_calls].count("-Ahgrp") == 1 and qm.groups["@big"] == ["node003", "node004"]
    assert ["qconf", "-mattr", "queue", "slots", "[node001=4]", "all.q"] in changing_calls
    assert ["qconf", "-aattr", "queue", "slots", "[node002=2]", "all.q"] in changing_calls
    assert ["qconf", "-aattr", "queue", "slots", "[node003=2],[node004=2]", "big.q"] in changing_calls
    assert qm.queues["big.q"]["hostlist"] == ["@big"]
    assert qm.queues["all.q"]["slots"] == {"node001": 4, "node002": 2}


def test_a_batch_in_check_mode_changes_nothing_and_refuses_bad_input_node_by_node(tmp_path: Path) -> None:
    qm = Qmaster()
    out = batch(qm, tmp_path, [{"name": "node001"}, {"name": "node 2"}], apply=False)
    assert [c[1] for c in out["node001"]["commands"]] == ["-ah", "-as", "-Ae", "-aattr", "-aattr"]
    assert out["node 2"]["failed"] is True and "name must be one word" in str(out["node 2"]["msg"])
    assert qm.admin == ["master"] and not qm.execs and not (tmp_path / "scratch").exists()
    assert all(c[1] in ("-sq", "-sh", "-ss", "-sel", "-shgrpl", "-shgrp") for c in qm.calls)


def test_a_batch_taken_out_reads_the_qmaster_once_and_lists_the_hosts_once(tmp_path: Path) -> None:
    qm = Qmaster()
    names = [f"node{i:03d}" for i in range(1, 9)]
    batch(qm, tmp_path, [{"name": n} for n in [*names, "node100"]])
    qm.dead.add("node003")  # its execd does not answer: it is taken out all the same
    qm.calls.clear()
    out = M.deregister_batch(names, qm.run, queues=["all.q"], hostgroups=["@allhosts"])
    assert not any(o["failed"] for o in out.values()), out
    assert list(qm.execs) == ["node100"] and qm.admin == qm.submit == ["master", "node100"]
    assert qm.groups["@allhosts"] == ["node100"] and qm.queues["all.q"]["slots"] == {"node100": 2}
    # reads: -sel, -sql, -shgrpl, the group and the admin and submit hosts before and after;
    # -dattr, -dh and -ds once; a node: -ke, its queue settings and slots purged, -de
    assert len(qm.calls) == 12 + 4 * 8, [c[1] for c in qm.calls]
    assert ["qconf", "-dh", ",".join(names)] in out["node005"]["commands"]
    assert [c[1] for c in out["node003"]["commands"]] == ["-purge", "-dattr", "-de", "-dh", "-ds"]
    qm.calls.clear()
    again = M.deregister_batch(names, qm.run)
    assert not any(o["changed"] or o["failed"] for o in again.values())


def test_a_batch_taken_out_in_check_mode_changes_nothing_and_a_bad_name_fails_alone(tmp_path: Path) -> None:
    qm = Qmaster()
    batch(qm, tmp_path, [{"name": "node001"}, {"name": "node002"}])
    out = M.deregister_batch(["node001", "node*", "node002"], qm.run, apply=False)
    assert out["node*"]["failed"] is True and "not a pattern" in str(out["node*"]["msg"])
    assert out["node001"]["changed"] is True and out["node002"]["failed"] is False
    assert list(qm.execs) == ["node001", "node002"] and qm.groups["@allhosts"] == ["node001", "node002"]


def test_a_batch_taken_out_with_the_module(tmp_path: Path) -> None:
    common = {"sge_root": "/opt/sge", "sge_cell": "c1", "tmpdir": str(tmp_path / "s")}
    _run_module(tmp_path, {"hosts": [{"name": "node004", "slots": 2}, {"name": "node005", "slots": 2}], **common})
    out = _run_module(tmp_path, {"names": ["node004", "node005"], "state": "absent", **common})
    assert out["changed"] is True and set(out["hosts"]) == {"node004", "node005"}, out
    assert _run_module(tmp_path, {"names": ["node004", "node005"], "state": "absent", **common})["changed"] is False
    wrong = _run_module(tmp_path, {"names": ["node004"], **common})
    assert wrong["failed"] is True and "names is for state=absent" in str(wrong["msg"])
