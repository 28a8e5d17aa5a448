"""Task queue names, in one module so the worker, the client and the CLI can never disagree."""

from __future__ import annotations

# Workflows and activities share one queue: activities are short API calls or heartbeating
# waits, so one worker pool serves both and a single ``calibrator worker`` runs everything.
CALIBRATION = "fleet-calibrator"
