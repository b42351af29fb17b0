"""The Ansible inventory elb builds from what it knows (pure: no I/O, no cloud call).

Groups, as ``playbooks/`` expect them:

- ``master``: exactly one host, the scheduler's master (elb runs there, so by default it is
  reached with ``ansible_connection: local``);
- ``workers``: workers that are ready and stay;
- ``new_nodes``: nodes being added (``playbooks/add_node.yml``);
- ``old_nodes``: nodes being removed (``playbooks/remove_node.yml``).

Host vars: ``ansible_host`` (private address) and, when known, ``elb_slots``; a node of a
configured node group also gets ``elb_group``, ``elb_market`` (``on-demand`` or ``spot``: its group's
market, for the spot_agent role) and the scheduler's variables for its group
(``NodeSpec.host_vars``: Grid Engine's ``sge_exec_queues``, ``sge_exec_hostgroup`` and
``sge_exec_complex_values``), their values plain names and values or lists and maps of them. Connection
settings (user, key file, SSH options) are group vars of ``all``; with a host key store
(``Connection.host_keys``, see ``elb.provision.hostkeys``) each node also gets SSH options that
check its host key against the one elb holds for it (``host_key_args``). Names and addresses are
validated here: Ansible templates inventory values, so nothing that is not a plain host name
or an IP address may reach it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

from elb.core.groups import NodeGroup
from elb.core.interfaces import NodeSpec
from elb.provision import sshmux

# A DNS label or dotted name: what SGE accepts as a host name, and nothing Jinja or a shell
# could read as syntax.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_USER_NAME = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GROUP_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
# A plain name or value of a scheduler's: all.q, @gpu, 120G, TRUE, lx-amd64, 2.5.
_PLAIN = re.compile(r"[A-Za-z0-9_.:+@-]{1,256}")
_MARKETS = ("on-demand", "spot")  # a node group's market

GROUPS = ("master", "workers", "new_nodes", "old_nodes")

# Fail fast on dead hosts. Whether a run shares one connection per host is said by
# ``build_inventory``'s ``shared_connections`` (``elb.provision.sshmux``: only within one run,
# never across runs). Host keys are checked per host (``host_key_args``):
# these options come first on ssh's command line, where the first value of an option wins, so
# they set nothing about host keys; a host without options of its own (the master, when reached
# over SSH) is checked against the user's known_hosts, strictly (BatchMode never asks).
SSH_ARGS = (
    "-o ConnectTimeout=10 -o ConnectionAttempts=1 "
    "-o ServerAliveInterval=10 -o ServerAliveCountMax=3 "
    "-o BatchMode=yes -o LogLevel=ERROR"
)
# A store directory goes into SSH options unquoted: nothing ssh's or Ansible's splitting or
# templating would read.
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9_.@+/-]*")
CONNECT_TIMEOUT = 10  # seconds, Ansible's own connection timeout (``ansible_timeout``)


class InventoryError(ValueError):
    """A node, name or setting that cannot go into an inventory. Nothing was run."""


@dataclass(frozen=True, slots=True)
class Connection:
    """How Ansible reaches the hosts. ``master_address`` None: the master is this machine."""

    master: str = "master"
    master_address: str | None = None
    ssh_user: str = "root"
    ssh_private_key: Path | None = None
    ssh_args: str = SSH_ARGS
    connect_timeout: int = CONNECT_TIMEOUT
    # The host key store (``elb.provision.hostkeys``): each node's key is checked against its
    # file there. None: nodes are checked against the user's known_hosts.
    host_keys: Path | None = None


def host_key_args(store: Path, name: str, *, pin: bool = False) -> str:
    """SSH options that check node ``name``'s host key against ``<store>/<name>.known`` (and
    nothing else: no global known_hosts), under the alias ``name``: the key belongs to the node,
    whatever its address. ``pin``: a node whose key the store lacks (one elb did not launch with
    a key) has the key it shows at the first contact written there (``accept-new``); a changed
    key is refused all the same."""
    _plain_path(store, "host key directory")
    check_host_name(name, "node name")
    return (
        f"-o HostKeyAlias={name} -o UserKnownHostsFile={store}/{name}.known -o GlobalKnownHostsFile=/dev/null "
        f"-o StrictHostKeyChecking={'accept-new' if pin else 'yes'} -o HashKnownHosts=no"
    )


def _plain_path(path: Path, what: str) -> str:
    """``path`` as it goes into SSH options, unquoted: nothing ssh's or Ansible's splitting or
    templating would read."""
    if not _PLAIN_PATH.fullmatch(str(path)):
        raise InventoryError(f"{what} {str(path)!r}: expected an absolute path of letters, digits, ._@+-/")
    return str(path)


def check_host_name(name: object, what: str = "host name") -> str:
    if not isinstance(name, str) or len(name) > 253 or not _HOST_NAME.fullmatch(name):
        raise InventoryError(f"invalid {what} {name!r}: expected letters, digits, '-' and '.' only")
    return name


def check_address(address: object, what: str) -> str:
    if not isinstance(address, str):
        raise InventoryError(f"{what}: address {address!r} is not a string")
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        raise InventoryError(f"{what}: {address!r} is not an IP address") from None


def check_market(market: object, what: str) -> str:
    """A node group's market, ``on-demand`` or ``spot`` (``elb_market``, for the spot agent)."""
    if market not in _MARKETS:
        raise InventoryError(f"{what}: market {market!r} is not one of {', '.join(_MARKETS)}")
    return str(market)


