"""The host key an EC2 worker gets in its user data, against moto's EC2 server: the cloud-config
cloud-init installs, the admin's user data kept beside it, the same request (and token) when a
launch is sent again, the private key deleted once the node runs, the key forgotten when the node
goes, and nothing added to a launch template's user data."""

from __future__ import annotations

import base64
import email
import os
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
import yaml

from elb.clouds.ec2.launch_requests import Choice, run_arguments
from elb.clouds.ec2.user_data import MAX_BYTES, host_key_cloud_config, node_user_data
from elb.core.interfaces import CloudError, NodeBoot
from elb.provision.hostkeys import PRUNE_GRACE, HostKeys, generate

from .conftest import FakeClock, client_error
from .test_ec2_cloud import cloud_with, live
from .test_ec2_templates import template

pytestmark = pytest.mark.moto


def user_data_of(ec2: Any, instance_id: str) -> str:
    ud = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
    return base64.b64decode(ud["UserData"]["Value"]).decode()


def payload_text(part: Message) -> str:
    """A non-multipart MIME part's payload, decoded from its transfer encoding."""
    data = part.get_payload(decode=True)
    assert isinstance(data, bytes)
    return data.decode()


def cloud_config(text: str) -> dict[str, Any]:
    assert text.startswith("#cloud-config\n")
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


def test_a_worker_gets_the_host_key_elb_holds_for_it(ec2: Any, ami: str, aws_env: str, tmp_path: Path) -> None:
    cloud, _ = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    cloud.host_keys = store = HostKeys(tmp_path / "keys")
    [inst] = cloud.launch(["node001"]).launched
    data = cloud_config(user_data_of(ec2, inst.instance_id))
    assert data["ssh_deletekeys"] is True and data["ssh_genkeytypes"] == []
    public = store.public_key("node001")
    assert public is not None and data["ssh_keys"]["ed25519_public"] == public
    assert data["ssh_keys"]["ed25519_private"].startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    # It runs with the key: the master keeps the public key only.
    assert store.private_key_file("node001") is None
    assert (tmp_path / "keys" / "node001.known").read_text() == f"node001 {public}\n"


def test_the_admins_user_data_runs_beside_it(ec2: Any, ami: str, aws_env: str, tmp_path: Path) -> None:
    script = "#!/bin/sh\necho elb\n"
    cloud, _ = cloud_with(aws_env, ami=ami, instance_types=["t3.large"], user_data=script)
    cloud.host_keys = store = HostKeys(tmp_path / "keys")
    [inst] = cloud.launch(["node001"]).launched
    archive = email.message_from_string(user_data_of(ec2, inst.instance_id))
    assert archive.get_content_type() == "multipart/mixed"
    parts = [p for p in archive.walk() if not p.is_multipart()]
    assert [p.get_content_type() for p in parts] == ["text/plain", "text/cloud-config"]
    assert payload_text(parts[0]) == script  # cloud-init runs it by its "#!"
    data = cloud_config(payload_text(parts[1]))
    assert data["ssh_keys"]["ed25519_public"] == store.public_key("node001")


def test_mime_user_data_gets_elbs_part_appended() -> None:
    key = generate()
    theirs = node_user_data("#!/bin/sh\ntrue\n", generate())  # any MIME archive of cloud-init's kind
    out = node_user_data(theirs, key)
    assert out is not None
    parts = [p for p in email.message_from_string(out).walk() if not p.is_multipart()]
    assert [p.get_content_type() for p in parts] == ["text/plain", "text/cloud-config", "text/cloud-config"]
    assert cloud_config(payload_text(parts[-1]))["ssh_keys"]["ed25519_public"] == key.public


def test_user_data_too_long_for_ec2_is_refused(ami: str, aws_env: str, tmp_path: Path) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"], user_data="#!/bin/sh\n" + "#" * MAX_BYTES)
    cloud.host_keys = HostKeys(tmp_path / "keys")
    with pytest.raises(CloudError, match="16384"):
        cloud.launch(["node001"])
    assert client.calls_of("run_instances") == []


