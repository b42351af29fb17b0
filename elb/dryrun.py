"""``elb once --dry-run``: what SGE shows and what a pass would do, with the assumptions made.

The plan comes from the same pass the daemon runs, with the policy sized the way the daemon
sizes it (``elb.nodesize``): when ``policy.slots_per_node`` is unset the cloud is asked what a new
node has (the adapter is built for that read only); if it cannot say, the policy infers the size
from the workers, as the daemon's does. Nothing is launched, provisioned or written: the journal is
read (``mode=ro``) into a copy in memory, an empty one when there is none.
"""

from __future__ import annotations

from collections.abc import Callable

from elb import nodesize
from elb.actuator import SgeClient
from elb.config import Config
from elb.daemon import Balancer, snapshot_summary
from elb.exitcodes import Exit
from elb.interfaces import Cloud
from elb.journal import Journal
from elb.policy.base import minutes


def ask_node_size(cfg: Config, make_cloud: Callable[[Config], Cloud]) -> nodesize.NodeSize:
    """The size of a new node as the daemon learns it; the cloud is built only when needed."""
    provider = cfg.cloud.provider
    if cfg.policy.slots_per_node is not None:
        return nodesize.new_node_size(cfg.policy, None, provider)
    try:
        cloud = make_cloud(cfg)
    except Exception as err:  # the size is a hint: the dry run goes on as the daemon would
        return nodesize.new_node_size(cfg.policy, None, provider, f"{type(err).__name__}: {err}")
    return nodesize.new_node_size(cfg.policy, cloud, provider)


def dry_run(
    cfg: Config, sge: SgeClient, make_cloud: Callable[[Config], Cloud], out: Callable[[str], None] = print
) -> tuple[Exit, str | None]:
    """Print the snapshot, the assumptions and the plan with ``out``. Returns the exit code and,
    when SGE could not be read, the error."""
    size = ask_node_size(cfg, make_cloud)
    journal = Journal.read_only(cfg.journal_path)  # a copy in memory: the file is not written
    try:
        balancer = Balancer(
            cfg, sge=sge, journal=journal, policy=nodesize.policy_with(cfg, size), node_slots=size.slots
        )
        result = balancer.run_pass(dry_run=True)
        nodes = journal.nodes(include_gone=True)
    finally:
        journal.close()
    if not result.ok:
        return Exit.UNREADABLE, result.error
    assert result.snapshot is not None and result.plan is not None
    master = cfg.cluster.master
    slots, source = nodesize.effective_slots(size, result.snapshot.hosts, nodes, master)
    p = cfg.policy
    out("snapshot:")
    for line in snapshot_summary(result.snapshot, master):
        out(f"  {line}")
    out("assumptions:")
    out(f"  a new node has {slots} slot{'s' if slots != 1 else ''} ({source})")
    out(f"  a new node is ready {minutes(p.boot_time)} after launch (policy.boot_time)")
    out(f"  a pass every {minutes(cfg.poll_interval)} (poll_interval)")
    out(f"  policy {p.name}, {p.min_nodes}-{p.max_nodes} nodes")
    if balancer.last.not_demand:
        out("waiting jobs that are not demand (no node is launched for them):")
        for n in balancer.last.not_demand:
            out(f"  {n.describe()}")
    out("plan (dry run, nothing changed):")
    for line in result.plan.describe():
        out(f"  {line}")
    return Exit.OK, None