def check_extra_vars(extra_vars: Mapping[str, object]) -> dict[str, object]:
    """Extra vars must have plain variable names (Ansible's rule, and runner quotes none)."""
    for key in extra_vars:
        if not isinstance(key, str) or not _VAR_NAME.fullmatch(key):
            raise InventoryError(f"extra_vars: {key!r} is not a valid Ansible variable name")
    return dict(extra_vars)


def in_group(node: NodeSpec, group: NodeGroup, group_vars: Callable[[NodeGroup], Mapping[str, object]]) -> NodeSpec:
    """``node`` as a node of ``group``: the group's name, slots and market, and the scheduler's
    variables for a node of it (``group_vars``: ``elb.core.drivers.NodePlays.group_vars``), as
    elb's plays and the dynamic inventory give them."""
    return replace(
        node,
        group=group.name,
        slots=group.slots,
        market=group.market,
        host_vars=MappingProxyType(dict(group_vars(group))),
    )


def keyed_group(group: str) -> str:
    """The inventory group of the workers of node group ``group`` (``elb_group_gpu``): an Ansible
    group name takes no ``-``, so it is ``_`` there."""
    return "elb_group_" + _checked(_GROUP_NAME, group, "node group").replace("-", "_").replace(".", "_")


def _node_vars(node: NodeSpec) -> dict[str, object]:
    check_host_name(node.name, "node name")
    hv: dict[str, object] = {"ansible_host": check_address(node.private_ip, f"node {node.name}")}
    if node.slots is not None:
        if isinstance(node.slots, bool) or not isinstance(node.slots, int) or node.slots < 1:
            raise InventoryError(f"node {node.name}: slots must be a positive integer, not {node.slots!r}")
        hv["elb_slots"] = node.slots
    # Its node group and what the scheduler's roles take of it (host vars: above the role_vars of ``all``).
    if node.group is not None:
        hv["elb_group"] = _checked(_GROUP_NAME, node.group, f"node {node.name}: group")
    if node.market is not None:
        hv["elb_market"] = check_market(node.market, f"node {node.name}")
    for key, value in node.host_vars.items():
        if not isinstance(key, str) or not _VAR_NAME.fullmatch(key) or key in hv:
            raise InventoryError(f"node {node.name}: {key!r} is not a variable its scheduler may set")
        hv[key] = _plain(value, f"node {node.name}: {key}")
    return hv


