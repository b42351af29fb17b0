#!/usr/bin/python
"""Register one node (or a batch of nodes) with the SGE qmaster in one module run (admin, submit
and exec host, host group member, the node's slots in each of its queues), or take one out of
every one of them."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: elb_sge_exec_host
short_description: Register a node with the SGE qmaster as an exec host, or take it out, in one run
description:
  - Runs on the SGE master (delegate the task to it) and calls C(qconf) there, one command at a
    time with an argument list (no shell). Reads what the qmaster knows first and changes only
    what differs, so a second run changes nothing.
  - Makes O(name) an admin host and a submit host. The qmaster caches a name that failed to
    resolve for a while, so C(qconf -ah) is tried again O(resolve_retries) times, O(resolve_delay)
    seconds apart, until it adds the host.
  - Writes the exec host definition (its slots first, then O(complex_values)) to
    O(tmpdir)/exechost-NAME and adds it with C(qconf -Ae); an exec host whose definition file
    changed since the last run is modified with C(qconf -Me).
  - Puts the node in O(hostgroup), creating the group with the node in it when it does not exist
    (another node's run making it at the same time is taken as made), adds the host group to the
    hostlist of each of O(queues) that lacks it, and sets the node's slots in each of them.
  - Every queue must exist; a missing one fails the run before anything is changed.
  - "O(state=absent): shuts the node's execd down (C(qconf -ke), whose failure on a dead node is
    ignored) and purges its settings of every queue when it is an exec host, takes it out of every
    host group that names it, purges its slots of every queue, then removes it as exec, admin and
    submit host. It does not drain the node: draining and the check that no job runs there come
    first (the role C(sge_decommission) does both). In check mode the purges are listed as they
    would run, whether or not they find something."
  - One module run per node costs Ansible's controller one module run, where a task per C(qconf)
    command would cost about twelve.
  - O(hosts) registers a batch of nodes in one run: what the qmaster knows is read once for the
    batch, and each step qconf takes a list for runs once for the whole batch (admin and submit
    hosts, a host group's new members, a queue's new or changed slots); the exec host
    definitions are one C(qconf -Ae) or C(qconf -Me) per node. A node a list step did not take
    (a name the qmaster cannot resolve yet, a change made meanwhile) is tried again alone, as a
    run with O(name) would. A node that fails does not stop the others, and the run itself does
    not fail: each node's outcome is in RV(hosts), for the play to fail that node.
  - O(names) with O(state=absent) takes a batch of nodes out in one run, the qmaster read once:
    each node's execd, queue settings, slots and exec host as with O(name), each host group's
    members and the admin and submit hosts in one command each for the batch.
options:
  name:
    description: The node's host name, as the qmaster resolves it. One of O(name), O(hosts) and O(names) is required.
    type: str
  hosts:
    description:
      - A batch of nodes to register (O(state=present)), each with C(name) and C(slots) and, if
        not the options' own, C(complex_values), C(hostgroup) and C(queues).
    type: list
    elements: dict
  names:
    description: A batch of nodes to take out of SGE (O(state=absent)), by host name.
    type: list
    elements: str
  state:
    description: Whether the node is registered (present) or taken out of SGE (absent).
    type: str
    choices: [present, absent]
    default: present
  slots:
    description:
      - The node's slots (its exec host's C(slots) complex value and its slots in each queue).
      - Required when O(state=present).
    type: int
  complex_values:
    description: Complex values of the exec host besides its slots, by complex name.
    type: dict
    default: {}
  hostgroup:
    description:
      - The host group the node joins (a name starting with C(@)).
      - With O(state=absent), it and every host group the qmaster lists are cleaned.
    type: str
    default: "@allhosts"
  queues:
    description:
      - The cluster queues the node serves.
      - With O(state=absent), these and every queue the qmaster lists are cleaned.
    type: list
    elements: str
    default: [all.q]
  sge_root:
    description: SGE_ROOT for C(qconf).
    type: path
    default: /var/lib/gridengine
  sge_cell:
    description: SGE_CELL for C(qconf).
    type: str
    default: default
  tmpdir:
    description: Directory on the master for the C(qconf) input files; made (mode 0700) if missing.
    type: path
    default: /var/tmp/elb
  resolve_retries:
    description: How many more times C(qconf -ah) is tried while the qmaster cannot resolve the name.
    type: int
    default: 24
  resolve_delay:
    description: Seconds between two tries of C(qconf -ah).
    type: int
    default: 5
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
author:
  - elb developers
"""

