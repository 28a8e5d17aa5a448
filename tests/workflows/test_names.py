"""The names ``workflows.client`` addresses are the ones the workflow definitions register."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio import workflow

from workflows import names
from workflows.definitions.cluster_upgrade import ClusterUpgrade
from workflows.definitions.fleet_calibration import FleetCalibration


def _registered(cls: type) -> Any:
    definition = workflow._Definition.from_class(cls)
    assert definition is not None
    return definition


@pytest.mark.parametrize(
    ("cls", "name", "queries", "updates"),
    [
        (
            FleetCalibration,
            names.FLEET_CALIBRATION,
            {names.PROGRESS},
            {names.PAUSE, names.RESUME, names.APPROVE, names.SKIP, names.RETRY, names.ABORT},
        ),
        (ClusterUpgrade, names.CLUSTER_UPGRADE, {names.PROGRESS}, {names.DECIDE}),
    ],
)
def test_the_client_names_are_registered(
    cls: type, name: str, queries: set[str], updates: set[str]
) -> None:
    definition = _registered(cls)
    assert definition.name == name
    assert queries <= set(definition.queries)
    assert updates <= set(definition.updates)
