"""The spot_agent role's agent (roles/spot_agent/files/elb-spot-agent), against a stand-in
instance metadata service (an http.server in a thread on 127.0.0.1, speaking IMDSv2's token
protocol) and a stand-in disable command (a script recording its argv): EC2, SGE and Slurm are
not here. The disable command is each scheduler's as the role is given it (its defaults for
Grid Engine, playbooks/slurm_add_node.yml's include for Slurm), and the role's systemd unit
passes that command to the agent word for word."""

from __future__ import annotations

import importlib.util
import json
import logging
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any

import jinja2
import pytest
import yaml

from tests.ports import closed_port

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "spot_agent"
SCRIPT = ROLE / "files" / "elb-spot-agent"
NOTICE = {"action": "terminate", "time": "2026-11-25T14:02:00Z"}


def _load() -> ModuleType:
    loader = SourceFileLoader("elb_spot_agent", str(SCRIPT))
    spec = importlib.util.spec_from_loader("elb_spot_agent", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


agent_mod = _load()


class Imds:
    """What the stand-in metadata service answers; tokens it gave out and calls it got."""

    def __init__(self) -> None:
        self.action: tuple[int, str] = (404, "")
        self.rebalance: tuple[int, str] = (404, "")
        self.tokens: set[str] = set()
        self.issued = 0
        self.ttls: list[str] = []
        self.gets: list[str] = []
        self.lock = threading.Lock()

    def revoke(self) -> None:
        with self.lock:
            self.tokens.clear()


def _handler(imds: Imds) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_PUT(self) -> None:
            if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                self._send(400, "")
                return
            with imds.lock:
                imds.issued += 1
                token = f"token-{imds.issued}"
                imds.tokens.add(token)
                imds.ttls.append(self.headers["X-aws-ec2-metadata-token-ttl-seconds"])
            self._send(200, token)

        def do_GET(self) -> None:
            with imds.lock:
                imds.gets.append(self.path)
                valid = self.headers.get("X-aws-ec2-metadata-token") in imds.tokens
            if not valid:
                self._send(401, "")
            elif self.path == "/latest/meta-data/spot/instance-action":
                self._send(*imds.action)
            elif self.path == "/latest/meta-data/events/recommendations/rebalance":
                self._send(*imds.rebalance)
            else:
                self._send(404, "")

    return Handler


@pytest.fixture
def imds() -> Iterator[tuple[Imds, str]]:
    state = Imds()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def qmod(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in qmod appending its argv (JSON, one line per call) to a file; exits with the
    number in ``qmod.rc`` if there is one."""
    calls = tmp_path / "qmod.calls"
    script = tmp_path / "qmod"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, pathlib, sys\n"
        f"with open({str(calls)!r}, 'a') as f:\n"
        "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"rc = pathlib.Path({str(tmp_path / 'qmod.rc')!r})\n"
        "sys.exit(int(rc.read_text()) if rc.exists() else 0)\n"
    )
    script.chmod(0o755)
    return script, calls


def recorded(calls: Path) -> list[list[str]]:
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def make_agent(endpoint: str, qmod: tuple[Path, Path], tmp_path: Path, **kw: Any) -> Any:
    """An agent whose disable command is SGE's, with the stand-in as its qmod."""
    return agent_mod.Agent(endpoint, [str(qmod[0]), "-d", "*@node007"], str(tmp_path / "done"), **kw)


# -- the role's variables, as Ansible resolves them for node007 -------------------------------------


def _render(value: Any, names: dict[str, Any]) -> Any:
    """``value`` with its Jinja expressions rendered against ``names`` until none is left (the
    role's defaults name each other, as Ansible resolves them lazily)."""
    if isinstance(value, list):
        return [_render(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _render(v, names) for k, v in value.items()}
    if not isinstance(value, str):
        return value
    for _ in range(10):
        if "{{" not in value:
            return value
        value = jinja2.Environment().from_string(value).render(names)
    raise AssertionError(f"{value!r} does not resolve")


# The playbooks that configure a worker, by scheduler: each starts the agent on a spot worker.
WORKER_PLAYBOOKS = {
    "sge": ["add_node.yml", "node_boot.yml", "site.yml"],
    "slurm": ["slurm_add_node.yml", "slurm_node_boot.yml", "slurm_site.yml"],
}


def spot_agent_includes(playbook: str) -> list[dict[str, Any]]:
    """The tasks of ``playbook`` (in its plays and their blocks) that include the spot_agent role."""
    found: list[dict[str, Any]] = []
    todo = [t for play in yaml.safe_load((REPO / "playbooks" / playbook).read_text()) for t in play.get("tasks", [])]
    while todo:
        task = todo.pop(0)
        todo.extend(task.get("block", []))
        if task.get("ansible.builtin.include_role", {}).get("name") == "spot_agent":
            found.append(task)
    return found


@pytest.mark.parametrize(("scheduler", "playbook"), [(s, p) for s, books in WORKER_PLAYBOOKS.items() for p in books])
def test_each_worker_playbook_starts_the_agent_on_a_spot_node_with_its_schedulers_vars(
    scheduler: str, playbook: str
) -> None:
    (include,) = spot_agent_includes(playbook)
    assert include["when"] == "elb_market | default('on-demand') == 'spot'"
    assert include["ansible.builtin.include_role"].get("vars_from") == ("slurm" if scheduler == "slurm" else None)
    assert "vars" not in include  # the scheduler's command is the role's, in one place


def role_vars(scheduler: str) -> dict[str, Any]:
    """The spot_agent role's variables on node007: its defaults, and for Slurm its vars/slurm.yml
    (the Slurm playbooks include the role with vars_from: slurm)."""
    names: dict[str, Any] = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    names["inventory_hostname"] = "node007"
    if scheduler == "slurm":
        names.update(yaml.safe_load((ROLE / "vars" / "slurm.yml").read_text()))
    return {k: _render(v, names) for k, v in names.items()}


DISABLE = {
    "sge": ["/usr/bin/qmod", "-d", "*@node007"],
    "slurm": ["/usr/bin/scontrol", "update", "nodename=node007", "state=DRAIN", "reason=elb: spot interruption"],
}


def unit_text(names: dict[str, Any]) -> str:
    """The role's systemd unit rendered as its template task does (trim_blocks)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ROLE / "templates"), trim_blocks=True, undefined=jinja2.StrictUndefined
    )
    env.filters["combine"] = lambda a, b: {**a, **b}
    return env.get_template("elb-spot-agent.service.j2").render(ansible_managed="managed", **names)


def systemd_words(line: str) -> list[str]:
    """The words of an ExecStart= or Environment= value written as the template writes them
    (each double-quoted, backslash escapes), with systemd's "%%" and "$$" read back."""
    return [w.replace("%%", "%").replace("$$", "$") for w in shlex.split(line)]


def unit_lines(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]


def test_no_notice_runs_no_qmod(imds: tuple[Imds, str], qmod: tuple[Path, Path], tmp_path: Path) -> None:
    state, url = imds
    agent = make_agent(url, qmod, tmp_path)
    assert agent.poll() == agent_mod.NONE
    assert agent.poll() == agent_mod.NONE
    assert recorded(qmod[1]) == []
    assert not (tmp_path / "done").exists()
    assert state.issued == 1  # one token for both polls
    assert state.ttls == [str(agent_mod.TOKEN_TTL)]


def test_a_notice_disables_the_node_once(
    imds: tuple[Imds, str], qmod: tuple[Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state, url = imds
    state.action = (200, json.dumps(NOTICE))
    caplog.set_level(logging.INFO, "elb-spot-agent")
    agent = make_agent(url, qmod, tmp_path)
    assert agent.poll() == agent_mod.ACTED
    assert recorded(qmod[1]) == [["-d", "*@node007"]]
    assert (tmp_path / "done").read_text() == "terminate 2026-11-25T14:02:00Z\n"
    acted = [r.getMessage() for r in caplog.records if "spot interruption notice" in r.getMessage()]
    assert acted == [
        f"spot interruption notice: terminate at 2026-11-25T14:02:00Z; disabled the node: {qmod[0]} -d '*@node007'"
    ]
    # The same agent, and a restarted one, do nothing more.
    assert agent.poll() == agent_mod.NONE
    assert make_agent(url, qmod, tmp_path).poll() == agent_mod.NONE
    assert recorded(qmod[1]) == [["-d", "*@node007"]]


def test_a_failing_qmod_is_tried_again_next_poll(
    imds: tuple[Imds, str], qmod: tuple[Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state, url = imds
    state.action = (200, json.dumps({"action": "stop", "time": "2026-11-25T14:02:00Z"}))
    (tmp_path / "qmod.rc").write_text("1")
    agent = make_agent(url, qmod, tmp_path)
    assert agent.poll() == agent_mod.FAILED
    assert not (tmp_path / "done").exists()
    assert "exited 1" in caplog.text
    (tmp_path / "qmod.rc").unlink()
    assert agent.poll() == agent_mod.ACTED
    assert recorded(qmod[1]) == [["-d", "*@node007"]] * 2
    assert (tmp_path / "done").exists()


def test_imds_down_is_logged_and_nothing_is_done(
    qmod: tuple[Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    agent = make_agent(f"http://127.0.0.1:{closed_port()}", qmod, tmp_path)
    assert agent.poll() == agent_mod.FAILED
    assert agent.poll() == agent_mod.FAILED
    assert recorded(qmod[1]) == []
    assert caplog.text.count("no IMDSv2 token") == 2
    assert "Traceback" not in caplog.text


def test_a_refused_token_is_replaced(imds: tuple[Imds, str], qmod: tuple[Path, Path], tmp_path: Path) -> None:
    state, url = imds
    agent = make_agent(url, qmod, tmp_path)
    assert agent.poll() == agent_mod.NONE
    state.revoke()  # the service forgot it (as after a restart): the next GET gets 401
    state.action = (200, json.dumps(NOTICE))
    assert agent.poll() == agent_mod.ACTED
    assert state.issued == 2
    assert recorded(qmod[1]) == [["-d", "*@node007"]]


def test_the_token_is_renewed_before_it_expires(
    imds: tuple[Imds, str], qmod: tuple[Path, Path], tmp_path: Path
) -> None:
    state, url = imds
    now = [1000.0]
    agent = make_agent(url, qmod, tmp_path, clock=lambda: now[0])
    agent.poll()
    now[0] += agent_mod.TOKEN_TTL - agent_mod.TOKEN_MARGIN - 1
    agent.poll()
    assert state.issued == 1
    now[0] += 2  # within the margin before the TTL ends
    agent.poll()
    assert state.issued == 2


@pytest.mark.parametrize(
    "body",
    ["{not json", "[]", json.dumps({"action": "explode", "time": "x"}), json.dumps({"action": "terminate"})],
)
def test_a_malformed_notice_is_logged_and_not_acted_on(
    imds: tuple[Imds, str], qmod: tuple[Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture, body: str
) -> None:
    state, url = imds
    state.action = (200, body)
    agent = make_agent(url, qmod, tmp_path)
    assert agent.poll() == agent_mod.FAILED
    assert recorded(qmod[1]) == []
    assert not (tmp_path / "done").exists()
    assert "spot instance-action" in caplog.text


def test_a_rebalance_recommendation_is_logged_once_only(
    imds: tuple[Imds, str], qmod: tuple[Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state, url = imds
    state.rebalance = (200, json.dumps({"noticeTime": "2026-11-25T13:50:00Z"}))
    agent = make_agent(url, qmod, tmp_path)
    assert agent.poll() == agent_mod.NONE
    assert agent.poll() == agent_mod.NONE
    assert caplog.text.count("rebalance recommendation") == 1
    assert recorded(qmod[1]) == []


def test_once_exits_2_on_a_notice_acted_on_then_0(
    imds: tuple[Imds, str], qmod: tuple[Path, Path], tmp_path: Path
) -> None:
    state, url = imds
    argv = [sys.executable, str(SCRIPT), "--once", "--endpoint", url, "--state-file", str(tmp_path / "done")]
    argv += ["--", str(qmod[0]), "-d", "*@node007"]
    assert subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False).returncode == 0
    state.action = (200, json.dumps(NOTICE))
    first = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert first.returncode == 2, first.stderr
    assert "disabled the node: " in first.stderr and "-d '*@node007'" in first.stderr
    assert subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False).returncode == 0
    assert recorded(qmod[1]) == [["-d", "*@node007"]]


def test_the_loop_sleeps_between_polls_whatever_a_poll_does(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    polls: list[int] = []
    sleeps: list[float] = []

    class Stop(BaseException):
        pass

    def poll(self: Any) -> str:
        polls.append(1)
        if len(polls) == 1:
            raise RuntimeError("something unexpected")
        return str(agent_mod.FAILED)

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise Stop

    monkeypatch.setattr(agent_mod.Agent, "poll", poll)
    monkeypatch.setattr(agent_mod.time, "sleep", sleep)
    logger = logging.getLogger("elb-spot-agent")
    try:
        with pytest.raises(Stop):
            agent_mod.main(["--interval", "7", "--state-file", str(tmp_path / "done"), "--", "/bin/true"])
    finally:
        logger.handlers.clear()
        logger.propagate = True
    assert len(polls) == 3
    assert sleeps == [7.0, 7.0, 7.0]


@pytest.mark.parametrize("scheduler", ["sge", "slurm"])
def test_each_schedulers_command_is_the_roles_and_runs_once_word_for_word(
    scheduler: str, imds: tuple[Imds, str], qmod: tuple[Path, Path], tmp_path: Path
) -> None:
    """The role's command for the scheduler (a stand-in in the program's place: qmod and
    scontrol are not here) gets its words as they are, spaces included, once."""
    command = role_vars(scheduler)["spot_agent_disable_command"]
    assert command == DISABLE[scheduler]
    state, url = imds
    state.action = (200, json.dumps(NOTICE))
    agent = agent_mod.Agent(url, [str(qmod[0]), *command[1:]], str(tmp_path / "done"))
    assert agent.poll() == agent_mod.ACTED
    assert agent.poll() == agent_mod.NONE
    assert recorded(qmod[1]) == [command[1:]]


@pytest.mark.parametrize("scheduler", ["sge", "slurm"])
def test_the_unit_passes_the_command_word_for_word_with_the_schedulers_environment(scheduler: str) -> None:
    names = role_vars(scheduler)
    text = unit_text(names)
    (exec_start,) = unit_lines(text, "ExecStart")
    argv = systemd_words(exec_start)
    assert argv[: argv.index("--")] == [
        "/usr/local/sbin/elb-spot-agent",
        "--endpoint",
        "http://169.254.169.254",
        "--interval",
        "5",
        "--state-file",
        "/run/elb-spot-agent.done",
    ]
    assert argv[argv.index("--") + 1 :] == DISABLE[scheduler]
    assert agent_mod.parse_args(argv[1:]).command == DISABLE[scheduler]
    environment = [systemd_words(line)[0] for line in unit_lines(text, "Environment")]
    expected = ["SGE_CELL=default", "SGE_ROOT=/var/lib/gridengine"] if scheduler == "sge" else []
    assert environment == expected
    if scheduler == "slurm":
        assert names["spot_agent_packages"] == ["slurm-client"]


def test_the_unit_quotes_what_systemd_would_expand() -> None:
    names = role_vars("sge")
    odd = ["/opt/my tools/disable", 'a"b', "back\\slash", "100%", "$HOME", "${X}", "*@node007"]
    names["spot_agent_disable_command"] = odd
    names["spot_agent_environment"] = {"ODD": 'a "b" 50% $HOME'}
    text = unit_text(names)
    (exec_start,) = unit_lines(text, "ExecStart")
    assert '"100%%"' in exec_start and '"$$HOME"' in exec_start and '"$${X}"' in exec_start
    argv = systemd_words(exec_start)
    assert argv[argv.index("--") + 1 :] == odd
    assert 'Environment="ODD=a \\"b\\" 50%% $HOME"' in text.splitlines()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("scheduler", ["sge", "slurm"])
def test_systemd_accepts_the_unit(scheduler: str, tmp_path: Path) -> None:
    names = role_vars(scheduler)
    names["spot_agent_path"] = str(SCRIPT)  # an executable that is there (systemd checks it)
    unit = tmp_path / "elb-spot-agent.service"
    unit.write_text(unit_text(names))
    proc = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["--once"], "no disable command"),
        (["--once", "--"], "no disable command"),
        (["--interval", "0", "--", "/bin/true"], "--interval must be positive"),
        (["--endpoint", "file:///etc/passwd", "--", "/bin/true"], "--endpoint must be"),
    ],
)
def test_a_usage_error_exits_1_with_one_line(argv: list[str], why: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--state-file", str(tmp_path / "done"), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert why in proc.stderr and "Traceback" not in proc.stderr
