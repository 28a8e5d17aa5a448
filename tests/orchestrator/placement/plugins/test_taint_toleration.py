from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.placement import place, placement_to_json
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.plugins.taint_toleration import TaintToleration
from tests.orchestrator.placement.fleet import cluster, fleet, single, workload

PLUGIN = TaintToleration()
UPGRADING = {"key": "calibrator.dev/upgrading", "value": "", "effect": "NoSchedule"}
DRAIN = {"key": "example.com/decommission", "value": "", "effect": "NoExecute"}
SOFT = {"key": "example.com/maintenance", "value": "disk", "effect": "PreferNoSchedule"}


@pytest.mark.parametrize(
    ("taints", "tolerations", "current", "reasons"),
    [
        pytest.param([], [], False, (), id="no taints"),
        pytest.param(
            [UPGRADING],
            [],
            False,
            ("untolerated taint calibrator.dev/upgrading=:NoSchedule",),
            id="NoSchedule rejects new placement",
        ),
        pytest.param([UPGRADING], [], True, (), id="NoSchedule keeps the current placement"),
        pytest.param(
            [DRAIN],
            [],
            True,
            ("untolerated taint example.com/decommission=:NoExecute",),
            id="NoExecute evicts the current placement",
        ),
        pytest.param([SOFT], [], False, (), id="PreferNoSchedule never rejects"),
        pytest.param(
            [UPGRADING, DRAIN],
            [{"operator": "Exists"}],
            False,
            (),
            id="Exists with empty key tolerates everything",
        ),
        pytest.param(
            [UPGRADING],
            [{"key": "calibrator.dev/upgrading", "operator": "Exists", "effect": "NoSchedule"}],
            False,
            (),
            id="Exists on the key",
        ),
        pytest.param(
            [{"key": "k", "value": "v", "effect": "NoExecute"}],
            [{"key": "k", "operator": "Equal", "value": "v"}],
            False,
            (),
            id="effect-less toleration matches every effect",
        ),
        pytest.param(
            [{"key": "k", "value": "v", "effect": "NoSchedule"}],
            [{"key": "k", "operator": "Equal", "value": "other"}],
            False,
            ("untolerated taint k=v:NoSchedule",),
            id="Equal with a different value",
        ),
        pytest.param(
            [DRAIN],
            [{"key": "example.com/decommission", "operator": "Exists", "effect": "NoSchedule"}],
            False,
            ("untolerated taint example.com/decommission=:NoExecute",),
            id="toleration for another effect",
        ),
        pytest.param(
            [DRAIN],
            [
                {
                    "key": "example.com/decommission",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
            True,
            (),
            id="tolerationSeconds without timeAdded: tolerated",
        ),
        pytest.param(
            [{"key": "example.com/sla", "value": "950", "effect": "NoSchedule"}],
            [{"key": "example.com/sla", "operator": "Gt", "value": "900"}],
            False,
            (),
            id="Gt: taint value above the threshold",
        ),
        pytest.param(
            [{"key": "example.com/sla", "value": "850", "effect": "NoSchedule"}],
            [{"key": "example.com/sla", "operator": "Gt", "value": "900"}],
            False,
            ("untolerated taint example.com/sla=850:NoSchedule",),
            id="Gt: taint value below the threshold",
        ),
        pytest.param(
            [{"key": "example.com/cost", "value": "high", "effect": "NoExecute"}],
            [{"key": "example.com/cost", "operator": "Lt", "value": "10"}],
            True,
            ("untolerated taint example.com/cost=high:NoExecute",),
            id="Lt: a taint value that is no integer is not matched",
        ),
    ],
)
def test_filter(
    taints: list[dict[str, str]],
    tolerations: list[dict[str, Any]],
    current: bool,
    reasons: tuple[str, ...],
) -> None:
    extra: dict[str, Any] = {"clusters": ["c1"]} if current else {}
    ctx, w, c = single(
        cluster("c1", taints=taints), workload("w", tolerations=tolerations, **extra)
    )
    assert PLUGIN.filter(ctx, w, c).reasons == reasons


@pytest.mark.parametrize(
    ("taints", "tolerations", "score"),
    [
        ([], [], 100),
        ([UPGRADING], [], 100),
        ([SOFT], [], 50),
        ([SOFT, {**SOFT, "key": "example.com/other"}], [], 33),
        ([SOFT], [{"key": "example.com/maintenance", "operator": "Exists"}], 100),
    ],
)
def test_score(taints: list[dict[str, str]], tolerations: list[dict[str, Any]], score: int) -> None:
    ctx, w, c = single(cluster("c1", taints=taints), workload("w", tolerations=tolerations))
    assert PLUGIN.score(ctx, w, c) == score


def test_no_schedule_keeps_existing_but_takes_nothing_new() -> None:
    snapshot = fleet(
        [cluster("a", taints=[UPGRADING]), cluster("b")],
        [
            workload("stays", clusters=["a"], maxClusters=1),
            workload("new", maxClusters=1, clusterAffinity={"clusterNames": ["a"]}),
        ],
    )
    result = place(snapshot)
    assert result.decision("default/stays").replicas == {"a": 1}
    assert result.decision("default/stays").evicted == ()
    new = result.decision("default/new")
    assert new.unschedulable
    assert new.reasons["a"] == ("untolerated taint calibrator.dev/upgrading=:NoSchedule",)


def test_no_execute_evicts_to_another_cluster() -> None:
    snapshot = fleet(
        [cluster("a", taints=[DRAIN]), cluster("b")],
        [workload("w", clusters=["a"], maxClusters=1)],
    )
    decision = place(snapshot).decision("default/w")
    assert decision.replicas == {"b": 1}
    assert decision.evicted == ("a",)
    assert decision.reasons["a"] == ("untolerated taint example.com/decommission=:NoExecute",)


def test_prefer_no_schedule_only_lowers_the_score() -> None:
    snapshot = fleet(
        [cluster("a"), cluster("b", taints=[SOFT])],
        [
            workload("one", maxClusters=1),
            workload("only-b", clusterAffinity={"clusterNames": ["b"]}),
        ],
    )
    result = place(snapshot)
    assert result.decision("default/one").replicas == {"a": 1}
    assert result.decision("default/only-b").replicas == {"b": 1}


ADDED = "2026-12-02T10:00:00Z"
T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
TIMED_DRAIN = {**DRAIN, "timeAdded": ADDED}
FIVE_MINUTES = [{"key": DRAIN["key"], "operator": "Exists", "tolerationSeconds": 300}]


@pytest.mark.parametrize(
    ("now", "reasons"),
    [
        pytest.param(None, (), id="offline: tolerated"),
        pytest.param(T0 + timedelta(seconds=299), (), id="within the grace period"),
        pytest.param(
            T0 + timedelta(seconds=300),
            (
                "untolerated taint example.com/decommission=:NoExecute "
                "(tolerationSeconds 300 ran out at 2026-12-02T10:05:00Z)",
            ),
            id="grace period over",
        ),
    ],
)
def test_toleration_seconds_run_on_the_callers_clock(
    now: datetime | None, reasons: tuple[str, ...]
) -> None:
    snapshot = fleet(
        [cluster("c1", taints=[TIMED_DRAIN])],
        [workload("w", clusters=["c1"], tolerations=FIVE_MINUTES)],
    )
    ctx = PlacementContext(snapshot, now=now)
    assert PLUGIN.filter(ctx, snapshot.workloads[0], snapshot.cluster("c1")).reasons == reasons


@pytest.mark.parametrize(
    ("now", "replicas", "evict_at", "evicted"),
    [
        pytest.param(None, {"a": 1}, (("a", "2026-12-02T10:05:00Z"),), (), id="offline"),
        pytest.param(
            T0 + timedelta(minutes=1), {"a": 1}, (("a", "2026-12-02T10:05:00Z"),), (), id="early"
        ),
        pytest.param(T0 + timedelta(minutes=5), {"b": 1}, (), ("a",), id="late: evicted"),
    ],
)
def test_decisions_say_when_eviction_happens(
    now: datetime | None,
    replicas: dict[str, int],
    evict_at: tuple[tuple[str, str], ...],
    evicted: tuple[str, ...],
) -> None:
    snapshot = fleet(
        [cluster("a", taints=[TIMED_DRAIN]), cluster("b")],
        [workload("w", clusters=["a"], maxClusters=1, tolerations=FIVE_MINUTES)],
    )
    result = place(snapshot, now=now)
    decision = result.decision("default/w")
    assert decision.replicas == replicas
    assert decision.evict_at == evict_at
    assert decision.evicted == evicted
    shown: Any = placement_to_json(result)
    assert shown["decisions"][0].get("evictAt", {}) == dict(evict_at)


def test_eviction_without_time_added_says_how_long_after() -> None:
    snapshot = fleet(
        [cluster("a", taints=[DRAIN])],
        [workload("w", clusters=["a"], tolerations=FIVE_MINUTES)],
    )
    decision = place(snapshot, now=T0).decision("default/w")
    assert decision.evict_at == (("a", "300s after the taint was added (no timeAdded recorded)"),)
