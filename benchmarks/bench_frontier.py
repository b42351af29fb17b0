"""Each policy's frontier on the shared logs, and the clairvoyant bound: docs/results/frontiers.md.

For each case below (a held-out window of each shared log, KTH also with overruns) it replays elb,
Slurm, ParallelCluster and StarCluster over their own knobs (``elb simulate --sweep``: the same
``elb.simulate.sweep`` code, the replays in ``--workers`` processes), runs the clairvoyant replay
(``elb.simulate.bound``), draws each case's frontiers into ``docs/results/frontier-<case>.png``
and writes the page with the tables and the verdicts; what follows its marker (``KEPT``) is written
by hand and kept when the page is written again. Usage::

    python benchmarks/bench_frontier.py                 # every case: the page and its pictures
    python benchmarks/bench_frontier.py --days 5 --out /tmp/fr   # a quick look elsewhere
    python benchmarks/bench_frontier.py --render-only   # the page again from frontiers.json, no replay

The logs live outside the repository (``../shared/traces``, ``$ELB_TRACES`` or ``--traces``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elb.core.config import PolicyConfig
from elb.simulate.bound import Bound, clairvoyant
from elb.simulate.engine import SimSettings
from elb.simulate.frontier import Against, Point, compare, frontiers, plot, verdict
from elb.simulate.report import fmt_wait
from elb.simulate.runner import prepare
from elb.simulate.sweep import KNOBS, Setup, default_workers, plan_runs, run_all
from elb.simulate.swf import overrun, read_swf

REPO = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("ELB_TRACES", REPO.parent / "shared" / "traces"))
POLICIES = ("elb", "slurm", "parallelcluster", "starcluster")
SPN, BOOT, POLL, CAP = 8, 300.0, 60.0, 4.0
# elb's quick reaction as the daemon's defaults have it: a peek every PEEK s, a pass at the first one
# that sees a new job waiting, PEEK_GAP s at least after the last pass. Beside the sweep: elb's
# defaults with plain polling (a pass every 60 s only: the reaction's worth), and the cheaper end of
# its idle knob.
PEEK, PEEK_GAP = PolicyConfig().peek_interval, PolicyConfig().peek_gap
CHEAP_IDLE = "0.0625"
# And elb as quick as an admin may make it: a peek every 2 s, a pass at most every 2 s, over the
# default idle rule and longer ones, up to idle nodes kept 16 boots (the peers' quickest points keep
# theirs 30 minutes and more: elb's frontier is compared with them at the quick end too).
QUICKEST, QUICKEST_IDLE = 2.0, ("0.5", "4", "6", "8", "12", "16")
COMMAND = "python benchmarks/bench_frontier.py"
# What follows this line in the page is written by hand (what the figures were found to mean) and
# kept when the page is written again.
KEPT = "<!-- written by hand below: kept by bench_frontier.py -->"
WINDOWS = (
    "Windows: the held-out halves of the logs (elb's defaults were chosen on the first halves), "
    "KTH's first 60 days of its half. NASA's log records no requested run times, so overruns "
    "(jobs made to run past them) change nothing there: it has no overrun case."
)


@dataclass(frozen=True)
class Case:
    slug: str
    name: str
    log: str
    start: float  # days
    days: float | None
    overrun: float = 0.0
    title: str = ""  # set by ``run_case``: the name and the window replayed

    def args(self, days: float | None) -> str:
        span = days if days is not None else self.days
        text = f"--start {self.start:g}" + (f" --days {span:g}" if span is not None else "")
        return text + (f" --overrun {self.overrun:g}" if self.overrun else "")


CASES = (
    Case("kth", "KTH-SP2", "KTH-SP2-1996-2.2-cln.swf.gz", 173.4, 60.0),
    Case("kth-overrun", "KTH-SP2, 10% of the jobs overrunning", "KTH-SP2-1996-2.2-cln.swf.gz", 173.4, 60.0, 0.10),
    Case("nasa", "NASA-iPSC", "NASA-iPSC-1993-3.1-cln.swf.gz", 46.0, None),
)


@dataclass
class Outcome:
    case: Case
    points: list[Point]
    bound: Bound
    floor: float
    jobs: int
    seconds: float

    def as_dict(self) -> dict[str, object]:
        return {
            "case": dataclasses.asdict(self.case),
            "points": [p.as_dict() for p in self.points],
            "bound": self.bound.as_dict(),
            "floor": self.floor,
            "jobs": self.jobs,
            "seconds": self.seconds,
        }

    @classmethod
    def of(cls, data: dict[str, Any]) -> Outcome:
        return cls(
            Case(**data["case"]),
            [Point(**p) for p in data["points"]],
            Bound(**data["bound"]),
            data["floor"],
            data["jobs"],
            data["seconds"],
        )


def run_case(case: Case, traces: Path, workers: int, days: float | None, out: Path) -> Outcome:
    wl = read_swf(traces / case.log, case.start * 86400.0, days if days is not None else case.days)
    wl = overrun(wl, case.overrun)
    last = max(j.submit for j in wl.jobs) / 86400.0
    case = dataclasses.replace(case, title=f"{case.name}, jobs submitted on days {case.start:g}-{last:.1f}")
    cap = max(1, round(CAP * -(-(wl.max_procs or max(j.slots for j in wl.jobs)) // SPN)))
    prepared = prepare(wl, SPN, cap)
    settings = SimSettings(
        slots_per_node=SPN,
        max_nodes=prepared.max_nodes,
        boot_time=BOOT,
        poll_interval=POLL,
        peek_interval=PEEK,
        peek_gap=PEEK_GAP,
    )
    setup = Setup(prepared, None, settings, "second", 1.0, BOOT, POLL, None)
    specs = [
        *plan_runs(setup, POLICIES, [], [""]),
        *(
            dataclasses.replace(spec, default=False)
            for spec in plan_runs(setup, ("elb",), [], [f"idle_factor={CHEAP_IDLE}"])
        ),
    ]
    plain = dataclasses.replace(setup, settings=dataclasses.replace(settings, peek_interval=0.0))
    plain_specs = [
        dataclasses.replace(spec, swept=(("peek", "0"), *spec.swept), default=False)
        for spec in plan_runs(plain, ("elb",), [], [])
    ]
    quickest = dataclasses.replace(
        setup, settings=dataclasses.replace(settings, peek_interval=QUICKEST, peek_gap=QUICKEST)
    )
    quickest_specs = [
        dataclasses.replace(
            spec, swept=(("peek", f"{QUICKEST:g}"), ("peek_gap", f"{QUICKEST:g}"), *spec.swept), default=False
        )
        for spec in plan_runs(quickest, ("elb",), [], [f"idle_factor={','.join(QUICKEST_IDLE)}"])
    ]
    t = time.perf_counter()
    results = (
        run_all(setup, specs, workers)
        + run_all(plain, plain_specs, workers)
        + run_all(quickest, quickest_specs, workers)
    )
    specs = [*specs, *plain_specs, *quickest_specs]
    bound = clairvoyant(prepared, settings, price=1.0)
    seconds = time.perf_counter() - t
    points = [Point.of(s, m) for s, m in zip(specs, results, strict=True)]
    return Outcome(case, points, bound, prepared.floors.floor_node_hours, len(prepared.jobs), seconds)


def draw(o: Outcome, out: Path) -> None:
    plot(
        o.points, out / f"frontier-{o.case.slug}.png", f"{o.case.title}: 8-slot nodes, 300 s boot, per second", o.bound
    )


def _row(p: Point, on: bool) -> str:
    knob = (p.knobs or "(defaults)") + (" (default)" if p.default else "")
    mark = "yes" if on else ("never drains" if not p.drains else "")
    return f"| {p.policy} | {knob} | {p.cost:,.0f} | {p.x_floor:.2f} | {fmt_wait(p.p95)} | {mark} |"


def section(o: Outcome, days: float | None) -> list[str]:
    fronts = frontiers(o.points)
    on = {id(p) for f in fronts.values() for p in f}
    against = compare(fronts, slack=POLL)
    lines = [
        f"### {o.case.title}",
        "",
        f"{o.jobs:,} jobs; cost floor {o.floor:,.0f} node-h; replayed in {o.seconds:.0f} s. Regenerate this "
        f"picture alone: `elb simulate {o.case.log} {o.case.args(days)} --max-nodes 4x "
        f"--policies {','.join(POLICIES)} --sweep --bound --plot frontier-{o.case.slug}.png`",
        "",
        f"![frontiers, {o.case.title}](frontier-{o.case.slug}.png)",
        "",
        "| policy | knob | cost (node-h) | x floor | p95 wait | on its frontier |",
        "|---|---|---:|---:|---:|---|",
    ]
    shown = [p for p in o.points if id(p) in on or p.default]
    order = {name: i for i, name in enumerate(POLICIES)}
    lines.extend(_row(p, id(p) in on) for p in sorted(shown, key=lambda p: (order[p.policy], p.p95, p.cost)))
    b = o.bound
    lines.append(f"| clairvoyant bound | | {b.cost:,.0f} | {b.cost_over_floor:.2f} | {fmt_wait(b.wait_p95)} | |")
    lines += ["", f"**Verdict:** {verdict(against)}.", ""]
    for name in POLICIES[1:]:
        mine = [a for a in against if a.peer.policy == name]
        if not mine:
            lines.append(f"- {name}: no point on a frontier (its queue never drains at any knob value).")
            continue
        missed = [a for a in mine if not a.below]
        near = [a for a in mine if not a.below_near]
        text = f"- {name}: on or below at {len(mine) - len(missed)} of {len(mine)} of its frontier's points"
        if missed:
            text += "; not at " + ", ".join(f"{a.peer.knobs} ({_why(a)})" for a in missed)
        text += f". Within one poll ({POLL:g} s) of its p95: on or below at {len(mine) - len(near)} of {len(mine)}"
        if near:
            text += "; not at " + ", ".join(f"{a.peer.knobs} ({_why(a, near=True)})" for a in near)
        lines.append(text + ".")
    lines.append("")
    return lines


def _why(a: Against, *, near: bool = False) -> str:
    ours = a.near if near else a.ours
    if ours is None:
        least = f"{a.quickest.p95:.0f} s" if a.quickest is not None else "none"
        return f"p95 {a.peer.p95:.0f} s; elb's quickest {least}"
    change = (ours.cost / a.peer.cost - 1) * 100
    return f"p95 {a.peer.p95:.0f} s at {a.peer.cost:,.0f}; elb {ours.cost:,.0f} at {ours.p95:.0f} s ({change:+.1f}%)"


def bound_table(outcomes: list[Outcome]) -> list[str]:
    lines = [
        "| case | bound cost (x floor) | bound p95 | elb's defaults: cost, p95 | above the bound | "
        "elb's cheapest draining replay | above the bound |",
        "|---|---:|---:|---|---:|---|---:|",
    ]
    for o in outcomes:
        b = o.bound
        elb = [p for p in o.points if p.policy == "elb"]
        default = next(p for p in elb if p.default)
        cheap = min((p for p in elb if p.drains), key=lambda p: p.cost)
        lines.append(
            f"| {o.case.title} | {b.cost:,.0f} ({b.cost_over_floor:.2f}) | {fmt_wait(b.wait_p95)} | "
            f"{default.cost:,.0f}, {fmt_wait(default.p95)} | {(default.cost / b.cost - 1) * 100:+.1f}% | "
            f"{cheap.knobs}: {cheap.cost:,.0f}, {fmt_wait(cheap.p95)} | {(cheap.cost / b.cost - 1) * 100:+.1f}% |"
        )
    return lines


def summary(outcomes: list[Outcome]) -> list[str]:
    """Where elb is not on or below a peer's frontier, case by case, and within a poll."""
    lines = []
    for o in outcomes:
        against = compare(frontiers(o.points), slack=POLL)
        peers = sorted({a.peer.policy for a in against if not a.below})
        quickest = min((p.p95 for p in o.points if p.policy == "elb" and p.drains), default=float("nan"))
        text = f"- {o.case.title}: {verdict(against)}."
        if peers:
            text += (
                f" Every miss is a peer point quicker than elb's quickest replay ({quickest:.0f} s at p95)"
                if all(a.ours is None for a in against if not a.below)
                else " Some misses are dearer elb replays at the peer's wait"
            )
            text += f" ({', '.join(peers)})."
        lines.append(text)
    return lines