def test_a_launch_sent_again_is_the_same_request(ami: str, aws_env: str, tmp_path: Path) -> None:
    """The key stays the same until the node runs: a request built again for the same node has
    the same user data and so the same ClientToken (EC2 answers it with the same instance)."""
    cloud, _ = cloud_with(aws_env, ami=ami, instance_types=["t3.large"], user_data="#!/bin/sh\n")
    cloud.host_keys = HostKeys(tmp_path / "keys")
    choice = Choice("t3.large", None)
    spec = cloud.launch_spec()
    first = run_arguments(cloud.node_config.with_node_config("node001", spec, adopting=False), choice, "elb", "node001")
    again = run_arguments(cloud.node_config.with_node_config("node001", spec, adopting=False), choice, "elb", "node001")
    assert first["UserData"] == again["UserData"] and first["ClientToken"] == again["ClientToken"]
    other = run_arguments(cloud.node_config.with_node_config("node002", spec, adopting=False), choice, "elb", "node002")
    assert other["UserData"] != first["UserData"]


def test_an_adopted_instance_keeps_its_key(ec2: Any, ami: str, aws_env: str, tmp_path: Path) -> None:
    cloud, client = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    cloud.host_keys = store = HostKeys(tmp_path / "keys")
    [inst] = cloud.launch(["node001"]).launched
    public = store.public_key("node001")
    # elb crashed before it journalled the launch: the next launch of the name adopts the instance.
    [again] = cloud.launch(["node001"]).launched
    assert again.instance_id == inst.instance_id
    assert len(client.calls_of("run_instances")) == 1
    assert store.public_key("node001") == public


def test_the_key_goes_with_the_node(ec2: Any, ami: str, aws_env: str, tmp_path: Path) -> None:
    cloud, _ = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    cloud.host_keys = store = HostKeys(tmp_path / "keys")
    a, b = cloud.launch(["node001", "node002"]).launched
    cloud.terminate([a.instance_id])
    assert not store.known("node001") and store.known("node002")
    # node002 terminated behind elb's back (a spot interruption, by hand): forgotten once the
    # cloud no longer lists it, after the grace a launch under way gets.
    ec2.terminate_instances(InstanceIds=[b.instance_id])
    cloud.list_workers()
    assert store.known("node002")
    old = (tmp_path / "keys" / "node002.known").stat().st_mtime - PRUNE_GRACE - 1
    os.utime(tmp_path / "keys" / "node002.known", (old, old))
    cloud.list_workers()
    assert not store.known("node002")


def test_a_launch_template_keeps_its_user_data(
    ec2: Any, ami: str, subnets: list[str], aws_env: str, tmp_path: Path
) -> None:
    template(ec2, ami)
    cloud, client = cloud_with(aws_env, launch_template={"name": "elb-workers"}, subnets=[subnets[0]])
    cloud.host_keys = HostKeys(tmp_path / "keys")
    cloud.launch(["node001"])
    (kw,) = client.calls_of("run_instances")
    assert "UserData" not in kw


def test_the_cloud_config_holds_one_key_pair() -> None:
    key = generate()
    data = cloud_config(host_key_cloud_config(key))
    assert data == {
        "ssh_deletekeys": True,
        "ssh_genkeytypes": [],
        "ssh_keys": {"ed25519_private": key.private, "ed25519_public": key.public},
    }


# --------------------------------------------------------------------------- launch templates


def console(*lines: str) -> str:
    return base64.b64encode("".join(f"{line}\n" for line in lines).encode()).decode()