EXAMPLES = r"""
- name: Register the node with the master
  elb_sge_exec_host:
    name: "{{ inventory_hostname }}"
    slots: 4
    complex_values: {bigmem: "1"}
    hostgroup: "@bigmem"
    queues: [all.q, big.q]
  delegate_to: master

- name: Take the node out of SGE (drained and idle first)
  elb_sge_exec_host:
    name: "{{ inventory_hostname }}"
    state: absent
  delegate_to: master
"""

RETURN = r"""
commands:
  description: The C(qconf) commands that changed the qmaster's configuration, in order.
  type: list
  elements: list
  returned: always
  sample: [["qconf", "-ah", "node004"], ["qconf", "-as", "node004"]]
hosts:
  description:
    - With O(hosts) or O(names), each node's outcome by name, with C(changed), C(failed), C(msg) (why it
      failed) and C(commands) (the changing commands that covered it, a list step's for every
      node of it).
  type: dict
  returned: with O(hosts) or O(names)
"""

# A node's exec host definition; the fields besides hostname and complex_values are SGE's defaults.
EXECHOST = """\
hostname              {name}
load_scaling          NONE
complex_values        {complex_values}
user_lists            NONE
xuser_lists           NONE
projects              NONE
xprojects             NONE
usage_scaling         NONE
report_variables      NONE
"""
HOSTGROUP = "group_name {group}\nhostlist {name}\n"
# qconf's answers while it cannot reach the qmaster (restarting, or busy): a command, read or
# change, that meets one is run again, QMASTER_TRIES times in all, QMASTER_WAIT seconds apart (a
# restart takes seconds).
# The same words as elb's own reads take for transient (elb.schedulers.sge.errors; a module runs
# on the master alone, so it cannot import them); "access denied" is an answer, not among them.
TRANSIENT = ("unable to contact qmaster", "commlib error", "can't find connection", "failed receiving gdi request")
QMASTER_TRIES = 6
QMASTER_WAIT = 5.0

Run = Callable[[Sequence[str]], "tuple[int, str, str]"]


class Files(Protocol):
    """The scratch directory on the master that holds qconf's input files."""

    def write(self, name: str, text: str) -> bool:
        """Write file ``name``; whether its text changed."""

    def path(self, name: str) -> str: ...


class RegisterError(Exception):
    """A qconf command failed or a queue is missing: the message says which and what qconf said."""


@dataclass(frozen=True)
class Want:
    """What the node should be on the qmaster."""

    name: str
    slots: int
    complex_values: Mapping[str, str] = field(default_factory=dict)
    hostgroup: str = "@allhosts"
    queues: Sequence[str] = ("all.q",)


def check_word(what: str, word: str) -> None:
    """Raise ValueError for a queue, host group or host name qconf would not take as one word."""
    if not word or any(c.isspace() or c in ",[]=@" for c in word.removeprefix("@")):
        raise ValueError(f"{what} must be one word without whitespace, ',', '[', ']', '=' or '@': {word!r}")


def check_name(name: str) -> None:
    """Raise ValueError for a host name qconf would take wrongly (or as a pattern)."""
    check_word("name", name)
    if name.startswith("@") or any(c in "*?" for c in name):
        raise ValueError(f"name must be a host name, not a pattern or host group: {name!r}")


