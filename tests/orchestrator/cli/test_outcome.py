"""A followed run's end as an exit status: 0 only for a run that upgraded every cluster."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.cli.outcome import cluster_counts, run_outcome
from orchestrator.cli.output import (
    EXIT_BAD_INPUT,
    EXIT_FOUND,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_RUN_ABORTED,
    EXIT_RUN_FAILED,
    EXIT_RUN_INCOMPLETE,
)


def doc(phase: str, **counts: int) -> dict[str, Any]:
    return {"calibration_id": "c", "phase": phase, "counts": counts}


def test_every_status_is_distinct() -> None:
    statuses = (
        EXIT_OK, EXIT_PARTIAL, EXIT_BAD_INPUT, EXIT_FOUND,
        EXIT_RUN_FAILED, EXIT_RUN_ABORTED, EXIT_RUN_INCOMPLETE,
    )  # fmt: skip
    assert len(set(statuses)) == len(statuses)


@pytest.mark.parametrize(
    ("run", "closed", "code"),
    [
        (doc("Completed", Succeeded=3, UpToDate=1), "COMPLETED", EXIT_OK),
        (doc("Completed"), "COMPLETED", EXIT_OK),  # nothing to do is success
        (doc("Completed", Succeeded=1, NotStarted=1), "COMPLETED", EXIT_RUN_INCOMPLETE),
        (doc("Completed", Succeeded=1, Unassigned=1), "COMPLETED", EXIT_RUN_INCOMPLETE),
        (doc("Completed", Succeeded=1, Failed=1), "COMPLETED", EXIT_RUN_FAILED),
        (doc("Failed"), "COMPLETED", EXIT_RUN_FAILED),
        (doc("Running", Running=1), "TIMED_OUT", EXIT_RUN_FAILED),
        (doc("Running", Running=1), "FAILED", EXIT_RUN_FAILED),
        (doc("Aborted", Aborted=1), "COMPLETED", EXIT_RUN_ABORTED),
        (doc("Running", Running=1), "CANCELED", EXIT_RUN_ABORTED),
        # The demo stops following a run that waits for an operator: not a success.
        (doc("AwaitingDecisions", WaitingForDecision=1), None, EXIT_RUN_INCOMPLETE),
        (doc("Completed", Succeeded=1), None, EXIT_OK),
    ],
)
def test_outcomes(run: dict[str, Any], closed: str | None, code: int) -> None:
    got, line = run_outcome(run, closed)
    assert got == code
    assert (line == "") == (code == EXIT_OK)
    assert "\n" not in line


def test_counts_come_from_the_rows_when_the_run_has_none() -> None:
    rows = {
        "clusters": [{"name": "a", "state": "Succeeded"}, {"name": "b", "state": "Blocked"}],
        "unassigned": ["c"],
    }
    assert cluster_counts(rows) == {"Succeeded": 1, "Blocked": 1, "Unassigned": 1}
    assert run_outcome({"phase": "Completed", **rows}, "COMPLETED")[0] == EXIT_RUN_INCOMPLETE
