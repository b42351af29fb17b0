"""Per-host outcomes from ansible-runner's events and the play recap (pure: no I/O).

Never from stdout: the recap (``playbook_on_stats``) decides whether a host failed, was
unreachable or ended well; the ``runner_on_failed`` / ``runner_on_unreachable`` events name the
task and carry the message; ``set_stats`` data ``elb_busy`` (aggregated, so it arrives in the
recap's ``artifact_data``) marks nodes that ``remove_node.yml`` refused to remove.

A host is OK only if the run produced a recap, the recap counts it as processed with no
failure and no unreachable, and the run was not cut short. Anything else is FAILED with a
message that says why (no recap: time-out, cancellation or an aborted run).

A playbook that reports each host at its last task (``set_stats`` data ``elb_done``, as elb's
add and remove playbooks do) is trusted only for the hosts it reported (``require_done``): a
play can stop working on a host with no failure event (``meta: end_host``, a delegated step
that ended it), and the recap then counts the host processed with nothing wrong. A playbook
that reports nothing of the kind is trusted for a host only when ansible-playbook exited 0:
with any other exit code no event proves the host's part ended, so it is FAILED.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from elb.core.interfaces import HostResult, Outcome

BUSY_KEY = "elb_busy"
DONE_KEY = "elb_done"
MESSAGE_LIMIT = 600  # characters of a module's message kept in a HostResult


class RunEnd(enum.StrEnum):
    """How the ansible-playbook process ended, as the adapter saw it."""

    FINISHED = "finished"  # exited by itself (successfully or not)
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    NOT_STARTED = "not started"


@dataclass(slots=True)
class _Failure:
    task: str
    message: str


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return "; ".join(t for t in (_text(v) for v in value) if t)
    return str(value).strip()


def _clip(text: str, limit: int = MESSAGE_LIMIT) -> str:
    text = " ".join(text.split())  # one line: it goes into logs and the journal
    return text if len(text) <= limit else text[: limit - 1] + "…"


def result_message(res: object) -> str:
    """The most useful words of a module result: msg, then stderr, stdout, a failed loop item."""
    if not isinstance(res, Mapping):
        return _text(res)
    parts: list[str] = []
    msg = _text(res.get("msg"))
    if msg:
        parts.append(msg)
    for key in ("stderr", "module_stderr", "stdout", "module_stdout"):
        extra = _text(res.get(key))
        if extra and extra not in msg:
            parts.append(extra)
            break
    if not parts and isinstance(res.get("results"), list):
        for item in res["results"]:
            if isinstance(item, Mapping) and item.get("failed"):
                label = _text(item.get("_ansible_item_label", item.get("item")))
                inner = result_message(item)
                parts.append(f"item {label}: {inner}" if label else inner)
                break
    if "rc" in res and not parts:
        parts.append(f"exit code {res['rc']}")
    return " - ".join(parts) if parts else "failed without a message"


def task_label(event_data: Mapping[str, object]) -> str:
    """``role : task`` as Ansible shows it, or the task name (the module name if unnamed)."""
    task = _text(event_data.get("task")) or _text(event_data.get("task_action")) or "(unnamed task)"
    role = _text(event_data.get("role"))
    return f"{role} : {task}" if role else task


def _counts(stats: Mapping[str, object], key: str) -> Mapping[str, int]:
    value = stats.get(key)
    return value if isinstance(value, Mapping) else {}


def busy_hosts(artifact_data: object, key: str = BUSY_KEY) -> frozenset[str]:
    """Names in the aggregated ``key`` set_stats data (a list of names, or one name)."""
    if not isinstance(artifact_data, Mapping):
        return frozenset()
    value = artifact_data.get(key)
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, list | tuple):
        return frozenset(v for v in value if isinstance(v, str))
    return frozenset()


@dataclass(frozen=True, slots=True)
class RunSummary:
    """Everything the adapter reads from one run's events."""

    results: dict[str, HostResult]  # every host that appeared in the run, and every host asked for
    busy: frozenset[str]
    recap: bool  # a playbook_on_stats event arrived


