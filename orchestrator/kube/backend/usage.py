"""Observed API usage and disruption blockers of ``KubeFleetBackend`` (issue 27).

``read_usage`` looks at one workload cluster now (``workload.observe_cluster``, which runs
``orchestrator.kube.apiusage``: each
control-plane instance's metrics, stored objects, PodDisruptionBudgets); ``record_usage`` folds a
look into the record on the CAPI Cluster (``orchestrator.domain.observed_record``), written with
the read object's resourceVersion and re-read on conflict, as the taints are. The record is why
a request counted by an apiserver that KCP has since replaced is still reported after the step.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from orchestrator.domain.observed import ApiUsage, merge_usage
from orchestrator.domain.observed_record import (
    OBSERVED_ANNOTATION,
    ObservedRecordError,
    encode_record,
    record_of,
)
from orchestrator.kube import capi, workload
from orchestrator.kube.backend.access import CONFLICT_RETRIES, KubeAccess, object_annotations
from orchestrator.kube.backend.port import (
    BackendError,
    ClusterRef,
    InvalidObjectError,
    UsageRead,
)
from orchestrator.kube.client import object_meta, status_code

OBSERVE_TIMEOUT = 30.0  # one look at a workload cluster, every request included: the gate
# reads twice (with its window between) inside one patch activity's 120 s


class UsageObserver(KubeAccess):
    """``FleetBackend.read_usage`` and ``record_usage``."""

    def _read_usage(self, ref: ClusterRef, now: datetime, blockers_only: bool) -> UsageRead:
        ns = self._namespace_of(ref)
        try:
            usage, blockers, partial = workload.observe_cluster(
                self._mgmt, ns, ref.name, now, OBSERVE_TIMEOUT, blockers_only=blockers_only
            )
        except workload.WorkloadUnreachable as err:
            return UsageRead(partial=str(err))
        except Exception as err:
            if status_code(err) in (401, 403):
                raise
            return UsageRead(partial=f"observing {ns}/{ref.name}: {workload.failure_reason(err)}")
        return UsageRead(tuple(usage), tuple(blockers), partial)

    def _record_usage(
        self, ref: ClusterRef, fresh: Sequence[ApiUsage], now: datetime
    ) -> tuple[ApiUsage, ...]:
        for attempt in range(CONFLICT_RETRIES):
            ns, cluster = self._cluster(ref)
            where = f"Cluster {ns}/{ref.name}"
            try:
                recorded = record_of(object_annotations(cluster), where)
            except ObservedRecordError as err:
                raise InvalidObjectError(
                    f"{err} (delete the annotation to start a new record)"
                ) from None
            merged = merge_usage(recorded, fresh, now)
            # A clean cluster keeps no record (and costs no PATCH); an emptied one loses it.
            text = encode_record(merged) if merged else None
            if text == object_annotations(cluster).get(OBSERVED_ANNOTATION):
                return merged
            body = {
                "metadata": {
                    "resourceVersion": object_meta(cluster)["resourceVersion"],
                    "annotations": {OBSERVED_ANNOTATION: text},
                }
            }
            try:
                self._patch(capi.CLUSTER, ns, ref.name, body)
            except Exception as err:
                if status_code(err) == 409 and attempt + 1 < CONFLICT_RETRIES:
                    continue
                raise
            return merged
        raise BackendError(f"usage record of {ref.name}: too many conflicting writers")

    async def read_usage(
        self, cluster: ClusterRef, now: datetime, *, blockers_only: bool = False
    ) -> UsageRead:
        """What the workload cluster shows now; an unreachable one is a partial read."""
        return await self._call(
            "read_usage",
            self._cluster_attributes(cluster),
            lambda: self._read_usage(cluster, now, blockers_only),
        )

    async def record_usage(
        self, cluster: ClusterRef, fresh: Sequence[ApiUsage], now: datetime
    ) -> tuple[ApiUsage, ...]:
        """Fold ``fresh`` into the Cluster's record and return the merged usage."""
        return await self._call(
            "record_usage",
            self._cluster_attributes(cluster),
            lambda: self._record_usage(cluster, fresh, now),
        )
