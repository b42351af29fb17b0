"""Benchmark (not a test): what a peek costs beside a pass's read of SGE, at 50,000 waiting jobs.

The input is ``bench_pass.py``'s (its ``make_qstat`` and ``make_qhost``: 50,000 waiting entries,
plain, array, smp, mpi and ``-q`` jobs, one in fifty held, and 1,000 hosts running four jobs
each). The peek's ``qstat -s p -u '*'`` is written for the same waiting entries in qstat 8.1.9's
plain format (one line a job; its name and owner, its state, its submission time, its slots, an
array's task range), from what the pass's read made of the XML. Then, each the best of
``--repeat`` rounds of CPU time:

- the pass's read: ``SgeCommands.read_snapshot`` over both XML documents (qstat's and qhost's
  parsed, checked to agree, joined into a snapshot), the reader's memo reset every round (every
  entry made anew: a read where the whole queue changed), and with it kept (5% of the queue
  changed: ``bench_pass.py``'s churn);
- the peek: ``SgeCommands.waiting_jobs`` over the plain text (``elb.schedulers.sge.peek``), and
  the set of new job numbers against the last peek (``elb.core.cadence.news``);
- each command's output through a pipe, as elb runs a command (``elb.schedulers.process``:
  ``cat`` of the output, process start-up included; wall seconds, the CPU of both sides).

Left out, as it cannot be measured here (no qmaster of that size): the qmaster's own work for
each request. Its answer's size is shown, the bytes it writes.

    python benchmarks/bench_peek.py [--jobs 50000] [--hosts 1000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pass import make_qhost, make_qstat

from elb.core.cadence import news
from elb.core.model import Job
from elb.core.scheduler import Peek
from elb.schedulers.process import CommandResult, run_command
from elb.schedulers.sge.commands import QHOST_ARGS, QSTAT_ARGS, SgeCommands
from elb.schedulers.sge.config import SgeConfig
from elb.schedulers.sge.peek import PEEK_ARGS

NOW = 1_800_000_000.0
HEADER = (
    "job-ID  prior   name       user         state submit/start at     queue                          "
    "slots ja-task-ID \n" + "-" * 113 + "\n"
)


def plain_line(j: Job) -> str:
    """The job's line as ``qstat -s p`` prints it (8.1.9)."""
    when = time.strftime("%m/%d/%Y %H:%M:%S", time.localtime(j.submitted or NOW))
    tasks = j.task_ids or ""
    return (
        f"{j.job_id:>7} {j.priority:.5f} {j.name[:10]:<10} {j.owner[:12]:<12} {j.state:<5} {when} "
        f"{'':<30} {j.slots:>5} {tasks}\n"
    )


def commands(outputs: Mapping[str, bytes], bin_dir: Path) -> SgeCommands:
    """``SgeCommands`` whose runner answers each command with ``outputs`` (no process)."""

    def runner(argv: Sequence[str], *, timeout: float, env: Mapping[str, str]) -> CommandResult:
        del timeout, env
        args = tuple(argv[1:])
        key = {QSTAT_ARGS: "qstat", QHOST_ARGS: "qhost", PEEK_ARGS: "peek"}[args]
        return CommandResult(tuple(argv), 0, outputs[key], "")

    for name in ("qstat", "qhost"):
        path = bin_dir / name
        path.write_text("#!/bin/sh\nexit 1\n")
        path.chmod(0o755)
    return SgeCommands(SgeConfig(bin_dir=bin_dir), runner=runner, clock=lambda: NOW)


