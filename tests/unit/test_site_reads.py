"""The site's configuration is read through the SGE seam, bounded and cached: a pass with jobs
waiting reads it at most once every SITE_TTL seconds; a failed read launches nothing and is
tried again next pass; a site with more PEs than elb reads is refused, not half read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from elb.core.config import parse_config
from elb.schedulers.sge.commands import MAX_PES, CommandResult, Runner, SgeCommands
from elb.schedulers.sge.config import SgeConfig
from elb.schedulers.sge.driver import GridEngine
from elb.schedulers.sge.errors import SgeError
from elb.schedulers.sge.servable import SITE_TTL, SiteCache
from elb.schedulers.sge.site import Site
from elb.service.daemon import Balancer
from elb.service.journal import Journal
from tests.unit.factories import T0, pending
from tests.unit.fakes import FakeCloud, FakeProvisioner, FakeSge, default_site

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "recorded"


def test_a_pass_reads_the_site_once_per_ttl(tmp_path: Path) -> None:
    cfg = parse_config({"state_dir": str(tmp_path), "policy": {"max_nodes": 1, "slots_per_node": 1}})
    sge = FakeSge(T0, jobs=[pending(1, 600, slots=1), pending(2, 600, slots=1)])
    bal = Balancer(
        cfg,
        scheduler=GridEngine(cfg, sge),
        journal=Journal(cfg.journal_path),
        cloud=FakeCloud(T0),
        provisioner=FakeProvisioner(sge),
    )
    for step in range(4):  # 4 passes a minute apart: one read
        sge.now = T0 + 60 * step
        assert bal.run_pass().ok
    assert sge.calls.count("qconf site") == 1
    sge.now = T0 + SITE_TTL + 1
    bal.run_pass()
    assert sge.calls.count("qconf site") == 2


class Reader:
    def __init__(self) -> None:
        self.reads = 0
        self.fail = False

    def read_site(self) -> Site:
        self.reads += 1
        if self.fail:
            raise SgeError("qconf: unable to contact qmaster")
        return default_site()


def test_a_failed_read_is_not_cached_and_the_clock_going_back_reads_again() -> None:
    cache, reader = SiteCache(ttl=100), Reader()
    reader.fail = True
    with pytest.raises(SgeError):
        cache.get(reader, 1000.0)
    reader.fail = False
    first = cache.get(reader, 1001.0)
    assert cache.get(reader, 1050.0) is first and reader.reads == 2
    cache.get(reader, 900.0)  # the clock went back: read again
    assert reader.reads == 3


def qconf_runner(pe_count: int, calls: list[tuple[str, ...]]) -> Runner:
    names = "".join(f"pe{n}\n" for n in range(pe_count)).encode()
    smp = (RECORDED / "qconf-sp-smp.txt").read_text()

    def run(argv: Sequence[str], *, timeout: float, env: Mapping[str, str]) -> CommandResult:
        args = tuple(argv[1:])
        calls.append(args)
        if args == ("-spl",):
            out = names
        elif args[0] == "-sp":
            out = smp.replace("pe_name            smp", f"pe_name            {args[1]}").encode()
        elif args == ("-sc",):
            out = (RECORDED / "qconf-sc.txt").read_bytes()
        else:
            out = (RECORDED / "qconf-se-global.txt").read_bytes()
        return CommandResult(tuple(argv), 0, out, "")

    return run


def commands(runner: Runner, tmp_path: Path) -> SgeCommands:
    qconf = tmp_path / "qconf"
    qconf.write_text("#!/bin/sh\nexit 1\n")
    qconf.chmod(0o755)
    return SgeCommands(SgeConfig(bin_dir=tmp_path), runner=runner)


def test_read_site_reads_every_pe_up_to_the_bound(tmp_path: Path) -> None:
    calls: list[tuple[str, ...]] = []
    site = commands(qconf_runner(3, calls), tmp_path).read_site()
    assert sorted(site.pes) == ["pe0", "pe1", "pe2"]
    assert calls == [("-spl",), ("-sp", "pe0"), ("-sp", "pe1"), ("-sp", "pe2"), ("-sc",), ("-se", "global")]


def test_more_pes_than_the_bound_is_refused_before_reading_them(tmp_path: Path) -> None:
    calls: list[tuple[str, ...]] = []
    with pytest.raises(SgeError, match=rf"{MAX_PES + 1} parallel environments, more than elb reads \({MAX_PES}\)"):
        commands(qconf_runner(MAX_PES + 1, calls), tmp_path).read_site()
    assert calls == [("-spl",)]
