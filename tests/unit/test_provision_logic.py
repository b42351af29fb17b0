"""The provisioner's pure parts: inventory building, outcomes from events, env scrubbing, and
the process-tree killer (real processes). Real ansible-runner runs are in tests/provision/."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from elb.core.interfaces import NodeSpec, Outcome
from elb.provision import proctree
from elb.provision.ansible import reports_done, scrub_env
from elb.provision.inventory import Connection, InventoryError, build_inventory, check_extra_vars, hosts_of
from elb.provision.outcomes import RunEnd, result_message, summarize

# -- inventory --------------------------------------------------------------------------------


def test_inventory_groups_and_vars() -> None:
    inv = build_inventory(
        Connection(master="master", ssh_user="admin", ssh_private_key=Path("/etc/elb/id")),
        workers=[NodeSpec("node001", "10.0.0.1", 8)],
        new_nodes=[NodeSpec("node002", "10.0.0.2")],
    )
    assert hosts_of(inv, "master") == ["master"]
    assert hosts_of(inv, "workers") == ["node001"]
    assert hosts_of(inv, "new_nodes") == ["node002"]
    assert hosts_of(inv, "old_nodes") == []
    all_ = inv["all"]
    assert isinstance(all_, dict)
    assert all_["vars"]["ansible_user"] == "admin"
    assert all_["vars"]["ansible_ssh_private_key_file"] == "/etc/elb/id"
    children = all_["children"]
    assert children["workers"]["hosts"]["node001"] == {"ansible_host": "10.0.0.1", "elb_slots": 8}
    assert children["new_nodes"]["hosts"]["node002"] == {"ansible_host": "10.0.0.2"}
    assert children["master"]["hosts"]["master"]["ansible_connection"] == "local"


def test_inventory_master_over_ssh() -> None:
    inv = build_inventory(Connection(master="head", master_address="10.77.0.1"))
    master = inv["all"]["children"]["master"]["hosts"]["head"]  # type: ignore[index]
    assert master == {"ansible_host": "10.77.0.1"}


@pytest.mark.parametrize(
    "node",
    [
        NodeSpec("$(rm -rf /)", "10.0.0.1"),
        NodeSpec("node{{ 7*7 }}", "10.0.0.1"),
        NodeSpec("node 1", "10.0.0.1"),
        NodeSpec("-node1", "10.0.0.1"),
        NodeSpec("", "10.0.0.1"),
        NodeSpec("nöde1", "10.0.0.1"),
        NodeSpec("node1", "10.0.0.1 ; reboot"),
        NodeSpec("node1", "{{ lookup('pipe', 'id') }}"),
        NodeSpec("node1", "10.0.0.300"),
        NodeSpec("node1", "10.0.0.1", 0),
        NodeSpec("node1", "10.0.0.1", True),
    ],
)
def test_inventory_refuses_hostile_or_broken_nodes(node: NodeSpec) -> None:
    with pytest.raises(InventoryError):
        build_inventory(Connection(), new_nodes=[node])


def test_inventory_gives_a_node_its_groups_market() -> None:
    inv = build_inventory(
        Connection(),
        workers=[NodeSpec("node001", "10.0.0.1", 2, group="cheap", market="spot")],
        new_nodes=[NodeSpec("node002", "10.0.0.2", 2, group="steady", market="on-demand"), NodeSpec("n3", "10.0.0.3")],
    )
    children = inv["all"]["children"]  # type: ignore[index]
    assert children["workers"]["hosts"]["node001"]["elb_market"] == "spot"
    assert children["new_nodes"]["hosts"]["node002"]["elb_market"] == "on-demand"
    assert "elb_market" not in children["new_nodes"]["hosts"]["n3"]  # no group: add_node.yml takes on-demand


@pytest.mark.parametrize("market", ["Spot", "spot; id", "{{ 7*7 }}", ""])
def test_inventory_refuses_a_market_that_is_not_one(market: str) -> None:
    with pytest.raises(InventoryError, match="market"):
        build_inventory(Connection(), new_nodes=[NodeSpec("node001", "10.0.0.1", market=market)])


def test_inventory_refuses_duplicates_and_the_master() -> None:
    n = NodeSpec("node001", "10.0.0.1")
    with pytest.raises(InventoryError, match="given twice"):
        build_inventory(Connection(), new_nodes=[n, n])
    with pytest.raises(InventoryError, match="given twice"):
        build_inventory(Connection(), workers=[n], old_nodes=[n])
    with pytest.raises(InventoryError, match="given twice"):
        build_inventory(Connection(), new_nodes=[NodeSpec("master", "10.0.0.9")])
    with pytest.raises(InventoryError):
        build_inventory(Connection(ssh_user="root; id"))


def test_group_vars_go_to_all_but_never_replace_connection_settings() -> None:
    inv = build_inventory(Connection(ssh_user="root"), group_vars={"sge_exec_queue": "big.q", "ansible_user": "x"})
    all_vars = inv["all"]["vars"]  # type: ignore[index]
    assert all_vars["sge_exec_queue"] == "big.q"
    assert all_vars["ansible_user"] == "root"
    with pytest.raises(InventoryError):
        build_inventory(Connection(), group_vars={"bad name": 1})


def test_extra_vars_names() -> None:
    assert check_extra_vars({"sge_exec_slots": 4, "_x": [1]}) == {"sge_exec_slots": 4, "_x": [1]}
    for bad in ("a-b", 'a"b', "1a", "a b", ""):
        with pytest.raises(InventoryError):
            check_extra_vars({bad: 1})


# -- outcomes ----------------------------------------------------------------------------------


def ev(kind: str, host: str | None = None, task: str = "t", **data: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"task": task, **data}
    if host is not None:
        d["host"] = host
    return {"event": kind, "event_data": d}


def recap(**counts: Mapping[str, object]) -> dict[str, Any]:
    artifact = counts.pop("artifact_data", {})
    return {"event": "playbook_on_stats", "event_data": {**counts, "artifact_data": artifact}}


def test_outcomes_from_recap_and_events() -> None:
    events = [
        ev("runner_on_start", "a", "Install"),
        ev("runner_on_ok", "a", "Install", res={"changed": True}),
        ev("runner_on_failed", "b", "Install", res={"msg": "no package foo"}),
        ev("runner_on_failed", "c", "Probe", res={"msg": "ignored"}, ignore_errors=True),
        ev("runner_on_ok", "c", "Install"),
        ev("runner_on_unreachable", "d", "Install", res={"msg": "Connection timed out"}),
        recap(
            processed={"a": 1, "b": 1, "c": 1, "d": 1},
            failures={"b": 1},
            dark={"d": 1},
            ok={"a": 1, "c": 1},
        ),
    ]
    s = summarize(events, ["a", "b", "c", "d", "e"])
    assert s.recap
    assert s.results["a"].outcome is Outcome.OK
    assert (s.results["b"].outcome, s.results["b"].task, s.results["b"].message) == (
        Outcome.FAILED,
        "Install",
        "no package foo",
    )
    assert s.results["c"].outcome is Outcome.OK  # its failure was ignored
    assert s.results["d"].outcome is Outcome.UNREACHABLE
    assert s.results["d"].message == "Connection timed out"
    assert s.results["e"].outcome is Outcome.FAILED  # no task ran on it
    assert "no task" in (s.results["e"].message or "")


def test_unreachable_but_ignored_is_not_unreachable() -> None:
    # ignore_unreachable: the event arrives, the recap counts no 'dark' for the host.
    events = [
        ev("runner_on_unreachable", "a", "Remove hosts line", res={"msg": "gone"}),
        ev("runner_on_ok", "a", "Deregister"),
        recap(processed={"a": 1}, ok={"a": 2}, ignored={"a": 1}),
    ]
    assert summarize(events, ["a"]).results["a"].outcome is Outcome.OK


def test_rescued_failure_is_ok_and_first_failure_is_reported() -> None:
    events = [
        ev("runner_on_failed", "a", "Try", res={"msg": "first"}),
        ev("runner_on_ok", "a", "Rescue"),
        recap(processed={"a": 1}, rescued={"a": 1}),
    ]
    assert summarize(events, ["a"]).results["a"].ok
    events = [
        ev("runner_on_failed", "a", "Register exec host", role="sge_exec", res={"msg": "denied"}),
        ev("runner_on_failed", "a", "Give up", res={"msg": "cleaned up after the failure"}),
        recap(processed={"a": 1}, failures={"a": 1}),
    ]
    r = summarize(events, ["a"]).results["a"]
    assert r.task == "sge_exec : Register exec host"
    assert r.message == "denied (the run stopped at 'Give up': cleaned up after the failure)"


def test_busy_from_artifact_data() -> None:
    events = [
        ev("runner_on_ok", "a"),
        ev("runner_on_ok", "b"),
        ev("runner_on_failed", "c", res={"msg": "x"}),
        recap(processed={"a": 1, "b": 1, "c": 1}, failures={"c": 1}, artifact_data={"elb_busy": ["a", "c"]}),
    ]
    s = summarize(events, ["a", "b", "c"])
    assert s.busy == frozenset({"a", "c"})
    assert s.results["a"].outcome is Outcome.BUSY
    assert s.results["b"].outcome is Outcome.OK
    assert s.results["c"].outcome is Outcome.FAILED and "also reported busy" in (s.results["c"].message or "")
    # one name instead of a list
    one = summarize([ev("runner_on_ok", "a"), recap(processed={"a": 1}, artifact_data={"elb_busy": "a"})], ["a"])
    assert one.results["a"].outcome is Outcome.BUSY


@pytest.mark.parametrize(
    ("end", "word"),
    [(RunEnd.TIMEOUT, "timed out"), (RunEnd.CANCELLED, "cancelled"), (RunEnd.FINISHED, "exit code 254")],
)
def test_no_recap_means_failed(end: RunEnd, word: str) -> None:
    events = [ev("runner_on_start", "a", "Wait"), ev("runner_on_ok", "a", "Before")]
    s = summarize(events, ["a", "b"], end=end, rc=254, detail="artifacts in /x")
    assert not s.recap
    for host in ("a", "b"):
        r = s.results[host]
        assert r.outcome is Outcome.FAILED
        assert word in (r.message or "") and "artifacts in /x" in (r.message or "")
    assert s.results["a"].task == "Before"
    assert "before any task" in (s.results["b"].message or "")


def test_a_recap_after_a_cancel_is_not_trusted() -> None:
    events = [ev("runner_on_ok", "a"), recap(processed={"a": 1}, ok={"a": 1})]
    assert summarize(events, ["a"], end=RunEnd.CANCELLED).results["a"].outcome is Outcome.FAILED


def test_aborted_run_fails_hosts_that_did_not_finish() -> None:
    events = [
        ev("runner_on_failed", "a", "Prepare", res={"msg": "boom"}),
        {"event": "playbook_on_no_hosts_remaining", "event_data": {"play": "Prepare the master"}},
        ev("runner_on_ok", "b", "Early"),
        recap(processed={"a": 1, "b": 1}, failures={"a": 1}, ok={"b": 1}),
    ]
    s = summarize(events, ["a", "b"])
    assert s.results["a"].message == "boom"
    assert s.results["b"].outcome is Outcome.FAILED
    assert "Prepare the master" in (s.results["b"].message or "")


def test_ansible_errors_reach_the_message() -> None:
    events = [{"event": "verbose", "stdout": "[ERROR]: couldn't resolve module/action 'no.such'"}]
    r = summarize(events, ["a"], rc=4).results["a"]
    assert "couldn't resolve module/action" in (r.message or "")


def test_result_message_picks_useful_words() -> None:
    assert result_message({"msg": "non-zero return code", "stderr": "qconf: denied"}) == (
        "non-zero return code - qconf: denied"
    )
    assert result_message({"rc": 3}) == "exit code 3"
    looped = {"results": [{"item": "a", "failed": False}, {"item": "b", "failed": True, "msg": "bad b"}]}
    assert result_message(looped) == "item b: bad b"
    assert result_message({"msg": "x " * 1000}).startswith("x x")
    assert result_message(None) == ""


def test_long_messages_are_clipped_to_one_line() -> None:
    events = [
        ev("runner_on_failed", "a", res={"msg": "line\n" * 500}),
        recap(processed={"a": 1}, failures={"a": 1}),
    ]
    msg = summarize(events, ["a"]).results["a"].message or ""
    assert "\n" not in msg and len(msg) <= 600


# -- environment -------------------------------------------------------------------------------


def test_scrub_env_keeps_what_ansible_needs_and_drops_secrets() -> None:
    env = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "LC_ALL": "C.UTF-8",
        "ANSIBLE_STDOUT_CALLBACK": "awx_display",
        "ANSIBLE_PRIVATE_KEY_FILE": "/etc/elb/id",
        "ANSIBLE_VAULT_PASSWORD_FILE": "/etc/elb/vault",
        "ANSIBLE_BECOME_PASS": "hunter2",
        "ANSIBLE_NET_AUTH_KEY": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_ACCESS_KEY_ID": "a",
        "AWS_SESSION_TOKEN": "t",
        "GITHUB_TOKEN": "g",
        "SSH_AUTH_SOCK": "/tmp/agent",
        "RUNNER_OMIT_EVENTS": "False",
        "SGE_ROOT": "/var/lib/gridengine",
        "SGE_QMASTER_PORT": "6444",
    }
    assert scrub_env(env) == {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "LC_ALL": "C.UTF-8",
        "ANSIBLE_STDOUT_CALLBACK": "awx_display",
        "ANSIBLE_PRIVATE_KEY_FILE": "/etc/elb/id",
        "ANSIBLE_VAULT_PASSWORD_FILE": "/etc/elb/vault",
        "SSH_AUTH_SOCK": "/tmp/agent",
        "RUNNER_OMIT_EVENTS": "False",
        "SGE_ROOT": "/var/lib/gridengine",
        "SGE_QMASTER_PORT": "6444",
    }


# -- process tree (real processes) -------------------------------------------------------------

_TREE = """
import os, subprocess, sys, time
# a child in its own session (as ansible's workers), which starts a grandchild
subprocess.Popen([sys.executable, "-c", "import subprocess,time; subprocess.Popen(['sleep','300']); time.sleep(300)"],
                 start_new_session=True)
