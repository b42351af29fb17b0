"""The node group model: what a group may say (its common keys, Grid Engine's and EC2's, written
flat and read back from the options each holds), and the default group built from today's settings."""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from elb.clouds.ec2.config import LaunchTemplate
from elb.clouds.ec2.groupoptions import Ec2GroupOptions, ec2_options
from elb.clouds.local import LocalGroupOptions
from elb.core.config import Config, parse_config
from elb.core.drivers import DeclaresNodePlays
from elb.core.groupoptions import DescribesDefaultGroup, cloud_options, scheduler_options
from elb.core.groups import GroupOptions, NodeGroup, NodeGroups, SchedulerGroupOptions, default_group, memory_bytes
from elb.core.model import Job
from elb.core.registry import CLOUDS, SCHEDULERS
from elb.schedulers.sge.complexes import parse_complexes, parse_memory
from elb.schedulers.sge.demand import JobBinding, Servable, Site, Unservable, check_offers, place
from elb.schedulers.sge.groupoptions import SgeGroupOptions, sge_options
from elb.schedulers.sge.pe import parse_pe
from elb.schedulers.sge.states import job_phase
from elb.schedulers.slurm import conf as slurm_conf

BIGMEM: dict[str, Any] = {
    "name": "bigmem",
    "queues": ["all.q", "big.q"],
    "hostgroup": "@bigmem",
    "slots": 16,
    "offers": {"h_vmem": "120G", "arch": "lx-amd64"},
    "memory": "128G",
    "instance_types": ["r5.4xlarge", "r5a.4xlarge"],
    "min_nodes": 0,
    "max_nodes": 4,
    "market": "spot",
    "price_per_hour": 0.4,
    "pes": ["smp", "mpi*"],
    "placement_group": True,
}


def test_full_group() -> None:
    g = NodeGroup(**BIGMEM)
    assert (g.name, g.slots, g.max_nodes, g.market, g.price_per_hour) == ("bigmem", 16, 4, "spot", 0.4)
    assert ec2_options(g).instance_types == ["r5.4xlarge", "r5a.4xlarge"]
    assert sge_options(g).offers == {"h_vmem": "120G", "arch": "lx-amd64"}


def test_a_group_is_dumped_flat_as_a_config_writes_it() -> None:
    g = NodeGroup(**BIGMEM)
    dumped = g.model_dump()
    assert {k: dumped[k] for k in BIGMEM} == BIGMEM
    assert "scheduler_options" not in dumped and "cloud_options" not in dumped
    assert NodeGroup.model_validate(dumped) == g


def test_defaults() -> None:
    g = NodeGroup(name="default", slots=8, max_nodes=10)
    sge, ec2 = sge_options(g), ec2_options(g)
    assert (sge.queues, sge.hostgroup, sge.offers, sge.pes, g.min_nodes) == (["all.q"], "@allhosts", {}, ["*"], 0)
    assert (ec2.instance_types, ec2.launch_template, g.market, g.price_per_hour) == (None, None, "on-demand", None)
    assert ec2.placement_group is False


SLURM = {"scheduler": "slurm", "cloud": "local"}


def test_the_keys_go_to_the_options_of_the_scheduler_and_cloud_named() -> None:
    """Read for Slurm (no settings of its own) on the local cloud (EC2's keys, which it stands in
    for), a group takes the common keys and EC2's: Grid Engine's are unknown there."""
    slurm = {"scheduler": "slurm", "cloud": "local"}
    g = NodeGroup.model_validate(
        {"name": "a", "slots": 4, "max_nodes": 2, "instance_types": ["c5.large"]}, context=slurm
    )
    assert type(g.scheduler_options) is SchedulerGroupOptions
    assert g.cloud_options == LocalGroupOptions(instance_types=["c5.large"])
    with pytest.raises(
        ValidationError,
        match=r"(?s)queues\n  a setting of the sge scheduler's node groups; this config's scheduler is slurm",
    ):
        NodeGroup.model_validate({"name": "a", "slots": 4, "max_nodes": 2, "queues": ["all.q"]}, context=slurm)
    with pytest.raises(TypeError, match="node group 'a' holds no Grid Engine settings"):
        sge_options(g)


