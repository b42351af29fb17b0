"""``elb validate``'s checks of the clouds: podman (the test cluster's local cloud) and EC2."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

from elb.core.checks import Check
from elb.core.config import Config
from elb.core.interfaces import CloudError


def local_checks(cfg: Config) -> Iterator[Check]:
    """podman answers and has the node image."""
    from elb.clouds.local import LocalCloud  # noqa: PLC0415

    cloud = LocalCloud(cfg.cloud.local, cfg.cluster.name, command_timeout=30)
    try:
        workers = cloud.list_workers()
    except CloudError as err:
        yield Check("cloud local (podman)", False, str(err), "install podman and run elb as root")
        return
    yield Check("cloud local (podman)", True, f"podman answers, {len(workers)} worker container(s)")
    image = cfg.cloud.local.image
    try:
        found = subprocess.run(["podman", "image", "exists", image], check=False, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        yield Check("node image", False, f"podman image exists {image}: {err}", "")
        return
    yield Check(
        "node image",
        found.returncode == 0,
        image if found.returncode == 0 else f"{image} is not in podman's store",
        "build it with python -m elbdev testcluster up, or set cloud.local.image",
    )


def ec2_checks(cfg: Config) -> Iterator[Check]:
    """What a launch needs of EC2 (``elb.clouds.ec2.cloud.preflight``)."""
    from elb.clouds.ec2.cloud import Ec2Cloud, preflight  # noqa: PLC0415 (boto3 only when asked)

    try:
        cloud = Ec2Cloud.from_config(cfg)
    except CloudError as err:
        yield Check("cloud ec2", False, str(err), "set cloud.ec2.region and AWS credentials (elb ec2-check)")
        return
    for c in preflight(cloud, warm_pool=cfg.has_warm_pool):
        yield Check(f"cloud ec2: {c.what}", c.ok, c.detail, "see elb ec2-check and docs/ec2.md's IAM policy")
