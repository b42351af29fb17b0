"""The simulator with node groups: jobs mapped to groups by what an SWF log records (requested
memory, queue, partition), placed by the live demand model, costs per group, and jobs no group
can run kept in the replay and reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elb.cli.main import main
from elb.core.policy.grouped import GroupedPolicy
from elb.core.spend import Billing
from elb.simulate.engine import SimSettings, sim_config
from elb.simulate.groups import SimGroupsError, assign, footprint, job_value, load_groups, one_group
from elb.simulate.runner import build_policy, prepare, replay
from elb.simulate.swf import SimJob, Workload, parse_text

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "simulate-two-groups.yml"
GB = 1024 * 1024  # kilobytes, as SWF field 10 counts them

GROUPS = """\
node_groups:
  - {name: compute, slots: 8, offers: {h_vmem: 32G}, max_nodes: 4, price_per_hour: 0.34}
  - {name: bigmem, slots: 8, queues: [all.q, big.q], offers: {h_vmem: 256G}, max_nodes: 2, price_per_hour: 2.0}
swf:
  queues: {2: big.q}
  partitions: {7: gpu.q}
"""


def swf_line(job: int, submit: int, run: int, procs: int, mem_kb: int = -1, queue: int = -1, part: int = -1) -> str:
    # 18 fields: id submit wait run alloc cpu usedmem reqprocs reqtime reqmem status uid gid exe queue part prec think
    return f"{job} {submit} 0 {run} {procs} -1 -1 {procs} {run} {mem_kb} 1 1 1 1 {queue} {part} -1 -1"


@pytest.fixture
def groups_file(tmp_path: Path) -> Path:
    path = tmp_path / "groups.yml"
    path.write_text(GROUPS)
    return path


def test_swf_fields_10_15_16_are_read() -> None:
    wl = parse_text(swf_line(1, 0, 100, 2, mem_kb=4 * GB, queue=2, part=7) + "\n" + swf_line(2, 5, 100, 1))
    one, two = wl.jobs
    assert (one.memory_kb, one.queue, one.partition) == (4 * GB, 2, 7)
    assert (two.memory_kb, two.queue, two.partition) == (None, None, None)  # -1: unknown


def test_a_job_becomes_what_qstat_r_shows(groups_file: Path) -> None:
    sim = load_groups(groups_file)
    value, binding = job_value(SimJob(1, 0, 10, 4, memory_kb=2 * GB, queue=2), sim.mapping)
    assert dict(value.hard_requests) == {"h_vmem": f"{2 * GB}K"} and value.pe == "mpi" and value.pe_range == "4"
    assert binding is not None and binding.hard_queues == ("big.q",)
    value, binding = job_value(SimJob(2, 0, 10, 1, queue=9), sim.mapping)  # a queue number not mapped
    assert dict(value.hard_requests) == {} and value.pe is None and binding is None


def test_each_job_goes_to_the_cheapest_group_that_can_run_it_or_none(groups_file: Path) -> None:
    sim = load_groups(groups_file)
    jobs = [
        SimJob(1, 0, 10, 1, memory_kb=2 * GB),  # fits both: compute is cheaper
        SimJob(2, 0, 10, 1, memory_kb=100 * GB),  # only bigmem has 100G
        SimJob(3, 0, 10, 1, queue=2),  # bound to big.q: only bigmem joins it
        SimJob(4, 0, 10, 1, memory_kb=400 * GB),  # more than any node
        SimJob(5, 0, 10, 1, partition=7),  # gpu.q: no group joins it
        SimJob(6, 0, 10, 40),  # 40 slots: compute holds 32 at its max, bigmem 16
    ]
    got = [(a.group, a.footprint) for a in assign(jobs, sim)]
    assert got == [("compute", 1), ("bigmem", 4), ("bigmem", 1), (None, 0), (None, 0), (None, 0)]
    reasons = [a.reason for a in assign(jobs, sim)]
    assert "more than any node group offers" in reasons[3] and "h_vmem" in reasons[3]
    assert "bound to queue gpu.q" in reasons[4]
    assert "more than any group gives at its max_nodes (compute: 32 at 4, bigmem: 16 at 2)" in reasons[5]


def test_footprint_counts_memory_as_slot_shares(groups_file: Path) -> None:
    sim = load_groups(groups_file)
    compute = sim.groups.groups[0]  # 8 slots, 32G: 4G a slot
    assert footprint(SimJob(1, 0, 1, 2), compute, sim.mapping) == 2  # no memory asked
    assert footprint(SimJob(1, 0, 1, 2, memory_kb=4 * GB), compute, sim.mapping) == 2  # its share
    assert footprint(SimJob(1, 0, 1, 1, memory_kb=10 * GB), compute, sim.mapping) == 3  # 10G: 3 shares
    assert footprint(SimJob(1, 0, 1, 3, memory_kb=10 * GB), compute, sim.mapping) == 8  # 30G: the node
    assert footprint(SimJob(1, 0, 1, 4, memory_kb=10 * GB), compute, sim.mapping) == 16  # 3 a node: 2 nodes


def test_a_replay_with_two_groups_runs_each_job_on_its_group_and_prices_each(groups_file: Path) -> None:
    sim = load_groups(groups_file)
    jobs = [
        SimJob(1, 0, 3600, 8, memory_kb=1 * GB),
        SimJob(2, 60, 3600, 1, memory_kb=100 * GB),
        SimJob(3, 120, 1800, 2, memory_kb=1 * GB),
        SimJob(4, 180, 600, 1, memory_kb=400 * GB),  # unservable: stays, never starts, not demand
    ]
    prepared = prepare(Workload("hand", jobs), 8, None, groups=sim)
    assert [j.job_id for j, _ in prepared.unservable] == [4] and len(prepared.jobs) == 4
    assert set(prepared.group_floors) == {"compute", "bigmem"}
    policy = build_policy("elb", billing="second", slots_per_node=8, boot_time=300, max_nodes=6, groups=sim)
    assert isinstance(policy, GroupedPolicy)
    settings = SimSettings(slots_per_node=8, max_nodes=prepared.max_nodes, boot_time=300, record=True)
    m, out = replay(prepared, policy, settings, billing="second", price=1.0)
    nodes = {life.name: life.group for life in out.nodes}
    ran_on = {p.job_id: {nodes[n] for n, _ in p.nodes} for p in out.placements}
    assert ran_on == {1: {"compute"}, 2: {"bigmem"}, 3: {"compute"}}
    assert [j.job_id for j, _ in out.unservable] == [4] and out.never_started == 0 and m.unservable == 1
    costs = {c.group: c for c in m.groups}
    assert costs["compute"].node_hours > 0 and costs["bigmem"].node_hours > 0
    assert costs["bigmem"].cost == pytest.approx(costs["bigmem"].node_hours * 2.0)
    assert costs["compute"].cost == pytest.approx(costs["compute"].node_hours * 0.34)
    assert m.cost == pytest.approx(costs["compute"].cost + costs["bigmem"].cost)
    assert not m.saturated


def test_the_cli_prints_cost_per_group_and_the_unservable_jobs(
    tmp_path: Path, groups_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "two.swf"
    lines = [swf_line(n, n * 300, 1800, 1 + n % 3, mem_kb=(100 if n % 4 == 0 else 2) * GB) for n in range(1, 41)]
    lines.append(swf_line(99, 500, 600, 1, mem_kb=400 * GB))
    log.write_text("\n".join(lines) + "\n")
    assert main(["simulate", str(log), "--groups", str(groups_file), "--policies", "elb,slurm"]) == 0
    out = capsys.readouterr()
    assert "2 node groups (compute: 8 slots h_vmem=32G, max 4, 0.34/h, bigmem: 8 slots" in out.out
    assert "unservable: 1 jobs no node group can run" in out.out
    rows = [line.split() for line in out.out.splitlines() if line.startswith(("elb ", "slurm "))]
    assert {(r[0], r[1]) for r in rows if len(r) == 7} == {
        ("elb", "compute"),
        ("elb", "bigmem"),
        ("slurm", "compute"),
        ("slurm", "bigmem"),
    }
    assert "unservable job 99: requests h_vmem=" in out.err
    assert main(["simulate", str(log), "--groups", str(groups_file), "--policies", "elb", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["unservable"]["jobs"] == 1 and [g["name"] for g in doc["groups"]] == ["compute", "bigmem"]
    (elb,) = doc["results"]
    assert {g["group"] for g in elb["groups"]} == {"compute", "bigmem"} and elb["unservable"] == 1


def test_the_documented_example_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sim = load_groups(EXAMPLE)
    assert [g.name for g in sim.groups.groups] == ["compute", "mpi"]
    log = tmp_path / "mixed.swf"
    log.write_text("\n".join(swf_line(n, n * 200, 1200, 1 if n % 5 else 32) for n in range(1, 31)) + "\n")
    assert main(["simulate", str(log), "--groups", str(EXAMPLE), "--policies", "elb", "--json"]) == 0
    (elb,) = json.loads(capsys.readouterr().out)["results"]
    spent = {g["group"]: g["node_hours"] for g in elb["groups"]}
    assert spent["compute"] > 0 and spent["mpi"] > 0  # serial jobs on compute, 32-slot ones on mpi


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("node_groups: []\n", "node_groups"),
        ("node_groups: [{name: a, slots: 8, max_nodes: 2}]\nswf: {queue: {1: a.q}}\n", "swf.queue: unknown key"),
        ("node_groups: [{name: a, slots: 8, max_nodes: 2, offers: {gpu: 1}}]\n", "offers.gpu: Input should"),
        ("node_groups: [{name: a, slots: 8, max_nodes: 2}]\nnode_groups: []\n", "line 2"),
        ("- a\n", "top level"),
    ],
)
def test_a_bad_groups_file_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "g.yml"
    path.write_text(text)
    with pytest.raises(SimGroupsError, match="groups file") as err:
        load_groups(path)
    assert message in str(err.value)


def test_groups_and_max_nodes_together_are_refused(
    tmp_path: Path, groups_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "one.swf"
    log.write_text(swf_line(1, 0, 100, 1) + "\n")
    assert main(["simulate", str(log), "--groups", str(groups_file), "--max-nodes", "3"]) == 2
    assert "give max_nodes in the groups file" in capsys.readouterr().err


@pytest.mark.parametrize("billing", ["second", "hour"])
def test_the_planner_reads_the_replays_billing(billing: Billing) -> None:
    """The planner's own rules that depend on billing (idle nodes kept while launches are held:
    per second only) see the replay's, not the config's default."""
    settings = SimSettings(billing=billing)
    cfg = sim_config(settings, one_group(settings.slots_per_node, 10), 10)
    assert cfg.policy.billing == billing
