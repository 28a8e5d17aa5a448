"""The calibrator's own metrics, recorded through Temporal's ``MetricMeter``.

Why Temporal's meter and not prometheus_client: the SDK runtime already serves its metrics on one
Prometheus endpoint (``temporalio.runtime.PrometheusConfig``), its meter has counters, gauges and
float histograms, and the workflow meter (``workflow.metric_meter()``) drops recordings while a
workflow replays history, so a worker restart does not count a calibration twice. Everything the
worker measures is therefore on one endpoint (docs/observability.md, docs/decisions.md).

Recorders take the meter (and a "live" check for workflows) so workflow code stays free of I/O
and the recorders can be tested without a worker.

Label rule: every label value comes from a small set fixed in this module or in
``workflows.model`` (phases, components, outcomes, actions), never from a run, cluster, workload
or version. The Temporal SDK's exporter cannot remove a series once recorded, so a per-run label
(a calibration id) would add series with every run until the worker restarts; per-run state is
Temporal's (``calibrator status``, the ``CalibrationPhase`` search attribute), and the metrics
count what crosses all runs. ``LABELS`` lists the values each label may take; a test holds every
recorder to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from temporalio.common import MetricMeter

CLUSTER_TRANSITIONS = "calibrator_cluster_transitions_total"
CALIBRATIONS = "calibrator_calibrations_total"
STEP_DURATION = "calibrator_step_duration_seconds"
TAINT_GATED = "calibrator_taint_gated_seconds"
PLACEMENT_RUNS = "calibrator_placement_runs_total"
PLACEMENT_DURATION = "calibrator_placement_duration_seconds"
PLACEMENT_PHASE = "calibrator_placement_phase_seconds"
FINDINGS = "calibrator_findings_total"

# Core's default buckets are for milliseconds (50 .. 10000); ours are seconds at the scale of
# what they measure: CAPI rollouts take minutes, a tainted cluster is gated for minutes to hours,
# a placement run takes milliseconds to seconds.
BUCKETS: Mapping[str, tuple[float, ...]] = {
    STEP_DURATION: (5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200),
    TAINT_GATED: (30, 60, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400),
    PLACEMENT_DURATION: (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    PLACEMENT_PHASE: (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
}

# Outcomes of a step attempt, a taint removal and a placement run (label values).
SUCCEEDED = "succeeded"
FAILED = "failed"
UPGRADED = "upgraded"  # the taint came off after every step
RELEASED = "released"  # the taint came off because nothing was patched (skip/abort early)
PLACED = "placed"
BLOCKED = "blocked"  # the step would strand workloads: nothing written
CONFLICT = "conflict"  # other writers kept winning: the run failed and Temporal retries it
ERROR = "error"
# Where a placement run's time goes, round by round: waiting for a turn among the worker's
# other placements, reading the fleet, placing (CPU), writing the decisions (API requests).
PLACEMENT_PHASES = ("turn", "read", "place", "write")

# The values each calibrator label may take (the label rule in the module docstring). Phases are
# the ClusterState and Phase values of workflows.model, listed here so this module stays free of
# workflow imports; tests/workflows/test_telemetry.py checks both lists against the enums.
CLUSTER_PHASES = (
    "Pending", "WaitingForWindow", "Running", "Paused", "WaitingForDecision", "Succeeded",
    "Skipped", "Failed", "Aborted", "NotStarted", "Blocked", "Unassigned", "UpToDate",
)  # fmt: skip
FINAL_PHASES = ("Completed", "Failed", "Aborted")
LABELS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    CLUSTER_TRANSITIONS: {"phase": CLUSTER_PHASES},
    CALIBRATIONS: {"phase": FINAL_PHASES},
    FINDINGS: {"action": ("move", "block", "none")},
    STEP_DURATION: {"component": ("controlPlane", "workers"), "outcome": (SUCCEEDED, FAILED)},
    TAINT_GATED: {"outcome": (UPGRADED, RELEASED)},
    PLACEMENT_RUNS: {"outcome": (PLACED, BLOCKED, CONFLICT, ERROR)},
    PLACEMENT_DURATION: {"outcome": (PLACED, BLOCKED, CONFLICT, ERROR)},
    PLACEMENT_PHASE: {"phase": PLACEMENT_PHASES},
}


class FleetMetrics:
    """What FleetCalibration records: clusters entering each phase, calibrations ended, findings.

    ``live`` says whether the workflow executes for the first time (not a replay). ``start`` is
    what the run's counts were when it began (a continued-as-new run carries them over): those
    clusters entered their phases in an earlier run, which counted them.
    """

    def __init__(
        self,
        meter: MetricMeter,
        live: Callable[[], bool],
        start: Mapping[str, int] | None = None,
    ) -> None:
        self._transitions = meter.create_counter(
            CLUSTER_TRANSITIONS,
            "Clusters that entered each phase, over all calibrations",
            "clusters",
        )
        self._calibrations = meter.create_counter(
            CALIBRATIONS, "Calibrations that ended, by their final phase"
        )
        self._findings = meter.create_counter(
            FINDINGS, "Compatibility findings of calibration plans, by the action taken"
        )
        self._live = live
        self._seen: dict[str, int] = dict(start or {})

    def clusters(self, counts: Mapping[str, int]) -> None:
        """Count the clusters that entered a phase since the last call (its count's growth).

        Called at every progress change, which moves one cluster (or, at the end, all clusters
        never started at once). The baseline advances during a replay too, without recording:
        a restarted worker does not count again what the run's history already counted.
        """
        live = self._live()
        for phase, value in sorted(counts.items()):
            grown = value - self._seen.get(phase, 0)
            if grown > 0 and live:
                self._transitions.add(grown, {"phase": phase})
        self._seen = dict(counts)

    def ended(self, phase: str) -> None:
        """The calibration ended in ``phase`` (Completed, Failed or Aborted)."""
        if self._live():
            self._calibrations.add(1, {"phase": phase})

    def findings(self, by_action: Mapping[str, int]) -> None:
        """Count a new plan's findings (once per calibration: plans are made once)."""
        for action, count in sorted(by_action.items()):
            if count > 0:
                self._findings.add(count, {"action": action})


class ClusterMetrics:
    """What ClusterUpgrade records: step attempt durations and time gated by the taint."""

    def __init__(self, meter: MetricMeter) -> None:
        self._steps = meter.create_histogram_float(
            STEP_DURATION, "Duration of one attempt of an upgrade step (workflow time)", "s"
        )
        self._taint = meter.create_histogram_float(
            TAINT_GATED, "Time a cluster was gated by the upgrading taint (workflow time)", "s"
        )

    def step(self, component: str, outcome: str, seconds: float) -> None:
        """One step attempt finished: ``component`` is controlPlane or workers."""
        self._steps.record(max(0.0, seconds), {"component": component, "outcome": outcome})

    def taint_removed(self, outcome: str, seconds: float) -> None:
        """The upgrading taint came off after ``seconds`` (UPGRADED or RELEASED)."""
        self._taint.record(max(0.0, seconds), {"outcome": outcome})


class PlacementMetrics:
    """What the ``replace`` activity records: each run, its latency and where the time went."""

    def __init__(self, meter: MetricMeter) -> None:
        self._runs = meter.create_counter(
            PLACEMENT_RUNS, "Placement runs (read, place, write) by outcome"
        )
        self._latency = meter.create_histogram_float(
            PLACEMENT_DURATION, "Latency of a placement run, read to write (wall clock)", "s"
        )
        self._phases = meter.create_histogram_float(
            PLACEMENT_PHASE, "Time of one phase of a placement round (wall clock)", "s"
        )

    def run(self, outcome: str, seconds: float) -> None:
        """One placement run ended with ``outcome`` after ``seconds``."""
        self._runs.add(1, {"outcome": outcome})
        self._latency.record(max(0.0, seconds), {"outcome": outcome})

    def phase(self, phase: str, seconds: float) -> None:
        """One round spent ``seconds`` in ``phase`` (one of ``PLACEMENT_PHASES``)."""
        self._phases.record(max(0.0, seconds), {"phase": phase})
