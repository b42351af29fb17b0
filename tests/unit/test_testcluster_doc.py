"""docs/testcluster.md's config for trying the wheel's elb against the test cluster names the
test cluster as elbdev.testcluster has it: its name, master, SSH key, network, image and Grid
Engine, and loads."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from elb.clouds.local import local_settings
from elb.core.config import parse_config
from elb.schedulers.sge.config import sge_settings
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
    assert (local_settings(cfg).network, local_settings(cfg).image) == (C.NETWORK, C.IMAGE)
    assert (sge_settings(cfg).root, sge_settings(cfg).cell, sge_settings(cfg).queue, sge_settings(cfg).hostgroup) == (
        C.SGE_ROOT,
        C.SGE_CELL,
        C.QUEUE,
        C.HOSTGROUP,
    )
    assert cfg.cluster.user == C.CLUSTER_USER
    assert str(C.UTS_NS) in section and all(f"{k}={v}" in section for k, v in C.SGE_ENV.items())
