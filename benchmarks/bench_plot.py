"""`elb plot` of a year of stats (a 60 s poll: 525,600 rows, rotated as the daemon rotates them):
the windowed, resampled plot against drawing every row, side by side in one run, each in a
child process so that its peak memory is its own. Prints figures next to the targets; asserts
nothing.

    python benchmarks/bench_plot.py [--rows 525600]

Targets: a year plots in seconds (wall time) and under 300 MB peak memory.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import sys
import tempfile
import time
from pathlib import Path

from elb.cli.plot import plot_file, plot_stats
from elb.service.stats import StatsRow, append_row, read_all

TARGET_SECONDS = 10.0
TARGET_MB = 300.0


def _write_year(path: Path, rows: int) -> None:
    start = 1_800_000_000.0
    for i in range(rows):
        busy = (i // 600) % 3 != 0
        append_row(
            path,
            StatsRow(
                time=start + 60 * i,
                ok=i % 997 != 0,
                pending_jobs=(i * 7) % 23 if busy else 0,
                pending_slots=(i * 7) % 23 if busy else 0,
                oldest_wait=0.0,
                running_jobs=40 if busy else 0,
                nodes_booting=1 if i % 600 == 1 else 0,
                nodes_ready=5 if busy else 0,
                nodes_draining=0,
                added=1 if i % 600 == 0 else 0,
                removed=1 if i % 600 == 400 else 0,
                action="nothing to do",
                finished=start + 60 * i + 3,
            ),
        )


def _child(kind: str, path: str, out: str, q: mp.Queue) -> None:  # type: ignore[type-arg]
    t0 = time.perf_counter()
    if kind == "windowed":
        points = plot_file(Path(path), Path(out), title="a year")
    else:
        rows = list(read_all(Path(path)))
        plot_stats(rows, Path(out), title="a year")
        points = len(rows)
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    q.put((wall, peak_mb, points))


def measure(kind: str, path: Path, out: Path) -> tuple[float, float, int]:
    q: mp.Queue = mp.get_context("spawn").Queue()  # type: ignore[type-arg]
    p = mp.get_context("spawn").Process(target=_child, args=(kind, str(path), str(out), q))
    p.start()
    result = q.get()
    p.join()
    return result  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=525_600)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.csv"
        t0 = time.perf_counter()
        _write_year(stats, args.rows)
        size = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
        print(
            f"wrote {args.rows} rows ({size:.0f} MB in {len(list(Path(tmp).iterdir()))} files) "
            f"in {time.perf_counter() - t0:.0f} s"
        )
        win = measure("windowed", stats, Path(tmp) / "w.png")
        full = measure("every row", stats, Path(tmp) / "f.png")
    print(f"{'plot':<12} {'wall s':>8} {'peak MB':>8} {'points':>8}")
    for name, (wall, mb, pts) in (("windowed", win), ("every row", full)):
        print(f"{name:<12} {wall:8.1f} {mb:8.0f} {pts:8d}")
    print(f"windowed vs every row: {full[0] / win[0]:.1f}x faster, {full[1] / win[1]:.1f}x less memory")
    ok = win[0] <= TARGET_SECONDS and win[1] <= TARGET_MB
    print(f"target: <= {TARGET_SECONDS:.0f} s and <= {TARGET_MB:.0f} MB: {'met' if ok else 'missed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
