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

Where the play's work runs is counted too (the callback ``callback_plugins/elbdev_task_split.py``):
the module runs on the master (its own edits: hosts lines, exports, the exec host registration)
and on the nodes, per node. From those, on paper, the same burst with the node-side roles run at
boot by each node on its own CPU and the master doing only its own edits: the master's CPU per
node scaled by the master's share of the module runs (Ansible's controller spends about the same
per module run wherever it runs: an estimate, said as one), the floor that sets, plus one node's
own tasks (their wall time in the one-node run), which every node runs at once on its own CPU.
``--at-boot`` also adds each size with the nodes configuring themselves at boot
(``provision.mode: boot``: each node runs node_boot.yml on itself, the master one admit_nodes.yml
run for the batch), right after the push of the same size, and prints both from the launch until
every node is up, the master's CPU a node, the admit play's time for the most nodes as a multiple
of the fewest (the master's part of the burst), and on paper 100 and 1,000 nodes with each node's boot
on its own CPU (the master's CPU for the admit play as a line through the measured points, plus
one node's own boot). Each way, it also prints what this machine allows at best: the burst's
whole CPU (the master's and the node containers' own, read from their cgroups) over its cores,
as a multiple of the fewest nodes' measured time: the test cluster's nodes share the master's
cores, so no burst spending that CPU can be faster here. ``--sharing ROUNDS`` instead adds and
removes each size ROUNDS times with one SSH connection per node and run (what the test cluster
and elb do) and as many times with one per task, alternated, and prints both side by side.
``--from-nothing`` first removes the cached node image so that the image build is timed too (the
packages stay installed: apt is not undone). ``--master-part SIZES`` instead times the master's
part alone for bursts too big for this machine's nodes: admit_nodes.yml for N nodes that are not
started (the play contacts no node: hosts lines, exports, the published file and the SGE
registration are real) and remove_node.yml for them (every step on the master, as for dead nodes),
wall and the master's CPU for each size, the most as a multiple of the fewest. With
``--scheduler slurm`` it times Slurm's master's part instead, with cloud nodes Slurm powers up
that are never started (``measure_slurm_master_part``): each node's address (``scontrol update``),
slurm_admit_nodes.yml without the munge key's write over SSH (the one step that needs the nodes),
the drains, slurm_remove_node.yml and the batched power down. ``--scheduler slurm`` without
``--master-part`` times Slurm's burst end to end for each of ``--sizes``, pushed and at boot
(``elbdev.testcluster.slurm_burst``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from elb.core.interfaces import NodeSpec
from elb.schedulers.slurm.commands import SlurmCommands
from elbdev.testcluster import constants as C
from elbdev.testcluster._run import children_cpu, run
from elbdev.testcluster.cluster import PlaybookRun, TestCluster

ADD_K_TARGET = 1.5  # adding 4 nodes in one run, as a multiple of adding one
ADD_16_TARGET = 2.0  # adding 16 nodes in one run, as a multiple of adding one
PAPER_SIZES = (100, 1000)
CALLBACKS = Path(__file__).resolve().parent / "callback_plugins"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Split:
    """Where one play run's module runs ran: counts and summed wall seconds, master and nodes."""

    master_runs: int
    node_runs: int
    node_seconds: float

    @property
    def master_share(self) -> float:
        total = self.master_runs + self.node_runs
        return self.master_runs / total if total else 0.0


def read_split(path: Path) -> Split:
    """The last play run ``elbdev_task_split`` wrote to ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    runs = json.loads(lines[-1]) if lines else []
    master = [r for r in runs if r["where"] == "master"]
    node = [r for r in runs if r["where"] == "node"]
    return Split(len(master), len(node), sum(float(r["seconds"]) for r in node))


def containers_cpu(instance_ids: list[str]) -> float | None:
    """The CPU seconds the node containers have spent since they started (their cgroups' usage,
    cgroup v1 ``cpuacct`` or v2 ``cpu.stat``); None when a container's cgroup cannot be read."""
    proc = run(["podman", "inspect", "--format", "{{.State.CgroupPath}}", *instance_ids], check=False, timeout=60)
    paths = [line.strip().lstrip("/") for line in proc.stdout.splitlines()]
    if proc.returncode != 0 or len(paths) != len(instance_ids) or not all(paths):
        return None
    total = 0.0
    try:
        for rel in paths:
            v1 = Path("/sys/fs/cgroup/cpuacct") / rel / "cpuacct.usage"
            if v1.exists():
                total += int(v1.read_text()) / 1e9
            else:
                stat = dict(
                    line.split() for line in (Path("/sys/fs/cgroup") / rel / "cpu.stat").read_text().splitlines()
                )
                total += int(stat["usage_usec"]) / 1e6
    except (OSError, ValueError, KeyError):
        return None
    return total


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares line ``seconds = fixed + per_node * n`` through ``(n, seconds)`` points."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    per_node = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - per_node * mx, per_node


@dataclass
class Measured:
    """What one benchmark run measured: named figures (seconds), and per burst size the master's
    CPU and where the add play's module runs ran."""

    figures: dict[str, float]
    master_cpu: dict[int, float]
    splits: dict[int, Split]
    # From the launch until every node is up: the push (launch + add play) and, with --at-boot,
    # nodes that configure themselves (launch until qhost shows them all), and the master's CPU then.
    push_total: dict[int, float] = field(default_factory=dict)
    boot_total: dict[int, float] = field(default_factory=dict)
    boot_cpu: dict[int, float] = field(default_factory=dict)
    boot_admit: dict[int, float] = field(default_factory=dict)  # the admit play's wall time
    # The node containers' own CPU from their launch until every node is up (None: unreadable).
    push_nodes_cpu: dict[int, float | None] = field(default_factory=dict)
    boot_nodes_cpu: dict[int, float | None] = field(default_factory=dict)

    def added(self, n: int) -> float:
        return self.figures[f"add_node.yml for {n} node(s) in one run"]


def measure(tc: TestCluster, sizes: list[int], split_file: Path, *, at_boot: bool = False) -> Measured:
    """Up, then for each size: launch, add in one run (timed, the master's CPU), remove; with
    ``at_boot``, then the same size again with the nodes configuring themselves (``measure_boot``)."""
    t = time.monotonic()
    steps = tc.up(nodes=0)
    m = Measured({"up": time.monotonic() - t, **{f"up.{k}": v for k, v in steps.items()}}, {}, {})
    for n in sizes:
        t = time.monotonic()
        new = tc.launch(n)
        m.figures[f"launch {n} node(s) (podman, until sshd answers)"] = time.monotonic() - t
        launched = time.monotonic() - t
        cpu = children_cpu()
        add = tc.run_playbook("add_node.yml", new_nodes=[tc.spec(i) for i in new])
        m.figures[f"add_node.yml for {n} node(s) in one run"] = add.seconds
        m.master_cpu[n] = children_cpu() - cpu
        # n in the label: two sizes with the same CPU a node must not share one entry
        m.figures[f"  master CPU for the {n} ({m.master_cpu[n] / n:.1f} s a node)"] = m.master_cpu[n]
        m.splits[n] = read_split(split_file)
        m.push_total[n] = launched + add.seconds
        m.push_nodes_cpu[n] = containers_cpu([i.instance_id for i in new])
        if not add.ok:
            print(add.stdout[-3000:])
        t = time.monotonic()
        pb = tc.remove_nodes([i.name for i in new])
        m.figures[f"remove {n} node(s), remove_node.yml + terminate"] = time.monotonic() - t
        if not pb.ok:
            print(pb.stdout[-3000:])
        if at_boot:
            measure_boot(tc, n, m)
    return m


def measure_boot(tc: TestCluster, n: int, m: Measured) -> None:
    """``n`` nodes that configure themselves at boot (node_boot.yml on each, started with the
    node), admitted by one admit_nodes.yml run on the master: from the launch until qhost shows
    every one up, and the master's CPU (the admit play; the nodes' own runs are not its children),
    then removed."""
    t = time.monotonic()
    new = tc.launch(n, boot=True)
    cpu = children_cpu()
    admit = tc.admit(new)
    m.boot_cpu[n] = children_cpu() - cpu
    if not admit.ok:
        raise SystemExit(f"admit_nodes.yml failed:\n{admit.stdout[-3000:]}")
    m.figures[f"at boot: admit_nodes.yml for {n} node(s) in one run"] = admit.seconds
    m.boot_admit[n] = admit.seconds
    tc.wait_up([i.name for i in new], timeout=900)
    m.boot_total[n] = time.monotonic() - t
    m.boot_nodes_cpu[n] = containers_cpu([i.instance_id for i in new])
    m.figures[f"at boot: {n} node(s) from the launch until all report"] = m.boot_total[n]
    m.figures[f"  at boot: master CPU for the {n} ({m.boot_cpu[n] / n:.1f} s a node)"] = m.boot_cpu[n]
    pb = tc.remove_nodes([i.name for i in new])
    if not pb.ok:
        print(pb.stdout[-3000:])


# Nodes that are never started, for --master-part: names and addresses no node of the test
# cluster has (the cluster's nodes are on C.SUBNET).
UNSTARTED_NAME = "unstarted{:04d}"
UNSTARTED_NET = "10.78"
# Slurm's unstarted nodes have loopback addresses where nothing listens: slurmctld pings a node it
# powers up, and a ping of an address that does not answer lasts until its time-out; still under
# way when the removal sets the addresses back to the names (which no longer resolve once the
# remove play took the hosts lines), it goes on to the names at 10 s a node, and slurmctld answers
# no command for minutes. A started node answers (or refuses) its ping at once, as these do.
UNSTARTED_SLURM_NET = "127.0"


def unstarted(n: int, first: int) -> list[NodeSpec]:
    """``n`` nodes that are not started, numbered from ``first``, with slots (the admit play does
    not ask a node)."""
    return [
        NodeSpec(name=UNSTARTED_NAME.format(i), private_ip=f"{UNSTARTED_NET}.{i // 250}.{i % 250 + 1}", slots=2)
        for i in range(first, first + n)
    ]


def measure_master_part(tc: TestCluster, sizes: list[int]) -> None:
    """For each size: admit_nodes.yml for that many nodes that are not started, then
    remove_node.yml for them; the wall time and the master's CPU of each, then the ratios."""
    tc.up(nodes=0)
    rows: dict[int, tuple[float, float, float, float]] = {}
    first = 1
    for n in sizes:
        specs = unstarted(n, first)
        first += n
        cpu = children_cpu()
        admit = tc.run_playbook("admit_nodes.yml", new_nodes=specs)
        admit_cpu = children_cpu() - cpu
        cpu = children_cpu()
        remove = tc.run_playbook("remove_node.yml", old_nodes=specs)
        remove_cpu = children_cpu() - cpu
        for what, pb in (("admit_nodes.yml", admit), ("remove_node.yml", remove)):
            if not pb.ok:
                raise SystemExit(f"{what} for {n} node(s) failed:\n{pb.stdout[-3000:]}")
        rows[n] = (admit.seconds, admit_cpu, remove.seconds, remove_cpu)
        log.info("%d node(s): admit %.1f s, remove %.1f s", n, admit.seconds, remove.seconds)
    few = min(sizes)
    load = os.getloadavg()
    print(f"\nthe master's part alone, nodes not started (2-core machine, load now {load[0]:.1f} {load[1]:.1f}):")
    print("  nodes   admit_nodes.yml (x fewest, CPU a node)     remove_node.yml (x fewest, CPU a node)")
    for n, (a, ac, r, rc) in rows.items():
        print(
            f"  {n:>5}   {a:6.1f} s ({a / rows[few][0]:5.2f}x, {ac / n:5.2f} s)"
            f"          {r:6.1f} s ({r / rows[few][2]:5.2f}x, {rc / n:5.2f} s)"
        )
    if 16 in rows and few < 16:
        for what, i in (("admit_nodes.yml", 0), ("remove_node.yml", 2)):
            ratio = rows[16][i] / rows[few][i]
            verdict = "met" if ratio <= ADD_16_TARGET else "NOT met"
            print(f"  {what}, 16 nodes / {few}: {ratio:.2f}x (the burst target, <= {ADD_16_TARGET}: {verdict})")


# The tag of slurm_admit_nodes.yml's one step that reaches the nodes (the munge key's write).
MUNGE_PUSH_TAG = "munge_push"
Parts = dict[str, tuple[float, float]]  # a part of the master's work -> (wall, CPU) seconds


def measure_slurm_master_part(tc: TestCluster, sizes: list[int]) -> None:
    """Slurm's master's part alone, for each size, with N cloud nodes Slurm powers up that are
    never started, on a controller started afresh for each size. The bring-up: ``scontrol update
    ... state=POWER_UP`` (what Slurm does when a job asks; a hundred names a command), then what
    elb does: the nodes' addresses (the driver's ``prepare``: a hundred nodes a ``scontrol
    update``) and slurm_admit_nodes.yml without its one step that reaches the nodes (the munge
    key's write over SSH, tag ``munge_push``: it needs started nodes). The removal as the
    actuator's batch does it: a drain a node, slurm_remove_node.yml (one failed ping a node: they
    are not started), the power down with the addresses set back (a hundred names a command;
    Slurm's suspend clears the drains). Wall time and the master's CPU (this process's children)
    for each part."""
    from elb.schedulers.slurm.commands import SlurmCommands  # noqa: PLC0415
    from elb.schedulers.slurm.config import SlurmConfig  # noqa: PLC0415
    from elbdev.testcluster import slurm  # noqa: PLC0415

    tc.up(nodes=0)
    commands = SlurmCommands(SlurmConfig(conf=slurm.CONF, requests=slurm.REQUEST_DIR))
    rows: dict[int, Parts] = {}
    try:
        for n in sizes:
            # A controller of its own for each size: the nodes of the size before, powering down
            # by names nothing resolves any more, are not this size's to wait on.
            slurm.down()
            slurm.up(cloud_nodes=n)
            specs = [
                NodeSpec(name=f"node{i:03d}", private_ip=f"{UNSTARTED_SLURM_NET}.{1 + i // 250}.{i % 250 + 1}", slots=2)
                for i in range(1, n + 1)
            ]
            rows[n] = slurm_master_part(tc, commands, specs)
            log.info("%d node(s): %s", n, ", ".join(f"{k} {v[0]:.1f} s" for k, v in rows[n].items()))
    finally:
        slurm.down()
    report_slurm_master_part(rows)


def slurm_master_part(
    tc: TestCluster, commands: SlurmCommands, specs: list[NodeSpec]
) -> dict[str, tuple[float, float]]:
    """One size of ``measure_slurm_master_part``: each part's wall and CPU seconds."""
    from elb.schedulers.slurm.commands import UPDATE_BATCH  # noqa: PLC0415
    from elb.schedulers.slurm.parse import compress  # noqa: PLC0415

    names = [s.name for s in specs]
    parts: Parts = {}

    def timed(what: str, step: Callable[[], None]) -> None:
        t, cpu = time.monotonic(), children_cpu()
        step()
        parts[what] = (time.monotonic() - t, children_cpu() - cpu)

    def addresses() -> None:
        commands.set_addresses([(spec.name, spec.private_ip) for spec in specs])

    def admit() -> None:
        os.environ["ANSIBLE_SKIP_TAGS"] = MUNGE_PUSH_TAG
        try:
            _ok(tc.run_playbook("slurm_admit_nodes.yml", new_nodes=specs), "slurm_admit_nodes.yml", len(specs))
        finally:
            del os.environ["ANSIBLE_SKIP_TAGS"]

    def drains() -> None:
        for name in names:
            commands.drain(name, "elb: benchmark")

    def remove() -> None:
        _ok(tc.run_playbook("slurm_remove_node.yml", old_nodes=specs), "slurm_remove_node.yml", len(specs))

    def power_down() -> None:  # as the driver's out_of_service: Slurm's suspend clears the drains
        commands.power_down(names, "elb: benchmark", force=True, park=True)

    for start in range(0, len(names), UPDATE_BATCH):
        hosts = compress(names[start : start + UPDATE_BATCH])
        commands.run(["scontrol", "update", f"nodename={hosts}", "state=POWER_UP"], change=True)
    for what, step in (
        ("addresses", addresses),
        ("admit play", admit),
        ("drains", drains),
        ("remove play", remove),
        ("power down", power_down),
    ):
        timed(what, step)
    return parts


def _ok(pb: PlaybookRun, what: str, n: int) -> None:
    if not pb.ok:
        raise SystemExit(f"{what} for {n} node(s) failed:\n{pb.stdout[-3000:]}")


def report_slurm_master_part(rows: dict[int, Parts]) -> None:
    """The parts of each size side by side; the master's part to admit (the addresses and the
    admit play) as a multiple of the fewest nodes', beside the burst target for 16."""
    few = min(rows)
    load = os.getloadavg()
    print(f"\nSlurm's master's part alone, nodes not started (2-core machine, load now {load[0]:.1f} {load[1]:.1f}):")
    print("  wall seconds (the master's CPU a node); admit = addresses + admit play, x the fewest nodes'")
    print("  nodes   addresses        admit play       admit (x fewest)   drains           remove play      power down")

    def admit_of(n: int) -> float:
        return rows[n]["addresses"][0] + rows[n]["admit play"][0]

    for n, p in rows.items():
        cells = [f"{p[k][0]:6.1f} ({p[k][1] / n:4.2f})" for k in ("addresses", "admit play")]
        rest = [f"{p[k][0]:6.1f} ({p[k][1] / n:4.2f})" for k in ("drains", "remove play", "power down")]
        ratio = f"{admit_of(n):6.1f} ({admit_of(n) / admit_of(few):5.2f}x)"
        print(f"  {n:>5}   " + "   ".join([*cells, ratio, *rest]))
    if 16 in rows and few < 16:
        ratio16 = admit_of(16) / admit_of(few)
        verdict = "met" if ratio16 <= ADD_16_TARGET else "NOT met"
        print(f"  the master's part to admit, 16 nodes / {few}: {ratio16:.2f}x (target <= {ADD_16_TARGET}: {verdict})")
    print("  (the munge key's write, one SSH step a node, is not in it: it needs started nodes)")


def compare_sharing(tc: TestCluster, sizes: list[int], rounds: int) -> None:
    """Add and remove ``n`` nodes for each size, ``rounds`` times with one SSH connection per
    node and run and as many with one per task, alternated; print the means side by side."""
    tc.up(nodes=0)
    runs: dict[tuple[int, bool], list[tuple[float, float, float]]] = {}
    for n in sizes:
        for _ in range(rounds):
            for shared in (True, False):
                tc.share_connections = shared
                new = tc.launch(n)
                cpu = children_cpu()
                add = tc.run_playbook("add_node.yml", new_nodes=[tc.spec(i) for i in new])
                cpu = children_cpu() - cpu
                t = time.monotonic()
                pb = tc.remove_nodes([i.name for i in new])
                removed = time.monotonic() - t
                if not (add.ok and pb.ok):
                    raise SystemExit(f"a play failed:\n{add.stdout[-3000:]}\n{pb.stdout[-3000:]}")
                runs.setdefault((n, shared), []).append((add.seconds, cpu, removed))
                how = "shared" if shared else "per task"
                print(f"  {n} node(s), {how}: add {add.seconds:.1f} s ({cpu:.1f} s CPU), remove {removed:.1f} s")
    tc.share_connections = True
    load = os.getloadavg()
    print(f"\nSSH connections per task / shared by the run (means; load average now {load[0]:.1f} {load[1]:.1f}):")
    for n in sizes:
        (a0, c0, r0), (a1, c1, r1) = (
            tuple(sum(x[i] for x in runs[n, shared]) / rounds for i in range(3)) for shared in (False, True)
        )
        print(
            f"  {n} node(s): add {a0:.1f} s / {a1:.1f} s ({a1 / a0 - 1:+.0%}), master CPU {c0:.1f} s / {c1:.1f} s "
            f"({c1 / c0 - 1:+.0%}), remove {r0:.1f} s / {r1:.1f} s"
        )


def report(m: Measured, sizes: list[int]) -> None:
    """The figures, the burst ratios next to their targets, and the estimates on paper."""
    load = os.getloadavg()
    print(f"\nfigures (2-core machine, load average now {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}):")
    for k, v in m.figures.items():
        print(f"  {k:<50} {v:7.1f} s")
    for n, s in m.splits.items():
        print(
            f"  {n} node(s): module runs a node on the master {s.master_runs / n:.1f}, on the node "
            f"{s.node_runs / n:.1f} (the master's share {s.master_share:.0%}); the nodes' own tasks "
            f"{s.node_seconds / n:.1f} s a node"
        )
    few, many = min(sizes), max(sizes)
    for n in sizes:
        if n == few:
            continue
        target = ADD_16_TARGET if n >= 16 else ADD_K_TARGET if n <= 4 else None
        ratio = m.added(n) / m.added(few)
        verdict = "" if target is None else f" (target <= {target}: {'met' if ratio <= target else 'NOT met'})"
        print(f"  adding {n} nodes in one run / adding {few}: {ratio:.2f}x{verdict}")
    if many > few:
        on_paper(m, few, many)
    if m.boot_total:
        report_boot(m, sizes)
    cpu_floor("push", m.master_cpu, m.push_nodes_cpu, m.push_total)
    if m.boot_total:
        cpu_floor("at boot", m.boot_cpu, m.boot_nodes_cpu, m.boot_total)


def cpu_floor(
    how: str, master_cpu: dict[int, float], nodes_cpu: dict[int, float | None], total: dict[int, float]
) -> None:
    """What this machine allows at best: the burst's whole CPU (the master's and the node
    containers') spread over its cores, as a multiple of the fewest nodes' measured time. The
    test cluster's nodes share the master's cores, so no burst spending that CPU can be faster
    here; a real cluster's nodes each spend theirs on their own CPU."""
    cores = len(os.sched_getaffinity(0))
    few, many = min(total), max(total)
    print(f"\n  {how}: the burst's CPU on this machine's {cores} cores (the master's + the node containers'):")
    for n in sorted(total):
        nodes = nodes_cpu.get(n)
        if nodes is None:
            print(f"    {n:>3} node(s): the node containers' CPU could not be read")
            continue
        whole = master_cpu[n] + nodes
        print(
            f"    {n:>3} node(s): master {master_cpu[n] / n:.1f} s + nodes {nodes / n:.1f} s a node; at best "
            f"{whole / cores:.1f} s on {cores} cores = {whole / cores / total[few]:.2f}x the {few}-node burst's "
            f"{total[few]:.1f} s (measured {total[n] / total[few]:.2f}x)"
        )
    nodes_many = nodes_cpu.get(many)
    if many > few and nodes_many is not None:
        best = (master_cpu[many] + nodes_many) / cores / total[few]
        target = ADD_16_TARGET if many >= 16 else ADD_K_TARGET
        reach = "within reach" if best <= target else "out of reach on this machine"
        print(f"    the target for {many} nodes, <= {target}x: {reach} for plays that spend this CPU")


def report_boot(m: Measured, sizes: list[int]) -> None:
    """Push and boot side by side: from the launch until every node is up, as a multiple of one
    node, the master's CPU a node; the burst target against the nodes configuring themselves;
    on paper, 100 and 1,000 nodes at boot (the line through the points, the master's CPU floor)."""
    few, many = min(sizes), max(sizes)
    print("\n  from the launch until all are up: push (launch + add_node.yml) / at boot (launch, admit_nodes.yml,")
    print("  each node's node_boot.yml), measured one after the other in this run:")
    for n in sizes:
        p, b = m.push_total[n], m.boot_total[n]
        print(
            f"    {n:>3} node(s): push {p:6.1f} s ({p / m.push_total[few]:.2f}x), at boot {b:6.1f} s "
            f"({b / m.boot_total[few]:.2f}x); master CPU a node {m.master_cpu[n] / n:.1f} s / {m.boot_cpu[n] / n:.1f} s"
        )
    if many > few:
        ratio = m.boot_total[many] / m.boot_total[few]
        target = ADD_16_TARGET if many >= 16 else ADD_K_TARGET
        verdict = "met" if ratio <= target else "NOT met"
        print(
            f"  at boot, {many} nodes / {few}: {ratio:.2f}x (target <= {target}: {verdict}; the nodes' own runs"
            " share this machine's cores, which a real cluster's nodes do not)"
        )
        ratio = m.boot_admit[many] / m.boot_admit[few]
        verdict = "met" if ratio <= target else "NOT met"
        print(
            f"  at boot, the master's part (admit_nodes.yml) for {many} nodes / {few}: {ratio:.2f}x (target <="
            f" {target}: {verdict}; what a burst takes where each node boots on its own CPU, besides one node's own"
            " boot)"
        )
        on_paper_boot(m, few)


def on_paper(m: Measured, few: int, many: int) -> None:
    """100 and 1,000 nodes: today's push (the line through the points, the master's CPU floor),
    and, when the nodes configuring themselves at boot were not measured (``--at-boot`` prints
    those from the admit play), a rough estimate of them from the push: the master's own share
    of the CPU, one node's own tasks."""
    fixed, per_node = fit([(n, m.added(n)) for n in m.master_cpu])
    cpu_per_node = m.master_cpu[many] / many
    cores = len(os.sched_getaffinity(0))
    print(f"  on paper (push from the master; line through the points: {fixed:.0f} s + {per_node:.1f} s a node;")
    print(f"  master CPU {cpu_per_node:.1f} s a node on {cores} cores):")
    for n in PAPER_SIZES:
        line, floor = fixed + per_node * n, cpu_per_node * n / cores
        print(f"    {n:>5} nodes: {max(line, floor) / 60:6.1f} min (line {line / 60:.1f}, CPU floor {floor / 60:.1f})")
    if m.boot_total:
        return
    own = cpu_per_node * m.splits[many].master_share
    one_node = m.splits[few].node_seconds / few
    print(
        "  roughly, on paper (node-side roles at boot on each node's CPU, the master's own edits as today's tasks: "
        f"{own:.1f} s of its CPU a node, one node's own tasks {one_node:.0f} s):"
    )
    for n in PAPER_SIZES:
        print(f"    {n:>5} nodes: {(one_node + own * n / cores) / 60:6.1f} min")


def on_paper_boot(m: Measured, few: int) -> None:
    """100 and 1,000 nodes at boot on a real cluster, where each node runs its own boot on its own
    CPU: the master's CPU for the admit play (a line through the measured points: a part per run,
    a part per node) spread over its cores, up to all of it (the play's controller runs in one
    process), plus one node's own boot (the one-node run, from the launch until it reported)."""
    fixed, per_node = fit(list(m.boot_cpu.items()))
    cores = len(os.sched_getaffinity(0))
    own = m.boot_total[few]
    print(
        f"  on paper at boot, each node's boot on its own CPU (the master's CPU {fixed:.1f} s a run + "
        f"{per_node:.2f} s a node, over 1 to {cores} cores; one node's own boot {own:.0f} s):"
    )
    for n in PAPER_SIZES:
        cpu = fixed + per_node * n
        print(f"    {n:>5} nodes: {(own + cpu / cores) / 60:6.1f} to {(own + cpu) / 60:.1f} min")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--from-nothing", action="store_true", help="also rebuild the node image")
    ap.add_argument("--sizes", default="1,4", help="node counts to add in one run each (default 1,4)")
    ap.add_argument(
        "--sharing",
        type=int,
        metavar="ROUNDS",
        help="instead: SSH connections shared by the run against one per task, alternated, ROUNDS times each",
    )
    ap.add_argument(
        "--master-part",
        metavar="SIZES",
        help="instead: the admit and remove plays alone for nodes that are not started, e.g. 1,16,100",
    )
    ap.add_argument(
        "--scheduler",
        choices=("sge", "slurm"),
        default="sge",
        help="slurm: with --master-part, Slurm's master's part (scontrol updates, slurm_admit_nodes.yml "
        "without the key's write, the removal) with nodes Slurm powers up; else Slurm's burst end to end "
        "for each of --sizes, pushed and at boot (elbdev.testcluster.slurm_burst)",
    )
    ap.add_argument(
        "--at-boot",
        action="store_true",
        help="also each size with the nodes configuring themselves at boot, side by side with the push",
    )
    return ap


def main() -> int:
    args = _parser().parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    sizes = [int(x) for x in args.sizes.split(",")]
    split_file = Path(tempfile.mkstemp(prefix="elbdev-task-split-", suffix=".jsonl")[1])
    os.environ |= {
        "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS),
        "ANSIBLE_CALLBACKS_ENABLED": "elbdev_task_split",
        "ELBDEV_TASK_SPLIT": str(split_file),
    }
    tc = TestCluster()
    tc.down()
    if args.sharing:
        try:
            compare_sharing(tc, sizes, args.sharing)
        finally:
            tc.down()
            split_file.unlink(missing_ok=True)
        return 0
    if args.master_part:
        try:
            part_sizes = [int(x) for x in args.master_part.split(",")]
            if args.scheduler == "slurm":
                measure_slurm_master_part(tc, part_sizes)
            else:
                measure_master_part(tc, part_sizes)
        finally:
            tc.down()
            split_file.unlink(missing_ok=True)
        return 0
    if args.scheduler == "slurm":
        from elbdev.testcluster.slurm_burst import measure_slurm_burst, report_burst  # noqa: PLC0415

        try:
            bursts = measure_slurm_burst(tc, sizes)
        finally:
            tc.down()
            split_file.unlink(missing_ok=True)
        report_burst(bursts, target_4=ADD_K_TARGET, target_16=ADD_16_TARGET)
        return 0
    if args.from_nothing:
        run(["podman", "rmi", "--force", C.IMAGE], check=False, timeout=120)
        for tar in C.IMAGE_DIR.glob("elb-node-*.tar"):
            tar.unlink()
    try:
        measured = measure(tc, sizes, split_file, at_boot=args.at_boot)
    finally:
        tc.down()
        split_file.unlink(missing_ok=True)
    report(measured, sizes)
    return 0


if __name__ == "__main__":  # pragma: no cover - run by hand
    raise SystemExit(main())
