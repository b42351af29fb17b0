"""``python -m tests.faults.killpoint CONFIG STEP``: ``elb once`` that dies by SIGKILL at STEP.

This is elb's own ``once`` command (``elb.cli.main``), unchanged, with one hook that sends
SIGKILL to the whole process group (elb and any ansible-playbook it started, as systemd does
to a service's cgroup) at the step named:

- a lifecycle state (``requested``, ``running``, ``draining``, ``deregistered``, ...): just after
  the journal committed that step, before the work it announces starts;
- ``launching``: in the middle of the launch: the container exists, its sshd not yet awaited;
- with ``ELB_KILL_DELAY`` > 0: that many seconds after the journal recorded the step, e.g. in the
  middle of the provisioning play (``provisioning``) or of the deregistration play (``draining``).

Run it in a session of its own (``start_new_session=True``) so the group is only elb's.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from elb import cli
from elb.cloud import local
from elb.journal import Journal
from elb.model import Node, NodeState


def _die() -> None:
    os.killpg(0, signal.SIGKILL)


def install(step: str, delay: float) -> None:
    if step == "launching":
        real_wait = local.LocalCloud._wait_ready

        def wait_ready(self: local.LocalCloud, cid: str, deadline: float) -> Any:
            if self._inspect([cid]):  # the container exists: the cloud started the instance
                _die()
            return real_wait(self, cid, deadline)

        local.LocalCloud._wait_ready = wait_ready  # type: ignore[method-assign]
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