def test_another_schedulers_key_is_refused_at_the_key_nested_or_not() -> None:
    """The refusal is placed at the key (``elb.core.keyerrors.refused``), and pydantic prefixes
    the group's place in a config: a config error names the key at its line."""
    with pytest.raises(ValidationError) as err:
        NodeGroup.model_validate({"name": "a", "slots": 4, "max_nodes": 2, "queues": ["all.q"]}, context=SLURM)
    assert [(e["type"], e["loc"], e["input"]) for e in err.value.errors()] == [("other_owner", ("queues",), ["all.q"])]
    group = {"name": "a", "slots": 4, "max_nodes": 2, "hostgroup": "@big"}
    with pytest.raises(ValidationError) as err:
        Config.model_validate({"scheduler": "slurm", "node_groups": [group]})
    assert [(e["type"], e["loc"]) for e in err.value.errors()] == [("other_owner", ("node_groups", 0, "hostgroup"))]


def test_what_a_module_may_declare_is_asked_of_it_by_its_protocol() -> None:
    """``group_options(cfg)`` and ``node_plays(cfg)`` are typed optional declarations, asked for
    by ``isinstance``: Grid Engine and EC2 describe their one group, the local cloud does not (its
    group options take EC2's keys, and read none); both shipped drivers declare their node plays."""
    sge, slurm = (importlib.import_module(SCHEDULERS[n]) for n in ("sge", "slurm"))
    ec2, local = (importlib.import_module(CLOUDS[n]) for n in ("ec2", "local"))
    assert isinstance(sge, DescribesDefaultGroup) and isinstance(ec2, DescribesDefaultGroup)
    assert not isinstance(slurm, DescribesDefaultGroup) and not isinstance(local, DescribesDefaultGroup)
    assert isinstance(sge, DeclaresNodePlays) and isinstance(slurm, DeclaresNodePlays)
    cfg = parse_config({"scheduler": "slurm", "cloud": {"provider": "local"}})
    assert cloud_options("local").of_config(cfg) == LocalGroupOptions()
    assert scheduler_options("slurm").of_config(cfg) == SchedulerGroupOptions()
    sized = parse_config({"sge": {"queue": "big.q"}, "cloud": {"ec2": {"instance_types": ["c5.large"]}}})
    assert scheduler_options(None).of_config(sized) == SgeGroupOptions(queues=["big.q"])
    assert cloud_options("ec2").of_config(sized) == Ec2GroupOptions(instance_types=["c5.large"])


def test_a_cloud_without_options_takes_none_of_ec2s_keys() -> None:
    g = NodeGroup(name="a", slots=4, max_nodes=2)
    assert type(g.cloud_options) is Ec2GroupOptions  # the default cloud's
    bare = NodeGroup.model_validate(
        {"name": "a", "slots": 4, "max_nodes": 2, "cloud_options": GroupOptions()}, context={"cloud": "local"}
    )
    assert type(bare.cloud_options) is GroupOptions
    with pytest.raises(TypeError, match="node group 'a' holds no EC2 settings"):
        ec2_options(bare)


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ("512", 512.0),
        ("2k", 2e3),
        ("2K", 2048.0),
        ("1.5m", 1.5e6),
        ("3M", 3 * 2.0**20),
        ("128G", 128 * 2.0**30),
        ("32g", 32e9),
        ("1t", 1e12),
        ("2T", 2 * 2.0**40),
    ],
)
def test_a_groups_memory_is_a_size_read_by_one_rule(size: str, expected: float) -> None:
    """``memory`` is a size, k m g t powers of 1000, K M G T of 1024: every scheduler reads it by
    ``memory_bytes`` (Slurm's RealMemory check), and Grid Engine, which takes it as the implied
    mem_total of a group's host, reads the same text to the same bytes."""
    assert NodeGroup(name="a", slots=1, max_nodes=1, memory=size).memory == size
    assert memory_bytes(size) == expected
    assert slurm_conf.memory_bytes is memory_bytes
    assert parse_memory(size) == expected


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ({"name": "bigmem-lt"}, LaunchTemplate(name="bigmem-lt", version="$Default")),
        ({"id": "lt-0abc123def4567890", "version": "3"}, LaunchTemplate(id="lt-0abc123def4567890", version="3")),
        ({"name": "bigmem-lt", "version": "$Latest"}, LaunchTemplate(name="bigmem-lt", version="$Latest")),
    ],
)
def test_launch_template(template: dict[str, str], expected: LaunchTemplate) -> None:
    g = NodeGroup(**{**BIGMEM, "instance_types": None, "launch_template": template})
    assert ec2_options(g).launch_template == expected


