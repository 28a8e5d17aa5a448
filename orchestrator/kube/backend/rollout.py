"""Observing one cluster's rollout for ``KubeFleetBackend.observe``.

* **Rollout state** (``observe``) follows ``orchestrator.kube.capi``: control plane / MD rollout
  rules (observedGeneration, up-to-date and available replicas, RollingOut, Available), plus every
  Machine of the component at the declared version, one Machine per replica, and each Machine's
  Node Ready in the workload cluster (read through the CAPI kubeconfig secret, in memory only).
  On a managed topology the control plane is done only when the pools CAPI moves with it (those
  not deferred) are done too; deferred pools are not waited for.
  ``versions`` are Node kubelet versions; CAPD's in-memory Nodes do not report one, so a Ready
  Node counts as running its Machine's ``spec.version`` (see docs/localplane.md).
* **Wake-ups** (``rollout_wakeups``): with the worker's watch-fed cache, a rollout wait is woken
  when the cluster's KubeadmControlPlane or one of its MachineDeployments changes to a state
  CAPI's status calls rolled out (``rollout_match``), instead of sleeping out its poll interval;
  the wait then observes as before. Without a cache (the CLI) every wait sleeps its interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import replace
from typing import Any

from orchestrator.domain.errors import InputError
from orchestrator.domain.taints import TAINTS_ANNOTATION, decode_taints
from orchestrator.kube import capi, fleetmap, workload
from orchestrator.kube.backend.access import KubeAccess, object_annotations, same_version
from orchestrator.kube.backend.port import (
    ClusterObservation,
    ClusterRef,
    ComponentObservation,
    InvalidObjectError,
    Wakeup,
)
from orchestrator.kube.cache import Match, Obj
from orchestrator.kube.client import object_meta

CONTROL_PLANE_LABEL = "cluster.x-k8s.io/control-plane"
DEPLOYMENT_NAME_LABEL = "cluster.x-k8s.io/deployment-name"


def rollout_match(ref: ClusterRef) -> Match:
    """Changes that may end a rollout wait on ``ref`` (pure).

    Its KubeadmControlPlane (owned by the Cluster, or labelled with its name) or one of its
    MachineDeployments (``spec.clusterName``), in a state CAPI's status calls rolled out
    (``capi.control_plane_rolled_out``, ``capi.machine_deployment_rolled_out``). Nothing else:
    during a rollout CAPI rewrites these objects' status many times, and waking on each would
    observe the cluster (five requests) every time; a rollout ends with one of these. An empty
    ``ref.namespace`` matches the name in every namespace (a spurious wake-up costs one read).
    """

    def match(kind: Hashable, obj: Obj) -> bool:
        meta = object_meta(obj)
        if ref.namespace and meta.get("namespace") != ref.namespace:
            return False
        if kind == capi.KUBEADM_CONTROL_PLANE:
            owned = any(
                o.get("kind") == "Cluster" and o.get("name") == ref.name
                for o in meta.get("ownerReferences") or ()
                if isinstance(o, Mapping)
            )
            labelled = (meta.get("labels") or {}).get(capi.CLUSTER_NAME_LABEL) == ref.name
            return (owned or labelled) and capi.control_plane_rolled_out(obj)
        if kind == capi.MACHINE_DEPLOYMENT:
            mine = (obj.get("spec") or {}).get("clusterName") == ref.name
            return mine and capi.machine_deployment_rolled_out(obj)
        return False

    return match


class _Woken:
    """A ``Wakeup`` set from the cache's watch thread and awaited on the activity's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._event = asyncio.Event()

    def set(self) -> None:
        """Called on a watch thread (``WatchCache.subscribe``): hand the wake-up to the loop."""
        with suppress(RuntimeError):  # the loop closed after the wait left: nobody waits
            self._loop.call_soon_threadsafe(self._event.set)

    async def wait(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            return False
        self._event.clear()
        return True


class _Sleep:
    """The ``Wakeup`` of a backend without a cache: every wait runs its full timeout."""

    async def wait(self, timeout: float) -> bool:
        await asyncio.sleep(timeout)
        return False


class RolloutObserver(KubeAccess):
    """``FleetBackend.observe``: declared versions, CAPI rollout state, Nodes and taints."""

    @staticmethod
    def _machines_state(
        machines: Sequence[Mapping[str, Any]],
        version: str,
        replicas: int,
        nodes: Mapping[str, dict[str, Any]] | None,
    ) -> tuple[bool, tuple[str, ...], str]:
        """(every Machine at version with a Ready Node, running versions, problem text)."""
        live = [m for m in machines if not object_meta(m).get("deletionTimestamp")]
        versions: list[str] = []
        problems: list[str] = []
        if len(live) != replicas or len(machines) != replicas:
            problems.append(
                f"{len(live)} Machine(s) ({len(machines)} incl. deleting), want {replicas}"
            )
        for m in live:
            name = object_meta(m).get("name")
            mversion = str((m.get("spec") or {}).get("version"))
            if not same_version(mversion, version):
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
        cp_machines = [
            m for m in machines if CONTROL_PLANE_LABEL in (object_meta(m).get("labels") or {})
        ]
        m_ok, cp_versions, m_problems = self._machines_state(
            cp_machines, cp_declared, cp_replicas, nodes
        )
        kcp_at = same_version(str(kcp_spec.get("version")), cp_declared)
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
        for md in sorted(mds, key=lambda o: str(object_meta(o).get("name"))):
            md_name = str(object_meta(md)["name"])
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
                if (object_meta(m).get("labels") or {}).get(DEPLOYMENT_NAME_LABEL) == md_name
            ]
            ok, versions, problems = self._machines_state(mine, declared, replicas, nodes)
            md_at = same_version(actual, declared)
            done = md_at and capi.machine_deployment_rolled_out(md) and ok and nodes is not None
            status = md.get("status") or {}
            deferred = topo is not None and not same_version(declared, str(topo["version"]))
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
            lagging = [
                p.name for p in pools if same_version(p.version, cp_declared) and not p.rolled_out
            ]
            if lagging:
                control_plane = replace(
                    control_plane,
                    rolled_out=False,
                    message=f"{control_plane.message}; topology still rolling {', '.join(lagging)}",
                )
        taints = decode_taints(object_annotations(cluster).get(TAINTS_ANNOTATION), f"{ns}/{name}")
        return ClusterObservation(
            cluster=ClusterRef(name, ns),
            control_plane=control_plane,
            pools=tuple(pools),
            taints=taints,
            topology=topo is not None,
            reachable=nodes is not None,
        )

    async def observe(self, cluster: ClusterRef) -> ClusterObservation:
        """Declared versions, CAPI rollout state, Node readiness and taints of one cluster."""
        attributes = self._cluster_attributes(cluster)
        return await self._call("observe", attributes, lambda: self._observe(cluster))

    @asynccontextmanager
    async def rollout_wakeups(self, cluster: ClusterRef) -> AsyncIterator[Wakeup]:
        """Woken by the cache's watch on ``rollout_match``; without a cache, ``_Sleep``."""
        if self._cache is None:
            yield _Sleep()
            return
        woken = _Woken(asyncio.get_running_loop())
        unsubscribe = self._cache.subscribe(rollout_match(cluster), woken.set)
        try:
            yield woken
        finally:
            unsubscribe()
