"""Grid Engine's state letters in the core's words (``elb.core.model.JobPhase``, ``QueueFlags``).

A job's letters (sge_job.c, job_get_state_string: d E S T h R q r s t w x z): waiting and
eligible to start only as ``qw``, or re-queued (SGE 8.1.9 prints ``Rq`` for a rescheduled waiting
job; ``Rqw`` is kept for other versions); started when it runs, is transferred or suspended
(r t s S T, with any other letter: ``hr``, ``dr``, ``Rr``); else in error (E) before held (h),
a job both (``Ehqw``) being first an admin's to look at; anything else (``dqw``, deleted before it
started) neither. A queue instance's letters (qstat(1)): u unreachable; d and D disabled (by an
admin, a calendar); s, S and C suspended (by an admin, a subordinate queue, a calendar); E in
error, c its configuration ambiguous, o orphaned (no longer configured): in error; a and A
alarms (still usable). Pure; the parsers ask each distinct string once.
"""

from __future__ import annotations

from collections.abc import Sequence

from elb.core.model import NO_FLAGS, JobPhase, QueueFlags

WAITING_STATES = frozenset({"qw", "Rq", "Rqw"})
_STARTED = frozenset("rtsST")
_QUEUE_FLAGS = {
    "u": QueueFlags.UNREACHABLE,
    "d": QueueFlags.DISABLED,
    "D": QueueFlags.DISABLED,
    "s": QueueFlags.SUSPENDED,
    "S": QueueFlags.SUSPENDED,
    "C": QueueFlags.SUSPENDED,
    "E": QueueFlags.ERROR,
    "c": QueueFlags.ERROR,
    "o": QueueFlags.ERROR,
    "a": QueueFlags.ALARM,
    "A": QueueFlags.ALARM,
}
_phases: dict[str, JobPhase] = {}
_flags: dict[str, QueueFlags] = {"": NO_FLAGS}


def job_phase(state: str) -> JobPhase:
    """The phase of a job Grid Engine shows in ``state`` (its letters)."""
    found = _phases.get(state)
    if found is None:
        if state in WAITING_STATES:
            found = JobPhase.WAITING
        elif not _STARTED.isdisjoint(state):
            found = JobPhase.RUNNING
        elif "E" in state:
            found = JobPhase.ERROR
        elif "h" in state:
            found = JobPhase.HELD
        else:
            found = JobPhase.OTHER
        if len(_phases) < 4096:  # the letters make a few dozen strings; a bound all the same
            _phases[state] = found
    return found


def queue_flags(states: str) -> QueueFlags:
    """The flags of a queue instance Grid Engine shows in ``states`` (its letters, checked by
    the parser; a letter not listed above is no flag)."""
    found = _flags.get(states)
    if found is None:
        found = NO_FLAGS
        for c in states:
            found |= _QUEUE_FLAGS.get(c, NO_FLAGS)
        if len(_flags) < 4096:
            _flags[states] = found
    return found


__all__: Sequence[str] = ("WAITING_STATES", "job_phase", "queue_flags")
