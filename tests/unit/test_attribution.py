"""Who spent it: the nodes' billed stretches read from the journal (``elb.core.spend.lives``), every
billed node-second attributed to the jobs on the node by their slots and the rest to booting,
idle and draining (``elb.core.attribution``), the parts adding up to the bill to the cent; the
scheduler's accounting read (``elb.schedulers.sge.usage``: Grid Engine's file;
``elb.schedulers.slurm.usage``: Slurm's sacct) and ``elb spend`` end to end."""

from __future__ import annotations

import csv
import io
import json
import random
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.attribution import JobUse, attribute
from elb.core.budget import Budget
from elb.core.config import load_config
from elb.core.groups import NodeGroup, NodeGroups
from elb.core.model import NodeState
from elb.core.spend import Life, SpendCache, Stopped, billed_seconds, lives, period_spend, read_spend
from elb.core.warmpool import WarmPool
from elb.schedulers.sge.usage import sge_uses
from elb.schedulers.slurm.usage import SACCT_FORMAT, parse_sacct, sacct_argv
from elb.service.journal import Journal
from tests.unit.factories import T0

GROUPS = NodeGroups(
    groups=[
        NodeGroup(name="small", slots=2, max_nodes=4, price_per_hour=0.5),
        NodeGroup(
            name="big",
            slots=8,
            max_nodes=2,
            price_per_hour=2.0,
            warm_pool=WarmPool(max_nodes=1, volume_price_per_hour=0.1),
        ),
    ]
)
S = NodeState


def journal_of(tmp_path: Path, t0: float) -> Journal:
    """Three nodes: node001 (small) launched, ready, drained and terminated; node002 (big) ready,
    stopped into the warm pool, started again and up still; node003 failed before it ran."""
    j = Journal(tmp_path / "journal.sqlite")
    steps = [
        ("node001", S.REQUESTED, 0, {"group": "small"}),
        ("node001", S.LAUNCHING, 1, {}),
        ("node001", S.RUNNING, 5, {"launched_at": t0 + 2, "instance_id": "i-1", "slots": 2}),
        ("node001", S.PROVISIONING, 10, {}),
        ("node001", S.READY, 300, {}),
        ("node001", S.DRAINING, 3600, {}),
        ("node001", S.DEREGISTERED, 3650, {}),
        ("node001", S.TERMINATED, 3700, {}),
        ("node002", S.REQUESTED, 0, {"group": "big"}),
        ("node002", S.RUNNING, 10, {"launched_at": t0 + 10, "instance_id": "i-2", "slots": 8}),
        ("node002", S.READY, 200, {}),
        ("node002", S.STOPPING, 1000, {}),
        ("node002", S.STOPPED, 1100, {}),
        ("node002", S.STARTING, 2100, {"launched_at": t0 + 2100}),
        ("node002", S.READY, 2160, {}),
        ("node003", S.REQUESTED, 0, {"group": "small"}),
        ("node003", S.LAUNCHING, 1, {}),
        ("node003", S.FAILED, 3, {}),
    ]
    for name, state, at, kw in steps:
        j.record(name, state, t0 + at, **kw)  # type: ignore[arg-type]
    return j


def test_the_journal_s_events_become_each_node_s_billed_stretches(tmp_path: Path) -> None:
    j = journal_of(tmp_path, T0)
    found, stopped = lives(j.nodes(include_gone=True), j.events(), GROUPS)
    j.close()
    by = {(life.node, life.start): life for life in found}
    assert sorted(by) == [("node001", T0 + 2), ("node002", T0 + 10), ("node002", T0 + 2100)]
    one = by[("node001", T0 + 2)]
    assert one.end == T0 + 3700 and one.group == "small" and one.price_per_hour == 0.5 and one.slots == 2
    assert one.activity == ((T0 + 2, "booting"), (T0 + 300, "idle"), (T0 + 3600, "draining"))
    assert by[("node002", T0 + 10)].end == T0 + 1100  # billing stops at the stop
    again = by[("node002", T0 + 2100)]
    assert again.end is None and again.activity == ((T0 + 2100, "booting"), (T0 + 2160, "idle"))
    assert stopped == [Stopped("node002", "big", T0 + 1100, T0 + 2100, 0.1)]


