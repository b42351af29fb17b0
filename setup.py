"""Build hook: the wheel carries the repository's Ansible content, systemd unit, IAM policy and
monitoring files.

The repository keeps ``playbooks/``, ``roles/``, ``plugins/`` and ``inventory/`` at its top
level, where ``ansible.cfg``, ansible-lint, molecule, the tests and ``python -m elbdev testcluster`` use them.
setuptools' package-data only takes files from inside a package's own directory, and
data-files are installed outside site-packages, where ``importlib.resources`` cannot find
them. So ``build_py`` copies them into the build tree, under the paths an installed elb reads
(``elb/core/assets.py``):

- ``ansible_collections/elb/cluster/``: the Ansible collection ``elb.cluster`` (``galaxy.yml``,
  the ``README.md`` it names, ``meta/``, ``playbooks/``, ``roles/``, ``plugins/``,
  ``inventory/``, ``ansible.cfg``, ``requirements.yml``, ``LICENSE``). It lands in
  site-packages, which ansible-core scans for collections: ``elb.cluster.sge_exec`` resolves
  with no configuration.
- ``elb/_data/``: ``elb.service``, ``iam-policy.json`` and ``monitoring/`` (the Prometheus
  alert rules and the Grafana dashboard; ``elb monitoring`` prints where they are).

The collection's ``galaxy.yml`` gets the distribution's version (pyproject.toml is the one
source). An editable install copies nothing: a checkout's elb reads the top-level
directories themselves. The sdist carries the same files (MANIFEST.in).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
COLLECTION = Path("ansible_collections/elb/cluster")
DATA = Path("elb/_data")

# repository path -> path in the wheel
SHIPPED: dict[str, Path] = {
    "galaxy.yml": COLLECTION / "galaxy.yml",
    "README.md": COLLECTION / "README.md",
    "meta": COLLECTION / "meta",
    "requirements.yml": COLLECTION / "requirements.yml",
    "ansible.cfg": COLLECTION / "ansible.cfg",
    "LICENSE": COLLECTION / "LICENSE",
    "playbooks": COLLECTION / "playbooks",
    "roles": COLLECTION / "roles",
    "plugins": COLLECTION / "plugins",
    "inventory": COLLECTION / "inventory",
    "systemd/elb.service": DATA / "elb.service",
    "docs/iam-policy.json": DATA / "iam-policy.json",
    "monitoring": DATA / "monitoring",
}
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".*")


class BuildWithAssets(build_py):  # type: ignore[misc]
    """``build_py`` that also copies ``SHIPPED`` into the build tree (not for editable installs)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        out = Path(self.build_lib)
        for src, dest in SHIPPED.items():
            source, target = HERE / src, out / dest
            if source.is_dir():
                shutil.copytree(source, target, ignore=SKIP, dirs_exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
        galaxy = out / SHIPPED["galaxy.yml"]
        text = galaxy.read_text(encoding="utf-8")
        version = self.distribution.get_version()
        galaxy.write_text(re.sub(r"(?m)^version:.*$", f"version: {version}", text), encoding="utf-8")


setup(cmdclass={"build_py": BuildWithAssets})