def why(outcomes: list[Outcome]) -> str:
    """What the misses have in common, said only where the figures show it."""
    against = [a for o in outcomes for a in compare(frontiers(o.points), slack=POLL)]
    slurm = [a for a in against if a.peer.policy == "slurm"]
    parts = []
    if slurm and all(a.ours is None for a in slurm):
        parts.append(
            "Slurm's power saving decides every 10 s: a job that needs a new node waits a boot plus up "
            "to 10 s under Slurm, whatever its idle knob, and no elb replay here reaches Slurm's p95."
        )
    pc = [a for a in against if a.peer.policy == "parallelcluster" and not a.below]
    if pc and all(a.ours is None for a in pc):
        parts.append(
            "ParallelCluster's quickest points keep idle nodes long (at "
            f"{min(a.peer.x_floor for a in pc):.2f}-{max(a.peer.x_floor for a in pc):.2f}x the cost floor) "
            "and start some bursts on them, quicker than any elb replay."
        )
    if against and all(a.below_near for a in against):
        parts.append("Within one poll of the peer's p95, elb is on or below every peer's frontier in every case.")
    if all(not any(p.drains for p in o.points if p.policy == "starcluster") for o in outcomes):
        parts.append("StarCluster's queue never drains at any `wait_time`: it has no frontier.")
    return " ".join(parts)


