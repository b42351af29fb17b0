"""How Grid Engine binds a job to on-demand nodes (``elb.core.scheduler.BindsOnDemand``): the
job's hard requests with one that only on-demand node groups satisfy (``qalter -l``, its other
hard requests kept: ``-l`` replaces the whole list), so that Grid Engine starts it only on one of
them, and elb's demand model plans an on-demand node for it (``elb.schedulers.sge.demand``
matches hard requests against each group's ``offers``). Pure.

That request is a complex value an on-demand group offers and no spot group offers alike, for
example a site complex ``market`` (RESTRING, requestable) with ``offers: {market: on-demand}``
on the on-demand group and ``{market: spot}`` on the spot group. A hard queue list (``qalter
-q``) cannot do it: SGE 8.1.9 rejects a queue that has no queue instance yet ("job requests
unknown queue"), which is the normal state of an elastic on-demand group with no node up. With no
such complex value there is no binding, and the driver says why.
"""

from __future__ import annotations

from collections.abc import Mapping

from elb.core.groups import NodeGroups
from elb.schedulers.sge.groupoptions import sge_options

NO_REQUEST = "no on-demand node group offers a complex value that no spot group offers: it may land on spot again"


def on_demand_request(groups: NodeGroups) -> tuple[str, str] | None:
    """The first complex value (name, value), in the groups' order, that an on-demand group
    offers and no spot group offers with the same value; None when there is none."""
    spot = {(k, v) for g in groups.groups if g.market == "spot" for k, v in sge_options(g).offers.items()}
    for g in groups.groups:
        if g.market != "on-demand":
            continue
        for k, v in sge_options(g).offers.items():
            if (k, v) not in spot:
                return k, v
    return None


def with_request(hard_requests: Mapping[str, str], request: tuple[str, str]) -> dict[str, str]:
    """``hard_requests`` (as ``qstat -j`` listed them) with ``request`` in place of any value of
    the same complex."""
    name, value = request
    merged = {k: v for k, v in hard_requests.items() if k != name}
    merged[name] = value
    return merged