def check_want(want: Want) -> None:
    """Raise ValueError, with a message for the play, for input qconf would take wrongly."""
    check_name(want.name)
    for what, word in (("hostgroup", want.hostgroup), *(("queue", q) for q in want.queues)):
        check_word(what, word)
    if not want.hostgroup.startswith("@"):
        raise ValueError(f"hostgroup must start with '@': {want.hostgroup!r}")
    if want.slots < 1:
        raise ValueError(f"slots must be at least 1, not {want.slots}")
    if not want.queues:
        raise ValueError("queues must name at least one queue")
    for key, value in want.complex_values.items():
        if not key or not str(value) or any(c.isspace() or c in ",=" for c in f"{key}{value}"):
            raise ValueError(f"complex value {key}={value} must be two words without whitespace, ',' or '='")


def exechost_text(want: Want) -> str:
    values = [("slots", str(want.slots)), *sorted((k, str(v)) for k, v in want.complex_values.items())]
    return EXECHOST.format(name=want.name, complex_values=",".join(f"{k}={v}" for k, v in values))


def _said(out: str, err: str) -> str:
    return f"{out}{err}".strip()


def _made(said: str, ok: Sequence[str]) -> bool:
    """Whether qconf's output says it made the change: it holds a word of ``ok``, and not "No
    modification" (qconf prints that, then its usual "modified" line, exit 0, when a member it is
    asked to add is there already: it adds none of the list)."""
    return "No modification" not in said and any(word in said for word in ok)


class Registrar:
    """The qconf commands of one registration; ``run`` runs one argument list on the master.
    In check mode (``apply`` false) only the reads run and each change is recorded as made."""

    def __init__(self, run: Run, *, apply: bool, sleep: Callable[[float], None] = time.sleep) -> None:
        self._run = run
        self.apply = apply
        self._sleep = sleep
        self.commands: list[list[str]] = []

    def _qconf(self, argv: Sequence[str]) -> tuple[int, str, str]:
        """Run one qconf command; one that could not reach the qmaster (``TRANSIENT``) is run
        again, QMASTER_TRIES times in all. A change is safe to run again: qconf's answer to one
        the qmaster made already, its reply lost, is that it is there ("already exists",
        "No modification"), which the callers take as done, not failed."""
        rc, out, err = self._run(argv)
        tries = 1
        while rc != 0 and tries < QMASTER_TRIES and any(word in _said(out, err) for word in TRANSIENT):
            self._sleep(QMASTER_WAIT)
            rc, out, err = self._run(argv)
            tries += 1
        return rc, out, err

    def read(self, *args: str) -> tuple[int, str]:
        """A read's exit code and its output (what qconf said, when it failed)."""
        rc, out, err = self._qconf(["qconf", *args])
        return rc, out if rc == 0 else _said(out, err)

    def listed(self, option: str) -> list[str]:
        """A host list (``-sh``, ``-ss``, ``-sel``, ``-shgrpl``); qconf exits 1 with "no ...
        defined" when it is empty."""
        rc, out = self.read(option)
        if rc == 0:
            return out.split()
        if "defined" in out:
            return []
        raise RegisterError(f"qconf {option} failed: {out}")

    def change(self, args: Sequence[str], ok: Sequence[str], *, also: Sequence[str] = ()) -> bool:
        """Run a changing command. True when it changed something (its output holds a word of
        ``ok``); False when it says a word of ``also`` (the change is there already)."""
        argv = ["qconf", *args]
        if not self.apply:
            self.commands.append(argv)
            return True
        rc, out, err = self._qconf(argv)
        said = _said(out, err)
        if rc == 0 and _made(said, ok):
            self.commands.append(argv)
            return True
        if any(word in said for word in also):
            return False
        raise RegisterError(f"{' '.join(argv)} failed (exit {rc}): {said}")

    def attempt(self, args: Sequence[str], ok: Sequence[str]) -> None:
        """Run a changing command whose failure is no error (nothing to purge, a dead node's
        daemon); it counts as a change when its output holds a word of ``ok``."""
        argv = ["qconf", *args]
        if not self.apply:
            self.commands.append(argv)
            return
        rc, out, err = self._qconf(argv)
        if rc == 0 and _made(_said(out, err), ok):
            self.commands.append(argv)

    def bulk(self, args: Sequence[str], ok: Sequence[str]) -> str | None:
        """Run a changing command over a list of nodes and return what qconf said (None in check
        mode, where it is recorded as made). It counts as a change when its output holds a word
        of ``ok``; a node it did not take is for the caller to find (in the output or by reading
        again) and to try alone."""
        argv = ["qconf", *args]
        if not self.apply:
            self.commands.append(argv)
            return None
        _, out, err = self._qconf(argv)  # a list command exits 1 when one of its nodes failed
        said = _said(out, err)
        if _made(said, ok):
            self.commands.append(argv)
        return said

    def add_admin_host(self, name: str, retries: int, delay: float) -> None:
        """``qconf -ah``, tried again while the qmaster cannot resolve the name."""
        argv = ["qconf", "-ah", name]
        if not self.apply:
            self.commands.append(argv)
            return
        for attempt in range(retries + 1):
            rc, out, err = self._run(argv)
            said = _said(out, err)
            if rc == 0 and "added" in said:
                self.commands.append(argv)
                return
            if "already exists" in said:
                return
            if attempt < retries:
                self._sleep(delay)
        raise RegisterError(f"qconf -ah {name} failed {retries + 1} times, last (exit {rc}): {said}")


