"""Benchmark of the test cluster: time to bring it up, and to add N nodes in one run.

``flock /var/lib/elb-testcluster.lock python -m elbdev.testcluster.bench [--from-nothing] [--sizes 1,4,8,16]``
(root; the lock keeps tests and demos off the cluster meanwhile). For each N: the
launch, the add play's wall time and the CPU the master spent on it (ansible-playbook and its
workers, user + system: the children's rusage; the node containers are not the master's
children, so their CPU is not counted), then the remove. Prints the time of adding the most nodes
in one run as a multiple of adding the fewest, next to its target (at most 1.5x for 4 nodes, 2x
for 16), and an estimate on paper for 100 and 1,000 nodes with today's push from the master: a
fixed part plus a part per node from a least-squares line through the measured points, and the
floor the master's CPU sets (CPU per node x N / the master's cores), whichever is larger.
``--from-nothing`` first removes the cached node image so that the image build is timed too (the
packages stay installed: apt is not undone).
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import time

from elbdev.testcluster import constants as C
from elbdev.testcluster._run import run
from elbdev.testcluster.cluster import TestCluster

ADD_K_TARGET = 1.5  # adding 4 nodes in one run, as a multiple of adding one
ADD_16_TARGET = 2.0  # adding 16 nodes in one run, as a multiple of adding one
PAPER_SIZES = (100, 1000)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares line ``seconds = fixed + per_node * n`` through ``(n, seconds)`` points."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    per_node = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - per_node * mx, per_node


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--from-nothing", action="store_true", help="also rebuild the node image")
    ap.add_argument("--sizes", default="1,4", help="node counts to add in one run each (default 1,4)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    tc = TestCluster()
    tc.down()
    if args.from_nothing:
        run(["podman", "rmi", "--force", C.IMAGE], check=False, timeout=120)
        for tar in C.IMAGE_DIR.glob("elb-node-*.tar"):
            tar.unlink()
    t = time.monotonic()
    steps = tc.up(nodes=0)
    figures = {"up": time.monotonic() - t, **{f"up.{k}": v for k, v in steps.items()}}
    sizes = [int(x) for x in args.sizes.split(",")]
    master_cpu: dict[int, float] = {}
    for n in sizes:
        t = time.monotonic()
        new = tc.launch(n)
        figures[f"launch {n} node(s) (podman, until sshd answers)"] = time.monotonic() - t
        cpu = _children_cpu()
        add = tc.run_playbook("add_node.yml", new_nodes=[tc.spec(i) for i in new])
        figures[f"add_node.yml for {n} node(s) in one run"] = add.seconds
        master_cpu[n] = _children_cpu() - cpu
        figures[f"  master CPU for it ({master_cpu[n] / n:.1f} s a node)"] = master_cpu[n]
        if not add.ok:
            print(add.stdout[-3000:])
        t = time.monotonic()
        pb = tc.remove_nodes([i.name for i in new])
        figures[f"remove {n} node(s), remove_node.yml + terminate"] = time.monotonic() - t
        if not pb.ok:
            print(pb.stdout[-3000:])
    tc.down()
    load = os.getloadavg()
    print(f"\nfigures (2-core machine, load average now {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}):")
    for k, v in figures.items():
        print(f"  {k:<50} {v:7.1f} s")
    few, many = min(sizes), max(sizes)
    added = {n: figures[f"add_node.yml for {n} node(s) in one run"] for n in sizes}
    for n in sizes:
        if n == few:
            continue
        target = ADD_16_TARGET if n >= 16 else ADD_K_TARGET if n <= 4 else None
        ratio = added[n] / added[few]
        verdict = "" if target is None else f" (target <= {target}: {'met' if ratio <= target else 'NOT met'})"
        print(f"  adding {n} nodes in one run / adding {few}: {ratio:.2f}x{verdict}")
    if many > few:
        fixed, per_node = fit(list(added.items()))
        cpu_per_node = master_cpu[many] / many
        cores = len(os.sched_getaffinity(0))
        print(f"  on paper (push from the master; line through the points: {fixed:.0f} s + {per_node:.1f} s a node;")
        print(f"  master CPU {cpu_per_node:.1f} s a node on {cores} cores):")
        for n in PAPER_SIZES:
            line, floor = fixed + per_node * n, cpu_per_node * n / cores
            print(
                f"    {n:>5} nodes: {max(line, floor) / 60:6.1f} min (line {line / 60:.1f}, CPU floor {floor / 60:.1f})"
            )
    return 0


if __name__ == "__main__":  # pragma: no cover - run by hand
    raise SystemExit(main())
