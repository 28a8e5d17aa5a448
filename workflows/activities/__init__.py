"""The calibration activities: one dataclass in, one out, all I/O behind ``FleetBackend``.

Activities are methods of ``CalibrationActivities`` so a worker binds them to one backend (the
kube adapter in production, an in-memory fleet in the workflow tests); workflows call them by
method reference, which pins the activity names below. The class gathers one group per concern,
each a module of this package: ``plan`` (plan the fleet, the stored plan's waves and cluster
plans), ``rollout`` (preflight, patch, wait, verify), ``taints``, ``placement`` (re-place) and
``policy`` (fleet policy, API compatibility); ``errors`` classifies backend errors once,
``plan_payload`` is the plan as payload, ``base`` the state the groups share.
``CalibrationActivities.all`` is the one registration list for the worker.

Rules every activity keeps, because the workflow's guarantees rest on them:

* **Idempotent.** A patch carries the step id and the expected "from" version: a target already
  declared is reported as ``already`` and not written again, so a retried activity (lost response,
  worker crash) never applies a step twice; any third version is a ``VersionConflict`` (someone
  else changed the cluster) and fails without retry.
* **Waits heartbeat** on every poll with a ``WaitProgress``; a dead worker is noticed by the
  heartbeat timeout and the wait resumes elsewhere, within the step's schedule-to-close budget.
* **Re-placements heartbeat** with a ``PlacementProgress`` after reading the fleet, before
  writing and per decision written, so a large first placement may take as long as its writes
  keep progressing (``Timeouts.placement_seconds`` bounds an attempt) while a dead worker is
  still noticed within the heartbeat timeout.
* **Invalid input is non-retryable** (``InvalidInput``, ``NotFound``): retrying cannot fix it and
  the workflow must fail before touching anything.
* **One classification of backend errors** (``classify``): every backend call goes through
  ``base._ClassifiedBackend``, which turns the backend's deliberate errors into one ApplicationError
  type each (missing object: ``NotFound``; refused request: ``NotAllowed``; unusable object on the
  cluster: ``InvalidInput``; a version moved by someone else: ``VersionConflict``), all
  non-retryable. Anything else is transient: the backend already retried it within the call
  (``orchestrator.kube.client.harden``) and Temporal's retry policy takes it from there.
* Pure decisions (planning, placement, compatibility) run here, not in the backend, so the plan
  and every placement are recorded in history and identical for every backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workflows.activities.errors import (
    INVALID_INPUT,
    NON_RETRYABLE_ERRORS,
    NOT_ALLOWED,
    NOT_FOUND,
    PLACEMENT_CONFLICT,
    ROLLOUT_FAILED,
    VERSION_CONFLICT,
    classify,
)
from workflows.activities.placement import PlacementActivities
from workflows.activities.plan import PlanActivities
from workflows.activities.policy import PolicyActivities
from workflows.activities.rollout import RolloutActivities
from workflows.activities.taints import TaintActivities

__all__ = [
    "INVALID_INPUT",
    "NON_RETRYABLE_ERRORS",
    "NOT_ALLOWED",
    "NOT_FOUND",
    "PLACEMENT_CONFLICT",
    "ROLLOUT_FAILED",
    "VERSION_CONFLICT",
    "CalibrationActivities",
    "classify",
]


class CalibrationActivities(
    PlanActivities, PolicyActivities, TaintActivities, PlacementActivities, RolloutActivities
):
    """Activity implementations bound to one ``FleetBackend``: every group, one registration list."""

    def all(self) -> list[Callable[..., Any]]:
        """Every activity, for ``Worker(activities=...)``."""
        return [
            self.plan_fleet,
            self.evaluate_policy,
            self.wave,
            self.cluster_plan,
            self.locate_cluster,
            self.preflight,
            self.add_taint,
            self.remove_taint,
            self.replace,
            self.patch_control_plane,
            self.wait_control_plane,
            self.patch_workers,
            self.wait_workers,
            self.verify,
            self.check_compat,
            self.drop_blob,
        ]
