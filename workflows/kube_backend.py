"""``FleetBackend`` over a real management cluster (Cluster API v1beta2), through orchestrator.kube.

This module talks to the API server only through ``orchestrator.kube`` (the dynamic client from
``orchestrator.kube.client``, CAPI completion rules from ``orchestrator.kube.capi``, workload
cluster access from ``orchestrator.kube.workload``); it does not import ``kubernetes`` itself, so
DESIGN.md's "orchestrator/kube is the only code importing kubernetes" holds. The kubernetes client
is synchronous: every protocol method runs its calls in a thread (``asyncio.to_thread``).

What it reads and writes:

* **Inventory**: ``orchestrator.kube.inventory.read_fleet``, the code path the CLI's live mode
  uses too: one paginated LIST per kind, in one namespace or all, no per-object GETs, no
  workload-cluster probing (``observe`` reads each cluster when a step needs it). Its rules
  (declared versions, clusters left out and why) are in ``orchestrator.kube.fleetmap``.
* **Declared versions**: a managed topology declares its control plane in
  ``Cluster.spec.topology.version``; its MachineDeployments follow that version unless their
  MachineDeployment topology (``spec.topology.workers.machineDeployments[]``) defers the upgrade
  (CAPI's ``topology.cluster.x-k8s.io/defer-upgrade``, or ``hold-upgrade-sequence`` on it or on an
  entry listed before it): a deferred pool declares its own ``spec.template.spec.version``
  (``capi.pool_declared``). Other clusters declare ``KubeadmControlPlane.spec.version`` and
  ``MachineDeployment.spec.template.spec.version``.
* **Efficient topology upgrades**: a control-plane step on a managed topology moves
  ``topology.version`` and, in the same patch, sets ``defer-upgrade`` (value
  ``calibrator.dev:<step id>``) on every MachineDeployment topology whose MachineDeployment is not
  at the new version, so CAPI upgrades only the control plane and the workers move only where the
  plan moves them. A worker step releases a pool by removing our annotation (CAPI then upgrades it
  to the current topology version); an annotation we did not set is never removed and fails the
  step with a message naming it. CAPI's Cluster webhook refuses a new ``topology.version`` while
  any MachineDeployment is not at the old one (deferred or not), so a control-plane step taken
  while pools are deferred carries the webhook's documented bypass
  ``unsafe.topology.cluster.x-k8s.io/disable-update-version-check`` in the same patch (with the
  marker ``calibrator.dev/version-check-bypass``) and removes it with the next write; the
  activity has already checked what that webhook checks (from-version, control plane rolled out).
* **Patches** are JSON merge patches carrying ``metadata.resourceVersion`` of the object just read
  and the step id annotation ``calibrator.dev/step`` in the same patch. A target already declared
  with the same step id writes nothing. A 409 (someone wrote in between) is re-read and
  re-decided here: already at the target, done; still at the version the step began from, written
  again; at a third version, ``VersionChangedError`` (not ours to overwrite).
* **Rollout state** (``observe``) follows ``orchestrator.kube.capi``: control plane / MD rollout
  rules (observedGeneration, up-to-date and available replicas, RollingOut, Available), plus every
  Machine of the component at the declared version, one Machine per replica, and each Machine's
  Node Ready in the workload cluster (read through the CAPI kubeconfig secret, in memory only).
  On a managed topology the control plane is done only when the pools CAPI moves with it (those
  not deferred) are done too; deferred pools are not waited for.
  ``versions`` are Node kubelet versions; CAPD's in-memory Nodes do not report one, so a Ready
  Node counts as running its Machine's ``spec.version`` (see docs/localplane.md).
* **Taints**: the DESIGN.md contract on the CAPI Cluster (annotation ``calibrator.dev/taints``
  encoded with ``orchestrator.domain.taints``, label ``calibrator.dev/schedulable``), written with
  the read object's resourceVersion and retried on conflict.
* **Workloads and placement decisions** (``calibrator.dev/v1alpha1``, through
  ``orchestrator.kube.fleetapi``): workloads are the FleetWorkloads of the same namespace scope (one
  LIST); a FleetWorkload's ``status.clusters`` (the last decision, replicas per cluster) is its
  current ``placement.clusters`` with counts (see ``fleetmap``). ``write_placement`` server-side applies, per workload,
  the ``status.decisions`` of its PlacementDecision (same name, owned by the FleetWorkload;
  ``{clusterName, replicas, reason}`` strings, the Argo CD clusterDecisionResource duck type) and
  the FleetWorkload's status, only where the decision changed and conditionally on the
  FleetWorkload's ``resourceVersion`` as the inventory read it (see ``fleetapi``). Missing CRDs, a decision for a workload without a FleetWorkload, or
  a FleetWorkload the snapshot rules reject raise ``NotFoundError`` / ``BackendError`` naming the
  object and the remedy.

* **Blobs** (the calibration plan, kept out of workflow history): immutable ConfigMaps in the
  backend's namespace (``default`` when it watches all), named ``calibrator-blob-<sha256>`` (and
  ``-<n>`` for further chunks), gzip-compressed in ``binaryData`` chunks of at most 900 kB so any
  plan fits under etcd's object limit. Reads verify the SHA-256 of the reassembled bytes.

**Faults** (docs/decisions.md, "API faults"): every request has a timeout and transient
failures (429 with its Retry-After, 5xx, resets, timeouts) are retried a bounded number of times
inside the call (``client.harden``); 404s become ``NotFoundError``, 403s ``NotAllowedError``, an
unusable FleetWorkload ``InvalidObjectError``; anything else propagates and is retried by
Temporal. Nothing returned contains a credential.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import copy
import gzip
import hashlib
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from orchestrator.domain.errors import InputError
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
from orchestrator.domain.versions import KubeVersion, VersionError
from orchestrator.kube import capi, fleetapi, fleetmap, inventory, workload
from orchestrator.kube.capi import DEFER_ANNOTATION, HOLD_ANNOTATION, TOPOLOGY_MD_LABEL
from orchestrator.kube.client import (
    DEFAULT_REQUESTS,
    FIELD_MANAGER,
    RETRYABLE_ERRORS,
    CallCancelled,
    RequestObserver,
    RequestPolicy,
    api_client,
    dynamic,
    harden,
    list_pages,
    observe_requests,
    run_cancellable,
)
from orchestrator.kube.fleetmap import InventoryError
from workflows.backend import (
    BackendError,
    InvalidObjectError,
    Inventory,
    NotAllowedError,
    NotFoundError,
    Progress,
    VersionChangedError,
)
from workflows.model import (
    ClusterObservation,
    ClusterRef,
    ComponentObservation,
    PlacementDecisionInfo,
    PlacementWrite,
    TaintInfo,
)
from workflows.telemetry import request_spans

STEP_ANNOTATION = "calibrator.dev/step"
# The Cluster webhook rejects a new topology.version while MachineDeployments are not at the old
# one, deferred or not; this annotation is CAPI's documented way past that check.
UNSAFE_VERSION_ANNOTATION = "unsafe.topology.cluster.x-k8s.io/disable-update-version-check"
BYPASS_MARKER = "calibrator.dev/version-check-bypass"  # we set UNSAFE_VERSION_ANNOTATION (step id)
DEFER_PREFIX = "calibrator.dev:"  # value of a defer-upgrade annotation the calibrator set
CONTROL_PLANE_LABEL = "cluster.x-k8s.io/control-plane"
DEPLOYMENT_NAME_LABEL = "cluster.x-k8s.io/deployment-name"
MERGE_PATCH = "application/merge-patch+json"
CONFIG_MAP = ("v1", "ConfigMap")
BLOB_PREFIX = "calibrator-blob-"
BLOB_CHUNKS_ANNOTATION = "calibrator.dev/chunks"
BLOB_CHUNK_BYTES = 900_000
CONFLICT_RETRIES = 5
# Decisions written at once by write_placement: a few in flight fill the API server's fair share
# without queueing behind the client's connection pool (kubernetes' default: 5 per CPU).
PLACEMENT_WRITERS = 8
FORBIDDEN = 403
REASON_LIMIT = 300

T = TypeVar("T")
log = logging.getLogger(__name__)


def _status_code(err: BaseException) -> int | None:
    status = getattr(err, "status", None)
    return status if isinstance(status, int) else None


def _refusal(err: BaseException) -> str:
    """The API server's own words for a refused request (its Status message), clipped."""
    message = ""
    body = getattr(err, "body", None)
    if body:
        try:
            message = str(json.loads(body).get("message") or "")
        except (ValueError, TypeError, AttributeError):
            message = ""
    text = " ".join((message or str(getattr(err, "reason", "") or "")).split())
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


