"""How a followed calibration ended, as an exit status (``calibrate --wait``, ``status --wait``).

A pipeline that runs ``calibrator calibrate --wait`` must be able to stop on a run that did not
do its job without parsing the document. 0 is kept for a run that Completed with every cluster
Succeeded or already UpToDate; every other end has a documented status of its own (README,
"Exit status"), distinct from 1 (partial answer / environment), 2 (bad input) and 3
(``--fail-on``):

- 4 (``EXIT_RUN_FAILED``): the run Failed (or its workflow failed, timed out or was
  terminated), or it ended with a cluster in Failed;
- 5 (``EXIT_RUN_ABORTED``): the run was Aborted (``calibrator abort``) or cancelled;
- 6 (``EXIT_RUN_INCOMPLETE``): the run Completed but left clusters un-upgraded: Blocked,
  Skipped, NotStarted or Unassigned (the same when it stopped waiting for an operator's
  decision, as the demo's follow does).

Pure: the progress document and the workflow's close status in, status and one line out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.cli.output import (
    EXIT_OK,
    EXIT_RUN_ABORTED,
    EXIT_RUN_FAILED,
    EXIT_RUN_INCOMPLETE,
)

# Cluster states of a run that did its job (workflows.model.ClusterState values).
_DONE = frozenset({"Succeeded", "UpToDate"})
# Temporal close statuses (WorkflowExecutionStatus names) that mean the workflow failed.
_WORKFLOW_FAILED = frozenset({"FAILED", "TERMINATED", "TIMED_OUT"})


def cluster_counts(doc: Mapping[str, Any]) -> dict[str, int]:
    """Clusters per state: the run's ``counts`` (every cluster of the plan), else the rows."""
    counts = {str(k): int(v) for k, v in (doc.get("counts") or {}).items()}
    if not counts:
        for c in doc.get("clusters") or ():
            state = str(c.get("state", ""))
            counts[state] = counts.get(state, 0) + 1
    unassigned = len(doc.get("unassigned") or ())
    if unassigned and "Unassigned" not in counts:
        counts["Unassigned"] = unassigned
    return counts


def run_outcome(doc: Mapping[str, Any], workflow_status: str | None) -> tuple[int, str]:
    """The exit status of a followed run and, when not 0, the stderr line that says why.

    ``workflow_status`` is the Temporal close status name (``COMPLETED``, ``FAILED``, ...), or
    None when the follow stopped on an open run (the demo stops when it needs an operator).
    """
    run = f"calibration {doc.get('calibration_id', '?')}"
    phase = str(doc.get("phase", ""))
    counts = cluster_counts(doc)
    left = {s: n for s, n in sorted(counts.items()) if s not in _DONE and n}
    detail = ", ".join(f"{n} {s}" for s, n in left.items())
    if workflow_status in _WORKFLOW_FAILED:
        return EXIT_RUN_FAILED, f"{run}: workflow {workflow_status.lower()} (phase {phase})"
    if workflow_status == "CANCELED" or phase == "Aborted":
        reason = str(doc.get("abort_reason") or "")
        return EXIT_RUN_ABORTED, f"{run} ended Aborted" + (f": {reason}" if reason else "")
    if phase == "Failed" or counts.get("Failed"):
        why = str(doc.get("message") or "")
        tail = "; ".join(x for x in (detail, why) if x)
        return EXIT_RUN_FAILED, f"{run} ended {phase}" + (f": {tail}" if tail else "")
    if phase == "Completed" and workflow_status in (None, "COMPLETED") and not left:
        return EXIT_OK, ""
    ended = "ended" if workflow_status else "stopped"
    return EXIT_RUN_INCOMPLETE, (
        f"{run} {ended} {phase} with clusters not upgraded: {detail or 'none counted'}"
    )
