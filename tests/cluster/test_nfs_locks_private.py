"""The test NFS client's locks against a real nfs-ganesha, without the shared test cluster (marked
``cluster``: it needs the test cluster's packages, root and /dev/fuse, not its lock).

In network and mount namespaces of the test's own (nothing on this machine's network, /run or
/var/lib/nfs changes): rpcbind, rpc.statd and nfs-ganesha with its lock manager on, exporting a
temporary directory, as ``elbdev.testcluster.master`` runs them; two FUSE mounts of it by
``elbdev/testcluster/mount_nfs.py``, each with a host name of its own (two nodes). A lock held
through one mount makes the other's non-blocking lock fail and its blocking lock wait until the
first lets go: ``fcntl``/``lockf`` and ``flock``. Everything runs in the foreground of one process
group, which the test kills at its end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from elbdev.testcluster import constants, image
from elbdev.testcluster import mount_nfs as mount_nfs_module
from tests.cluster import lockers

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(
        os.geteuid() != 0
        or not Path("/dev/fuse").exists()
        or not all(shutil.which(p) for p in ("unshare", "nsenter", "rpcbind", "rpc.statd", "ganesha.nfsd", "ip")),
        reason="needs root, /dev/fuse, util-linux, iproute2, rpcbind, nfs-common and nfs-ganesha",
    ),
]

SERVER = "10.99.0.1"

SANDBOX = """set -e
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /var/lib/nfs
mount -t tmpfs tmpfs /var/log
mkdir -p /run/rpcbind /run/ganesha /var/lib/nfs/sm /var/lib/nfs/sm.bak /var/lib/nfs/ganesha
ip link set lo up
ip link add lab0 type veth peer name lab1
ip addr add {server}/24 dev lab0
ip link set lab0 up
ip link set lab1 up
rpcbind -f -w &
sleep 0.5
rpc.statd -F --no-notify &
exec ganesha.nfsd -F -f {conf} -L {log} -p /run/ganesha.pid -N NIV_EVENT
"""

GANESHA = """NFS_CORE_PARAM {{
    Protocols = 3;
    Bind_addr = {server};
    Enable_NLM = true;
    Enable_RQUOTA = false;
    mount_path_pseudo = false;
}}
NFSV4 {{
    Graceless = true;
}}
EXPORT {{
    Export_Id = 7;
    Path = {export};
    Pseudo = {export};
    Protocols = 3;
    Access_Type = RW;
    Squash = No_Root_Squash;
    FSAL {{ Name = VFS; }}
}}
"""


@dataclass
class Lab:
    pid: int  # the sandbox's first process: its namespaces are the lab's
    export: Path
    mounts: dict[str, Path]

    def run(self, *argv: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["nsenter", "-t", str(self.pid), "-n", "-m", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=False,
        )


def _python_with_wheels(tmp: Path) -> Path:
    """A virtualenv of this Python with the FUSE client's wheels (as in the node image)."""
    wheels = sorted(constants.WHEEL_DIR.glob("*.whl")) or image._download_wheels()
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
    subprocess.run([*pip, *map(str, wheels)], check=True, timeout=300)
    return venv / "bin" / "python"


def _wait(what: str, check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("nfslab")
    python = _python_with_wheels(tmp)
    export = tmp / "export"
    export.mkdir(mode=0o777)
    export.chmod(0o777)
    conf = tmp / "ganesha.conf"
    conf.write_text(GANESHA.format(server=SERVER, export=export))
    script = SANDBOX.format(server=SERVER, conf=conf, log=tmp / "ganesha.log")
    sandbox = subprocess.Popen(
        ["unshare", "--net", "--mount", "--fork", "--kill-child", "sh", "-c", script],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "sandbox.err").open("w"),
    )
    try:
        _wait("the sandbox", lambda: _children(sandbox.pid))
        lab = Lab(_children(sandbox.pid)[0], export, {})

        def nlm_up() -> bool:
            out = lab.run("rpcinfo", "-p", "127.0.0.1").communicate(timeout=30)[0]
            return "nlockmgr" in out and "mountd" in out

        _wait("ganesha's lock manager", nlm_up, timeout=60)
        for node in ("nodea", "nodeb"):
            where = tmp / f"mnt-{node}"
            where.mkdir()
            source = Path(mount_nfs_module.__file__)
            proc = lab.run(
                "unshare", "--uts", "sh", "-c",
                f'hostname {node} && exec "$0" "$1" {SERVER}:{export} {where} -o rw,hard',
                str(python), str(source),
            )  # fmt: skip
            out = proc.communicate(timeout=60)[0]
            assert proc.returncode == 0, out
            lab.mounts[node] = where
        yield lab
    finally:
        _stop(sandbox)


def _stop(sandbox: subprocess.Popen[bytes]) -> None:
    """Kill every process of the sandbox: its process group (the daemons) and whatever else lives
    in its mount namespace (the FUSE servers, which start sessions of their own)."""
    inner = _children(sandbox.pid)
    ns = os.readlink(f"/proc/{inner[0]}/ns/mnt") if inner else None
    if ns is not None and ns != os.readlink("/proc/self/ns/mnt"):
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.readlink(entry / "ns" / "mnt") == ns:
                        os.kill(int(entry.name), signal.SIGKILL)
                except (FileNotFoundError, ProcessLookupError, PermissionError):
                    continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(sandbox.pid, signal.SIGKILL)
    sandbox.wait(timeout=30)


def _children(pid: int) -> list[int]:
    proc = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return [int(p) for p in proc.stdout.split()]


def through(lab: Lab, node: str) -> lockers.Node:
    """Lockers in the lab, on the files of ``node``'s mount."""
    return lockers.Node(
        lambda *args: lab.run(*lockers.argv(sys.executable, *args)), lambda name: lab.mounts[node] / name
    )


@pytest.mark.parametrize("kind", ["posix", "bsd"])
def test_a_lock_through_one_mount_holds_against_the_other(lab: Lab, kind: str) -> None:
    lockers.lock_holds(
        through(lab, "nodea"), through(lab, "nodeb"), kind, f"lock-{kind}", lab.export / f"release-{kind}"
    )
