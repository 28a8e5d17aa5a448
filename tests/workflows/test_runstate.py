"""The calibration's failure model as tables, without Temporal (workflows/runstate.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from workflows import runstate
from workflows.model import ClusterProgress, ClusterState, Phase

T0 = datetime(2026, 1, 1, tzinfo=UTC)
S = ClusterState


def clusters(**states: ClusterState | tuple[ClusterState, bool]) -> dict[str, ClusterProgress]:
    """Cluster progress by name; ``(state, False)`` is a loaded member whose child never started."""
    out: dict[str, ClusterProgress] = {}
    for name, spec in states.items():
        state, started = spec if isinstance(spec, tuple) else (spec, True)
        out[name] = ClusterProgress(name=name, state=state, started_at=T0 if started else None)
    return out


def counts(cs: dict[str, ClusterProgress]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in cs.values():
        out[c.state.value] = out.get(c.state.value, 0) + 1
    return out


@pytest.mark.parametrize(
    ("states", "max_failures", "failures", "over"),
    [
        ({}, 0, 0, False),
        ({"a": S.SUCCEEDED, "b": S.SKIPPED, "c": S.ABORTED}, 0, 0, False),
        ({"a": S.FAILED}, 0, 1, True),
        ({"a": S.FAILED}, 1, 1, False),
        # Waiting for a decision counts: it stops new clusters until someone retries it.
        ({"a": S.WAITING_FOR_DECISION}, 0, 1, True),
        ({"a": S.WAITING_FOR_DECISION, "b": S.FAILED}, 1, 2, True),
        ({"a": S.BLOCKED, "b": S.UNASSIGNED, "c": S.UP_TO_DATE}, 0, 0, False),
    ],
)
def test_failure_budget(
    states: dict[str, ClusterState], max_failures: int, failures: int, over: bool
) -> None:
    cs = clusters(**states)
    assert runstate.failures(counts(cs)) == failures
    assert runstate.over_budget(counts(cs), max_failures) is over


@pytest.mark.parametrize(
    ("states", "active", "stepping"),
    [
        ({}, [], False),
        ({"a": S.RUNNING}, ["a"], True),
        ({"a": (S.PENDING, False)}, [], False),  # loaded, child not started
        ({"a": S.PENDING}, ["a"], True),  # started, before its first transition
        ({"a": S.WAITING_FOR_DECISION}, ["a"], False),
        ({"a": S.WAITING_FOR_DECISION, "b": S.RUNNING}, ["a", "b"], True),
        ({"a": S.SUCCEEDED, "b": S.FAILED, "c": S.SKIPPED}, [], False),
    ],
)
def test_active_and_stepping(
    states: dict[str, ClusterState | tuple[ClusterState, bool]], active: list[str], stepping: bool
) -> None:
    cs = clusters(**states)
    assert runstate.active(cs) == active
    assert runstate.stepping(cs) is stepping
    for name in cs:
        assert runstate.started(cs, name) is (cs[name].started_at is not None)
    assert runstate.started(cs, "unknown") is False


@pytest.mark.parametrize(
    ("states", "max_failures", "dead"),
    [
        # Within budget: never a dead halt.
        ({"a": S.FAILED}, 1, False),
        # Over budget, nothing could bring it back: the run may end halted.
        ({"a": S.FAILED, "b": S.SUCCEEDED}, 0, True),
        # A cluster waiting for a decision could be retried and succeed.
        ({"a": S.WAITING_FOR_DECISION}, 0, False),
        ({"a": S.FAILED, "b": S.WAITING_FOR_DECISION}, 0, False),
        # A child still stepping could finish; wait for it.
        ({"a": S.FAILED, "b": S.RUNNING}, 0, False),
        ({"a": S.FAILED, "b": (S.PENDING, False)}, 0, True),  # loaded, never started
    ],
)
def test_dead_halt(
    states: dict[str, ClusterState | tuple[ClusterState, bool]], max_failures: int, dead: bool
) -> None:
    cs = clusters(**states)
    assert runstate.dead_halt(cs, counts(cs), max_failures) is dead


# A wave waits for clusters that are still doing something; a cluster parked for an operator's
# decision does not hold the wave (the failure budget decides whether the next one starts).
UNSETTLED = {S.PENDING, S.WAITING_FOR_WINDOW, S.RUNNING, S.PAUSED}


@pytest.mark.parametrize("state", list(ClusterState))
def test_settled_means_final_or_parked(state: ClusterState) -> None:
    assert runstate.settled(state) is (state not in UNSETTLED)


@pytest.mark.parametrize(
    ("paused", "aborted", "over", "may"),
    [
        (False, False, False, True),
        (True, False, False, False),
        (False, True, False, False),
        (False, False, True, False),
        (True, True, True, False),
    ],
)
def test_may_start(paused: bool, aborted: bool, over: bool, may: bool) -> None:
    assert runstate.may_start(paused=paused, aborted=aborted, over_budget=over) is may


@pytest.mark.parametrize(
    ("final", "planned", "aborted", "over", "paused", "activity", "phase"),
    [
        (Phase.COMPLETED, True, True, True, True, Phase.RUNNING, Phase.COMPLETED),
        (None, False, True, True, True, Phase.RUNNING, Phase.PLANNING),
        (None, True, True, True, True, Phase.RUNNING, Phase.ABORTED),
        (None, True, False, True, True, Phase.RUNNING, Phase.HALTED),  # halt outranks pause
        (None, True, False, False, True, Phase.SOAKING, Phase.PAUSED),
        (None, True, False, False, False, Phase.SOAKING, Phase.SOAKING),
        (None, True, False, False, False, Phase.RUNNING, Phase.RUNNING),
    ],
)
def test_phase_precedence(
    final: Phase | None,
    planned: bool,
    aborted: bool,
    over: bool,
    paused: bool,
    activity: Phase,
    phase: Phase,
) -> None:
    got = runstate.phase(
        final=final,
        planned=planned,
        aborted=aborted,
        over_budget=over,
        paused=paused,
        activity=activity,
    )
    assert got is phase
