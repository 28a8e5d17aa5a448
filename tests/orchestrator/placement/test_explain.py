"""A decision's summary is its per-cluster reasons counted, without building them."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.fleetgen import generate_fleet
from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.placement import DEFAULT_REGISTRY, PlacementResult, Registry, place, topk
from orchestrator.placement.framework import ReasonSummary
from tests.orchestrator.placement.test_reference import _varied


def _short(registry: Registry, reason: str) -> str:
    """The summarised form, worked out from the reason text alone (prefix kept)."""
    prefix = ""
    if reason.startswith("affinity ") and ": " in reason:
        head, rest = reason.split(": ", 1)
        prefix, reason = head + ": ", rest
    for plugin in registry.values():
        if isinstance(plugin, ReasonSummary) and plugin.summarize(reason) != reason:
            return prefix + plugin.summarize(reason)
    return prefix + reason


def _check(result: PlacementResult, total: int, registry: Registry = DEFAULT_REGISTRY) -> None:
    for decision in result.decisions:
        counts: Counter[str] = Counter()
        for reasons in decision.reasons.values():
            counts.update({_short(registry, r) for r in reasons})
        summary = decision.summary
        assert dict(summary.rejected) == dict(counts), decision.workload
        assert summary.available == total - len(decision.reasons), decision.workload
        assert summary.total == total
        assert [n for _, n in summary.rejected] == sorted(
            (n for _, n in summary.rejected), reverse=True
        )


@pytest.fixture(scope="module")
def fleet() -> FleetSnapshot:
    return generate_fleet(80, 800, seed=5)


@pytest.mark.parametrize("order", ["forward", "backward"])
def test_summary_counts_the_reasons(fleet: FleetSnapshot, order: str) -> None:
    result = place(fleet)
    decisions = result.decisions if order == "forward" else result.decisions[::-1]
    # Read summaries first (in either order: the capacity replay must rewind), reasons after.
    summaries = {d.workload: d.summary for d in decisions}
    assert len(summaries) == len(decisions)
    _check(result, len(fleet.clusters))


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("direct_limit", [0, 10**9])
def test_summary_on_varied_policies(
    seed: int, direct_limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topk, "DIRECT_LIMIT", direct_limit)
    snapshot = _varied(50, 500, seed)
    _check(place(snapshot), len(snapshot.clusters))


def test_summary_with_exclusions_and_another_registry() -> None:
    snapshot = generate_fleet(60, 400, seed=4)
    names = sorted(c.name for c in snapshot.clusters)
    _check(place(snapshot, exclude_clusters=set(names[::7])), len(names))
    registry = DEFAULT_REGISTRY.without("ResourceBalance", "ClusterLocality")
    _check(place(snapshot, registry=registry), len(names), registry)


def test_summary_text() -> None:
    snapshot = generate_fleet(60, 400, seed=4)
    for decision in place(snapshot).decisions:
        summary = decision.summary
        head = f"{summary.available}/{len(snapshot.clusters)} clusters available"
        assert summary.text.startswith(head)
        for reason, count in summary.rejected:
            assert f"{count} {reason}" in summary.text