def register(
    want: Want,
    run: Run,
    *,
    files: Files,
    retries: int = 24,
    delay: float = 5.0,
    apply: bool = True,
    sleep: Callable[[float], None] = time.sleep,
) -> list[list[str]]:
    """Bring the qmaster's view of ``want.name`` to ``want`` (a batch of one, ``register_batch``);
    returns the changing commands run (in check mode, those that would run). Raises ValueError for
    input qconf would take wrongly, RegisterError when the node could not be registered."""
    check_want(want)
    outcome = register_batch([want], run, files=files, retries=retries, delay=delay, apply=apply, sleep=sleep)
    return _one(outcome[want.name])


def deregister(
    name: str,
    run: Run,
    *,
    queues: Sequence[str] = (),
    hostgroups: Sequence[str] = (),
    apply: bool = True,
) -> list[list[str]]:
    """Take ``name`` out of SGE (a batch of one, ``deregister_batch``): its execd, queue settings,
    host groups, exec, admin and submit host; returns the changing commands run. ``queues`` and
    ``hostgroups`` are cleaned besides every one the qmaster lists. The node must be drained and
    idle already."""
    check_name(name)
    return _one(deregister_batch([name], run, queues=queues, hostgroups=hostgroups, apply=apply)[name])


def _one(outcome: Mapping[str, Any]) -> list[list[str]]:
    """A batch of one node's commands; RegisterError with why when the node failed."""
    if outcome["failed"]:
        raise RegisterError(outcome["msg"])
    commands: list[list[str]] = outcome["commands"]
    return commands


def _hostgroup_members(reg: Registrar, group: str) -> list[str]:
    rc, text = reg.read("-shgrp", group)
    if rc != 0:
        raise RegisterError(f"qconf -shgrp {group} failed: {text}")
    # whitespace-separated words (a wrapped line's backslash is a word of its own)
    return text.split()


