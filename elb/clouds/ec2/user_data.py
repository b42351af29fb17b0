"""The user data of an EC2 worker: the admin's (``cloud.ec2.user_data``) with elb's cloud-config
for cloud-init: the node's SSH host key and, for a node that configures itself at boot
(``provision.mode: boot``), its boot (pure).

cloud-init's ``ssh`` module installs the host keys given as ``ssh_keys`` in cloud-config before
the node's sshd starts (cloud-init's units are ordered before it), deleting the image's keys
(``ssh_deletekeys``) and making no others (``ssh_genkeytypes: []``): the node answers SSH with
the ed25519 key elb made for it, and only with it.

A node's boot (``elb.core.interfaces.NodeBoot``) is cloud-init's ``write_files`` (its files,
root's, mode 0600) and one ``runcmd`` entry, the boot's ``command``: an argument list cloud-init
runs without a shell, which sends the output to the boot's log.

Without user data of the admin's, the user data is that cloud-config alone. With it, a MIME
multi-part archive, the admin's part first and elb's last: cloud-init runs a part by what it
starts with (``#!``, ``#cloud-config``, ``#include``... for a ``text/plain`` part), and merges
cloud-config parts in order, so that elb's ``ssh_keys`` win. User data that is a MIME archive
already gets elb's part appended. The boundary is a digest of the content: the same node's
request built again is the same request (its ``ClientToken`` is a digest of it).
"""

from __future__ import annotations

import email
import hashlib
from email.message import Message
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from email.policy import compat32

import yaml

from elb.core.interfaces import NodeBoot
from elb.provision.hostkeys import HostKey

MAX_BYTES = 16384  # EC2's limit on user data, before base64
_MIME_STARTS = ("content-type:", "mime-version:")


def host_key_cloud_config(key: HostKey) -> str:
    """The cloud-config that makes ``key`` the node's only SSH host key."""
    return node_cloud_config(key, None)


def node_cloud_config(key: HostKey | None, boot: NodeBoot | None) -> str:
    """elb's cloud-config of a node: ``key`` its only SSH host key, ``boot`` run at its first
    boot (either None: not given)."""
    body: dict[str, object] = {}
    if key is not None:
        body |= {
            "ssh_deletekeys": True,
            "ssh_genkeytypes": [],
            "ssh_keys": {"ed25519_private": key.private, "ed25519_public": key.public},
        }
    if boot is not None:
        body["write_files"] = [
            {"path": path, "content": text, "owner": "root:root", "permissions": "0600"}
            for path, text in sorted(boot.files.items())
        ]
        body["runcmd"] = [list(boot.command)]
    return "#cloud-config\n" + yaml.safe_dump(body, sort_keys=True, default_flow_style=False)


def node_user_data(user_data: str | None, key: HostKey | None, boot: NodeBoot | None = None) -> str | None:
    """``user_data`` (None: none) with elb's cloud-config of the node (``node_cloud_config``);
    ``user_data`` itself when there is nothing to add. Raises ValueError when the result
    exceeds EC2's 16 KiB."""
    if key is None and boot is None:
        return user_data
    ours = node_cloud_config(key, boot)
    out = ours if user_data is None or not user_data.strip() else _archive(user_data, ours)
    size = len(out.encode("utf-8"))
    if size > MAX_BYTES:
        raise ValueError(
            f"the user data with elb's cloud-config of the node is {size} bytes; EC2 takes {MAX_BYTES} "
            "(cloud.ec2.user_data is too long: fetch the rest from the script, e.g. with #include)"
        )
    return out


def _archive(user_data: str, ours: str) -> str:
    part = MIMEText(ours, "cloud-config", _charset(ours))
    part.add_header("Content-Disposition", 'attachment; filename="elb-node.cfg"')
    boundary = "==elb-" + hashlib.sha256((user_data + ours).encode("utf-8")).hexdigest()[:32] + "=="
    if user_data.lstrip().lower().startswith(_MIME_STARTS):
        found: Message = email.message_from_string(user_data.lstrip(), policy=compat32)
        if found.is_multipart():
            found.attach(part)
            return found.as_string()
        archive = MIMEMultipart(boundary=boundary)
        archive.attach(found)
    else:
        archive = MIMEMultipart(boundary=boundary)
        theirs = MIMEText(user_data, "plain", _charset(user_data))  # cloud-init runs it by how it starts
        theirs.add_header("Content-Disposition", 'attachment; filename="user-data"')
        archive.attach(theirs)
    archive.attach(part)
    return archive.as_string()


def _charset(text: str) -> str:
    """us-ascii (sent as it is) when it can be, else utf-8 (sent in base64, which cloud-init decodes)."""
    return "us-ascii" if text.isascii() else "utf-8"
