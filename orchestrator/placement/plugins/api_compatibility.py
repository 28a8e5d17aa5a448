"""APICompatibility: the cluster's control plane must still serve every API the workload uses.

This is Karmada's APIEnablement made version-aware: instead of discovery (unknown for a planned
version) it asks the API lifecycle catalog, so the same plugin answers "can it run there now" and
"can it still run there after the planned upgrade". A workload on a cluster that stopped serving
one of its APIs is evicted: its manifests can no longer be applied there.
"""

from __future__ import annotations

from collections.abc import Hashable

from orchestrator.domain.apicatalog import catalog, removed_apis
from orchestrator.domain.apis import ApiRef
from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.framework import FITS, ClusterFact, FilterResult, WorkloadFact, unfit

# (catalog, its APIs) for the catalog last asked about: the catalog in force may be an
# operator's for one command (``domain.lifecycle``), so the set follows the catalog object.
_LAST: list[tuple[object, frozenset[ApiRef]]] = []


def _removable() -> frozenset[ApiRef]:
    """The APIs with a known removal in the catalog in force (computed once per catalog)."""
    entries = catalog()
    if _LAST and _LAST[0][0] is entries:
        return _LAST[0][1]
    found = frozenset(entries)
    _LAST[:] = [(entries, found)]
    return found


class ApiCompatibility:
    """Reject clusters whose version no longer serves an API the workload uses."""

    name = "APICompatibility"
    cluster_facts: frozenset[ClusterFact] = frozenset({"version"})
    workload_facts: frozenset[WorkloadFact] = frozenset({"apis"})

    def workload_key(self, workload: Workload) -> Hashable:
        """Only APIs with a known removal can ever fail, so workloads differing in others agree."""
        removable = _removable()
        return tuple(api for api in workload.apis if api in removable)

    def fits(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> bool:
        """``filter(...).fits`` without the reason text."""
        return not removed_apis(workload.apis, cluster.control_plane.version)

    def filter(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> FilterResult:
        """One reason per removed API, naming the replacement to migrate to."""
        version = cluster.control_plane.version
        reasons = [
            f"{version} no longer serves {record.api} (removed in {record.removed_in_text}; "
            + (f"use {record.replacement_api})" if record.replacement_api else "no replacement)")
            for record in removed_apis(workload.apis, version)
        ]
        return unfit(*reasons) if reasons else FITS