INVALID = [
    pytest.param({"slots": 0}, "slots", id="no-slots"),
    pytest.param({"slots": "16"}, "Input should be a valid integer", id="strict-int"),
    pytest.param({"min_nodes": 5}, "min_nodes (5) is greater than max_nodes (4)", id="min-over-max"),
    pytest.param({"max_nodes": -1}, "greater than or equal to 0", id="negative-max"),
    pytest.param({"launch_template": {"name": "lt1"}}, "instance_types or launch_template, not both", id="both"),
    pytest.param(
        {"instance_types": None, "launch_template": {"name": "lt1", "id": "lt-0123456789abcdef0"}},
        "exactly one",
        id="template-id-and-name",
    ),
    pytest.param({"instance_types": None, "launch_template": {"version": "2"}}, "exactly one", id="template-no-key"),
    pytest.param(
        {"instance_types": None, "launch_template": {"name": "lt1", "version": "latest"}}, "version", id="version"
    ),
    pytest.param({"instance_types": []}, "at least 1 item", id="no-types"),
    pytest.param({"instance_types": ["r5.4xlarge", "r5.4xlarge"]}, "'r5.4xlarge' is listed twice", id="dup-type"),
    pytest.param({"instance_types": ["R5 4xlarge"]}, "instance_types.0", id="bad-type"),
    pytest.param({"price_per_hour": 0.0}, "greater than 0", id="free"),
    pytest.param({"price_per_hour": float("inf")}, "price_per_hour", id="infinite-price"),
    pytest.param({"price_per_hour": float("nan")}, "price_per_hour", id="nan-price"),
    pytest.param({"market": "reserved"}, "'on-demand' or 'spot'", id="market"),
    pytest.param({"offers": {"slots": "16"}}, "slots is the group's own 'slots' setting", id="offers-slots"),
    pytest.param({"offers": {"h vmem": "1G"}}, "'h vmem' is not a complex name", id="offers-key"),
    pytest.param({"offers": {"h_vmem": "1 G"}}, "h_vmem='1 G' is not one value", id="offers-value"),
    pytest.param({"offers": {"gpu": 1}}, "Input should be a valid string", id="offers-strict"),
    pytest.param({"queues": ["all.q@node001"]}, "queues.0", id="queue-instance"),
    pytest.param({"queues": []}, "at least 1 item", id="no-queue"),
    pytest.param({"hostgroup": "allhosts"}, "hostgroup", id="hostgroup-without-at"),
    pytest.param({"memory": "lots"}, "memory", id="memory"),
    pytest.param({"pes": ["smp", "smp"]}, "'smp' is listed twice", id="dup-pe"),
    pytest.param({"pes": ["mpi,smp"]}, "'mpi,smp' is not a parallel environment name", id="pe-list"),
    pytest.param({"name": "big mem"}, "name", id="name"),
    pytest.param({"spot": True}, "Extra inputs are not permitted", id="extra-key"),
]


@pytest.mark.parametrize(("change", "message"), INVALID)
def test_invalid_group(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=rf"(?s).*{re.escape(message)}"):
        NodeGroup(**{**BIGMEM, **change})


def _g(name: str, **kw: Any) -> NodeGroup:
    return NodeGroup(**{"name": name, "slots": 8, "max_nodes": 4, **kw})


@pytest.mark.parametrize(
    ("gs", "max_nodes", "message"),
    [
        pytest.param([], None, "at least 1 item", id="empty"),
        pytest.param([_g("a"), _g("a")], None, "two node groups are named 'a'", id="duplicate-name"),
        pytest.param(
            [_g("a", price_per_hour=0.3), _g("b")],
            None,
            "price_per_hour is set on a but not on b: set it on every group or on none",
            id="mixed-prices",
        ),
        pytest.param(
            [_g("a", min_nodes=2), _g("b", min_nodes=2)], 3, "min_nodes add up to 4, more than max_nodes (3)", id="min"
        ),
    ],
)
def test_invalid_groups(gs: list[NodeGroup], max_nodes: int | None, message: str) -> None:
    with pytest.raises(ValidationError, match=rf"(?s).*{re.escape(message)}"):
        NodeGroups(groups=gs, max_nodes=max_nodes)


