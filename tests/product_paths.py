"""What a test may never write: the product's own directories (the default ``state_dir``,
``provision.private_data_dir`` and its host-key store, the config directory). A test that
writes there leaves, on the machine it ran on, files a later real run of elb reads as its
own: a stale host key there made a first run of elb refuse a node (``the SSH host key node001
answers with is not the one elb holds``). ``tests/conftest.py`` checks every test against it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

PRODUCT_PATHS = (Path("/var/lib/elb"), Path("/etc/elb"))

Fingerprint = frozenset[tuple[str, int, int]]


def fingerprint(roots: Sequence[Path] = PRODUCT_PATHS) -> Fingerprint:
    """Every file and directory under ``roots`` (the roots too, when they exist), each with its
    modification time and size: what changes when anything is written there."""
    out: set[tuple[str, int, int]] = set()
    for root in roots:
        for where, dirs, files in os.walk(root):
            for name in (".", *dirs, *files):
                path = os.path.join(where, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                out.add((os.path.normpath(path), st.st_mtime_ns, st.st_size))
    return frozenset(out)


def written(before: Fingerprint, after: Fingerprint) -> list[str]:
    """The paths created, changed or deleted between two fingerprints."""
    return sorted({path for path, _, _ in before ^ after})