def summarize(
    events: Iterable[Mapping[str, object]],
    hosts: Sequence[str],
    *,
    end: RunEnd = RunEnd.FINISHED,
    rc: int | None = None,
    detail: str = "",
    require_done: bool = False,
) -> RunSummary:
    """Outcome of every host in ``hosts`` (and of any other host the events mention).

    ``end`` and ``rc`` say how the process ended; ``detail`` is appended to messages of hosts
    that get no verdict (for example where the run's artifacts are). ``require_done``: the
    playbook reports each host it finished (``elb_done``); a host it did not report is FAILED.
    """
    run = _Run()
    for event in events:
        run.take(event)
    stats = run.stats
    busy = busy_hosts(stats.get("artifact_data")) if stats is not None else frozenset()
    done = busy_hosts(stats.get("artifact_data"), DONE_KEY) if stats is not None and require_done else None
    notes = [detail, *run.errors]
    suffix = f" ({'; '.join(n for n in notes if n)})" if any(notes) else ""
    ended = _Ended(end, rc, suffix)
    results: dict[str, HostResult] = {}
    for host in [*hosts, *(h for h in run.seen if h not in hosts)]:
        results[host] = _verdict(host, run, busy=busy, ended=ended, done=done)
    return RunSummary(results=results, busy=busy, recap=stats is not None)


@dataclass(slots=True)
class _Run:
    """What one run's events said, read event by event (``take``)."""

    first_failure: dict[str, _Failure] = field(default_factory=dict)
    last_failure: dict[str, _Failure] = field(default_factory=dict)
    unreachable: dict[str, _Failure] = field(default_factory=dict)
    last_task: dict[str, str] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)
    stats: Mapping[str, object] | None = None
    aborted_play: str | None = None
    errors: list[str] = field(default_factory=list)  # Ansible's own error lines (syntax errors and the like)

    def take(self, event: Mapping[str, object]) -> None:
        kind = event.get("event")
        data = event.get("event_data")
        if not isinstance(data, Mapping):
            data = {}
        if kind == "playbook_on_stats":
            self.stats = data
        elif kind == "verbose":
            line = _text(event.get("stdout"))
            if line.startswith(("[ERROR]", "ERROR!")) and len(self.errors) < 3:
                self.errors.append(line)
        elif kind == "playbook_on_no_hosts_remaining":
            self.aborted_play = _text(data.get("play")) or "(unnamed play)"
        elif isinstance(kind, str) and kind.startswith("runner_"):
            self._runner(kind, data)

    def _runner(self, kind: str, data: Mapping[str, object]) -> None:
        """A task's event on a host: the host seen, its last task, and its failures."""
        host = data.get("host")
        if not isinstance(host, str):
            return
        if host not in self.last_task:
            self.seen.append(host)
        label = task_label(data)
        self.last_task[host] = label
        if kind == "runner_on_failed" and not data.get("ignore_errors"):
            failure = _Failure(label, result_message(data.get("res")))
            self.first_failure.setdefault(host, failure)
            self.last_failure[host] = failure
        elif kind == "runner_on_unreachable":
            self.unreachable[host] = _Failure(label, result_message(data.get("res")))


@dataclass(frozen=True, slots=True)
class _Ended:
    """How the process ended, and what a message without a verdict ends with."""

    end: RunEnd
    rc: int | None
    suffix: str


def _no_verdict(end: RunEnd, rc: int | None, last_task: str | None) -> str:
    where = f" during or after task '{last_task}'" if last_task else " before any task ran on it"
    if end is RunEnd.TIMEOUT:
        return f"provisioning timed out{where}"
    if end is RunEnd.CANCELLED:
        return f"provisioning was cancelled (elb is shutting down){where}"
    if end is RunEnd.NOT_STARTED:
        return "provisioning did not start"
    if rc == 127:
        return "ansible-playbook could not be started (exit code 127: is it installed, on PATH?)"
    code = f" with exit code {rc}" if rc is not None else ""
    return f"ansible-playbook ended{code} without a result for this host{where}"


