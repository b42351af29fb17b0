"""The local cloud's terminate answers a repeat as EC2 does.

EC2 still lists a terminated instance for about an hour and takes a second ``TerminateInstances``
of it as done; podman forgets a removed container at once. The local cloud remembers what it
removed, so that a repeated terminate (a removal tried again after its answer was lost) is done,
not refused as "not workers of cluster"; an id it never had is still refused, and nothing of a
call with such an id is removed.

Podman is stood in for by a script that keeps its containers in a JSON file and answers ``ps``,
``container inspect`` and ``rm`` from it: these tests are about what the cloud makes of podman's
answers (the cluster tests run the real one).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from elb.clouds.local import LocalCloud, LocalConfig
from elb.core.interfaces import TAG_CLUSTER, TAG_MANAGED_BY, TAG_NAME, TAG_ROLE, CloudError

CLUSTER = "unit"

PODMAN = """\
import json, sys
from pathlib import Path
state = Path(sys.argv[0]).with_name("containers.json")
have = json.loads(state.read_text())
args = sys.argv[1:]
with state.with_name("calls.log").open("a") as log:
    log.write(" ".join(args) + "\\n")
if args[0] == "ps":
    print("\\n".join(have))
elif args[:2] == ["container", "inspect"]:
    print(json.dumps([have[i] for i in args[2:] if i in have]))
elif args[0] == "rm":
    for i in args[1:]:
        have.pop(i, None)
    state.write_text(json.dumps(have))
else:
    sys.exit(125)
"""


def container(cid: str, name: str, cluster: str = CLUSTER) -> dict[str, object]:
    return {
        "Id": cid,
        "Name": name,
        "Created": "2026-11-26T10:00:00.000000000Z",
        "ImageName": "localhost/elb-node:latest",
        "State": {"Status": "running"},
        "Config": {"Labels": {TAG_CLUSTER: cluster, TAG_ROLE: "worker", TAG_MANAGED_BY: "elb", TAG_NAME: name}},
        "NetworkSettings": {"Networks": {"elb-test": {"IPAddress": "10.77.0.13"}}},
    }


@pytest.fixture
def podman(tmp_path: Path) -> Path:
    script = tmp_path / "podman"
    script.write_text(f"#!{sys.executable}\n{PODMAN}")
    script.chmod(0o755)
    have = {"aaa": container("aaa", "node001"), "bbb": container("bbb", "node002")}
    (tmp_path / "containers.json").write_text(json.dumps(have))
    return script


def cloud(podman: Path) -> LocalCloud:
    return LocalCloud(LocalConfig(), CLUSTER, podman=str(podman), host_keys=None)


def removals(podman: Path) -> list[str]:
    calls = podman.with_name("calls.log").read_text().splitlines()
    return [c for c in calls if c.startswith("rm ")]


def test_a_repeated_terminate_is_done_not_refused(podman: Path) -> None:
    c = cloud(podman)
    c.terminate(["aaa"])
    assert [w.name for w in c.list_workers()] == ["node002"]
    c.terminate(["aaa"])  # refused as "not workers of cluster" before the cloud remembered it
    c.terminate(["aaa", "bbb"])  # the one gone is done, the other removed
    assert c.list_workers() == []
    assert removals(podman) == ["rm --force --time 5 aaa", "rm --force --time 5 bbb"]


def test_an_id_never_had_is_refused_and_nothing_is_removed(podman: Path) -> None:
    c = cloud(podman)
    c.terminate(["aaa"])
    with pytest.raises(CloudError, match="not workers of cluster"):
        c.terminate(["bbb", "zzz"])
    assert [w.name for w in c.list_workers()] == ["node002"]
    assert removals(podman) == ["rm --force --time 5 aaa"]


def test_another_clouds_removal_is_not_taken_as_done(podman: Path) -> None:
    # The memory is the cloud's own: a container removed by another process is not "done" here,
    # as an instance id EC2 no longer lists is refused.
    cloud(podman).terminate(["aaa"])
    with pytest.raises(CloudError, match="not workers of cluster"):
        cloud(podman).terminate(["aaa"])
