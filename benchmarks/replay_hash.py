"""A hash of a whole replay's outcome, to check that a change to the simulator or a policy leaves
every replay the same: KTH's first ``--days`` as ``--copies`` interleaved copies
(``bench_simulate.scaled``, the cap the copies times KTH's 52 nodes, as ``bench_replay_scale``),
replayed with ``record`` on; the SHA-256 of the ``SimOutcome``'s repr (every wait, run, placement,
node life, the polls, decisions, launches and the rest).

    python benchmarks/replay_hash.py [--copies 20] [--days 20] [--policy elb] [--logs DIR]

Run it before and after a change (e.g. on a ``git worktree`` of the commit before): the hashes
must be equal. It prints the CPU seconds of the replay as well (record on: a little more than
without).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_simulate import DEFAULT_LOGS, LOGS, SPN, scaled

from elb.simulate.engine import SimSettings, Simulator
from elb.simulate.runner import build_policy, prepare
from elb.simulate.swf import read_swf

KTH_NODES = 52


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--days", type=float, default=20.0)
    ap.add_argument("--policy", default="elb")
    ap.add_argument("--logs", type=Path, default=DEFAULT_LOGS)
    args = ap.parse_args()
    if args.copies < 1 or args.days <= 0:
        ap.error("--copies must be at least 1, --days above 0")
    big = scaled(read_swf(args.logs / LOGS[0]), args.copies, args.days)
    cap = KTH_NODES * args.copies
    prepared = prepare(big, SPN, cap)
    policy = build_policy(args.policy, billing="second", slots_per_node=SPN, boot_time=300, max_nodes=cap)
    settings = SimSettings(slots_per_node=SPN, max_nodes=cap, fast_forward=True, record=True)
    cpu = time.process_time()
    out = Simulator(prepared.jobs, policy, settings, groups=prepared.groups, assignments=prepared.assignments).run()
    cpu = time.process_time() - cpu
    digest = hashlib.sha256(repr(out).encode()).hexdigest()
    print(
        f"{args.policy} KTH {args.days:g} days x{args.copies}: {digest[:16]} "
        f"(polls {out.polls}, decisions {out.decisions}, launches {out.launches}, jobs {len(out.waits)}; "
        f"{cpu:.1f} s CPU)"
    )


if __name__ == "__main__":
    main()