def bound_sentence(outcomes: list[Outcome]) -> str:
    parts = []
    for o in outcomes:
        default = next(p for p in o.points if p.policy == "elb" and p.default)
        parts.append(
            f"{o.case.title}: {(default.cost / o.bound.cost - 1) * 100:+.1f}% at a p95 of {fmt_wait(default.p95)}"
        )
    return "elb's defaults against the bound: " + "; ".join(parts) + "."


def beaten(o: Outcome) -> list[Point]:
    """The peers' draining points that beat elb's defaults on both axes: a p95 and a cost at most
    elb's, one of them less."""
    mine = next(p for p in o.points if p.policy == "elb" and p.default)
    return [
        p
        for p in o.points
        if p.policy != "elb" and p.drains and p.cost <= mine.cost and p.p95 <= mine.p95
        if p.cost < mine.cost or p.p95 < mine.p95
    ]


def beaten_lines(outcomes: list[Outcome]) -> list[str]:
    lines = []
    for o in outcomes:
        mine = next(p for p in o.points if p.policy == "elb" and p.default)
        plain = next((p for p in o.points if p.policy == "elb" and p.knobs == "peek=0"), None)
        text = f"- {o.case.title}: elb's defaults {mine.cost:,.0f} at {mine.p95:.0f} s"
        if plain is not None:
            text += f" (with plain polling: {plain.cost:,.0f} at {plain.p95:.0f} s)"
        by = beaten(o)
        if by:
            text += "; beaten on both axes by " + ", ".join(
                f"{p.policy} {p.knobs} ({p.cost:,.0f} at {p.p95:.0f} s)" for p in by
            )
        else:
            text += "; no peer's point beats them on both axes"
        lines.append(text + ".")
    return lines


