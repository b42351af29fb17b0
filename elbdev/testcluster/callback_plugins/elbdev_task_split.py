"""An Ansible callback for ``elbdev.testcluster.bench``: each module run of a play (a task on a
host, skipped ones and Ansible's own bookkeeping actions left out), where it ran (``master``: on
the master or delegated to it; ``node``: on the node over SSH) and its wall seconds, written as
one JSON list per play run to the file ``ELBDEV_TASK_SPLIT`` names. Enabled by the benchmark
only (``ANSIBLE_CALLBACK_PLUGINS`` and ``ANSIBLE_CALLBACKS_ENABLED``); no effect otherwise.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ansible.plugins.callback import CallbackBase

# Actions that run no module on any host: Ansible's own bookkeeping.
BOOKKEEPING = frozenset(
    f"{prefix}{name}"
    for prefix in ("", "ansible.builtin.")
    for name in (
        "assert",
        "debug",
        "fail",
        "group_by",
        "include_role",
        "include_tasks",
        "import_role",
        "import_tasks",
        "meta",
        "set_fact",
        "validate_argument_spec",
    )
)


class CallbackModule(CallbackBase):  # type: ignore[misc]  # ansible-core is untyped
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "elbdev_task_split"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._started: dict[tuple[str, str], float] = {}
        self._runs: list[dict[str, object]] = []

    def v2_runner_on_start(self, host: Any, task: Any) -> None:
        self._started[(host.get_name(), task._uuid)] = time.monotonic()

    def _ended(self, result: Any) -> None:
        host, task = result._host, result._task
        started = self._started.pop((host.get_name(), task._uuid), None)
        if started is None or task.action in BOOKKEEPING:
            return
        local = host.get_name() == "master" or host.vars.get("ansible_connection") == "local"
        where = "master" if local or task.delegate_to == "master" else "node"
        self._runs.append(
            {"host": host.get_name(), "task": task.get_name(), "where": where, "seconds": time.monotonic() - started}
        )

    def v2_runner_on_ok(self, result: Any) -> None:
        self._ended(result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._ended(result)

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._ended(result)

    def v2_runner_on_skipped(self, result: Any) -> None:  # no module ran
        self._started.pop((result._host.get_name(), result._task._uuid), None)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        out = os.environ.get("ELBDEV_TASK_SPLIT")
        if out:
            with open(out, "a", encoding="utf-8") as f:
                f.write(json.dumps(self._runs) + "\n")
