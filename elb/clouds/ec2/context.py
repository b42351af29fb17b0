"""What every part of the EC2 adapter shares: the cluster it serves, its settings, the EC2 client,
the clock, and the store of the nodes' host keys.

One ``Ec2Context`` per ``Ec2Cloud``; each part holds it and reads it at each call, so what is set
on the adapter (its ``client``, its ``host_keys``) is what every part uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from elb.clouds.ec2.config import Ec2Config
from elb.core.groups import NodeGroups
from elb.provision.hostkeys import HostKeys

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client


@dataclass(slots=True)
class Ec2Context:
    """The cluster ``cluster`` (its master ``master``) on EC2, as ``config`` says, through ``client``."""

    config: Ec2Config
    cluster: str
    master: str
    slots_per_node: int | None  # configured; None: an instance type's vCPUs
    client: EC2Client
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    poll_interval: float  # seconds between two looks at instances being waited for
    node_groups: NodeGroups | None  # config node_groups: each group's types, template, market
    # The nodes' SSH host keys: each node elb describes itself gets its key in its user data
    # (``elb.clouds.ec2.user_data``). None: nodes make their own at first boot (unchecked).
    host_keys: HostKeys | None
