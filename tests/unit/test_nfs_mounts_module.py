"""The module elb_nfs_mounts (plugins/modules/elb_nfs_mounts.py, linked from the nfs_client role's
library/): a node's mount points, fstab lines, mounts and remounts in one module run. Its plan
from an fstab and the node's mounts, its mounts with a stand-in for ``mount``, then the file as
Ansible runs it on a temporary fstab, mounts file and directories, with a stand-in ``mount``
first in PATH that notes its arguments (a real mount needs root and a server: the cluster tests
and the Molecule scenarios mount for real)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit import role_modules

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "plugins" / "modules" / "elb_nfs_mounts.py"
MODULE_PATH = role_modules.module_path("nfs_client", "elb_nfs_mounts")
M = role_modules.load("nfs_client", "elb_nfs_mounts")

HOME = "master:/home /home nfs rw,hard 0 0"
COMMON = "master:/var/lib/gridengine/default/common /var/lib/gridengine/default/common nfs rw,hard 0 0"
MOUNTS = ["/home", "/var/lib/gridengine/default/common"]
ROOT = "UUID=1234 / ext4 errors=remount-ro 0 1"


def plan(fstab: str, mounted: set[str] = frozenset(), existing: set[str] | None = None, **kw: Any) -> Any:  # type: ignore[assignment]
    args: dict[str, Any] = {"server": "master", "mounts": MOUNTS, "fstype": "nfs", "options": "rw,hard", **kw}
    return M.plan(fstab, set(mounted), set(args["mounts"]) if existing is None else existing, **args)


def test_a_fresh_node_gets_both_lines_after_its_own_and_both_mounts() -> None:
    p = plan(f"{ROOT}\n", existing=set())
    assert p.fstab == f"{ROOT}\n{HOME}\n{COMMON}\n"
    assert p.create == tuple(MOUNTS) and p.changed_lines == tuple(MOUNTS)
    assert p.mount == tuple(MOUNTS) and p.remount == ()


def test_a_node_as_wanted_changes_nothing() -> None:
    p = plan(f"{ROOT}\n{HOME}\n{COMMON}\n", mounted={"/", *MOUNTS})
    assert p.fstab is None and not p.changes
    assert p.create == p.mount == p.remount == p.changed_lines == ()


def test_a_line_that_differs_is_replaced_in_place_and_its_mount_remounted() -> None:
    old = "master:/home /home nfs rw,hard,nolock 0 0"
    p = plan(f"{old}\n{ROOT}\n{COMMON}\n", mounted=set(MOUNTS))
    assert p.fstab == f"{HOME}\n{ROOT}\n{COMMON}\n"
    assert p.changed_lines == ("/home",) and p.remount == ("/home",) and p.mount == ()


def test_a_changed_line_not_mounted_is_mounted_not_remounted() -> None:
    p = plan(f"oldmaster:/home /home nfs rw 0 0\n{COMMON}\n", mounted={"/var/lib/gridengine/default/common"})
    assert p.mount == ("/home",) and p.remount == ()


def test_a_further_line_for_a_mount_point_goes_and_comments_stay() -> None:
    fstab = f"# master:/home /home nfs ro 0 0\n{HOME}\nother:/home /home nfs rw 0 0\n{COMMON}\n"
    p = plan(fstab, mounted=set(MOUNTS))
    assert p.fstab == f"# master:/home /home nfs ro 0 0\n{HOME}\n{COMMON}\n"
    assert p.changed_lines == ("/home",) and p.remount == ("/home",)


def test_an_fstab_without_its_last_newline_is_left_as_it_is_when_nothing_changes() -> None:
    p = plan(f"{HOME}\n{COMMON}", mounted=set(MOUNTS))
    assert p.fstab is None


def test_the_mounts_found_in_proc_mounts_with_escaped_blanks() -> None:
    text = "master:/home /home fuse.nfs rw 0 0\n/dev/sda1 /my\\040disk ext4 rw 0 0\n"
    assert M.mounted_paths(text) == {"/home", "/my disk"}


class Mount:
    """``mount PATH`` that fails for a path until its Nth call."""

    def __init__(self, ok_at: dict[str, int]) -> None:
        self.ok_at = ok_at
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str]) -> tuple[int, str, str]:
        self.calls.append(list(argv))
        n = sum(c == list(argv) for c in self.calls)
        if n >= self.ok_at.get(argv[-1], 1):
            return 0, "", ""
        return 32, "", f"mount.nfs: access denied by server while mounting {argv[-1]} (try {n})\n"


def test_each_mount_is_tried_again_within_the_run_in_order() -> None:
    mount = Mount({"/home": 3})
    sleeps: list[float] = []
    done = M.mount_all(MOUNTS, mount.run, tries=5, delay=2, sleep=sleeps.append)
    assert done == MOUNTS
    assert mount.calls == [["mount", "/home"]] * 3 + [["mount", MOUNTS[1]]]
    assert sleeps == [2, 2]


def test_a_mount_that_fails_every_try_stops_at_the_bound_and_says_its_last_stderr() -> None:
    mount = Mount({MOUNTS[1]: 99})
    with pytest.raises(M.Failed) as caught:
        M.mount_all(MOUNTS, mount.run, tries=3, delay=2, sleep=lambda _: None)
    err = caught.value
    assert err.path == MOUNTS[1] and err.tries == 3 and err.done == ["/home"]
    assert M.failure("the master's exports could not be mounted", err, 2) == (
        f"the master's exports could not be mounted: mount {MOUNTS[1]} failed 3 times over 4 s; the last "
        f"exited 32: mount.nfs: access denied by server while mounting {MOUNTS[1]} (try 3)"
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ({"server": "two words"}, "server must be one word"),
        ({"mounts": ["home"]}, "absolute path"),
        ({"mounts": ["/home", "/home"]}, "named twice"),
        ({"mounts": []}, "at least one"),
        ({"options": "rw, hard"}, "options must be one word"),
        ({"tries": 0}, "tries must be at least 1"),
    ],
)
def test_an_argument_that_cannot_make_a_line_or_a_wait_is_refused(args: dict[str, Any], said: str) -> None:
    full: dict[str, Any] = {
        "server": "master",
        "mounts": MOUNTS,
        "options": "rw,hard",
        "fstype": "nfs",
        "tries": 1,
        "delay": 1.0,
    }
    full.update(args)
    with pytest.raises(ValueError, match=said):
        M.check(
            full["server"],
            full["mounts"],
            options=full["options"],
            fstype=full["fstype"],
            tries=full["tries"],
            delay=full["delay"],
        )


def node(tmp_path: Path, fstab: str | None, mounted: Sequence[str]) -> dict[str, Any]:
    """A node's fstab, mounts file and mount points under ``tmp_path``; the module's arguments."""
    points = [str(tmp_path / "mnt" / "home"), str(tmp_path / "mnt" / "common")]
    if fstab is not None:
        (tmp_path / "fstab").write_text(fstab.format(*points))
    (tmp_path / "mounts").write_text("".join(f"master:{p} {p} fuse.nfs rw 0 0\n" for p in mounted))
    return {
        "server": "master",
        "mounts": points,
        "fstab": str(tmp_path / "fstab"),
        "proc_mounts": str(tmp_path / "mounts"),
    }


@pytest.fixture
def mount_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in ``mount`` first in PATH: it appends its arguments to the returned file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "mount.log"
    (bin_dir / "mount").write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    (bin_dir / "mount").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return log


def test_run_as_ansible_writes_the_lines_creates_the_points_and_mounts(tmp_path: Path, mount_log: Path) -> None:
    points = [str(tmp_path / "mnt" / "home"), str(tmp_path / "mnt" / "common")]
    args = node(tmp_path, f"{ROOT}\n", points[1:])  # the second is mounted already
    rc, out = role_modules.run(MODULE_PATH, tmp_path, **args)
    assert rc == 0 and out["changed"] is True, out
    assert out["created"] == points and out["fstab_changed"] == points
    assert out["mounted"] == points[:1] and out["remounted"] == points[1:]  # mounted, its line new
    assert mount_log.read_text() == f"{points[0]}\n-o remount {points[1]}\n"
    assert (tmp_path / "fstab").read_text() == f"{ROOT}\n" + "".join(
        f"master:{p} {p} nfs rw,hard 0 0\n" for p in points
    )
    assert oct((tmp_path / "fstab").stat().st_mode & 0o777) == "0o644"
    assert all(os.path.isdir(p) for p in points)


def test_run_as_ansible_a_second_time_changes_nothing(tmp_path: Path, mount_log: Path) -> None:
    points = [str(tmp_path / "mnt" / "home"), str(tmp_path / "mnt" / "common")]
    for p in points:
        os.makedirs(p)
    args = node(tmp_path, "master:{0} {0} nfs rw,hard 0 0\nmaster:{1} {1} nfs rw,hard 0 0\n", points)
    before = (tmp_path / "fstab").stat().st_mtime_ns
    rc, out = role_modules.run(MODULE_PATH, tmp_path, **args)
    assert rc == 0 and out["changed"] is False, out
    assert (tmp_path / "fstab").stat().st_mtime_ns == before
    assert not mount_log.exists()


def test_check_mode_says_what_would_change_and_changes_nothing(tmp_path: Path, mount_log: Path) -> None:
    args = node(tmp_path, f"{ROOT}\n", [])
    rc, out = role_modules.run(MODULE_PATH, tmp_path, _ansible_check_mode=True, **args)
    assert rc == 0 and out["changed"] is True, out
    assert out["mounted"] == args["mounts"] and out["created"] == args["mounts"]
    assert (tmp_path / "fstab").read_text() == f"{ROOT}\n"
    assert not (tmp_path / "mnt").exists() and not mount_log.exists()


def test_a_mount_point_that_is_a_file_fails_with_a_clear_message_and_no_change(tmp_path: Path) -> None:
    args = node(tmp_path, f"{ROOT}\n", [])
    os.makedirs(tmp_path / "mnt")
    Path(args["mounts"][0]).write_text("not a directory")
    rc, out = role_modules.run(MODULE_PATH, tmp_path, **args)
    assert rc != 0 and out["msg"] == f"the mount point {args['mounts'][0]} exists and is not a directory"
    assert (tmp_path / "fstab").read_text() == f"{ROOT}\n"


def test_the_role_runs_the_shipped_module_in_one_task() -> None:
    link = role_modules.module_path("nfs_client", "elb_nfs_mounts")
    assert link.is_symlink() and link.resolve() == PLUGIN.resolve()
    tasks = yaml.safe_load((REPO / "roles" / "nfs_client" / "tasks" / "main.yml").read_text())
    assert [t["name"] for t in tasks if "elb_nfs_mounts" in t] == ["Mount the master's exports"]
    assert not any("loop" in t for t in tasks)


def test_an_fstab_that_cannot_be_written_fails_with_a_clear_message(tmp_path: Path, mount_log: Path) -> None:
    args = node(tmp_path, None, [])
    args["fstab"] = str(tmp_path / "no-such-dir" / "fstab")
    rc, out = role_modules.run(MODULE_PATH, tmp_path, **args)
    assert rc != 0 and out["msg"].startswith(f"cannot write {args['fstab']}: "), out
    assert not mount_log.exists()  # nothing mounted after the failure


def test_a_mount_point_that_cannot_be_made_fails_with_a_clear_message(tmp_path: Path, mount_log: Path) -> None:
    args = node(tmp_path, f"{ROOT}\n", [])
    (tmp_path / "mnt").write_text("a file where the mount points' parent should be")
    rc, out = role_modules.run(MODULE_PATH, tmp_path, **args)
    assert rc != 0 and out["msg"].startswith(f"cannot create the mount point {args['mounts'][0]}"), out
    assert (tmp_path / "fstab").read_text() == f"{ROOT}\n" and not mount_log.exists()