def _plain(value: object, what: str) -> object:
    """``value`` when it is a plain name or value, or a list or map of them."""
    if isinstance(value, Mapping):
        return {_checked(_PLAIN, k, what): _checked(_PLAIN, v, f"{what}: {k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_checked(_PLAIN, v, what) for v in value]
    return _checked(_PLAIN, value, what)


def _checked(pattern: re.Pattern[str], text: object, what: str) -> str:
    """``text`` when it is a plain name or value: Ansible templates inventory values, so
    nothing it could read as syntax ({{, {%) may reach it."""
    if not isinstance(text, str) or not pattern.fullmatch(text):
        raise InventoryError(f"{what} {text!r}: not a plain name or value")
    return text


def build_inventory(
    conn: Connection,
    *,
    workers: Sequence[NodeSpec] = (),
    new_nodes: Sequence[NodeSpec] = (),
    old_nodes: Sequence[NodeSpec] = (),
    group_vars: Mapping[str, object] | None = None,
    pin: Collection[str] = (),
    shared_connections: Path | None = None,
) -> dict[str, object]:
    """The inventory as a YAML/JSON-ready mapping. Raises InventoryError on any bad input.

    ``shared_connections``: the directory of one run's master connections
    (``elb.provision.sshmux.shared_connections``): each host is reached through one SSH connection
    for the whole run. None: a connection per task, for an inventory that outlives one run.

    A name may appear in one group only, and never be the master's. ``group_vars`` go to
    ``all`` (above the roles' defaults, below extra vars). With ``conn.host_keys`` every node
    gets ``ansible_ssh_common_args`` from ``host_key_args`` (``pin``: the nodes whose key may
    be taken at the first contact).
    """
    master = check_host_name(conn.master, "master host name")
    if conn.host_keys is not None:
        host_key_args(conn.host_keys, master)  # the store's path is one ssh can take as it is
    if conn.ssh_user and not _USER_NAME.fullmatch(conn.ssh_user):
        raise InventoryError(f"invalid SSH user {conn.ssh_user!r}")
    seen: dict[str, str] = {master: "master"}
    groups: dict[str, dict[str, dict[str, object]]] = {}
    for group, nodes in (("workers", workers), ("new_nodes", new_nodes), ("old_nodes", old_nodes)):
        hosts: dict[str, dict[str, object]] = {}
        for node in nodes:
            hv = _node_vars(node)
            if node.name in seen:
                raise InventoryError(f"node {node.name} given twice (in {seen[node.name]} and {group})")
            seen[node.name] = group
            if conn.host_keys is not None:
                # Also on when an ansible.cfg says host_key_checking = False, which would put
                # StrictHostKeyChecking=no on the command line before these options.
                hv["ansible_host_key_checking"] = True
                hv["ansible_ssh_common_args"] = host_key_args(conn.host_keys, node.name, pin=node.name in pin)
            hosts[node.name] = hv
        groups[group] = hosts

    master_vars: dict[str, object]
    if conn.master_address is None:
        # elb runs on the master: no SSH to ourselves, and the modules run with this Python.
        master_vars = {
            "ansible_connection": "local",
            "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        }
    else:
        master_vars = {"ansible_host": check_address(conn.master_address, "master")}

    all_vars: dict[str, object] = dict(check_extra_vars(group_vars or {}))
    all_vars |= {
        "ansible_user": conn.ssh_user,
        "ansible_ssh_args": f"{sshmux.connection_args(shared_connections)} {conn.ssh_args}",
        "ansible_timeout": conn.connect_timeout,
    }
    if shared_connections is not None:
        all_vars["ansible_control_path_dir"] = _plain_path(shared_connections, "shared connections directory")
    if conn.ssh_private_key is not None:
        # The path only: the key itself is never read by elb nor copied anywhere.
        all_vars["ansible_ssh_private_key_file"] = str(conn.ssh_private_key)

    children: dict[str, object] = {"master": {"hosts": {master: master_vars}}}
    for group in ("workers", "new_nodes", "old_nodes"):
        # An empty group is still declared, so `groups['old_nodes']` is [] rather than undefined.
        children[group] = {"hosts": groups[group]} if groups[group] else {}
    return {"all": {"vars": all_vars, "children": children}}


def hosts_of(inventory: Mapping[str, object], group: str) -> list[str]:
    """Host names of one group of an inventory built by ``build_inventory``."""
    all_ = inventory.get("all")
    if not isinstance(all_, Mapping):
        return []
    children = all_.get("children")
    if not isinstance(children, Mapping):
        return []
    g = children.get(group)
    if not isinstance(g, Mapping):
        return []
    hosts = g.get("hosts")
    return list(hosts) if isinstance(hosts, Mapping) else []


def names(nodes: Iterable[NodeSpec]) -> list[str]:
    return [n.name for n in nodes]