def test_a_period_s_spend_is_what_was_billed_in_it_and_the_rate_what_runs_now(tmp_path: Path) -> None:
    t0 = datetime.fromisoformat("2027-01-15T00:00:00+00:00").timestamp()  # a day's start
    j = journal_of(tmp_path, t0)
    found = lives(j.nodes(include_gone=True), j.events(), GROUPS)
    j.close()
    now = t0 + 3 * 3600.0
    spend = period_spend(found, Budget(amount=100.0, period="day"), now, "second", 3600.0)
    expected = 3698 * 0.5 / 3600 + 1090 * 2.0 / 3600 + (now - t0 - 2100) * 2.0 / 3600 + 1000 * 0.1 / 3600
    assert spend.spent == pytest.approx(expected)
    assert spend.per_hour == pytest.approx(2.0)  # node002 runs; node001 is gone
    # The day before saw none of it; a day that started mid-way sees its part.
    later = period_spend(found, Budget(amount=100.0, period="day", utc_offset="-00:30"), now, "second", 3600.0)
    before = (1800 - 2) * 0.5 + (1100 - 10) * 2.0 + (1800 - 1100) * 0.1  # the day starts at 00:30 UTC
    assert later.spent == pytest.approx(expected - before / 3600)


ACCOUNTING_FIELDS = 45


def accounting_line(
    *, job: int, host: str, owner: str, project: str, start: float, end: float, slots: int, queue: str = "all.q"
) -> str:
    f = ["0"] * ACCOUNTING_FIELDS
    f[0], f[1], f[3], f[5] = queue, host, owner, str(job)
    f[8], f[9], f[10] = str(int(start - 60)), str(int(start)), str(int(end))
    f[31], f[33], f[34], f[35] = project, "NONE", str(slots), "0"
    f[39], f[41] = "-l h_rt=3600", "NONE"
    return ":".join(f)


def accounting(t0: float) -> list[str]:
    return [
        "# Version: 8.1.9",
        accounting_line(job=1, host="node001", owner="alice", project="genome", start=t0 + 400, end=t0 + 1400, slots=2),
        accounting_line(job=2, host="node001", owner="bob", project="NONE", start=t0 + 1400, end=t0 + 2400, slots=1),
        accounting_line(
            job=3, host="node002.cluster", owner="bob", project="climate", start=t0 + 300, end=t0 + 900, slots=4
        ),
        accounting_line(job=4, host="master", owner="carol", project="NONE", start=t0, end=t0 + 99, slots=1),
    ]


def test_every_billed_second_goes_to_the_jobs_by_their_slots_or_to_elasticity(tmp_path: Path) -> None:
    j = journal_of(tmp_path, T0)
    found = lives(j.nodes(include_gone=True), j.events(), GROUPS)
    j.close()
    until = T0 + 3000.0
    uses = list(sge_uses(accounting(T0), T0 - 86400, until))
    result = attribute(found, uses, by="user", since=T0 - 86400, until=until, billing="second")
    parts = {(p.key, p.kind): p for p in result.parts}
    # alice: 1000 s of node001's two slots; bob: 1000 s of one slot (500 node-s) and 600 s of
    # half of node002 (300 node-s).
    assert parts[("alice", "jobs")].node_seconds == pytest.approx(1000.0)
    assert parts[("bob", "jobs")].node_seconds == pytest.approx(800.0) and parts[("bob", "jobs")].jobs == 2
    assert parts[("bob", "jobs")].money == pytest.approx(500 * 0.5 / 3600 + 300 * 2.0 / 3600)
    # node001: booting 2..300 (298 s); node002: 10..200 and 2100..2160 (250 s).
    assert parts[("", "booting")].node_seconds == pytest.approx(298 + 250)
    # node002 stopping 1000..1100 (node001 drained from 3600 on: past `until`).
    assert parts[("", "draining")].node_seconds == pytest.approx(100.0)
    # node001 300..3000 less the jobs' 1500; node002 200..1000 less 300, and 2160..3000.
    assert parts[("", "idle")].node_seconds == pytest.approx(1200 + 500 + 840)
    assert parts[("", "volumes")].money == pytest.approx(1000 * 0.1 / 3600)
    assert result.unmatched == 1  # carol's job ran on the master
    # The bill, computed apart, by EC2's rule: node001 2..3000, node002 10..1100 and 2100..3000.
    bill = (2998 * 0.5 + 1090 * 2.0 + 900 * 2.0 + 1000 * 0.1) / 3600
    assert result.billed.money + result.billed.volume_money == pytest.approx(bill)
    assert abs(result.money - bill) < 0.005  # the parts add up to the bill, to the cent
    assert result.node_seconds == pytest.approx(2998 + 1090 + 900)


