"""``bench_step_placement`` runs, and on its settled fleet each placement places only what the
cluster hosts."""

from __future__ import annotations

import pytest

from benchmarks import bench_step_placement as bench
from workflows.activities.placement import affected_workloads


def test_the_placements_place_only_the_hosted_workloads() -> None:
    snapshot = bench.fleet(12, 10)
    cluster = snapshot.clusters[6]
    counts = [len(affected_workloads(read, c)) for read, c in bench.phases(snapshot, cluster)]
    hosted = sum(1 for w in snapshot.workloads if cluster.name in w.placement.clusters)
    # The gate off too: the others settled while it was open, and opening it moves none.
    assert counts[0] == counts[1] == counts[2] == hosted > 0
    placed, seconds = bench.one_step(snapshot, cluster)
    assert placed == sum(counts) and seconds >= 0


def test_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--sizes", "6", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| clusters |") and lines[2].startswith("| 6 | 60 |")


def test_bounds_are_checked() -> None:
    with pytest.raises(SystemExit):
        bench.main(["--sizes", "0"])
