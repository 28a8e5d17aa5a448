"""A decision's summary is its per-cluster reasons counted; its scores are the ranking's."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.placement import (
    DEFAULT_REGISTRY,
    PlacementResult,
    Registry,
    place,
    placement_to_json,
    topk,
)
from orchestrator.placement.framework import ReasonSummary
from testkit.fleetgen import generate_fleet
from tests.orchestrator.placement.fleet import cluster, workload
from tests.orchestrator.placement.fleet import fleet as fleet_of
from tests.orchestrator.placement.test_reference import varied_snapshot

_prefer_no = {"key": "example.com/busy", "value": "", "effect": "PreferNoSchedule"}


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
    # The fleet fills clusters up, so the capacity replay (shortages by bisection) is exercised.
    assert any(r.startswith("insufficient") for s in summaries.values() for r, _ in s.rejected)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("direct_limit", [0, 10**9])
def test_summary_on_varied_policies(
    seed: int, direct_limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topk, "DIRECT_LIMIT", direct_limit)
    snapshot = varied_snapshot(50, 500, seed)
    _check(place(snapshot), len(snapshot.clusters))


def test_summary_with_exclusions_and_another_registry() -> None:
    snapshot = generate_fleet(60, 400, seed=4)
    names = sorted(c.name for c in snapshot.clusters)
    _check(place(snapshot, exclude_clusters=set(names[::7])), len(names))
    registry = DEFAULT_REGISTRY.without("ResourceBalance", "ClusterLocality")
    _check(place(snapshot, registry=registry), len(names), registry)


@pytest.mark.parametrize(
    ("names", "exclude"),
    [
        (["a-1"], []),
        (["a-1", "b-2"], []),
        (["a-0", "a-1", "a-2", "b-0", "b-1", "b-2"], []),  # every cluster named
        (["b-0", "b-1"], ["b-0"]),
    ],
)
def test_summary_of_a_pinned_list(names: list[str], exclude: list[str]) -> None:
    """clusterNames alone: every cluster not named is rejected for one reason, counted once."""
    clusters = [cluster(f"{z}-{i}", labels={"zone": z}) for z in "ab" for i in range(3)]
    affinity = {"clusterNames": names, "exclude": exclude}
    snapshot = fleet_of(
        clusters,
        [
            workload("pinned", clusterAffinity=affinity),
            workload("current", clusterAffinity=affinity, clusters=["a-2"]),
        ],
    )
    result = place(snapshot)
    _check(result, len(clusters))
    summary = result.decision("default/pinned").summary
    pinned_reason = f"not in clusterNames {','.join(names)}"
    assert dict(summary.rejected).get(pinned_reason, 0) == len(clusters) - len(names)
    assert summary.available == len(set(names) - set(exclude))


def test_summary_text() -> None:
    snapshot = generate_fleet(60, 400, seed=4)
    for decision in place(snapshot).decisions:
        summary = decision.summary
        head = f"{summary.available}/{len(snapshot.clusters)} clusters available"
        assert summary.text.startswith(head)
        for reason, count in summary.rejected:
            assert f"{count} {reason}" in summary.text


def test_scores_rank_the_feasible_clusters_as_the_scheduler_did(fleet: FleetSnapshot) -> None:
    """Totals are the weighted sums, best first; a maxClusters pick is the head of that list."""
    result = place(fleet)
    for decision in result.decisions:
        scores = decision.scores
        weights = dict(scores.weights)
        assert list(weights) == [p.name for p in DEFAULT_REGISTRY.scorers]
        rows = scores.clusters
        for row in rows:
            assert row.total == sum(weights[name] * score for name, score in row.plugins)
            assert all(0 <= score <= 100 for _, score in row.plugins)
        assert [(-r.total, r.name) for r in rows] == sorted((-r.total, r.name) for r in rows)
        names = {r.name for r in rows}
        if not decision.unschedulable:  # else the division's failure is every one's reason
            # Feasible for the winning term: only earlier terms' reasons can name it.
            for name in names:
                assert all(r.startswith("affinity ") for r in decision.reasons.get(name, ()))
        assert set(decision.replicas) <= names
        workload = next(w for w in fleet.workloads if w.key == decision.workload)
        limit = workload.placement.max_clusters
        if (
            not decision.unschedulable
            and limit is not None
            and workload.placement.replica_scheduling.type == "Duplicated"
        ):
            assert set(decision.replicas) == {r.name for r in rows[:limit]}


def test_scores_show_ties_and_the_current_placement() -> None:
    """Two equal clusters tie (name decides); the current one leads by its locality score."""
    snapshot = fleet_of(
        [cluster("b"), cluster("a"), cluster("c", taints=[_prefer_no])],
        [workload("w", maxClusters=1), workload("v", maxClusters=1, clusters=["b"])],
    )
    result = place(snapshot)
    w = result.decision("default/w")
    rows = [(r.name, r.total, dict(r.plugins)) for r in w.scores.clusters]
    assert [r[0] for r in rows] == ["a", "b", "c"]
    assert rows[0][1] == rows[1][1]  # the tie the name broke
    assert rows[2][2]["TaintToleration"] < rows[0][2]["TaintToleration"]
    assert w.replicas == {"a": 1}
    v = result.decision("default/v")
    top = v.scores.clusters[0]
    assert (top.name, dict(top.plugins)["ClusterLocality"]) == ("b", 100)
    assert v.replicas == {"b": 1}


def test_an_unschedulable_decision_scores_its_first_term() -> None:
    snapshot = fleet_of(
        [cluster("a", labels={"env": "prod"}), cluster("b", labels={"env": "dev"})],
        [
            workload(
                "w",
                replicas=2,
                clusterAffinities=[
                    {"matchLabels": {"env": "prod"}},
                    {"matchLabels": {"env": "dev"}},
                ],
                spreadConstraints=[{"spreadByField": "cluster", "minGroups": 2}],
            )
        ],
    )
    (decision,) = place(snapshot).decisions
    assert decision.unschedulable
    assert [r.name for r in decision.scores.clusters] == ["a"]


def test_scores_are_in_the_json_only_when_explained() -> None:
    snapshot = fleet_of([cluster("a"), cluster("b")], [workload("w")])
    plain: Any = placement_to_json(place(snapshot))
    assert "scores" not in plain["decisions"][0]
    explained: Any = placement_to_json(place(snapshot), explain=True)
    (item,) = explained["decisions"]
    assert item["scoreWeights"] == {
        "TaintToleration": 1,
        "ClusterLocality": 2,
        "ResourceBalance": 1,
    }
    assert [s["cluster"] for s in item["scores"]] == ["a", "b"]
    assert set(item["scores"][0]) == {"cluster", "total", "plugins"}
    assert item["scores"][0]["plugins"] == {
        "TaintToleration": 100,
        "ClusterLocality": 0,
        "ResourceBalance": item["scores"][0]["total"] - 100,
    }
