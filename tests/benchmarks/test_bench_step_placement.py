"""``bench_step_placement`` runs, and its gated placements place only what the cluster hosts."""

from __future__ import annotations

import pytest

from benchmarks import bench_step_placement as bench
from workflows.activities.placement import affected_workloads


def test_the_gated_placements_place_only_the_hosted_workloads() -> None:
    snapshot = bench.fleet(12, 10)
    cluster = snapshot.clusters[6]
    counts = [len(affected_workloads(read, c)) for read, c in bench.phases(snapshot, cluster)]
    hosted = sum(1 for w in snapshot.workloads if cluster.name in w.placement.clusters)
    assert counts[0] == counts[1] == hosted > 0
    assert counts[2] > hosted  # the gate off: every workload the cluster could take
    placed, seconds = bench.one_step(snapshot, cluster)
    assert placed == sum(counts) and seconds >= 0


def test_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--sizes", "6", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| clusters |") and lines[2].startswith("| 6 | 60 |")


def test_bounds_are_checked() -> None:
    with pytest.raises(SystemExit):
        bench.main(["--sizes", "0"])
