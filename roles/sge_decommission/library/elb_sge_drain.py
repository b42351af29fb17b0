#!/usr/bin/python
"""Drain nodes in SGE before they are removed: disable their queue instances, find the nodes a
job runs on, and enable those again, for a batch of nodes in a handful of commands."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: elb_sge_drain
short_description: Drain SGE exec hosts before their removal and say which ones are busy
description:
  - Runs on the SGE master (delegate the task to it) and calls C(qconf), C(qmod) and C(qhost)
    there with argument lists (no shell), each once for the whole of O(hosts).
  - Disables the queue instances of every node of O(hosts) that is an exec host
    (C(qmod -d) of C(*@NODE) for all of them), then lists the jobs on those nodes
    (C(qhost -j -h)): a node with a job (running, or dispatched meanwhile) is busy, and its queue
    instances are enabled again (C(qmod -e)). The others stay disabled, for their removal.
  - A node that is not an exec host has nothing to drain and is idle.
  - A failed C(qconf), C(qmod) or C(qhost) fails the run; the nodes then stay as the failed
    command left them (disabled ones take no new job).
  - In check mode nothing is disabled; the busy nodes are those with a job now.
options:
  hosts:
    description: The nodes' host names, as the qmaster knows them.
    type: list
    elements: str
    required: true
  sge_root:
    description: SGE_ROOT for the commands.
    type: path
    default: /var/lib/gridengine
  sge_cell:
    description: SGE_CELL for the commands.
    type: str
    default: default
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
author:
  - elb developers
"""

EXAMPLES = r"""
- name: Drain the play's nodes
  elb_sge_drain:
    hosts: "{{ ansible_play_hosts }}"
  delegate_to: master
  run_once: true
  register: drained
"""

RETURN = r"""
busy:
  description: The nodes a job runs on; their queue instances are enabled again.
  type: list
  elements: str
  returned: success
idle:
  description: The nodes with no job, drained (or never exec hosts).
  type: list
  elements: str
  returned: success
commands:
  description: The C(qmod) commands that changed a queue instance's state, in order.
  type: list
  elements: list
  returned: success
"""

Run = Callable[[Sequence[str]], "tuple[int, str, str]"]

# What qmod says of a queue instance it disabled or enabled, or that was so already, or of a
# pattern that matched none (a host that serves no queue any more).
QMOD_OK = ("changed state", "already in the specified state", "does not exist", "invalid queue")


class DrainError(Exception):
    """A command failed: the message says which and what it said."""


def check_host(name: str) -> None:
    """Raise ValueError for a name qmod or qhost would take wrongly (or as a pattern or list)."""
    if not name or name.startswith("@") or any(c.isspace() or c in ",*?[]@" for c in name):
        raise ValueError(f"hosts must be host names without whitespace, ',', '*', '?', '[', ']' or '@': {name!r}")


def _said(out: str, err: str) -> str:
    return f"{out}{err}".strip()


def busy_hosts(qhost_j: str, names: Sequence[str]) -> set[str]:
    """The ``names`` that ``qhost -j -h`` shows a job on. A host's line starts at the first
    column; its jobs follow it indented, the table's header (``job-ID``) only above the first
    host's that has any. Any indented line under a host but a rule of dashes counts as a job
    there: a line this does not know keeps the node in service."""
    busy: set[str] = set()
    host = None
    for line in qhost_j.splitlines():
        if line[:1].strip():
            host = line.split()[0]
        elif line.strip() and line.strip().strip("-") and host in names:
            busy.add(host)
    return busy


def drain(names: Sequence[str], run: Run, *, apply: bool = True) -> tuple[list[str], list[str], list[list[str]]]:
    """Drain ``names``: (busy, idle, the changing commands). Raises DrainError."""
    for name in names:
        check_host(name)
    names = list(dict.fromkeys(names))
    rc, out, err = run(["qconf", "-sel"])
    if rc != 0 and "defined" not in _said(out, err):  # "no execution host defined": none is
        raise DrainError(f"qconf -sel failed (exit {rc}): {_said(out, err)}")
    execs = set(out.split()) if rc == 0 else set()
    drained = [n for n in names if n in execs]
    if not drained:
        return [], names, []
    commands: list[list[str]] = []
    instances = ",".join(f"*@{n}" for n in drained)
    if apply:
        commands += qmod("-d", instances, run)
    rc, out, err = run(["qhost", "-j", "-h", ",".join(drained)])
    if rc != 0:
        raise DrainError(f"qhost -j -h failed (exit {rc}): {_said(out, err)}")
    busy = busy_hosts(out, drained)
    if busy and apply:
        commands += qmod("-e", ",".join(f"*@{n}" for n in drained if n in busy), run)
    return [n for n in names if n in busy], [n for n in names if n not in busy], commands


def qmod(option: str, instances: str, run: Run) -> list[list[str]]:
    """``qmod -d`` or ``-e`` of a list of queue instance patterns; the command when it changed one."""
    argv = ["qmod", option, instances]
    rc, out, err = run(argv)
    said = _said(out, err)
    lines = [line for line in said.splitlines() if line.strip()]
    if rc != 0 and not all(any(ok in line for ok in QMOD_OK) for line in lines):
        raise DrainError(f"{' '.join(argv)} failed (exit {rc}): {said}")
    return [argv] if "changed state" in said else []


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "hosts": {"type": "list", "elements": "str", "required": True},
            "sge_root": {"type": "path", "default": "/var/lib/gridengine"},
            "sge_cell": {"type": "str", "default": "default"},
        },
        supports_check_mode=True,
    )
    p: dict[str, Any] = module.params
    env = {"SGE_ROOT": p["sge_root"], "SGE_CELL": p["sge_cell"]}
    paths = {c: module.get_bin_path(c, required=True) for c in ("qconf", "qmod", "qhost")}

    def run(argv: Sequence[str]) -> tuple[int, str, str]:
        rc, out, err = module.run_command([paths[argv[0]], *argv[1:]], environ_update=env)
        return int(rc), str(out), str(err)

    try:
        busy, idle, commands = drain(p["hosts"], run, apply=not module.check_mode)
    except (ValueError, DrainError) as err:
        module.fail_json(msg=str(err), changed=False)
    module.exit_json(changed=bool(commands), busy=busy, idle=idle, commands=commands)


if __name__ == "__main__":
    main()
