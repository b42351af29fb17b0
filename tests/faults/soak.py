"""The random-fault soak: a seeded synthetic workload on the test cluster, with elb running as
``elb run`` in a process of its own, and faults drawn from a seeded schedule (tests/faults/test_soak.py
runs it briefly, benchmarks/bench_soak.py for longer and against a fault-free run of the same seed).

The workload (``workload``): jobs arrive in bursts: short and long jobs, array jobs, and jobs
that need several slots (SGE: the ``smp`` parallel environment, both slots of a node; Slurm: two
nodes). Every job (each array task) appends ``host start`` to ``<tag>.<task>.start`` in the
cluster user's home when it starts, and writes ``host end`` to ``<tag>.<task>.done`` when it
ends: the soak's account of what ran, where and when, the same for both schedulers.

The faults (``fault_schedule``): the controller restarted; the controller stopped (SIGSTOP, tens
of seconds, SIGCONT); the scheduler's commands slowed (wrappers in ``sge.bin_dir`` /
``slurm.bin_dir``); a node running a job killed (``podman kill``); the next node's play made to
fail; the cloud throttling, out of capacity, or filling a fleet in part; elb SIGKILLed and started
again; both cores kept busy (``stress-ng --cpu 2``). See elbdev/testcluster/faults.py.

What is counted (``Figures``): tasks lost (not ended when the drain gave up, ``drain_timeout``
after the workload's end, still waiting included; not on a node the soak killed); tasks
killed by elb (started again after a start on a node the soak did not kill); nodes leaked (after
the wind-down: containers or live journal records left; on SGE also any disagreement of the
journal, podman, SGE, /etc/hosts and the exports with the cluster before the run); busy nodes
terminated (elb terminated a node while a task ran there); launches wasted (a node launched that
failed for a cause not its own: not the play the soak broke, not the node it killed);
node-seconds from the journal; the tasks' waits (start - submission).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elb.core.config import BackoffConfig, Config, PolicyConfig, parse_config
from elb.core.model import Event, NodeState
from elb.schedulers.sge.commands import QSTAT_ARGS
from elb.schedulers.sge.parse import parse_qstat
from elb.service.journal import Journal
from elbdev.testcluster import constants as C
from elbdev.testcluster import faults as F
from elbdev.testcluster._run import TestClusterError
from elbdev.testcluster.cluster import REPO_ROOT, TestCluster
from tests.cluster.helpers import cluster_state
from tests.faults.support import BATCH_BOOT_TIMEOUT, disagreements, fault_config, write_config

HOME = Path("/home") / C.CLUSTER_USER / "soak"
FAULT_KINDS = (
    "ctl_restart",
    "ctl_stop",
    "slow_cmds",
    "node_kill",
    "play_fail",
    "throttle",
    "capacity",
    "partial",
    "elb_kill",
    "stress",
)

JOB = """#!/bin/sh
#$ -S /bin/sh
#$ -j y
t=${{SGE_TASK_ID:-${{SLURM_ARRAY_TASK_ID:-0}}}}
case "$t" in undefined) t=0 ;; esac
f={home}/{tag}.$t
echo "$(hostname) $(date +%s.%N)" >> "$f.start"
sleep {seconds}
echo "$(hostname) $(date +%s.%N)" > "$f.done.tmp" && mv "$f.done.tmp" "$f.done"
"""


@dataclass(frozen=True)
class Submission:
    at: float  # seconds after the start of the run
    tag: str
    kind: str  # short | long | array | wide (SGE: smp 2; Slurm: 2 nodes)
    seconds: int
    tasks: int


@dataclass(frozen=True)
class Pace:
    """How long a run's jobs and faults last, in seconds (uniform between the bounds): the
    benchmark's hour (``HOUR``) or CI's few minutes (``LEAN``)."""

    job_seconds: Mapping[str, tuple[int, int]]  # by kind of job
    fault_seconds: Mapping[str, tuple[float, float]]  # by kind of fault, where it has a length
    fault_default: tuple[float, float]  # the other faults with a length (the cloud's)


HOUR = Pace(
    {"short": (10, 30), "long": (90, 150), "array": (10, 30), "wide": (20, 50)},
    {"ctl_stop": (15, 40), "slow_cmds": (30, 60), "stress": (30, 60)},
    (45, 75),
)
# A few minutes of workload meet every fault once: with the hour's lengths the cloud's three
# refusals alone would cover the whole run and the drain would wait on long jobs started late.
# Each fault still lasts several of the lean run's polls (its elb polls every few seconds).
LEAN = Pace(
    {"short": (10, 20), "long": (40, 60), "array": (10, 20), "wide": (15, 30)},
    {"ctl_stop": (10, 20), "slow_cmds": (15, 25), "stress": (15, 25)},
    (15, 25),
)


def workload(minutes: float, seed: int, pace: Pace = HOUR) -> list[Submission]:
    """Bursts of 2 to 5 jobs every 45 to 90 s over ``minutes`` (the last burst a minute before
    the end), each job short, long, an array (3 tasks) or wide, of ``pace``'s lengths (the
    hour's: 10-30, 90-150, 10-30 and 20-50 s). Same seed and pace, same workload, whatever the
    scheduler."""
    rng = random.Random(f"workload-{seed}")
    out: list[Submission] = []
    t = 5.0
    end = max(10.0, minutes * 60 - 60)
    n = 0
    while t < end:
        for _ in range(rng.randint(2, 5)):
            kind = rng.choices(("short", "long", "array", "wide"), weights=(4, 2, 2, 2))[0]
            n += 1
            out.append(
                Submission(
                    round(t + rng.uniform(0, 5), 1),
                    f"s{n:03d}",
                    kind,
                    rng.randint(*pace.job_seconds[kind]),
                    3 if kind == "array" else 1,
                )
            )
        t += rng.uniform(45, 90)
    return sorted(out, key=lambda s: s.at)


@dataclass(frozen=True)
class Fault:
    at: float
    kind: str
    seconds: float  # how long it lasts (where it has a length)


def fault_schedule(minutes: float, seed: int, pace: Pace = HOUR) -> list[Fault]:
    """Every kind once, then one more drawn at random for each further 40 s of the run, at times
    spread by strata over [20 s, end - 45 s] in a random order, each lasting as ``pace`` says."""
    rng = random.Random(f"faults-{seed}")
    lo, hi = 20.0, max(30.0, minutes * 60 - 45)
    kinds = list(FAULT_KINDS)
    extra = max(0, round((hi - lo) / 40) - len(kinds))
    kinds += [rng.choice(FAULT_KINDS) for _ in range(extra)]
    rng.shuffle(kinds)
    part = (hi - lo) / len(kinds)
    return [
        Fault(
            round(rng.uniform(lo + k * part, lo + (k + 1) * part), 1),
            kind,
            round(rng.uniform(*pace.fault_seconds.get(kind, pace.fault_default)), 1),
        )
        for k, kind in enumerate(kinds)
    ]


@dataclass
class Figures:
    scheduler: str
    seed: int
    minutes: float
    faults: bool
    submissions: int = 0
    tasks: int = 0
    tasks_done: int = 0
    tasks_lost: int = 0
    tasks_killed_by_elb: int = 0
    tasks_killed_by_fault: int = 0
    nodes_leaked: int = 0
    busy_nodes_terminated: int = 0
    launches: int = 0
    launches_wasted: int = 0
    node_seconds: float = 0.0
    wait_p50: float = 0.0
    wait_p95: float = 0.0
    seconds: float = 0.0
    faults_done: list[dict[str, Any]] = field(default_factory=list)
    wasted: list[str] = field(default_factory=list)
    failed_own: list[str] = field(default_factory=list)  # nodes that failed for a fault of their own
    lost: list[str] = field(default_factory=list)
    killed_by_elb: list[str] = field(default_factory=list)
    busy_terminated: list[str] = field(default_factory=list)
    leaked: list[str] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)  # SGE: journal, podman and the master (support.py)
    slowest: list[str] = field(default_factory=list)  # the waits at or past the p95, with the faults they met
    tasks_clear: int = 0  # tasks whose wait met no BLOCKING fault
    wait_p95_clear: float = 0.0  # their p95

    def line(self) -> str:
        return "FIGURES " + json.dumps({"test": f"soak_{self.scheduler}", **asdict(self)})


# Faults that stop every launch, or the scheduler itself, while they last: the cloud refuses
# each launch (throttling, no capacity), or the controller neither schedules nor answers.
BLOCKING = frozenset({"throttle", "capacity", "ctl_stop", "ctl_restart"})


def _met(faults: list[dict[str, Any]], at: float, wait: float) -> list[dict[str, Any]]:
    """The faults under way at some time of a wait from ``at`` (seconds after the start)."""
    return [f for f in faults if f["at"] <= at + wait and f["at"] + float(f.get("for", f.get("took", 0.0))) >= at]


def slowest(waited: list[tuple[float, str, float]], p95: float, faults: list[dict[str, Any]]) -> list[str]:
    """Each task that waited at least ``p95`` (longest first), its wait and submission (seconds
    after the start) and the faults that were under way while it waited: where the tail of the
    waits comes from."""
    out = []
    for wait, name, at in sorted(waited, reverse=True):
        if wait < p95 or not wait:
            break
        met = [f"{f['kind']}@{f['at']:.0f}" for f in _met(faults, at, wait)]
        out.append(f"{name}: waited {wait:.0f} s from +{at:.0f} s; faults under way: {', '.join(met) or 'none'}")
    return out


def clear_waits(waited: list[tuple[float, str, float]], faults: list[dict[str, Any]]) -> list[float]:
    """The waits that met no ``BLOCKING`` fault: what elb's own choices and the faults that leave
    launching and scheduling possible (slow commands, busy cores, elb killed, a node killed, a play
    broken, a fleet filled in part) made of them."""
    return [wait for wait, _, at in waited if not any(f["kind"] in BLOCKING for f in _met(faults, at, wait))]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def _lines(path: Path) -> list[tuple[str, float]]:
    try:
        text = path.read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        host, _, t = line.partition(" ")
        try:
            out.append((host, float(t)))
        except ValueError:
            continue
    return out


def submit_once(
    tag: str,
    submit: Callable[[], str],
    find: Callable[[], str | None],
    say: Callable[[str], None],
    *,
    limit: float = 300,
) -> str:
    """Submit a job once: a submission that failed may have got in all the same (the controller
    took it, then its answer timed out: Slurm's sbatch says ``Socket timed out``), so before
    submitting again ``find`` asks the scheduler whether it did (asked again until it can say).
    A copy submitted twice would run twice, and count as a job elb started again."""
    deadline = time.monotonic() + limit
    while True:
        try:
            return submit()
        except Exception as err:
            if time.monotonic() > deadline:
                raise
            say(f"submit {tag} failed: {err}; is it in?")
        while True:
            time.sleep(2)
            try:
                found = find()
                break
            except Exception as err:
                if time.monotonic() > deadline:
                    raise
                say(f"cannot tell whether {tag} got in, asked again in 2 s: {err}")
        if found is not None:
            say(f"{tag} got in all the same (job {found})")
            return found


def on_killed_node(host: str, start: float, killed: Mapping[str, float]) -> bool:
    """Whether a run that started on ``host`` at ``start`` ran on a node the soak killed: ``host``
    was killed (``killed``: node -> when) after the run began. Slurm gives a name back to a new
    node: a run that began after the kill is on that new node, which the soak did not kill."""
    kill = killed.get(host)
    return kill is not None and start <= kill


def listed_on(qstat_xml: bytes | str, node: str) -> list[str]:
    """The jobs Grid Engine lists on ``node`` in ``qstat -u '*' -xml -r -f`` (read by elb's own
    parser), as qdel takes them: ``id``, or ``id.task`` for an array task."""
    jobs = parse_qstat(qstat_xml).jobs
    return sorted(
        {
            f"{j.job_id}.{j.task_ids}" if j.task_ids else str(j.job_id)
            for j in jobs
            if j.queue and j.queue.partition("@")[2] == node
        },
        key=lambda i: tuple(int(p) for p in i.split(".")),
    )


def tasks_of(ids: list[str], job_ids: Mapping[str, str]) -> list[tuple[str, str]]:
    """qdel's ids (``id`` or ``id.task``) as the soak's (tag, task), task 0 for a job that is
    not an array; an id the soak did not submit is left out."""
    tag_of = {jid: tag for tag, jid in job_ids.items() if jid.isdigit()}
    out = []
    for i in ids:
        jid, _, task = i.partition(".")
        if jid in tag_of:
            out.append((tag_of[jid], task or "0"))
    return out


def fate(
    starts: list[tuple[str, float]], done: list[tuple[str, float]], killed: Mapping[str, float], *, released: bool
) -> str:
    """What became of a task: ``done``; ``killed by the fault`` (its last run was on a node the
    soak killed, or the operator deleted it off a dead node where the scheduler listed it, though
    it never wrote its start there: ``released``); else ``lost``."""
    if done:
        return "done"
    if (starts and on_killed_node(*starts[-1], killed)) or released:
        return "killed by the fault"
    return "lost"


def task_runs(
    starts: list[tuple[str, float]], done: list[tuple[str, float]], killed: Mapping[str, float] | None = None
) -> list[tuple[str, float, float | None]]:
    """A task's runs, (host, start, end): the last ends when its ``done`` line says (None: not
    done); one that started again ended, at the latest, when the next run started (it wrote no
    end: its node died, or the scheduler sent it back), so it is not counted running on its
    first host after that; and one on a node the soak killed (``killed``: node -> when) ended, at
    the latest, at the kill (a node of the same name launched later does not run it)."""
    out: list[tuple[str, float, float | None]] = []
    for k, (host, t) in enumerate(starts):
        end = starts[k + 1][1] if k + 1 < len(starts) else (done[0][1] if done else None)
        kill = (killed or {}).get(host)
        if kill is not None and t <= kill and (end is None or end > kill):
            end = kill
        out.append((host, t, end))
    return out


class ElbProcess:
    """``elb run`` (with the faulty local cloud) in a session of its own: killed with its
    playbooks by SIGKILL of the group, or stopped by SIGTERM."""

    def __init__(self, cfg_path: Path, control: Path, log: Path, env: dict[str, str]) -> None:
        self.cfg_path, self.control, self.log, self.env = cfg_path, control, log, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "elbdev.testcluster.faults", "run", str(self.cfg_path), str(self.control)],
                cwd=REPO_ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=self.env,
            )

    def kill(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout: float = 300.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None


@dataclass
class Soak:
    """One run of the soak on the test cluster (``scheduler``: ``sge`` or ``slurm``; the caller
    has the cluster up, Slurm's controller too for ``slurm``, and this process in the master's
    UTS namespace, as the fault tests' fixtures do)."""

    tc: TestCluster
    scheduler: str
    cfg: Config  # elb's config; sge.bin_dir / slurm.bin_dir already the slow wrappers
    work: Path  # a directory of the run's own: control files, elb's log
    minutes: float
    seed: int
    faults: bool = True
    pace: Pace = HOUR
    # Let a job Slurm requeued off a killed node start at once, not after the 120 s it holds such
    # a job for (``start_requeued_now``): the lean run's, whose length is that wait otherwise.
    hurry_requeued: bool = False
    # The jobs' files (each task's start and done lines): a directory of the run's own, so that
    # two soaks can run at once (in the test session's two lanes: tests/lanes.py).
    home: Path = HOME
    drain_timeout: float = 600.0
    wind_down_timeout: float = 300.0
    say: Callable[[str], None] = print
    job_ids: dict[str, str] = field(default_factory=dict)
    submitted_at: dict[str, float] = field(default_factory=dict)
    killed_nodes: dict[str, float] = field(default_factory=dict)
    done_faults: list[dict[str, Any]] = field(default_factory=list)
    ctl_lock: threading.Lock = field(default_factory=threading.Lock)
    on_killed: list[tuple[str, str]] = field(default_factory=list)  # tasks cancelled for the node kills
    released: set[tuple[str, str]] = field(default_factory=set)  # tasks the operator deleted off dead nodes (SGE)

    @property
    def control(self) -> Path:
        return self.work / "cloud-faults.json"

    @property
    def delay_file(self) -> Path:
        return self.work / "command-delay"

    # ------------------------------------------------------------------ jobs

    def _script(self, sub: Submission) -> str:
        return JOB.format(home=self.home, tag=sub.tag, seconds=sub.seconds)

    def submit(self, sub: Submission) -> None:
        script = self._script(sub)

        def once() -> str:
            with self.ctl_lock:  # never while the controller is down for a fault
                return self._submit(sub, script)

        def find() -> str | None:
            with self.ctl_lock:
                return self._submitted(sub)

        self.job_ids[sub.tag] = submit_once(sub.tag, once, find, self.say)
        self.submitted_at[sub.tag] = time.time()

    def _submitted(self, sub: Submission) -> str | None:
        """The id of the job ``sub`` made, if a submission that seemed to fail got in (None: it
        did not); raises when the scheduler cannot say."""
        if self.scheduler == "sge":
            proc = self.tc.master_run(["qstat", "-u", C.CLUSTER_USER], check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"qstat: exit {proc.returncode}")
            ids = [f.split()[0] for f in proc.stdout.splitlines()[2:] if f.split()[2:3] == [sub.tag[:10]]]
        else:
            from elbdev.testcluster import slurm

            proc = subprocess.run(
                ["squeue", "-h", "-t", "all", "-u", C.CLUSTER_USER, "-n", sub.tag, "-o", "%A"],
                env={**os.environ, **slurm.env()}, capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            if proc.returncode != 0:
                raise RuntimeError(f"squeue: {proc.stderr.strip()}")
            ids = proc.stdout.split()
        if not ids and any(self.home.glob(f"{sub.tag}.*.start")):
            return "ran"  # it got in and ran already (its id no longer listed): nothing to cancel
        return ids[0] if ids else None

    def _submit(self, sub: Submission, script: str) -> str:
        if self.scheduler == "sge":
            extra = {"array": ["-t", f"1-{sub.tasks}"], "wide": ["-pe", "smp", "2"]}.get(sub.kind, [])
            return self.tc.submit(script, "-w", "n", "-N", sub.tag, "-o", "/dev/null", *extra)
        from elbdev.testcluster import slurm

        path = self.home / "jobs" / f"{sub.tag}.sh"
        path.write_text(script)
        extra = {"array": [f"--array=1-{sub.tasks}"], "wide": ["-N", "2", "--ntasks-per-node=1"]}.get(sub.kind, [])
        proc = subprocess.run(
            ["runuser", "-u", C.CLUSTER_USER, "--", "sbatch", "--parsable", "-p", slurm.PARTITION, "-J", sub.tag,
             "-o", "/dev/null", *extra, str(path)],
            env={**os.environ, **slurm.env()}, cwd=str(self.home), capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"sbatch: {proc.stderr.strip()}")
        return proc.stdout.strip().split(";")[0]

    def _tasks(self, subs: list[Submission]) -> list[tuple[str, str]]:
        """(tag, task) of every task submitted: task 0 for a job that is not an array."""
        return [
            (s.tag, str(t))
            for s in subs
            if s.tag in self.job_ids
            for t in (range(1, s.tasks + 1) if s.kind == "array" else [0])
        ]

    def _busy_hosts(self) -> dict[str, list[tuple[str, str]]]:
        """Host -> tasks started there (their last start) and not yet done."""
        out: dict[str, list[tuple[str, str]]] = {}
        for start in self.home.glob("*.start"):
            base = start.name[: -len(".start")]
            if (self.home / f"{base}.done").exists():
                continue
            lines = _lines(start)
            if lines:
                tag, _, task = base.partition(".")
                out.setdefault(lines[-1][0], []).append((tag, task))
        return out

    def _cancel(self, tasks: list[tuple[str, str]]) -> bool:
        ids = sorted(
            {
                self.job_ids[tag] + (f".{task}" if task != "0" else "")
                for tag, task in tasks
                if self.job_ids.get(tag, "").isdigit()
            }
        )
        if not ids:
            return True
        try:
            if self.scheduler == "sge":
                proc = self.tc.master_run(["qdel", "-f", *ids], check=False)
            else:
                from elbdev.testcluster import slurm

                sl = [i.replace(".", "_") for i in ids]
                proc = subprocess.run(
                    ["scancel", *sl],
                    env={**os.environ, **slurm.env()},
                    check=False,
                    timeout=60,
                    capture_output=True,
                    text=True,
                )
        except (TestClusterError, subprocess.TimeoutExpired) as err:
            # a controller the soak stopped or slowed: the operator asks again later
            self.say(f"cancelling {' '.join(ids)} failed ({err}); asked again later")
            return False
        if proc.returncode != 0:  # said, so that a job the scheduler will not let go of has its why in the log
            self.say(f"cancelling {' '.join(ids)}: exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[:300]}")
            return False
        return True

    def _listed_on(self, node: str) -> list[str]:
        """The jobs Grid Engine lists on ``node`` (``listed_on``); raises when qstat cannot say."""
        proc = self.tc.master_run(["qstat", *QSTAT_ARGS], check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"qstat: exit {proc.returncode}: {proc.stderr.strip()[:200]}")
        return listed_on(proc.stdout, node)

    def _release(self, node: str, seen: list[tuple[str, str]], tries: int = 20) -> None:
        """The operator's part when Grid Engine lost a node under jobs (no ``reschedule_unknown``
        here, so SGE lists them there until someone deletes them): delete the tasks seen start
        there and every job SGE lists there (one may have been dispatched as the node died, its
        start never written); ask again every half minute (a bounded number of times) while qstat
        cannot say, the delete fails, or SGE still lists a job there (``qdel -f`` before the
        qmaster counts the execd gone only marks a job for deletion). Once SGE lists nothing on
        the dead node its name is free, and the stand-in stops: a new node of that name is not its
        business."""
        try:
            listed: list[str] | None = self._listed_on(node)
        except (TestClusterError, subprocess.TimeoutExpired, RuntimeError, ValueError) as err:
            self.say(f"the jobs on {node} cannot be listed ({err}); asked again later")
            listed = None
        if listed:
            self.say(f"{node} (killed): SGE lists {' '.join(listed)} there; deleted")
        tasks = sorted({*seen, *tasks_of(listed or [], self.job_ids)})
        self.released.update(tasks)
        cancelled = self._cancel(tasks)
        if (listed is None or listed or not cancelled) and tries > 1:
            # what SGE lists there covers the tasks seen, once qstat answers
            again = seen if listed is None else []
            threading.Timer(30, self._release, args=(node, again, tries - 1)).start()

    def _hurry_requeued(self, until: float) -> None:
        """``hurry_requeued``: every 5 s until ``until``, each of the cluster user's jobs that
        Slurm holds as requeued (reason ``BeginTime``: the soak asks for no begin time) let start."""
        from tests.cluster.slurm_support import start_requeued_now

        while time.monotonic() < until:
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                for job in start_requeued_now("-u", C.CLUSTER_USER):
                    self.say(f"{job}: requeued, held by Slurm until its credential expires; let start")
            time.sleep(5)

    # ------------------------------------------------------------------ faults

    def _cloud_fault(self, key: str, seconds: float) -> dict[str, Any]:
        F.write_control(self.control, {**F.read_control(self.control), key: time.time() + seconds})
        return {"for": seconds}

    def inject(self, fault: Fault, elb: ElbProcess) -> dict[str, Any]:
        kind = fault.kind
        if kind == "ctl_restart":
            with self.ctl_lock:
                t = time.monotonic()
                F.restart_controller(self.scheduler)
                return {"took": round(time.monotonic() - t, 1)}
        if kind == "ctl_stop":
            with self.ctl_lock:
                return {"for": fault.seconds, "was_running": F.pause_controller(self.scheduler, fault.seconds)}
        if kind == "slow_cmds":
            delay = 3
            self.delay_file.write_text(f"{delay}\n")
            time.sleep(fault.seconds)
            self.delay_file.write_text("")
            return {"for": fault.seconds, "delay": delay}
        if kind == "node_kill":
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                workers = {w.name for w in self.tc.cloud().list_workers() if w.state == "running"}
                busy = {h: ts for h, ts in self._busy_hosts().items() if h in workers}
                if busy:
                    node = sorted(busy)[0]
                    subprocess.run(["podman", "kill", node], check=False, capture_output=True, timeout=60)
                    self.killed_nodes[node] = time.time()
                    if self.scheduler == "sge":
                        # SGE never gives up the jobs of a host it lost (no reschedule_unknown here): the
                        # operator deletes them, as the soak does half a minute later.
                        threading.Timer(30, self._release, args=(node, busy[node])).start()
                    elif self.hurry_requeued:
                        until = time.monotonic() + 300
                        threading.Thread(target=self._hurry_requeued, args=(until,), daemon=True).start()
                    return {"node": node, "tasks": [f"{a}.{b}" for a, b in busy[node]]}
                time.sleep(5)
            return {"skipped": "no node ran a job in two minutes"}
        if kind == "play_fail":
            ctl = F.read_control(self.control)
            F.write_control(self.control, {**ctl, "break_next": int(ctl.get("break_next", 0)) + 1})
            return {}
        if kind in ("throttle", "capacity", "partial"):
            return self._cloud_fault(f"{kind}_until", fault.seconds)
        if kind == "elb_kill":
            with elb.lock:
                elb.kill()
                time.sleep(3)
                elb.start()
            return {}
        if kind == "stress":
            subprocess.run(["stress-ng", "--cpu", "2", "--timeout", f"{int(fault.seconds)}s", "--quiet"], check=False)
            return {"for": fault.seconds}
        raise ValueError(kind)

    def _run_fault(self, fault: Fault, t0: float, elb: ElbProcess) -> None:
        time.sleep(max(0.0, t0 + fault.at - time.monotonic()))
        at = round(time.monotonic() - t0, 1)
        try:
            what = self.inject(fault, elb)
        except Exception as err:
            what = {"error": repr(err)}
        rec = {"at": at, "kind": fault.kind, **what}
        self.done_faults.append(rec)
        self.say(f"[{at:6.1f}] fault {json.dumps(rec)}")

    # ------------------------------------------------------------------ the run

    def run(self) -> Figures:
        self.work.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "jobs").mkdir(exist_ok=True)
        for p in (self.home, self.home / "jobs"):
            os.chown(p, C.CLUSTER_UID, C.CLUSTER_UID)
        for old in self.home.glob("s*.*"):
            old.unlink()
        F.write_control(self.control, {"scheduler": self.scheduler})
        self.delay_file.write_text("")
        subs = workload(self.minutes, self.seed, self.pace)
        sched = fault_schedule(self.minutes, self.seed, self.pace) if self.faults else []
        if any(f.kind == "stress" for f in sched) and shutil.which("stress-ng") is None:
            raise RuntimeError(
                "the soak keeps both cores busy with stress-ng: scripts/install-system-deps.sh installs it"
            )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
        if self.scheduler == "slurm":
            from elbdev.testcluster import slurm

            env.update(slurm.env())
        cfg_path = self.work / "elb.yml"
        write_config(self.cfg, cfg_path)
        elb = ElbProcess(cfg_path, self.control, self.work / "elb.log", env)
        self.say(
            f"soak {self.scheduler}: seed {self.seed}, {self.minutes:g} min, {len(subs)} jobs, "
            f"{len(sched)} faults: {[(f.at, f.kind) for f in sched]}; elb's log {elb.log}"
        )
        # Grid Engine's: the master (SGE, /etc/hosts, the exports) compared with how it was before
        baseline = cluster_state(self.tc) if self.scheduler == "sge" else None
        t0 = time.monotonic()
        started = time.time()
        elb.start()
        threads = [threading.Thread(target=self._run_fault, args=(f, t0, elb), daemon=True) for f in sched]
        for th in threads:
            th.start()
        try:
            for sub in subs:
                time.sleep(max(0.0, t0 + sub.at - time.monotonic()))
                self.submit(sub)
            for th in threads:
                th.join()
            tasks = self._tasks(subs)
            self._drain(tasks, t0, elb)
            leaked = self._wind_down(elb)
        finally:
            with elb.lock:
                rc = elb.stop()
            self.say(f"elb stopped (exit {rc})")
        fig = self._figures(subs, tasks, leaked, started, time.monotonic() - t0)
        if baseline is not None:
            self._check_master(fig, baseline)
        return fig

    def _check_master(self, fig: Figures, baseline: dict[str, object]) -> None:
        """SGE, /etc/hosts and the exports as they were before the run (``baseline``,
        tests/faults/support.py): each disagreement counted as a leak."""
        left = list(fig.leaked)  # the nodes left after the wind-down
        j = Journal(self.cfg.journal_path)
        try:
            fig.disagreements = disagreements(self.tc, j, baseline)
        finally:
            j.close()
        fig.leaked += [f"disagreement: {d}" for d in fig.disagreements]
        fig.nodes_leaked = leaked_count(left, fig.disagreements)

    def _drain(self, tasks: list[tuple[str, str]], t0: float, elb: ElbProcess) -> None:
        """Wait for every task to end; tasks on nodes the soak killed that are still not done
        once the rest are are cancelled (they were killed by the fault, not by elb)."""
        deadline = time.monotonic() + self.drain_timeout
        last = -1
        while time.monotonic() < deadline:
            with elb.lock:
                if elb.proc is not None and elb.proc.poll() is not None:
                    self.say(f"elb exited ({elb.proc.returncode}); started again")
                    elb.start()
            left = [t for t in tasks if not (self.home / f"{t[0]}.{t[1]}.done").exists()]
            on_killed = [t for t in left if t in self.released or self._last_run_killed(t)]
            if len(left) != last:
                self.say(
                    f"[{time.monotonic() - t0:6.1f}] {len(left)} tasks not done ({len(on_killed)} on killed nodes)"
                )
                last = len(left)
            if len(left) == len(on_killed):
                self.on_killed = [t for t in on_killed if t not in self.released]  # those the stand-in deletes
                self._cancel(self.on_killed)
                return
            time.sleep(5)
        self.say("drain timed out")

    def _last_run_killed(self, task: tuple[str, str]) -> bool:
        """Whether the task's last run was on a node the soak killed (``on_killed_node``)."""
        lines = _lines(self.home / f"{task[0]}.{task[1]}.start")
        return bool(lines) and on_killed_node(*lines[-1], self.killed_nodes)

    def _wind_down(self, elb: ElbProcess) -> list[str]:
        """With no jobs, elb removes its nodes: what is left after the wind-down is leaked."""
        deadline = time.monotonic() + self.wind_down_timeout
        while True:
            with elb.lock:
                if elb.proc is not None and elb.proc.poll() is not None:
                    elb.start()
            left = self._left()
            if not left or time.monotonic() > deadline:
                return left
            # qdel -f before the qmaster counts the dead node's execd as gone only marks the job for
            # deletion (seen once: it stayed running there); asked again, SGE forces it out.
            self._cancel(self.on_killed)
            time.sleep(5)

    def _left(self) -> list[str]:
        j = Journal(self.cfg.journal_path)
        try:
            live = {n.name for n in j.nodes() if n.state not in (NodeState.TERMINATED, NodeState.FAILED)}
        finally:
            j.close()
        workers = {w.name for w in self.tc.cloud().list_workers()}
        return sorted(live | workers)

    # ------------------------------------------------------------------ figures

    def _figures(
        self, subs: list[Submission], tasks: list[tuple[str, str]], leaked: list[str], started: float, seconds: float
    ) -> Figures:
        fig = Figures(self.scheduler, self.seed, self.minutes, self.faults, submissions=len(self.job_ids))
        fig.tasks = len(tasks)
        fig.seconds = round(seconds, 1)
        fig.faults_done = self.done_faults
        fig.leaked = leaked
        fig.nodes_leaked = len(leaked)
        own: dict[str, list[float]] = {n: [t] for n, t in self.killed_nodes.items()}  # name -> when its fault hit
        hits: list[dict[str, Any]] = []
        for line in (
            self.control.with_suffix(".log").read_text().splitlines()
            if self.control.with_suffix(".log").exists()
            else []
        ):
            rec = json.loads(line)
            if rec.get("fault") == "play_fail":
                own.setdefault(rec["node"], []).append(float(rec["time"]))
                # where the play the soak broke hit: the wait it lengthens is for that node
                hits.append({"at": float(rec["time"]) - started, "kind": f"play_fail({rec['node']})"})
        waits: list[float] = []
        waited: list[tuple[float, str, float]] = []  # wait, task, submitted (seconds after the start)
        runs: dict[str, list[tuple[float, float | None]]] = {}  # host -> (start, end) of each task's run there
        for tag, task in tasks:
            starts = _lines(self.home / f"{tag}.{task}.start")
            done = _lines(self.home / f"{tag}.{task}.done")
            name = f"{tag}.{task}"
            if starts:
                waits.append(max(0.0, starts[0][1] - self.submitted_at[tag]))
                waited.append((waits[-1], name, self.submitted_at[tag] - started))
            for host, t, end in task_runs(starts, done, self.killed_nodes):
                runs.setdefault(host, []).append((t, end))
            if any(not on_killed_node(h, t, self.killed_nodes) for h, t in starts[:-1]):
                fig.killed_by_elb.append(f"{name} started on {[h for h, _ in starts]}")
            what = fate(starts, done, self.killed_nodes, released=(tag, task) in self.released)
            if what == "done":
                fig.tasks_done += 1
            elif what == "killed by the fault":
                fig.tasks_killed_by_fault += 1
            else:
                fig.lost.append(f"{name} (starts {[h for h, _ in starts]})")
        fig.tasks_lost = len(fig.lost)
        fig.tasks_killed_by_elb = len(fig.killed_by_elb)
        fig.wait_p50 = round(percentile(waits, 0.5), 1)
        fig.wait_p95 = round(percentile(waits, 0.95), 1)
        fig.slowest = slowest(waited, fig.wait_p95, [*self.done_faults, *hits])
        clear = clear_waits(waited, self.done_faults)
        fig.tasks_clear, fig.wait_p95_clear = len(clear), round(percentile(clear, 0.95), 1)
        counts = journal_counts(self.cfg.journal_path, own, self.killed_nodes, runs, started, time.time())
        fig.launches, fig.node_seconds = counts.launches, counts.node_seconds
        fig.wasted, fig.failed_own, fig.busy_terminated = counts.wasted, counts.failed_own, counts.busy_terminated
        fig.launches_wasted = len(fig.wasted)
        fig.busy_nodes_terminated = len(fig.busy_terminated)
        fig.node_seconds = round(fig.node_seconds, 1)
        return fig


@dataclass
class JournalCounts:
    launches: int = 0
    node_seconds: float = 0.0
    wasted: list[str] = field(default_factory=list)
    failed_own: list[str] = field(default_factory=list)
    busy_terminated: list[str] = field(default_factory=list)


def lives(events: list[Event]) -> list[list[Event]]:
    """A node's events cut into its lives: a name launched again after it was terminated or
    failed (Slurm's node names come back; elb's own never do) starts another."""
    out: list[list[Event]] = []
    for e in events:
        if not out or out[-1][-1].state in (NodeState.TERMINATED, NodeState.FAILED):
            out.append([])
        out[-1].append(e)
    return out


def journal_counts(
    journal_path: Path,
    own: dict[str, list[float]],
    killed: dict[str, float],
    runs: dict[str, list[tuple[float, float | None]]],
    since: float,
    now: float,
) -> JournalCounts:
    """From the journal, for each life of a node that had an instance: a launch, its
    node-seconds (first launch step to terminated or failed, ``now`` if alive, or the soak's
    kill of its machine, ``killed``: a stopped instance bills no compute), wasted if it
    never became ready and no fault of its own (``own``: a name and when the fault hit it) fell
    in it; a termination while one of ``runs`` (the tasks' runs by host) was running there,
    unless the soak killed that life (``killed``)."""
    out = JournalCounts()
    j = Journal(journal_path)
    try:
        events = [e for e in j.events() if e.time >= since - 1]
    finally:
        j.close()
    by_node: dict[str, list[Event]] = {}
    for e in events:
        by_node.setdefault(e.node, []).append(e)
    for node, evs in by_node.items():
        for life in lives(sorted(evs, key=lambda e: e.time)):
            states = [e.state for e in life]
            launched = [e.time for e in life if e.state in (NodeState.LAUNCHING, NodeState.RUNNING)]
            if not launched or NodeState.RUNNING not in states:
                continue  # never had an instance (the launch failed in the cloud)
            out.launches += 1
            ended = life[-1].time if states[-1] in (NodeState.TERMINATED, NodeState.FAILED) else now
            # A machine the soak killed is paid for until the kill: a stopped instance bills no compute.
            kill = killed.get(node)
            paid_until = kill if kill is not None and life[0].time <= kill <= ended else ended
            out.node_seconds += paid_until - launched[0]
            hit = any(life[0].time <= t <= ended for t in own.get(node, []))
            if NodeState.READY not in states:
                why = next((e.detail for e in reversed(life) if e.detail), "")
                (out.failed_own if hit else out.wasted).append(f"{node}: {states[-1].value}: {why}"[:300])
            was_killed = node in killed and life[0].time <= killed[node] <= ended
            for e in life:
                if e.state is NodeState.TERMINATED and not was_killed:
                    busy = [r for r in runs.get(node, []) if r[0] < e.time and (r[1] is None or r[1] > e.time)]
                    if busy:
                        out.busy_terminated.append(f"{node} at {e.time:.0f} with {len(busy)} task(s) running")
    out.node_seconds = round(out.node_seconds, 1)
    return out


# ---------------------------------------------------------------------------------------- configs

MAX_NODES = 3  # the machine has 2 cores: three nodes and their plays are already a crowd


def soak_backoff(boot_time: float) -> dict[str, float]:
    """The launch back-off both schedulers' soaks run with: the daemon's default scaled to the
    soak's timescale as its ``policy.boot_time`` is scaled (40 s against the daemon's 300 s:
    8 s doubling up to 480 s, against 60 s up to an hour)."""
    scale = boot_time / PolicyConfig().boot_time
    default = BackoffConfig()
    return {"initial": default.initial * scale, "max": default.max * scale}


def _with(cfg: Config, bin_dir: Path, *, scheduler: str) -> Config:
    """``cfg`` with the scheduler's commands through the slow wrappers, a lost node given up
    after a minute (the daemon's default, 10 min, is longer than the lean run) and the soaks'
    back-off (``soak_backoff``)."""
    data = cfg.model_dump(mode="json")
    data.setdefault(scheduler, {})["bin_dir"] = str(bin_dir)
    return parse_config({**data, "unreachable_timeout": 60.0, "backoff": soak_backoff(cfg.policy.boot_time)})


def sge_soak_config(work: Path) -> Config:
    cfg = fault_config(work, boot_timeout=BATCH_BOOT_TIMEOUT, max_nodes=MAX_NODES, idle_time=20, boot_time=40)
    # The roles' own wait for a new execd (20 tries, 1 s apart), not the fault tests' short one.
    cfg = cfg.model_copy(update={"provision": cfg.provision.model_copy(update={"extra_vars": {}})})
    bins = F.slow_bin_dir(work / "bin", F.SGE_COMMANDS, work / "command-delay")
    return _with(cfg, bins, scheduler="sge")


def slurm_soak_config(work: Path) -> Config:
    from tests.cluster.slurm_support import slurm_config

    cfg = slurm_config(work, max_nodes=MAX_NODES, boot_time=40)
    bins = F.slow_bin_dir(work / "bin", F.SLURM_COMMANDS, work / "command-delay")
    return _with(cfg, bins, scheduler="slurm")


def leaked_count(left: list[str], disagreements: list[str]) -> int:
    """The nodes leaked: those ``left`` after the wind-down, and each disagreement that names none
    of them (a node left is counted once, whatever the disagreements say of it)."""
    named = [d for d in disagreements if not any(re.search(rf"\b{re.escape(n)}\b", d) for n in left)]
    return len(left) + len(named)


def clean_up(tc: TestCluster, scheduler: str) -> None:
    """After a run, pass or fail: the cluster user's jobs gone, every worker left taken out of the
    master and terminated (the run's own count of leaks was made before)."""
    if scheduler == "sge":
        tc.master_run(["qdel", "-f", "-u", C.CLUSTER_USER], check=False)
        left = [w.name for w in tc.workers()]
        if left:
            tc.remove_nodes(left)
        tc.cloud().terminate([w.instance_id for w in tc.cloud().list_workers()])
    else:
        from elbdev.testcluster import slurm
        from tests.cluster.slurm_support import remove_left_workers

        subprocess.run(["scancel", "-u", C.CLUSTER_USER], env={**os.environ, **slurm.env()}, check=False)
        remove_left_workers(tc)
