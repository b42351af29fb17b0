"""``python -m elbdev testcluster up|down|status|exec|add-nodes|remove-nodes``: the one-machine SGE test cluster."""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time

from elbdev.testcluster import constants as C
from elbdev.testcluster import master, slurm
from elbdev.testcluster._run import TestClusterError
from elbdev.testcluster.cluster import TestCluster


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "testcluster",
        help="a real SGE cluster on this machine (podman nodes) for tests and the demo",
        description="Set up, use and tear down the test cluster (needs root). See docs/testcluster.md.",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log every command")
    tsub = p.add_subparsers(dest="tc_command", metavar="ACTION")
    tsub.required = True

    up = tsub.add_parser("up", help="install what is missing and start the cluster (idempotent)")
    up.add_argument("--nodes", type=int, default=0, help="make sure at least this many workers run (default 0)")
    up.add_argument("--rebuild-image", action="store_true", help="rebuild the node image even if cached")
    up.add_argument(
        "--scheduler",
        choices=("sge", "slurm"),
        default="sge",
        help="slurm: also start slurmctld on the master with a cloud partition behind elb's programs",
    )
    up.set_defaults(func=_up)

    down = tsub.add_parser("down", help="remove the nodes and stop everything the cluster started")
    down.set_defaults(func=_down)

    st = tsub.add_parser("status", help="what runs")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=_status)

    ex = tsub.add_parser("exec", help="run a command on the master: exec [--user U] -- CMD ...")
    ex.add_argument("--user", default=None, help="run as this user (default root)")
    ex.add_argument("--timeout", type=float, default=3600.0, help="seconds before the command is killed")
    ex.add_argument("argv", nargs=argparse.REMAINDER, help="the command")
    ex.set_defaults(func=_exec)

    add = tsub.add_parser("add-nodes", help="launch N nodes and add them with playbooks/add_node.yml")
    add.add_argument("count", type=int)
    add.add_argument(
        "--at-boot",
        action="store_true",
        help="the nodes configure themselves at boot (node_boot.yml), the master admits them (admit_nodes.yml)",
    )
    add.set_defaults(func=_add)

    rm = tsub.add_parser("remove-nodes", help="remove workers with playbooks/remove_node.yml and terminate them")
    rm.add_argument("names", nargs="+")
    rm.set_defaults(func=_remove)

    sl = tsub.add_parser(
        "slurm",
        help="a Slurm controller on this machine with elb's power-saving programs (up, down)",
        description=(
            "Start (up) or stop (down) Debian's slurmctld and munged with a cloud partition whose "
            "ResumeProgram and SuspendProgram are elb's (elbdev.testcluster.slurm; no slurmd nodes yet). "
            "Clients reach it with SLURM_CONF=/var/lib/elb-testcluster/slurm/slurm.conf."
        ),
    )
    sl.add_argument("action", choices=("up", "down"))
    sl.set_defaults(func=_slurm)


def _setup_logging(args: argparse.Namespace) -> None:
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S"
    )


def _up(args: argparse.Namespace) -> int:
    _setup_logging(args)
    if args.nodes < 0:
        print("python -m elbdev testcluster: --nodes must be 0 or more", file=sys.stderr)
        return 2
    t = time.monotonic()
    try:
        times = TestCluster().up(nodes=args.nodes, rebuild_image=args.rebuild_image)
        if args.scheduler == "slurm":
            started = time.monotonic()
            slurm.up()
            times["slurm"] = time.monotonic() - started
    except TestClusterError as err:
        print(f"python -m elbdev testcluster up: {err}", file=sys.stderr)
        return 1
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in times.items())
    print(f"test cluster up in {time.monotonic() - t:.1f} s ({parts}); master {C.MASTER_NAME} at {C.MASTER_IP}")
    if args.scheduler == "slurm":
        print(f"slurm controller up: SLURM_CONF={slurm.CONF}; requests in {slurm.REQUEST_DIR}")
    return 0


def _down(args: argparse.Namespace) -> int:
    _setup_logging(args)
    try:
        TestCluster().down()
    except TestClusterError as err:
        print(f"python -m elbdev testcluster down: {err}", file=sys.stderr)
        return 1
    print("test cluster down")
    return 0


def _status(args: argparse.Namespace) -> int:
    _setup_logging(args)
    st = TestCluster().status()
    if args.json:
        print(json.dumps(st, indent=2, default=str))
    else:
        for k, v in st.items():
            if k == "qhost":
                print("qhost:")
                print("  " + str(v).replace("\n", "\n  "))
            else:
                print(f"{k}: {v}")
    return 0 if st.get("qmaster") else 3


def _slurm(args: argparse.Namespace) -> int:
    _setup_logging(args)
    try:
        if args.action == "up":
            slurm.up()
            print(f"slurm controller up: SLURM_CONF={slurm.CONF}; requests in {slurm.REQUEST_DIR}")
        else:
            slurm.down()
            print("slurm controller down")
    except TestClusterError as err:
        print(f"python -m elbdev testcluster slurm {args.action}: {err}", file=sys.stderr)
        return 1
    return 0


def _exec(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("python -m elbdev testcluster exec: no command given (exec -- CMD ...)", file=sys.stderr)
        return 2
    if not master.uts_ready():
        print(
            "python -m elbdev testcluster exec: the test cluster is not up (python -m elbdev testcluster up)",
            file=sys.stderr,
        )
        return 1
    try:
        proc = subprocess.run(master.in_master(argv, user=args.user), timeout=args.timeout, check=False)
    except subprocess.TimeoutExpired:
        print(f"python -m elbdev testcluster exec: timed out after {args.timeout:g} s", file=sys.stderr)
        return 124
    return proc.returncode


def _add(args: argparse.Namespace) -> int:
    _setup_logging(args)
    t = time.monotonic()
    try:
        tc = TestCluster()
        new = tc.add_nodes_at_boot(args.count) if args.at_boot else tc.add_nodes(args.count)
    except TestClusterError as err:
        print(f"python -m elbdev testcluster add-nodes: {err}", file=sys.stderr)
        return 1
    print(f"added {', '.join(i.name for i in new)} in {time.monotonic() - t:.1f} s")
    return 0


def _remove(args: argparse.Namespace) -> int:
    _setup_logging(args)
    try:
        pb = TestCluster().remove_nodes(args.names)
    except TestClusterError as err:
        print(f"python -m elbdev testcluster remove-nodes: {err}", file=sys.stderr)
        return 1
    if not pb.ok:
        print(pb.stdout[-4000:], file=sys.stderr)
        return 1
    print(f"removed {', '.join(args.names)} in {pb.seconds:.1f} s")
    return 0
