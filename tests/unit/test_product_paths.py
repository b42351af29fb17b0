"""The guard every test runs under (``tests/conftest.py``): a write into elb's own directories
(``tests.product_paths.PRODUCT_PATHS``) is seen, whatever it was, and nothing else is."""

from __future__ import annotations

import os
from pathlib import Path

from tests.product_paths import PRODUCT_PATHS, fingerprint, written


def test_the_guarded_paths_are_elbs_defaults() -> None:
    from elb.core.config import DEFAULT_CONFIG_PATH, Config, ProvisionConfig

    assert Config().state_dir in PRODUCT_PATHS and DEFAULT_CONFIG_PATH.parent in PRODUCT_PATHS
    assert any(p in ProvisionConfig().host_keys_path.parents for p in PRODUCT_PATHS)


def test_a_file_created_changed_or_deleted_is_seen_and_reading_is_not(tmp_path: Path) -> None:
    root = tmp_path / "elb"
    roots = (root, tmp_path / "missing")
    empty = fingerprint(roots)
    assert empty == frozenset()
    keys = root / "ansible" / "host-keys"
    keys.mkdir(parents=True)
    made = fingerprint(roots)
    assert written(empty, made) == [str(root), str(root / "ansible"), str(keys)]
    (keys / "node001.known").write_text("node001 ssh-ed25519 AAAA\n")
    one = fingerprint(roots)
    assert written(made, one) == [str(keys), str(keys / "node001.known")]
    (keys / "node001.known").read_text()
    assert written(one, fingerprint(roots)) == []
    os.utime(keys / "node001.known", ns=(1, 1))
    assert written(one, fingerprint(roots)) == [str(keys / "node001.known")]
    (keys / "node001.known").unlink()
    assert str(keys / "node001.known") in written(one, fingerprint(roots))