def test_billed_by_the_hour_the_rest_of_a_started_hour_is_draining(tmp_path: Path) -> None:
    j = journal_of(tmp_path, T0)
    found = lives(j.nodes(include_gone=True), j.events(), GROUPS)
    j.close()
    one: tuple[list[Life], list[Stopped]] = ([life for life in found[0] if life.node == "node001"], [])
    result = attribute(one, [], by="group", since=T0, until=T0 + 86400, billing="hour")
    parts = {(p.key, p.kind): p.node_seconds for p in result.parts}
    assert result.node_seconds == pytest.approx(7200.0) == pytest.approx(billed_seconds(3698, "hour"))
    assert parts[("small", "draining")] == pytest.approx(100 + (7200 - 3698))


def random_case(rng: random.Random) -> tuple[list[Life], list[JobUse]]:
    found: list[Life] = []
    uses: list[JobUse] = []
    for i in range(rng.randint(1, 12)):
        start = rng.uniform(0, 50_000)
        end = None if rng.random() < 0.2 else start + rng.uniform(1, 20_000)
        ready = start + rng.uniform(0, 400)
        slots = rng.choice([None, 1, 2, 8])
        price = rng.choice([0.1, 0.5, 3.7])
        acts = ((start, "booting"), (ready, "idle"))
        found.append(Life(f"n{i % 5}", rng.choice(["a", "b"]), start, end, acts, slots, price))  # type: ignore[arg-type]
        for k in range(rng.randint(0, 6)):
            s = rng.uniform(start - 100, (end or 70_000) + 50)
            uses.append(
                JobUse(f"{i}.{k}", f"n{i % 5}", s, s + rng.uniform(0, 9000), rng.choice([1, 2, 4, 16]), f"u{k % 3}")
            )
    return found, uses


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("billing", ["second", "hour"])
def test_the_parts_always_add_up_to_the_bill_to_the_cent(seed: int, billing: str) -> None:
    rng = random.Random(seed)
    found, uses = random_case(rng)
    since, until = rng.uniform(0, 20_000), rng.uniform(40_000, 90_000)
    for by in ("user", "group"):
        result = attribute((found, []), uses, by=by, since=since, until=until, billing=billing)  # type: ignore[arg-type]
        bill = 0.0
        for life in found:  # EC2's rule on each life, cut to the window
            up = min(life.end if life.end is not None else until, until) - life.start
            billed = life.start + billed_seconds(up, billing)  # type: ignore[arg-type]
            bill += max(0.0, min(billed, until) - max(life.start, since)) * (life.price_per_hour or 0.0) / 3600
        assert abs(result.money - bill) < 0.005
        assert result.node_seconds == pytest.approx(result.billed.node_seconds)
        assert all(p.node_seconds >= -1e-9 for p in result.parts)


# -- the accounting --------------------------------------------------------------------------


