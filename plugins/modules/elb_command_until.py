#!/usr/bin/python
"""Run a command until it exits 0, within one module run: tries with a sleep between them.

Ansible's ``until:``/``retries:`` re-runs the whole module every try (a new AnsiballZ payload
and Python process on the host, and the controller's work for a task), about 0.3 s of CPU a try;
a node that waits minutes for its master at boot spends much of a core on waiting. Here a try
costs the command's own fork and exec, and the module sleeps between tries. The roles' waits
for a command (``mount PATH``, ``qconf -se NODE``) use it; a wait for a file's content is
``ansible.builtin.wait_for`` (``path``, ``search_regex``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: elb_command_until
short_description: Run a command until it exits 0, trying again within one module run
description:
  - Runs O(argv) (an argument list, never through a shell; no variable or C(~) expansion) until
    it exits 0, at most O(tries) times, sleeping O(delay) seconds between two tries.
  - One module run for the whole wait, where a task's C(until)/C(retries) runs the module again
    (a new Python process on the host, and the controller's work) every try. A try costs only the
    command's own fork and exec.
  - Fails when the last try fails, with O(msg), the command, the tries, the last exit status and
    the last stderr (stdout when stderr is empty).
  - In check mode a command that changes something (O(read_only=false)) is not run and the
    result is changed; a O(read_only=true) command runs as usual.
  - The task's C(environment) is the command's.
options:
  argv:
    description: The command and its arguments; the command is looked for in PATH and the sbin directories.
    type: list
    elements: str
    required: true
  tries:
    description: How many times the command is run at most (1 runs it once).
    type: int
    default: 1
  delay:
    description: Seconds between two tries.
    type: float
    default: 2
  read_only:
    description:
      - The command changes nothing on the host; the result is never changed and it runs in check
        mode too.
    type: bool
    default: false
  msg:
    description: What the failure says first (what was waited for).
    type: str
    default: ""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
author:
  - elb developers
"""

EXAMPLES = r"""
- name: Mount an export once the server exports it (up to 150 tries, 2 s apart)
  elb_command_until:
    argv: [mount, /home]
    tries: 150
    delay: 2

- name: Wait until the qmaster knows the node
  elb_command_until:
    argv: [qconf, -se, "{{ inventory_hostname }}"]
    tries: 60
    delay: 5
    read_only: true
    msg: "the qmaster does not know {{ inventory_hostname }} as an exec host"
  environment:
    SGE_ROOT: /var/lib/gridengine
"""

RETURN = r"""
rc:
  description: The last try's exit status (absent when check mode did not run the command).
  type: int
  returned: when run
stdout:
  description: The last try's standard output.
  type: str
  returned: when run
stderr:
  description: The last try's standard error.
  type: str
  returned: when run
tries:
  description: How many times the command ran.
  type: int
  returned: always
cmd:
  description: The command as run (the command's path first).
  type: list
  elements: str
  returned: always
"""

Run = Callable[[Sequence[str]], "tuple[int, str, str]"]


@dataclass(frozen=True)
class Outcome:
    """The last try: its exit status and output, and how many tries ran."""

    rc: int
    stdout: str
    stderr: str
    tries: int

    @property
    def ok(self) -> bool:
        return self.rc == 0


def check(tries: int, delay: float) -> None:
    """Raise ValueError for a bound that cannot be waited."""
    if tries < 1:
        raise ValueError(f"tries must be at least 1: {tries}")
    if delay < 0:
        raise ValueError(f"delay must not be negative: {delay}")


def until_ok(argv: Sequence[str], run: Run, *, tries: int, delay: float, sleep: Callable[[float], None]) -> Outcome:
    """Run ``argv`` until it exits 0 or ``tries`` ran, sleeping ``delay`` between two tries."""
    check(tries, delay)
    n = 0
    while True:
        n += 1
        rc, out, err = run(argv)
        if rc == 0 or n >= tries:
            return Outcome(rc, out, err, n)
        sleep(delay)


def failure(msg: str, argv: Sequence[str], outcome: Outcome, delay: float) -> str:
    """The failure message: what was waited for, the command, the bound and what it said last."""
    said = (outcome.stderr.strip() or outcome.stdout.strip()) or "(no output)"
    head = f"{msg}: " if msg else ""
    waited = f" over {(outcome.tries - 1) * delay:g} s" if outcome.tries > 1 else ""
    return (
        f"{head}{' '.join(argv)} failed {outcome.tries} time{'s' if outcome.tries != 1 else ''}{waited}; "
        f"the last exited {outcome.rc}: {said}"
    )


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "argv": {"type": "list", "elements": "str", "required": True},
            "tries": {"type": "int", "default": 1},
            "delay": {"type": "float", "default": 2},
            "read_only": {"type": "bool", "default": False},
            "msg": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p: dict[str, Any] = module.params
    argv: list[str] = p["argv"]
    try:
        if not argv or not argv[0]:
            raise ValueError("argv must name a command")
        check(p["tries"], p["delay"])
    except ValueError as err:
        module.fail_json(msg=str(err), changed=False)
    cmd = [module.get_bin_path(argv[0], required=True), *argv[1:]]
    changes = not p["read_only"]
    if module.check_mode and changes:
        module.exit_json(changed=True, tries=0, cmd=cmd, msg="not run in check mode")

    def run(args: Sequence[str]) -> tuple[int, str, str]:
        rc, out, err = module.run_command(list(args), expand_user_and_vars=False)
        return int(rc), str(out), str(err)

    outcome = until_ok(cmd, run, tries=p["tries"], delay=p["delay"], sleep=time.sleep)
    result: dict[str, Any] = {
        "rc": outcome.rc,
        "stdout": outcome.stdout,
        "stderr": outcome.stderr,
        "tries": outcome.tries,
        "cmd": cmd,
    }
    if not outcome.ok:
        module.fail_json(msg=failure(p["msg"], argv, outcome, p["delay"]), changed=False, **result)
    module.exit_json(changed=changes, **result)


if __name__ == "__main__":
    main()
