"""The suite's ordering rule (tests/conftest.py): long files first, the given order kept within each group."""

from __future__ import annotations

import pytest

from tests.conftest import long_first, runs_long


@pytest.mark.parametrize(
    ("nodeid", "long"),
    [
        ("tests/integration/test_calibration.py::test_x", True),
        ("tests/integration/test_rbac.py", True),
        ("tests/workflows/test_health_dev_server.py::test_y[a]", True),
        ("tests/workflows/test_health.py::test_y", False),
        ("tests/orchestrator/domain/test_versions.py::test_z", False),
        ("tests/orchestrator/test_integration_helpers.py::t", False),
    ],
)
def test_runs_long(nodeid: str, long: bool) -> None:
    assert runs_long(nodeid) is long


def test_long_files_go_first_and_each_group_keeps_its_order() -> None:
    ids = [
        "tests/orchestrator/a.py::t1",
        "tests/integration/test_b.py::t1",
        "tests/workflows/c.py::t1",
        "tests/workflows/test_d_dev_server.py::t1",
        "tests/integration/test_b.py::t2",
        "tests/orchestrator/a.py::t2",
    ]
    assert [ids[i] for i in long_first(ids)] == [
        "tests/integration/test_b.py::t1",
        "tests/workflows/test_d_dev_server.py::t1",
        "tests/integration/test_b.py::t2",
        "tests/orchestrator/a.py::t1",
        "tests/workflows/c.py::t1",
        "tests/orchestrator/a.py::t2",
    ]
