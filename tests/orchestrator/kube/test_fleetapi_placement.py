"""FleetWorkload CRD and (de)serialisation for issue 15: Aggregated division, Lt/Gt tolerations."""

from __future__ import annotations

import re
from typing import Any

import pytest

from orchestrator.domain.snapshot_dump import snapshot_to_mapping
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.domain.taints import OPERATORS, numeric_value_error
from orchestrator.kube import fleetapi
from tests.orchestrator.kube.test_fleetapi import EXAMPLE, crd_schema


def _tolerations_schema() -> dict[str, Any]:
    spec = crd_schema("FleetWorkload")["properties"]["spec"]["properties"]
    items: dict[str, Any] = spec["placement"]["properties"]["tolerations"]["items"]
    return items


def test_toleration_operators_match_the_parser() -> None:
    assert _tolerations_schema()["properties"]["operator"]["enum"] == list(OPERATORS)


@pytest.mark.parametrize(
    "value", ["0", "7", "-7", "950", "0950", "+5", "-0", "", "1.5", "x", "9223372036854775807"]
)
def test_numeric_value_rule_agrees_with_the_parser(value: str) -> None:
    """The CEL rule's pattern accepts what Kubernetes validation (and our parser) accepts.

    Beyond-int64 values are left to the parser, which the inventory runs on every object.
    """
    (rule,) = [
        r["rule"] for r in _tolerations_schema()["x-kubernetes-validations"] if "Lt" in r["rule"]
    ]
    (pattern,) = re.findall(r'matches\("([^"]+)"\)', rule)
    assert (re.search(pattern, value) is not None) == (numeric_value_error(value) is None)


def test_aggregated_and_numeric_tolerations_survive_the_object_round_trip() -> None:
    mapping = snapshot_to_mapping(EXAMPLE)
    entry = dict(mapping["workloads"][0])  # type: ignore[index]
    entry["placement"] = {
        "replicaScheduling": {"type": "Aggregated"},
        "tolerations": [
            {"key": "example.com/sla", "operator": "Gt", "value": "900"},
            {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ],
    }
    mapping["workloads"] = [entry]
    (workload,) = snapshot_from_mapping(mapping).workloads
    obj = fleetapi.fleet_workload(workload)
    assert obj["spec"]["placement"]["replicaScheduling"] == {"type": "Aggregated"}
    assert obj["spec"]["placement"]["tolerations"][0] == {
        "key": "example.com/sla",
        "operator": "Gt",
        "value": "900",
    }
    mapping["workloads"] = [fleetapi.workload_entry(obj)]
    assert snapshot_from_mapping(mapping).workloads == (workload,)
