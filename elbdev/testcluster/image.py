"""The node image: a minimal Debian bookworm with the node's packages, made by mmdebstrap in one
pass, finished here (the FUSE NFS client, the init script), then ``podman import``.

Built once and cached, keyed by content: the image carries a label with a hash of everything
that goes into it (this module, which holds the package lists, the scripts and the steps; the
FUSE NFS client's source; the constants it uses), so a change to any of them rebuilds it and an
unchanged recipe is reused. Kept under ``/var/lib/elb-testcluster/image``: the root filesystem
tarball, so that an image removed from podman is re-imported without building again, and the
.deb files of the last build, which the next build reuses where their versions still match
(apt downloads only what changed). A build holds ``image.lock`` there: a second caller (the
background build of ``scripts/test`` and the test session's ``up``) waits for it, then finds
the image built.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from elbdev.testcluster import constants as C
from elbdev.testcluster._run import TestClusterError, run

log = logging.getLogger("elbdev.testcluster")

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
# (mmdebstrap's policy-rc.d while it installs); Debian's munge package makes a key of its own,
# which roles/munge replaces.
SLURM_PACKAGES = ("slurmd", "slurm-client", "munge")
WHEELS = ("nfs-rs==0.8.7", "mfusepy==3.1.1")
# What no test reads, kept out of the image by dpkg: manuals, documentation (the copyright
# files stay) and translations.
PATH_EXCLUDES = ("/usr/share/man/*", "/usr/share/doc/*", "/usr/share/info/*", "/usr/share/locale/*")
PATH_INCLUDES = ("/usr/share/doc/*/copyright",)

APT_SOURCES = (
    f"deb {C.DEBIAN_MIRROR} {C.DEBIAN_SUITE} main",
    f"deb {C.DEBIAN_MIRROR} {C.DEBIAN_SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {C.DEBIAN_SUITE}-security main",
)

# Run by mmdebstrap with the root filesystem as $1, once the essential packages are in and
# before the others: the SGE admin user must have the same uid/gid as on the master (the SGE
# root is shared), and Debian's gridengine must not configure a cell of its own.
ESSENTIAL_HOOK = f"""#!/bin/sh
set -e
groupadd --root "$1" --system --gid {C.SGEADMIN_ID} sgeadmin
useradd --root "$1" --system --uid {C.SGEADMIN_ID} --gid sgeadmin --no-create-home \\
    --home-dir {C.SGE_ROOT} --shell /bin/false sgeadmin
chroot "$1" debconf-set-selections <<'SEL'
gridengine-common shared/gridengineconfig boolean false
gridengine-common shared/gridenginecell string {C.SGE_CELL}
gridengine-common shared/gridenginemaster string {C.MASTER_NAME}
gridengine-client shared/gridengineconfig boolean false
gridengine-exec shared/gridengineconfig boolean false
SEL
"""

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
# Test-only NFS client for elb's test cluster (FUSE over nfs-rs); see elbdev/testcluster/mount_nfs.py.
exec /usr/bin/python3 /opt/elb-mountnfs/mount_nfs.py "$@"
"""

UMOUNT_WRAPPER = """#!/bin/sh
# Test-only: unmount a FUSE NFS mount made by /sbin/mount.nfs.
exec /usr/bin/fusermount3 -u "$1"
"""

DEB_DIR = C.IMAGE_DIR / "debs"
LOCK = C.IMAGE_DIR / "image.lock"


def _mount_nfs_source() -> Path:
    return Path(__file__).with_name("mount_nfs.py")


def recipe_hash() -> str:
    """A hash of what goes into the image: this module (package lists, scripts, steps), the NFS
    client, and the constants the steps use. The Debian packages' versions are the mirror's."""
    h = hashlib.sha256()
    for part in (
        Path(__file__).read_bytes(),
        _mount_nfs_source().read_bytes(),
        *(
            str(v).encode()
            for v in (C.DEBIAN_MIRROR, C.DEBIAN_SUITE, C.SGEADMIN_ID, C.SGE_ROOT, C.SGE_CELL, C.MASTER_NAME)
        ),
    ):
        h.update(hashlib.sha256(part).digest())
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


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """One build at a time: a second caller waits, then finds what the first built."""
    C.IMAGE_DIR.mkdir(parents=True, exist_ok=True)
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _tarball(recipe: str) -> Path:
    return C.IMAGE_DIR / f"elb-node-{recipe}.tar"


def ensure_root_tarball(*, rebuild: bool = False) -> Path:
    """The root filesystem tarball of the current recipe, built if missing. Needs no podman, so
    ``scripts/test`` and ``scripts/demo`` build it while the Debian packages (podman among them)
    install."""
    tarball = _tarball(recipe_hash())
    with _build_lock():
        if rebuild or not tarball.exists():
            _build_rootfs_tarball(tarball)
    return tarball


def ensure_image(image: str = C.IMAGE, *, rebuild: bool = False) -> bool:
    """Make sure ``image`` exists and matches the recipe. Returns True if anything was built."""
    want = recipe_hash()
    if not rebuild and image_recipe_label(image) == want:
        return False
    with _build_lock():
        if not rebuild and image_recipe_label(image) == want:  # built while we waited
            return False
        tarball = _tarball(want)
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