def _verdict(host: str, run: _Run, *, busy: frozenset[str], ended: _Ended, done: frozenset[str] | None) -> HostResult:
    """One host's outcome: from its events when the recap is missing or cannot be trusted, else
    from the recap's counts (``_recap_verdict``)."""
    last_task = run.last_task.get(host)
    first = run.first_failure.get(host)
    if run.stats is None or ended.end is not RunEnd.FINISHED:
        # No recap, or a recap we cannot trust: this host's run did not finish.
        if first is not None:
            return HostResult(host, Outcome.FAILED, first.task, _clip(first.message))
        unreachable = run.unreachable.get(host)
        if unreachable is not None:
            return HostResult(host, Outcome.UNREACHABLE, unreachable.task, _clip(unreachable.message))
        return HostResult(
            host, Outcome.FAILED, last_task, _clip(_no_verdict(ended.end, ended.rc, last_task) + ended.suffix)
        )
    return _recap_verdict(host, run, run.stats, busy=busy, ended=ended, done=done)


def _recap_verdict(  # noqa: PLR0911 (one return per verdict reads best)
    host: str,
    run: _Run,
    stats: Mapping[str, object],
    *,
    busy: frozenset[str],
    ended: _Ended,
    done: frozenset[str] | None,
) -> HostResult:
    """One host's outcome by the recap: failed, unreachable, never reached, stopped early, busy,
    left unfinished, or done."""
    last_task = run.last_task.get(host)
    suffix = ended.suffix
    if _counts(stats, "failures").get(host, 0):
        return _failed(host, run, busy)
    if _counts(stats, "dark").get(host, 0):
        u = run.unreachable.get(host) or _Failure(last_task or "(unknown task)", "host unreachable")
        return HostResult(host, Outcome.UNREACHABLE, u.task, _clip(u.message))
    if host not in _counts(stats, "processed"):
        return HostResult(host, Outcome.FAILED, None, "no task of the playbook ran on this host" + suffix)
    if run.aborted_play is not None:
        return HostResult(
            host,
            Outcome.FAILED,
            last_task,
            f"the run stopped early (every host of play '{run.aborted_play}' failed) before this host finished",
        )
    if host in busy:
        return HostResult(host, Outcome.BUSY, None, "a job landed on the node while draining; it stays")
    where = f" (the last task that ran on it: '{last_task}')" if last_task else ""
    if done is not None and host not in done:
        return HostResult(
            host,
            Outcome.FAILED,
            last_task,
            f"the playbook stopped working on this host before its last task, with no failure reported{where}",
        )
    if done is None and ended.rc not in (0, None):
        return HostResult(
            host,
            Outcome.FAILED,
            last_task,
            f"ansible-playbook ended with exit code {ended.rc} and the playbook does not report its hosts done:"
            f" nothing shows this host's part ended{where}{suffix}",
        )
    return HostResult(host, Outcome.OK)


def _failed(host: str, run: _Run, busy: frozenset[str]) -> HostResult:
    """A host the recap counts failures on: its first failure, and where the run stopped when
    that was another task."""
    first, last = run.first_failure.get(host), run.last_failure.get(host)
    f = first or last
    if f is None:
        return HostResult(host, Outcome.FAILED, run.last_task.get(host), "a task failed (no failure event recorded)")
    message = f.message
    if last is not None and first is not None and last.task != first.task:
        message = f"{message} (the run stopped at '{last.task}': {last.message})"
    if host in busy:
        message += " (also reported busy)"
    return HostResult(host, Outcome.FAILED, f.task, _clip(message))