def _expect(seen: list[str], current: str, version: str, what: str) -> None:
    """Re-decide a version write after a 409: the object must still be where the step began.

    The first read records the version the step starts from (the activity has checked it is
    the plan's from-version). A re-read after a conflict may find it unchanged (someone changed
    another field: write again) or at ``version`` (handled by the caller: nothing to write);
    any third version means another writer moved it, which is not ours to overwrite.
    """
    if not seen:
        seen.append(current)
    elif not _same(current, seen[0]) and not _same(current, version):
        raise VersionChangedError(
            f"{what} now declares {current}; the step expected {seen[0]} or {version}: "
            "changed by someone else"
        )


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("annotations") or {}


def _same(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    try:
        return KubeVersion.parse(a) == KubeVersion.parse(b)
    except VersionError:
        return a == b


@dataclass(frozen=True)
class PatchRecord:
    """A write of a version the backend performed (tests assert no step is applied twice)."""

    cluster: str
    component: str
    version: str
    step_id: str
    kind: str


class KubeFleetBackend:
    """Implements ``workflows.backend.FleetBackend`` against a management cluster.

    ``namespace`` limits the fleet to one namespace (None: every namespace); ``dyn`` replaces
    the dynamic client built from ``mgmt`` (unit tests pass a fake). With an OpenTelemetry
    ``tracer`` every protocol call is a ``kube.<operation>`` span (a child of the activity's span)
    and every HTTP request to the management or a workload cluster a CLIENT span under it; without
    one nothing is traced and nothing of OpenTelemetry is imported.
    """

    def __init__(
        self,
        mgmt: Any,
        namespace: str | None = None,
        *,
        dyn: Any = None,
        tracer: Any = None,
        requests: RequestPolicy = DEFAULT_REQUESTS,
    ) -> None:
        self._mgmt = mgmt
        self._tracer = tracer
        self._requests = requests
        self._observer: RequestObserver | None = None
        if tracer is not None:
            self._observer = request_spans(tracer)
            observe_requests(mgmt, self._observer)
        if mgmt is not None:
            # Outside the observer: every attempt is its own span, retries included.
            harden(mgmt, requests, self.retried)
        self._dyn = dyn if dyn is not None else dynamic(mgmt)
        self._namespace = namespace
        self._lock = threading.Lock()
        self._resources: dict[tuple[str, str], Any] = {}
        self._workload_clients: dict[tuple[str, str], Any] = {}

    def retried(self, method: str, url: str, why: str, delay: float) -> None:
        """Called before a request is tried again (``client.harden``); a no-op here.

        The client logs each retry; tests subclass the backend to count them.
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

    # ------------------------------------------------------------------ low level (sync)

    def _res(self, kind: tuple[str, str]) -> Any:
        with self._lock:
            if kind not in self._resources:
                self._resources[kind] = self._dyn.resources.get(api_version=kind[0], kind=kind[1])
            return self._resources[kind]

    def _list(
        self, kind: tuple[str, str], namespace: str | None, label_selector: str = ""
    ) -> list[dict[str, Any]]:
        return list_pages(self._res(kind), namespace=namespace, label_selector=label_selector)

    def _get(self, kind: tuple[str, str], namespace: str, name: str) -> dict[str, Any]:
        try:
            obj: dict[str, Any] = self._res(kind).get(name=name, namespace=namespace).to_dict()
        except Exception as err:
            if _status_code(err) == 404:
                raise NotFoundError(f"{kind[1]} {namespace}/{name} not found") from None
            raise
        return obj

    def _patch(
        self, kind: tuple[str, str], namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        try:
            obj: dict[str, Any] = (
                self._res(kind)
                .patch(body=dict(body), name=name, namespace=namespace, content_type=MERGE_PATCH)
                .to_dict()
            )
        except Exception as err:
            if _status_code(err) == 404:
                raise NotFoundError(f"{kind[1]} {namespace}/{name} not found") from None
            raise
        return obj

    def _namespace_of(self, ref: ClusterRef) -> str:
        if ref.namespace:
            return ref.namespace
        if self._namespace:
            return self._namespace
        found = [
            c
            for c in self._list(capi.CLUSTER, None)
            if _meta(c).get("name") == ref.name and not _meta(c).get("deletionTimestamp")
        ]
        if not found:
            raise NotFoundError(f"cluster {ref.name!r} not found")
        if len(found) > 1:
            raise NotFoundError(f"cluster {ref.name!r} exists in several namespaces: name one")
        return str(_meta(found[0])["namespace"])

    def _cluster(self, ref: ClusterRef) -> tuple[str, dict[str, Any]]:
        ns = self._namespace_of(ref)
        obj = self._get(capi.CLUSTER, ns, ref.name)
        if _meta(obj).get("deletionTimestamp"):
            raise NotFoundError(f"cluster {ns}/{ref.name} is being deleted")
        return ns, obj

    def _kcp_name(self, cluster: Mapping[str, Any]) -> str:
        ref = (cluster.get("spec") or {}).get("controlPlaneRef") or {}
        name = ref.get("name")
        if not name:
            raise NotFoundError(f"cluster {_meta(cluster).get('name')} has no controlPlaneRef yet")
        return str(name)

    def _workload_api(self, namespace: str, cluster: str) -> Any:
        """A client of the workload cluster, or None while CAPI has not written its secret.

        Reading the secret is a management-cluster call: a refusal is ``NotAllowedError`` (an
        operator must bind the kubeconfig reader, deploy/rbac) and any other error status or a
        transport failure propagates (Temporal retries); neither is "the workload cluster is
        unreachable". A secret without a usable kubeconfig is (None), as before.
        """
        key = (namespace, cluster)
        with self._lock:
            api = self._workload_clients.get(key)
        if api is None:
            secret = f"Secret {namespace}/{cluster}-kubeconfig"
            try:
                api = workload.workload_client(self._mgmt, namespace, cluster)
            except Exception as err:
                status = _status_code(err)
                if status == 404:
                    return None
                if status in (401, FORBIDDEN):
                    raise NotAllowedError(
                        f"not allowed to read {secret} ({_refusal(err) or status}): bind the "
                        f"kubeconfig reader role in {namespace} (deploy/rbac)"
                    ) from None
                if status is not None or isinstance(err, (*RETRYABLE_ERRORS, CallCancelled)):
                    raise
                return None  # the secret holds no usable kubeconfig: unreachable, as reported
            if self._observer is not None:
                observe_requests(api, self._observer)
            with self._lock:
                self._workload_clients[key] = api
        return api

    def _nodes(self, namespace: str, cluster: str) -> dict[str, dict[str, Any]] | None:
        """The workload cluster's Nodes, or None when it is not reachable."""
        api = self._workload_api(namespace, cluster)
        if api is None:
            return None
        try:
            return workload.nodes(api)
        except CallCancelled:
            raise
        except Exception:
            with self._lock:
                self._workload_clients.pop((namespace, cluster), None)
            return None

    # ------------------------------------------------------------------ observation (sync)

    @staticmethod
    def _machines_state(
        machines: Sequence[Mapping[str, Any]],
        version: str,
        replicas: int,
        nodes: Mapping[str, dict[str, Any]] | None,
    ) -> tuple[bool, tuple[str, ...], str]:
        """(every Machine at version with a Ready Node, running versions, problem text)."""
        live = [m for m in machines if not _meta(m).get("deletionTimestamp")]
        versions: list[str] = []
        problems: list[str] = []
        if len(live) != replicas or len(machines) != replicas:
            problems.append(
                f"{len(live)} Machine(s) ({len(machines)} incl. deleting), want {replicas}"
            )
        for m in live:
            name = _meta(m).get("name")
            mversion = str((m.get("spec") or {}).get("version"))
            if not _same(mversion, version):
                problems.append(f"Machine {name} at {mversion}")
            node_ref = ((m.get("status") or {}).get("nodeRef") or {}).get("name")
            if nodes is None:
                continue
            node = nodes.get(str(node_ref)) if node_ref else None
            if node is None or not workload.node_ready(node):
                problems.append(f"Machine {name} has no Ready Node")
                continue
            versions.append(workload.kubelet_version(node) or mversion)
        return not problems, tuple(versions), "; ".join(problems)

    def _observe(self, ref: ClusterRef) -> ClusterObservation:
        ns, cluster = self._cluster(ref)
        kcp = self._get(capi.KUBEADM_CONTROL_PLANE, ns, self._kcp_name(cluster))
        selector = f"{capi.CLUSTER_NAME_LABEL}={ref.name}"
        mds = self._list(capi.MACHINE_DEPLOYMENT, ns, selector)
        machines = self._list(capi.MACHINE, ns, selector)
        nodes = self._nodes(ns, ref.name)
        try:
            return self._observation(
                ClusterRef(ref.name, ns), cluster, kcp, mds=mds, machines=machines, nodes=nodes
            )
        except fleetmap.MALFORMED as err:
            # An object edited into nonsense mid-run (a version that does not parse, replicas
            # that are not a number, a foreign taints annotation that is not JSON) is not
            # retried: the step fails with this reason, the cluster stays tainted and waits
            # for an operator's decision. Nothing is written.
            reason = str(err) if isinstance(err, InputError) else f"{type(err).__name__}: {err}"
            raise InvalidObjectError(
                fleetmap.short(f"cluster {ns}/{ref.name}: malformed object: {reason}")
            ) from None

    def _observation(
        self,
        ref: ClusterRef,
        cluster: Mapping[str, Any],
        kcp: Mapping[str, Any],
        *,
        mds: Sequence[Mapping[str, Any]],
        machines: Sequence[Mapping[str, Any]],
        nodes: Mapping[str, dict[str, Any]] | None,
    ) -> ClusterObservation:
        """What the fetched objects say (pure; a malformed one raises, see ``_observe``)."""
        name, ns = ref.name, ref.namespace
        topo = capi.topology(cluster)
        kcp_spec = kcp.get("spec") or {}
        kcp_status = kcp.get("status") or {}
        cp_declared = fleetmap.checked_version(
            topo["version"] if topo else kcp_spec.get("version"), "the control plane"
        )
        cp_replicas = fleetmap.checked_replicas(kcp_spec.get("replicas", 1), "the control plane")
        cp_machines = [m for m in machines if CONTROL_PLANE_LABEL in (_meta(m).get("labels") or {})]
        m_ok, cp_versions, m_problems = self._machines_state(
            cp_machines, cp_declared, cp_replicas, nodes
        )
        kcp_at = _same(str(kcp_spec.get("version")), cp_declared)
        kcp_done = capi.control_plane_rolled_out(kcp)
        cp_message = (
            f"{kcp_status.get('upToDateReplicas', 0)}/{cp_replicas} replicas up to date"
            + ("" if kcp_at else f"; KubeadmControlPlane still declares {kcp_spec.get('version')}")
            + (f"; {m_problems}" if m_problems else "")
        )
        control_plane = ComponentObservation(
            name="controlPlane",
            version=cp_declared,
            rolled_out=kcp_at and kcp_done and m_ok and nodes is not None,
            message=cp_message,
            versions=cp_versions,
        )

        pools: list[ComponentObservation] = []
        for md in sorted(mds, key=lambda o: str(_meta(o).get("name"))):
            md_name = str(_meta(md)["name"])
            declared = fleetmap.checked_version(
                capi.pool_declared(cluster, md), f"MachineDeployment {md_name}"
            )
            actual = capi.md_version(md)
            replicas = fleetmap.checked_replicas(
                (md.get("spec") or {}).get("replicas", 1), f"MachineDeployment {md_name}"
            )
            mine = [
                m
                for m in machines
                if (_meta(m).get("labels") or {}).get(DEPLOYMENT_NAME_LABEL) == md_name
            ]
            ok, versions, problems = self._machines_state(mine, declared, replicas, nodes)
            md_at = _same(actual, declared)
            done = md_at and capi.machine_deployment_rolled_out(md) and ok and nodes is not None
            status = md.get("status") or {}
            deferred = topo is not None and not _same(declared, str(topo["version"]))
            message = (
                f"{status.get('upToDateReplicas', 0)}/{replicas} up to date"
                + (f"; upgrade to {topo['version']} deferred" if deferred and topo else "")
                + ("" if md_at else f"; MachineDeployment still declares {actual}")
                + (f"; {problems}" if problems else "")
            )
            pools.append(
                ComponentObservation(
                    name=md_name,
                    version=declared,
                    rolled_out=done,
                    message=message,
                    versions=versions,
                )
            )
        if topo is not None and control_plane.rolled_out:
            # CAPI's topology upgrade moves the MachineDeployments that are not deferred right
            # after the control plane, so a control-plane step is finished only when those pools
            # finished it too. Deferred pools (a control-plane-only step holds them with
            # defer-upgrade) stay where they are and are not waited for.
            lagging = [p.name for p in pools if _same(p.version, cp_declared) and not p.rolled_out]
            if lagging:
                control_plane = replace(
                    control_plane,
                    rolled_out=False,
                    message=f"{control_plane.message}; topology still rolling {', '.join(lagging)}",
                )
        taints = decode_taints(_annotations(cluster).get(TAINTS_ANNOTATION), f"{ns}/{name}")
        return ClusterObservation(
            cluster=ClusterRef(name, ns),
            control_plane=control_plane,
            pools=tuple(pools),
            taints=tuple(TaintInfo(t.key, t.effect, t.value, t.time_added or "") for t in taints),
            topology=topo is not None,
            reachable=nodes is not None,
        )

    # ------------------------------------------------------------------ inventory (sync)

    def _inventory(self, names: Sequence[str]) -> Inventory:
        try:
            read = inventory.read_fleet(self._dyn, self._namespace)
        except fleetapi.ApiMissingError as err:
            raise NotFoundError(str(err)) from None
        except InventoryError as err:
            # The objects cannot form a fleet (an invalid FleetWorkload, a cluster name in two
            # namespaces): an operator must fix them, so no retry - the activity fails at once.
            raise InvalidObjectError(str(err)) from None
        snapshot, namespaces, skipped = read.snapshot, dict(read.namespaces), dict(read.skipped)
        if names:
            unknown = [n for n in names if n not in namespaces]
            if unknown:
                raise NotFoundError(f"cluster(s) not found: {', '.join(unknown)}")
            keep = set(names)
            snapshot = replace(
                snapshot, clusters=tuple(c for c in snapshot.clusters if c.name in keep)
            )
            namespaces = {n: namespaces[n] for n in names}
            skipped = {n: r for n, r in skipped.items() if n in keep}
        return Inventory(
            snapshot, namespaces, skipped=skipped, workload_versions=read.workload_versions
        )

    # ------------------------------------------------------------------ writes (sync)

    def _record(self, cluster: str, component: str, version: str, step_id: str, kind: str) -> None:
        with self._lock:  # activities run on threads: a subclass's records stay consistent
            self.wrote_version(PatchRecord(cluster, component, version, step_id, kind))

    def wrote_version(self, record: PatchRecord) -> None:
        """Called after every version write; a no-op here.

        Tests subclass the backend to count writes (no step may be applied twice). The worker
        keeps nothing per write: a long-running worker must not grow with the writes it made.
        """

    def wrote_placements(self, workloads: Sequence[str], reason: str) -> None:
        """Called after placement decisions were written; a no-op here (see ``wrote_version``)."""

    @staticmethod
    def _on_conflict(write: Callable[[list[str]], None]) -> None:
        """Run a version write; on 409 re-read and re-decide (``write`` reads afresh each time).

        A conflict is common and harmless (a controller touched the object between our read
        and our write); the next pass either finds the version already declared (a write whose
        answer was lost: nothing to do) or writes again on the new resourceVersion.
        """
        seen: list[str] = []
        for attempt in range(CONFLICT_RETRIES):
            try:
                write(seen)
                return
            except Exception as err:
                if _status_code(err) != 409 or attempt + 1 == CONFLICT_RETRIES:
                    raise
                log.info("version write conflicted (409); re-reading (attempt %d)", attempt + 1)

    def _set_control_plane(self, ref: ClusterRef, version: str, step_id: str) -> None:
        self._on_conflict(lambda seen: self._set_control_plane_once(ref, version, step_id, seen))

    def _set_control_plane_once(
        self, ref: ClusterRef, version: str, step_id: str, seen: list[str]
    ) -> None:
        ns, cluster = self._cluster(ref)
        if capi.topology(cluster):
            self._set_topology_version(ref, ns, cluster, version, step_id, seen=seen)
            return
        kind = capi.KUBEADM_CONTROL_PLANE
        obj = self._get(kind, ns, self._kcp_name(cluster))
        current = str((obj.get("spec") or {}).get("version"))
        if _same(current, version) and _annotations(obj).get(STEP_ANNOTATION) == step_id:
            return
        _expect(seen, current, version, f"control plane of {ref.name}")
        self._patch(
            kind,
            ns,
            str(_meta(obj)["name"]),
            {
                "metadata": {
                    "resourceVersion": _meta(obj)["resourceVersion"],
                    "annotations": {STEP_ANNOTATION: step_id},
                },
                "spec": {"version": version},
            },
        )
        self._record(ref.name, "controlPlane", version, step_id, kind[1])

    def _topology_mds(self, ns: str, cluster: str) -> dict[str, dict[str, Any]]:
        """The cluster's MachineDeployments that belong to a topology entry, by entry name."""
        out: dict[str, dict[str, Any]] = {}
        for md in self._list(capi.MACHINE_DEPLOYMENT, ns, f"{capi.CLUSTER_NAME_LABEL}={cluster}"):
            name = (_meta(md).get("labels") or {}).get(TOPOLOGY_MD_LABEL)
            if name:
                out[str(name)] = md
        return out

    def topology_version_patch(
        self,
        cluster: Mapping[str, Any],
        mds: Mapping[str, Mapping[str, Any]],
        version: str,
        step_id: str,
    ) -> dict[str, Any]:
        """The one merge patch of a control-plane step on a managed topology.

        It moves ``spec.topology.version`` and, in the same write, defers (CAPI's
        ``defer-upgrade`` on the MachineDeployment topology) every pool whose MachineDeployment
        is not at ``version`` yet, so CAPI upgrades only the control plane: workers move when a
        worker step releases them. The list is written whole (merge patches replace lists), and
        the read object's resourceVersion makes a concurrent change fail with 409. When a pool
        already lags the current topology version (deferred by the previous step), CAPI's Cluster
        webhook would reject any new version; the patch then carries the webhook's documented
        bypass annotation with our marker, removed again right after the write.
        """
        meta = _meta(cluster)
        current = str((capi.topology(cluster) or {}).get("version"))
        entries = copy.deepcopy(capi.md_topologies(cluster))
        for entry in entries:
            md = mds.get(str(entry.get("name")))
            if md is None or _same(capi.md_version(md), version):
                continue  # not created yet (CAPI creates it at the topology version) or there
            held = entry.setdefault("metadata", {}).setdefault("annotations", {})
            held.setdefault(DEFER_ANNOTATION, f"{DEFER_PREFIX}{step_id}")
        annotations: dict[str, Any] = {STEP_ANNOTATION: step_id}
        lagging = [n for n, md in mds.items() if not _same(capi.md_version(md), current)]
        existing = _annotations(cluster)
        if lagging and (UNSAFE_VERSION_ANNOTATION not in existing or BYPASS_MARKER in existing):
            annotations[UNSAFE_VERSION_ANNOTATION] = "true"
            annotations[BYPASS_MARKER] = step_id
        topology: dict[str, Any] = {"version": version}
        if entries:
            topology["workers"] = {"machineDeployments": entries}
        return {
            "metadata": {"resourceVersion": meta["resourceVersion"], "annotations": annotations},
            "spec": {"topology": topology},
        }

    def _set_topology_version(
        self,
        ref: ClusterRef,
        ns: str,
        cluster: dict[str, Any],
        version: str,
        step_id: str,
        *,
        seen: list[str],
    ) -> None:
        current = str((capi.topology(cluster) or {}).get("version"))
        if _same(current, version) and _annotations(cluster).get(STEP_ANNOTATION) == step_id:
            self._clear_bypass(ns, ref.name, cluster)  # a retry after a lost second write
            return
        _expect(seen, current, version, f"topology of {ref.name}")
        body = self.topology_version_patch(
            cluster, self._topology_mds(ns, ref.name), version, step_id
        )
        written = self._patch(capi.CLUSTER, ns, ref.name, body)
        self._record(ref.name, "controlPlane", version, step_id, capi.CLUSTER[1])
        self._clear_bypass(ns, ref.name, written)

    def _clear_bypass(self, ns: str, name: str, cluster: Mapping[str, Any] | None = None) -> None:
        """Remove the webhook bypass we set (only ours: the marker says so); no version change."""
        for attempt in range(CONFLICT_RETRIES):
            obj = cluster if cluster is not None else self._get(capi.CLUSTER, ns, name)
            cluster = None
            if BYPASS_MARKER not in _annotations(obj):
                return
            try:
                self._patch(
                    capi.CLUSTER,
                    ns,
                    name,
                    {
                        "metadata": {
                            "resourceVersion": _meta(obj)["resourceVersion"],
                            "annotations": {UNSAFE_VERSION_ANNOTATION: None, BYPASS_MARKER: None},
                        }
                    },
                )
            except Exception as err:
                if _status_code(err) == 409 and attempt + 1 < CONFLICT_RETRIES:
                    continue
                raise
            return

    def release_patch(
        self, cluster: Mapping[str, Any], topology_name: str, pool: str, step_id: str
    ) -> dict[str, Any] | None:
        """The merge patch of a worker step on a managed topology (release the pool).

        It drops our ``defer-upgrade`` from the pool's MachineDeployment topology, so CAPI
        upgrades it to topology.version. None when there is nothing of ours to remove.
        BackendError when the pool stays held by an annotation the calibrator did not set (an
        operator's hold is never removed).
        """
        entries = copy.deepcopy(capi.md_topologies(cluster))
        entry = next((e for e in entries if e.get("name") == topology_name), None)
        if entry is None:
            raise NotFoundError(
                f"MachineDeployment {pool}: no topology entry {topology_name!r} in "
                f"{_meta(cluster).get('name')}"
            )
        annotations = (entry.get("metadata") or {}).get("annotations") or {}
        ours = str(annotations.get(DEFER_ANNOTATION, "")).startswith(DEFER_PREFIX)
        if ours:
            del annotations[DEFER_ANNOTATION]
        if capi.deferred(entries, topology_name):
            held = DEFER_ANNOTATION if DEFER_ANNOTATION in annotations else HOLD_ANNOTATION
            raise BackendError(
                f"MachineDeployment {pool} of {_meta(cluster).get('name')} is held by {held} "
                "that the calibrator did not set; remove it (or skip the cluster) to continue"
            )
        if not ours:
            return None
        marker = BYPASS_MARKER in _annotations(cluster)
        meta_annotations: dict[str, Any] = {STEP_ANNOTATION: step_id}
        if marker:
            meta_annotations |= {UNSAFE_VERSION_ANNOTATION: None, BYPASS_MARKER: None}
        return {
            "metadata": {
                "resourceVersion": _meta(cluster)["resourceVersion"],
                "annotations": meta_annotations,
            },
            "spec": {"topology": {"workers": {"machineDeployments": entries}}},
        }

    def _set_pool(self, ref: ClusterRef, pool: str, version: str, step_id: str) -> None:
        self._on_conflict(lambda seen: self._set_pool_once(ref, pool, version, step_id, seen))

    def _set_pool_once(
        self, ref: ClusterRef, pool: str, version: str, step_id: str, seen: list[str]
    ) -> None:
        ns, cluster = self._cluster(ref)
        md = self._get(capi.MACHINE_DEPLOYMENT, ns, pool)
        owner = (md.get("spec") or {}).get("clusterName")
        if owner != ref.name:
            raise NotFoundError(f"MachineDeployment {pool} does not belong to cluster {ref.name}")
        topo = capi.topology(cluster)
        topology_name = (_meta(md).get("labels") or {}).get(TOPOLOGY_MD_LABEL)
        if topo and topology_name:
            if not _same(str(topo["version"]), version):
                raise BackendError(
                    f"{ref.name} is a managed topology at {topo['version']}: its "
                    f"MachineDeployment {pool} follows topology.version and cannot be set to "
                    f"{version} on its own"
                )
            body = self.release_patch(cluster, str(topology_name), pool, step_id)
            if body is None:
                self._clear_bypass(ns, ref.name, cluster)
                return  # not deferred: CAPI rolls the pool with the topology version
            self._patch(capi.CLUSTER, ns, ref.name, body)
            self._record(ref.name, pool, version, step_id, capi.CLUSTER[1])
            return
        current = capi.md_version(md)
        if _same(current, version) and _annotations(md).get(STEP_ANNOTATION) == step_id:
            return
        _expect(seen, str(current), version, f"MachineDeployment {pool}")
        self._patch(
            capi.MACHINE_DEPLOYMENT,
            ns,
            pool,
            {
                "metadata": {
                    "resourceVersion": _meta(md)["resourceVersion"],
                    "annotations": {STEP_ANNOTATION: step_id},
                },
                "spec": {"template": {"spec": {"version": version}}},
            },
        )
        self._record(ref.name, pool, version, step_id, "MachineDeployment")

    def _update_taints(
        self, ref: ClusterRef, change: Callable[[tuple[Taint, ...]], tuple[Taint, ...]]
    ) -> bool:
        for attempt in range(CONFLICT_RETRIES):
            ns, cluster = self._cluster(ref)
            meta = _meta(cluster)
            where = f"{ns}/{ref.name}"
            before = decode_taints(_annotations(cluster).get(TAINTS_ANNOTATION), where)
            after = change(before)
            label = schedulable_label(after)
            changed = after != before
            # A webhook bypass left by a lost second write goes with the next taint write.
            bypass = BYPASS_MARKER in _annotations(cluster)
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
                if _status_code(err) == 409 and attempt + 1 < CONFLICT_RETRIES:
                    continue
                raise
            return changed
        raise BackendError(f"taints of {ref.name}: too many conflicting writers")  # not reached

    def _placement_writer(self, todo: Sequence[fleetapi.Decision]) -> fleetapi.PlacementWriter:
        try:
            return fleetapi.PlacementWriter(self._dyn, todo, self._namespace)
        except (fleetapi.ApiMissingError, fleetapi.WorkloadMissingError) as err:
            raise NotFoundError(str(err)) from None

    # ------------------------------------------------------------------ blobs (sync)

    def _blob_namespace(self) -> str:
        return self._namespace or "default"

    def _put_blob(self, digest: str, data: bytes) -> None:
        if hashlib.sha256(data).hexdigest() != digest:
            raise ValueError(f"blob {digest} does not match its content")
        packed = gzip.compress(data, mtime=0)
        chunks = [
            packed[i : i + BLOB_CHUNK_BYTES] for i in range(0, len(packed), BLOB_CHUNK_BYTES)
        ] or [b""]
        ns = self._blob_namespace()
        # Further chunks first: a reader that finds chunk 0 finds them all.
        for index in [*range(1, len(chunks)), 0]:
            name = BLOB_PREFIX + digest + (f"-{index}" if index else "")
            body: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": {"app.kubernetes.io/managed-by": "fleet-calibrator"},
                    "annotations": {BLOB_CHUNKS_ANNOTATION: str(len(chunks))},
                },
                "immutable": True,
                "binaryData": {"data": base64.b64encode(chunks[index]).decode()},
            }
            self._res(CONFIG_MAP).server_side_apply(
                body=body,
                name=name,
                namespace=ns,
                field_manager=FIELD_MANAGER,
                force_conflicts=True,
            )

    def _get_blob(self, digest: str) -> bytes:
        ns = self._blob_namespace()
        first = self._get(CONFIG_MAP, ns, BLOB_PREFIX + digest)
        count = int(_annotations(first).get(BLOB_CHUNKS_ANNOTATION, "1"))
        parts = [first] + [
            self._get(CONFIG_MAP, ns, f"{BLOB_PREFIX}{digest}-{i}") for i in range(1, count)
        ]
        packed = b"".join(
            base64.b64decode((p.get("binaryData") or {}).get("data", "")) for p in parts
        )
        data = gzip.decompress(packed)
        if hashlib.sha256(data).hexdigest() != digest:
            raise BackendError(f"blob {digest}: stored bytes do not match the digest")
        return data

    def _delete_blob(self, digest: str) -> None:
        """Chunk 0 first, so that no reader finds a partial blob; then the rest, as it counted."""
        ns = self._blob_namespace()
        try:
            first = self._get(CONFIG_MAP, ns, BLOB_PREFIX + digest)
        except NotFoundError:
            return
        count = int(_annotations(first).get(BLOB_CHUNKS_ANNOTATION, "1"))
        for name in [BLOB_PREFIX + digest] + [
            f"{BLOB_PREFIX}{digest}-{i}" for i in range(1, count)
        ]:
            try:
                self._res(CONFIG_MAP).delete(name=name, namespace=ns)
            except Exception as err:
                if _status_code(err) != 404:
                    raise

    # ------------------------------------------------------------------ FleetBackend

    async def _call(
        self,
        operation: str,
        attributes: Mapping[str, str | int],
        fn: Callable[[], T],
        executor: Executor | None = None,
    ) -> T:
        """Run blocking client calls in a thread (with the caller's context, so spans nest).

        The thread comes from ``executor``, or the event loop's default one (shared by every
        activity of the worker).

        When the awaiting activity ends first (timeout, cancellation) the thread is told to stop
        before its next request (``client.run_cancellable``), so it outlives the activity by at
        most one request timeout. A 403 from the management cluster is ``NotAllowedError``.
        """
        cancel = threading.Event()

        def body() -> T:
            try:
                return fn()
            except BackendError:
                raise
            except Exception as err:
                if _status_code(err) == FORBIDDEN:
                    raise NotAllowedError(
                        f"{operation}: the API server refused it: {_refusal(err) or 'Forbidden'}"
                    ) from None
                raise

        def run() -> T:
            if self._tracer is None:
                return run_cancellable(body, cancel)
            with self._tracer.start_as_current_span(f"kube.{operation}", attributes=attributes):
                return run_cancellable(body, cancel)

        try:
            context = contextvars.copy_context()
            return await asyncio.get_running_loop().run_in_executor(executor, context.run, run)
        finally:
            cancel.set()  # a no-op once the thread is done

    @staticmethod
    def _cluster_attributes(ref: ClusterRef) -> dict[str, str | int]:
        attributes: dict[str, str | int] = {"calibrator.cluster": ref.name}
        if ref.namespace:
            attributes["k8s.namespace.name"] = ref.namespace
        return attributes

    async def put_blob(self, digest: str, data: bytes) -> None:
        """Store an immutable, content-addressed document as ConfigMap chunks."""
        attributes: dict[str, str | int] = {
            "calibrator.blob.digest": digest,
            "calibrator.blob.bytes": len(data),
        }
        await self._call("put_blob", attributes, lambda: self._put_blob(digest, data))

    async def get_blob(self, digest: str) -> bytes:
        """Read and verify a document stored by ``put_blob``."""
        attributes = {"calibrator.blob.digest": digest}
        return await self._call("get_blob", attributes, lambda: self._get_blob(digest))

    async def delete_blob(self, digest: str) -> None:
        """Delete a document stored by ``put_blob`` (all its chunks; gone already is fine)."""
        attributes = {"calibrator.blob.digest": digest}
        await self._call("delete_blob", attributes, lambda: self._delete_blob(digest))

    async def inventory(self, clusters: Sequence[str] = ()) -> Inventory:
        """The fleet from LIST calls (see the module docstring)."""
        names = tuple(clusters)
        attributes = {"calibrator.clusters": len(names)} if names else {}
        return await self._call("inventory", attributes, lambda: self._inventory(names))

    async def observe(self, cluster: ClusterRef) -> ClusterObservation:
        """Declared versions, CAPI rollout state, Node readiness and taints of one cluster."""
        attributes = self._cluster_attributes(cluster)
        return await self._call("observe", attributes, lambda: self._observe(cluster))

    async def set_control_plane_version(
        self, cluster: ClusterRef, version: str, step_id: str
    ) -> None:
        """topology.version for managed topologies, else KubeadmControlPlane.spec.version."""
        attributes = {
            **self._cluster_attributes(cluster),
            "calibrator.version": version,
            "calibrator.step": step_id,
        }
        await self._call(
            "set_control_plane_version",
            attributes,
            lambda: self._set_control_plane(cluster, version, step_id),
        )

    async def set_pool_version(
        self, cluster: ClusterRef, pool: str, version: str, step_id: str
    ) -> None:
        """MachineDeployment.spec.template.spec.version (no write for managed topologies)."""
        attributes = {
            **self._cluster_attributes(cluster),
            "calibrator.pool": pool,
            "calibrator.version": version,
            "calibrator.step": step_id,
        }
        await self._call(
            "set_pool_version", attributes, lambda: self._set_pool(cluster, pool, version, step_id)
        )

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

    async def write_placement(
        self,
        decisions: Sequence[PlacementDecisionInfo],
        reason: str,
        progress: Progress | None = None,
    ) -> PlacementWrite:
        """Write each changed decision, conditionally on the FleetWorkload as read (see above).

        The two LISTs first, then up to ``PLACEMENT_WRITERS`` decisions at a time, on threads of
        this call's own (not the loop's default pool, which every activity of the worker
        shares); each decision is a ``_call`` (cancelled with the activity, a span of its own).
        A first placement writes three objects per workload: one after the other, 1,000
        workloads outlasted a 60-s activity on a loaded plane (issue 9). Decisions are one per
        workload, so concurrent writes never touch the same objects and each keeps its
        compare-and-swap. ``progress`` hears of every decision handled; the result lists
        workloads in the order of ``decisions``. The first failure stops the writes not yet
        started (those in flight finish their request) and is raised.
        """
        todo = [
            fleetapi.Decision(
                d.workload,
                tuple((c.cluster, c.replicas) for c in d.clusters),
                d.reason or reason,
                d.resource_version,
            )
            for d in decisions
        ]
        attributes = {"calibrator.decisions": len(todo)}
        writer = await self._call(
            "write_placement", attributes, lambda: self._placement_writer(todo)
        )
        statuses = [fleetapi.UNCHANGED] * len(todo)
        pending = iter(range(len(todo)))  # shared by the writers: each index is taken once
        done = 0
        threads = ThreadPoolExecutor(PLACEMENT_WRITERS, thread_name_prefix="placement")

        async def write_some() -> None:
            nonlocal done
            for i in pending:
                statuses[i] = await self._call(
                    "write_placement_decision",
                    {"calibrator.workload": todo[i].workload},
                    lambda d=todo[i]: writer.write(d),  # type: ignore[misc]
                    threads,
                )
                done += 1
                if progress is not None:
                    progress(done, len(todo))

        writers = [
            asyncio.ensure_future(write_some()) for _ in range(min(PLACEMENT_WRITERS, len(todo)))
        ]
        try:
            if writers:
                finished, _ = await asyncio.wait(writers, return_when=asyncio.FIRST_EXCEPTION)
                for task in finished:
                    failure = task.exception()
                    if failure is not None:
                        raise failure
        finally:
            for task in writers:
                task.cancel()
            await asyncio.gather(*writers, return_exceptions=True)
            threads.shutdown(wait=False)
        outcome = fleetapi.outcome_of(todo, statuses)
        with self._lock:
            self.wrote_placements(outcome.written, reason)
        return PlacementWrite(outcome.written, outcome.conflicts)