def test_a_template_nodes_key_is_read_from_its_console(
    ec2: Any, ami: str, subnets: list[str], aws_env: str, tmp_path: Path
) -> None:
    """cloud-init prints the node's keys on its console some time after it runs (moto's console
    holds none: the answers are rewritten, the first two without the keys yet)."""
    template(ec2, ami)
    key = generate()
    clock = FakeClock()
    cloud, client = cloud_with(aws_env, clock, launch_template={"name": "elb-workers"}, subnets=[subnets[0]])
    cloud.host_keys = store = HostKeys(tmp_path / "keys")
    answers = iter(
        [
            console("[    3.1] booting"),
            console("[    3.1] booting", "ec2: -----BEGIN SSH HOST KEY FINGERPRINTS-----"),
        ]
    )
    block = console(
        "ec2: -----BEGIN SSH HOST KEY KEYS-----",
        "ec2: ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTY= root@node",
        f"ec2: {key.public} root@node",
        "ec2: -----END SSH HOST KEY KEYS-----",
    )
    client.rewrite("get_console_output", lambda kw, resp: {**resp, "Output": next(answers, block)})
    result = cloud.launch(["node001"])
    assert result.failed == {} and [i.name for i in result.launched] == ["node001"]
    assert store.public_key("node001") == key.public
    calls = client.calls_of("get_console_output")
    assert len(calls) == 3 and all(c == {"InstanceId": result.launched[0].instance_id, "Latest": True} for c in calls)
    assert "UserData" not in client.calls_of("run_instances")[0]


def test_a_template_node_whose_key_never_shows_is_terminated(
    ec2: Any, ami: str, subnets: list[str], aws_env: str, tmp_path: Path
) -> None:
    template(ec2, ami)
    clock = FakeClock()
    cloud, client = cloud_with(aws_env, clock, launch_template={"name": "elb-workers"}, subnets=[subnets[0]])
    cloud.host_keys = store = HostKeys(tmp_path / "keys")
    client.rewrite("get_console_output", lambda kw, resp: {**resp, "Output": console("no keys printed")})
    result = cloud.launch(["node001"])
    assert result.launched == ()
    assert "its SSH host key did not show in its console output within 600s" in result.failed["node001"]
    assert not store.known("node001")
    assert [i["State"]["Name"] for i in live(ec2)] == []  # terminated


def test_a_console_elb_may_not_read_fails_the_node_with_why(
    ec2: Any, ami: str, subnets: list[str], aws_env: str, tmp_path: Path
) -> None:
    template(ec2, ami)
    cloud, client = cloud_with(aws_env, launch_template={"name": "elb-workers"}, subnets=[subnets[0]])
    cloud.host_keys = HostKeys(tmp_path / "keys")
    denied = client_error("UnauthorizedOperation", "not authorized", "GetConsoleOutput")
    client.fail("get_console_output", lambda kw: denied)
    result = cloud.launch(["node001"])
    assert result.launched == ()
    assert "cannot be read from its console output" in result.failed["node001"]
    assert "ec2:GetConsoleOutput" in result.failed["node001"]
    assert live(ec2) == []


def test_an_older_instance_gives_its_buffered_output(
    ec2: Any, ami: str, subnets: list[str], aws_env: str, tmp_path: Path
) -> None:
    """Latest is for Nitro instances only: refused, elb reads the buffered output instead."""
    template(ec2, ami)
    key = generate()
    cloud, client = cloud_with(aws_env, launch_template={"name": "elb-workers"}, subnets=[subnets[0]])
    cloud.host_keys = store = HostKeys(tmp_path / "keys")
    unsupported = client_error("UnsupportedOperation", "Latest is only for Nitro", "GetConsoleOutput")
    client.fail("get_console_output", lambda kw: unsupported if kw.get("Latest") else None)
    block = console("-----BEGIN SSH HOST KEY KEYS-----", key.public, "-----END SSH HOST KEY KEYS-----")
    client.rewrite("get_console_output", lambda kw, resp: {**resp, "Output": block})
    result = cloud.launch(["node001"])
    assert result.failed == {}
    assert store.public_key("node001") == key.public
    assert [c.get("Latest") for c in client.calls_of("get_console_output")] == [True, None]


# --------------------------------------------------------------------------- a node's boot


BOOT = NodeBoot(files={"/etc/elb/boot-inventory.yml": "all: {}\n"}, argv=("/opt/elb/bin/ansible-playbook", "x.yml"))


