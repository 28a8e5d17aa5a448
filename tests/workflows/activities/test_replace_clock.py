"""The replace activity places on the time the workflow gives it (``ReplaceInput.now``)."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.testing import ActivityEnvironment

from orchestrator.kube.backend.port import ClusterRef
from testkit.workflow_harness import cluster, in_memory
from workflows.activities import CalibrationActivities
from workflows.model import ReplaceInput

DRAIN = {
    "key": "example.com/drain",
    "value": "",
    "effect": "NoExecute",
    "timeAdded": "2026-12-02T10:00:00Z",
}
TOLERATES_AN_HOUR = {
    "key": "example.com/drain",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 3600,
}


@pytest.mark.parametrize(
    ("now", "where"),
    [
        ("", "a"),  # no clock: the toleration holds
        ("2026-12-02T10:59:59Z", "a"),  # workflow time inside the grace period
        ("2026-12-02T11:00:00Z", "b"),  # grace period over: moved off the drained cluster
    ],
)
def test_tolerations_end_on_workflow_time(now: str, where: str) -> None:
    drained = {**cluster("a", "v1.33.0"), "taints": [DRAIN]}
    fleet = in_memory(
        drained,
        cluster("b", "v1.33.0"),
        workloads=(
            {
                "name": "w",
                "apis": ["apps/v1/Deployment"],
                "placement": {
                    "clusters": ["a"],
                    "maxClusters": 1,
                    "tolerations": [TOLERATES_AN_HOUR],
                },
            },
        ),
    )
    activities = CalibrationActivities(fleet)
    result = asyncio.run(
        ActivityEnvironment().run(
            activities.replace, ReplaceInput("c", ClusterRef("a"), "a: test", now=now)
        )
    )
    assert result.decisions == 1
    assert fleet.workloads["default/w"].placement.clusters == (where,)