def best_cpu(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return best


def piped(path: Path, repeat: int) -> tuple[float, float]:
    """Best wall seconds and CPU seconds (elb's and ``cat``'s) of reading ``path`` through a pipe
    as elb runs a command."""
    walls, cpus = [], []
    for _ in range(repeat):
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        c0, w0 = time.process_time(), time.perf_counter()
        run_command(["cat", str(path)], timeout=60.0, env=dict(os.environ))
        walls.append(time.perf_counter() - w0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        child = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
        cpus.append(time.process_time() - c0 + child)
    return min(walls), min(cpus)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=50_000)
    ap.add_argument("--hosts", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--peek", type=float, default=5.0, help="seconds between peeks, for the cost an hour")
    ap.add_argument("--poll", type=float, default=60.0, help="seconds between passes, for the cost an hour")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        qstat_xml = make_qstat(args.jobs, args.hosts, random.Random(42))
        churned = make_qstat(args.jobs, args.hosts, random.Random(42), turn=1, churn=0.05)
        qhost_xml = make_qhost(args.hosts)
        outputs = {"qstat": qstat_xml, "qhost": qhost_xml}
        snap = commands(outputs, d).read_snapshot()
        waiting = [j for j in snap.jobs if j.queue is None]
        plain = (HEADER + "".join(plain_line(j) for j in waiting)).encode()
        outputs["peek"] = plain
        client = commands(outputs, d)
        seen = client.waiting_jobs(5.0)
        eligible = sum(1 for j in waiting if "h" not in j.state and "E" not in j.state)
        assert len(seen) == eligible, (len(seen), eligible)
        print(
            f"input: {len(waiting):,} waiting entries ({eligible:,} neither held nor in error), "
            f"{len(snap.jobs) - len(waiting):,} running jobs, {args.hosts:,} hosts"
        )

        def cold_read() -> None:
            commands(outputs, d).read_snapshot()

        warm = commands(outputs, d)
        warm.read_snapshot()
        turn = [qstat_xml, churned]

        def warm_read() -> None:  # 5% of the queue changed since the last read
            turn.reverse()
            outputs["qstat"] = turn[0]
            warm.read_snapshot()

        before = Peek(seen - {next(iter(seen))})
        other = plain.replace(b"0.", b"1.", 1)  # another output (a priority moved): parsed anew

        def peek() -> None:  # the output changed since the last peek: parsed
            outputs["peek"] = other if outputs["peek"] is plain else plain
            news(before, Peek(client.waiting_jobs(5.0)))

        def same() -> None:  # the same output as the last peek's: compared, not parsed
            news(before, Peek(client.waiting_jobs(5.0)))

        read_cold = best_cpu(cold_read, args.repeat)
        read_warm = best_cpu(warm_read, args.repeat)
        outputs["qstat"] = qstat_xml
        peek_cpu = best_cpu(peek, args.repeat * 3)
        same_cpu = best_cpu(same, args.repeat * 3)
        files = {"qstat": d / "qstat.xml", "qhost": d / "qhost.xml", "peek": d / "peek.txt"}
        files["qstat"].write_bytes(qstat_xml)
        files["qhost"].write_bytes(qhost_xml)
        files["peek"].write_bytes(plain)
        pipes = {k: piped(p, args.repeat) for k, p in files.items()}
        full_bytes = len(qstat_xml) + len(qhost_xml)
        full_pipe = pipes["qstat"][1] + pipes["qhost"][1]
        full_wall = pipes["qstat"][0] + pipes["qhost"][0]
        per_hour_peeks = 3600 / args.peek
        per_hour_passes = 3600 / args.poll
        rows = [
            ("output read (bytes)", f"{full_bytes / 1e6:.1f} MB", f"{len(plain) / 1e6:.2f} MB",
             f"{full_bytes / len(plain):.0f}x"),
            ("through a pipe, as elb runs a command (wall, best)", f"{full_wall * 1000:.0f} ms",
             f"{pipes['peek'][0] * 1000:.0f} ms", f"{full_wall / pipes['peek'][0]:.1f}x"),
            ("the same, CPU of both sides", f"{full_pipe * 1000:.0f} ms", f"{pipes['peek'][1] * 1000:.0f} ms",
             f"{full_pipe / pipes['peek'][1]:.1f}x"),
            ("parsed (CPU, best): every entry new", f"{read_cold * 1000:.0f} ms", f"{peek_cpu * 1000:.1f} ms",
             f"{read_cold / peek_cpu:.0f}x"),
            ("parsed (CPU, best): 5% of the queue changed", f"{read_warm * 1000:.0f} ms",
             f"{peek_cpu * 1000:.1f} ms", f"{read_warm / peek_cpu:.0f}x"),
            ("the peek's output the same as the last one's (compared, not parsed)", "",
             f"{same_cpu * 1000:.2f} ms", ""),
            (f"an hour's CPU: a pass's read every {args.poll:g} s, a peek every {args.peek:g} s (each output changed)",
             f"{(read_warm + full_pipe) * per_hour_passes:.1f} s",
             f"{(peek_cpu + pipes['peek'][1]) * per_hour_peeks:.1f} s",
             f"{(peek_cpu + pipes['peek'][1]) * per_hour_peeks / ((read_warm + full_pipe) * per_hour_passes):.2f}x"),
        ]  # fmt: skip
        print("| measure | the pass's read (qstat -xml -r -f, qhost -xml -q) | the peek (qstat -s p) | ratio |")
        print("|---|---:|---:|---:|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
        print(f"load average at the end: {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d', time.gmtime())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
