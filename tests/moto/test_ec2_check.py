"""``elb ec2-check`` (elb.clouds.ec2.cli) against moto: dry runs start and stop nothing.

The only stand-in is the injected UnauthorizedOperation (moto does not enforce IAM policies).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from elb.clouds.ec2.cloud import Ec2Cloud
from elb.clouds.ec2.preflight import preflight

from .conftest import CLUSTER, REGION, FaultyClient, all_instances, client_error, state_of

pytestmark = pytest.mark.moto


def write_config(tmp_path: Path, aws_env: str, **ec2: object) -> Path:
    lines = [
        f"cluster:\n  name: {CLUSTER}\ncloud:\n  provider: ec2\n  ec2:\n    region: {REGION}",
        f"    endpoint_url: {aws_env}",
    ]
    lines += [f"    {k}: {v}" for k, v in ec2.items()]
    # Never elb's own directories (the default /var/lib/elb/ansible holds the nodes' host keys).
    lines += [f"state_dir: {tmp_path / 'state'}", f"provision:\n  private_data_dir: {tmp_path / 'ansible'}"]
    path = tmp_path / "elb.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


def check(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "elb.clouds.ec2.cli", "--config", str(config)],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_all_good_starts_and_stops_nothing(ec2: Any, ami: str, aws_env: str, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, aws_env, ami=ami, instance_types="[c5.large]")
    from elb.core.config import load_config

    # Launched as the daemon launches it, with its group's tag (a worker without one adds its check).
    [worker] = Ec2Cloud.from_config(load_config(cfg)).launch(["node001"], {"node001": "default"}).launched
    proc = check(cfg)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert all(ln.startswith("ok") for ln in lines) and len(lines) == 5  # no warm pool: no stop, no start
    assert "1 elb workers" in lines[0] and "c5.large" in lines[1]
    assert "launch a worker" in lines[3] and "allowed" in lines[3]
    assert worker.instance_id in lines[4] and "allowed" in lines[4]
    with cfg.open("a") as f:
        f.write("policy:\n  warm_pool: {max_nodes: 1}\n")
    proc = check(cfg)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(lines) == 7, proc.stdout + proc.stderr
    assert "stop a worker, for a warm pool" in lines[5] and "start a worker" in lines[6]
    assert len(all_instances(ec2)) == 1
    assert state_of(ec2, worker.instance_id) == "running"


def test_missing_settings_fail_with_the_key(ec2: Any, aws_env: str, tmp_path: Path) -> None:
    proc = check(write_config(tmp_path, aws_env, instance_types="[c5.large]"))
    assert proc.returncode == 1
    assert "FAIL launch settings" in proc.stdout and "cloud.ec2.ami" in proc.stdout


def test_bad_config_is_an_error(tmp_path: Path, aws_env: str) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("cloud:\n  ec2:\n    instance_type: c5.large\n")
    proc = check(bad)
    assert proc.returncode == 3 and "instance_type" in proc.stderr  # a config error


def test_denied_launch_names_the_permission(ec2: Any, ami: str, aws_env: str) -> None:
    from elb.clouds.ec2.cloud import make_client
    from elb.clouds.ec2.config import Ec2Config

    config = Ec2Config(region=REGION, endpoint_url=aws_env, ami=ami, instance_types=["c5.large"])
    client = FaultyClient(make_client(config))
    msg = "User: arn:aws:sts::1:assumed-role/elb/i-1 is not authorized to perform: iam:PassRole on resource: x"
    client.fail("run_instances", lambda kw: client_error("UnauthorizedOperation", msg, "RunInstances"))
    checks = preflight(Ec2Cloud(config, CLUSTER, client=client), warm_pool=True)  # type: ignore[arg-type]
    launch = next(c for c in checks if "RunInstances" in c.what)
    assert not launch.ok and "iam:PassRole" in launch.detail
    assert [kw.get("DryRun") for kw in client.calls_of("run_instances")] == [True]
    assert all_instances(ec2) == []


def test_registers_as_an_elb_subcommand() -> None:
    import argparse

    from elb.clouds.ec2 import cli as ec2_cli

    parser = argparse.ArgumentParser(prog="elb")
    ec2_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["ec2-check", "--config", "/x/elb.yml"])
    assert args.func is ec2_cli.cmd_ec2_check and str(args.config) == "/x/elb.yml"


def test_json_for_scripts(ec2: Any, aws_env: str, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, aws_env, instance_types="[c5.large]")
    proc = subprocess.run(
        [sys.executable, "-m", "elb", "ec2-check", "--json", "-c", str(cfg)],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["failed"] >= 1
    assert any(c["what"] == "launch settings" and not c["ok"] and "cloud.ec2.ami" in c["detail"] for c in doc["checks"])