def test_sacct_runs_with_fixed_fields_and_its_lines_share_cpus_among_the_nodes() -> None:
    argv = sacct_argv(T0, T0 + 3600)
    assert argv[0] == "sacct" and "--parsable2" in argv and "--allocations" in argv and "--noheader" in argv
    assert "--format=JobID,User,Account,Partition,NodeList,AllocCPUS,Start,End" in argv
    local = datetime.fromtimestamp(T0).strftime("%Y-%m-%dT%H:%M:%S")
    text = "\n".join(
        [
            f"101|alice|genome|cloud|node[001-002]|8|{local}|{datetime.fromtimestamp(T0 + 600).isoformat()}",
            f"102|bob|(null)|cloud|node003|2|{local}|Unknown",  # running still: ends at the window's end
            "103|carol|x|cloud|None assigned|1|Unknown|Unknown",  # never started
        ]
    )
    uses = parse_sacct(text, T0 - 10, T0 + 3600)
    assert [(u.job, u.host, u.slots, u.end - u.start) for u in uses] == [
        ("101", "node001", 4.0, 600.0),
        ("101", "node002", 4.0, 600.0),
        ("102", "node003", 2.0, 3600.0),
    ]
    assert uses[0].user == "alice" and uses[0].project == "genome" and uses[0].queue == "cloud"


# -- elb spend -------------------------------------------------------------------------------

CONFIG = """\
cloud: {provider: local}
state_dir: STATE
policy: {billing: second}
node_groups:
  - {name: small, slots: 2, max_nodes: 4, price_per_hour: 0.5}
  - {name: big, slots: 8, max_nodes: 2, price_per_hour: 2.0, warm_pool: {max_nodes: 1, volume_price_per_hour: 0.1}}
"""


