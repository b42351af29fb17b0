"""The demo's last line says what it leaves on the machine: the test cluster's nodes, daemons and
network are gone, its state and the demo's directories (with their sizes) and the node image stay
for the next run. It never says the machine is clean while they are there."""

from __future__ import annotations

from pathlib import Path

from elbdev.demo import after_down


def test_it_names_what_stays_with_its_size(tmp_path: Path) -> None:
    state = tmp_path / "elb-testcluster"
    (state / "image").mkdir(parents=True)
    (state / "image" / "root.tar").write_bytes(b"x" * 3_000_000)
    demo = tmp_path / "elb-demo"
    demo.mkdir()
    line = after_down([state, demo, tmp_path / "never-made"])
    assert "clean" not in line
    assert f"{state} (3 MB)" in line and f"{demo} (0 MB)" in line and "the node image" in line
    assert "never-made" not in line
    assert "taken down" in line