class ScratchFiles:
    """qconf's input files in one directory (made mode 0700 if missing). In check mode nothing is
    written, and a file counts as changed when its text differs from what is there."""

    def __init__(self, directory: str, *, check: bool) -> None:
        self.directory = directory
        self._check = check

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def write(self, name: str, text: str) -> bool:
        path = self.path(name)
        try:
            with open(path, encoding="utf-8") as f:
                if f.read() == text:
                    return False
        except FileNotFoundError:
            pass
        if self._check:
            return True
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        return True


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str"},
            "hosts": {"type": "list", "elements": "dict"},
            "names": {"type": "list", "elements": "str"},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "slots": {"type": "int"},
            "complex_values": {"type": "dict", "default": {}},
            "hostgroup": {"type": "str", "default": "@allhosts"},
            "queues": {"type": "list", "elements": "str", "default": ["all.q"]},
            "sge_root": {"type": "path", "default": "/var/lib/gridengine"},
            "sge_cell": {"type": "str", "default": "default"},
            "tmpdir": {"type": "path", "default": "/var/tmp/elb"},  # noqa: S108  (the master's scratch directory)
            "resolve_retries": {"type": "int", "default": 24},
            "resolve_delay": {"type": "int", "default": 5},
        },
        required_one_of=[("name", "hosts", "names")],
        mutually_exclusive=[("name", "hosts", "names"), ("slots", "hosts"), ("slots", "names")],
        supports_check_mode=True,
    )
    p: dict[str, Any] = module.params
    qconf = module.get_bin_path("qconf", required=True)
    env = {"SGE_ROOT": p["sge_root"], "SGE_CELL": p["sge_cell"]}

    def run(argv: Sequence[str]) -> tuple[int, str, str]:
        rc, out, err = module.run_command([qconf, *argv[1:]], environ_update=env)
        return int(rc), str(out), str(err)

    if p["names"] is not None:
        if p["state"] != "absent":
            module.fail_json(msg="names is for state=absent; hosts registers a batch", changed=False)
        outcomes = deregister_batch(
            p["names"], run, queues=p["queues"], hostgroups=[p["hostgroup"]], apply=not module.check_mode
        )
        module.exit_json(changed=any(o["changed"] for o in outcomes.values()), hosts=outcomes)
    if p["state"] == "absent":
        try:
            commands = deregister(
                p["name"], run, queues=p["queues"], hostgroups=[p["hostgroup"]], apply=not module.check_mode
            )
        except (ValueError, RegisterError) as err:
            module.fail_json(msg=str(err), changed=False)
        module.exit_json(changed=bool(commands), commands=commands)
    if p["hosts"] is None and p["slots"] is None:
        module.fail_json(msg="slots is required with state=present", changed=False)

    files = ScratchFiles(p["tmpdir"], check=module.check_mode)
    retries, delay = max(0, p["resolve_retries"]), max(0, p["resolve_delay"])
    if p["hosts"] is not None:
        wants = [want_of(h, p) for h in p["hosts"]]
        outcomes = register_batch(wants, run, files=files, retries=retries, delay=delay, apply=not module.check_mode)
        module.exit_json(changed=any(o["changed"] for o in outcomes.values()), hosts=outcomes)
    try:
        want = want_of({"name": p["name"], "slots": p["slots"]}, p)
        commands = register(want, run, files=files, retries=retries, delay=delay, apply=not module.check_mode)
    except (ValueError, RegisterError, OSError) as err:
        module.fail_json(msg=str(err), changed=False)
    module.exit_json(changed=bool(commands), commands=commands)


def want_of(host: Mapping[str, Any], defaults: Mapping[str, Any]) -> Want:
    """A node's registration from its entry of O(hosts) (or O(name) and O(slots)), the options
    standing in for what it does not say."""
    slots = host.get("slots")
    return Want(
        name=str(host.get("name") or ""),
        slots=int(slots) if isinstance(slots, int | str) and str(slots).isdigit() else 0,
        complex_values={str(k): str(v) for k, v in (host.get("complex_values") or defaults["complex_values"]).items()},
        hostgroup=str(host.get("hostgroup") or defaults["hostgroup"]),
        queues=[str(q) for q in (host.get("queues") or defaults["queues"])],
    )


def _took(said: str | None, name: str, done: str, exists: str) -> bool:
    """Whether a list command's output says it took ``name``: a line ``NAME <done>`` or one
    naming ``"NAME" <exists>`` (qconf prints one line per host of the list). In check mode
    (``said`` None) every node counts as taken."""
    if said is None:
        return True
    for line in said.splitlines():
        words = line.split()
        if (words[:1] == [name] and done in line) or (f'"{name}" {exists}' in line):
            return True
    return False


