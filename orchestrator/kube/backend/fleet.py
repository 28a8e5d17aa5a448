"""``FleetBackend`` over a real management cluster (Cluster API v1beta2), through orchestrator.kube.

The backend talks to the API server only through ``orchestrator.kube`` (the dynamic client from
``orchestrator.kube.client``, CAPI completion rules from ``orchestrator.kube.capi``, workload
cluster access from ``orchestrator.kube.workload``); it does not import ``kubernetes`` itself
(an import-linter contract, docs/design.md "Layers"). The kubernetes client
is synchronous: every protocol method runs its calls in a thread (``asyncio.to_thread``).

What it reads and writes:

What it reads and writes, one module per concern (each module's docstring has the details):
``inventory`` (the fleet from the watch-fed cache or LIST calls), ``rollout`` (``observe``: CAPI rollout state, Nodes,
taints), ``versions`` (declared versions, efficient topology upgrades, patches), ``taints``,
``usage`` (observed API usage and its record on the Cluster), ``placement`` (FleetWorkloads and
PlacementDecisions), ``blobs`` (the calibration plan), and
``access`` for what they share, faults included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.kube import fleetapi
from orchestrator.kube.backend.blobs import BlobStore
from orchestrator.kube.backend.inventory import FleetInventory
from orchestrator.kube.backend.placement import PlacementWrites
from orchestrator.kube.backend.port import NotFoundError
from orchestrator.kube.backend.rollout import RolloutObserver
from orchestrator.kube.backend.taints import TaintWrites
from orchestrator.kube.backend.usage import UsageObserver
from orchestrator.kube.backend.versions import VersionWrites
from orchestrator.kube.client import api_client


class KubeFleetBackend(
    FleetInventory,
    RolloutObserver,
    VersionWrites,
    TaintWrites,
    UsageObserver,
    PlacementWrites,
    BlobStore,
):
    """Implements ``orchestrator.kube.backend.port.FleetBackend`` against a management cluster.

    ``namespace`` limits the fleet to one namespace (None: every namespace); ``plan_namespace``
    is where calibration plans are stored (default: ``namespace``, else ``default``); ``dyn`` replaces
    the dynamic client built from ``mgmt`` (unit tests pass a fake). With an OpenTelemetry
    ``tracer`` every protocol call is a ``kube.<operation>`` span (a child of the activity's span)
    and every HTTP request to the management or a workload cluster a CLIENT span under it; without
    one nothing is traced and nothing of OpenTelemetry is imported. With ``cache=True`` (the
    worker: ``calibrator worker``) the inventory reads a watch-fed cache of the fleet
    (``orchestrator.kube.cache``), shared by every activity, started by ``start`` (or the first
    read) and stopped by ``close``; without it (the CLI's one-shot commands) each read LISTs.
    """

    @classmethod
    def from_kubeconfig(
        cls, kubeconfig: Path | str | None = None, context: str | None = None, **kw: Any
    ) -> KubeFleetBackend:
        """A backend for the management cluster of a kubeconfig file."""
        return cls(api_client(kubeconfig, context), **kw)

    def check_api(self) -> None:
        """NotFoundError naming the remedy when calibrator.dev/v1alpha1 is not served."""
        try:
            for kind in (fleetapi.FLEET_WORKLOAD, fleetapi.PLACEMENT_DECISION):
                fleetapi.resource(self._dyn, kind)
        except fleetapi.ApiMissingError as err:
            raise NotFoundError(str(err)) from None