def spend(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    cfg = tmp_path / "elb.yml"
    cfg.write_text(CONFIG.replace("STATE", str(tmp_path)))
    code = main(["spend", "-c", str(cfg), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_elb_spend_reconciles_in_text_json_and_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.time() - 86400.0
    journal_of(tmp_path, t0).close()
    acct = tmp_path / "accounting"
    acct.write_text("\n".join(accounting(t0)) + "\n")
    code, out, _ = spend(tmp_path, capsys, "--by", "project", "--since", "2d", "--json", "--accounting", str(acct))
    assert code == 0
    doc = json.loads(out)
    keys = {(p["key"], p["kind"]) for p in doc["parts"]}
    assert {("genome", "jobs"), ("(unknown)", "jobs"), ("climate", "jobs"), ("", "idle")} <= keys
    assert abs(doc["total"]["dollars"] - doc["billed"]["dollars"]) < 0.005
    assert doc["total"]["node_hours"] == pytest.approx(doc["billed"]["node_hours"])
    code, out, _ = spend(tmp_path, capsys, "--by", "group", "--csv", "--accounting", str(acct))
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and rows[0]["group"] in ("small", "big")
    parts = sum(float(r["dollars"]) for r in rows if r["kind"] not in ("total", "billed"))
    billed = next(float(r["dollars"]) for r in rows if r["kind"] == "billed")
    assert abs(parts - billed) < 0.005
    code, out, _ = spend(tmp_path, capsys, "--accounting", str(acct))
    assert code == 0 and "alice" in out and "cost of elasticity" in out and "billed:" in out


def test_elb_spend_says_in_one_line_when_the_accounting_cannot_be_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal_of(tmp_path, time.time() - 86400.0).close()
    code, out, err = spend(tmp_path, capsys, "--accounting", str(tmp_path / "missing"))
    assert code == 4 and out == ""
    assert err.startswith("elb: cannot read Grid Engine's accounting file") and len(err.splitlines()) == 1
    bad = tmp_path / "bad"
    bad.write_text("1:2:3\n")
    code, _, err = spend(tmp_path, capsys, "--accounting", str(bad))
    assert code == 4 and "expected 45 fields" in err


def _names(values: Sequence[object]) -> list[str]:
    return [str(v) for v in values]


def test_the_config_reads_for_spend(tmp_path: Path) -> None:
    cfg = tmp_path / "elb.yml"
    cfg.write_text(CONFIG.replace("STATE", str(tmp_path)))
    assert _names([g.name for g in load_config(cfg).groups(1).groups]) == ["small", "big"]


def test_the_spend_read_again_keeps_the_gone_nodes_and_reads_a_reused_name_anew(tmp_path: Path) -> None:
    t0 = datetime.fromisoformat("2027-01-15T00:00:00+00:00").timestamp()
    cfg_path = tmp_path / "elb.yml"
    cfg_path.write_text(CONFIG.replace("STATE", str(tmp_path)))
    cfg = load_config(cfg_path).model_copy(deep=True)
    policy = cfg.policy.model_copy(update={"budget": Budget(amount=100.0, period="day")})
    cfg = cfg.model_copy(update={"policy": policy})
    j = journal_of(tmp_path, t0)
    now = t0 + 3 * 3600.0
    cache = SpendCache()
    first = read_spend(j, cfg, now, cache=cache)
    assert first == read_spend(j, cfg, now)  # the same as a read without a cache
    assert set(cache.gone) == {"node001", "node003"}
    # node001's name used again: its record changes, and its new stretch is read.
    j.record("node001", S.REQUESTED, t0 + 7200, group="small")
    j.record("node001", S.RUNNING, t0 + 7210, launched_at=t0 + 7205, instance_id="i-9")
    again = read_spend(j, cfg, now, cache=cache)
    j.close()
    assert again is not None and first is not None
    # Its old stretch now starts at its running event (t0 + 5), not at the record's launch time
    # (t0 + 2), which is the new instance's.
    assert again.spent == pytest.approx(first.spent - 3 * 0.5 / 3600 + (now - t0 - 7205) * 0.5 / 3600)
    assert again.per_hour == pytest.approx(first.per_hour + 0.5)


SLURM_CONFIG = """\
cloud: {provider: local}
state_dir: STATE
scheduler: slurm
slurm: {bin_dir: BIN, timeout: 5}
policy: {billing: second}
node_groups:
  - {name: small, slots: 2, max_nodes: 4, price_per_hour: 0.5}
  - {name: big, slots: 8, max_nodes: 2, price_per_hour: 2.0, warm_pool: {max_nodes: 1, volume_price_per_hour: 0.1}}
"""


def test_elb_spend_reads_slurm_s_sacct(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.time() - 86400.0
    journal_of(tmp_path, t0).close()
    start = datetime.fromtimestamp(t0 + 400).strftime("%Y-%m-%dT%H:%M:%S")
    end = datetime.fromtimestamp(t0 + 1400).strftime("%Y-%m-%dT%H:%M:%S")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sacct = bin_dir / "sacct"
    args = tmp_path / "args"
    sacct.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {args}\necho "7|alice|genome|cloud|node001|2|{start}|{end}"\n')
    sacct.chmod(0o755)
    cfg = tmp_path / "elb.yml"
    cfg.write_text(SLURM_CONFIG.replace("STATE", str(tmp_path)).replace("BIN", str(bin_dir)))
    assert main(["spend", "-c", str(cfg), "--json", "--since", "2d"]) == 0
    doc = json.loads(capsys.readouterr().out)
    alice = next(p for p in doc["parts"] if p["key"] == "alice")
    assert alice["node_hours"] == pytest.approx(1000 / 3600) and alice["jobs"] == 1
    assert abs(doc["total"]["dollars"] - doc["billed"]["dollars"]) < 0.005
    given = args.read_text().splitlines()
    assert given[:5] == ["--allusers", "--allocations", "--noheader", "--parsable2", f"--format={SACCT_FORMAT}"]
    sacct.write_text("#!/bin/sh\necho 'sacct: error: Slurm accounting storage is disabled' >&2\nexit 1\n")
    assert main(["spend", "-c", str(cfg)]) == 4
    err = capsys.readouterr().err
    assert err.startswith("elb: cannot read Slurm's accounting: sacct") and "storage is disabled" in err
