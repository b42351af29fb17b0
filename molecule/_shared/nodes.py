"""Launch and remove the node containers of a Molecule scenario through the test cluster.

Used by the scenarios' create and destroy playbooks (``molecule/_shared/``)::

    python nodes.py launch NAME...   # fresh containers; prints Molecule's instance config (JSON)
    python nodes.py destroy NAME...  # out of SGE, hosts lines and exports (remove_node.yml), then terminated
    python nodes.py kill NAME...     # terminate the containers only (a node that dies)

The test cluster must be up and the caller must hold its lock (see docs/molecule.md).
Names come from molecule.yml and are checked; nothing is passed through a shell.
"""

from __future__ import annotations

import json
import re
import socket
import sys
from collections.abc import Sequence

from elb.core.interfaces import NodeSpec
from elbdev.testcluster import constants as C
from elbdev.testcluster import master
from elbdev.testcluster.cluster import TestCluster

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
# remove_node.yml works on the master only and finds a node by name: a node whose container is
# already gone gets a placeholder address (inside the cluster's subnet, never assigned).
_GONE_ADDRESS = "10.77.0.254"


class NodesError(Exception):
    pass


def _check(names: Sequence[str]) -> list[str]:
    if not names:
        raise NodesError("no node names given")
    bad = [n for n in names if not _NAME.fullmatch(n) or n == C.MASTER_NAME]
    if bad:
        raise NodesError(f"invalid node names: {bad}")
    if len(set(names)) != len(names):
        raise NodesError("a node name is given twice")
    return list(names)


def _require_cluster() -> None:
    if not (master.uts_ready() and master.qmaster_running()):
        raise NodesError("the test cluster is not up: run `python -m elbdev testcluster up` first")
    if socket.gethostname() != C.MASTER_NAME:
        raise NodesError(
            f"Molecule must run as the test cluster's master (hostname {C.MASTER_NAME!r}, not "
            f"{socket.gethostname()!r}): see docs/molecule.md, or use `python -m tests.molecule.runner`"
        )


def _known_to_master(tc: TestCluster, names: Sequence[str]) -> set[str]:
    """Names that SGE, the master's /etc/hosts or /etc/exports still mention."""
    mentioned: set[str] = set()
    for proc in (
        tc.master_run(["qconf", "-sel"], check=False, timeout=30),
        tc.master_run(["qconf", "-sh"], check=False, timeout=30),
        tc.master_run(["qconf", "-ss"], check=False, timeout=30),
    ):
        mentioned.update(proc.stdout.split())
    for path in ("/etc/hosts", "/etc/exports"):
        try:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    mentioned.update(re.split(r"[\s(]+", line.strip()))
        except FileNotFoundError:
            pass
    return {n for n in names if n in mentioned}


def destroy(names: Sequence[str]) -> dict[str, object]:
    """Take the nodes out of the cluster (if it still knows them) and terminate their containers."""
    _require_cluster()
    tc = TestCluster()
    live = {w.name: w for w in tc.cloud().list_workers()}
    known = _known_to_master(tc, names)
    removed: list[str] = []
    if known:
        old = [NodeSpec(name=n, private_ip=(live[n].private_ip if n in live else None) or _GONE_ADDRESS) for n in known]
        stay = [tc.spec(w) for n, w in live.items() if n not in names and w.state == "running"]
        pb = tc.run_playbook("remove_node.yml", workers=stay, old_nodes=sorted(old, key=lambda s: s.name))
        if not pb.ok:
            raise NodesError(f"remove_node.yml failed (rc {pb.rc}):\n{pb.stdout[-4000:]}")
        removed = sorted(known)
    gone = [live[n].instance_id for n in names if n in live]
    if gone:
        tc.cloud().terminate(gone)
    return {"deregistered": removed, "terminated": sorted(n for n in names if n in live)}


def kill(names: Sequence[str]) -> dict[str, object]:
    tc = TestCluster()
    live = {w.name: w for w in tc.cloud().list_workers()}
    ids = [live[n].instance_id for n in names if n in live]
    if ids:
        tc.cloud().terminate(ids)
    return {"terminated": sorted(n for n in names if n in live)}


def launch(names: Sequence[str]) -> list[dict[str, object]]:
    """Fresh containers for ``names`` (leftovers of an earlier run are destroyed first)."""
    _require_cluster()
    destroy(names)
    tc = TestCluster()
    res = tc.cloud().launch(names)
    if res.failed:
        tc.cloud().terminate([i.instance_id for i in res.launched])
        raise NodesError(f"launching failed: {dict(res.failed)}")
    by_name = {i.name: i for i in res.launched}
    return [
        {
            "instance": n,
            "address": by_name[n].private_ip,
            "user": "root",
            "port": 22,
            "identity_file": str(C.SSH_KEY),
        }
        for n in names
    ]


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("launch", "destroy", "kill"):
        print("usage: nodes.py launch|destroy|kill NAME...", file=sys.stderr)
        return 2
    try:
        names = _check(argv[1:])
        out: object
        if argv[0] == "launch":
            out = launch(names)
        elif argv[0] == "destroy":
            out = destroy(names)
        else:
            out = kill(names)
    except Exception as err:  # any failure: one clear message, non-zero exit
        print(f"nodes.py {argv[0]}: {err}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
