"""The test cluster as one object: ``TestCluster().up(nodes=2)``, ``master_run``, ``down()``.

The master is this machine (SGE daemons, sshd and nfs-ganesha under the hostname
``master`` in a UTS namespace of their own); nodes are podman containers launched through
:class:`elb.clouds.local.LocalCloud` and configured by ``playbooks/add_node.yml``, exactly as
elb adds nodes. See docs/testcluster.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from elb.clouds.local import LocalCloud, LocalConfig
from elb.core.interfaces import Instance, NodeBoot, NodeSpec
from elb.core.naming import next_names
from elb.provision import sshmux
from elb.provision.boot import batch_of, boot_inventory, node_boot
from elb.provision.hostkeys import HostKeys
from elb.provision.inventory import Connection, build_inventory
from elb.schedulers.waiting import wait_until_up
from elbdev.testcluster import constants as C
from elbdev.testcluster import image, master, slurm
from elbdev.testcluster._run import TestClusterError, run

log = logging.getLogger("elbdev.testcluster")

REPO_ROOT = Path(__file__).resolve().parents[2]
LAST_NODE = C.RUN_DIR / "last-node-name"
# Host keys are checked per node (elb.provision.inventory.host_key_args), against C.HOST_KEYS.
SSH_ARGS = "-o ConnectTimeout=5 -o ConnectionAttempts=1 -o BatchMode=yes -o LogLevel=ERROR"


@dataclass(frozen=True)
class PlaybookRun:
    """One ansible-playbook run: exit code, output, duration, per-host recap."""

    playbook: str
    rc: int
    stdout: str
    seconds: float
    recap: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def changed(self, host: str | None = None) -> int:
        hosts = [host] if host else list(self.recap)
        return sum(self.recap.get(h, {}).get("changed", 0) for h in hosts)


class TestCluster:
    """Set up, use and tear down the test cluster. Every method is idempotent."""

    __test__ = False  # not a pytest test class

    def __init__(self, *, repo: Path = REPO_ROOT, cluster_name: str = C.CLUSTER_NAME) -> None:
        self.repo = repo
        self.cluster_name = cluster_name
        self.local_config = LocalConfig(image=C.IMAGE, network=C.NETWORK, boot_timeout=120.0)
        # Each playbook run shares one SSH connection per node (elb.provision.sshmux); off: one
        # connection per task (the benchmark's comparison).
        self.share_connections = True

    # ------------------------------------------------------------------ up / down

    def install_deps(self) -> None:
        script = self.repo / "scripts" / "install-system-deps.sh"
        run(["bash", str(script)], timeout=1800)

    def up(self, nodes: int = 0, *, rebuild_image: bool = False) -> dict[str, float]:
        """Bring the cluster up with at least ``nodes`` workers; returns timings of the steps."""
        if os.geteuid() != 0:
            raise TestClusterError("the test cluster needs root (rootful podman, a bridge, SGE daemons)")
        times: dict[str, float] = {}
        t = time.monotonic()
        self.install_deps()
        times["packages"] = time.monotonic() - t
        C.STATE_DIR.mkdir(parents=True, exist_ok=True)
        (C.STATE_DIR).chmod(0o755)
        t = time.monotonic()
        master.ensure_bridge()
        master.ensure_podman()
        image.ensure_image(rebuild=rebuild_image)
        times["image"] = time.monotonic() - t
        t = time.monotonic()
        master.ensure_master_hosts_entry()
        master.ensure_uts()
        master.ensure_cluster_user()
        master.ensure_ssh_keys()
        master.ensure_sshd()
        master.ensure_sge_cell()
        master.ensure_qmaster()
        master.ensure_sge_config()
        master.ensure_nfs()
        times["master"] = time.monotonic() - t
        have = len(self.workers())
        if nodes > have:
            t = time.monotonic()
            self.add_nodes(nodes - have)
            times["nodes"] = time.monotonic() - t
        return times

    def down(self) -> None:
        """Remove every node container, stop the master's daemons, forget the SGE config."""
        cloud = self.cloud()
        try:
            workers = cloud.list_workers()
        except Exception as err:
            log.debug("listing workers failed: %s", err)
            workers = []
        if workers:
            cloud.terminate([w.instance_id for w in workers])
        slurm.down()
        if master.uts_ready():
            master.stop_qmaster()
        master.stop_nfs()
        master.stop_sshd()
        master.reset_sge()
        master.clean_hosts()
        master.remove_network()
        master.remove_bridge()
        master.remove_uts()
        LAST_NODE.unlink(missing_ok=True)

    def status(self) -> dict[str, object]:
        uts = master.uts_ready()
        st: dict[str, object] = {
            "bridge": master._link_exists(C.BRIDGE),
            "uts_namespace": uts,
            "qmaster": master.qmaster_running(),
            "sshd": master._pid_alive(master.SSHD_PID),
            "nfs_ganesha": master._pid_alive(master.GANESHA_PID),
            "image": image.image_recipe_label() is not None,
        }
        try:
            st["workers"] = [(w.name, w.private_ip, w.state) for w in self.workers()]
        except Exception as err:
            st["workers"] = f"unknown: {err}"
        if uts and st["qmaster"]:
            proc = run(master.in_master(["qhost"]), check=False, timeout=30)
            st["qhost"] = proc.stdout.rstrip()
        return st

    # ------------------------------------------------------------------ the master

    def master_run(
        self,
        argv: Sequence[str],
        *,
        user: str | None = None,
        timeout: float = 60.0,
        check: bool = True,
        input_text: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` as on the master (hostname ``master``, SGE environment), output captured."""
        return run(master.in_master(argv, user=user), timeout=timeout, check=check, input_text=input_text)

    def submit(self, script: str, *args: str, user: str = C.CLUSTER_USER, timeout: float = 30.0) -> str:
        """qsub a job script (text) as ``user``, working in its home directory; returns the job id."""
        proc = self.master_run(
            ["qsub", "-terse", "-wd", f"/home/{user}", *args],
            user=user,
            timeout=timeout,
            input_text=script,
            check=False,
        )
        # With no exec host yet, SGE 8.1.9's qsub warns that no queue can run the job, submits it
        # anyway and exits 1: the job id on stdout is what says it was submitted.
        out = f"{proc.stdout}\n{proc.stderr}"
        ids = re.findall(r"^(\d+)(?:\.\S*)?$", proc.stdout, re.MULTILINE)
        ids += re.findall(r"^Your job(?:-array)? (\d+)[ .]", out, re.MULTILINE)
        if not ids:
            raise TestClusterError(
                f"qsub failed (exit {proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}"
            )
        return str(ids[0])

    # ------------------------------------------------------------------ nodes

    def cloud(self, *, mounts: Sequence[Path] = ()) -> LocalCloud:
        config = self.local_config.model_copy(update={"mounts": list(mounts)}) if mounts else self.local_config
        return LocalCloud(config, self.cluster_name, authorized_key=C.SSH_PUBKEY, host_keys=self.host_keys())

    @staticmethod
    def host_keys() -> HostKeys:
        """The nodes' SSH host keys, given at launch and checked by every playbook run."""
        return HostKeys(C.HOST_KEYS)

    def workers(self) -> list[Instance]:
        return [w for w in self.cloud().list_workers() if w.state in ("pending", "running")]

    @staticmethod
    def spec(inst: Instance) -> NodeSpec:
        if not inst.private_ip:
            raise TestClusterError(f"{inst.name} has no address")
        return NodeSpec(name=inst.name, private_ip=inst.private_ip, slots=inst.slots)

    def sge_hosts(self) -> list[str]:
        proc = self.master_run(["qconf", "-sel"], check=False, timeout=30)
        return proc.stdout.split() if proc.returncode == 0 else []

    def inventory(
        self,
        *,
        workers: Sequence[NodeSpec] = (),
        new_nodes: Sequence[NodeSpec] = (),
        old_nodes: Sequence[NodeSpec] = (),
        shared: Path | None = None,
    ) -> dict[str, object]:
        """The inventory of one run (``shared``: its directory of shared SSH connections)."""
        # ansible-playbook runs as the master (in its UTS namespace, see run_playbook), so the
        # master is reached with a local connection, as when elb itself runs there.
        conn = Connection(
            master=C.MASTER_NAME,
            master_address=None,
            ssh_private_key=C.SSH_KEY,
            ssh_args=SSH_ARGS,
            host_keys=C.HOST_KEYS,
        )
        # A node launched by an elb of a test (its own key store) has its key pinned here at the
        # first contact, unless it is being added: that one must have its key here.
        keys = self.host_keys()
        pin = [n.name for n in (*workers, *old_nodes) if not keys.known(n.name)]
        return build_inventory(
            conn, workers=workers, new_nodes=new_nodes, old_nodes=old_nodes, pin=pin, shared_connections=shared
        )

    def run_playbook(
        self,
        playbook: str,
        *,
        workers: Sequence[NodeSpec] = (),
        new_nodes: Sequence[NodeSpec] = (),
        old_nodes: Sequence[NodeSpec] = (),
        extra_vars: Mapping[str, object] | None = None,
        timeout: float = 900.0,
        forks: int = 20,
    ) -> PlaybookRun:
        """Run ``playbooks/<playbook>`` with ansible-playbook (not ansible-runner) on an inventory,
        each host reached through one SSH connection for the run, as elb's provisioner does."""
        sharing = sshmux.shared_connections() if self.share_connections else contextlib.nullcontext(None)
        with sharing as shared:
            inv = self.inventory(workers=workers, new_nodes=new_nodes, old_nodes=old_nodes, shared=shared)
            return self._run_playbook(playbook, inv, extra_vars, timeout, forks)

    def _run_playbook(
        self, playbook: str, inv: dict[str, object], extra_vars: Mapping[str, object] | None, timeout: float, forks: int
    ) -> PlaybookRun:
        C.RUN_DIR.mkdir(parents=True, exist_ok=True)
        inv_path = C.RUN_DIR / f"inventory-{os.getpid()}-{time.monotonic_ns()}.yml"
        inv_path.write_text(yaml.safe_dump(inv, sort_keys=False))
        argv = [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "-i",
            str(inv_path),
            "--forks",
            str(forks),
            str(self.repo / "playbooks" / playbook),
        ]
        ev = C.RUN_DIR / f"extra-vars-{os.getpid()}-{time.monotonic_ns()}.yml"
        if extra_vars:
            ev.write_text(yaml.safe_dump(dict(extra_vars)))
            argv[1:1] = ["--extra-vars", f"@{ev}"]
        env = dict(os.environ)
        env.update(
            {
                "ANSIBLE_CONFIG": str(self.repo / "ansible.cfg"),
                "ANSIBLE_NOCOLOR": "1",
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', os.defpath)}",
            }
        )
        t = time.monotonic()
        try:
            proc = subprocess.run(
                master.in_master(argv, env={"PATH": env["PATH"]}),
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=self.repo,
                env=env,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired as err:
            raise TestClusterError(f"{playbook} timed out after {timeout:g} s") from err
        finally:
            inv_path.unlink(missing_ok=True)
            ev.unlink(missing_ok=True)
        seconds = time.monotonic() - t
        out = proc.stdout + proc.stderr
        C.LOG_DIR.mkdir(parents=True, exist_ok=True)
        (C.LOG_DIR / f"{Path(playbook).stem}.last.log").write_text(out)
        return PlaybookRun(playbook=playbook, rc=proc.returncode, stdout=out, seconds=seconds, recap=_recap(out))

    def launch(self, count: int, *, boot: bool = False) -> list[Instance]:
        """Launch ``count`` new node containers (names after the highest in use); no provisioning.
        ``boot``: each node runs playbooks/node_boot.yml on itself once started, as a node of
        ``provision.mode: boot`` does (``boot_plans``)."""
        # Like elb's journal, never give a name twice while the cluster is up: SGE caches
        # names (and failures to resolve them) for a while.
        in_use = [w.name for w in self.cloud().list_workers()] + self.sge_hosts()
        if LAST_NODE.exists():
            in_use.append(LAST_NODE.read_text().strip())
        names = next_names(in_use, count)
        if names:
            C.RUN_DIR.mkdir(parents=True, exist_ok=True)
            LAST_NODE.write_text(names[-1] + "\n")
        if boot:
            res = self.cloud(mounts=self.boot_mounts()).launch(names, boot=self.boot_plans(names))
        else:
            res = self.cloud().launch(names)
        if res.failed:
            raise TestClusterError(f"launching nodes failed: {dict(res.failed)}")
        return list(res.launched)

    def add_nodes(self, count: int, *, slots: int | None = None) -> list[Instance]:
        """Launch ``count`` nodes and add them in one add_node.yml run; raise if any failed."""
        existing = [self.spec(w) for w in self.workers()]
        new = self.launch(count)
        specs = [NodeSpec(name=i.name, private_ip=self.spec(i).private_ip, slots=slots) for i in new]
        pb = self.run_playbook("add_node.yml", workers=existing, new_nodes=specs)
        log.info("add_node.yml for %d node(s): %.1f s", len(new), pb.seconds)
        if not pb.ok:
            raise TestClusterError(f"add_node.yml failed (rc {pb.rc}):\n{pb.stdout[-4000:]}")
        return new

    def boot_mounts(self) -> list[Path]:
        """What a node that configures itself at boot runs, mounted from this machine: this
        Python environment (its ansible-playbook), the Python it is made from (unless the
        system's, which the node image has) and the checkout's playbooks and roles. They stand
        in for a node image with elb installed (docs/provisioning.md)."""
        out = [Path(sys.prefix), self.repo]
        base = Path(sys.base_prefix)
        if base != Path(sys.prefix) and not base.is_relative_to("/usr"):
            out.append(base)
        return out

    def boot_plans(self, names: Sequence[str]) -> dict[str, NodeBoot]:
        """Each node's boot (elb.provision.boot), with the roles' variables elb gives them."""
        role_vars = {"cluster_user_name": C.CLUSTER_USER}
        batch = batch_of(names)
        return {
            name: node_boot(
                boot_inventory(name, batch, master=C.MASTER_NAME, master_address=C.MASTER_IP, variables=role_vars),
                ansible_playbook=Path(sys.executable).with_name("ansible-playbook"),
                playbook=self.repo / "playbooks" / "node_boot.yml",
            )
            for name in names
        }

    def add_nodes_at_boot(self, count: int, *, slots: int | None = None, timeout: float = 600.0) -> list[Instance]:
        """Launch ``count`` nodes that configure themselves at boot (node_boot.yml on each),
        admit them in one admit_nodes.yml run on the master, and wait until qhost shows every
        one up; raise if any failed."""
        existing = [self.spec(w) for w in self.workers()]
        new = self.launch(count, boot=True)
        pb = self.admit(new, existing=existing, slots=slots)
        log.info("admit_nodes.yml for %d node(s): %.1f s", len(new), pb.seconds)
        if not pb.ok:
            raise TestClusterError(f"admit_nodes.yml failed (rc {pb.rc}):\n{pb.stdout[-4000:]}")
        self.wait_up([i.name for i in new], timeout=timeout)
        return new

    def admit(
        self, new: Sequence[Instance], *, existing: Sequence[NodeSpec] = (), slots: int | None = None
    ) -> PlaybookRun:
        """admit_nodes.yml for nodes launched with their boot, each with ``slots`` (None: this
        machine's processors, what a node counts: the play does not ask it)."""
        n_slots = slots if slots is not None else len(os.sched_getaffinity(0))
        specs = [replace(self.spec(i), slots=n_slots) for i in new]
        return self.run_playbook("admit_nodes.yml", workers=existing, new_nodes=specs)

    def wait_up(self, names: Sequence[str], *, timeout: float) -> None:
        """Wait until qhost shows each of ``names`` with load values (its execd reports), with the
        wait elb's driver runs for nodes that configure themselves (``elb.schedulers.waiting``)."""
        left = wait_until_up(
            names,
            self._up_in_qhost,
            timeout=timeout,
            poll=0.5,
            stopping=threading.Event(),
            log=log,
            since="the admit play",
            failed=str,
        )
        if left:
            raise TestClusterError(f"not up in qhost after {timeout:g} s: {sorted(left)}")

    def _up_in_qhost(self, names: set[str], seen: dict[str, str]) -> list[str]:
        """The ``names`` qhost shows with load values now (``seen`` stays as it is: a time-out
        names the nodes alone)."""
        proc = self.master_run(["qhost"], check=False, timeout=30)
        up = []
        for line in proc.stdout.splitlines():
            fields = line.split()
            if len(fields) > 6 and fields[0] in names and fields[6] != "-":
                up.append(fields[0])
        return up

    def remove_nodes(self, names: Sequence[str]) -> PlaybookRun:
        """remove_node.yml for these workers, then terminate them (unless the play failed)."""
        workers = {w.name: w for w in self.workers()}
        old = [workers[n] for n in names if n in workers]
        missing = [n for n in names if n not in workers]
        if missing:
            raise TestClusterError(f"no such worker: {missing}")
        stay = [self.spec(w) for n, w in workers.items() if n not in names]
        pb = self.run_playbook("remove_node.yml", workers=stay, old_nodes=[self.spec(w) for w in old])
        if pb.ok:
            self.cloud().terminate([w.instance_id for w in old])
        return pb


def _recap(out: str) -> dict[str, dict[str, int]]:
    """The PLAY RECAP lines: ``host : ok=3 changed=1 unreachable=0 failed=0 ...``."""
    recap: dict[str, dict[str, int]] = {}
    seen = False
    for line in out.splitlines():
        if line.startswith("PLAY RECAP"):
            seen = True
            continue
        if seen and not line.strip():
            break
        if seen and " : " in line:
            host, _, rest = line.partition(" : ")
            counts = {}
            for item in rest.split():
                k, _, v = item.partition("=")
                if v.isdigit():
                    counts[k] = int(v)
            recap[host.strip()] = counts
    return recap
