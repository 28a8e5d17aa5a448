"""The calibrator's own metrics, recorded through Temporal's ``MetricMeter``.

Why Temporal's meter and not prometheus_client: the SDK runtime already serves its metrics on one
Prometheus endpoint (``temporalio.runtime.PrometheusConfig``), its meter has counters, gauges and
float histograms, and the workflow meter (``workflow.metric_meter()``) drops recordings while a
workflow replays history, so a worker restart does not count a calibration twice. Everything the
worker measures is therefore on one endpoint (docs/observability.md, docs/decisions.md).

Recorders take the meter (and a "live" check for workflows) so workflow code stays free of I/O
and the recorders can be tested without a worker. Label values are bounded: phases, components,
outcomes and actions are small fixed sets; ``calibration`` (the workflow id) grows with the number
of calibrations a worker ran, never with clusters or workloads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from temporalio.common import MetricMeter

CLUSTERS = "calibrator_clusters"
STEP_DURATION = "calibrator_step_duration_seconds"
TAINT_GATED = "calibrator_taint_gated_seconds"
PLACEMENT_RUNS = "calibrator_placement_runs_total"
PLACEMENT_DURATION = "calibrator_placement_duration_seconds"
FINDINGS = "calibrator_findings_total"

# Core's default buckets are for milliseconds (50 .. 10000); ours are seconds at the scale of
# what they measure: CAPI rollouts take minutes, a tainted cluster is gated for minutes to hours,
# a placement run takes milliseconds to seconds.
BUCKETS: Mapping[str, tuple[float, ...]] = {
    STEP_DURATION: (5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200),
    TAINT_GATED: (30, 60, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400),
    PLACEMENT_DURATION: (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
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


class FleetMetrics:
    """What FleetCalibration records: clusters by phase, and the plan's findings by action.

    ``live`` says whether the workflow executes for the first time (not a replay): the gauge
    publishes only changed values, and what it believes is published must not advance while the
    replay-safe meter drops recordings.
    """

    def __init__(self, meter: MetricMeter, calibration: str, live: Callable[[], bool]) -> None:
        self._clusters = meter.create_gauge(
            CLUSTERS, "Clusters of a calibration in each phase", "clusters"
        ).with_additional_attributes({"calibration": calibration})
        self._findings = meter.create_counter(
            FINDINGS, "Compatibility findings of calibration plans, by the action taken"
        )
        self._live = live
        self._published: dict[str, int] = {}

    def clusters(self, counts: Mapping[str, int]) -> None:
        """Publish the per-phase cluster counts that changed (a phase that emptied reads 0)."""
        if not self._live():
            return
        for phase in sorted(set(counts) | set(self._published)):
            value = counts.get(phase, 0)
            if self._published.get(phase) != value:
                self._clusters.set(value, {"phase": phase})
                self._published[phase] = value

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
    """What the ``replace`` activity records: each run and its latency."""

    def __init__(self, meter: MetricMeter) -> None:
        self._runs = meter.create_counter(
            PLACEMENT_RUNS, "Placement runs (read, place, write) by outcome"
        )
        self._latency = meter.create_histogram_float(
            PLACEMENT_DURATION, "Latency of a placement run, read to write (wall clock)", "s"
        )

    def run(self, outcome: str, seconds: float) -> None:
        """One placement run ended with ``outcome`` after ``seconds``."""
        self._runs.add(1, {"outcome": outcome})
        self._latency.record(max(0.0, seconds), {"outcome": outcome})
