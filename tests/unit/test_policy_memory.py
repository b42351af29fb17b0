"""Policies keep no memory at module level: what a policy object remembers of the last cluster
state it saw is its own (``elb.core.policy.view.ViewCache``), so two policies, two replays or a
replay and the daemon never see each other's state."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import elb.core.policy
from elb.core.config import ClusterConfig, PolicyConfig
from elb.core.model import History, Job
from elb.core.policy import POLICIES, make_policy
from elb.core.policy.view import ViewCache, cluster_view
from elb.core.state import join
from elb.schedulers.sge.states import job_phase
from tests.unit.factories import T0, host, node, pending, snap

MODULES = sorted(m.name for m in pkgutil.iter_modules(elb.core.policy.__path__, "elb.core.policy."))


@pytest.mark.parametrize("name", MODULES)
def test_no_mutable_state_at_module_level(name: str) -> None:
    module = importlib.import_module(name)
    mutable = [k for k, v in vars(module).items() if not k.startswith("__") and isinstance(v, list | dict | set)]
    assert mutable == [], f"{name} keeps {mutable} at module level"


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_each_policy_object_has_its_own_cache(name: str) -> None:
    cfg, cluster = PolicyConfig(name=name, max_nodes=4, slots_per_node=4), ClusterConfig()
    a, b = make_policy(cfg, cluster), make_policy(cfg, cluster)
    assert isinstance(a.cache, ViewCache) and a.cache is not b.cache  # type: ignore[attr-defined]
    s = snap([pending(1, 600.0, slots=2)], [host("node001", used=4)])
    nodes = (node("node001", 3000.0, last_busy_at=T0),)
    assert a.decide(join(nodes, (), s, now=T0), History()) == b.decide(join(nodes, (), s, now=T0), History())


def test_the_cache_gives_the_same_view_for_the_same_inputs_and_a_new_one_otherwise() -> None:
    cache = ViewCache()
    h = host("node001")
    s = snap([pending(1, 60.0)], [h])
    nodes = (node("node001", 3000.0),)
    v1 = cache.view(join(nodes, (), s, now=T0), "master", 4)
    assert cache.view(join(nodes, (), s, now=T0), "master", 4) is v1
    later = cache.view(join(nodes, (), s, now=T0 + 60), "master", 4)
    assert later.now == T0 + 60 and later.workers is v1.workers
    other = cache.view(join(nodes, (), snap([], [h]), now=T0), "master", 4)
    assert other.pending == () and other.workers[0] is v1.workers[0]  # same record, host and jobs: reused
    listed = cache.view(join(list(nodes), (), s, now=T0), "master", 4)
    assert cache.view(join(list(nodes), (), s, now=T0), "master", 4) is not listed  # a list may change: never kept


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 30), st.one_of(st.none(), st.sampled_from([0.0, 10.0, 10.5, 99.0])), st.booleans()),
        max_size=40,
    )
)
def test_waiting_jobs_oldest_first_then_by_number(entries: list[tuple[int, float | None, bool]]) -> None:
    """The view orders waiting jobs by (submission time, or now for none; job number), ties kept
    in qstat's order, as one sort by that pair does."""
    jobs = [
        Job(
            job_id,
            f"job{i}",
            "sgeuser",
            "qw" if eligible else "hqw",
            job_phase("qw" if eligible else "hqw"),
            1,
            submitted=None if t is None else T0 - t,
        )
        for i, (job_id, t, eligible) in enumerate(entries)
    ]
    view = cluster_view(join([], (), snap(jobs), now=T0), "master", 4)
    expected = sorted(
        (j for j in jobs if j.is_pending), key=lambda j: (j.submitted if j.submitted is not None else T0, j.job_id)
    )
    assert [id(j) for j in view.pending] == [id(j) for j in expected]