class Outcomes:
    """Each node's changing commands in a run over a batch of nodes, and why a node failed: a
    list command's record goes to every node of it, a node's own step to that node alone."""

    def __init__(self, names: Sequence[str], reg: Registrar) -> None:
        self.reg = reg
        self.failed: dict[str, str] = {}
        self.commands: dict[str, list[list[str]]] = {name: [] for name in names}

    @contextlib.contextmanager
    def covering(self, names: Sequence[str]) -> Iterator[None]:
        """The changing commands run inside go to each of ``names`` (also when one raises)."""
        before = len(self.reg.commands)
        try:
            yield
        finally:
            for name in names:
                self.commands[name].extend(self.reg.commands[before:])

    def alone(self, name: str, step: Callable[[], object]) -> None:
        """Run one node's step on its own; its commands go to the node, a failure fails it alone."""
        try:
            with self.covering([name]):
                step()
        except (RegisterError, OSError) as err:
            self.failed[name] = str(err)

    def listed(self, args: Sequence[str], ok: Sequence[str], names: Sequence[str]) -> str | None:
        """A list command for ``names``; its record goes to each of them."""
        with self.covering(names):
            return self.reg.bulk(args, ok)

    def fail_all(self, names: Sequence[str], msg: str) -> None:
        self.failed.update(dict.fromkeys(names, msg))

    def result(self) -> dict[str, dict[str, Any]]:
        """Each node's outcome by name: changed, failed, msg, commands."""
        return {
            name: {
                "changed": bool(commands),
                "failed": name in self.failed,
                "msg": self.failed.get(name, ""),
                "commands": commands,
            }
            for name, commands in self.commands.items()
        }


class Batch(Outcomes):
    """The registration of a batch of nodes over one read of what the qmaster knows (see
    ``register_batch``)."""

    def __init__(self, wants: Sequence[Want], reg: Registrar, files: Files, retries: int, delay: float) -> None:
        super().__init__([w.name for w in wants], reg)
        self.files = files
        self.retries = retries
        self.delay = delay
        self.wants: list[Want] = []
        for want in wants:
            try:
                check_want(want)
            except ValueError as err:
                self.failed[want.name] = str(err)
            else:
                self.wants.append(want)

    def live(self) -> list[Want]:
        """The nodes no step failed yet."""
        return [w for w in self.wants if w.name not in self.failed]

    def hosts(self, option: str, known: Sequence[str], done: str, exists: str) -> None:
        """Admin (``-ah``) or submit (``-as``) hosts: the nodes not yet ``known`` in one command,
        then each node it did not take alone (``-ah`` tried again while the name does not resolve)."""
        missing = [w.name for w in self.live() if w.name not in known]
        if not missing:
            return
        said = self.listed([option, ",".join(missing)], ["added"], missing)
        for name in missing:
            if _took(said, name, done, exists):
                continue
            if option == "-ah":
                self.alone(name, lambda n=name: self.reg.add_admin_host(n, self.retries, self.delay))
            else:
                self.alone(name, lambda n=name: self.reg.change([option, n], ["added"], also=["already exists"]))

    def exec_hosts(self, execs: Sequence[str]) -> None:
        """Each node's exec host definition, added or modified (one command a node)."""
        for want in self.live():

            def define(want: Want = want) -> None:
                exechost = f"exechost-{want.name}"
                defined = self.files.write(exechost, exechost_text(want))
                if want.name not in execs:
                    self.reg.change(["-Ae", self.files.path(exechost)], ["added"], also=["already exists"])
                elif defined:
                    self.reg.change(["-Me", self.files.path(exechost)], ["modified"])

            self.alone(want.name, define)

    def hostgroup(self, group: str, exists: bool) -> None:
        """The nodes of ``group`` made its members: the group made with them, or the missing ones
        added in one command; then, read again, each one still missing added alone."""
        names = [w.name for w in self.live() if w.hostgroup == group]
        if not names:
            return
        members: list[str] = _hostgroup_members(self.reg, group) if exists else []
        missing = [n for n in names if n not in members]
        if not missing:
            return
        if not exists:
            # one file a batch, named after its first node: two batches may make the group at once
            path = f"hostgroup-{min(missing)}"
            self.files.write(path, HOSTGROUP.format(group=group, name=" ".join(missing)))
            # "already exists": another run made the group meanwhile; the nodes then join it
            with self.covering(missing):
                made = self.reg.change(["-Ahgrp", self.files.path(path)], ["added"], also=["already exists"])
            if made:
                return
        else:
            # qconf adds none of a list that names a member already ("No modification"):
            # the read again below finds which are still missing
            self.listed(["-aattr", "hostgroup", "hostlist", " ".join(missing), group], ["modified"], missing)
        if not self.reg.apply:
            return
        members = _hostgroup_members(self.reg, group)
        for name in missing:
            if name not in members:
                self.alone(
                    name,
                    lambda n=name: self.reg.change(
                        ["-aattr", "hostgroup", "hostlist", n, group], ["modified"], also=["already exists"]
                    ),
                )

    def queue(self, queue: str, text: str) -> None:
        """The queue's host list holds the nodes' host groups, and it has each node's slots: new
        ones in one ``-aattr``, changed ones in one ``-mattr``; then, read again, each node whose
        slots are still not there set alone."""
        wants = [w for w in self.live() if queue in w.queues]
        for group in dict.fromkeys(w.hostgroup for w in wants):
            if group not in text.replace(",", " ").split():
                of_group = [w.name for w in wants if w.hostgroup == group]
                try:
                    with self.covering(of_group):
                        self.reg.change(
                            ["-aattr", "queue", "hostlist", group, queue], ["modified"], also=["already exists"]
                        )
                except RegisterError as err:
                    self.fail_all(of_group, str(err))
        wants = [w for w in wants if w.name not in self.failed and f"[{w.name}={w.slots}]" not in text]
        if not wants:
            return
        for option, of_option in (
            ("-aattr", [w for w in wants if f"[{w.name}=" not in text]),
            ("-mattr", [w for w in wants if f"[{w.name}=" in text]),
        ):
            if of_option:
                slots = ",".join(f"[{w.name}={w.slots}]" for w in of_option)
                self.listed([option, "queue", "slots", slots, queue], ["modified"], [w.name for w in of_option])
        if not self.reg.apply:
            return
        rc, now = self.reg.read("-sq", queue)
        if rc != 0:
            now = ""
        for want in wants:
            if f"[{want.name}={want.slots}]" not in now:
                option = "-mattr" if f"[{want.name}=" in now else "-aattr"
                self.alone(
                    want.name,
                    lambda w=want, o=option: self.reg.change(
                        [o, "queue", "slots", f"[{w.name}={w.slots}]", queue], ["modified"]
                    ),
                )


