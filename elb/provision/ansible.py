"""``AnsibleProvisioner``: elb's Provisioner, running the playbooks through ansible-runner.

One call, one ``ansible-playbook`` run (ansible-runner's ``Runner``, in this process's
thread), over an inventory elb builds from the nodes it was given. The run has a time limit
(``ProvisionConfig.timeout``) and stops when the cancel event is set (elb's shutdown); either
way the playbook's process group is killed and every host without a verdict is FAILED with a
message that says so. Outcomes come from runner's events and the play recap, never from
stdout (see ``elb.provision.outcomes``).

Secrets stay out of the artifacts, which are kept for weeks (``retention``): runner writes the
process environment into ``artifacts/<ident>/command``, so the environment ansible-playbook gets
is an allow-list of the variables it needs (no AWS_*, no tokens); the SSH key is passed as a file
path, never as key material; ``provision.extra_vars`` go to Ansible in a file of mode 0600
(``-e @file``), never on the command line (where ``ps`` shows them to every local user), and that
file lives in ``<private_data_dir>/vars`` (mode 0700), outside the artifacts, only while its run
does (a killed elb's are deleted at the next start); ``suppress_env_files`` keeps runner from
writing ``env/`` files, and an ``env/extravars`` or ``env/ssh_key`` found there is refused (runner
would hand it to every run and copy the key into the artifacts); what a run leaves in its
artifact directory under runner's names for secrets is deleted when it ends; the fact cache stays
in memory. Artifacts are rotated by age and total size after each run (``elb.provision.retention``).

Host keys are checked at every SSH contact with a node (``elb.provision.hostkeys``): a node being
added must have the key elb gave it at launch in the store, else it is FAILED before anything
runs; an existing or departing node whose key the store lacks (elb did not launch it with one)
has the key it shows at the first contact pinned there. A key that does not match fails the node
with a message that says so.

Each run reaches each host through one SSH connection, shared by its tasks and closed when the
run ends (``elb.provision.sshmux``).
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import re
import secrets
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from elb.core import assets
from elb.core.config import ClusterConfig, ProvisionConfig, RetentionConfig
from elb.core.drivers import NodePlays
from elb.core.groups import NodeGroups
from elb.core.interfaces import HostResult, JobProcesses, NodeBoot, NodeSpec, Outcome, Witness
from elb.provision import proctree, retention, sshmux
from elb.provision.boot import NODE_VAR_PREFIXES, batch_of, boot_inventory, node_boot
from elb.provision.hostkeys import HostKeyError, HostKeys
from elb.provision.inventory import Connection, InventoryError, build_inventory, check_extra_vars, in_group
from elb.provision.outcomes import DONE_KEY, RunEnd, summarize

log = logging.getLogger("elb.provision")

# The task of the add plays whose success on a node means the run has reached it over SSH (the
# "reachable" step of the boot timeline); the fixtures' stand-in playbook has it too.
REACH_TASK = "Check that the node answers"
POLL_SECONDS = 0.5  # how often runner checks for cancellation and the time limit

# Environment variables ansible-playbook may inherit. Everything else (AWS_*, tokens, the
# daemon's own settings) is dropped, because runner writes the environment to the artifacts.
_ENV_KEEP = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR",
        "TERM", "PYTHONPATH", "VIRTUAL_ENV", "SSH_AUTH_SOCK", "ORIGINAL_STDOUT_CALLBACK",
    }
)  # fmt: skip
_ENV_KEEP_PREFIXES = ("LC_", "ANSIBLE_", "RUNNER_", "AWX_", "SGE_")
_ENV_SECRET = re.compile(r"PASS|SECRET|TOKEN|CREDENTIAL|KEY$|KEY_ID$", re.IGNORECASE)


# What elb asks a node before it removes one the scheduler showed busy: do job processes run there?
PROBE_PLAYBOOK = "probe_jobs.yml"
PROBE_TIMEOUT = 60.0  # seconds one probe run may take at most (less when provision.timeout is less)
# What runner reads from ``<private_data_dir>/env`` and passes on to every run: the extra vars
# (``-e @env/extravars``) and an SSH key (written into the artifacts for ssh-agent).
RUNNER_SECRET_FILES = ("env/extravars", "env/ssh_key", "env/passwords")
# Files that would hold a secret in a run's artifact directory: the extra vars elb once wrote
# there, runner's copy of an SSH key, and anything under runner's names for its env files.
ARTIFACT_SECRET_FILES = ("extravars.json", "extravars", "ssh_key_data", "passwords", "env")


# ansible-core's default collections path (COLLECTIONS_PATHS), kept after the shipped one.
DEFAULT_COLLECTIONS_PATHS = ("~/.ansible/collections", "/usr/share/ansible/collections")


class ProvisionError(Exception):
    """The provisioner is set up wrongly (config, playbook location). Raised by the constructor."""


def ansible_paths(playbook_dir: Path, shipped: assets.Assets, environ: Mapping[str, str]) -> dict[str, str]:
    """``ANSIBLE_ROLES_PATH`` and ``ANSIBLE_COLLECTIONS_PATH`` for a run of ``playbook_dir``.

    Roles: the playbook directory's ``roles/``, its parent's, then the shipped roles (so that
    playbooks of one's own can use them). Collections: the directory holding the shipped
    ``ansible_collections/elb/cluster`` (installed elb only) before the usual ones.
    """
    roles: list[Path] = []
    for path in (playbook_dir / "roles", playbook_dir.parent / "roles", shipped.roles_dir):
        if path.is_dir() and path.resolve() not in roles:
            roles.append(path.resolve())
    out: dict[str, str] = {}
    if roles:
        out["ANSIBLE_ROLES_PATH"] = os.pathsep.join(str(p) for p in roles)
    if shipped.collections_path is not None:
        usual = environ.get("ANSIBLE_COLLECTIONS_PATH") or os.pathsep.join(DEFAULT_COLLECTIONS_PATHS)
        out["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join([str(shipped.collections_path), usual])
    return out


def scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed part of an environment, without anything that looks like a secret."""
    out: dict[str, str] = {}
    for key, value in env.items():
        if key not in _ENV_KEEP and not key.startswith(_ENV_KEEP_PREFIXES):
            continue
        if _ENV_SECRET.search(key) and not key.endswith(("_FILE", "_PATH", "_DIR", "_SOCK")):
            continue
        out[key] = value
    return out


def role_vars(cluster: ClusterConfig, scheduler: Mapping[str, object]) -> dict[str, object]:
    """What elb's config says about the cluster, under the roles' variable names (roles/*/defaults):
    the cluster's user, then the scheduler's settings (``NodePlays.variables``).

    Inventory vars of ``all``: they override the roles' defaults, and ``provision.extra_vars``
    overrides them.
    """
    return {"cluster_user_name": cluster.user, **scheduler}


def _master_address(master: str, given: object) -> str:
    """The master's address as the nodes reach it: ``etc_hosts_master_address`` when set, else
    the IPv4 address this machine (the master) resolves the master's name to, as the etc_hosts
    role finds it."""
    if isinstance(given, str) and given:
        return given
    try:
        found = socket.getaddrinfo(master, None, socket.AF_INET, socket.SOCK_STREAM)
    except OSError as err:
        raise InventoryError(
            f"cannot resolve the master's name {master!r} ({err}); set etc_hosts_master_address in provision.extra_vars"
        ) from None
    return str(found[0][4][0])


def scrub_artifacts(artifact_dir: Path) -> list[str]:
    """Delete what would keep a secret in a run's artifact directory (``ARTIFACT_SECRET_FILES``);
    the names deleted. The rest (events, stdout, the command, the inventory) stays."""
    gone = []
    for name in ARTIFACT_SECRET_FILES:
        path = artifact_dir / name
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            continue
        gone.append(name)
    return gone


def _write_private(path: Path, data: object) -> None:
    """``data`` as JSON in a file created with mode 0600 (readable by its owner only)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # also when the file existed with a wider mode
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)


# What ssh says when a host key check refuses a host (first line of its banner, or its verdict).
_HOST_KEY_REFUSED = ("Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED")

_EVENT_KEYS = ("host", "task", "task_action", "role", "play", "ignore_errors", "artifact_data")
_RESULT_EVENTS = frozenset({"runner_on_failed", "runner_on_unreachable"})


def slim_event(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The part of a runner event that ``summarize`` reads (a big run keeps little in memory)."""
    kind = event.get("event")
    if not isinstance(kind, str):
        return None
    if kind == "verbose":
        stdout = event.get("stdout")
        return {"event": kind, "stdout": stdout} if isinstance(stdout, str) and "ERROR" in stdout else None
    data = event.get("event_data")
    if not isinstance(data, Mapping):
        data = {}
    if kind == "playbook_on_stats":  # the recap: per-host counts and the set_stats data
        return {"event": kind, "event_data": dict(data)}
    slim = {k: data[k] for k in _EVENT_KEYS if k in data}
    if kind in _RESULT_EVENTS:
        slim["res"] = data.get("res")
    return {"event": kind, "event_data": slim}


def reports_done(path: Path) -> bool:
    """Whether the playbook reports each host it finished (``set_stats`` data ``elb_done`` at its
    end, as elb's add and remove playbooks do): its outcomes then count only the hosts it reported.
    An admin's own playbook without that report is read from the recap alone."""
    try:
        return DONE_KEY in path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def witness_of(host: str, result: HostResult | None) -> Witness:
    """A node's answer in a run of ``probe_jobs.yml``: reported busy (``elb_busy``), job
    processes run there; ended well, none do; anything else (failed, unreachable, no result),
    it could not be asked, with why."""
    if result is not None and result.outcome is Outcome.BUSY:
        return Witness(host, JobProcesses.FOUND, "sge_shepherd or slurmstepd processes")
    if result is not None and result.ok:
        return Witness(host, JobProcesses.NONE)
    if result is None:
        return Witness(host, JobProcesses.UNKNOWN, "no result from the probe")
    where = f" at task {result.task!r}" if result.task else ""
    return Witness(host, JobProcesses.UNKNOWN, f"{result.outcome.value}{where}: {result.message or 'no message'}")


@dataclass(frozen=True, slots=True)
class RunReport:
    """What one playbook run did."""

    playbook: str
    ident: str
    status: str  # runner's: successful | failed | timeout | canceled | error | not started
    rc: int | None
    artifact_dir: Path | None
    seconds: float
    results: dict[str, HostResult] = field(default_factory=dict)  # every host the run concerned
    busy: frozenset[str] = frozenset()

    def for_hosts(self, names: Sequence[str]) -> dict[str, HostResult]:
        return {n: self.results[n] for n in names if n in self.results}


class _EventSink:
    """runner's event handler for one run: keeps the slim events ``summarize`` reads, and calls
    ``on_reached(host)`` once per target at the success of its ``REACH_TASK`` (runner calls it
    from its own thread; a failing listener is logged and never stops the run)."""

    def __init__(self, ident: str, targets: list[str], on_reached: Callable[[str], None] | None) -> None:
        self.ident = ident
        self.targets = targets
        self._on_reached = on_reached
        self._unreached = set(targets) if on_reached is not None else set()
        self._events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any]) -> bool:
        if self._unreached and event.get("event") == "runner_on_ok":
            self._reached(event.get("event_data") or {})
        kept = slim_event(event)
        if kept is not None:
            with self._lock:
                self._events.append(kept)
        return True  # runner also writes it whole to artifacts/<ident>/job_events

    def _reached(self, data: Mapping[str, Any]) -> None:
        host = data.get("host")
        if data.get("task") != REACH_TASK or host not in self._unreached or self._on_reached is None:
            return
        self._unreached.discard(host)
        try:
            self._on_reached(host)
        except Exception:
            log.exception("%s: telling that %s was reached failed", self.ident, host)

    def kept(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._events)


