"""Fixtures for the EC2 tests: one moto server per session, reset before each test.

moto's server (``ThreadedMotoServer``) stands in for EC2 because EC2 cannot be reached from
here. Fake credentials are put in the environment so nothing can reach real AWS.
"""

from __future__ import annotations

import logging
import os
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer

REGION = "us-east-1"
CLUSTER = "elb"


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def aws_env(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Reset moto and point boto3 (and subprocesses) at it with fake credentials."""
    req = urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST")
    # A reset rebuilds every backend moto has set up: it took over 10 s on this 2-core machine
    # with both cores busy and the tests at a lower priority (as scripts/test runs them).
    with urllib.request.urlopen(req, timeout=120) as resp:  # local moto server only
        assert resp.status == 200
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return moto_url


@pytest.fixture
def ec2(aws_env: str) -> Any:
    """A plain boto3 client on moto, for arranging and checking (not the one under test)."""
    return boto3.client("ec2", region_name=REGION, endpoint_url=aws_env)


_AMI: list[str] = []


@pytest.fixture
def ami(ec2: Any) -> str:
    """One of moto's built-in AMIs (the same after every reset, so looked up once)."""
    if not _AMI:
        images = ec2.describe_images(Owners=["amazon"])["Images"]
        _AMI.append(next(i["ImageId"] for i in images if i.get("RootDeviceName")))
    return _AMI[0]


@pytest.fixture
def subnets(ec2: Any) -> list[str]:
    subs = sorted(ec2.describe_subnets()["Subnets"], key=lambda s: s["AvailabilityZone"])
    return [s["SubnetId"] for s in subs]


def tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def make_instance(ec2: Any, ami: str, tags: dict[str, str], **kwargs: Any) -> str:
    """Start an instance directly in moto (a master, a foreign or admin-made worker)."""
    kwargs.setdefault("InstanceType", "t3.micro")
    resp = ec2.run_instances(
        ImageId=ami,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tag_list(tags)}],
        **kwargs,
    )
    return str(resp["Instances"][0]["InstanceId"])


def state_of(ec2: Any, instance_id: str) -> str:
    res = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    return str(res[0]["Instances"][0]["State"]["Name"])


def all_instances(ec2: Any) -> list[dict[str, Any]]:
    return [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]


@dataclass
class FakeClock:
    """Time under the test's control: ``sleep`` advances ``now`` instead of waiting."""

    now: float = 1_800_000_000.0
    sleeps: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def client_error(code: str, message: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


Fault = Callable[[dict[str, Any]], "Exception | None"]


class FaultyClient:
    """An error-injecting wrapper around a real boto3 EC2 client on moto.

    Every call goes to moto unless a fault registered for that operation fires first. It is
    used only for what moto cannot produce: capacity, permission and transport errors, an
    instance stuck in ``pending``, and EC2's ClientToken idempotency (moto ignores tokens).
    """

    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._before: dict[str, list[Fault]] = {}
        self._after: dict[str, list[Callable[[dict[str, Any], Any], Any]]] = {}
        self._pages: dict[str, list[Callable[[dict[str, Any], Any], Any]]] = {}

    def fail(self, operation: str, fault: Fault) -> None:
        """Before calling moto, ``fault(kwargs)``; an exception it returns is raised instead."""
        self._before.setdefault(operation, []).append(fault)

    def rewrite(self, operation: str, fn: Callable[[dict[str, Any], Any], Any]) -> None:
        """After moto answered, ``fn(kwargs, response)`` may change (or raise on) the answer."""
        self._after.setdefault(operation, []).append(fn)

    def rewrite_pages(self, operation: str, fn: Callable[[dict[str, Any], Any], Any]) -> None:
        """As ``rewrite``, for each page of ``get_paginator(operation)`` (the calls ``rewrite``
        changes are the direct ones only)."""
        self._pages.setdefault(operation, []).append(fn)

    def get_paginator(self, operation: str) -> Any:
        real = self.real.get_paginator(operation)
        fns = self._pages.get(operation, [])

        class Paginator:
            def paginate(self, **kwargs: Any) -> Any:
                for page in real.paginate(**kwargs):
                    out = page
                    for fn in fns:
                        out = fn(kwargs, out)
                    yield out

        return Paginator()

    def calls_of(self, operation: str) -> list[dict[str, Any]]:
        return [kw for op, kw in self.calls if op == operation]

    def __getattr__(self, operation: str) -> Any:
        target = getattr(self.real, operation)
        if operation in ("meta", "exceptions"):
            return target

        def call(**kwargs: Any) -> Any:
            self.calls.append((operation, kwargs))
            for fault in self._before.get(operation, []):
                err = fault(kwargs)
                if err is not None:
                    raise err
            resp = target(**kwargs)
            for fn in self._after.get(operation, []):
                resp = fn(kwargs, resp)
            return resp

        return call
