"""The live inventory: a management cluster's fleet as a FleetSnapshot (the one code path).

``calibrator drift|plan|check|place|snapshot`` and the worker's activities read the fleet through
``read_fleet``, which returns the port's ``Inventory`` (one type for both); what the objects mean
is decided by the pure ``orchestrator.kube.fleetmap``.

The objects come from a source (``ObjectSource``): by default LISTs, in the worker its
watch-fed cache (``orchestrator.kube.cache``: memory, no request). Cost of the LIST source,
whatever the fleet size: one paginated LIST (``limit``/``continue``,
``client.list_pages``) per kind - ClusterClasses, Clusters, KubeadmControlPlanes,
MachineDeployments, FleetWorkloads - in one namespace or all, and no per-object GET on the
management cluster. Probing (the CLI's default; the worker observes clusters one by one instead)
adds, per cluster, one GET of its kubeconfig Secret and the workload cluster's discovery and Node
list (``workload.probe``), with a deadline per cluster and at most ``PROBE_CONCURRENCY`` clusters
at once, so an unreachable cluster costs its timeout once and never stalls the others.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from kubernetes.dynamic.exceptions import ResourceNotFoundError

from orchestrator.domain.snapshot import WorkloadClusterStatus
from orchestrator.kube import capi, fleetapi
from orchestrator.kube.backend.port import Inventory
from orchestrator.kube.client import PAGE_SIZE, list_pages
from orchestrator.kube.fleetmap import (
    FleetMap,
    FleetObjects,
    InventoryError,
    ParsedFleet,
    fleet_snapshot,
    map_clusters,
    with_records,
)

PROBE_CONCURRENCY = 16
Probe = Callable[[str, str], WorkloadClusterStatus]
"""(namespace, cluster) -> what the workload cluster reports (``workload.probe`` bound to a client)."""
ObjectSource = Callable[[], tuple[FleetObjects, bool]]
"""Where ``read_fleet`` gets the objects: () -> (objects, whether FleetWorkloads are served).

``list_objects`` bound to a client (the CLI, a backend without a cache) or a watch-fed cache's
``FleetCache.objects`` (the worker): either way ``fleetmap`` maps the same ``FleetObjects``."""


def _resource(dyn: Any, kind: tuple[str, str]) -> Any:
    try:
        return dyn.resources.get(api_version=kind[0], kind=kind[1])
    except ResourceNotFoundError:
        raise InventoryError(
            f"the cluster does not serve {kind[1]} ({kind[0]}): it is not a Cluster API "
            "v1beta2 management cluster (CAPI v1.11 or newer)"
        ) from None


def list_objects(
    dyn: Any, namespace: str | None, *, require_workloads: bool = True, page_size: int = PAGE_SIZE
) -> tuple[FleetObjects, bool]:
    """One paginated LIST per kind; (objects, whether FleetWorkloads are served).

    Without our CRDs, ``require_workloads`` raises ``fleetapi.ApiMissingError`` naming the
    remedy (the worker cannot write placements without them); otherwise the fleet has no
    workloads and the flag says why.
    """

    def listed(kind: tuple[str, str]) -> list[dict[str, Any]]:
        return list_pages(_resource(dyn, kind), namespace=namespace, page_size=page_size)

    classes = listed(capi.CLUSTER_CLASS)
    clusters = listed(capi.CLUSTER)
    control_planes = listed(capi.KUBEADM_CONTROL_PLANE)
    machine_deployments = listed(capi.MACHINE_DEPLOYMENT)
    served = True
    try:
        workloads = fleetapi.list_fleet_workloads(dyn, namespace, page_size=page_size)
    except fleetapi.ApiMissingError:
        if require_workloads:
            raise
        workloads, served = [], False
    objects = FleetObjects(classes, clusters, control_planes, machine_deployments, workloads)
    return objects, served


def probe_all(
    fleet: FleetMap, probe: Probe, concurrency: int = PROBE_CONCURRENCY
) -> dict[str, WorkloadClusterStatus]:
    """Probe every cluster of ``fleet``, at most ``concurrency`` at once; name -> status."""
    if not fleet.clusters:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(fleet.clusters)))) as pool:
        results = pool.map(lambda c: probe(c.namespace, c.name), fleet.clusters)
        return {c.name: status for c, status in zip(fleet.clusters, results, strict=True)}


def listing(
    dyn: Any,
    namespace: str | None = None,
    *,
    require_workloads: bool = True,
    page_size: int = PAGE_SIZE,
) -> ObjectSource:
    """The LIST source: ``list_objects`` of ``namespace`` (None: every namespace), when called."""
    return lambda: list_objects(
        dyn, namespace, require_workloads=require_workloads, page_size=page_size
    )


def read_fleet(
    dyn: Any,
    namespace: str | None = None,
    *,
    probe: Probe | None = None,
    require_workloads: bool = True,
    concurrency: int = PROBE_CONCURRENCY,
    page_size: int = PAGE_SIZE,
    source: ObjectSource | None = None,
    parsed: ParsedFleet | None = None,
) -> Inventory:
    """The fleet of ``namespace`` (None: every namespace) as one validated FleetSnapshot.

    ``source`` gives the objects (default: ``listing`` of ``dyn`` and ``namespace``, one LIST
    per kind now; the worker passes its watch-fed cache's). ``probe`` (None: no
    workload-cluster access) fills each cluster's ``workloadCluster``. Raises ``InventoryError``
    when the objects cannot form one snapshot (the message names the object) and
    ``fleetapi.ApiMissingError`` as ``list_objects`` says. ``parsed`` keeps the parsed
    clusters and workloads between reads of the same source (``fleetmap.ParsedFleet``).
    """
    if source is None:
        source = listing(dyn, namespace, require_workloads=require_workloads, page_size=page_size)
    objects, served = source()
    fleet = map_clusters(objects, parsed)
    observed = None
    if probe is not None:
        observed = with_records(
            probe_all(fleet, probe, concurrency), objects.clusters, datetime.now(UTC)
        )
    snapshot, fleet = fleet_snapshot(fleet, objects.fleet_workloads, observed, parsed)
    return Inventory(
        snapshot=snapshot,
        namespaces={c.name: c.namespace for c in fleet.clusters},
        skipped=fleet.skipped,
        pending=fleet.pending,
        workload_versions=fleetapi.workload_versions(objects.fleet_workloads),
        workloads_served=served,
    )