def test_a_node_that_configures_itself_gets_its_boot_in_its_user_data(
    ec2: Any, ami: str, aws_env: str, tmp_path: Path
) -> None:
    """cloud-init writes the boot document (root's, 0600) and runs the boot as an argument list
    (no shell reads the data), its output in the boot's log; the host key beside it."""
    cloud, _ = cloud_with(aws_env, ami=ami, instance_types=["t3.large"])
    cloud.host_keys = HostKeys(tmp_path / "keys")
    [inst] = cloud.launch(["node001"], boot={"node001": BOOT}).launched
    data = cloud_config(user_data_of(ec2, inst.instance_id))
    assert data["write_files"] == [
        {"path": "/etc/elb/boot-inventory.yml", "content": "all: {}\n", "owner": "root:root", "permissions": "0600"}
    ]
    [cmd] = data["runcmd"]
    assert cmd[:5] == ["/bin/sh", "-c", 'log=$1; shift; exec "$@" > "$log" 2>&1', "sh", "/var/log/elb-boot.log"]
    assert cmd[5:] == ["/opt/elb/bin/ansible-playbook", "x.yml"]
    assert "ed25519_public" in data["ssh_keys"]


def test_a_boot_beside_the_admins_user_data(ec2: Any, ami: str, aws_env: str) -> None:
    cloud, _ = cloud_with(aws_env, ami=ami, instance_types=["t3.large"], user_data="#!/bin/sh\necho elb\n")
    [inst] = cloud.launch(["node001"], boot={"node001": BOOT}).launched
    parts = [p for p in email.message_from_string(user_data_of(ec2, inst.instance_id)).walk() if not p.is_multipart()]
    assert parts[0].get_payload() == "#!/bin/sh\necho elb\n"
    assert cloud_config(str(parts[1].get_payload()))["runcmd"][0][5:] == list(BOOT.argv)


def test_a_launch_template_node_gets_its_boot_after_the_templates_user_data(
    ec2: Any, ami: str, subnets: list[str], aws_env: str
) -> None:
    """RunInstances with the template and user data of the node's own, which replaces the
    template's: the template version's user data first, then elb's cloud-config with the boot."""
    site = "#!/bin/sh\necho site\n"
    ec2.create_launch_template(
        LaunchTemplateName="elb-workers",
        LaunchTemplateData={
            "ImageId": ami,
            "InstanceType": "t3.large",
            "MetadataOptions": {"HttpTokens": "required"},
            "UserData": base64.b64encode(site.encode()).decode(),
        },
    )
    cloud, client = cloud_with(aws_env, launch_template={"name": "elb-workers"}, subnets=[subnets[0]])
    [inst] = cloud.launch(["node001"], boot={"node001": BOOT}).launched
    (kw,) = client.calls_of("run_instances")
    assert kw["LaunchTemplate"]["LaunchTemplateName"] == "elb-workers" and "ImageId" not in kw
    parts = [p for p in email.message_from_string(user_data_of(ec2, inst.instance_id)).walk() if not p.is_multipart()]
    assert payload_text(parts[0]) == site
    assert cloud_config(payload_text(parts[1]))["runcmd"][0][5:] == list(BOOT.argv)


def test_a_launch_template_whose_user_data_is_not_text_cannot_take_a_boot(
    ec2: Any, ami: str, subnets: list[str], aws_env: str
) -> None:
    ec2.create_launch_template(
        LaunchTemplateName="elb-workers",
        LaunchTemplateData={
            "ImageId": ami,
            "InstanceType": "t3.large",
            "UserData": base64.b64encode(b"\x1f\x8b\x08\xff").decode(),
        },
    )
    cloud, client = cloud_with(aws_env, launch_template={"name": "elb-workers"}, subnets=[subnets[0]])
    with pytest.raises(CloudError, match="not text"):
        cloud.launch(["node001"], boot={"node001": BOOT})
    assert client.calls_of("run_instances") == []
