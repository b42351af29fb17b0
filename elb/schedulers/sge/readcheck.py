"""Is a read of SGE whole? Pure rules that refuse a hollow or partial read before elb acts on it.

A read (``qstat`` + ``qhost``) in which hosts elb knows to be there, or the hosts of jobs it saw
running, are missing altogether is partial data: SGE itself never drops a host from ``qhost``.
When an execd dies, ``qhost`` still lists its host (load values ``-``) and ``qstat -f`` shows its
queue instances in state ``u``; a host leaves both only when it is deregistered (``qconf -de``),
and then it also leaves ``qconf -sel``, the execution hosts SGE has configured. So:

- nothing vanished: the read is whole;
- hosts vanished: ask ``qconf -sel``. A vanished host SGE still has configured means the read is
  hollow: refused, nothing is done this pass;
- every host elb knows to be up vanished (its ready nodes and the hosts of the last whole read;
  not the draining ones, which elb's own deregistration takes out of SGE), or every host of the
  jobs it saw running (a *total loss*): that is what a hollow answer looks like (a qmaster
  restarting, or started on an empty spool, a wrapper that lost its output), and ``qconf -sel``
  and a second read of qstat and qhost can answer hollow the same way: empty, for as long as
  the cause lasts. Neither can confirm it, and neither can time (a qmaster on an empty spool
  answers empty for as long as it runs). Only a ``qconf -sel`` that is demonstrably not hollow
  confirms it: it lists at least one execution host, none of the vanished, and exactly the hosts
  ``qhost`` lists. Anything else is refused, without a second read, pass after pass, until SGE
  lists a host again;
- some but not all of them vanished (or only draining ones), and all left ``qconf -sel``: the
  hosts were deregistered. A ``qconf -sel`` that lists nothing while ``qhost`` lists hosts
  answered hollow: refused. Where ``qconf -sel`` and ``qhost`` disagree about the other hosts, or
  SGE has no execution host left (elb's own deregistration of the last draining node), a second
  read must agree with the first.

``check_read`` says which of these holds for the data it is given, and what it still needs.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from elb.core.model import Job, Node, NodeState, Snapshot

# Journal states of a node that SGE must list: registered and not yet deregistered by elb.
_REGISTERED = frozenset({NodeState.READY, NodeState.DRAINING})
# Journal states of a node elb took out of SGE (or that never got in): its absence is expected.
_TAKEN_OUT = frozenset({NodeState.DEREGISTERED, NodeState.TERMINATED, NodeState.FAILED})


class Need(enum.StrEnum):
    """What ``check_read`` needs before it can say whether a read is whole."""

    NOTHING = "nothing"
    CONFIGURED_HOSTS = "configured_hosts"  # qconf -sel
    SECOND_READ = "second_read"  # qstat and qhost once more


@dataclass(frozen=True, slots=True)
class ReadVerdict:
    """``ok``: the read may be acted on. Otherwise ``need`` says what would settle it
    (``Need.NOTHING``: it is refused), and ``reason`` says why, in plain words."""

    ok: bool
    reason: str = ""
    need: Need = Need.NOTHING


class KnownHosts(frozenset[str]):
    """The hosts a whole read must list (``expected_hosts``), knowing which of them elb is taking
    out of SGE itself (``leaving``: journal ``draining``; its deregistration play may have run)."""

    leaving: frozenset[str]

    def __new__(cls, hosts: Iterable[str] = (), leaving: Iterable[str] = ()) -> KnownHosts:
        known = super().__new__(cls, hosts)
        known.leaving = frozenset(leaving) & known
        return known


def expected_hosts(nodes: Iterable[Node], previous: Snapshot | None) -> KnownHosts:
    """The hosts a whole read must list: the journal's registered nodes (ready or draining), and
    the hosts of the previous whole read except those elb itself took out of SGE since. The
    draining ones are ``leaving``: elb's own play may take them out of SGE."""
    nodes = list(nodes)
    taken_out = {n.name for n in nodes if n.state in _TAKEN_OUT}
    hosts = {n.name for n in nodes if n.state in _REGISTERED}
    if previous is not None:
        hosts |= {h.name for h in previous.hosts if h.name not in taken_out}
    return KnownHosts(hosts, (n.name for n in nodes if n.state is NodeState.DRAINING))