def page(outcomes: list[Outcome], days: float | None, run: dict[str, Any]) -> str:
    wall, workers, load, day = run["wall"], run["workers"], run["load"], run["day"]
    knobs = "; ".join(f"{name}: " + " x ".join(f"`{k}` {', '.join(vs)}" for k, vs in KNOBS[name]) for name in POLICIES)
    knobs += (
        f"; and elb at `idle_factor` {CHEAP_IDLE}, elb's defaults with plain polling (`peek=0`), and elb peeking "
        f"every {QUICKEST:g} s with a pass at most every {QUICKEST:g} s over `idle_factor` {', '.join(QUICKEST_IDLE)}"
    )
    procs = "process" if workers == 1 else "processes"
    head = [
        "# Frontiers: what each wait costs, per policy",
        "",
        f"Regenerate: `{COMMAND}` (the page and its pictures; {wall / 60:.0f} min on {workers} {procs} of a "
        f"2-core machine shared with other work, load average {load:.1f} at the end; "
        f"{day}).",
        "",
        "Each policy replayed over its own knob (`elb simulate --sweep`): " + knobs + ". Every replay: "
        f"8-slot nodes, 300 s boot, 60 s polls with elb's quick reaction as the daemon's defaults have it (a peek "
        f"every {PEEK:g} s, a pass at the first that sees a new job waiting, {PEEK_GAP:g} s at least after the last "
        "pass: `elb simulate --peek`; `peek=0`: a pass every poll only), Slurm's own pass every 10 s, "
        "per-second billing (EC2's 60 s minimum), price 1 per node-hour, the cluster capped at 4x the "
        "log's machine, SGE's dispatch without reservations. A policy's **frontier** is its replays "
        "that no other of its replays beats on both p95 wait and cost; a replay whose queue never drains (jobs never "
        "start, or a backlog over a quarter of the replay) is drawn as an x and is on no frontier. In "
        "each picture: a line per policy's frontier (a step: the least cost at each wait), every "
        "replay a dot, each policy's defaults a star, the clairvoyant bound a black diamond; the axis "
        "spans the waits of the replays that drain, and a point off it (the bound's p95 of 0, "
        "StarCluster's hours) sits at its edge with its p95 written beside it. elb is **on or below** "
        "a peer's frontier at a point of it when one of elb's replays has a p95 at most the peer's "
        "and costs at most as much.",
        "",
        WINDOWS,
        "",
        "## The lower bound",
        "",
        "The clairvoyant replay (`elb/simulate/bound.py`; `elb simulate LOG --bound`) knows every "
        "job's arrival and true run time: the jobs run where and when the replay's dispatcher runs "
        "them on a cluster of the cap that is always ready, each node is launched exactly a boot "
        "before the first job it runs and removed the moment it empties, unless its next job comes "
        "within a boot (then it is kept idle through the gap). No policy whose jobs start at those "
        "times on that placement can cost less. A policy that makes jobs wait may: jobs that wait for "
        "a booting node start together and pack tighter than jobs started at their submission, and "
        "a node launched at a job's submission pays the same boot as the bound's node launched ahead "
        "of it. So the bound holds at its own waits (its p95 in the table), not at elb's; below the bound at "
        "a longer wait means elb buys its waits back in packing, not that the bound is wrong. The "
        "cost floor (slot-seconds / slots per node) holds at any wait.",
        "",
        *bound_table(outcomes),
        "",
        bound_sentence(outcomes),
        "",
        "## elb's defaults against every peer's point",
        "",
        *beaten_lines(outcomes),
        "",
        "## Where elb's frontier is not on or below a peer's",
        "",
        *summary(outcomes),
        "",
        why(outcomes),
        "",
        "## The frontiers",
        "",
    ]
    body: list[str] = []
    for o in outcomes:
        body += section(o, days)
    return "\n".join(head + body)


