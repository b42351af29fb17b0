"""The comparison matrix: elb against the elastic peers on both logs, billing models and settings.

For every log in ``--traces`` (both SWF logs by default), both billing models, both settings
(8-slot nodes with 300 s boot; 32-slot nodes with 120 s boot), the cluster capped at ``--cap`` times
the log's machine, and each window (first half, second half, whole log), it replays elb and the
peers (starcluster, parallelcluster, slurm) through ``elb simulate``'s engine and prints one table
per case with the bar checked:

1. elb's p95 wait <= the quickest elastic peer's p95 + one poll interval, and elb's cost <= the
   cheapest elastic peer's;
2. per-hour billing: elb's cost <= 90% of Slurm's.

The peers' results do not depend on elb, so they are cached (``--cache``, JSON) keyed by case.
Replays run in ``--workers`` processes. Usage::

    python benchmarks/bench_policy_compare.py                       # everything (~40 replays of elb)
    python benchmarks/bench_policy_compare.py --windows first       # tuning half only
    python benchmarks/bench_policy_compare.py --set idle_factor=1.5 # an elb option changed
    python benchmarks/bench_policy_compare.py --markdown            # tables for docs/policy.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from elb.simulate.engine import SimSettings
from elb.simulate.runner import build_policy, prepare, replay, with_param
from elb.simulate.swf import Workload, overrun, read_swf, window

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = REPO.parent / "shared" / "traces"
PEERS = ("starcluster", "parallelcluster", "slurm")
SETTINGS = {"8/300": (8, 300.0), "32/120": (32, 120.0)}
BILLINGS = ("second", "hour")
WINDOWS = ("first", "second", "whole")


@dataclass(frozen=True)
class Case:
    log: str  # path
    billing: str
    setting: str
    window: str
    poll: float
    cap: float
    overrun: float = 0.0  # share of jobs run past their requested time

    @property
    def key(self) -> str:
        key = f"{Path(self.log).name}|{self.billing}|{self.setting}|{self.window}|poll={self.poll:g}|cap={self.cap:g}x"
        return key + (f"|overrun={self.overrun:g}" if self.overrun else "")


_WORKLOADS: dict[str, Workload] = {}


def _workload(case: Case) -> Workload:
    wl = _WORKLOADS.get(case.log)
    if wl is None:
        wl = read_swf(Path(case.log))
        _WORKLOADS[case.log] = wl
    wl = overrun(wl, case.overrun)
    if case.window == "whole":
        return wl
    first = wl.jobs[0].submit
    half_days = (wl.jobs[-1].submit - first) / 2 / 86400.0
    if case.window == "first":
        return window(wl, 0.0, (first / 86400.0) + half_days)
    return window(wl, first + half_days * 86400.0, None)


def run_one(case: Case, policy_name: str, sets: tuple[tuple[str, str], ...]) -> dict[str, float]:
    spn, boot = SETTINGS[case.setting]
    wl = _workload(case)
    max_procs = wl.max_procs or max(j.slots for j in wl.jobs)
    cap = max(1, round(case.cap * -(-max_procs // spn)))
    prepared = prepare(wl, spn, cap)
    settings = SimSettings(slots_per_node=spn, max_nodes=prepared.max_nodes, boot_time=boot, poll_interval=case.poll)
    policy = build_policy(
        policy_name,
        billing="hour" if case.billing == "hour" else "second",
        slots_per_node=spn,
        boot_time=boot,
        max_nodes=prepared.max_nodes,
    )
    if policy_name == "elb":
        policy = with_param(policy, "poll_interval", f"{case.poll:g}")
        for k, v in sets:
            policy = with_param(policy, k, v)
    m, _ = replay(prepared, policy, settings, billing="hour" if case.billing == "hour" else "second", price=1.0)
    return {
        "cost": m.cost,
        "x_floor": m.cost_over_floor,
        "p95": m.wait_p95,
        "mean": m.wait_mean,
        "p99": m.wait_p99,
        "launches": float(m.launches),
        "jobs": float(m.jobs),
        "seconds": m.replay_seconds,
        "saturated": float(m.saturated),
    }


def _fmt_wait(s: float) -> str:
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.1f}m"


def verdict(case: Case, res: dict[str, dict[str, float]]) -> tuple[bool, str]:
    elb = res["elb"]
    quick = min(PEERS, key=lambda p: res[p]["p95"])
    cheap = min(PEERS, key=lambda p: res[p]["cost"])
    wait_ok = elb["p95"] <= res[quick]["p95"] + case.poll + 1e-6
    cost_ok = elb["cost"] <= res[cheap]["cost"] + 1e-6
    parts = [
        f"p95 {_fmt_wait(elb['p95'])} vs {quick} {_fmt_wait(res[quick]['p95'])}+poll: {'ok' if wait_ok else 'MISSED'}",
        f"cost {elb['cost']:.0f} vs {cheap} {res[cheap]['cost']:.0f}: {'ok' if cost_ok else 'MISSED'}"
        f" ({(elb['cost'] / res[cheap]['cost'] - 1) * 100:+.1f}%)",
    ]
    ok = wait_ok and cost_ok
    if case.billing == "hour":
        vs = elb["cost"] / res["slurm"]["cost"] - 1
        hour_ok = vs <= -0.10 + 1e-9
        parts.append(f"vs slurm {vs * 100:+.1f}%: {'ok' if hour_ok else 'MISSED'} (bar -10%)")
        ok = ok and hour_ok
    return ok, "; ".join(parts)


def _load_cache(path: Path) -> dict[str, dict[str, float]]:
    if path.exists():
        data: dict[str, dict[str, float]] = json.loads(path.read_text())
        return data
    return {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    ap.add_argument("--logs", default="KTH-SP2-1996-2.2-cln.swf.gz,NASA-iPSC-1993-3.1-cln.swf.gz")
    ap.add_argument("--billings", default=",".join(BILLINGS))
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--windows", default=",".join(WINDOWS))
    ap.add_argument("--poll", type=float, default=60.0)
    ap.add_argument(
        "--overrun", type=float, default=0.0, help="share of jobs run past their requested time (seed 0, up to 4 h)"
    )
    ap.add_argument("--cap", type=float, default=4.0, help="cluster cap, times the log's machine (default 4)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an elb policy option")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/elb-bench-policy-peers.json"))
    ap.add_argument("--no-peers", action="store_true", help="only replay elb (needs cached peers)")
    ap.add_argument("--no-elb", action="store_true", help="only fill the peers' cache")
    ap.add_argument("--markdown", action="store_true", help="print markdown tables")
    ap.add_argument("--summary", action="store_true", help="print one markdown row per case")
    ap.add_argument("--json", type=Path, default=None, help="also write every result here")
    ap.add_argument("--from-json", type=Path, default=None, help="print the results a --json run wrote; no replay")
    args = ap.parse_args(argv)

    sets: tuple[tuple[str, str], ...] = ()
    for s in args.set:
        key, sep, value = s.partition("=")
        if not sep:
            ap.error("--set wants KEY=VALUE")
        sets = (*sets, (key, value))
    cases = [
        Case(str(args.traces / log), billing, setting, win, args.poll, args.cap, args.overrun)
        for log in args.logs.split(",")
        for setting in args.settings.split(",")
        for billing in args.billings.split(",")
        for win in args.windows.split(",")
    ]
    if args.from_json is not None:
        args.no_peers = True
        args.no_elb = True
    cache = _load_cache(args.cache)
    todo: list[tuple[Case, str]] = []
    for c in cases:
        todo.append((c, "elb"))
        todo.extend((c, p) for p in PEERS if f"{c.key}|{p}" not in cache)
    if args.no_peers:
        todo = [(c, p) for c, p in todo if p == "elb"]
    if args.no_elb:
        todo = [(c, p) for c, p in todo if p != "elb"]
    t0 = time.perf_counter()
    results: dict[str, dict[str, dict[str, float]]] = {c.key: {} for c in cases}
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = {pool.submit(run_one, c, p, sets): (c, p) for c, p in todo}
        for fut, (c, p) in futures.items():
            one = fut.result()
            results[c.key][p] = one
            if p != "elb":
                cache[f"{c.key}|{p}"] = one
                args.cache.write_text(json.dumps(cache, indent=1))
    if args.from_json is not None:
        saved: dict[str, dict[str, dict[str, float]]] = json.loads(args.from_json.read_text())
        results = {c.key: saved.get(c.key, {}) for c in cases}
    for c in cases:
        for p in PEERS:
            results[c.key].setdefault(p, cache.get(f"{c.key}|{p}", {}))
    wall = time.perf_counter() - t0

    met = 0
    if args.summary:
        print(
            "| log | nodes / boot | billing | window | elb cost (x floor) | elb p95 | cheapest peer | "
            "quickest peer p95 | slurm cost | bar |"
        )
        print("|---|---|---|---|---:|---:|---|---|---:|---|")
    for c in cases:
        res = results[c.key]
        if not all(res.get(p) for p in (*PEERS, "elb")):
            print(f"{c.key}: peers missing (run without --no-peers)")
            continue
        ok, why = verdict(c, res)
        met += ok
        title = (
            f"{Path(c.log).name.split('-cln')[0]}, {c.setting.replace('/', '-slot nodes / ')} s boot, "
            f"per {c.billing}, {c.window}{' half' if c.window != 'whole' else ''}"
        )
        if args.summary:
            e = res["elb"]
            quick = min(PEERS, key=lambda p: res[p]["p95"])
            cheap = min(PEERS, key=lambda p: res[p]["cost"])
            marks = (
                "met"
                if ok
                else "missed: " + ", ".join(part.split(":")[0] for part in why.split("; ") if "MISSED" in part)
            )
            print(
                f"| {Path(c.log).name.split('-')[0]} | {c.setting} s | {c.billing} | {c.window} | "
                f"{e['cost']:.0f} ({e['x_floor']:.2f}) | {_fmt_wait(e['p95'])} | "
                f"{cheap} {res[cheap]['cost']:.0f} ({(e['cost'] / res[cheap]['cost'] - 1) * 100:+.1f}%) | "
                f"{quick} {_fmt_wait(res[quick]['p95'])} | {res['slurm']['cost']:.0f} "
                f"({(e['cost'] / res['slurm']['cost'] - 1) * 100:+.1f}%) | {marks} |"
            )
            continue
        if args.markdown:
            print(f"\n**{title}** ({'bar met' if ok else 'bar missed'}: {why})\n")
            print("| policy | cost (node-h) | x floor | mean wait | p95 wait | p99 wait | launches |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            for p in ("elb", *PEERS):
                r = res[p]
                print(
                    f"| {p} | {r['cost']:.0f} | {r['x_floor']:.2f} | {_fmt_wait(r['mean'])} | "
                    f"{_fmt_wait(r['p95'])} | {_fmt_wait(r['p99'])} | {r['launches']:.0f} |"
                )
        else:
            print(f"\n{title}: {'MET' if ok else 'missed'}  {why}")
            for p in ("elb", *PEERS):
                r = res[p]
                print(
                    f"  {p:<16} cost {r['cost']:>8.0f} ({r['x_floor']:.2f}x)  mean {_fmt_wait(r['mean']):>6}  "
                    f"p95 {_fmt_wait(r['p95']):>6}  p99 {_fmt_wait(r['p99']):>6}  launches {r['launches']:>6.0f}"
                    f"  [{r['seconds']:.1f} s]"
                )
    print(f"\nbar met in {met}/{len(cases)} cases; {len(todo)} replays in {wall:.0f} s wall")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
