"""The node image: a minimal Debian bookworm made with debootstrap, then ``podman import``.

Built once and cached: the image carries a label with the hash of its recipe (package
lists, the init script and the FUSE NFS client), so a changed recipe rebuilds it and an
unchanged one is reused. The exported root filesystem tarball is also kept under
``/var/lib/elb-testcluster/image`` so that an image removed from podman is re-imported
without debootstrapping again.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import sys
from pathlib import Path

from elb.testcluster import constants as C
from elb.testcluster._run import TestClusterError, run

log = logging.getLogger("elb.testcluster")

BASE_PACKAGES = (
    "python3",
    "python3-apt",
    "openssh-server",
    "iproute2",
    "procps",
    "fuse3",
    "nfs-common",
    "netbase",
    "less",
)
SGE_PACKAGES = ("gridengine-exec", "gridengine-client")
# A Slurm worker's packages (roles/munge, roles/slurm_node): preinstalled so that the roles'
# install tasks find them and need no mirror. Their services are not started in the image
# (policy-rc.d); Debian's munge package makes a key of its own, which roles/munge replaces.
SLURM_PACKAGES = ("slurmd", "slurm-client", "munge")
WHEELS = ("nfs-rs==0.8.7", "mfusepy==3.1.1")
RECIPE_VERSION = "5"  # bump when the steps below change meaningfully

INIT_SCRIPT = """#!/bin/sh
# PID 1's child in an elb test node: host keys on first boot, then sshd in the foreground.
# A test node shares the host's kernel, so its uptime would be the host's. sshd, and all that is
# started under it (slurmd among them), runs in a time namespace whose boot time is the node's
# start, as on a machine that just booted: Slurm waits for a node it powered up to boot. The
# capability that sets the namespace up (SYS_TIME) is dropped for everything under sshd.
set -e
ssh-keygen -A >/dev/null 2>&1
mkdir -p /run/sshd /var/run/gridengine
up=$(cut -d. -f1 /proc/uptime)
if unshare --time --boottime "-$up" true 2>/dev/null; then
    exec unshare --time --boottime "-$up" setpriv --bounding-set -sys_time --inh-caps -sys_time -- /usr/sbin/sshd -D -e
