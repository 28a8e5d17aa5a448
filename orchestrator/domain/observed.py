"""What a workload cluster was seen doing, beside what its FleetWorkloads declare (pure).

A FleetWorkload's ``spec.apis`` is a promise someone keeps by hand; the kube-apiserver records
what clients really request. Two kinds of observation are carried here, in the
FleetSnapshot's ``workloadCluster`` entry and in the record kept on the CAPI Cluster object:

- ``ApiUsage``: a deprecated or removed API in use on the cluster, seen by one source:
  ``metric`` (the ``apiserver_requested_deprecated_apis`` gauge and the request counter of each
  control-plane instance), ``managedFields`` (an object whose field manager last wrote it at
  that version) or ``annotation`` (``kubectl.kubernetes.io/last-applied-configuration`` at that
  version).
- ``DisruptionBlocker``: a PodDisruptionBudget that allows no eviction at all, so a node drain,
  and with it a worker rollout, could never finish.

Metric counts are per apiserver process and reset when KCP replaces a control-plane machine, so
``merge_usage`` folds a fresh read into what was recorded before: a request seen before a step
never vanishes from the report after it, and a usage whose request count stopped growing is
told apart from one still in use (``active``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final, Literal

from orchestrator.domain.apis import ApiRef

UsageSource = Literal["metric", "managedFields", "annotation"]
USAGE_SOURCES: Final[tuple[UsageSource, ...]] = ("metric", "managedFields", "annotation")
SOURCE_TEXT: Final[Mapping[str, str]] = {
    "metric": "apiserver metrics",
    "managedFields": "managedFields of stored objects",
    "annotation": "last-applied-configuration of stored objects",
}
MAX_USAGES: Final = 200
"""Most usages one cluster carries (the catalog lists about 80 removed kinds, times 3 sources)."""
MAX_BLOCKERS: Final = 100
"""Most disruption blockers one cluster carries; more are counted in ``blockers_omitted``."""
MAX_INSTANCES: Final = 16
"""Most apiserver instances one usage keeps a counter for (a control plane has 1, 3 or 5)."""


@dataclass(frozen=True, slots=True)
class ApiUsage:
    """A deprecated or removed API in use on one workload cluster, as one source saw it.

    ``requests`` is the number of requests counted since ``first_seen`` across every apiserver
    instance (metric source only; None where the source cannot count). ``objects`` is the number
    of stored objects carrying the old apiVersion (managedFields and annotation sources; 0 for
    the metric). ``last_seen`` is when the usage was last seen growing (a new request or an
    object still there); ``observed_at`` is when it was last looked for. ``example`` names one
    object (``namespace/name``) or one apiserver instance (``10.0.0.5:6443``) for the report.
    ``counters`` keeps each apiserver instance's raw request counter at ``observed_at`` (the
    baseline the next read is compared with); it is never shown, only carried.
    """

    api: ApiRef
    resource: str
    source: UsageSource
    removed_release: str
    first_seen: datetime
    last_seen: datetime
    observed_at: datetime
    requests: int | None = None
    objects: int = 0
    example: str = ""
    counters: tuple[tuple[str, int], ...] = field(default=(), compare=False)

    @property
    def key(self) -> tuple[ApiRef, UsageSource]:
        """One usage per API and source."""
        return (self.api, self.source)

    @property
    def active(self) -> bool:
        """Still in use at the last look: stored objects are still there, or requests grew.

        A metric usage whose count did not grow at the latest read is quiet: the client seems
        to have stopped. It is still reported (it was real), but it no longer blocks.
        """
        return self.source != "metric" or self.last_seen == self.observed_at

    def describe(self) -> str:
        """``1,204 requests to storage.k8s.io/v1alpha1 volumeattributesclasses since 10:02``."""
        gv = self.api.group_version
        since = self.first_seen.strftime("%Y-%m-%d %H:%M UTC")
        if self.source == "metric":
            count = (
                "requests"
                if self.requests is None
                else f"{self.requests:,} request{'' if self.requests == 1 else 's'}"
            )
            quiet = "" if self.active else f", none since {self.last_seen:%H:%M UTC}"
            what = f"{count} to {gv} {self.resource} since {since}{quiet}"
        else:
            what = f"{self.objects:,} stored {self.resource} last written at {gv}"
            if self.example:
                what += f" (e.g. {self.example})"
        return f"observed: {what} ({SOURCE_TEXT[self.source]})"


@dataclass(frozen=True, slots=True)
class DisruptionBlocker:
    """A PodDisruptionBudget no eviction can satisfy, so draining its pods' nodes never ends.

    ``reason`` says why (``maxUnavailable is 0``, ``minAvailable 2 equals the 2 expected
    pods``); ``expected_pods`` is the PDB's ``status.expectedPods``.
    """

    namespace: str
    name: str
    reason: str
    expected_pods: int = 0

    def describe(self) -> str:
        """One line for tables and block reasons."""
        return (
            f"PodDisruptionBudget {self.namespace}/{self.name} allows no eviction "
            f"({self.reason}): a node drain would never finish"
        )


def merge_usage(
    recorded: Iterable[ApiUsage], fresh: Iterable[ApiUsage], now: datetime
) -> tuple[ApiUsage, ...]:
    """Fold a fresh observation into the recorded one; sorted by API and source.

    - A usage seen only before is kept (with ``observed_at`` = ``now``): an apiserver restart
      or a migrated object must not make history vanish; it becomes quiet, not absent, for the
      metric, and it is dropped for managedFields and annotation, whose absence now is a fact
      (the object was rewritten or deleted).
    - Metric counters are compared per apiserver instance: a new instance, or a counter lower
      than recorded (the process restarted), counts all its requests as new; otherwise the
      difference. ``requests`` grows by the sum, and ``last_seen`` moves to ``now`` only when
      the sum is positive.
    """
    old = {u.key: u for u in recorded}
    out: dict[tuple[ApiRef, UsageSource], ApiUsage] = {}
    for usage in fresh:
        before = old.pop(usage.key, None)
        if before is None:
            out[usage.key] = replace(usage, observed_at=now, last_seen=now)
            continue
        if usage.source != "metric":
            out[usage.key] = replace(
                usage, first_seen=before.first_seen, last_seen=now, observed_at=now
            )
            continue
        base = dict(before.counters)
        grown = 0
        for instance, count in usage.counters:
            prior = base.get(instance)
            grown += count if prior is None or count < prior else count - prior
        total = (before.requests or 0) + grown
        out[usage.key] = replace(
            usage,
            first_seen=before.first_seen,
            last_seen=now if grown > 0 else before.last_seen,
            observed_at=now,
            requests=total,
        )
    for key, before in old.items():
        if before.source == "metric":
            out[key] = replace(before, observed_at=now, counters=())
    return tuple(out[k] for k in sorted(out, key=lambda k: (k[0], k[1])))