def running_jobs(snapshot: Snapshot | None) -> tuple[Job, ...]:
    """The jobs a read showed on a host (running, transferring, suspended). Only a job in a
    queue has a host (``Job.host``): the waiting ones are passed over without asking."""
    if snapshot is None:
        return ()
    return tuple([j for j in snapshot.jobs if j.queue and j.host is not None])


def _names(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))


def _job_key(j: Job) -> tuple[int, str | None]:
    return (j.job_id, j.task_ids)


def _jobs_text(jobs: Sequence[Job]) -> str:
    ids = sorted({j.job_id for j in jobs})
    if not ids:
        return ""
    more = f" and {len(ids) - 5} more" if len(ids) > 5 else ""
    return f"; job{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids[:5]))}{more} ran there"


def check_read(
    current: Snapshot,
    *,
    configured_hosts: frozenset[str] | None,
    known_up: frozenset[str],
    running_before: Sequence[Job] = (),
    second_read: Snapshot | None = None,
    leaving: frozenset[str] | None = None,
) -> ReadVerdict:
    """Whether ``current`` (one read of qstat and qhost) is whole enough to act on.

    ``known_up``: hosts a whole read lists (see ``expected_hosts``); ``running_before``: jobs the
    previous whole read showed on a host; ``configured_hosts``: ``qconf -sel`` (None: not asked
    yet); ``second_read``: qstat and qhost read again (None: not read yet); ``leaving``: hosts of
    ``known_up`` elb is taking out of SGE itself (default: ``known_up.leaving`` of a
    ``KnownHosts``, else none), which a total loss does not count.
    """
    listed = {h.name for h in current.hosts}
    # A job whose host left the read left no trace: a job that ends leaves its host listed.
    traceless = [j for j in running_before if j.host not in listed]
    vanished = (set(known_up) | {j.host for j in traceless if j.host is not None}) - listed
    if not vanished:
        return ReadVerdict(True, "every host elb knows is listed")
    if configured_hosts is None:
        jobs = _jobs_text([j for j in traceless if j.host in vanished])
        why = f"{_names(vanished)} vanished from qhost{jobs}; asking qconf -sel whether SGE still has them"
        return ReadVerdict(False, why, Need.CONFIGURED_HOSTS)
    still = vanished & configured_hosts
    if still:
        return _still_configured(still, traceless)
    every = _every_lost(known_up, leaving, listed, running_before)
    if every is None:
        return _some_lost(current, vanished, configured_hosts, second_read)
    gone = f"{_names(vanished)} left SGE's execution hosts (qconf -sel)"
    there = [j for j in traceless if j.host in vanished]
    return _all_lost(every, vanished, listed, configured_hosts, jobs_there=there, gone=gone)


def _still_configured(still: set[str], traceless: Sequence[Job]) -> ReadVerdict:
    """Hosts gone from qhost that ``qconf -sel`` still has: a partial read."""
    them = "them" if len(still) > 1 else "it"
    jobs = _jobs_text([j for j in traceless if j.host in still])
    why = (
        f"partial read: {_names(still)} vanished from qhost but SGE still has {them} configured "
        f"(qconf -sel){jobs}; no action"
    )
    return ReadVerdict(False, why)


def _every_lost(
    known_up: frozenset[str], leaving: frozenset[str] | None, listed: set[str], running_before: Sequence[Job]
) -> str | None:
    """Which whole the read lost, in words, when it lost every host elb knows to be up (but for
    those elb takes out itself) or every host of the running jobs; None when it kept some."""
    job_hosts = {j.host for j in running_before if j.host is not None}
    up = known_up - (leaving if leaving is not None else getattr(known_up, "leaving", frozenset()))
    if up and not up & listed:
        return "every host elb knows to be up"
    if job_hosts and not job_hosts & listed:
        return "every host of the running jobs"
    return None


