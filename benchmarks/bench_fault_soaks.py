"""The drain-race soaks on the real test cluster: the same two fault tests CI runs, with the soak's
number of races (CI runs 3 SGE and 2 Slurm races; see docs/safety.md). Each race submits a job
just before, while or just after elb drains the node that would run it; the tests assert that no
job is lost or killed and no node leaked, and print a FIGURES line (outcomes, jobs, seconds).

    python benchmarks/bench_fault_soaks.py [--sge-races 50] [--slurm-races 20] [--seed N]

Needs root; takes the test cluster's lock through the test session (about 15 min for 50 SGE
races and 20 min for 20 Slurm races on this project's 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = (
    "tests/faults/test_faults.py::test_job_submitted_as_the_node_drains_is_never_lost_or_killed",
    "tests/faults/test_slurm_faults.py::test_job_submitted_as_the_slurm_node_drains_is_never_lost",
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sge-races", type=int, default=50)
    ap.add_argument("--slurm-races", type=int, default=20)
    ap.add_argument("--seed", type=int, help="the races' random seed (default: the time)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_fault_soaks: the test cluster needs root", file=sys.stderr)
        return 2
    env = {**os.environ, "ELB_FAULT_RACES": str(args.sge_races), "ELB_SLURM_RACES": str(args.slurm_races)}
    if args.seed is not None:
        env["ELB_FAULT_SEED"] = str(args.seed)
    wanted = [t for t, n in zip(TESTS, (args.sge_races, args.slurm_races), strict=True) if n > 0]
    argv = [sys.executable, "-m", "pytest", "-m", "faults", "-s", "-p", "no:cacheprovider"]
    return subprocess.run([*argv, *wanted], cwd=REPO, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
