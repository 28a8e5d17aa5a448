"""``bench_inventory_read`` runs, and its two ways of reading give the same fleet."""

from __future__ import annotations

import pytest

from benchmarks import bench_inventory_read as bench
from orchestrator.kube import inventory
from orchestrator.kube.fleetmap import ParsedFleet


def test_the_kept_read_is_the_full_read() -> None:
    fleet = bench.Fleet(6, 10)
    parsed = ParsedFleet()
    for i in range(3):
        fleet.written(fleet.clusters[i])
        kept = inventory.read_fleet(None, bench.NAMESPACE, source=fleet.source, parsed=parsed)
        full = inventory.read_fleet(None, bench.NAMESPACE, source=fleet.source)
        assert kept == full
    assert len(full.snapshot.clusters) == 6 and not full.skipped and not full.pending
    assert len(full.snapshot.workloads) == 60
    assert all(w.policy_observed for w in full.snapshot.workloads)


def test_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--sizes", "6", "--reads", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| clusters |") and lines[2].startswith("| 6 | 60 |")


def test_bounds_are_checked() -> None:
    with pytest.raises(SystemExit):
        bench.main(["--sizes", "0"])