def _all_lost(
    every: str,
    vanished: set[str],
    listed: set[str],
    configured: frozenset[str],
    *,
    jobs_there: Sequence[Job],
    gone: str,
) -> ReadVerdict:
    """Every host elb knows to be up (or of the running jobs) vanished and left ``qconf -sel``:
    whole only if ``qconf -sel`` lists hosts, exactly those qhost lists (a hollow answer lists
    none); a second read could be as hollow as the first, so none is made."""
    if configured and configured == listed:
        return ReadVerdict(True, f"{gone}, which lists {_names(configured)} as qhost does")
    jobs = _jobs_text(jobs_there)
    lost = f"partial read: {_names(vanished)} vanished from qhost, {every}, and "
    if not configured:
        why = (
            f"{lost}qconf -sel lists no execution host either{jobs}; both can answer empty the same way "
            "(a qmaster restarting, or started on an empty spool), so neither confirms the other; no action"
        )
    else:
        why = f"{lost}{_disagree(listed, configured)}{jobs}; so qhost cannot be trusted; no action"
    return ReadVerdict(False, why)


def _disagree(listed: set[str], configured: frozenset[str]) -> str:
    """How qhost's hosts (``listed``) and qconf -sel's differ, in words."""
    differ = []
    if listed - configured:
        differ.append(f"qhost lists {_names(listed - configured)}, which qconf -sel does not")
    if configured - listed:
        differ.append(f"qconf -sel lists {_names(configured - listed)}, which qhost does not")
    return " and ".join(differ)


def _some_lost(
    current: Snapshot, vanished: set[str], configured: frozenset[str], second_read: Snapshot | None
) -> ReadVerdict:
    """Some of the hosts elb knows vanished (others are listed: the qmaster's host list is there;
    or they all were leaving), and none of them is in ``qconf -sel``: deregistered, unless qconf
    -sel and qhost disagree on the other hosts, or SGE has no execution host left; then a second
    read must agree with the first. A ``qconf -sel`` that lists nothing while qhost lists hosts
    answered hollow: it confirms nothing, and the read is refused."""
    listed = {h.name for h in current.hosts}
    gone = f"{_names(vanished)} left SGE's execution hosts (qconf -sel)"
    if listed == configured and configured:
        return ReadVerdict(True, gone)
    if listed and not configured:
        why = (
            f"partial read: {_names(vanished)} vanished from qhost, and qconf -sel lists no execution host "
            f"while qhost lists {_names(listed)}: it answered hollow, so it confirms nothing; no action"
        )
        return ReadVerdict(False, why)
    doubt = (
        f"{gone}, but {_disagree(listed, configured)}"
        if listed != configured
        else f"{gone}, and SGE has no execution host left"
    )
    if second_read is None:
        return ReadVerdict(False, f"{doubt}; reading SGE a second time", Need.SECOND_READ)
    return _agree(current, second_read, doubt)


def _agree(first: Snapshot, second: Snapshot, doubt: str) -> ReadVerdict:
    """A second read confirms the first when it lists the same hosts and the same jobs on hosts."""
    hosts_1, hosts_2 = {h.name for h in first.hosts}, {h.name for h in second.hosts}
    jobs_1 = {(_job_key(j), j.host) for j in running_jobs(first)}
    jobs_2 = {(_job_key(j), j.host) for j in running_jobs(second)}
    if hosts_1 == hosts_2 and jobs_1 == jobs_2:
        return ReadVerdict(True, f"{doubt}; a second read agrees")
    differ = []
    if hosts_1 != hosts_2:
        differ.append(f"hosts {_names(hosts_1 ^ hosts_2)}")
    if jobs_1 != jobs_2:
        differ.append("the running jobs")
    why = f"partial read: {doubt}, and a second read differs in {' and '.join(differ)}; no action"
    return ReadVerdict(False, why)


__all__ = ["KnownHosts", "Need", "ReadVerdict", "check_read", "expected_hosts", "running_jobs"]
