"""The master of the test cluster: this machine, with its SGE daemons and sshd in a UTS
namespace of their own (hostname ``master``) so the machine's hostname is untouched.

Every function here is idempotent: it looks at what is there and only does what is missing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from elbdev.testcluster import constants as C
from elbdev.testcluster import pids
from elbdev.testcluster._run import TestClusterError, run

log = logging.getLogger("elbdev.testcluster")

HOSTS_MARK = "# elb-testcluster"
CONTAINERS_CONF = Path("/etc/containers/containers.conf")
NETWORKS_DIR = Path("/etc/containers/networks")
GANESHA_CONF = Path("/etc/ganesha/ganesha.conf")
GANESHA_EXPORTS = Path("/etc/ganesha/elb-exports.conf")
EXPORTS = Path("/etc/exports")
SSHD_CONFIG = C.STATE_DIR / "sshd_config"
SSHD_PID = C.RUN_DIR / "sshd.pid"
GANESHA_PID = C.RUN_DIR / "ganesha.pid"
RPCBIND_STARTED = C.RUN_DIR / "rpcbind.started-by-elb"
STATD_STARTED = C.RUN_DIR / "statd.started-by-elb"
QMASTER_PID = C.SGE_SPOOL / "qmaster" / "qmaster.pid"
CELL_COMMON = C.SGE_ROOT / C.SGE_CELL / "common"
SPOOLDB = C.SGE_SPOOL / "spooldb"
QMASTER_SPOOL = C.SGE_SPOOL / "qmaster"
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"}


# --------------------------------------------------------------------------- namespace


def in_master(argv: Sequence[str], *, user: str | None = None, env: Mapping[str, str] | None = None) -> list[str]:
    """The argument list that runs ``argv`` as the master: in its UTS namespace, SGE env set."""
    # The directory of the Python running elb first (so `python` and `elb` are this installation's,
    # activated or not), then the caller's PATH, then the system's sbin and bin directories.
    here = os.path.dirname(sys.executable)
    path = os.pathsep.join(p for p in (here, os.environ.get("PATH", ""), BASE_ENV["PATH"]) if p)
    full = [f"{k}={v}" for k, v in {**BASE_ENV, "PATH": path, **C.SGE_ENV, **(env or {})}.items()]
    prefix = ["nsenter", f"--uts={C.UTS_NS}", "--"]
    if user is not None and user != "root":
        return [*prefix, "runuser", "-u", user, "--", "env", *full, *argv]
    return [*prefix, "env", *full, *argv]


def uts_ready() -> bool:
    if not C.UTS_NS.exists():
        return False
    proc = run(["nsenter", f"--uts={C.UTS_NS}", "hostname"], check=False, timeout=10, quiet=True)
    return proc.returncode == 0 and proc.stdout.strip() == C.MASTER_NAME


def ensure_uts() -> None:
    if uts_ready():
        return
    C.RUN_DIR.mkdir(parents=True, exist_ok=True)
    if C.UTS_NS.exists():
        run(["umount", str(C.UTS_NS)], check=False, timeout=10)
    C.UTS_NS.touch()
    run(["unshare", f"--uts={C.UTS_NS}", "hostname", C.MASTER_NAME], timeout=10)


def master_run(
    argv: Sequence[str],
    *,
    user: str | None = None,
    timeout: float = 60.0,
    check: bool = True,
    input_text: str | None = None,
) -> tuple[int, str, str]:
    proc = run(in_master(argv, user=user), timeout=timeout, check=check, input_text=input_text)
    return proc.returncode, proc.stdout, proc.stderr


# --------------------------------------------------------------------------- network


def _link_exists(name: str) -> bool:
    return run(["ip", "link", "show", name], check=False, timeout=10, quiet=True).returncode == 0


def ensure_bridge() -> None:
    if not _link_exists(C.BRIDGE):
        run(["ip", "link", "add", C.BRIDGE, "type", "bridge"], timeout=10)
    addrs = run(["ip", "-o", "-4", "addr", "show", "dev", C.BRIDGE], timeout=10).stdout
    if f" {C.MASTER_IP}/" not in addrs:
        run(["ip", "addr", "add", f"{C.MASTER_IP}/{C.PREFIX_LEN}", "dev", C.BRIDGE], timeout=10)
    run(["ip", "link", "set", C.BRIDGE, "up"], timeout=10)
    if not _link_exists(C.KEEPER_VETH):
        run(
            ["ip", "link", "add", C.KEEPER_VETH, "type", "veth", "peer", "name", C.KEEPER_VETH + "p"],
            timeout=10,
        )
    run(["ip", "link", "set", C.KEEPER_VETH, "master", C.BRIDGE], timeout=10)
    run(["ip", "link", "set", C.KEEPER_VETH, "up"], timeout=10)
    run(["ip", "link", "set", C.KEEPER_VETH + "p", "up"], timeout=10)
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")


def remove_bridge() -> None:
    if _link_exists(C.KEEPER_VETH):
        run(["ip", "link", "del", C.KEEPER_VETH], check=False, timeout=10)
    if _link_exists(C.BRIDGE):
        run(["ip", "link", "del", C.BRIDGE], check=False, timeout=10)


def ensure_podman() -> None:
    """containers.conf settings podman needs here, and the podman network on the bridge."""
    wanted = (
        f"{HOSTS_MARK}: settings the test cluster needs on this machine\n"
        "[containers]\n"
        'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
        "[engine]\n"
        'runtime = "runc"\n'
        'cgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
    )
    current = CONTAINERS_CONF.read_text() if CONTAINERS_CONF.exists() else ""
    if current != wanted:
        if current and HOSTS_MARK not in current:
            CONTAINERS_CONF.with_suffix(".conf.elb-orig").write_text(current)
        CONTAINERS_CONF.parent.mkdir(parents=True, exist_ok=True)
        CONTAINERS_CONF.write_text(wanted)
    # podman 4.3 can neither name an existing bridge nor accept a subnet already on the
    # host, so the network definition is written here (netavark's own format).
    netfile = NETWORKS_DIR / f"{C.NETWORK}.json"
    want = {
        "name": C.NETWORK,
        "id": hashlib.sha256(f"elb-testcluster-{C.NETWORK}".encode()).hexdigest(),
        "driver": "bridge",
        "network_interface": C.BRIDGE,
        "created": "2026-01-01T00:00:00.000000000+00:00",
        "subnets": [{"subnet": C.SUBNET, "gateway": C.MASTER_IP}],
        "ipv6_enabled": False,
        "internal": False,
        "dns_enabled": False,
        "ipam_options": {"driver": "host-local"},
    }
    existing = json.loads(netfile.read_text()) if netfile.exists() else None
    if existing != want:
        NETWORKS_DIR.mkdir(parents=True, exist_ok=True)
        netfile.write_text(json.dumps(want, indent=5) + "\n")


def remove_network() -> None:
    if run(["podman", "network", "exists", C.NETWORK], check=False, timeout=30).returncode == 0:
        run(["podman", "network", "rm", "-f", C.NETWORK], check=False, timeout=60)


# --------------------------------------------------------------------------- /etc/hosts


def ensure_master_hosts_entry() -> None:
    """``master`` must resolve to the bridge address before SGE ever looks it up."""
    hosts = Path("/etc/hosts")
    lines = hosts.read_text().splitlines()
    want = f"{C.MASTER_IP}\t{C.MASTER_NAME}"
    keep = [ln for ln in lines if not _names_host(ln, C.MASTER_NAME) or ln.strip() == want]
    if want not in keep:
        keep.append(want)
    if keep != lines:
        _write_hosts(keep)


def clean_hosts() -> None:
    """Drop every line for an address of the test cluster's subnet."""
    hosts = Path("/etc/hosts")
    lines = hosts.read_text().splitlines()
    keep = [ln for ln in lines if not ln.split()[:1] or not ln.split()[0].startswith("10.77.0.")]
    if keep != lines:
        _write_hosts(keep)


