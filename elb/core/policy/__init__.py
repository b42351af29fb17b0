"""Scaling policies: elb's default and the peers' (for ``elb simulate``).

``make_policy`` builds the policy a config names; every policy satisfies ``Policy``.

Imports ``elb.core`` only.
"""

from __future__ import annotations

from collections.abc import Callable

from elb.core.config import ClusterConfig, PolicyConfig
from elb.core.policy.base import Policy, QuietHint
from elb.core.policy.default import ElbPolicy
from elb.core.policy.peers import ParallelclusterPolicy, SlurmPolicy, StarclusterPolicy, StaticPolicy

PolicyFactory = Callable[[PolicyConfig, ClusterConfig], Policy]

POLICIES: dict[str, PolicyFactory] = {"elb": ElbPolicy}
POLICIES["starcluster"] = StarclusterPolicy.from_config
POLICIES["parallelcluster"] = ParallelclusterPolicy.from_config
POLICIES["slurm"] = SlurmPolicy.from_config
POLICIES["static"] = StaticPolicy.from_config


def make_policy(config: PolicyConfig, cluster: ClusterConfig) -> Policy:
    try:
        factory = POLICIES[config.name]
    except KeyError:
        raise ValueError(f"unknown policy {config.name!r}; known: {', '.join(sorted(POLICIES))}") from None
    return factory(config, cluster)


__all__ = ["POLICIES", "Policy", "QuietHint", "make_policy"]
