"""The SSH host keys elb gives its workers before they boot, and checks at every SSH contact.

A worker's host key is made on the master before its launch (``HostKeys.issue``): an ed25519
pair, made in memory with the ``cryptography`` package (a dependency of ansible-core already;
no ``ssh-keygen`` process, no key material in a temporary file). The cloud hands the private key
to the instance at launch (EC2: in the user data, for cloud-init; the local cloud: a read-only
file over the node's host key) and the store keeps the public key as a one-line known_hosts
file per node, ``<directory>/<name>.known``: ``<name> ssh-ed25519 AAAA...``. The provisioner
points SSH at that file with ``HostKeyAlias=<name>`` (``elb.provision.inventory``), so a key
is bound to the node's name, not to an address that a cloud gives to the next instance.

Files, in a directory of mode 0700:

- ``<name>.known``: the node's public key, as a known_hosts line. Kept while the node lives;
  deleted when it is terminated (``forget``).
- ``<name>.key``: the private key, mode 0600, only while it may still be needed for the
  launch: the EC2 cloud deletes it once the instance runs (``settle``; a retried launch request
  must carry the same user data, so it stays until then); the local cloud keeps it for the
  container's life, because podman reads a mounted file again at every start.

Names are checked as host names (``check_host_name``): no path can be made from one.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from elb.provision.inventory import check_host_name

KEY_TYPE = "ssh-ed25519"
# Seconds the keys of a node the cloud does not list are kept: its launch may be under way (the
# key is made before the instance exists), or a failed launch may be sent again.
PRUNE_GRACE = 3600.0
KNOWN = ".known"
PRIVATE = ".key"


class HostKeyError(ValueError):
    """A key or name the store cannot take (malformed key line, bad name)."""


@dataclass(frozen=True, slots=True, repr=False)
class HostKey:
    """One node's host key pair: ``private`` in OpenSSH's PEM form, ``public`` as
    ``ssh-ed25519 AAAA...``. ``repr`` never shows the private key."""

    private: str
    public: str

    def __repr__(self) -> str:
        return f"HostKey(public={self.public!r})"


def generate() -> HostKey:
    """A new ed25519 host key pair."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 (only when launching)
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: PLC0415

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode("ascii")
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return HostKey(private=private, public=public.decode("ascii"))


def public_key_line(text: str) -> str:
    """``ssh-ed25519 AAAA...`` from a public key line (a comment dropped); HostKeyError if it is
    not one ed25519 public key in OpenSSH's form."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey  # noqa: PLC0415
    from cryptography.hazmat.primitives.serialization import load_ssh_public_key  # noqa: PLC0415

    fields = text.strip().split()
    if len(fields) < 2 or fields[0] != KEY_TYPE:
        raise HostKeyError(f"not an {KEY_TYPE} public key: {text.strip()[:60]!r}")
    line = f"{fields[0]} {fields[1]}"
    try:
        loaded = load_ssh_public_key(line.encode("ascii"))
    except (ValueError, UnicodeEncodeError) as err:
        raise HostKeyError(f"not an {KEY_TYPE} public key: {err}") from None
    if not isinstance(loaded, Ed25519PublicKey):
        raise HostKeyError(f"not an {KEY_TYPE} public key")
    return line


class HostKeys:
    """The host keys of one elb's nodes, in ``directory`` (made with mode 0700 on first write)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    # -- paths ------------------------------------------------------------------------------

    def known_hosts_file(self, name: str) -> Path:
        """The node's known_hosts file (it may not exist)."""
        return self.directory / (check_host_name(name, "node name") + KNOWN)

    def _private_file(self, name: str) -> Path:
        return self.directory / (check_host_name(name, "node name") + PRIVATE)

    # -- reading ----------------------------------------------------------------------------

    def public_key(self, name: str) -> str | None:
        """The node's public key (``ssh-ed25519 AAAA...``), or None when the store has none."""
        path = self.known_hosts_file(name)
        try:
            text = path.read_text(encoding="ascii")
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        except OSError as err:
            raise HostKeyError(f"cannot read {path}: {err.strerror or err}") from None
        for line in text.splitlines():
            fields = line.split()
            if len(fields) >= 3 and fields[0] == name and fields[1] == KEY_TYPE:
                return f"{fields[1]} {fields[2]}"
        return None

    def known(self, name: str) -> bool:
        return self.public_key(name) is not None

    def private_key_file(self, name: str) -> Path | None:
        """The file holding the node's private key, while the store keeps it."""
        path = self._private_file(name)
        return path if path.is_file() else None

    def names(self) -> set[str]:
        """The nodes the store holds a key of."""
        if not self.directory.is_dir():
            return set()
        return {p.name.removesuffix(KNOWN) for p in self.directory.glob(f"*{KNOWN}")} | {
            p.name.removesuffix(PRIVATE) for p in self.directory.glob(f"*{PRIVATE}")
        }

    # -- writing ----------------------------------------------------------------------------

    def issue(self, name: str) -> HostKey:
        """The host key a node called ``name`` is launched with: the pair the store still holds
        for it (a launch tried again must send the same user data), else a new one, stored."""
        private = self._private_file(name)
        public = self.public_key(name)
        if public is not None:
            try:
                return HostKey(private=private.read_text(encoding="ascii"), public=public)
            except FileNotFoundError:
                pass  # the node's earlier key was settled: this is another launch
        key = generate()
        self._write(private, key.private, 0o600)
        self._write(self.known_hosts_file(name), f"{name} {key.public}\n", 0o644)
        return key

    def record(self, name: str, public: str) -> None:
        """Keep ``public`` (an ed25519 public key line) as the node's key: one read from the node
        itself (its console output), not issued by elb."""
        line = public_key_line(public)
        self._write(self.known_hosts_file(name), f"{name} {line}\n", 0o644)

    def settle(self, name: str) -> None:
        """Delete the node's private key: its instance runs with it and elb needs it no more."""
        self._private_file(name).unlink(missing_ok=True)

    def forget(self, names: Iterable[str]) -> None:
        """Delete everything the store holds for these nodes (they are gone)."""
        for name in names:
            self._private_file(name).unlink(missing_ok=True)
            self.known_hosts_file(name).unlink(missing_ok=True)

    def prune(self, keep: Collection[str], now: float, grace: float = PRUNE_GRACE) -> list[str]:
        """Forget the nodes not in ``keep`` (the cloud's live and stopped workers) whose files are
        older than ``grace`` seconds (younger ones may belong to a launch under way); their names."""
        gone = []
        for name in sorted(self.names() - set(keep)):
            newest = 0.0
            for path in (self._private_file(name), self.known_hosts_file(name)):
                with contextlib.suppress(FileNotFoundError):
                    newest = max(newest, path.stat().st_mtime)
            if now - newest > grace:
                self.forget([name])
                gone.append(name)
        return gone

    def _write(self, path: Path, text: str, mode: int) -> None:
        """Replace ``path`` whole with ``text`` (created with ``mode``: never wider, not even
        for a moment), in the store's directory (made with mode 0700)."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(text)
            tmp.replace(path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
