"""``bench_replace`` runs, and places what the activity places: a fraction of the whole fleet."""

from __future__ import annotations

import pytest

from benchmarks import bench_replace as bench
from testkit.fleetgen import generate_fleet_mapping


def test_the_activity_places_a_fraction_of_the_fleet() -> None:
    mapping = generate_fleet_mapping(20, 200, seed=3)
    _, whole, _ = bench.run(mapping, "v1.35.0", True, True, whole=True)
    _, activity, fleet = bench.run(mapping, "v1.35.0", True, True)
    assert activity.placements == whole.placements > 0  # taint, step, untaint per cluster
    assert activity.workloads < whole.workloads / 5
    assert all(c["controlPlane"]["version"] == "v1.35.0" for c in fleet.mapping["clusters"])


def test_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--clusters", "8", "--workloads", "40"]) == 0
    out = capsys.readouterr().out
    assert "| names only (scratch) |" in out and "End state" in out
