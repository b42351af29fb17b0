"""The slots of a new node: one answer for the daemon, the dry run and every command.

``policy.slots_per_node`` when set; else the cloud is asked once (EC2: the instance type's vCPUs;
local: this machine's processors), and the daemon keeps its answer in the journal; else the
policy infers it from the workers the scheduler shows (their most common size), else 1
(``elb.core.policy.view.infer_slots_per_node``). The commands (``known``) take the configured value,
else the daemon's answer from the journal, else ask the cloud as the daemon would.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from elb.core.config import Config, PolicyConfig
from elb.core.interfaces import Cloud
from elb.core.model import Host, Node
from elb.core.policy import Policy, make_policy
from elb.core.policy.grouped import policy_for
from elb.core.policy.view import infer_slots_per_node

log = logging.getLogger("elb")


@dataclass(frozen=True, slots=True)
class NodeSize:
    """``slots``: a new node's slots, None when they are left to the policy to infer; ``source``:
    where the figure came from (or why the cloud could not tell), in words."""

    slots: int | None
    source: str


def new_node_size(policy: PolicyConfig, cloud: Cloud | None, provider: str, cloud_error: str | None = None) -> NodeSize:
    """What a new node has: configured, else the cloud's answer. ``cloud_error``: why there is
    no cloud to ask (it could not be built)."""
    if policy.slots_per_node is not None:
        return NodeSize(policy.slots_per_node, "policy.slots_per_node")
    if cloud is None:
        return NodeSize(None, f"the {provider} cloud could not be asked: {cloud_error or 'no cloud adapter'}")
    try:
        slots = cloud.new_node_slots()
    except Exception as err:  # a hint only: the policy then infers the size from the hosts
        return NodeSize(None, f"the {provider} cloud could not be asked: {err}")
    if not slots:
        return NodeSize(None, f"the {provider} cloud did not say")
    return NodeSize(slots, f"asked the {provider} cloud")


def known(config: Config, learnt: tuple[int, str] | None, cloud: Cloud | None, cloud_error: str = "") -> NodeSize:
    """A new node's size as the daemon plans with it (see the module's description): configured,
    else ``learnt`` (the daemon's answer from the journal), else ``cloud`` asked (None: it could
    not be built, ``cloud_error`` says why; the workers then say)."""
    if config.node_groups is not None:
        return NodeSize(None, "node_groups")
    if config.policy.slots_per_node is not None:
        return new_node_size(config.policy, None, config.cloud.provider)
    if learnt is not None:
        return NodeSize(learnt[0], f"{learnt[1]}, as the daemon learnt it")
    return new_node_size(config.policy, cloud, config.cloud.provider, cloud_error)


def policy_with(config: Config, size: NodeSize) -> Policy:
    """The configured policy, planning with ``size`` when it is known."""
    if config.node_groups is not None:  # each group has its own slots
        return policy_for(config)
    policy = config.policy
    if size.slots is not None and size.slots != policy.slots_per_node:
        policy = policy.model_copy(update={"slots_per_node": size.slots})
    return make_policy(policy, config.cluster)


def learn_once(config: Config, cloud: Cloud | None, policy: Policy, ask: bool) -> tuple[Policy, bool, NodeSize | None]:
    """The daemon's step, once per start while ``ask`` (slots_per_node unset and no policy given):
    the cloud's size of a new node becomes the policy's. Without it, a cluster with no worker yet
    would count one slot per node and launch a node per waiting slot. Returns the policy to use
    and whether to ask again (only while there is no cloud to ask), and the size learnt (None:
    not learnt)."""
    if not ask or cloud is None:
        return policy, ask, None
    size = new_node_size(config.policy, cloud, config.cloud.provider)
    if size.slots is None:
        log.warning("cannot learn the slots of a new node (%s): inferred from the workers", size.source)
        return policy, False, None
    log.info("policy.slots_per_node not set: a new node has %d slots (%s)", size.slots, size.source)
    return policy_with(config, size), False, size


def effective_slots(size: NodeSize, hosts: Sequence[Host], nodes: Sequence[Node], master: str) -> tuple[int, str]:
    """The slots the policy plans a new node with, and where the figure comes from: ``size``
    when known, else what the policy infers from the workers (the same function)."""
    if size.slots is not None:
        return size.slots, size.source
    workers = [h for h in hosts if h.name != master]
    alive = [n for n in nodes if n.state.alive and n.name != master]
    slots = infer_slots_per_node(workers, alive, None)
    if any(h.slots_total > 0 for h in workers) or any(n.slots for n in alive):
        return slots, f"{size.source}; the workers' most common size"
    return slots, f"{size.source}; no worker to learn from, so 1"