@pytest.mark.parametrize(
    ("max_nodes", "total", "of_a", "of_b"),
    [(None, 12, 4, 8), (6, 6, 4, 6), (3, 3, 3, 3)],
)
def test_global_cap(max_nodes: int | None, total: int, of_a: int, of_b: int) -> None:
    a, b = _g("a"), _g("b", max_nodes=8)
    gs = NodeGroups(groups=[a, b], max_nodes=max_nodes)
    assert (gs.total_max_nodes, gs.max_nodes_of(a), gs.max_nodes_of(b)) == (total, of_a, of_b)
    assert gs.get("b") is b
    assert gs.get("c") is None
    assert len(gs) == 2


def test_default_group_from_todays_settings() -> None:
    g = default_group(
        slots_per_node=8,
        max_nodes=10,
        min_nodes=1,
        scheduler_options=SgeGroupOptions(queues=["work.q"], hostgroup="@workers"),
        cloud_options=Ec2GroupOptions(instance_types=["c5.2xlarge"]),
    )
    assert g == NodeGroup.model_validate(
        {
            "name": "default",
            "queues": ["work.q"],
            "hostgroup": "@workers",
            "slots": 8,
            "instance_types": ["c5.2xlarge"],
            "min_nodes": 1,
            "max_nodes": 10,
        }
    )
    assert sge_options(g).pes == ["*"]
    assert sge_options(g).offers == {}


def test_default_group_without_instance_types_uses_the_clouds_defaults() -> None:
    g = default_group(slots_per_node=4, max_nodes=2)
    sge, ec2 = sge_options(g), ec2_options(g)
    assert (sge.queues, sge.hostgroup, ec2.instance_types, ec2.launch_template) == (["all.q"], "@allhosts", None, None)


def test_default_group_refuses_bad_settings() -> None:
    with pytest.raises(ValidationError, match="min_nodes \\(3\\) is greater than max_nodes \\(2\\)"):
        default_group(slots_per_node=4, max_nodes=2, min_nodes=3)


# -- the worked example of docs/groups.md ---------------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "groups.md"
HANDMADE = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "handmade"


def _doc_groups() -> NodeGroups:
    """The worked example, read as a config file."""
    text = DOC.read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    return parse_config(yaml.safe_load(block)).groups(1)


def _doc_rows() -> list[tuple[str, str]]:
    rows = []
    for line in DOC.read_text().splitlines():
        m = re.fullmatch(r"\| `(qsub [^`]*)` \| (.*) \|", line)
        if m:
            rows.append((m.group(1), m.group(2)))
    return rows


def _job(command: str) -> tuple[Job, JobBinding]:
    args = shlex.split(command)[1:-1]
    requests: dict[str, str] = {}
    pe = pe_range = None
    queues: tuple[str, ...] = ()
    while args:
        flag = args.pop(0)
        if flag == "-l":
            key, _, value = args.pop(0).partition("=")
            requests[key] = value
        elif flag == "-pe":
            pe, pe_range = args.pop(0), args.pop(0)
        elif flag == "-q":
            queues = (*queues, args.pop(0))
        else:
            raise AssertionError(f"the test does not know {flag}")
    slots = int(pe_range) if pe_range else 1
    return Job(
        1, "job.sh", "sgeuser", "qw", job_phase("qw"), slots, pe=pe, pe_range=pe_range, hard_requests=requests
    ), JobBinding(hard_queues=queues)


def test_doc_example_is_valid() -> None:
    gs = _doc_groups()
    site = Site(
        parse_complexes((HANDMADE / "qconf-sc-site.txt").read_text()),
        {"smp": parse_pe((HANDMADE / "qconf-sp-smp.txt").read_text())},
    )
    check_offers(gs, site)
    assert [g.name for g in gs.groups] == ["default", "bigmem"]


@pytest.mark.parametrize(("command", "placement"), _doc_rows())
def test_doc_example_placements(command: str, placement: str) -> None:
    site = Site(
        parse_complexes((HANDMADE / "qconf-sc-site.txt").read_text()),
        {
            "smp": parse_pe((HANDMADE / "qconf-sp-smp.txt").read_text()),
            "mpi": parse_pe((HANDMADE / "qconf-sp-mpi.txt").read_text()),
        },
    )
    j, binding = _job(command)
    got = place(j, _doc_groups(), site, 0.0, binding=binding)
    reason = re.search(r'"(.*)"', placement)
    assert reason is not None
    if placement.startswith("never:"):
        assert got == Unservable(reason.group(1))
    else:
        assert isinstance(got, Servable)
        assert placement.startswith(f"`{got.group.name}`")
        assert got.reason == reason.group(1)


def test_doc_example_has_rows() -> None:
    assert len(_doc_rows()) >= 6
