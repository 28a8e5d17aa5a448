"""Topology and version patches of ``KubeFleetBackend`` (control-plane and worker steps).

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
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from orchestrator.kube import capi
from orchestrator.kube.backend.access import (
    CONFLICT_RETRIES,
    KubeAccess,
    object_annotations,
    same_version,
)
from orchestrator.kube.backend.port import (
    BackendError,
    ClusterRef,
    NotFoundError,
    VersionChangedError,
)
from orchestrator.kube.capi import DEFER_ANNOTATION, HOLD_ANNOTATION, TOPOLOGY_MD_LABEL
from orchestrator.kube.client import object_meta, status_code

STEP_ANNOTATION = "calibrator.dev/step"
# The Cluster webhook rejects a new topology.version while MachineDeployments are not at the old
# one, deferred or not; this annotation is CAPI's documented way past that check.
UNSAFE_VERSION_ANNOTATION = "unsafe.topology.cluster.x-k8s.io/disable-update-version-check"
BYPASS_MARKER = "calibrator.dev/version-check-bypass"  # we set UNSAFE_VERSION_ANNOTATION (step id)
DEFER_PREFIX = "calibrator.dev:"  # value of a defer-upgrade annotation the calibrator set


def _expect(seen: list[str], current: str, version: str, what: str) -> None:
    """Re-decide a version write after a 409: the object must still be where the step began.

    The first read records the version the step starts from (the activity has checked it is
    the plan's from-version). A re-read after a conflict may find it unchanged (someone changed
    another field: write again) or at ``version`` (handled by the caller: nothing to write);
    any third version means another writer moved it, which is not ours to overwrite.
    """
    if not seen:
        seen.append(current)
    elif not same_version(current, seen[0]) and not same_version(current, version):
        raise VersionChangedError(
            f"{what} now declares {current}; the step expected {seen[0]} or {version}: "
            "changed by someone else"
        )


class VersionWrites(KubeAccess):
    """``FleetBackend.set_control_plane_version`` and ``set_pool_version``."""

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
        if (
            same_version(current, version)
            and object_annotations(obj).get(STEP_ANNOTATION) == step_id
        ):
            return
        _expect(seen, current, version, f"control plane of {ref.name}")
        self._patch(
            kind,
            ns,
            str(object_meta(obj)["name"]),
            {
                "metadata": {
                    "resourceVersion": object_meta(obj)["resourceVersion"],
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
            name = (object_meta(md).get("labels") or {}).get(TOPOLOGY_MD_LABEL)
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
        meta = object_meta(cluster)
        current = str((capi.topology(cluster) or {}).get("version"))
        entries = copy.deepcopy(capi.md_topologies(cluster))
        for entry in entries:
            md = mds.get(str(entry.get("name")))
            if md is None or same_version(capi.md_version(md), version):
                continue  # not created yet (CAPI creates it at the topology version) or there
            held = entry.setdefault("metadata", {}).setdefault("annotations", {})
            held.setdefault(DEFER_ANNOTATION, f"{DEFER_PREFIX}{step_id}")
        annotations: dict[str, Any] = {STEP_ANNOTATION: step_id}
        lagging = [n for n, md in mds.items() if not same_version(capi.md_version(md), current)]
        existing = object_annotations(cluster)
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
        if (
            same_version(current, version)
            and object_annotations(cluster).get(STEP_ANNOTATION) == step_id
        ):
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
            if BYPASS_MARKER not in object_annotations(obj):
                return
            try:
                self._patch(
                    capi.CLUSTER,
                    ns,
                    name,
                    {
                        "metadata": {
                            "resourceVersion": object_meta(obj)["resourceVersion"],
                            "annotations": {UNSAFE_VERSION_ANNOTATION: None, BYPASS_MARKER: None},
                        }
                    },
                )
            except Exception as err:
                if status_code(err) == 409 and attempt + 1 < CONFLICT_RETRIES:
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
                f"{object_meta(cluster).get('name')}"
            )
        annotations = (entry.get("metadata") or {}).get("annotations") or {}
        ours = str(annotations.get(DEFER_ANNOTATION, "")).startswith(DEFER_PREFIX)
        if ours:
            del annotations[DEFER_ANNOTATION]
        if capi.deferred(entries, topology_name):
            held = DEFER_ANNOTATION if DEFER_ANNOTATION in annotations else HOLD_ANNOTATION
            raise BackendError(
                f"MachineDeployment {pool} of {object_meta(cluster).get('name')} is held by {held} "
                "that the calibrator did not set; remove it (or skip the cluster) to continue"
            )
        if not ours:
            return None
        marker = BYPASS_MARKER in object_annotations(cluster)
        meta_annotations: dict[str, Any] = {STEP_ANNOTATION: step_id}
        if marker:
            meta_annotations |= {UNSAFE_VERSION_ANNOTATION: None, BYPASS_MARKER: None}
        return {
            "metadata": {
                "resourceVersion": object_meta(cluster)["resourceVersion"],
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
        topology_name = (object_meta(md).get("labels") or {}).get(TOPOLOGY_MD_LABEL)
        if topo and topology_name:
            if not same_version(str(topo["version"]), version):
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
        if (
            same_version(current, version)
            and object_annotations(md).get(STEP_ANNOTATION) == step_id
        ):
            return
        _expect(seen, str(current), version, f"MachineDeployment {pool}")
        self._patch(
            capi.MACHINE_DEPLOYMENT,
            ns,
            pool,
            {
                "metadata": {
                    "resourceVersion": object_meta(md)["resourceVersion"],
                    "annotations": {STEP_ANNOTATION: step_id},
                },
                "spec": {"template": {"spec": {"version": version}}},
            },
        )
        self._record(ref.name, pool, version, step_id, "MachineDeployment")

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
