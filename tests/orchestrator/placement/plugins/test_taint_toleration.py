from __future__ import annotations

from typing import Any

import pytest

from orchestrator.placement import place
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
            id="tolerationSeconds counts as tolerated (placement has no clock)",
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
