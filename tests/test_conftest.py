"""The suite's ordering rule (tests/conftest.py): longest files first, the given order kept within each rank."""

from __future__ import annotations

import pytest

from tests.conftest import longest_first, rank


@pytest.mark.parametrize(
    ("nodeid", "slow", "expected"),
    [
        ("tests/integration/test_fleet_scale.py::test_x", True, 0),
        ("tests/integration/test_calibration.py::test_x", False, 1),
        ("tests/integration/test_rbac.py", False, 1),
        ("tests/workflows/test_health_dev_server.py::test_y[a]", False, 1),
        ("tests/workflows/test_health.py::test_y", False, 2),
        ("tests/orchestrator/domain/test_versions.py::test_z", False, 2),
        ("tests/orchestrator/test_integration_helpers.py::t", False, 2),
    ],
)
def test_rank(nodeid: str, slow: bool, expected: int) -> None:
    assert rank(nodeid, slow) == expected


def test_the_longest_go_first_and_each_rank_keeps_its_order() -> None:
    ranks = [2, 1, 2, 0, 1, 2, 0]
    assert longest_first(ranks) == [3, 6, 1, 4, 0, 2, 5]
