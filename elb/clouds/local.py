"""The ``local`` cloud: workers are rootful podman containers on the test cluster's bridge.

It implements :class:`elb.core.interfaces.Cloud` exactly as the EC2 provider does: the elb tags
are container labels, the instance id is the container id, the private address is the
container's address on the cluster network, and a launch returns once each node's sshd
answers. With a host key store (``elb.provision.hostkeys``, as elb's config gives it), each
node gets the host key elb made for it before it starts: the private key file is mounted
read-only over the node's ``/etc/ssh/ssh_host_ed25519_key``, which its sshd loads at start (as
cloud-init installs an EC2 worker's from the user data); the store keeps that file for the
container's life, since podman mounts it again at every start, and forgets the key when the
container is removed. A node's NFS client log (the test cluster's FUSE client writes it under
``/var/log/elb-mountnfs``) is a directory of this machine, ``NODE_LOGS/<name>``, so it outlives
the node for whoever reads a failure after elb removed it. Everything is filtered by the
cluster's labels: containers of another cluster, the master, or anything elb did not launch are
never listed nor terminated.

The node image (``localhost/elb-node:latest``) and the network are made by
``python -m elbdev testcluster up``; see docs/testcluster.md.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import logging
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Self

from pydantic import Field

from elb.core.checks import Check
from elb.core.config import Config
from elb.core.durations import PositiveSeconds
from elb.core.groupoptions import GroupOptions
from elb.core.interfaces import (
    TAG_CLUSTER,
    TAG_GROUP,
    TAG_MANAGED_BY,
    TAG_NAME,
    TAG_ROLE,
    CloudError,
    CloudSettings,
    Instance,
    InstanceState,
    LaunchResult,
    NodeBoot,
    NoticeSource,
)
from elb.core.sections import HoldsSections, Section, section
from elb.provision.hostkeys import HostKeys

log = logging.getLogger("elb.clouds.local")

DEFAULT_AUTHORIZED_KEY = Path("/var/lib/elb-testcluster/ssh/id_ed25519.pub")
# The label holding the address a node was given for its life (see ``LocalCloud._address``).
ADDRESS_LABEL = "elb-address"
# The addresses given, one "name address" line each, the latest last (see ``LocalCloud._address``).
ADDRESS_BOOK = Path("/var/lib/elb-testcluster/run/node-addresses")
_ADDRESS_LOCK = threading.Lock()  # one address chosen and taken at a time in this process
# Each node's NFS client log, kept here past the node's life (one directory per node name).
NODE_LOGS = Path("/var/lib/elb-testcluster/node-logs")
NODE_NFS_LOG = "/var/log/elb-mountnfs"  # where the node image's NFS client writes it
NODE_HOST_KEY = "/etc/ssh/ssh_host_ed25519_key"  # where a node's sshd finds its ed25519 host key
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


# Podman's container states in the core's words (``InstanceState``); one not named here is pending.
class LocalConfig(Section):
    """The podman-backed provider of the test cluster's own settings, the config file's
    ``cloud.local`` (this module's ``CONFIG_SECTION``; see ``python -m elbdev testcluster``)."""

    image: str = "localhost/elb-node:latest"
    network: str = "elb"
    boot_timeout: PositiveSeconds = 120.0
    # Directories of this machine mounted read-only at the same path in every node: what a node
    # that configures itself at boot runs (elb's Python environment and playbooks), standing in
    # for an image that has them.
    mounts: list[Path] = Field(default_factory=list)


def local_settings(cfg: HoldsSections) -> LocalConfig:
    """``cfg``'s ``cloud.local`` (its defaults when the file has none)."""
    return section(cfg, LocalConfig)


_STATES = {
    "created": InstanceState.PENDING,
    "configured": InstanceState.PENDING,
    "initialized": InstanceState.PENDING,
    "running": InstanceState.RUNNING,
    "paused": InstanceState.STOPPED,
    "stopping": InstanceState.STOPPING,
    "stopped": InstanceState.STOPPED,
    "exited": InstanceState.STOPPED,
    "removing": InstanceState.GONE,
}


class LocalCloud:
    """Workers as podman containers. ``cluster`` is the value of the ``elb:cluster`` label."""

    # A started container runs its init script only (sshd; no init system): the exec daemon
    # and the NFS mounts come back by the add playbook, which finds the rest in place.
    restart_runs_services = False

    def __init__(
        self,
        config: LocalConfig,
        cluster: str,
        *,
        authorized_key: Path = DEFAULT_AUTHORIZED_KEY,
        podman: str = "podman",
        command_timeout: float = 120.0,
        slots_per_node: int | None = None,
        host_keys: HostKeys | None = None,
        node_logs: Path = NODE_LOGS,
    ) -> None:
        if not cluster:
            raise ValueError("cluster name must not be empty")
        self.config = config
        self.cluster = cluster
        self.authorized_key = authorized_key
        self.podman = podman
        self.command_timeout = command_timeout
        # The admin's slots of a node (``policy.slots_per_node``), as EC2's instances carry them:
        # the play gives the node these (``elb_slots``); None lets it count the node's processors.
        self.slots_per_node = slots_per_node
        # The nodes' SSH host keys; None: a node makes its own at its first start (unchecked).
        self.host_keys = host_keys
        self.node_logs = node_logs
        # The containers this cloud removed. EC2 still lists a terminated instance for about an
        # hour and takes its terminate again as done; podman forgets a removed container at once,
        # so the cloud remembers them to answer a repeated terminate the same way.
        self._terminated: set[str] = set()

    @classmethod
    def from_config(cls, config: Config, **kwargs: Any) -> Self:
        """The local cloud of elb's settings (its nodes carry ``policy.slots_per_node``)."""
        kwargs.setdefault("host_keys", HostKeys(config.provision.host_keys_path))
        return cls(local_settings(config), config.cluster.name, slots_per_node=config.policy.slots_per_node, **kwargs)

    # ------------------------------------------------------------------ helpers

    def _podman(
        self, *args: str, timeout: float | None = None, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        argv = [self.podman, *args]
        try:
            proc = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=timeout or self.command_timeout,
                **({"input": input} if input is not None else {"stdin": subprocess.DEVNULL}),
                check=False,
            )
        except subprocess.TimeoutExpired as err:
            raise CloudError(f"podman {args[0]} timed out", retryable=True) from err
        except OSError as err:
            raise CloudError(f"cannot run {self.podman}: {err}") from err
        if check and proc.returncode != 0:
            raise CloudError(f"podman {' '.join(args[:2])}: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc

    def _labels(self, name: str, group: str | None = None) -> dict[str, str]:
        """elb's labels of a node, as EC2's tags (``group``: its node group, ``TAG_GROUP``)."""
        labels = {TAG_CLUSTER: self.cluster, TAG_ROLE: "worker", TAG_MANAGED_BY: "elb", TAG_NAME: name}
        return labels if group is None else {**labels, TAG_GROUP: group}

    def _container_ids(self, *filters: str) -> list[str]:
        """The ids of this machine's containers, running or stopped, that pass every ``podman ps``
        filter given (none: all of them)."""
        args = ["ps", "--all", "--no-trunc", "--format", "{{.ID}}"]
        for f in filters:
            args += ["--filter", f]
        return self._podman(*args).stdout.split()

    def _inspect(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        if not ids:
            return []
        proc = self._podman("container", "inspect", *ids, check=False)
        try:
            data = json.loads(proc.stdout or "[]")
        except json.JSONDecodeError as err:
            raise CloudError(f"podman inspect printed no JSON: {proc.stderr.strip()}") from err
        return [d for d in data if isinstance(d, dict)]

    def _instance(self, d: dict[str, Any]) -> Instance:
        cfg = d.get("Config") or {}
        labels: dict[str, str] = dict(cfg.get("Labels") or {})
        st = d.get("State") or {}
        status = str(st.get("Status", "unknown")).lower()
        nets = (d.get("NetworkSettings") or {}).get("Networks") or {}
        ip = (nets.get(self.config.network) or {}).get("IPAddress") or None
        return Instance(
            instance_id=str(d["Id"]),
            name=labels.get(TAG_NAME, str(d.get("Name", "")).lstrip("/")),
            state=_STATES.get(status, InstanceState.PENDING),
            launched_at=_parse_time(str(d.get("Created", ""))),
            private_ip=ip,
            instance_type="podman",
            image_id=str(d.get("ImageName") or d.get("Image") or ""),
            slots=self.slots_per_node,
            tags={k: v for k, v in labels.items() if k in (TAG_CLUSTER, TAG_ROLE, TAG_MANAGED_BY, TAG_NAME, TAG_GROUP)},
        )

    def _ours(self, d: dict[str, Any]) -> bool:
        labels = (d.get("Config") or {}).get("Labels") or {}
        return bool(
            labels.get(TAG_CLUSTER) == self.cluster
            and labels.get(TAG_ROLE) == "worker"
            and labels.get(TAG_MANAGED_BY) == "elb"
        )

    # ------------------------------------------------------------------ Cloud protocol

    def launch(
        self,
        names: Sequence[str],
        groups: Mapping[str, str] | None = None,
        boot: Mapping[str, NodeBoot] | None = None,
        *,
        stopping: threading.Event | None = None,
    ) -> LaunchResult:
        """Start one podman node per name (every node group's nodes are the same image); with
        ``boot``, each node then runs its boot as cloud-init runs an EC2 worker's
        (``_start_boot``). Once ``stopping`` is set no other container is started."""
        failed: dict[str, str] = {}
        started: dict[str, str] = {}  # name -> container id
        for i, name in enumerate(names):
            if stopping is not None and stopping.is_set():
                result = self._await_started(started, failed, boot or {})
                return dataclasses.replace(result, not_started=tuple(names[i:]))
            if not _NAME_RE.match(name):
                failed[name] = "not a valid node name"
                continue
            if name in started:
                failed[name] = "name given twice"
                continue
            args = [
                "run", "--detach", "--name", name, "--hostname", name,
                "--network", self.config.network, "--no-hosts", "--init",
                "--cap-add", "SYS_ADMIN", "--device", "/dev/fuse",
                # The node's init sets up a time namespace whose boot time is the node's start
                # (elbdev.testcluster.image), then drops SYS_TIME for everything it starts.
                "--cap-add", "SYS_TIME",
                "--volume", f"{self.authorized_key}:/root/.ssh/authorized_keys:ro",
            ]  # fmt: skip
            args += self._log_volume(name)
            for mount in self.config.mounts:
                args += ["--volume", f"{mount}:{mount}:ro"]
            for k, v in self._labels(name, (groups or {}).get(name)).items():
                args += ["--label", f"{k}={v}"]
            fresh = self.host_keys is not None and not self.host_keys.known(name)
            if self.host_keys is not None:
                self.host_keys.issue(name)
                key_file = self.host_keys.private_key_file(name)
                if key_file is None:  # issued a moment ago: only someone else's rm removes it
                    failed[name] = f"its host key file is gone from {self.host_keys.directory}"
                    continue
                args += ["--volume", f"{key_file}:{NODE_HOST_KEY}:ro"]
            proc = self._run_with_address(name, args)
            if proc.returncode != 0:
                failed[name] = proc.stderr.strip() or f"podman run exited {proc.returncode}"
                if fresh:  # not the key of a container of that name that still exists
                    self._forget_keys([name])
                continue
            started[name] = proc.stdout.strip().splitlines()[-1]
        return self._await_started(started, failed, boot or {})

    def _await_started(
        self, started: Mapping[str, str], failed: dict[str, str], boot: Mapping[str, NodeBoot]
    ) -> LaunchResult:
        """Wait until each started container's sshd answers, then start its boot if it has one;
        a node that fails either is removed."""
        launched: list[Instance] = []
        deadline = time.monotonic() + self.config.boot_timeout
        for name, cid in started.items():
            inst = self._wait_ready(cid, deadline)
            if isinstance(inst, Instance) and name in boot:
                inst = self._start_boot(cid, inst, boot[name])
            if isinstance(inst, Instance):
                launched.append(inst)
            else:
                failed[name] = inst
                self._podman("rm", "--force", "--time", "2", cid, check=False)
                self._forget_keys([name])
        return LaunchResult(launched=tuple(launched), failed=failed)

    def _start_boot(self, cid: str, inst: Instance, boot: NodeBoot) -> Instance | str:
        """Write the boot's files on the node (root's, mode 0600), then start its command in the
        background, its output in ``boot.log``: what cloud-init's ``write_files`` and ``runcmd``
        do on an EC2 worker. The data go as arguments and standard input, never into a shell
        string."""
        for path, text in boot.files.items():
            proc = self._podman(
                "exec", "-i", cid, "/bin/sh", "-c", 'umask 077 && mkdir -p "${1%/*}" && cat > "$1"', "sh", path,
                check=False, input=text,
            )  # fmt: skip
            if proc.returncode != 0:
                return f"writing {path} for its boot failed: {proc.stderr.strip()}"
        proc = self._podman("exec", "--detach", cid, *boot.command, check=False)
        if proc.returncode != 0:
            return f"starting its boot failed: {proc.stderr.strip()}"
        return inst

    def _log_volume(self, name: str) -> list[str]:
        """The volume keeping the node's NFS client log on this machine; none if its directory
        cannot be made (the node then keeps its log to itself)."""
        where = self.node_logs / name
        try:
            where.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            log.warning("%s: its NFS client log stays on the node: %s", name, err)
            return []
        return ["--volume", f"{where}:{NODE_NFS_LOG}"]

    def _forget_keys(self, names: Sequence[str]) -> None:
        if self.host_keys is not None:
            self.host_keys.forget(names)

    def _run_with_address(self, name: str, args: list[str]) -> subprocess.CompletedProcess[str]:
        """``podman run`` with an address of its own for the node's life, as an EC2 instance keeps
        its private address through a stop and a start (podman would give a restarted container
        the next free one, and SGE's qmaster, which caches what names resolve to, loses an exec
        host whose address changed). An address another process took meanwhile is tried once
        more with the next; without a free address podman chooses, as before."""
        with _ADDRESS_LOCK:
            refused: set[str] = set()
            for _ in range(3):
                address = self._address(name, refused)
                fixed = ["--ip", address, "--label", f"{ADDRESS_LABEL}={address}"] if address else []
                proc = self._podman(*args, *fixed, self.config.image, check=False)
                if proc.returncode == 0 or address is None or "already allocated" not in proc.stderr:
                    return proc
                refused.add(address)
            return proc

    def _address(self, name: str, refused: set[str]) -> str | None:
        """The address for a new node called ``name``: the one this name had before (``ADDRESS_BOOK``)
        when it is free, else the first free address after the last one given that no other name
        had, else the free one given longest ago; never the network's gateway, an address held or
        given to any container on this machine (running or stopped), nor one in ``refused``.
        None when the network cannot be read or is full.

        SGE's qmaster caches what a name resolves to and which name an address has (for minutes,
        past the host's removal): a name launched again on another address, or an address given to
        another name, leaves its execd unknown to the qmaster (``no execd known on host``, state
        ``u``) about two minutes after it came up. elb never gives a name twice (its journal keeps
        every name it gave), but each test runs elb with a journal of its own against one qmaster,
        so on the test cluster a name and its address stay together instead, as DNS would keep them."""
        network = self._network()
        if network is None:
            return None
        subnet, gateway = network
        try:
            taken = self._taken() | set(refused) | ({gateway} if gateway else set())
        except CloudError:  # podman failed, or a container went between the listing and its inspection
            return None
        book = _read_address_book()
        chosen = choose_address(name, [str(a) for a in subnet.hosts() if str(a) not in taken], book)
        if chosen is not None:
            book = {n: a for n, a in book.items() if n != name and a != chosen}
            book[name] = chosen
            _write_address_book(book)
        return chosen

    def _network(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str | None] | None:
        """The node network's subnet and gateway; None when podman cannot say."""
        net = self._podman("network", "inspect", self.config.network, check=False)
        try:
            subnets = json.loads(net.stdout)[0].get("subnets") or []
            return ipaddress.ip_network(subnets[0]["subnet"]), subnets[0].get("gateway")
        except (ValueError, LookupError, TypeError, AttributeError):
            return None

    def _taken(self) -> set[str]:
        """Every address held by, or given to, a container on this machine (running or stopped)."""
        taken: set[str] = set()
        for d in self._inspect(self._container_ids()):
            labels = (d.get("Config") or {}).get("Labels") or {}
            taken.add(labels.get(ADDRESS_LABEL) or "")
            for attached in ((d.get("NetworkSettings") or {}).get("Networks") or {}).values():
                taken.add((attached or {}).get("IPAddress") or "")
        return taken

    def _wait_ready(self, cid: str, deadline: float) -> Instance | str:
        """The instance once its sshd answers, or why it did not in time."""
        why = "did not start"
        while True:
            found = self._inspect([cid])
            if found:
                inst = self._instance(found[0])
                if inst.state == InstanceState.STOPPED:
                    return f"container exited: {found[0].get('State', {}).get('Error') or 'see podman logs'}"
                if inst.state == InstanceState.RUNNING and inst.private_ip:
                    if _ssh_banner(inst.private_ip):
                        return inst
                    why = f"sshd on {inst.private_ip} does not answer"
            if time.monotonic() > deadline:
                return f"not ready after {self.config.boot_timeout:g} s: {why}"
            time.sleep(0.3)

    def list_workers(self) -> list[Instance]:
        ids = self._container_ids(f"label={TAG_CLUSTER}={self.cluster}", f"label={TAG_ROLE}=worker")
        workers = sorted(
            (self._instance(d) for d in self._inspect(ids) if self._ours(d)),
            key=lambda i: i.name,
        )
        if self.host_keys is not None:  # keys of nodes removed behind elb's back
            self.host_keys.prune({w.name for w in workers}, time.time())
        return workers

    def new_node_slots(self) -> int:
        """Configured, else this machine's processors: a node container gets no CPU limit (what
        ``nproc`` shows in it, and what the sge_exec role then gives it as slots)."""
        if self.slots_per_node is not None:
            return self.slots_per_node
        return len(os.sched_getaffinity(0))

    def _check_ours(self, instance_ids: Sequence[str], verb: str, *, done: Collection[str] = ()) -> dict[str, Instance]:
        """The cluster's workers by id; any of ``instance_ids`` that is neither one nor in
        ``done`` refuses the call."""
        ours = {i.instance_id: i for i in self.list_workers()}
        foreign = [i for i in instance_ids if i not in ours and i not in done]
        if foreign:
            raise CloudError(f"refusing to {verb} instances that are not workers of cluster {self.cluster}: {foreign}")
        return ours

    def stop(self, instance_ids: Sequence[str]) -> None:
        """``podman stop``: the container keeps its filesystem and its name (a warm pool)."""
        if not instance_ids:
            return
        self._check_ours(instance_ids, "stop")
        self._podman("stop", "--time", "10", *instance_ids, timeout=self.config.boot_timeout)

    def start(self, instance_ids: Sequence[str]) -> LaunchResult:
        """``podman start``, then wait until each node's sshd answers; its address is read again
        (podman may give it another one on the network)."""
        if not instance_ids:
            return LaunchResult(launched=())
        ours = self._check_ours(instance_ids, "start")
        failed: dict[str, str] = {}
        for cid in instance_ids:
            proc = self._podman("start", cid, check=False)
            if proc.returncode != 0:
                failed[ours[cid].name] = proc.stderr.strip() or f"podman start exited {proc.returncode}"
        launched: list[Instance] = []
        deadline = time.monotonic() + self.config.boot_timeout
        for cid in instance_ids:
            if ours[cid].name in failed:
                continue
            inst = self._wait_ready(cid, deadline)
            if isinstance(inst, Instance):
                launched.append(inst)
            else:
                failed[ours[cid].name] = inst
        return LaunchResult(launched=tuple(launched), failed=failed)

    def terminate(self, instance_ids: Sequence[str]) -> None:
        """``podman rm``: the containers and their keys go. One this cloud removed before is
        taken as done, as EC2 takes a terminated instance's; any other id that is not a worker of
        the cluster refuses the whole call."""
        if not instance_ids:
            return
        ours = self._check_ours(instance_ids, "terminate", done=self._terminated)
        todo = [i for i in dict.fromkeys(instance_ids) if i in ours]
        if not todo:
            return
        proc = self._podman("rm", "--force", "--time", "5", *todo, check=False)
        left = set()
        if proc.returncode != 0:
            left = {i.instance_id for i in self.list_workers()} & set(todo)
        self._terminated.update(i for i in todo if i not in left)
        self._forget_keys([ours[i].name for i in todo if i not in left])
        if left:
            raise CloudError(f"podman rm failed for {sorted(left)}: {proc.stderr.strip()}", retryable=True)


def _ssh_banner(ip: str, port: int = 22, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=timeout) as s:
            s.settimeout(timeout)
            return s.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def _parse_time(text: str) -> float:
    """podman's ``Created`` (RFC 3339 with nanoseconds) as POSIX seconds; 0.0 if unreadable."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", text.strip())
    if not m:
        return 0.0
    base, frac, tz = m.groups()
    tz = "+00:00" if tz == "Z" else tz
    when = datetime.fromisoformat(base + tz).timestamp()
    return when + (float("0." + frac) if frac else 0.0)


def _read_address_book() -> dict[str, str]:
    """``ADDRESS_BOOK`` as {name: address}, the latest given last; empty if it cannot be read."""
    try:
        text = ADDRESS_BOOK.read_text(encoding="utf-8")
    except OSError:
        return {}
    book: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and _NAME_RE.match(fields[0]):
            try:
                book[fields[0]] = str(ipaddress.ip_address(fields[1]))
            except ValueError:
                continue
    return book


def _write_address_book(book: Mapping[str, str]) -> None:
    """Replace ``ADDRESS_BOOK`` whole (a reader never sees half of it); a failure is logged: the
    next node then gets an address as if the book were empty."""
    try:
        ADDRESS_BOOK.parent.mkdir(parents=True, exist_ok=True)
        tmp = ADDRESS_BOOK.with_name(f".{ADDRESS_BOOK.name}.{os.getpid()}")
        tmp.write_text("".join(f"{n} {a}\n" for n, a in book.items()), encoding="utf-8")
        tmp.replace(ADDRESS_BOOK)
    except OSError as err:
        log.warning("could not keep the node addresses in %s: %s", ADDRESS_BOOK, err)


def choose_address(name: str, free: Sequence[str], book: Mapping[str, str]) -> str | None:
    """The address for ``name`` among ``free`` (in the subnet's order), given the address ``book``
    (name -> address, in the order given): the one ``name`` had, when free; else the first free one
    after the last given that no name had (from the subnet's start again past its end); else the
    free one given longest ago. None when nothing is free."""
    had = book.get(name)
    if had is not None and had in free:
        return had
    booked = set(book.values())
    last = int(ipaddress.ip_address(list(book.values())[-1])) if book else -1
    unbooked = [a for a in free if a not in booked]
    after = next((a for a in unbooked if int(ipaddress.ip_address(a)) > last), None)
    return after or (unbooked[0] if unbooked else next((a for a in book.values() if a in free), None))


# ---------------------------------------------------------------- as cloud.provider: local


class LocalGroupOptions(GroupOptions):
    """A node group's own settings on the local cloud: EC2's keys (instance types or a launch
    template, a placement group) are taken, so that a group written for EC2 runs unchanged on the
    test cluster, which stands in for it. The containers are all one kind: none is read, and
    their values are EC2's adapter's to check (``elb.clouds.ec2.groupoptions``), not this one's,
    which loads no other cloud."""

    instance_types: list[str] | None = Field(None, min_length=1)
    launch_template: dict[str, str] | None = None
    placement_group: bool = False


GROUP_OPTIONS = LocalGroupOptions
# The provider's own settings, ``cloud.local``.
CONFIG_SECTION = LocalConfig


def make(cfg: Config) -> LocalCloud:
    """The local cloud of ``cfg`` (``elb.core.registry.CloudModule``)."""
    return LocalCloud.from_config(cfg)


def checks(cfg: Config) -> Iterator[Check]:
    """podman answers and has the node image."""
    cloud = LocalCloud(local_settings(cfg), cfg.cluster.name, command_timeout=30)
    try:
        workers = cloud.list_workers()
    except CloudError as err:
        yield Check("cloud local (podman)", False, str(err), "install podman and run elb as root")
        return
    yield Check("cloud local (podman)", True, f"podman answers, {len(workers)} worker container(s)")
    image = local_settings(cfg).image
    try:
        found = subprocess.run(["podman", "image", "exists", image], check=False, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        yield Check("node image", False, f"podman image exists {image}: {err}", "")
        return
    yield Check(
        "node image",
        found.returncode == 0,
        image if found.returncode == 0 else f"{image} is not in podman's store",
        "build it with python -m elbdev testcluster up, or set cloud.local.image",
    )


def notices(cfg: Config) -> NoticeSource | None:
    """podman sends no notices: a container's end shows in the list of workers."""
    return None


def settings(cfg: Config) -> CloudSettings:
    """Its boot time-out; podman interrupts no node."""
    return CloudSettings("local", local_settings(cfg).boot_timeout)
