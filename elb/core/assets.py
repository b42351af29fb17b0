"""Where elb's shipped files are: the Ansible collection ``elb.cluster``, the systemd unit, the
IAM policy and the monitoring files (Prometheus alert rules, Grafana dashboard).

Installed from a wheel (``pip install .``), the collection is
``site-packages/ansible_collections/elb/cluster`` (a directory ansible-core scans for
collections, so its playbooks and roles resolve by name, ``elb.cluster.<name>``) and the
unit, the policy and the monitoring directory are in ``elb/_data``
(``site-packages/elb/_data/monitoring``); both are found with ``importlib.resources``. In a
checkout (editable install, tests, ``python -m elbdev testcluster``) they are the repository's own
``playbooks/``, ``roles/``, ``plugins/``, ``systemd/``, ``docs/`` and ``monitoring/`` beside
``elb/``: the repository's root is laid out as the collection. ``setup.py`` maps one onto the
other.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

COLLECTION_PACKAGE = "ansible_collections.elb.cluster"
_DATA_DIR = "_data"  # in the elb package: the unit, the IAM policy, the monitoring files
MONITORING = ("elb-alerts.yml", "elb-dashboard.json")  # in the monitoring directory
_CHECKOUT = Path(__file__).resolve().parents[2]  # the repository root, in a checkout


@dataclass(frozen=True, slots=True)
class Assets:
    """Paths of the shipped files. ``installed``: from the wheel, not a checkout."""

    collection: Path  # holds playbooks/, roles/, plugins/inventory/, inventory/, ansible.cfg
    unit: Path
    iam_policy: Path
    monitoring: Path  # holds MONITORING
    installed: bool

    @property
    def playbook_dir(self) -> Path:
        return self.collection / "playbooks"

    @property
    def roles_dir(self) -> Path:
        return self.collection / "roles"

    @property
    def inventory_plugins_dir(self) -> Path:
        return self.collection / "plugins" / "inventory"

    @property
    def collections_path(self) -> Path | None:
        """The directory holding ``ansible_collections/`` (None in a checkout: no such tree)."""
        return self.collection.parents[2] if self.installed else None


def _installed_file(package: str, *names: str) -> Path | None:
    """``names`` inside ``package`` on the filesystem, or None if the package or file is absent."""
    try:
        resource = importlib.resources.files(package)
        for name in names:
            resource = resource.joinpath(name)
    except (ModuleNotFoundError, TypeError, ValueError):
        return None
    path = Path(str(resource))
    return path if path.is_file() else None


def locate() -> Assets:
    """The shipped files of this elb: the wheel's copy if installed, else the checkout's."""
    galaxy = _installed_file(COLLECTION_PACKAGE, "galaxy.yml")
    unit = _installed_file("elb", _DATA_DIR, "elb.service")
    if galaxy is not None and unit is not None:
        iam = unit.with_name("iam-policy.json")
        return Assets(
            collection=galaxy.parent, unit=unit, iam_policy=iam, monitoring=unit.parent / "monitoring", installed=True
        )
    return Assets(
        collection=_CHECKOUT,
        unit=_CHECKOUT / "systemd" / "elb.service",
        iam_policy=_CHECKOUT / "docs" / "iam-policy.json",
        monitoring=_CHECKOUT / "monitoring",
        installed=False,
    )


def default_playbook_dir() -> Path:
    """The playbooks elb ships (``provision.playbook_dir`` when unset)."""
    return locate().playbook_dir


def playbook_dir(configured: Path | None) -> Path:
    """The playbook directory elb uses: ``provision.playbook_dir``, else the shipped one."""
    return (configured or default_playbook_dir()).resolve()


def playbook_dir_problem(configured: Path | None, needed: Sequence[str]) -> str | None:
    """Why elb cannot provision from this playbook directory (None: it can).

    ``configured`` is ``provision.playbook_dir`` (None: the shipped one); ``needed``: the
    playbooks elb runs from it (the scheduler's, ``elb.core.drivers.NodePlays.needed``). The
    message names the path looked at and, for the shipped directory, says how to repair the
    install.
    """
    where = configured if configured is not None else default_playbook_dir()
    setting = "provision.playbook_dir" if configured is not None else "the playbooks shipped with elb"
    if not where.is_dir():
        fix = "" if configured is not None else " (reinstall elb from its wheel, or set provision.playbook_dir)"
        return f"{setting}: {where} is not a directory{fix}"
    missing = [name for name in needed if not (where / name).is_file()]
    if missing:
        return f"{setting}: {where} has no {' and no '.join(missing)}"
    return None


def systemd_unit() -> Path:
    """The shipped systemd unit (``elb service`` writes it with this elb's path)."""
    return locate().unit