fi
exec /usr/sbin/sshd -D -e
"""

MOUNT_WRAPPER = """#!/bin/sh
# Test-only NFS client for elb's test cluster (FUSE over nfs-rs); see elb/testcluster/mount_nfs.py.
exec /usr/bin/python3 /opt/elb-mountnfs/mount_nfs.py "$@"
"""

UMOUNT_WRAPPER = """#!/bin/sh
# Test-only: unmount a FUSE NFS mount made by /sbin/mount.nfs.
exec /usr/bin/fusermount3 -u "$1"
"""

POLICY_RC = "#!/bin/sh\nexit 101\n"


def _mount_nfs_source() -> Path:
    return Path(__file__).with_name("mount_nfs.py")


def recipe_hash() -> str:
    h = hashlib.sha256()
    for part in (
        RECIPE_VERSION,
        *BASE_PACKAGES,
        *SGE_PACKAGES,
        *SLURM_PACKAGES,
        *WHEELS,
        INIT_SCRIPT,
        MOUNT_WRAPPER,
        UMOUNT_WRAPPER,
    ):
        h.update(part.encode())
        h.update(b"\0")
    h.update(_mount_nfs_source().read_bytes())
    return h.hexdigest()[:16]


def image_recipe_label(image: str = C.IMAGE) -> str | None:
    proc = run(
        ["podman", "image", "inspect", "--format", '{{ index .Labels "elb.recipe" }}', image],
        check=False,
        timeout=60,
    )
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


def ensure_image(image: str = C.IMAGE, *, rebuild: bool = False) -> bool:
    """Make sure ``image`` exists and matches the recipe. Returns True if anything was built."""
    want = recipe_hash()
    if not rebuild and image_recipe_label(image) == want:
        return False
    tarball = C.IMAGE_DIR / f"elb-node-{want}.tar"
    if rebuild or not tarball.exists():
        _build_rootfs_tarball(tarball)
    log.info("importing %s into podman as %s", tarball, image)
    run(
        [
            "podman",
            "import",
            "--change",
            'CMD ["/usr/local/sbin/elb-node-init"]',
            "--change",
            f"LABEL elb.recipe={want}",
            str(tarball),
            image,
        ],
        timeout=600,
    )
    return True


def _chroot(rootfs: Path, *argv: str, timeout: float = 900, input_text: str | None = None) -> None:
    run(
        ["chroot", str(rootfs), *argv],
        timeout=timeout,
        input_text=input_text,
        env={"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )


def _download_wheels() -> list[Path]:
    C.WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
            "-q",
            "-d",
            str(C.WHEEL_DIR),
            *WHEELS,
        ],
        timeout=600,
    )
    return sorted(C.WHEEL_DIR.glob("*.whl"))


def _build_rootfs_tarball(tarball: Path) -> None:
    C.IMAGE_DIR.mkdir(parents=True, exist_ok=True)
    rootfs = C.IMAGE_DIR / "rootfs"
    _unmount_below(rootfs)
    if rootfs.exists():
        shutil.rmtree(rootfs)
    log.info("debootstrapping %s into %s (takes about a minute)", C.DEBIAN_SUITE, rootfs)
    run(
        [
            "debootstrap",
            "--variant=minbase",
            "--include=" + ",".join(BASE_PACKAGES),
            C.DEBIAN_SUITE,
            str(rootfs),
            C.DEBIAN_MIRROR,
        ],
        timeout=1800,
    )
    try:
        (rootfs / "usr/sbin/policy-rc.d").write_text(POLICY_RC)
        (rootfs / "usr/sbin/policy-rc.d").chmod(0o755)
        (rootfs / "etc/apt/sources.list").write_text(
            f"deb {C.DEBIAN_MIRROR} {C.DEBIAN_SUITE} main\n"
            f"deb {C.DEBIAN_MIRROR} {C.DEBIAN_SUITE}-updates main\n"
            f"deb http://deb.debian.org/debian-security {C.DEBIAN_SUITE}-security main\n"
        )
        shutil.copyfile("/etc/resolv.conf", rootfs / "etc/resolv.conf")
        # The SGE admin user must have the same uid/gid as on the master (shared SGE root).
        _chroot(rootfs, "groupadd", "--system", "--gid", str(C.SGEADMIN_ID), "sgeadmin")
        _chroot(
            rootfs,
            "useradd", "--system", "--uid", str(C.SGEADMIN_ID), "--gid", "sgeadmin",
            "--no-create-home", "--home-dir", str(C.SGE_ROOT), "--shell", "/bin/false", "sgeadmin",
        )  # fmt: skip
        _chroot(
            rootfs,
            "debconf-set-selections",
            input_text=(
                "gridengine-common shared/gridengineconfig boolean false\n"
                "gridengine-common shared/gridenginecell string default\n"
                "gridengine-common shared/gridenginemaster string master\n"
                "gridengine-client shared/gridengineconfig boolean false\n"
                "gridengine-exec shared/gridengineconfig boolean false\n"
            ),
        )
        _chroot(rootfs, "apt-get", "update", "-qq")
        _chroot(rootfs, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *SGE_PACKAGES, *SLURM_PACKAGES)
        # The test-only FUSE NFS client behind /sbin/mount.nfs (the nfs-common one diverted).
        wheels = _download_wheels()
        target = rootfs / "opt/elb-mountnfs"
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-index",
                "--target",
                str(target),
                *map(str, wheels),
            ],
            timeout=600,
        )
        shutil.copyfile(_mount_nfs_source(), target / "mount_nfs.py")
        _chroot(
            rootfs,
            "dpkg-divert",
            "--local",
            "--rename",
            "--divert",
            "/sbin/mount.nfs.distrib",
            "--add",
            "/sbin/mount.nfs",
        )
        _chroot(
            rootfs,
            "dpkg-divert",
            "--local",
            "--rename",
            "--divert",
            "/sbin/umount.nfs.distrib",
            "--add",
            "/sbin/umount.nfs",
        )
        _write_exec(rootfs / "sbin/mount.nfs", MOUNT_WRAPPER)
        _write_exec(rootfs / "sbin/umount.nfs", UMOUNT_WRAPPER)
        _write_exec(rootfs / "usr/local/sbin/elb-node-init", INIT_SCRIPT)
        (rootfs / "etc/hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
        (rootfs / "etc/resolv.conf").write_text("")
        for key in (rootfs / "etc/ssh").glob("ssh_host_*"):
            key.unlink()
        _chroot(rootfs, "apt-get", "clean")
        (rootfs / "usr/sbin/policy-rc.d").unlink()
    finally:
        _unmount_below(rootfs)
    partial = tarball.with_suffix(".partial")
    run(["tar", "--numeric-owner", "--xattrs", "-C", str(rootfs), "-cf", str(partial), "."], timeout=900)
    partial.rename(tarball)
    for old in C.IMAGE_DIR.glob("elb-node-*.tar"):
        if old != tarball:
            old.unlink()
    shutil.rmtree(rootfs)


def _write_exec(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def _unmount_below(root: Path) -> None:
    """Unmount anything debootstrap or chroot left mounted below ``root`` (proc, sys...)."""
    if not root.exists():
        return
    prefix = str(root.resolve()) + "/"
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines() if len(line.split()) > 1]
    for m in sorted((m for m in mounts if m.startswith(prefix)), reverse=True):
        run(["umount", "-l", m], check=False, timeout=30)


if __name__ == "__main__":  # pragma: no cover - manual use
    logging.basicConfig(level=logging.INFO)
    try:
        ensure_image(rebuild="--rebuild" in sys.argv)
    except TestClusterError as e:
        print(e, file=sys.stderr)
        sys.exit(1)
