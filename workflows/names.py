"""Registered names of the workflows, their queries and updates: what a client addresses.

``workflows.client`` starts and steers runs by these names, so it needs neither the workflow
classes nor the activities they import (an import-linter contract holds it to that). The
definitions register them (``@workflow.defn(name=...)``, method names for queries and updates);
tests/workflows/test_names.py holds the two together.
"""

from __future__ import annotations

FLEET_CALIBRATION = "FleetCalibration"
CLUSTER_UPGRADE = "ClusterUpgrade"

PROGRESS = "progress"  # query of both workflows

# Updates of FleetCalibration.
PAUSE = "pause"
RESUME = "resume"
APPROVE = "approve"
SKIP = "skip"
RETRY = "retry"
ABORT = "abort"

DECIDE = "decide"  # update of ClusterUpgrade
