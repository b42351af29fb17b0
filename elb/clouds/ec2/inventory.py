"""The cluster as an Ansible inventory, read from EC2 (for ``plugins/inventory/elb_ec2.py``).

The result has the shape of the inventory elb's provisioner builds (``elb.provision.inventory``):
group ``master`` (the configured master host), group ``workers`` (the cluster's running workers,
elb's and the admin's, by tag), host names = node names (``Name`` tag), ``ansible_host`` = private
address, ``elb_slots`` = slots (its node group's, else configured, else the instance type's
vCPUs), ``elb_market`` =
``spot`` for a spot instance (EC2's ``InstanceLifecycle``), else ``on-demand`` (the site playbooks
start the spot agent on spot workers); as vars of ``all`` the connection settings and the role
variables elb's provisioner passes. Instances whose
``Name`` tag is not a plain host name, or that share a name, are left out with a warning:
Ansible templates inventory values, so a tag must never reach it unchecked.

Each worker is of a node group (``elb_group``, and the group ``elb_group_<name>``): with
``node_groups``, the one its ``elb:group`` tag names, with that group's slots and the variables
elb's own plays give a node of it (``elb.provision.inventory.in_group``, ``NodePlays.group_vars``),
so that ``site.yml`` run by hand keeps it in its group's queues; without, the one group
``default``. A worker whose group cannot be known (``worker_group``) is left out with a warning
when its scheduler's plays take variables of a group, else listed without one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from elb.clouds.ec2.cloud import Ec2Cloud
from elb.clouds.ec2.tags import ROLE_MASTER, ROLE_WORKER, tags_of
from elb.core.config import Config
from elb.core.drivers import NodePlays, node_plays
from elb.core.groups import NodeGroup, NodeGroups, known_group
from elb.core.interfaces import TAG_CLUSTER, TAG_GROUP, TAG_NAME, TAG_ROLE, CloudError, NodeSpec
from elb.provision.ansible import role_vars
from elb.provision.hostkeys import HostKeys
from elb.provision.inventory import (
    Connection,
    InventoryError,
    build_inventory,
    check_address,
    check_extra_vars,
    check_host_name,
    in_group,
    keyed_group,
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
    plays = node_plays(config)
    specs: list[NodeSpec] = []
    for raw in sorted(workers, key=lambda r: tags_of(r).get(TAG_NAME, "")):
        try:
            specs.append(_worker(raw, config, cloud, plays, counts=counts, warnings=warnings))
        except InventoryError as err:
            warnings.append(f"left out: {err}")
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
    group_vars = {**role_vars(config.cluster, plays.variables), **check_extra_vars(prov.extra_vars)}
    inventory = build_inventory(conn, workers=specs, group_vars=group_vars, pin=pin)
    return Ec2Inventory(_with_keyed_groups(inventory, specs), warnings)


def _worker(
    raw: InstanceTypeDef,
    config: Config,
    cloud: Ec2Cloud,
    plays: NodePlays,
    *,
    counts: Mapping[str, int],
    warnings: list[str],
) -> NodeSpec:
    """One running worker as a node of its group; InventoryError: it is left out, and why."""
    tags = tags_of(raw)
    iid = raw.get("InstanceId", "?")
    name = tags.get(TAG_NAME, "")
    check_host_name(name, f"Name tag of {iid}")
    if name == config.cluster.master:
        raise InventoryError(f"{iid} is tagged as a worker named like the master ({name})")
    if counts[name] > 1:
        raise InventoryError(f"{counts[name]} running workers are named {name}; none is listed")
    ip = check_address(raw.get("PrivateIpAddress"), f"{name} ({iid})")
    market = market_of(raw)
    groups = config.groups(1)
    if config.node_groups is None:
        # Every worker is of the one group, and takes the settings of every node.
        return NodeSpec(name, ip, _slots(raw, cloud, warnings), group=groups.groups[0].name, market=market)
    try:
        group = worker_group(tags.get(TAG_GROUP), groups, f"{name} ({iid})")
    except InventoryError as err:
        if any(plays.group_vars(g) for g in groups.groups):
            raise  # its group's variables would place it in the scheduler: none may be guessed
        warnings.append(f"{err}; listed without elb_group (its scheduler's plays take nothing of a group)")
        return NodeSpec(name, ip, _slots(raw, cloud, warnings), market=market)
    # Its group's slots and variables, as elb's plays give them; the market EC2 says (a spot
    # group's node may have fallen back to on-demand).
    return replace(in_group(NodeSpec(name, ip), group, plays.group_vars), market=market)


def _slots(raw: InstanceTypeDef, cloud: Ec2Cloud, warnings: list[str]) -> int | None:
    """A worker's slots by its instance type (configured, else its vCPUs); None, with a warning,
    when EC2 cannot say."""
    itype = raw.get("InstanceType")
    if not itype:
        return None
    try:
        return cloud.slots_for(itype)
    except CloudError as err:
        warnings.append(f"{tags_of(raw).get(TAG_NAME)}: no elb_slots: {err}")
        return None


def worker_group(tag: str | None, groups: NodeGroups, what: str) -> NodeGroup:
    """The configured node group of worker ``what`` whose ``elb:group`` tag is ``tag`` (None:
    untagged): the group the tag names; untagged, the one group when there is only one.
    InventoryError when it cannot be known (no tag among several groups: launched by an elb that
    set none, or by hand; a group no longer configured): its group's variables place it in the
    scheduler (Grid Engine: queues, host group, complex values, slots), and no other group's may."""
    found = known_group(tag, groups)
    if found is not None:
        return found
    names = ", ".join(g.name for g in groups.groups)
    if tag is None:
        raise InventoryError(
            f"{what} has no {TAG_GROUP} tag and the config has node groups {names}: its group cannot be "
            f"known; tag it {TAG_GROUP}=<group>"
        )
    raise InventoryError(f"{what}: its {TAG_GROUP} tag {tag[:64]!r} names no configured node group ({names})")


def _with_keyed_groups(inventory: dict[str, object], specs: Sequence[NodeSpec]) -> dict[str, object]:
    """``inventory`` with a group per node group (``keyed_group``: ``elb_group_gpu``) holding its
    workers, for ``--limit`` and ``group_vars/`` of one node group."""
    children = inventory["all"]["children"]  # type: ignore[index]
    for spec in specs:
        if spec.group is not None:
            hosts = children.setdefault(keyed_group(spec.group), {"hosts": {}})["hosts"]
            hosts[spec.name] = {}
    return inventory