def _names_host(line: str, name: str) -> bool:
    fields = line.split("#", 1)[0].split()
    return len(fields) > 1 and name in fields[1:]


def _write_hosts(lines: list[str]) -> None:
    # /etc/hosts may be a bind mount: rewrite in place, never replace the file.
    with open("/etc/hosts", "r+", encoding="utf-8") as f:
        f.seek(0)
        f.write("\n".join(lines) + "\n")
        f.truncate()


# --------------------------------------------------------------------------- users


def ensure_cluster_user() -> None:
    if run(["getent", "group", C.CLUSTER_USER], check=False, timeout=10).returncode != 0:
        run(["groupadd", "--gid", str(C.CLUSTER_UID), C.CLUSTER_USER], timeout=10)
    if run(["id", C.CLUSTER_USER], check=False, timeout=10).returncode != 0:
        run(
            ["useradd", "--uid", str(C.CLUSTER_UID), "--gid", str(C.CLUSTER_UID), "--create-home",
             "--shell", "/bin/bash", C.CLUSTER_USER],
            timeout=10,
        )  # fmt: skip
    got = run(["id", "-u", C.CLUSTER_USER], timeout=10).stdout.strip()
    if got != str(C.CLUSTER_UID):
        raise TestClusterError(f"user {C.CLUSTER_USER} exists with uid {got}, the test cluster needs {C.CLUSTER_UID}")
    sgeadmin = run(["id", "-u", "sgeadmin"], check=False, timeout=10).stdout.strip()
    if sgeadmin != str(C.SGEADMIN_ID):
        raise TestClusterError(
            f"sgeadmin has uid {sgeadmin or '(none)'}, the node image has {C.SGEADMIN_ID}: "
            "run scripts/install-system-deps.sh on a machine without gridengine installed"
        )


