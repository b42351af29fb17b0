"""Slurm's burst of 100 and 1,000 nodes on paper, pushed and at boot, from the test cluster's
measured points (docs/results/testcluster-add.md, the Slurm sections of 2026-12-02).

    python benchmarks/slurm_on_paper.py

A burst of n nodes waits what one node waits, measured end to end (from the job's submission
until it starts: Slurm's resume program, the launch, the node's boot, one node's plays, slurmd's
registration; every node of a burst does these at once, on its own CPU on a real cluster), plus
the master's work for the n - 1 nodes more:

- pushed: the master's CPU a node more, the slope of the line through the pushed bursts' CPU (elb's
  process and its playbook runs over the whole run, so its removal and its passes too: an upper
  value), spread over the master's cores at best and on one core at worst (the add play's
  controller forks a worker a node);
- at boot: the admit play's wall time a node more, the slope of the line through the master's part
  alone (nodes not started, up to 250; measured at load 6, so above its CPU), which runs on one
  core (each step is one module run for the batch), plus the munge key's write over SSH, which the
  master's part alone leaves out (it needs the nodes): its module runs a node on the node (wait for
  SSH, then the key's writer, which compares, writes, sets owner and mode and restarts munged in
  one run) at what Ansible's controller spends a module run (0.13 s, the Grid Engine push's
  split), spread over the cores at best and on one at worst.

Not in the figures: EC2's own time to start a thousand instances (its request rates), Slurm's
handling of a resume request and of the registrations of a thousand nodes (each is one request
of its own; ``scontrol update`` of the addresses, a command a hundred nodes, took under 0.1 s
each at 250), and the test cluster's load, under which every point was measured.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from elbdev.testcluster.bench import fit

PAPER_SIZES = (100, 1000)
CORES = 2  # the test cluster's master: the figures are for a master of that size

# One node, from the job's submission until it started (seconds), each way.
ONE_NODE = {"push": 59.3, "boot": 67.0}
# The pushed bursts: nodes, the master's CPU over the run (its CPU a node times the nodes).
PUSH_CPU = [(1, 24.4), (4, 4 * 14.2), (8, 8 * 11.1), (16, 16 * 8.5)]
# The master's part alone: nodes, the admit play's wall seconds (without the munge key's write).
ADMIT_WALL = [(1, 17.6), (16, 28.3), (100, 49.3), (250, 119.0)]
# The master's part alone: nodes, the remove play's wall seconds.
REMOVE_WALL = [(1, 8.5), (16, 17.5), (100, 40.2), (250, 65.2)]
KEY_RUNS = 2  # the munge key's module runs on each node (roles/munge/tasks/push.yml)
RUN_CPU = 0.13  # Ansible's controller CPU a module run (seconds)


@dataclass(frozen=True)
class Estimate:
    """A burst of ``n`` nodes on paper: ``low`` with the master's spread work on all its cores,
    ``high`` on one (seconds)."""

    n: int
    low: float
    high: float


def slope(points: list[tuple[int, float]]) -> float:
    """Seconds a node more: the least-squares line's slope through ``(nodes, seconds)``."""
    return fit(points)[1]


def burst(one_node: float, serial: float, spread: float, n: int, cores: int) -> Estimate:
    """One node's wait, plus the master's work for ``n - 1`` nodes more: ``serial`` seconds a
    node on one core whatever the cores, ``spread`` seconds a node over 1 to ``cores`` cores."""
    if n < 1 or cores < 1:
        raise ValueError(f"a burst of {n} nodes on {cores} cores")
    more = n - 1
    base = one_node + serial * more
    return Estimate(n, base + spread * more / cores, base + spread * more)


def pushed(n: int, cores: int = CORES) -> Estimate:
    return burst(ONE_NODE["push"], 0.0, slope(PUSH_CPU), n, cores)


def at_boot(n: int, cores: int = CORES) -> Estimate:
    return burst(ONE_NODE["boot"], slope(ADMIT_WALL), KEY_RUNS * RUN_CPU, n, cores)


def removal(n: int) -> float:
    """The remove play for ``n`` nodes (every step on the master, one run for the batch)."""
    fixed, per_node = fit(REMOVE_WALL)
    return fixed + per_node * n


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print(
        f"pushed: {ONE_NODE['push']} s for one node + {slope(PUSH_CPU):.2f} s of the master's CPU a node more, "
        f"over {CORES} to 1 core(s)"
    )
    print(
        f"at boot: {ONE_NODE['boot']} s for one node + {slope(ADMIT_WALL):.3f} s of the admit play a node more "
        f"(one core) + {KEY_RUNS} x {RUN_CPU} s for the munge key a node more, over {CORES} to 1 core(s)"
    )
    print("| nodes in one burst | pushed | at boot | the remove play |")
    print("|---:|---:|---:|---:|")
    for n in PAPER_SIZES:
        p, b = pushed(n), at_boot(n)
        print(
            f"| {n:,} | {p.low / 60:.1f} to {p.high / 60:.1f} min | {b.low / 60:.1f} to {b.high / 60:.1f} min "
            f"| {removal(n) / 60:.1f} min |"
        )


if __name__ == "__main__":
    main()