print("ready", flush=True)
time.sleep(300)
"""


def test_kill_tree_reaches_processes_in_other_sessions() -> None:
    root = subprocess.Popen([sys.executable, "-c", _TREE], stdout=subprocess.PIPE, text=True)
    try:
        assert root.stdout is not None and root.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while len(proctree.descendants(root.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        below = proctree.descendants(root.pid)
        assert len(below) == 2
        assert {os.getsid(p) for p in below} != {os.getsid(root.pid)}  # left the session
        assert proctree.find_child(lambda argv: "ready" in " ".join(argv)) == root.pid
        # Only killing the root's process group would leave them; kill_tree does not.
        assert proctree.kill_tree(root.pid) == 3
        root.wait(timeout=10)
        assert root.returncode == -signal.SIGKILL
        deadline = time.monotonic() + 10
        while any(proctree._stat(p) is not None and _state(p) != "Z" for p in below):
            assert time.monotonic() < deadline, "descendants still alive"
            time.sleep(0.05)
    finally:
        if root.poll() is None:
            proctree.kill_tree(root.pid)
            root.wait(timeout=10)


def _state(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return raw[raw.rfind(")") + 2 :].split()[0]


def test_exit_127_says_ansible_playbook_is_missing() -> None:
    r = summarize([], ["a"], rc=127).results["a"]
    assert r.outcome is Outcome.FAILED and "could not be started" in (r.message or "")


def test_slim_events_keep_what_summarize_reads() -> None:
    from elb.provision.ansible import slim_event

    big = {"stdout": "x" * 10_000, "invocation": {"module_args": {"content": "y" * 10_000}}}
    raw: list[dict[str, Any]] = [
        {"event": "verbose", "stdout": "PLAY [x] ****"},
        {"event": "verbose", "stdout": "[ERROR]: bad"},
        {"event": "runner_on_ok", "event_data": {"host": "a", "task": "T", "res": big, "uuid": "u"}},
        {"event": "runner_on_failed", "event_data": {"host": "b", "task": "T", "role": "r", "res": {"msg": "m"}}},
        {"event": "playbook_on_stats", "event_data": {"failures": {"b": 1}, "processed": {"a": 1, "b": 1}}},
        {"no": "event"},
    ]
    slim = [e for e in (slim_event(r) for r in raw) if e is not None]
    assert len(slim) == 4
    assert slim[0] == {"event": "verbose", "stdout": "[ERROR]: bad"}
    assert "res" not in slim[1]["event_data"]  # an OK result's payload is not kept
    s_full = summarize(raw, ["a", "b"])
    s_slim = summarize(slim, ["a", "b"])
    assert s_full.results == s_slim.results
    assert s_slim.results["b"].task == "r : T"


def test_a_playbook_that_reports_done_is_trusted_only_for_the_hosts_it_reports() -> None:
    # The host the play stopped working on without a failure (meta: end_host, a step that ended
    # it) is processed with no failure in the recap: only the missing report shows it.
    events = [
        ev("runner_on_ok", "a", "Deregister"),
        ev("runner_on_ok", "b", "Disable"),
        ev("runner_on_ok", "c", "Disable"),
        recap(
            processed={"a": 1, "b": 1, "c": 1},
            ok={"a": 2, "b": 1, "c": 1},
            artifact_data={"elb_done": ["a"], "elb_busy": ["c"]},
        ),
    ]
    s = summarize(events, ["a", "b", "c"], require_done=True)
    assert s.results["a"].outcome is Outcome.OK
    assert s.results["b"].outcome is Outcome.FAILED
    assert s.results["b"].task == "Disable"
    assert "before its last task" in (s.results["b"].message or "")
    assert s.results["c"].outcome is Outcome.BUSY  # reported busy and ended on purpose
    # A playbook that reports nothing of the kind is read as before.
    assert summarize(events, ["a", "b", "c"]).results["b"].outcome is Outcome.OK
    # No host reported at all: every host failed (the report itself never ran).
    none = summarize([*events[:-1], recap(processed={"a": 1}, ok={"a": 1})], ["a"], require_done=True)
    assert none.results["a"].outcome is Outcome.FAILED


def test_a_run_that_ended_badly_is_no_success_for_a_host_it_did_not_prove_done() -> None:
    # remove_node.yml on node007: deregistered, then the hosts lines step on a dead peer was
    # unreachable ("...ignoring"), and the play ended with rc 2 before its report: the recap
    # counts the host processed, no failure, no dark; nothing proves its part ended.
    events = [
        ev("runner_on_ok", "node007", "Deregister", role="sge_decommission"),
        ev("runner_on_unreachable", "node007", "Map the play's nodes on the other workers", res={"msg": "gone"}),
        recap(processed={"node007": 1}, ok={"node007": 3}, ignored={"node007": 1}),
    ]
    for require_done in (False, True):
        r = summarize(events, ["node007"], rc=2, require_done=require_done).results["node007"]
        assert r.outcome is Outcome.FAILED, require_done
        assert r.task == "Map the play's nodes on the other workers"
    assert "exit code 2" in (summarize(events, ["node007"], rc=2).results["node007"].message or "")
    # The same events with rc 0 (the run went on to its end) read OK, as before.
    assert summarize(events, ["node007"], rc=0).results["node007"].outcome is Outcome.OK
    # A host the playbook reported done is proven done even when another host made rc 2.
    done = [*events[:-1], recap(processed={"node007": 1}, ok={"node007": 4}, artifact_data={"elb_done": ["node007"]})]
    assert summarize(done, ["node007"], rc=2, require_done=True).results["node007"].outcome is Outcome.OK


@pytest.mark.parametrize(
    "playbook",
    [
        "add_node.yml",
        "remove_node.yml",
        "admit_nodes.yml",
        "slurm_add_node.yml",
        "slurm_remove_node.yml",
        "probe_jobs.yml",
        "slurm_admit_nodes.yml",
    ],
)
def test_elbs_add_and_remove_playbooks_end_by_reporting_each_node_done(playbook: str) -> None:
    path = Path(__file__).resolve().parents[2] / "playbooks" / playbook
    plays = yaml.safe_load(path.read_text())
    last = plays[-1]["tasks"][-1]
    assert last["ansible.builtin.set_stats"] == {
        "data": {"elb_done": ["{{ inventory_hostname }}"]},
        "aggregate": True,
    }
    assert "when" not in last
    assert reports_done(path)