# --------------------------------------------------------------------------- ssh


def ensure_ssh_keys() -> None:
    C.SSH_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not C.SSH_KEY.exists():
        run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "elb-testcluster", "-f", str(C.SSH_KEY)],
            timeout=30,
        )
    hostkey = C.SSH_DIR / "ssh_host_ed25519_key"
    if not hostkey.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hostkey)], timeout=30)
    auth = C.SSH_DIR / "authorized_keys"
    pub = C.SSH_PUBKEY.read_text()
    if not auth.exists() or auth.read_text() != pub:
        auth.write_text(pub)
        auth.chmod(0o600)


# The process each pid file names (``elbdev.testcluster.pids``: a stale file's number is no one's).
DAEMONS = {
    SSHD_PID: "sshd",
    GANESHA_PID: "ganesha.nfsd",
    QMASTER_PID: "sge_qmaster",
    STATD_STARTED: "rpc.statd",
    RPCBIND_STARTED: "rpcbind",
}


def _pid_alive(pidfile: Path) -> bool:
    """Whether the daemon of ``pidfile`` runs (the process under its number, by its name)."""
    return pids.pid_of(pidfile, DAEMONS[pidfile]) is not None


def _kill_pidfile(pidfile: Path, timeout: float = 10.0) -> None:
    """SIGTERM to the daemon of ``pidfile``, SIGKILL after ``timeout``; the file removed."""
    pids.stop(pidfile, DAEMONS[pidfile], timeout)


def ensure_sshd() -> None:
    cfg = (
        f"ListenAddress {C.MASTER_IP}\n"
        f"HostKey {C.SSH_DIR / 'ssh_host_ed25519_key'}\n"
        f"PidFile {SSHD_PID}\n"
        "PermitRootLogin prohibit-password\n"
        f"AuthorizedKeysFile .ssh/authorized_keys {C.SSH_DIR / 'authorized_keys'}\n"
        "StrictModes no\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "UsePAM no\n"
        "MaxStartups 100:30:200\n"
        "MaxSessions 100\n"
        "Subsystem sftp /usr/lib/openssh/sftp-server\n"
    )
    changed = not SSHD_CONFIG.exists() or SSHD_CONFIG.read_text() != cfg
    if changed:
        SSHD_CONFIG.write_text(cfg)
    if _pid_alive(SSHD_PID):
        if not changed:
            return
        _kill_pidfile(SSHD_PID)
    Path("/run/sshd").mkdir(exist_ok=True)
    run(["nsenter", f"--uts={C.UTS_NS}", "--", "/usr/sbin/sshd", "-f", str(SSHD_CONFIG)], timeout=30)
    _wait_port(C.MASTER_IP, 22, 20)