def _chroot(rootfs: Path, *argv: str, timeout: float = 120) -> None:
    run(["chroot", str(rootfs), *argv], timeout=timeout, env={"LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


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


def _mmdebstrap_argv(rootfs: Path, hook: Path) -> list[str]:
    return [
        "mmdebstrap",
        "--variant=minbase",
        "--mode=root",
        "--format=directory",
        "--include=" + ",".join((*BASE_PACKAGES, *SGE_PACKAGES, *SLURM_PACKAGES)),
        "--dpkgopt=force-unsafe-io",  # the build is thrown away if it fails: no fsync per file
        *(f"--dpkgopt=path-exclude={p}" for p in PATH_EXCLUDES),
        *(f"--dpkgopt=path-include={p}" for p in PATH_INCLUDES),
        # /usr merged by directory links, as debootstrap does (with usr-is-merged, not usrmerge and perl)
        "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
        f"--essential-hook={hook}",
        # The package lists stay (the roles' apt tasks read them, as on a real node); the .deb files
        # stay for _keep_debs; the ones seeded from the last build are not removed midway.
        "--skip=cleanup/apt/lists,cleanup/apt/cache,essential/unlink,check/empty",
        C.DEBIAN_SUITE,
        str(rootfs),
        *APT_SOURCES,
    ]


def _seed_debs(rootfs: Path) -> None:
    """The last build's .deb files into the new root's apt cache (hard links): apt takes a file
    whose version and checksum match instead of downloading it."""
    archives = rootfs / "var/cache/apt/archives"
    archives.mkdir(parents=True)
    for deb in DEB_DIR.glob("*.deb") if DEB_DIR.is_dir() else ():
        os.link(deb, archives / deb.name)


def _keep_debs(rootfs: Path) -> None:
    """This build's .deb files out of the root (so not in the image), kept for the next build."""
    archives = rootfs / "var/cache/apt/archives"
    debs = sorted(archives.glob("*.deb"))
    if not debs:
        return
    partial = DEB_DIR.with_name("debs.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    for deb in debs:
        deb.rename(partial / deb.name)
    shutil.rmtree(DEB_DIR, ignore_errors=True)
    partial.rename(DEB_DIR)


def _build_rootfs_tarball(tarball: Path) -> None:
    C.IMAGE_DIR.mkdir(parents=True, exist_ok=True)
    rootfs = C.IMAGE_DIR / "rootfs"
    _unmount_below(rootfs)
    if rootfs.exists():
        shutil.rmtree(rootfs)
    _seed_debs(rootfs)
    hook = C.IMAGE_DIR / "essential-hook"
    _write_exec(hook, ESSENTIAL_HOOK)
    log.info("building the node image's root (%s) in %s (about a minute on a quiet machine)", C.DEBIAN_SUITE, rootfs)
    try:
        run(_mmdebstrap_argv(rootfs, hook), timeout=1800)
        _keep_debs(rootfs)
        for cache in (rootfs / "var/cache/apt").glob("*.bin"):  # apt remakes them (apt-get clean's part)
            cache.unlink()
        for setup_file in ("etc/dpkg/dpkg.cfg.d/99mmdebstrap", "etc/apt/apt.conf.d/99mmdebstrap"):
            (rootfs / setup_file).unlink(missing_ok=True)
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
        for helper in ("mount.nfs", "umount.nfs"):
            _chroot(
                rootfs,
                "dpkg-divert",
                "--local",
                "--rename",
                "--divert",
                f"/sbin/{helper}.distrib",
                "--add",
                f"/sbin/{helper}",
            )
        _write_exec(rootfs / "sbin/mount.nfs", MOUNT_WRAPPER)
        _write_exec(rootfs / "sbin/umount.nfs", UMOUNT_WRAPPER)
        _write_exec(rootfs / "usr/local/sbin/elb-node-init", INIT_SCRIPT)
        (rootfs / "etc/hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
        (rootfs / "etc/resolv.conf").write_text("")
        for key in (rootfs / "etc/ssh").glob("ssh_host_*"):
            key.unlink()
    finally:
        _unmount_below(rootfs)
        hook.unlink(missing_ok=True)
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
    """Unmount anything a build left mounted below ``root`` (proc, sys...) if it was killed."""
    if not root.exists():
        return
    prefix = str(root.resolve()) + "/"
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines() if len(line.split()) > 1]
    for m in sorted((m for m in mounts if m.startswith(prefix)), reverse=True):
        run(["umount", "-l", m], check=False, timeout=30)


def main(argv: list[str]) -> int:
    """``python -m elbdev.testcluster.image [--rebuild] [--root-only]``: build the node image if its
    recipe changed (``--root-only``: only its root tarball, without podman)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    rebuild = "--rebuild" in argv
    try:
        if "--root-only" in argv:
            print(f"node image root: {ensure_root_tarball(rebuild=rebuild)}")
        else:
            built = ensure_image(rebuild=rebuild)
            print(f"node image {C.IMAGE}: {'built' if built else 'up to date'} (recipe {recipe_hash()})")
    except TestClusterError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover - manual use, scripts/test and scripts/demo
    sys.exit(main(sys.argv[1:]))
