"""``elb init``: the config written from what the machine shows passes ``elb validate``.

The EC2 instance metadata service is a local HTTP server speaking IMDSv2 (the real one exists on
EC2 only); SGE's qconf is a script on sge.bin_dir's stand-in PATH (the real one is tested on the
test cluster).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from elb.cli import init
from elb.cli.main import main
from elb.clouds.ec2.config import ec2_settings
from elb.core.config import load_config
from elb.core.exitcodes import Exit
from elb.schedulers.sge import init as sge_init
from elb.schedulers.sge.config import SgeConfig, sge_settings

TOKEN = "tok-123"
META = {
    "/latest/dynamic/instance-identity/document": json.dumps(
        {"region": "eu-west-1", "instanceId": "i-0abc", "instanceType": "c5.large", "imageId": "ami-0123"}
    ),
    "/latest/meta-data/mac": "0a:00:00:00:00:01",
    "/latest/meta-data/network/interfaces/macs/0a:00:00:00:00:01/subnet-id": "subnet-42",
    "/latest/meta-data/network/interfaces/macs/0a:00:00:00:00:01/security-group-ids": "sg-1\nsg-2\n",
}


class _Imds(BaseHTTPRequestHandler):
    def do_PUT(self) -> None:
        ok = self.path == "/latest/api/token" and "X-aws-ec2-metadata-token-ttl-seconds" in self.headers
        self._reply(200 if ok else 400, TOKEN if ok else "")

    def do_GET(self) -> None:
        if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
            self._reply(401, "")  # IMDSv2 only: no token, no answer
        elif self.path in META:
            self._reply(200, META[self.path])
        else:
            self._reply(404, "")

    def _reply(self, code: int, body: str) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def imds() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Imds)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_read_imds_v2(imds: str) -> None:
    facts = init.read_imds(base=imds)
    assert facts == init.Ec2Facts("eu-west-1", "i-0abc", "c5.large", "ami-0123", "subnet-42", ("sg-1", "sg-2"))


def test_read_imds_off_ec2_fails_fast() -> None:
    with pytest.raises(OSError):
        init.read_imds(base="http://127.0.0.1:9")  # nothing listens: refused at once


def test_rendered_config_from_every_fact_loads(tmp_path: Path, imds: str) -> None:
    facts = sge_init.Facts(
        master="master",
        sge_root="/var/lib/gridengine",
        sge_cell="default",
        queues=("big.q", "all.q"),
        hostgroups=("@gpu", "@allhosts"),
    )
    path = tmp_path / "elb.yml"
    path.write_text(sge_init.render(facts, init.cloud_lines(init.read_imds(base=imds), None), init.TAIL))
    cfg = load_config(path)
    assert cfg.cluster.master == "master"
    assert (sge_settings(cfg).queue, sge_settings(cfg).hostgroup) == ("all.q", "@allhosts")
    e = ec2_settings(cfg)
    assert (e.region, e.ami, e.instance_types, e.subnets) == ("eu-west-1", "ami-0123", ["c5.large"], ["subnet-42"])
    assert e.security_groups == ["sg-1", "sg-2"]
    assert "# queues SGE lists: big.q, all.q" in path.read_text()


def test_first_queue_when_no_all_q_and_problems_are_one_line_comments(tmp_path: Path) -> None:
    facts = sge_init.Facts(
        master="m1",
        sge_root="/sge",
        sge_cell="c",
        queues=("work.q",),
        sge_problem="qconf failed\nsecond line: x",
    )
    path = tmp_path / "elb.yml"
    path.write_text(sge_init.render(facts, init.cloud_lines(None, "no: answer\nat all"), init.TAIL))
    cfg = load_config(path)
    assert sge_settings(cfg).queue == "work.q" and sge_settings(cfg).hostgroup == "@allhosts"
    assert ec2_settings(cfg).region is None


def test_gather_reads_sge_queues_and_hostgroups(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "qconf").write_text(
        '#!/bin/sh\ncase "$1" in -sql) printf "all.q\\nbig.q\\n";; -shgrpl) echo "@allhosts";; esac\n'
    )
    (bin_dir / "qconf").chmod(0o755)
    common = tmp_path / "sge" / "default" / "common"
    common.mkdir(parents=True)
    (common / "act_qmaster").write_text("head.example.org\n")
    facts = sge_init.gather(SgeConfig(root=tmp_path / "sge", bin_dir=bin_dir))
    assert facts.queues == ("all.q", "big.q") and facts.hostgroups == ("@allhosts",)
    assert facts.master == "head" and facts.sge_problem is None


def test_init_writes_a_file_that_validates_and_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "etc" / "elb.yml"
    sge = ["--sge-root", str(tmp_path / "nosge")]
    assert main(["init", "--offline", "-c", str(path), *sge]) == Exit.OK
    text = path.read_text()
    # Validated on tmp paths: its checks of the default /var/lib/elb/... write a probe file there.
    ours = text.replace("state_dir: /var/lib/elb", f"state_dir: {tmp_path / 'state'}")
    path.write_text(ours.replace("  ssh_user: root", f"  ssh_user: root\n  private_data_dir: {tmp_path / 'ansible'}"))
    assert main(["validate", "--offline", "-c", str(path)]) == Exit.OK
    before = path.read_text()
    capsys.readouterr()
    assert main(["init", "--offline", "-c", str(path), *sge]) == Exit.CONFIG
    assert "not overwritten (--force to replace it)" in capsys.readouterr().err
    assert path.read_text() == before
    assert main(["init", "--offline", "--force", "-c", str(path), *sge]) == Exit.OK
    assert path.read_text() == text
