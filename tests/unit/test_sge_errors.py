"""An SGE error that names a known cause carries what to do about it."""

from __future__ import annotations

import pytest

from elb.schedulers.sge.errors import SgeError, hint


@pytest.mark.parametrize(
    ("stderr", "expect"),
    [
        (
            'error: commlib error: access denied (client IP resolved to host name "debian". '
            'This is not identical to clients host name "master")',
            "run elb on the master",
        ),
        ('denied: host "debian" is neither submit nor admin host', "qconf -ah"),
        ('error: unable to contact qmaster using port 6444 on host "master"', "qmaster does not answer"),
        ("error: no such queue", None),
    ],
)
def test_known_refusals_get_a_hint(stderr: str, expect: str | None) -> None:
    advice = hint(stderr)
    if expect is None:
        assert advice is None
        assert "hint:" not in str(SgeError("failed", command=["qstat"], returncode=1, stderr=stderr))
    else:
        assert advice is not None and expect in advice
        assert f"hint: {advice}" in str(SgeError("failed", command=["qstat"], returncode=1, stderr=stderr))
