"""The I/O the activities need, as a small protocol: the kube adapter implements it, tests fake it.

Why a protocol and not activities that talk to Kubernetes directly: everything that decides
(idempotency by from/to versions, heartbeats, error classification, placement, compatibility)
lives once in ``workflows.activities``; a backend only reads and writes objects. The real
implementation (over ``orchestrator.kube``: LIST calls, CAPI v1beta2 first with v1beta1
understood, the taint annotation contract, PlacementDecision writes, workload-cluster access
through CAPI kubeconfig secrets) can then be swapped in without touching workflow code, and the
workflow tests exercise the same activity code with an in-memory fleet.

Where it lives: beside its Kubernetes implementation (``orchestrator.kube.backend``), because the
layers point down only and the implementation sits below ``workflows``; the port must not be
above what implements it. The module itself is pure (plain frozen dataclasses, a Protocol and
exceptions; import-linter holds it to the pure contract), which is what lets the Temporal payloads
(``workflows.model``) and deterministic workflow code name a cluster with ``ClusterRef``.

Contract every implementation keeps:

* ``observe`` reads one cluster in one go (Cluster, control plane, MachineDeployments, and when
  reachable the workload cluster's /version and Node kubelet versions), applying CAPI's own
  completion rules to fill ``rolled_out`` (observedGeneration, up-to-date/available replicas,
  RollingOut false, status versions);
* ``rollout_wakeups`` lets a rollout wait sleep between observations until the cluster's control
  plane or a MachineDeployment may have finished (a backend that watches the fleet wakes it on
  such a change; one that cannot tell lets every wait run its full timeout). A wake-up carries
  no data: the waiter observes afterwards, so a late or spurious one costs time, never
  correctness;
* ``set_*_version`` write the version together with the step id (an annotation such as
  ``calibrator.dev/step``) in one patch. Managed topologies are stepped through
  ``spec.topology.version``; a control-plane step defers the MachineDeployment topologies in the
  same patch and a worker step releases them, so workers move only where the plan moves them (a
  pool that follows the topology version reports it as its declared version, and a worker step
  the topology already performed is reported as already applied); other clusters through
  KubeadmControlPlane and MachineDeployment ``spec`` versions;
* ``add_taint`` / ``remove_taint`` follow the taint contract of docs/design.md (annotation plus the
  ``calibrator.dev/schedulable`` label) and are idempotent, returning whether they changed anything;
* ``write_placement`` writes PlacementDecisions; it is only given schedulable decisions, writes
  only those that differ from what is stored (so a re-placement costs writes in proportion to
  what changed), and treats each decision's ``resource_version`` as a compare-and-swap
  precondition on the workload (the version the inventory read): a workload someone else changed
  meanwhile is reported in ``PlacementWrite.conflicts`` and not written, so two clusters
  upgrading side by side never overwrite each other's decisions with stale ones. A large write
  set may be written a bounded number at a time (the kube backend: ``PLACEMENT_WRITERS``); the
  result lists workloads in the order of ``decisions`` either way, and ``progress`` (when given)
  is called on the caller's event loop with (decisions handled, decisions given) as they finish,
  so the activity can heartbeat while a large placement is written;
* ``read_usage`` looks at the workload cluster now (deprecated APIs requested of every
  control-plane instance, stored objects last written at a deprecated version, PDBs that allow
  no eviction) and never raises for an unreachable cluster: it returns a partial read saying
  why; ``record_usage`` folds such a read into the record kept on the Cluster (merged by
  ``orchestrator.domain.observed.merge_usage``, written with the read resourceVersion and
  re-read on conflict) and returns the merged usage, so requests seen by an apiserver that a
  rollout has since replaced stay reported;
* ``put_blob`` / ``get_blob`` keep immutable, content-addressed documents (the calibration plan)
  out of workflow history: the key is the SHA-256 of the bytes, a second put of the same key is
  a no-op, and a missing key is ``NotFoundError``; ``delete_blob`` removes one when its owner
  (the calibration, or the evaluation for a scope) is done with it, and a missing one is fine;
* unknown clusters or objects raise ``NotFoundError``, a refused request ``NotAllowedError``, an
  unusable object ``InvalidObjectError`` and a version changed by someone else
  ``VersionChangedError`` (the activities turn each into one non-retryable failure type); any
  other exception is transient and retried by Temporal;
* nothing returned ever contains a credential.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from orchestrator.domain.observed import ApiUsage, DisruptionBlocker
from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.domain.taints import Effect, Taint

# --------------------------------------------------------------------------------------------
# Errors a backend raises on purpose
# --------------------------------------------------------------------------------------------

Progress = Callable[[int, int], None]
"""(done, total) -> None: how far a long write has got (``write_placement``)."""


class BackendError(Exception):
    """Base of the errors a backend raises on purpose."""


class NotFoundError(BackendError):
    """The cluster or one of its objects does not exist: retrying will not help."""


class NotAllowedError(BackendError):
    """The API server refused the request (403): the worker's role lacks a permission.

    Retrying cannot help until an operator grants it, so the step fails at once, naming the
    object and the permission, instead of waiting out its budget.
    """


class InvalidObjectError(BackendError):
    """An object on the cluster cannot be used as it is (an invalid FleetWorkload, say)."""


class VersionChangedError(BackendError):
    """Someone else declared another version while a step was writing its own."""


# --------------------------------------------------------------------------------------------
# What the activities name and what the backend reports (plain data, no logic)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterRef:
    """How activities name a cluster: ``namespace`` may be empty (the backend resolves names)."""

    name: str
    namespace: str = ""


@dataclass(frozen=True)
class ComponentObservation:
    """The control plane or one MachineDeployment as CAPI reports it.

    ``version`` is the declared (spec) version; ``rolled_out`` applies CAPI's completion rules
    for that version; ``failure`` is a terminal problem CAPI reports (empty when none).
    ``versions`` are what actually runs: API server gitVersion(s) for the control plane, node
    kubelet versions for a pool (empty when the workload cluster is unreachable).
    """

    name: str
    version: str
    rolled_out: bool
    message: str = ""
    failure: str = ""
    versions: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClusterObservation:
    """One cluster, read in one go by ``FleetBackend.observe``."""

    cluster: ClusterRef
    control_plane: ComponentObservation
    pools: tuple[ComponentObservation, ...]
    taints: tuple[Taint, ...] = ()
    topology: bool = True
    reachable: bool = True

    def pool(self, name: str) -> ComponentObservation | None:
        """The MachineDeployment called ``name``, if present."""
        for pool in self.pools:
            if pool.name == name:
                return pool
        return None


@dataclass(frozen=True)
class ClusterReplicasInfo:
    """One line of a PlacementDecision."""

    cluster: str
    replicas: int


@dataclass(frozen=True)
class PlacementDecisionInfo:
    """A PlacementDecision to write (``calibrator.dev/v1alpha1``)."""

    workload: str  # namespace/name
    clusters: tuple[ClusterReplicasInfo, ...]
    unschedulable: bool = False
    reason: str = ""
    # The workload's version the decision was computed from (``Inventory.workload_versions``):
    # the write is a compare-and-swap on it; "" writes unconditionally.
    resource_version: str = ""


@dataclass(frozen=True)
class PlacementWrite:
    """What ``FleetBackend.write_placement`` did.

    ``written``: decisions that differed from what was stored and were written; ``conflicts``:
    workloads someone else changed since the inventory read them (nothing written for them).
    """

    written: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()


@dataclass(frozen=True)
class UsageRead:
    """One look at a workload cluster (``FleetBackend.read_usage``), before any merge.

    ``partial`` says why the look was incomplete ("" when complete): an apiserver instance or
    the whole cluster that did not answer. A partial read is never a clean one.
    """

    usage: tuple[ApiUsage, ...] = ()
    blockers: tuple[DisruptionBlocker, ...] = ()
    partial: str = ""


# --------------------------------------------------------------------------------------------
# The port
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Inventory:
    """One read of the fleet: the snapshot, where each cluster lives, and what was left out.

    The one inventory type: ``orchestrator.kube.inventory.read_fleet`` returns it to the CLI's
    live mode and to ``FleetBackend.inventory`` (the worker's activities) alike.
    """

    snapshot: FleetSnapshot
    namespaces: Mapping[str, str] = field(default_factory=dict)
    """Cluster name -> its namespace (CAPI objects are namespaced)."""
    skipped: Mapping[str, str] = field(default_factory=dict)
    """Clusters left out because their objects are malformed or unsupported: name -> reason."""
    pending: Mapping[str, str] = field(default_factory=dict)
    """Clusters left out because they are still being created: name -> reason."""
    workload_versions: Mapping[str, str] = field(default_factory=dict)
    """``namespace/name`` -> an opaque version of the workload's stored placement (the
    FleetWorkload's resourceVersion): the precondition of a decision computed from this read."""
    workloads_served: bool = True
    """False when calibrator.dev is not installed and the reader did not require it."""


class Wakeup(Protocol):
    """What a rollout wait sleeps on between two observations (``FleetBackend.rollout_wakeups``)."""

    async def wait(self, timeout: float) -> bool:
        """Until the rollout may have moved (True: woken) or ``timeout`` s passed (False)."""
        ...


class FleetBackend(Protocol):
    """Reads and writes of the management plane that the calibration activities perform."""

    async def inventory(self, clusters: Sequence[str] = ()) -> Inventory:
        """The fleet (or just ``clusters``) as a FleetSnapshot, built from LIST calls.

        Workloads' ``placement.clusters`` reflect the current PlacementDecisions.
        """
        ...

    async def observe(self, cluster: ClusterRef) -> ClusterObservation:
        """Declared versions, rollout state, actual versions and taints of one cluster."""
        ...

    def rollout_wakeups(self, cluster: ClusterRef) -> AbstractAsyncContextManager[Wakeup]:
        """Wake-ups for one wait on ``cluster``'s rollout, from entering until leaving.

        A change between two waits is not lost: the next ``wait`` returns at once.
        """
        ...

    async def set_control_plane_version(
        self, cluster: ClusterRef, version: str, step_id: str
    ) -> None:
        """Declare the control plane's version (topology.version for managed topologies)."""
        ...

    async def set_pool_version(
        self, cluster: ClusterRef, pool: str, version: str, step_id: str
    ) -> None:
        """Declare one MachineDeployment's version (release it, for managed topologies)."""
        ...

    async def add_taint(self, cluster: ClusterRef, taint: Taint) -> bool:
        """Add the taint (same key and effect: keep the existing one). True if it changed."""
        ...

    async def remove_taint(self, cluster: ClusterRef, key: str, effect: Effect) -> bool:
        """Remove taints with ``key`` and ``effect``. True if it changed anything."""
        ...

    async def write_placement(
        self,
        decisions: Sequence[PlacementDecisionInfo],
        reason: str,
        progress: Progress | None = None,
    ) -> PlacementWrite:
        """Write the decisions that changed, each only if its workload is still as read."""
        ...

    async def read_usage(
        self, cluster: ClusterRef, now: datetime, *, blockers_only: bool = False
    ) -> UsageRead:
        """What the workload cluster shows now (a partial read when it does not answer).

        ``blockers_only``: only its PodDisruptionBudgets (a worker step's drain gate needs no
        metrics and no stored-object scan, the look's costly parts).
        """
        ...

    async def record_usage(
        self, cluster: ClusterRef, fresh: Sequence[ApiUsage], now: datetime
    ) -> tuple[ApiUsage, ...]:
        """Fold ``fresh`` into the Cluster's record; the merged usage."""
        ...

    async def put_blob(self, digest: str, data: bytes) -> None:
        """Store ``data`` under its SHA-256 hex ``digest`` (idempotent; never overwritten)."""
        ...

    async def get_blob(self, digest: str) -> bytes:
        """The bytes stored under ``digest`` (NotFoundError if there are none)."""
        ...

    async def delete_blob(self, digest: str) -> None:
        """Delete what ``put_blob`` stored under ``digest`` (nothing there is not an error)."""
        ...
