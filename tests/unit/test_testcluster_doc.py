"""docs/testcluster.md's config for trying the wheel's elb against the test cluster names the
test cluster as elbdev.testcluster has it: its name, master, SSH key, network, image and Grid
Engine, and loads."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from elb.core.config import parse_config
from elbdev.testcluster import constants as C

DOC = Path(__file__).resolve().parents[2] / "docs" / "testcluster.md"


def test_the_documented_config_is_the_test_clusters() -> None:
    text = DOC.read_text()
    section = text.split("## Trying the wheel's elb against the test cluster", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)
    cfg = parse_config(yaml.safe_load(block))
    assert cfg.cloud.provider == "local"
    assert (cfg.cluster.name, cfg.cluster.master) == (C.CLUSTER_NAME, C.MASTER_NAME)
    assert cfg.provision.ssh_private_key == C.SSH_KEY
    assert (cfg.cloud.local.network, cfg.cloud.local.image) == (C.NETWORK, C.IMAGE)
    assert (cfg.sge.root, cfg.sge.cell, cfg.sge.queue, cfg.sge.hostgroup) == (
        C.SGE_ROOT,
        C.SGE_CELL,
        C.QUEUE,
        C.HOSTGROUP,
    )
    assert cfg.cluster.user == C.CLUSTER_USER
    assert str(C.UTS_NS) in section and all(f"{k}={v}" in section for k, v in C.SGE_ENV.items())