def register_batch(
    wants: Sequence[Want],
    run: Run,
    *,
    files: Files,
    retries: int = 24,
    delay: float = 5.0,
    apply: bool = True,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, dict[str, Any]]:
    """Bring the qmaster's view of every node of ``wants`` to what it wants, the qmaster read once
    and each step that qconf takes a list for run once for the batch (``Batch``); each node's
    outcome by name: changed, the commands that covered it, and failed with the message when it
    could not be registered (the others go on)."""
    reg = Registrar(run, apply=apply, sleep=sleep)
    batch = Batch(wants, reg, files, retries, delay)
    queue_texts: dict[str, str] = {}
    for queue in dict.fromkeys(q for w in batch.wants for q in w.queues):
        rc, text = reg.read("-sq", queue)
        if rc == 0:
            queue_texts[queue] = text
            continue
        for want in batch.live():
            if queue in want.queues:
                batch.failed[want.name] = f"queue {queue} cannot be read (it must exist): {text}"
    try:
        if batch.live():
            admin, submit, execs, groups = (reg.listed(o) for o in ("-sh", "-ss", "-sel", "-shgrpl"))
            batch.hosts("-ah", admin, "added to administrative host list", "already exists")
            batch.hosts("-as", submit, "added to submit host list", "already exists")
            batch.exec_hosts(execs)
            for group in dict.fromkeys(w.hostgroup for w in batch.live()):
                batch.hostgroup(group, group in groups)
            for queue, text in queue_texts.items():
                batch.queue(queue, text)
    except RegisterError as err:  # a read of the whole batch failed: so does every node left
        batch.fail_all([w.name for w in batch.live()], str(err))
    return batch.result()


