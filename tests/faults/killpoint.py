"""``python -m tests.faults.killpoint CONFIG STEP``: ``elb once`` that dies by SIGKILL at STEP.

This is elb's own ``once`` command (``elb.cli.main.main``), unchanged, with one hook that sends
SIGKILL to the whole process group (elb and any ansible-playbook it started, as systemd does
to a service's cgroup) at the step named:

- a lifecycle state (``requested``, ``running``, ``draining``, ``deregistered``, ...): just after
  the journal committed that step, before the work it announces starts;
- ``launching``: in the middle of the launch: the container exists, its sshd not yet awaited;
- ``sge-deregistered``: in the middle of the deregistration play, as soon as SGE no longer lists
  the draining host (``qconf -sel``), before the play takes it out of /etc/hosts and the exports;
- with ``ELB_KILL_DELAY`` > 0: that many seconds after the journal recorded the step, e.g. in the
  middle of the provisioning play (``provisioning``) or of the deregistration play (``draining``).

Run it in a session of its own (``start_new_session=True``) so the group is only elb's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from elb.cli import main as cli
from elb.clouds import local
from elb.core.model import Node, NodeState
from elb.service.journal import Journal


def _die() -> None:
    os.killpg(0, signal.SIGKILL)


def _die_once_out_of_sge(host: str) -> None:
    while True:
        proc = subprocess.run(["qconf", "-sel"], capture_output=True, text=True, timeout=10, check=False)
        if host not in proc.stdout.split():
            _die()
        time.sleep(0.05)


def install(step: str, delay: float) -> None:
    if step == "launching":
        real_wait = local.LocalCloud._wait_ready

        def wait_ready(self: local.LocalCloud, cid: str, deadline: float) -> Any:
            if self._inspect([cid]):  # the container exists: the cloud started the instance
                _die()
            return real_wait(self, cid, deadline)

        local.LocalCloud._wait_ready = wait_ready  # type: ignore[method-assign]
        return
    if step == "sge-deregistered":
        real_record_ = Journal.record

        def record_(self: Journal, name: str, state: NodeState, now: float, **kw: Any) -> Node:
            node = real_record_(self, name, state, now, **kw)
            if state is NodeState.DRAINING:
                threading.Thread(target=_die_once_out_of_sge, args=(name,), daemon=True).start()
            return node

        Journal.record = record_  # type: ignore[method-assign]
        return
    target = NodeState(step)
    real_record = Journal.record

    def record(self: Journal, name: str, state: NodeState, now: float, **kw: Any) -> Node:
        node = real_record(self, name, state, now, **kw)
        if state is target:
            if delay > 0:
                threading.Timer(delay, _die).start()
            else:
                _die()
        return node

    Journal.record = record  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    config, step = argv
    install(step, float(os.environ.get("ELB_KILL_DELAY", "0")))
    return cli.main(["once", "--config", config])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
