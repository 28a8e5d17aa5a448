"""FleetCalibration's run-state rules, table-driven and without Temporal."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from workflows.model import ClusterProgress, ClusterState, Phase
from workflows.runstate import RunState

T0 = datetime(2026, 1, 1, tzinfo=UTC)
S = ClusterState


def clusters(**states: tuple[ClusterState, bool]) -> dict[str, ClusterProgress]:
    """name=(state, started)."""
    return {
        name: ClusterProgress(name, state=state, started_at=T0 if started else None)
        for name, (state, started) in states.items()
    }


@dataclass
class Case:
    name: str
    states: dict[str, tuple[ClusterState, bool]]
    max_failures: int = 0
    paused: bool = False
    aborted: bool = False
    failures: int = 0
    over_budget: bool = False
    may_start: bool = True
    dead_halt: bool = False
    must_stop: bool = False
    phase: Phase = Phase.RUNNING
    active: list[str] = field(default_factory=list)


CASES = [
    Case("fresh run", {"a": (S.PENDING, False)}),
    Case(
        "one running, one pending",
        {"a": (S.RUNNING, True), "b": (S.PENDING, False)},
        active=["a"],
    ),
    Case(
        "a cluster waiting for a decision counts as failed: halted, not dead",
        {"a": (S.WAITING_FOR_DECISION, True), "b": (S.PENDING, False)},
        failures=1,
        over_budget=True,
        may_start=False,
        phase=Phase.HALTED,
        active=["a"],
    ),
    Case(
        "within a budget of one",
        {"a": (S.WAITING_FOR_DECISION, True), "b": (S.PENDING, False)},
        max_failures=1,
        failures=1,
        active=["a"],
    ),
    Case(
        "over budget, nothing waits and nothing works: dead halt, must stop",
        {"a": (S.FAILED, True), "b": (S.PENDING, False)},
        failures=1,
        over_budget=True,
        may_start=False,
        dead_halt=True,
        must_stop=True,
        phase=Phase.HALTED,
    ),
    Case(
        "over budget while another child still works: halted until it settles",
        {"a": (S.FAILED, True), "b": (S.RUNNING, True)},
        failures=1,
        over_budget=True,
        may_start=False,
        phase=Phase.HALTED,
        active=["b"],
    ),
    Case(
        "paused: nothing starts, phase paused",
        {"a": (S.RUNNING, True)},
        paused=True,
        may_start=False,
        phase=Phase.PAUSED,
        active=["a"],
    ),
    Case(
        "abort wins over pause and halt",
        {"a": (S.FAILED, True)},
        paused=True,
        aborted=True,
        failures=1,
        over_budget=True,
        may_start=False,
        dead_halt=True,
        must_stop=True,
        phase=Phase.ABORTED,
    ),
    Case(
        "skipped and blocked clusters never count as failures",
        {"a": (S.SKIPPED, True), "b": (S.BLOCKED, False), "c": (S.SUCCEEDED, True)},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_run_state_rules(case: Case) -> None:
    run = RunState(clusters(**case.states), case.max_failures, case.paused, case.aborted)
    assert run.failures() == case.failures
    assert run.over_budget() is case.over_budget
    assert run.may_start() is case.may_start
    assert run.dead_halt() is case.dead_halt
    assert run.must_stop() is case.must_stop
    assert run.active() == case.active
    assert run.phase(planned=True, activity=Phase.RUNNING) == case.phase


@pytest.mark.parametrize(
    ("planned", "final", "expected"),
    [
        (False, None, Phase.PLANNING),
        (True, None, Phase.SOAKING),
        (True, Phase.COMPLETED, Phase.COMPLETED),
        (False, Phase.FAILED, Phase.FAILED),
    ],
)
def test_phase_precedence(planned: bool, final: Phase | None, expected: Phase) -> None:
    run = RunState(clusters(a=(S.RUNNING, True)))
    assert run.phase(planned=planned, activity=Phase.SOAKING, final=final) == expected


@pytest.mark.parametrize(
    ("state", "settled"),
    [
        (S.PENDING, False),
        (S.RUNNING, False),
        (S.WAITING_FOR_WINDOW, False),
        (S.WAITING_FOR_DECISION, True),
        (S.SUCCEEDED, True),
        (S.SKIPPED, True),
        (S.ABORTED, True),
    ],
)
def test_settled(state: ClusterState, settled: bool) -> None:
    assert RunState(clusters(a=(state, True))).settled("a") is settled
