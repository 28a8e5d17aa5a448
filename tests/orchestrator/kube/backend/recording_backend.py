"""A test wrapper of the real KubeFleetBackend that records its writes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from orchestrator.kube.backend.access import PatchRecord
from orchestrator.kube.backend.fleet import KubeFleetBackend


class RecordingKubeBackend(KubeFleetBackend):
    """The real backend, counting its writes so tests can assert none is made twice.

    The production backend keeps nothing per write (a long-running worker must not grow); the
    records live only in this test wrapper.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.patches: Counter[tuple[str, str, str]] = Counter()
        self.patch_log: list[PatchRecord] = []
        self.placement_writes: list[tuple[str, str]] = []  # (workload, reason)

    def wrote_version(self, record: PatchRecord) -> None:
        self.patches[(record.cluster, record.component, record.version)] += 1
        self.patch_log.append(record)

    def wrote_placements(self, workloads: Sequence[str], reason: str) -> None:
        self.placement_writes += [(w, reason) for w in workloads]
