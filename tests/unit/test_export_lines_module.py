"""The nfs_server role's module (roles/nfs_server/library/elb_export_lines.py): the edit is the one
the role's lineinfile task made (one run per node and directory), for a batch in one run; the
module as Ansible runs it; plays editing one exports file at the same time lose nothing."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from tests.unit import role_modules

MODULE_PATH = role_modules.module_path("nfs_server", "elb_export_lines")
M = role_modules.load("nfs_server", "elb_export_lines")
OPTS = "rw,sync,no_root_squash,no_subtree_check"
DIRS = ["/home", "/var/lib/gridengine/default/common"]

EXPORTS = (
    b"# /etc/exports: the admin's lines stay\n"
    b"/srv/data 10.0.0.0/8(ro)\n"
    b"/home node002(rw)\n"
    b"/home node0020(" + OPTS.encode() + b")\n"
    b"/var/lib/gridengine/default/common node002(" + OPTS.encode() + b")"  # no newline at the end
)


def edit(data: bytes, hosts: list[str], state: str = "present") -> bytes:
    out, _ = M.edit(data, hosts, DIRS, OPTS, state)
    assert isinstance(out, bytes)
    return out


def test_a_batch_gets_a_line_per_node_and_directory_and_the_rest_stays() -> None:
    out = edit(EXPORTS, ["node002", "node003"])
    assert (
        out
        == (
            b"# /etc/exports: the admin's lines stay\n"
            b"/srv/data 10.0.0.0/8(ro)\n"
            b"/home node002(" + OPTS.encode() + b")\n"  # its options set
            b"/home node0020(" + OPTS.encode() + b")\n"  # another node's line: its name only starts alike
            b"/var/lib/gridengine/default/common node002(" + OPTS.encode() + b")\n"
            b"/home node003(" + OPTS.encode() + b")\n"
            b"/var/lib/gridengine/default/common node003(" + OPTS.encode() + b")\n"
        )
    )
    assert edit(out, ["node002", "node003"]) == out  # again: nothing changes
    gone = edit(out, ["node002", "node003"], "absent")
    assert gone == (
        b"# /etc/exports: the admin's lines stay\n/srv/data 10.0.0.0/8(ro)\n/home node0020(" + OPTS.encode() + b")\n"
    )


@pytest.mark.parametrize(
    ("hosts", "dirs", "options", "why"),
    [
        (["node 2"], DIRS, OPTS, "host name"),
        (["node2(rw)"], DIRS, OPTS, "host name"),
        (["node2"], ["home"], OPTS, "absolute path"),
        (["node2"], DIRS, "rw sync", "options"),
    ],
)
def test_what_cannot_make_an_exports_line_is_refused(hosts: list[str], dirs: list[str], options: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        M.check_input(hosts, dirs, options)


def run_module(tmp_path: Path, **args: Any) -> tuple[int, dict[str, Any]]:
    return role_modules.run(MODULE_PATH, tmp_path, **args)


def test_the_module_as_ansible_runs_it(tmp_path: Path) -> None:
    path = tmp_path / "exports"  # missing: made with the lines
    base = {"exports": DIRS, "path": str(path), "lock_path": str(tmp_path / "lock")}
    rc, out = run_module(tmp_path, hosts=["node004", "node005"], **base, _ansible_check_mode=True)
    assert rc == 0 and out["changed"] is True and out["lines"] == 4 and not path.exists()
    rc, out = run_module(tmp_path, hosts=["node004", "node005"], **base)
    assert rc == 0 and out["changed"] is True
    assert path.read_text().count("\n") == 4 and (path.stat().st_mode & 0o777) == 0o644
    rc, out = run_module(tmp_path, hosts=["node004", "node005"], **base)
    assert rc == 0 and out["changed"] is False
    rc, out = run_module(tmp_path, hosts=["node004"], state="absent", **base)
    assert rc == 0 and out["lines"] == 2 and "node004" not in path.read_text()
    rc, out = run_module(tmp_path, hosts=["node 6"], **base)
    assert rc != 0 and "host name" in out["msg"]


FORK = multiprocessing.get_context("fork")


def _adds(worker: int, path: str, lock: str, start: Any) -> None:
    start.wait()
    for r in range(30):
        M.update(path, [f"n{worker}-{r}"], DIRS, OPTS, "present", lock_path=lock)


def test_concurrent_edits_of_one_file_lose_nothing(tmp_path: Path) -> None:
    path, lock = tmp_path / "exports", tmp_path / "lock"
    path.write_text("")
    start = FORK.Event()
    procs = [FORK.Process(target=_adds, args=(w, str(path), str(lock), start)) for w in range(6)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    lines = path.read_text().splitlines()
    assert len(lines) == 6 * 30 * len(DIRS) == len(set(lines))
