"""Benchmark of the test cluster: time to bring it up, to add 1 node and 4 nodes in one run.

``python -m elb.testcluster.bench [--from-nothing]`` (root). Prints the figures, and the time of
adding the most nodes in one run as a multiple of adding the fewest, next to its target (adding
k nodes should cost close to adding one: at most 1.5x). ``--from-nothing`` first removes the
cached node image so that the image build is timed too (the packages stay installed: apt is not
undone).
"""

from __future__ import annotations

import argparse
import logging
import os
import time

from elb.testcluster import constants as C
from elb.testcluster._run import run
from elb.testcluster.cluster import TestCluster

ADD_K_TARGET = 1.5  # adding k nodes in one run, as a multiple of adding one


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
    for n in sizes:
        t = time.monotonic()
        new = tc.launch(n)
        figures[f"launch {n} node(s) (podman, until sshd answers)"] = time.monotonic() - t
        add = tc.run_playbook("add_node.yml", new_nodes=[tc.spec(i) for i in new])
        figures[f"add_node.yml for {n} node(s) in one run"] = add.seconds
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
    if many > few:
        ratio = (
            figures[f"add_node.yml for {many} node(s) in one run"]
            / figures[f"add_node.yml for {few} node(s) in one run"]
        )
        verdict = "met" if ratio <= ADD_K_TARGET else "NOT met"
        print(f"  adding {many} nodes in one run / adding {few}: {ratio:.2f}x (target <= {ADD_K_TARGET}: {verdict})")
    return 0


if __name__ == "__main__":  # pragma: no cover - run by hand
    raise SystemExit(main())
