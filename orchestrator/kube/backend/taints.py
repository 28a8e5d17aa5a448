"""Cluster taints of ``KubeFleetBackend``.

* **Taints**: the taint contract on the CAPI Cluster (docs/design.md "The upgrading taint":
  annotation ``calibrator.dev/taints`` encoded with ``orchestrator.domain.taints``, label
  ``calibrator.dev/schedulable``), written with the read object's resourceVersion and retried on
  conflict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.domain.taints import (
    SCHEDULABLE_LABEL,
    TAINTS_ANNOTATION,
    Effect,
    Taint,
    decode_taints,
    encode_taints,
    schedulable_label,
    with_taint,
    without_taint,
)
from orchestrator.kube import capi
from orchestrator.kube.backend.access import CONFLICT_RETRIES, KubeAccess, object_annotations
from orchestrator.kube.backend.port import BackendError, ClusterRef
from orchestrator.kube.backend.versions import BYPASS_MARKER, UNSAFE_VERSION_ANNOTATION
from orchestrator.kube.client import object_meta, status_code


class TaintWrites(KubeAccess):
    """``FleetBackend.add_taint`` and ``remove_taint`` (the taint contract of docs/design.md)."""

    def _update_taints(
        self, ref: ClusterRef, change: Callable[[tuple[Taint, ...]], tuple[Taint, ...]]
    ) -> bool:
        for attempt in range(CONFLICT_RETRIES):
            ns, cluster = self._cluster(ref)
            meta = object_meta(cluster)
            where = f"{ns}/{ref.name}"
            before = decode_taints(object_annotations(cluster).get(TAINTS_ANNOTATION), where)
            after = change(before)
            label = schedulable_label(after)
            changed = after != before
            # A webhook bypass left by a lost second write goes with the next taint write.
            bypass = BYPASS_MARKER in object_annotations(cluster)
            if (
                not changed
                and not bypass
                and (meta.get("labels") or {}).get(SCHEDULABLE_LABEL) == label
            ):
                return False
            annotations: dict[str, Any] = {
                TAINTS_ANNOTATION: encode_taints(after) if after else None
            }
            if bypass:
                annotations |= {UNSAFE_VERSION_ANNOTATION: None, BYPASS_MARKER: None}
            try:
                self._patch(
                    capi.CLUSTER,
                    ns,
                    ref.name,
                    {
                        "metadata": {
                            "resourceVersion": meta["resourceVersion"],
                            "annotations": annotations,
                            "labels": {SCHEDULABLE_LABEL: label},
                        }
                    },
                )
            except Exception as err:
                if status_code(err) == 409 and attempt + 1 < CONFLICT_RETRIES:
                    continue
                raise
            return changed
        raise BackendError(f"taints of {ref.name}: too many conflicting writers")  # not reached

    async def add_taint(self, cluster: ClusterRef, taint: Taint) -> bool:
        """Add the taint (same key, effect and value: keep the existing one)."""
        attributes = {**self._cluster_attributes(cluster), "calibrator.taint": taint.key}
        return await self._call(
            "add_taint",
            attributes,
            lambda: self._update_taints(cluster, lambda ts: with_taint(ts, taint)),
        )

    async def remove_taint(self, cluster: ClusterRef, key: str, effect: Effect) -> bool:
        """Remove taints with ``key`` and ``effect``."""
        attributes = {**self._cluster_attributes(cluster), "calibrator.taint": key}
        return await self._call(
            "remove_taint",
            attributes,
            lambda: self._update_taints(cluster, lambda ts: without_taint(ts, key, effect)),
        )
