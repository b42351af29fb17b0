"""Running external commands for the test cluster: argument lists only, always a time-out."""

from __future__ import annotations

import logging
import os
import resource
import subprocess
from collections.abc import Mapping, Sequence

log = logging.getLogger("elbdev.testcluster")


class TestClusterError(Exception):
    """Setting up, using or tearing down the test cluster failed."""

    __test__ = False  # not a pytest test class


def run(
    argv: Sequence[str],
    *,
    timeout: float = 120.0,
    check: bool = True,
    input_text: str | None = None,
    env: Mapping[str, str] | None = None,
    quiet: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (no shell), capture its output, raise TestClusterError on failure or time-out."""
    if not quiet:
        log.debug("run: %s", " ".join(argv))
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        full_env.update(env)
    try:
        proc = subprocess.run(
            list(argv),
            input=input_text,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=full_env,
            stdin=None if input_text is not None else subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        raise TestClusterError(f"timed out after {timeout:g} s: {' '.join(argv)}") from err
    except OSError as err:
        raise TestClusterError(f"cannot run {argv[0]}: {err}") from err
    if check and proc.returncode != 0:
        out = (proc.stderr.strip() or proc.stdout.strip())[-2000:]
        raise TestClusterError(f"exit {proc.returncode}: {' '.join(argv)}\n{out}")
    return proc


def children_cpu() -> float:
    """CPU seconds (user + system) used so far by this process's finished child processes."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
