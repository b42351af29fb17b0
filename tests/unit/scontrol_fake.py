"""Scripts standing in for Slurm's client commands in a ``slurm.bin_dir``: ``scontrol show
config``, ``scontrol -o show partition|node``, ``sinfo`` and ``squeue`` print the files beside
them (tests/fixtures/slurm/conf by default). The real commands answer on the test cluster."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).parents[1] / "fixtures" / "slurm" / "conf"
SCONTROL = """#!/bin/sh
d=$(dirname "$0")
case "$*" in
  "show config") cat "$d/show-config.txt";;
  "-a -o show partition") cat "$d/show-partition.txt";;
  "-o show node") cat "$d/show-node.txt";;
  *) echo "scontrol: error: $*: not faked" >&2; exit 1;;
esac
"""
SINFO_LINE = "node001|idle+cloud+powered_down|2|0/2/0/2|cloud*|none"


def fake_slurm(bin_dir: Path, **texts: str) -> Path:
    """``bin_dir`` with the fake commands; ``texts`` replace a fixture (``config``, ``partition``,
    ``node``: the text ``scontrol show`` prints)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in ("config", "partition", "node"):
        text = texts.get(name, (FIXTURES / f"show-{name}.txt").read_text())
        (bin_dir / f"show-{name}.txt").write_text(text)
    for name, body in (
        ("scontrol", SCONTROL),
        ("sinfo", f"#!/bin/sh\necho '{SINFO_LINE}'\n"),
        ("squeue", "#!/bin/sh\nexit 0\n"),
    ):
        script = bin_dir / name
        script.write_text(body)
        script.chmod(0o755)
    return bin_dir
