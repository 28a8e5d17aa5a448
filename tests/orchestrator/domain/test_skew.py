from __future__ import annotations

import pytest

from orchestrator.domain.skew import (
    control_plane_step_violation,
    max_kubelet_lag,
    state_violations,
    worker_step_violation,
)
from orchestrator.domain.versions import KubeVersion

V = KubeVersion.parse


@pytest.mark.parametrize(
    ("cp", "workers", "expected"),
    [
        ("v1.34.1", ["v1.34.1", "v1.31.0"], []),
        (
            "v1.34.1",
            ["v1.30.0"],
            [
                "workers md-0 at v1.30.0 are 4 minors behind the control plane at v1.34.1 (kubelets may trail by at most 3)"
            ],
        ),
        (
            "v1.33.0",
            ["v1.34.0"],
            [
                "workers md-0 at v1.34.0 are newer than the control plane at v1.33.0 (kubelets must never be newer than the API server)"
            ],
        ),
        ("v1.33.0", ["v1.33.5"], []),  # a newer patch of the same minor is within policy
        (
            "v1.26.0",
            ["v1.23.0"],
            [
                "workers md-0 at v1.23.0 are 3 minors behind the control plane at v1.26.0 (kubelets may trail by at most 2)"
            ],
        ),
        (
            "v1.27.0",
            ["v1.24.0"],
            [
                "workers md-0 at v1.24.0 are 3 minors behind the control plane at v1.27.0 (kubelets may trail by at most 2)"
            ],
        ),
        ("v1.28.0", ["v1.25.0"], []),
    ],
)
def test_state_violations(cp: str, workers: list[str], expected: list[str]) -> None:
    got = state_violations(V(cp), [(f"md-{i}", V(w)) for i, w in enumerate(workers)])
    assert [v.message for v in got] == expected


@pytest.mark.parametrize(
    ("current", "target", "expected"),
    [
        ("v1.30.0", "v1.31.0", None),
        ("v1.30.0", "v1.30.1", None),
        ("v1.32.0+a", "v1.32.0+b", None),
        (
            "v1.30.0",
            "v1.32.0",
            "control plane cannot go from minor 30 to 32 in one step: it must visit every minor (1.30 -> 1.31 -> 1.32)",
        ),
        (
            "v1.31.0",
            "v1.30.9",
            "control plane cannot go from v1.31.0 to v1.30.9: downgrades are not supported",
        ),
        (
            "v1.31.0",
            "v1.31.0",
            "control plane is already at v1.31.0: a step must change the version",
        ),
        ("v1.31.0", "v2.0.0", "control plane cannot change major version (v1.31.0 -> v2.0.0)"),
    ],
)
def test_control_plane_step(current: str, target: str, expected: str | None) -> None:
    assert control_plane_step_violation(V(current), V(target)) == expected


@pytest.mark.parametrize(
    ("current", "target", "ok"),
    [
        ("v1.30.0", "v1.33.0", True),
        ("v1.30.0", "v1.34.0", False),
        ("v1.22.0", "v1.24.0", True),
        ("v1.22.0", "v1.25.0", False),
        ("v1.31.0", "v1.30.0", False),
    ],
)
def test_worker_step(current: str, target: str, ok: bool) -> None:
    assert (worker_step_violation(V(current), V(target)) is None) == ok


def test_worker_step_message_names_both_minors() -> None:
    assert worker_step_violation(V("v1.30.0"), V("v1.34.1")) == (
        "workers cannot go from minor 30 (v1.30.0) to minor 34 (v1.34.1): an intermediate step is "
        "required by the 3-minor kubelet skew"
    )


def test_kubelet_lag_changes_at_1_25() -> None:
    assert max_kubelet_lag(V("v1.24.9")) == 2
    assert max_kubelet_lag(V("v1.25.0")) == 3
