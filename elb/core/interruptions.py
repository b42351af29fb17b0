"""Jobs that spot interruptions keep sending back: where they go next. Pure.

A spot interruption requeues a node's rerunnable jobs (``qmod -rq``, ``Balancer._requeue``); the
journal counts, per job, how many times that happened. A job requeued more often than
``cloud.ec2.spot_interruptions_allowed`` gets a hard request that only on-demand nodes satisfy
(``qalter -l``, its other hard requests kept), so that SGE starts it only on one of them, and
elb's demand model plans an on-demand node for it (``elb.schedulers.sge.demand`` matches hard requests against
each group's ``offers``).

That request is a complex value an on-demand group offers and no spot group offers alike, for
example a site complex ``market`` (RESTRING, requestable) with ``offers: {market: on-demand}``
on the on-demand group and ``{market: spot}`` on the spot group. A hard queue list (``qalter
-q``) cannot do it: SGE 8.1.9 rejects a queue that has no queue instance yet ("job requests
unknown queue"), which is the normal state of an elastic on-demand group with no node up. With no
such complex value, the job stays as it is and elb says why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from elb.core.groups import NodeGroups

_TASK = re.compile(r"^(\d+)(?:\.(\d+))?$")


def job_number(pushed: str) -> int:
    """The job number of a requeued entry as ``qmod -rq`` names it: ``123`` or ``123.4`` (an
    array task). ``ValueError`` for anything else."""
    m = _TASK.fullmatch(pushed)
    if m is None:
        raise ValueError(f"{pushed!r} is not a job number or job.task")
    return int(m.group(1))


def on_demand_request(groups: NodeGroups) -> tuple[str, str] | None:
    """The first complex value (name, value), in the groups' order, that an on-demand group
    offers and no spot group offers with the same value; None when there is none."""
    spot = {(k, v) for g in groups.groups if g.market == "spot" for k, v in g.offers.items()}
    for g in groups.groups:
        if g.market != "on-demand":
            continue
        for k, v in g.offers.items():
            if (k, v) not in spot:
                return k, v
    return None


@dataclass(frozen=True, slots=True)
class Move:
    """What to do with one job after an interruption: its new hard requests (empty: leave it,
    and ``reason`` says why)."""

    job: int
    times: int  # interruptions so far, this one included
    requests: Mapping[str, str] = field(default_factory=dict, hash=False)
    reason: str = ""


def moves(
    counts: Sequence[tuple[int, int, bool]],
    allowed: int,
    groups: NodeGroups,
    hard_requests: Mapping[int, Mapping[str, str]],
) -> list[Move]:
    """For each ``(job, times interrupted, already moved)``: the jobs interrupted more than
    ``allowed`` times and not moved yet, each with its hard requests (``hard_requests[job]``,
    as SGE listed them) plus the on-demand request, or why it stays."""
    request = on_demand_request(groups)
    out: list[Move] = []
    for job, times, moved in counts:
        if moved or times <= allowed:
            continue
        why = f"requeued by {times} spot interruptions (more than {allowed})"
        if request is None:
            out.append(
                Move(
                    job,
                    times,
                    reason=f"{why}, but no on-demand node group offers a complex value that no spot "
                    "group offers: it may land on spot again",
                )
            )
            continue
        name, value = request
        merged = {k: v for k, v in hard_requests.get(job, {}).items() if k != name}
        merged[name] = value
        out.append(Move(job, times, merged, f"{why}: it now requests {name}={value}, which only on-demand nodes offer"))
    return out
