"""The Molecule runner's scenario discovery (no cluster needed)."""

from __future__ import annotations

import pytest

from tests.molecule.runner import SCENARIO_DIR, run_scenario, scenarios


def test_scenarios_are_the_directories_with_a_molecule_yml() -> None:
    found = scenarios()
    assert {"default", "remove", "slurm_node", "slurm_site", "spot_agent"} <= set(found)
    assert "_shared" not in found
    assert all((SCENARIO_DIR / s / "molecule.yml").is_file() for s in found)


def test_an_unknown_scenario_is_refused_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="no such scenario"):
        run_scenario("no-such-scenario")