class Removal(Outcomes):
    """Taking a batch of nodes out of SGE (see ``deregister_batch``)."""

    def __init__(self, names: Sequence[str], reg: Registrar) -> None:
        super().__init__(names, reg)
        self.names: list[str] = []
        for name in dict.fromkeys(names):
            try:
                check_name(name)
            except ValueError as err:
                self.failed[name] = str(err)
            else:
                self.names.append(name)

    def live(self) -> list[str]:
        """The nodes no step failed yet."""
        return [n for n in self.names if n not in self.failed]

    def stop(self, execs: Sequence[str], queues: Sequence[str]) -> None:
        """Each exec host's execd shut down (a dead node has no daemon) and its queue settings purged."""
        for name in self.live():
            if name in execs:

                def stop(name: str = name) -> None:
                    self.reg.attempt(["-ke", name], ["shutdown", "sent"])
                    for queue in queues:
                        self.reg.attempt(["-purge", "queue", "*", f"{queue}@{name}"], ["modified"])

                self.alone(name, stop)

    def leave(self, group: str) -> None:
        """The nodes out of ``group`` in one command; read again, each one still in it alone."""
        rc, text = self.reg.read("-shgrp", group)
        members = [n for n in self.live() if rc == 0 and n in text.split()]
        if not members:  # a host group that does not exist holds no node
            return
        self.listed(["-dattr", "hostgroup", "hostlist", " ".join(members), group], ["modified"], members)
        if not self.reg.apply:
            return
        rc, text = self.reg.read("-shgrp", group)
        for name in members:
            if rc != 0 or name in text.split():
                self.alone(
                    name, lambda n=name: self.reg.change(["-dattr", "hostgroup", "hostlist", n, group], ["modified"])
                )

    def purge(self, execs: Sequence[str], queues: Sequence[str]) -> None:
        """Each node's slots purged from every queue, then its exec host removed."""
        for name in self.live():

            def purge(name: str = name) -> None:
                for queue in queues:
                    self.reg.attempt(["-purge", "queue", "slots", f"{queue}@{name}"], ["modified"])
                if name in execs:
                    self.reg.change(["-de", name], ["removed"])

            self.alone(name, purge)

    def unlist(self, option: str, listing: str) -> None:
        """The nodes out of the admin (``-dh``, read with ``-sh``) or submit hosts (``-ds``,
        ``-ss``) in one command; read again, each one still there alone."""
        known = self.reg.listed(listing)
        there = [n for n in self.live() if n in known]
        if not there:
            return
        self.listed([option, ",".join(there)], ["removed"], there)
        if not self.reg.apply:
            return
        left = self.reg.listed(listing)
        for name in there:
            if name in left:
                self.alone(name, lambda n=name: self.reg.change([option, n], ["removed"]))


def deregister_batch(
    names: Sequence[str],
    run: Run,
    *,
    queues: Sequence[str] = (),
    hostgroups: Sequence[str] = (),
    apply: bool = True,
) -> dict[str, dict[str, Any]]:
    """Take every node of ``names`` out of SGE as ``deregister`` takes one, the qmaster read once:
    per node its execd shut down, its queue settings and slots purged and its exec host removed;
    for the batch, each host group's members removed and the admin and submit hosts removed in
    one command each (a node a list command did not take is tried again alone). Each node's
    outcome by name, as ``register_batch`` gives it."""
    reg = Registrar(run, apply=apply)
    out = Removal(names, reg)
    try:
        execs = reg.listed("-sel")
        all_queues = list(dict.fromkeys([*queues, *reg.listed("-sql")]))
        all_groups = list(dict.fromkeys([*hostgroups, *reg.listed("-shgrpl")]))
        out.stop(execs, all_queues)
        for group in all_groups:
            out.leave(group)
        out.purge(execs, all_queues)
        out.unlist("-dh", "-sh")
        out.unlist("-ds", "-ss")
    except RegisterError as err:  # a read of the whole batch failed: so does every node left
        out.fail_all(out.live(), str(err))
    return out.result()


if __name__ == "__main__":
    main()
