"""The calibration planner with the placer stated by the test: its answer alone decides move or block.

``tests/orchestrator/test_planning.py`` covers the planner bound to the real placement engine;
here the ``Placer`` is a table, so each verdict follows from one stated answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from orchestrator.domain.calibration import plan_calibration
from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.domain.versions import KubeVersion
from orchestrator.domain.waves import DEFAULT_STRATEGY

TARGET = KubeVersion.parse("v1.33.1")


def fleet() -> FleetSnapshot:
    """`tuner` runs on `a` and uses an API removed in 1.32; `a` and `b` are planned to 1.33."""
    return snapshot_from_mapping(
        {
            "availableVersions": ["v1.31.1", "v1.32.0", "v1.33.1"],
            "clusters": [
                {"name": name, "controlPlane": {"version": "v1.31.1"}} for name in ("a", "b")
            ],
            "workloads": [
                {
                    "name": "tuner",
                    "apis": ["flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema"],
                    "placement": {"clusters": ["a"]},
                }
            ],
        }
    )


@pytest.mark.parametrize(
    ("chosen", "action", "destination", "a_blocked"),
    [
        (("b",), "move", "b", False),  # another cluster takes it: the step goes on
        (("a", "b"), "move", "b", False),  # the first cluster that is not its own
        (("a",), "block", None, True),  # only the cluster that loses the API: no home
        ((), "block", None, True),  # unschedulable in the end state
    ],
)
def test_the_placers_answer_decides_move_or_block(
    chosen: tuple[str, ...], action: str, destination: str | None, a_blocked: bool
) -> None:
    asked: list[tuple[FleetSnapshot, tuple[str, ...]]] = []

    def placer(end: FleetSnapshot, workloads: Sequence[str]) -> Mapping[str, tuple[str, ...]]:
        asked.append((end, tuple(workloads)))
        return {"default/tuner": chosen}

    plan = plan_calibration(fleet(), TARGET, DEFAULT_STRATEGY, None, None, placer=placer)

    verdict = plan.findings[0]
    assert (verdict.action, verdict.destination) == (action, destination)
    assert plan.plan_for("a").blocked is a_blocked
    # Asked once, with every mover, about the end state: every planned cluster at the target.
    [(end, workloads)] = asked
    assert workloads == ("default/tuner",)
    assert {str(c.control_plane.version) for c in end.clusters} == {"v1.33.1"}


def test_the_placer_is_not_asked_when_no_workload_would_break() -> None:
    def placer(end: FleetSnapshot, workloads: Sequence[str]) -> Mapping[str, tuple[str, ...]]:
        raise AssertionError("asked without a mover")

    plan = plan_calibration(
        fleet(), KubeVersion.parse("v1.31.1"), DEFAULT_STRATEGY, None, None, placer=placer
    )
    assert plan.findings == ()
