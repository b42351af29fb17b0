"""Fixed conventions of the test cluster (shared with the roles, playbooks and tests)."""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR = Path("/var/lib/elb-testcluster")
SSH_DIR = STATE_DIR / "ssh"
SSH_KEY = SSH_DIR / "id_ed25519"
SSH_PUBKEY = SSH_DIR / "id_ed25519.pub"
HOST_KEYS = STATE_DIR / "host-keys"  # the nodes' SSH host keys (elb.provision.hostkeys)
LOG_DIR = STATE_DIR / "log"
RUN_DIR = STATE_DIR / "run"
UTS_NS = RUN_DIR / "uts"  # bind-mounted UTS namespace of the master's daemons
IMAGE_DIR = STATE_DIR / "image"
WHEEL_DIR = STATE_DIR / "wheels"

BRIDGE = "elb0"
SUBNET = "10.77.0.0/24"
PREFIX_LEN = 24
MASTER_IP = "10.77.0.1"
MASTER_NAME = "master"
KEEPER_VETH = "elb0keep"  # an extra veth on the bridge so netavark never deletes it
NETWORK = "elb"  # podman network on the bridge
IMAGE = "localhost/elb-node:latest"
# The label of the test cluster's nodes (elb's cluster name). A lane of the test session sets its
# own, so that lanes side by side on the one cluster do not take each other's nodes (tests/lanes.py).
CLUSTER_NAME = os.environ.get("ELB_TESTCLUSTER_NAME", "elb-test")

SGE_ROOT = Path("/var/lib/gridengine")
SGE_CELL = "default"
SGE_SPOOL = Path("/var/spool/gridengine")
SGE_QMASTER_PORT = 6444
SGE_EXECD_PORT = 6445
SGEADMIN_ID = 390
QUEUE = "all.q"
HOSTGROUP = "@allhosts"

CLUSTER_USER = "sgeuser"
CLUSTER_UID = 2000

DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_SUITE = "bookworm"

SGE_ENV = {
    "SGE_ROOT": str(SGE_ROOT),
    "SGE_CELL": SGE_CELL,
    "SGE_QMASTER_PORT": str(SGE_QMASTER_PORT),
    "SGE_EXECD_PORT": str(SGE_EXECD_PORT),
}

LABEL_PREFIX = ""  # podman labels carry the elb tag keys unchanged
