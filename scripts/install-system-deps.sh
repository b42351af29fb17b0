#!/usr/bin/env bash
# Install (idempotently) every Debian package the elb test cluster needs.
# Safe to run again: apt-get only installs what is missing. Needs root.
#
#   scripts/install-system-deps.sh                every package
#   scripts/install-system-deps.sh --image-tools  only what makes the virtualenv (python3-venv)
#                                                 and builds the node image's root (mmdebstrap):
#                                                 scripts/test and scripts/demo build it while
#                                                 the others install
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "install-system-deps.sh: must run as root" >&2
    exit 1
fi

PACKAGES=(
    # master: Grid Engine, sshd, userspace NFS server; Slurm's controller and munge
    # (python -m elbdev testcluster slurm)
    gridengine-master gridengine-client
    slurmctld slurm-client munge
    openssh-server openssh-client
    nfs-ganesha nfs-ganesha-vfs rpcbind
    # nodes: rootful podman and the image build (elbdev/testcluster/image.py)
    podman runc netavark aardvark-dns catatonit fuse-overlayfs
    mmdebstrap
    # the virtualenv (scripts/bootstrap): Debian's python3 has no ensurepip without it
    python3-venv
    # plumbing
    iproute2 util-linux procps psmisc iptables
    # checks: promtool (alert rules), systemd-analyze (the unit's sandbox); the soak's load (stress-ng)
    prometheus systemd stress-ng
)
if [ "${1:-}" = "--image-tools" ]; then
    PACKAGES=(mmdebstrap python3-venv)
fi

export DEBIAN_FRONTEND=noninteractive
# Debian's gridengine must not configure a cell under the machine's hostname:
# `python -m elbdev testcluster up` makes the cell itself, under the hostname `master`.
debconf-set-selections <<'SEL'
gridengine-common gridengine-common/sgeroot string /var/lib/gridengine
gridengine-common gridengine-common/sgecell string default
gridengine-common shared/gridengineconfig boolean false
gridengine-common shared/gridenginemaster string master
gridengine-common shared/gridenginecell string default
gridengine-master shared/gridengineconfig boolean false
gridengine-client shared/gridengineconfig boolean false
SEL

# The SGE root's common directory is shared with the nodes over NFS: pin the SGE admin
# user's uid/gid so it is the same on the master and in the node image.
SGEADMIN_ID=390
if ! getent group sgeadmin >/dev/null; then
    groupadd --system --gid "$SGEADMIN_ID" sgeadmin
fi
if ! id sgeadmin >/dev/null 2>&1; then
    useradd --system --uid "$SGEADMIN_ID" --gid sgeadmin --no-create-home \
        --home-dir /var/lib/gridengine --shell /bin/false sgeadmin
fi

missing=()
for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        missing+=("$p")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-system-deps.sh: all ${#PACKAGES[@]} packages already installed"
    exit 0
fi

echo "install-system-deps.sh: installing ${missing[*]}"
# apt lists may be absent on a fresh machine (or stale): refresh once.
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
fi
