"""``elb validate``: what a first run needs, one line a check (ok or FAIL, and how to fix it).

Each check is a function of the config returning ``Check``; ``run_checks`` runs them in order.
Nothing is created: the state directory is probed with a temporary file only when it exists
(else the nearest existing parent is checked for write access and what is missing is said).
``offline`` skips the checks that need the network: SGE's qmaster and the cloud.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from elb import assets, factory, migrations
from elb.checks import Check
from elb.config import Config
from elb.journal import Journal, JournalError
from elb.provision.ansible import ProvisionError


def check_playbooks(cfg: Config) -> Iterator[Check]:
    problem = assets.playbook_dir_problem(cfg.provision.playbook_dir)
    where = assets.playbook_dir(cfg.provision.playbook_dir)
    if problem is not None:
        yield Check("playbooks", False, problem, "set provision.playbook_dir to a directory with the playbooks")
        return
    yield Check("playbooks", True, str(where))
    try:
        factory.make_provisioner(cfg)
    except ProvisionError as err:
        yield Check("provision settings", False, str(err), "fix the provision section")


def check_ssh_key(cfg: Config) -> Iterator[Check]:
    key = cfg.provision.ssh_private_key
    if key is None:
        yield Check("SSH key", True, "provision.ssh_private_key not set: ssh's own keys and agent are used")
        return
    try:
        with key.open("rb") as f:
            f.read(1)
    except OSError as err:
        why = err.strerror or type(err).__name__
        yield Check("SSH key", False, f"{key}: cannot be read: {why}", f"make {key} readable by the user elb runs as")
        return
    yield Check("SSH key", True, f"{key} is readable")


def check_scheduler(cfg: Config) -> Iterator[Check]:
    """The configured scheduler's own checks (its driver's)."""
    yield from factory.scheduler_checks(cfg)


def _probe(path: Path) -> str | None:
    """Why a file cannot be created in the directory ``path`` (None: it can); the file is deleted."""
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".elb-validate-"):
            return None
    except OSError as err:
        return err.strerror or type(err).__name__


def _dir_check(what: str, key: str, path: Path) -> Check:
    if path.is_dir():
        why = _probe(path)
        if why is not None:
            return Check(what, False, f"{path} is not writable: {why}", f"let the user elb runs as write to {path}")
        return Check(what, True, f"{path} is writable")
    parent = next((p for p in path.parents if p.is_dir()), Path("/"))
    why = _probe(parent)
    if why is None:
        return Check(what, True, f"{path} does not exist yet; elb creates it in {parent} (writable)")
    return Check(
        what,
        False,
        f"{path} does not exist and {parent} is not writable: {why}",
        f"create {path} for the user elb runs as, or set {key}",
    )


def check_state(cfg: Config) -> Iterator[Check]:
    yield _dir_check("state directory", "state_dir", cfg.state_dir)
    yield _dir_check("Ansible directory", "provision.private_data_dir", cfg.provision.private_data_dir)
    if cfg.journal_path.exists():
        try:
            Journal.read_only(cfg.journal_path).close()
        except migrations.JournalVersionError as err:
            yield Check("journal", False, str(err), "run the newer elb")
            return
        except JournalError as err:
            yield Check("journal", False, str(err), f"check the permissions of {cfg.journal_path}")
            return
        yield Check("journal", True, f"{cfg.journal_path} is readable")


def check_cloud(cfg: Config) -> Iterator[Check]:
    """The configured cloud's own checks (its adapter's)."""
    yield from factory.cloud_checks(cfg)


LOCAL_CHECKS: tuple[Callable[[Config], Iterator[Check]], ...] = (check_playbooks, check_ssh_key, check_state)
NETWORK_CHECKS: tuple[Callable[[Config], Iterator[Check]], ...] = (check_scheduler, check_cloud)


def run_checks(cfg: Config, *, offline: bool = False) -> Iterator[Check]:
    for check in LOCAL_CHECKS if offline else LOCAL_CHECKS + NETWORK_CHECKS:
        yield from check(cfg)