def write_page(path: Path, generated: str) -> None:
    """The page at ``path``: ``generated``, then the marker and the part written by hand below the
    marker of the page there now (none on a new page)."""
    kept = ""
    if path.exists() and KEPT in (old := path.read_text()):
        kept = old.split(KEPT, 1)[1]
    path.write_text(generated + "\n" + KEPT + (kept or "\n"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=Path, default=TRACES)
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "results")
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--days", type=float, default=None, help="shorter windows (a quick look; not the page's)")
    ap.add_argument("--cases", default=",".join(c.slug for c in CASES))
    ap.add_argument(
        "--render-only",
        action="store_true",
        help="no replay: the page and pictures from the figures the last run saved (frontiers.json)",
    )
    args = ap.parse_args(argv)
    wanted = args.cases.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    saved = args.out / "frontiers.json"
    if args.render_only:
        run = json.loads(saved.read_text())
        outcomes = [Outcome.of(o) for o in run.pop("outcomes")]
    else:
        t = time.perf_counter()
        outcomes = []
        for case in CASES:
            if case.slug not in wanted:
                continue
            o = run_case(case, args.traces, args.workers, args.days, args.out)
            print(f"{case.slug}: {len(o.points)} replays in {o.seconds:.0f} s", file=sys.stderr)
            outcomes.append(o)
        run = {
            "wall": time.perf_counter() - t,
            "workers": args.workers,
            "load": os.getloadavg()[0],
            "day": time.strftime("%Y-%m-%d", time.gmtime()),
            "days": args.days,
        }
        saved.write_text(json.dumps({**run, "outcomes": [o.as_dict() for o in outcomes]}, indent=1) + "\n")
    for o in outcomes:
        draw(o, args.out)
    write_page(args.out / "frontiers.md", page(outcomes, run["days"], run))
    print(f"wrote {args.out / 'frontiers.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
