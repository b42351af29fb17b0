"""The SSH host key an EC2 worker shows in its console output (pure).

cloud-init prints the node's host public keys to the console once it has made or installed them,
between ``-----BEGIN SSH HOST KEY KEYS-----`` and ``-----END SSH HOST KEY KEYS-----`` (some images
put a prefix such as ``ec2:`` before each line). Only root on the node writes to its console, and
EC2 keeps the output apart from the network: a key read there is the node's own. elb reads it
(``GetConsoleOutput``) for a worker launched from a launch template, whose user data elb cannot
add a key to (``elb.clouds.ec2.node_config``).
"""

from __future__ import annotations

import base64
import binascii
import re

from elb.provision.hostkeys import HostKeyError, public_key_line

BEGIN = "-----BEGIN SSH HOST KEY KEYS-----"
END = "-----END SSH HOST KEY KEYS-----"
_ED25519 = re.compile(r"\bssh-ed25519 [A-Za-z0-9+/]+={0,3}")


def decode_output(output: str) -> str:
    """``GetConsoleOutput``'s ``Output`` (base64) as text; text that is not base64 as it is."""
    try:
        return base64.b64decode(output, validate=True).decode("utf-8", errors="replace")
    except (binascii.Error, ValueError):
        return output


def host_key_in_console(text: str) -> str | None:
    """The ed25519 host key (``ssh-ed25519 AAAA...``) of the last complete key block of the
    console output, or None (not printed yet, or no ed25519 key in it)."""
    start = text.rfind(BEGIN)
    while start >= 0:
        end = text.find(END, start)
        if end >= 0:
            for match in _ED25519.finditer(text[start:end]):
                try:
                    return public_key_line(match.group(0))
                except HostKeyError:
                    continue
            return None
        start = text.rfind(BEGIN, 0, start)
    return None
