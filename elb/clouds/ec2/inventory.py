"""The cluster as an Ansible inventory, read from EC2 (for ``plugins/inventory/elb_ec2.py``).

The result has the shape of the inventory elb's provisioner builds (``elb.provision.inventory``):
group ``master`` (the configured master host), group ``workers`` (the cluster's running workers,
elb's and the admin's, by tag), host names = node names (``Name`` tag), ``ansible_host`` = private
address, ``elb_slots`` = slots (configured, else the instance type's vCPUs), ``elb_market`` =
``spot`` for a spot instance (EC2's ``InstanceLifecycle``), else ``on-demand`` (the site playbooks
start the spot agent on spot workers); as vars of ``all`` the connection settings and the role
variables elb's provisioner passes. Instances whose
``Name`` tag is not a plain host name, or that share a name, are left out with a warning:
Ansible templates inventory values, so a tag must never reach it unchecked.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from elb.clouds.ec2.cloud import ROLE_MASTER, ROLE_WORKER, Ec2Cloud, tags_of
from elb.core.config import Config
from elb.core.drivers import node_plays
from elb.core.interfaces import TAG_CLUSTER, TAG_NAME, TAG_ROLE, CloudError, NodeSpec
from elb.provision.ansible import role_vars
from elb.provision.hostkeys import HostKeys
from elb.provision.inventory import (
    Connection,
    InventoryError,
    build_inventory,
    check_address,
    check_extra_vars,
    check_host_name,
)

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import InstanceTypeDef


@dataclass
class Ec2Inventory:
    inventory: dict[str, object]
    warnings: list[str] = field(default_factory=list)


def market_of(raw: InstanceTypeDef) -> str:
    """A running instance's market as EC2 describes it: ``spot`` for a spot instance, else
    ``on-demand`` (EC2 gives ``InstanceLifecycle`` for spot, scheduled and capacity-block
    instances only; of those, only spot ones are interrupted)."""
    return "spot" if raw.get("InstanceLifecycle") == "spot" else "on-demand"


def ec2_inventory(config: Config, cloud: Ec2Cloud, *, master_local: bool = True) -> Ec2Inventory:
    """Read the cluster's running master and workers from EC2 and build the inventory.

    ``master_local``: the inventory is used on the master itself (local connection, as elb
    does); otherwise the master is reached over SSH at its private address.
    """
    raws = cloud.describe(
        [
            {"Name": f"tag:{TAG_CLUSTER}", "Values": [cloud.cluster]},
            {"Name": f"tag:{TAG_ROLE}", "Values": [ROLE_MASTER, ROLE_WORKER]},
            {"Name": "instance-state-name", "Values": ["running"]},
        ],
        "reading the cluster's instances",
    )
    warnings: list[str] = []
    masters = [r for r in raws if tags_of(r).get(TAG_ROLE) == ROLE_MASTER]
    master_address: str | None = None
    if not master_local:
        if len(masters) != 1:
            raise CloudError(
                f"cluster {cloud.cluster}: expected one running instance tagged {TAG_ROLE}={ROLE_MASTER}, "
                f"found {len(masters)}"
            )
        master_address = masters[0].get("PrivateIpAddress")
    workers = [r for r in raws if tags_of(r).get(TAG_ROLE) == ROLE_WORKER]
    counts = Counter(tags_of(r).get(TAG_NAME, "") for r in workers)
    specs: list[NodeSpec] = []
    for raw in sorted(workers, key=lambda r: tags_of(r).get(TAG_NAME, "")):
        iid = raw.get("InstanceId", "?")
        name = tags_of(raw).get(TAG_NAME, "")
        try:
            check_host_name(name, f"Name tag of {iid}")
            if name == config.cluster.master:
                raise InventoryError(f"{iid} is tagged as a worker named like the master ({name})")
            if counts[name] > 1:
                raise InventoryError(f"{counts[name]} running workers are named {name}; none is listed")
            ip = check_address(raw.get("PrivateIpAddress"), f"{name} ({iid})")
        except InventoryError as err:
            warnings.append(f"left out: {err}")
            continue
        itype = raw.get("InstanceType")
        slots = None
        if itype:
            try:
                slots = cloud.slots_for(itype)
            except CloudError as err:
                warnings.append(f"{name}: no elb_slots: {err}")
        specs.append(NodeSpec(name, ip, slots, market=market_of(raw)))
    prov = config.provision
    conn = Connection(
        master=config.cluster.master,
        master_address=master_address,
        ssh_user=prov.ssh_user,
        ssh_private_key=prov.ssh_private_key,
        host_keys=prov.host_keys_path,
    )
    # Each worker's host key is checked against elb's store; one elb holds none for (made by
    # hand, or by an older elb) has the key it shows at the first contact pinned there.
    keys = HostKeys(prov.host_keys_path)
    pin = [s.name for s in specs if not keys.known(s.name)]
    # The roles get what elb's config says, as elb's provisioner passes it (provision.extra_vars
    # win; here they are group vars of ``all``, so a play's own vars still come first).
    group_vars = {**role_vars(config.cluster, node_plays(config).variables), **check_extra_vars(prov.extra_vars)}
    return Ec2Inventory(build_inventory(conn, workers=specs, group_vars=group_vars, pin=pin), warnings)