def _wait_port(host: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TestClusterError(f"nothing answers on {host}:{port} after {timeout:g} s") from None
            time.sleep(0.2)


# --------------------------------------------------------------------------- SGE


def sge_initialised() -> bool:
    return (SPOOLDB / "sge").exists()


def ensure_sge_cell() -> None:
    for d in (C.SGE_ROOT, C.SGE_ROOT / C.SGE_CELL, CELL_COMMON):
        d.mkdir(exist_ok=True)
        os.chown(d, C.SGEADMIN_ID, C.SGEADMIN_ID)
    bootstrap = CELL_COMMON / "bootstrap"
    if not bootstrap.exists():
        run(
            [
                "install",
                "-m0644",
                "-o",
                "sgeadmin",
                "-g",
                "sgeadmin",
                "/usr/share/gridengine/default-bootstrap",
                str(bootstrap),
            ]
        )
    for d in (C.SGE_SPOOL, QMASTER_SPOOL, QMASTER_SPOOL / "job_scripts", SPOOLDB):
        d.mkdir(parents=True, exist_ok=True)
        if d != C.SGE_SPOOL:
            os.chown(d, C.SGEADMIN_ID, C.SGEADMIN_ID)
    if not sge_initialised():
        log.info("initialising the SGE cell")
        run(
            ["runuser", "-u", "sgeadmin", "--", "env", *(f"{k}={v}" for k, v in C.SGE_ENV.items()),
             "/usr/share/gridengine/scripts/init_cluster", str(C.SGE_ROOT), C.SGE_CELL, str(SPOOLDB), "sgeadmin"],
            timeout=120,
        )  # fmt: skip
    (CELL_COMMON / "act_qmaster").write_text(C.MASTER_NAME + "\n")
    os.chown(CELL_COMMON / "act_qmaster", C.SGEADMIN_ID, C.SGEADMIN_ID)


def qmaster_running() -> bool:
    return _pid_alive(QMASTER_PID)


def ensure_qmaster() -> None:
    if qmaster_running():
        return
    Path("/var/run/gridengine").mkdir(exist_ok=True)
    os.chown("/var/run/gridengine", C.SGEADMIN_ID, C.SGEADMIN_ID)
    log.info("starting sge_qmaster")
    run(in_master(["/usr/sbin/sge_qmaster"]), timeout=60)
    deadline = time.monotonic() + 60
    while True:
        rc, out, err = master_run(["qconf", "-sh"], check=False, timeout=20)
        if rc == 0 and C.MASTER_NAME in out.split():
            return
        if time.monotonic() > deadline:
            raise TestClusterError(f"sge_qmaster does not answer: {err.strip() or out.strip()}")
        time.sleep(0.5)


def stop_qmaster() -> None:
    if not qmaster_running():
        return
    master_run(["qconf", "-km"], check=False, timeout=15)
    deadline = time.monotonic() + 15
    while qmaster_running() and time.monotonic() < deadline:
        time.sleep(0.3)
    if qmaster_running():
        _kill_pidfile(QMASTER_PID)
    QMASTER_PID.unlink(missing_ok=True)


def qconf(args: Sequence[str], *, timeout: float = 30.0) -> str:
    """Run qconf as the master; an error it prints (even with exit 0) is an error."""
    rc, out, err = master_run(["qconf", *args], check=False, timeout=timeout)
    text = (out + err).strip()
    low = text.lower()
    if rc != 0 or "error" in low or "denied" in low or ("unknown" in low and "attribute" in low):
        raise TestClusterError(f"qconf {' '.join(args)}: {text or f'exit {rc}'}")
    return out


def _qconf_list(option: str) -> list[str]:
    """A qconf list (-sql, -spl, ...); empty when qconf says none is defined."""
    rc, out, err = master_run(["qconf", option], check=False, timeout=30)
    if rc != 0:
        if "no " in (out + err).lower() and "defined" in (out + err).lower():
            return []
        raise TestClusterError(f"qconf {option}: {(out + err).strip()}")
    return out.split()


def _qconf_from_file(option: str, name: str, body: str) -> None:
    tmp = C.RUN_DIR / "qconf"
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / name
    path.write_text(body)
    try:
        qconf([option, str(path)])
    finally:
        path.unlink(missing_ok=True)


def _conf_lines(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if parts:
            out[parts[0]] = parts[1] if len(parts) > 1 else ""
    return out


def _render_conf(items: Mapping[str, str]) -> str:
    return "".join(f"{k:<32} {v}\n" for k, v in items.items())


GLOBAL_CONF = {
    "load_report_time": "00:00:05",
    "max_unheard": "00:00:30",
    "reschedule_unknown": "00:00:00",
    "execd_params": "KEEP_ACTIVE=FALSE",
    "qmaster_params": "none",
}
SCHED_CONF = {"schedule_interval": "0:0:1", "flush_submit_sec": "0", "flush_finish_sec": "0"}

PE_TEMPLATE = {
    "slots": "9999",
    "user_lists": "NONE",
    "xuser_lists": "NONE",
    "start_proc_args": "NONE",
    "stop_proc_args": "NONE",
    "control_slaves": "FALSE",
    "job_is_first_task": "TRUE",
    "urgency_slots": "min",
    "accounting_summary": "FALSE",
    "qsort_args": "NONE",
}
PES = {"smp": "$pe_slots", "mpi": "$fill_up"}

QUEUE_CONF = {
    "qname": C.QUEUE,
    "hostlist": C.HOSTGROUP,
    "seq_no": "0",
    "load_thresholds": "NONE",
    "suspend_thresholds": "NONE",
    "nsuspend": "1",
    "suspend_interval": "00:05:00",
    "priority": "0",
    "min_cpu_interval": "00:05:00",
    "processors": "UNDEFINED",
    "qtype": "BATCH INTERACTIVE",
    "ckpt_list": "NONE",
    "pe_list": "smp mpi",
    "rerun": "FALSE",
    "slots": "1",
    "tmpdir": "/tmp",  # noqa: S108 - the nodes' job scratch directory, as SGE's default queue has it
    "shell": "/bin/sh",
    "prolog": "NONE",
    "epilog": "NONE",
    "shell_start_mode": "unix_behavior",
    "starter_method": "NONE",
    "suspend_method": "NONE",
    "resume_method": "NONE",
    "terminate_method": "NONE",
    "notify": "00:00:60",
    "owner_list": "NONE",
    "user_lists": "NONE",
    "xuser_lists": "NONE",
    "subordinate_list": "NONE",
    "complex_values": "NONE",
    "projects": "NONE",
    "xprojects": "NONE",
    "calendar": "NONE",
    "initial_state": "default",
    **{
        f"{p}_{r}": "INFINITY"
        for p in ("s", "h")
        for r in ("rt", "cpu", "fsize", "data", "stack", "core", "rss", "vmem")
    },
}


def ensure_sge_config() -> None:
    """Global and scheduler config, hostgroup, parallel environments, queue (only what differs)."""
    glob = _conf_lines(qconf(["-sconf", "global"]))
    if any(glob.get(k) != v for k, v in GLOBAL_CONF.items()):
        glob.pop("global:", None)
        glob.update(GLOBAL_CONF)
        _qconf_from_file("-Mconf", "global", _render_conf(glob))
    sched = _conf_lines(qconf(["-ssconf"]))
    if any(sched.get(k) != v for k, v in SCHED_CONF.items()):
        sched.update(SCHED_CONF)
        _qconf_from_file("-Msconf", "sched", _render_conf(sched))
    if C.HOSTGROUP not in _qconf_list("-shgrpl"):
        _qconf_from_file("-Ahgrp", "hgrp", _render_conf({"group_name": C.HOSTGROUP, "hostlist": "NONE"}))
    existing_pes = _qconf_list("-spl")
    for pe, rule in PES.items():
        if pe not in existing_pes:
            _qconf_from_file("-Ap", pe, _render_conf({"pe_name": pe, **PE_TEMPLATE, "allocation_rule": rule}))
    if C.QUEUE not in _qconf_list("-sql"):
        _qconf_from_file("-Aq", "queue", _render_conf(QUEUE_CONF))
    # The master submits (and is an admin host); the cluster user's jobs come from it.
    if C.MASTER_NAME not in _qconf_list("-ss"):
        qconf(["-as", C.MASTER_NAME])


def reset_sge() -> None:
    """Forget the whole SGE configuration (spool), so the next ``up`` starts from nothing."""
    for d in (SPOOLDB, QMASTER_SPOOL):
        if d.exists():
            shutil.rmtree(d)
    for f in ("act_qmaster", "settings.sh", "settings.csh", "sge.module", "accounting"):
        (CELL_COMMON / f).unlink(missing_ok=True)
    # What the master published for nodes that configure themselves at boot (role node_boot):
    # the next up gives the same names again.
    shutil.rmtree(CELL_COMMON / "elb-boot", ignore_errors=True)


# --------------------------------------------------------------------------- NFS


GANESHA_BASE = f"""{HOSTS_MARK}: the test cluster's userspace NFSv3 server (nfs-ganesha).
# The exports are generated from /etc/exports by the nfs_server role into {GANESHA_EXPORTS}.
# Its lock manager (NLM) holds the nodes' locks; rpc.statd, which it asks to watch each client,
# runs beside it.
NFS_CORE_PARAM {{
    Protocols = 3;
    Bind_addr = {C.MASTER_IP};
    Enable_NLM = true;
    Enable_RQUOTA = false;
    mount_path_pseudo = false;
}}
NFSV4 {{
    Graceless = true;
}}
# The master's own processes (SGE, the tests, an admin) change the exported trees directly, not
# over NFS, as they do beside the kernel's NFS server. The kernel's server keeps no cache of its
# own of names and attributes; ganesha does (60 s by default), and a directory removed and made
# again on the master under the same name within that time was seen by a new node as its old,
# removed self (NFS3ERR_STALE, then "No such file or directory" for a job's output file). Neither
# cache outlives a change here: attributes are read again at each use, and a directory whose
# attributes changed has its names read again.
EXPORT_DEFAULTS {{
    Access_Type = None;
    Attr_Expiration_Time = 0;
}}
MDCACHE {{
    Use_Getattr_Directory_Invalidation = true;
}}
LOG {{
    Default_Log_Level = EVENT;
}}
%include "{GANESHA_EXPORTS}"
"""

# What the nfs_server role's module writes for an /etc/exports without exports.
GANESHA_NO_EXPORTS = "# Generated from /etc/exports by elb's nfs_server role (elb_export_lines): do not edit.\n"
EXPORTS_HEADER = f"{HOSTS_MARK}: managed by the nfs_server role (one line per node)\n"


def ensure_nfs() -> None:
    if run(["pgrep", "-x", "rpcbind"], check=False, timeout=10).returncode != 0:
        run(["rpcbind", "-w"], timeout=30)
        C.RUN_DIR.mkdir(parents=True, exist_ok=True)
        pid = run(["pgrep", "-x", "rpcbind"], check=False, timeout=10).stdout.split()
        RPCBIND_STARTED.write_text(pid[0] if pid else "")
    if run(["pgrep", "-x", "rpc.statd"], check=False, timeout=10).returncode != 0:
        # ganesha's lock manager grants a lock only once statd watches the client (NSM)
        run(["rpc.statd", "--no-notify"], timeout=30)
        C.RUN_DIR.mkdir(parents=True, exist_ok=True)
        pid = run(["pgrep", "-x", "rpc.statd"], check=False, timeout=10).stdout.split()
        STATD_STARTED.write_text(pid[0] if pid else "")
    GANESHA_CONF.parent.mkdir(parents=True, exist_ok=True)
    changed = not GANESHA_CONF.exists() or GANESHA_CONF.read_text() != GANESHA_BASE
    if changed:
        GANESHA_CONF.write_text(GANESHA_BASE)
    if not EXPORTS.exists() or HOSTS_MARK not in EXPORTS.read_text():
        EXPORTS.write_text(EXPORTS_HEADER)
    if not GANESHA_EXPORTS.exists() or EXPORTS.read_text() == EXPORTS_HEADER:
        GANESHA_EXPORTS.write_text(GANESHA_NO_EXPORTS)  # nothing exported yet
    if _pid_alive(GANESHA_PID):
        if not changed:
            return
        _kill_pidfile(GANESHA_PID)
    Path("/var/run/ganesha").mkdir(parents=True, exist_ok=True)
    Path("/var/lib/nfs/ganesha").mkdir(parents=True, exist_ok=True)
    C.LOG_DIR.mkdir(parents=True, exist_ok=True)
    run(
        in_master(
            ["/usr/bin/ganesha.nfsd", "-f", str(GANESHA_CONF), "-L", str(C.LOG_DIR / "ganesha.log"),
             "-p", str(GANESHA_PID), "-N", "NIV_EVENT"]
        ),
        timeout=30,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while True:
        proc = run(["rpcinfo", "-p", "127.0.0.1"], check=False, timeout=10, quiet=True)
        if proc.returncode == 0 and all(s in proc.stdout for s in ("mountd", "nfs", "nlockmgr")):
            return
        if time.monotonic() > deadline:
            raise TestClusterError(f"nfs-ganesha did not register with rpcbind; see {C.LOG_DIR / 'ganesha.log'}")
        time.sleep(0.3)


def stop_nfs() -> None:
    _kill_pidfile(GANESHA_PID)
    if GANESHA_EXPORTS.exists():
        GANESHA_EXPORTS.write_text(GANESHA_NO_EXPORTS)
    if EXPORTS.exists() and HOSTS_MARK in EXPORTS.read_text():
        EXPORTS.write_text(EXPORTS_HEADER)
    if STATD_STARTED.exists():
        _kill_pidfile(STATD_STARTED)  # only the statd we started, by its pid
    if RPCBIND_STARTED.exists():
        _kill_pidfile(RPCBIND_STARTED)  # only the rpcbind we started, by its pid


def stop_sshd() -> None:
    _kill_pidfile(SSHD_PID)


def remove_uts() -> None:
    if C.UTS_NS.exists():
        run(["umount", str(C.UTS_NS)], check=False, timeout=10)
        C.UTS_NS.unlink(missing_ok=True)