class AnsibleProvisioner:
    """Runs ``add_node.yml`` / ``remove_node.yml`` with ansible-runner; see the module doc.

    ``cancel_event``: elb's shutdown event; when set, a running playbook is stopped and no new
    one starts. ``cancel()`` sets it. ``master_address``: None when elb runs on the master
    (the master is then reached with a local connection), else the master's address for SSH.
    """

    def __init__(
        self,
        config: ProvisionConfig,
        cluster: ClusterConfig | None = None,
        plays: NodePlays | None = None,
        *,
        master_address: str | None = None,
        cancel_event: threading.Event | None = None,
        retention: RetentionConfig | None = None,
        groups: NodeGroups | None = None,
    ) -> None:
        self.config = config
        # With node_groups: each node gets its group's slots and market and the scheduler's
        # variables for its group (host vars); None: every node as the scheduler's variables say.
        self.groups = groups
        self.cluster = cluster or ClusterConfig()
        plays = plays or NodePlays()
        self.cancel_event = cancel_event or threading.Event()
        self.retention = retention or RetentionConfig()
        self.playbook_dir = assets.playbook_dir(config.playbook_dir)
        self.connection = Connection(
            master=self.cluster.master,
            master_address=master_address,
            ssh_user=config.ssh_user,
            ssh_private_key=config.ssh_private_key,
            host_keys=config.host_keys_path,
        )
        self.host_keys = HostKeys(config.host_keys_path)
        # What a node that configures itself at boot runs: the image's, else elb's own paths
        # (the scheduler's node playbook; None: it ships none). Its boot document holds the
        # variables of the roles every node runs and of the scheduler's own (``boot_vars``: the
        # beginnings of their names), and no others.
        self.boot_ansible_playbook = config.boot.ansible_playbook or Path(sys.executable).with_name("ansible-playbook")
        shipped = None if plays.boot_playbook is None else self.playbook_dir / plays.boot_playbook
        self.boot_playbook: Path | None = config.boot.playbook or shipped
        self.boot_vars = NODE_VAR_PREFIXES + plays.boot_vars
        self.role_vars = role_vars(self.cluster, plays.variables)
        self.group_vars = plays.group_vars
        self.runs = proctree.RunRecords(config.private_data_dir / "running")
        self.vars_dir = config.private_data_dir / "vars"  # a running playbook's extra vars file
        found = [f for f in RUNNER_SECRET_FILES if (config.private_data_dir / f).exists()]
        if found:
            raise ProvisionError(
                f"provision.private_data_dir: {', '.join(found)} found in {config.private_data_dir}: ansible-runner "
                "would pass it to every run and keep a copy with the run's artifacts; move the variables to "
                "provision.extra_vars and the key to provision.ssh_private_key, and delete it"
            )
        try:
            self.extra_vars = check_extra_vars(config.extra_vars)
            build_inventory(self.connection)  # validates the master and the SSH settings
            json.dumps(self.extra_vars)
        except InventoryError as err:
            raise ProvisionError(f"provision: {err}") from None
        except (TypeError, ValueError) as err:
            raise ProvisionError(f"provision.extra_vars: cannot be passed to Ansible: {err}") from None
        if config.ssh_private_key is not None and not config.ssh_private_key.is_file():
            log.warning("provision.ssh_private_key %s is not a readable file", config.ssh_private_key)

    # -- the Provisioner protocol ---------------------------------------------------------

    def add_nodes(
        self,
        playbook: str,
        nodes: Sequence[NodeSpec],
        existing: Sequence[NodeSpec],
        on_reached: Callable[[str], None] | None = None,
    ) -> dict[str, HostResult]:
        """Run the add ``playbook`` (the scheduler's): ``nodes`` in ``new_nodes``, ``existing`` in ``workers``.
        ``on_reached(name)``: once per node, at the first task that succeeded on it.

        Returns a result for each of ``nodes`` (never raises for bad input: every node is then
        FAILED with the reason, and nothing runs).
        """
        if not nodes:
            return {}
        report = self.run(playbook, workers=existing, new_nodes=nodes, on_reached=on_reached)
        self._log_others(report, [n.name for n in nodes])
        return report.for_hosts([n.name for n in nodes])

    def boot_plans(self, names: Sequence[str], groups: Mapping[str, str] | None = None) -> dict[str, NodeBoot]:
        """What each of ``names`` (one batch, launched together) runs on itself at its first boot
        (``provision.mode: boot``, ``elb.provision.boot``). Raises InventoryError (a ValueError)
        on bad input or when the master's address cannot be found."""
        variables = {**self.role_vars, **self.extra_vars}
        try:
            if self.boot_playbook is None:
                raise InventoryError("the scheduler ships no playbook for a node's boot: set provision.boot.playbook")
            playbook = self.boot_playbook
            address = _master_address(self.cluster.master, variables.get("etc_hosts_master_address"))
            batch = batch_of(names)
            out: dict[str, NodeBoot] = {}
            for name in names:
                spec = self._of_group(NodeSpec(name, "0.0.0.0", group=(groups or {}).get(name)))  # noqa: S104
                inventory = boot_inventory(
                    name,
                    batch,
                    master=self.cluster.master,
                    master_address=address,
                    market=spec.market,
                    variables=variables,
                    prefixes=self.boot_vars,
                )
                out[name] = node_boot(inventory, ansible_playbook=self.boot_ansible_playbook, playbook=playbook)
        except InventoryError as err:
            raise InventoryError(f"the nodes' boot: {err}") from None
        return out

    def remove_nodes(
        self, playbook: str, nodes: Sequence[NodeSpec], existing: Sequence[NodeSpec]
    ) -> dict[str, HostResult]:
        """Run the remove ``playbook`` (the scheduler's): ``nodes`` in ``old_nodes``, ``existing`` in ``workers``.

        A node that the playbook reports busy (``elb_busy``) is BUSY: it stays in the cluster.
        """
        if not nodes:
            return {}
        report = self.run(playbook, workers=existing, old_nodes=nodes)
        self._log_others(report, [n.name for n in nodes])
        return report.for_hosts([n.name for n in nodes])

    def probe_jobs(self, nodes: Sequence[NodeSpec]) -> dict[str, Witness]:
        """Ask each of ``nodes`` whether job processes run there (``probe_jobs.yml``: ``pgrep -x``
        for Grid Engine's ``sge_shepherd`` and Slurm's ``slurmstepd``, as ``provision.ssh_user``),
        in one run bounded by ``PROBE_TIMEOUT`` (or ``provision.timeout`` if less); the playbook
        directory's ``probe_jobs.yml``, else the one elb ships. Only with the
        host key elb holds for a node: a node whose key the store lacks is not contacted (its key
        is never pinned by a probe). An answer for every node: ``UNKNOWN`` with why when it could
        not be asked (no key held, a key that does not match, SSH failed, the time-out)."""
        out: dict[str, Witness] = {}
        asked = []
        for n in nodes:
            if self.host_keys.known(n.name):
                asked.append(n)
                continue
            why = f"no SSH host key held for it in {self.host_keys.directory}; not contacted"
            out[n.name] = Witness(n.name, JobProcesses.UNKNOWN, why)
        if not asked:
            return out
        limit = PROBE_TIMEOUT if self.config.timeout <= 0 else min(PROBE_TIMEOUT, self.config.timeout)
        # A playbook directory of one's own may lack it: then elb's own (it changes nothing).
        playbook = self.playbook_dir / PROBE_PLAYBOOK
        if not playbook.is_file():
            playbook = assets.default_playbook_dir() / PROBE_PLAYBOOK
        report = self.run(str(playbook), old_nodes=asked, pin=False, timeout=limit)
        for n in asked:
            out[n.name] = witness_of(n.name, report.results.get(n.name))
        return out

    def reap_leftovers(self) -> int:
        """Stop the playbooks a killed predecessor left running (see ``proctree.RunRecords``), and
        delete the secrets its runs left: their extra vars files, and what earlier runs' artifact
        directories hold under runner's names for secrets; how many processes were killed."""
        killed = 0
        for marker, n in self.runs.reap():
            log.warning("stopped a playbook run left by an elb that is gone (%s): %d process(es)", marker, n)
            killed += n
        running = {p.stem for p in self.runs.directory.glob("*.json")} if self.runs.directory.is_dir() else set()
        try:
            left = [p for p in self.vars_dir.glob("*.json") if p.stem not in running] if self.vars_dir.is_dir() else []
            for path in left:
                path.unlink(missing_ok=True)
            artifacts = self.config.private_data_dir / "artifacts"
            runs = (
                [d for d in artifacts.iterdir() if d.is_dir() and d.name not in running] if artifacts.is_dir() else []
            )
            scrubbed = sum(1 for d in runs if scrub_artifacts(d))
        except OSError as err:  # the runs still go; the next start tries again
            log.warning("cannot delete the secrets earlier playbook runs left in %s: %s", self.vars_dir.parent, err)
            return killed
        if left or scrubbed:
            log.info(
                "deleted the extra vars of %d and the secrets in the artifacts of %d earlier run(s)",
                len(left),
                scrubbed,
            )
        return killed

    def cancel(self) -> None:
        """Stop the running playbook (if any) and refuse to start new ones."""
        self.cancel_event.set()

    # -- one run -----------------------------------------------------------------------------

    def run(
        self,
        playbook: str,
        *,
        workers: Sequence[NodeSpec] = (),
        new_nodes: Sequence[NodeSpec] = (),
        old_nodes: Sequence[NodeSpec] = (),
        on_reached: Callable[[str], None] | None = None,
        pin: bool = True,
        timeout: float | None = None,
    ) -> RunReport:
        """Run one playbook of ``playbook_dir`` over the inventory these groups make.
        ``on_reached(name)``: once per target, at the first task that succeeded on it. ``pin``:
        the key an existing or departing node shows at its first contact is pinned when the store
        lacks one (False: never; such a node's SSH is refused). ``timeout``: the run's time limit
        (None: ``provision.timeout``).

        The report has a result for every host of ``new_nodes`` and ``old_nodes`` (and for
        any other host the run's events mention).
        """
        targets = [n.name for n in (*new_nodes, *old_nodes)]
        kind = Path(playbook).stem
        ident = f"{datetime.now(UTC):%Y%m%dT%H%M%S.%f}-{kind}-{secrets.token_hex(3)}"  # name order is time order
        started = time.monotonic()

        def refuse(why: str, status: str = "error") -> RunReport:
            log.error("%s not run for %s: %s", playbook, ", ".join(targets) or "no host", why)
            results = {n: HostResult(n, Outcome.FAILED, None, why) for n in targets}
            return RunReport(playbook, ident, status, None, None, time.monotonic() - started, results)

        path = self.playbook_dir / playbook
        if not path.is_file():
            return refuse(f"playbook {path} not found (set provision.playbook_dir)")
        # A node being added or removed is not also an existing worker.
        moving = set(targets)
        workers = [self._of_group(w) for w in workers if w.name not in moving]
        new_nodes = [self._of_group(n) for n in new_nodes]
        old_nodes = [self._of_group(n) for n in old_nodes]
        with sshmux.shared_connections() as shared:
            try:
                keyless = self._keyless(new_nodes)
                new_nodes = [n for n in new_nodes if n.name not in keyless]
                pinned = self._to_pin([*workers, *old_nodes]) if pin else set()
                inventory = build_inventory(
                    self.connection,
                    workers=workers,
                    new_nodes=new_nodes,
                    old_nodes=old_nodes,
                    group_vars=self.role_vars,
                    pin=pinned,
                    shared_connections=shared,
                )
            except (InventoryError, HostKeyError) as err:
                return refuse(f"not provisioned: {err}")
            if self.cancel_event.is_set():
                return refuse("provisioning was cancelled (elb is shutting down) before it started", "canceled")
            if keyless and not new_nodes and not old_nodes:
                return replace(refuse("no node left to run for"), results=keyless)
            sink = _EventSink(ident, [t for t in targets if t not in keyless], on_reached)
            try:
                report = self._run_runner(path, inventory, ident, started, sink, timeout)
            except Exception as err:  # runner itself broke: report it per host, do not crash the pass
                log.exception("ansible-runner failed for %s", playbook)
                return refuse(f"ansible-runner failed: {type(err).__name__}: {err}")
        results = {n: self._explain_host_key(r) for n, r in report.results.items()}
        return replace(report, results={**results, **keyless})

    def _keyless(self, nodes: Sequence[NodeSpec]) -> dict[str, HostResult]:
        """The nodes being added whose host key elb does not hold, each FAILED with why: they are
        not contacted (their first contact would trust whatever answers at their address)."""
        out: dict[str, HostResult] = {}
        for n in nodes:
            if not self.host_keys.known(n.name):
                why = (
                    f"no SSH host key for {n.name} in {self.host_keys.directory}: elb gives each node it launches a "
                    "host key and reaches a new node only if it answers with that key (launched by hand or by "
                    "another elb? see docs/provisioner.md, Host keys)"
                )
                log.error("%s", why)
                out[n.name] = HostResult(n.name, Outcome.FAILED, "host key", why)
        return out

    def _to_pin(self, nodes: Sequence[NodeSpec]) -> set[str]:
        """The existing or departing nodes whose host key the store lacks (elb did not launch them
        with one): the key each shows at its first contact is pinned, and checked from then on."""
        pin = {n.name for n in nodes if not self.host_keys.known(n.name)}
        if pin:
            log.warning(
                "no host key held for %s (not launched by this elb with one): pinning the key each shows at its "
                "first contact in %s",
                ", ".join(sorted(pin)),
                self.host_keys.directory,
            )
        return pin

    def _explain_host_key(self, result: HostResult) -> HostResult:
        """A host refused by SSH's host key check gets a message saying so (SSH's own is a banner)."""
        if result.ok or result.message is None or not any(m in result.message for m in _HOST_KEY_REFUSED):
            return result
        why = (
            f"refused: the SSH host key {result.host} answers with is not the one elb holds for it "
            f"({self.host_keys.directory}/{result.host}.known); nothing was run on it "
            "(ssh: Host key verification failed)"
        )
        return replace(result, outcome=Outcome.FAILED, message=why)

    def _of_group(self, node: NodeSpec) -> NodeSpec:
        """``node`` with its group's slots and market, and the scheduler's variables for a node of
        its group (``NodePlays.group_vars``; a node whose group is unknown is of the first group)."""
        if self.groups is None:
            return node
        group = self.groups.get(node.group or "") or self.groups.groups[0]
        return in_group(node, group, self.group_vars)

    def _run_runner(  # noqa: PLR0917 (the run's parts, as run() has them)
        self,
        path: Path,
        inventory: dict[str, object],
        ident: str,
        started: float,
        sink: _EventSink,
        timeout: float | None = None,
    ) -> RunReport:
        from ansible_runner.runner import Runner  # noqa: PLC0415 (heavy import)

        try:
            rc_config = self._runner_config(path, inventory, ident)
        except BaseException:
            self._vars_file(ident).unlink(missing_ok=True)
            raise
        artifact_dir = Path(rc_config.artifact_dir)
        inv_path = Path(rc_config.inventory)
        targets = sink.targets

        if timeout is None:
            timeout = self.config.timeout
        deadline = started + timeout if timeout > 0 else None
        ended = {"why": RunEnd.FINISHED}

        def should_stop() -> bool:
            if self.cancel_event.is_set():
                ended["why"] = RunEnd.CANCELLED
            elif deadline is not None and time.monotonic() > deadline:
                ended["why"] = RunEnd.TIMEOUT
            else:
                return False
            # Runner then kills ansible-playbook's process group; its workers (setsid) and
            # their ssh / module processes are not in it, so stop the whole tree first.
            inv = str(inv_path)
            pid = proctree.find_child(lambda argv: inv in argv)
            if pid is not None:
                n = proctree.kill_tree(pid)
                log.warning("%s: %s, killed %d process(es)", ident, ended["why"].value, n)
            return True

        log.info("%s: running %s for %s", ident, path.name, ", ".join(targets))
        try:
            runner = Runner(rc_config, event_handler=sink, cancel_callback=should_stop)
            record = self.runs.start(ident, str(artifact_dir))
            try:
                status, rc = runner.run()
            finally:
                self.runs.finish(record)
        finally:
            self._forget_secrets(ident, artifact_dir)
        seconds = time.monotonic() - started
        end = ended["why"] if status == "canceled" else RunEnd.FINISHED
        if status == "timeout":  # runner's own limits (none set by us, but be exact)
            end = RunEnd.TIMEOUT
        detail = f"artifacts in {artifact_dir}"
        summary = summarize(sink.kept(), targets, end=end, rc=rc, detail=detail, require_done=reports_done(path))
        if end is RunEnd.TIMEOUT:
            status = "timeout"
        report = RunReport(
            playbook=path.name,
            ident=ident,
            status=status,
            rc=rc,
            artifact_dir=artifact_dir,
            seconds=seconds,
            results=summary.results,
            busy=summary.busy,
        )
        self._log_report(report, targets)
        self._rotate_artifacts(artifact_dir)
        return report

    def _vars_file(self, ident: str) -> Path:
        return self.vars_dir / f"{ident}.json"

    def _forget_secrets(self, ident: str, artifact_dir: Path) -> None:
        """After a run, whatever its end: its extra vars file deleted, its artifacts scrubbed."""
        try:
            self._vars_file(ident).unlink(missing_ok=True)
            scrub_artifacts(artifact_dir)
        except OSError as err:  # said loudly: the next start tries again (reap_leftovers)
            log.error("%s: cannot delete the run's secrets (extra vars, key): %s", ident, err)

    def _rotate_artifacts(self, latest: Path) -> None:
        """Delete old runs' artifacts by age and total size (``retention``); never ``latest``."""
        try:
            retention.prune_artifacts(latest.parent, time.time(), self.retention, spare=latest.name)
        except OSError as err:  # a full or broken disk: the run's result still counts
            log.warning("cannot rotate the Ansible artifacts in %s: %s", latest.parent, err)

    def _runner_config(self, path: Path, inventory: dict[str, object], ident: str) -> Any:
        """A prepared RunnerConfig: inventory written into the run's artifact dir, env scrubbed."""
        from ansible_runner.config.runner import RunnerConfig  # noqa: PLC0415 (heavy import)

        pdd = self.config.private_data_dir
        pdd.mkdir(parents=True, exist_ok=True, mode=0o700)
        project_dir = self.playbook_dir.parent  # its ansible.cfg (if any) applies: runner's cwd
        envvars = self._envvars()
        rc_config = RunnerConfig(
            private_data_dir=str(pdd),
            project_dir=str(project_dir),
            playbook=str(path),
            inventory=None,
            ident=ident,
            rotate_artifacts=0,  # elb rotates them: _rotate_artifacts
            suppress_env_files=True,
            fact_cache_type="memory",  # facts are not written to the artifacts
            forks=self.config.forks,
            envvars=envvars,
            quiet=True,
        )
        inv_path = Path(rc_config.artifact_dir) / "inventory.json"
        fd = os.open(inv_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(inventory, f, indent=1)
        rc_config.inventory = str(inv_path)
        if self.extra_vars:
            # A file readable by its owner only, given as ``-e @file``: on the command line the
            # values would be visible to every local user (ps) and written to the artifacts. Not
            # in the artifact directory, which is kept for weeks; deleted when the run ends.
            self.vars_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            ev_path = self._vars_file(ident)
            _write_private(ev_path, self.extra_vars)
            rc_config.extra_vars = str(ev_path)
        rc_config.prepare()
        rc_config.env = scrub_env(rc_config.env)
        # How often runner calls the cancel callback. (Set after prepare(): runner 2.4 drops
        # a ``settings`` argument when private_data_dir has no env/settings file.)
        rc_config.pexpect_timeout = POLL_SECONDS

        return rc_config

    def _log_report(self, report: RunReport, targets: Sequence[str]) -> None:
        mine = report.for_hosts(targets).values()
        counts: dict[str, int] = {}
        for r in mine:
            counts[r.outcome.value] = counts.get(r.outcome.value, 0) + 1
        log.info(
            "%s: %s %s in %.1f s (rc %s): %s",
            report.ident,
            report.playbook,
            report.status,
            report.seconds,
            report.rc,
            ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "no host",
        )
        for r in mine:
            if not r.ok:
                log.warning("%s: %s %s at %s: %s", report.ident, r.host, r.outcome.value, r.task, r.message)

    def _envvars(self) -> dict[str, str]:
        env = {
            # ansible-playbook of this very environment (the venv elb runs from).
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)]),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_HOST_KEY_CHECKING": "True",  # each node's key is checked (host_key_args)
            "ANSIBLE_SSH_RETRIES": "0",
            "ANSIBLE_PIPELINING": "True",  # one SSH connection per task, not three
            "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
        }
        if "HOME" not in os.environ:  # a systemd service without User= has no HOME
            env["HOME"] = pwd.getpwuid(os.getuid()).pw_dir
        env.update(ansible_paths(self.playbook_dir, assets.locate(), os.environ))
        return env

    def _log_others(self, report: RunReport, targets: Sequence[str]) -> None:
        """Problems on hosts other than the targets (existing workers, the master) are logged."""
        for name, r in report.results.items():
            if name not in targets and not r.ok:
                log.warning("%s: %s (not a target) %s: %s", report.ident, name, r.outcome.value, r.message)
