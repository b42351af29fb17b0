"""No playbook run's artifacts (kept 14 to 56 days) keep the extra vars or an SSH key: the extra
vars file lives outside them only while its run does, whatever way the run ends; what runner
leaves under its names for secrets is deleted; runner's own ``env/`` secret files are refused;
and a killed elb's leftovers are cleaned at the next start. ansible-runner's ``Runner`` is a fake
here (its config is runner's own); tests/provision runs the real thing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import ansible_runner.runner
import pytest

from elb.core.config import ClusterConfig, ProvisionConfig
from elb.core.interfaces import NodeSpec, Outcome
from elb.provision import AnsibleProvisioner, ProvisionError
from elb.provision.ansible import scrub_artifacts
from elb.provision.hostkeys import HostKeys

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ansible" / "playbooks"
SECRET = "FAKE-DB-PASSWORD-77a0c3"
FAKE_KEY = "FAKE-PRIVATE-KEY-MATERIAL-c4e2d9"
N1 = NodeSpec("node001", "10.77.0.11", 4)


class FakeRunner:
    """Stands in for ``ansible_runner.runner.Runner``: sees the extra vars file during the run,
    leaves secret files in the artifacts as runner would with ``env/`` files, then ends as told."""

    seen: ClassVar[list[dict[str, Any]]] = []
    fail = False

    def __init__(self, config: Any, event_handler: Any = None, cancel_callback: Any = None) -> None:
        self.config = config

    def run(self) -> tuple[str, int]:
        ev = Path(self.config.extra_vars)
        FakeRunner.seen.append(json.loads(ev.read_text()))
        artifacts = Path(self.config.artifact_dir)
        (artifacts / "ssh_key_data").write_text(FAKE_KEY)
        (artifacts / "extravars").write_text(ev.read_text())
        (artifacts / "stdout").write_text("PLAY RECAP\n")
        if FakeRunner.fail:
            raise RuntimeError("runner broke")
        return "successful", 0


@pytest.fixture
def fake_runner(monkeypatch: pytest.MonkeyPatch) -> type[FakeRunner]:
    monkeypatch.setattr(ansible_runner.runner, "Runner", FakeRunner)
    FakeRunner.seen, FakeRunner.fail = [], False
    return FakeRunner


def provisioner(tmp_path: Path) -> AnsibleProvisioner:
    cfg = ProvisionConfig(
        playbook_dir=FIXTURES,
        private_data_dir=tmp_path / "pdd",
        ssh_private_key=tmp_path / "id_fake",
        extra_vars={"db_password": SECRET, "deep": {"list": [SECRET]}},
    )
    HostKeys(cfg.host_keys_path).issue(N1.name)  # as elb's cloud does when it launches the node
    return AnsibleProvisioner(cfg, ClusterConfig())


def secrets_under(root: Path) -> list[str]:
    return [
        str(p.relative_to(root))
        for p in sorted(root.rglob("*"))
        if p.is_file() and (SECRET.encode() in p.read_bytes() or FAKE_KEY.encode() in p.read_bytes())
    ]


@pytest.mark.parametrize("fail", [False, True], ids=["run-ends", "runner-raises"])
def test_a_run_leaves_no_secret_behind(tmp_path: Path, fake_runner: type[FakeRunner], fail: bool) -> None:
    fake_runner.fail = fail
    prov = provisioner(tmp_path)
    result = prov.add_nodes("add_node.yml", [N1], [])["node001"]
    if fail:
        assert result.outcome is Outcome.FAILED and "runner broke" in (result.message or "")
    assert fake_runner.seen == [{"db_password": SECRET, "deep": {"list": [SECRET]}}]  # Ansible got them
    pdd = tmp_path / "pdd"
    assert secrets_under(pdd) == []
    [run] = list((pdd / "artifacts").iterdir())
    assert (run / "stdout").exists() and (run / "inventory.json").exists()  # the rest stays
    assert list((pdd / "vars").iterdir()) == []


@pytest.mark.parametrize("name", ["env/extravars", "env/ssh_key"])
def test_runner_s_own_secret_files_are_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / "pdd" / name
    path.parent.mkdir(parents=True)
    path.write_text(SECRET)
    with pytest.raises(ProvisionError, match=rf"{name} found in .*move the variables to provision.extra_vars") as err:
        provisioner(tmp_path)
    assert SECRET not in str(err.value)


def test_the_next_start_deletes_what_a_killed_elb_left(tmp_path: Path) -> None:
    pdd = tmp_path / "pdd"
    for d in ("vars", "artifacts/old-run", "artifacts/live-run", "running"):
        (pdd / d).mkdir(parents=True)
    (pdd / "vars" / "old-run.json").write_text(SECRET)  # its elb was killed mid-run
    (pdd / "artifacts" / "old-run" / "extravars.json").write_text(SECRET)  # as elb wrote them once
    (pdd / "artifacts" / "old-run" / "stdout").write_text("kept")
    prov = provisioner(tmp_path)
    # another elb's run in flight on the same directory: its record names a live owner
    prov.runs.start("live-run", str(pdd / "artifacts" / "live-run"))
    (pdd / "vars" / "live-run.json").write_text("in use")
    assert prov.reap_leftovers() == 0
    assert sorted(p.name for p in (pdd / "vars").iterdir()) == ["live-run.json"]
    assert secrets_under(pdd) == []
    assert (pdd / "artifacts" / "old-run" / "stdout").read_text() == "kept"


def test_scrub_artifacts_names_what_it_deleted(tmp_path: Path) -> None:
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "ssh_key").write_text(FAKE_KEY)
    (tmp_path / "extravars.json").write_text(SECRET)
    (tmp_path / "job_events").mkdir()
    assert scrub_artifacts(tmp_path) == ["extravars.json", "env"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job_events"]
