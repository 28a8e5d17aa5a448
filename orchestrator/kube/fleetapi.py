"""Our API group ``calibrator.dev/v1alpha1``: FleetWorkload and PlacementDecision (docs/api.md).

* **CRDs** ship as package data (``orchestrator/kube/crds/*.yaml``); ``install_crds`` applies them
  with server-side apply and waits until they are Established (idempotent).
* **FleetWorkload -> snapshot workload**: ``workload_entry`` turns one object into a
  ``workloads[]`` entry of the FleetSnapshot format (``metadata.namespace/name`` is the key, the
  spec is that entry's fields, and ``status.clusters`` - the last decision, with replicas per
  cluster - is the current ``placement.clusters`` once written; ``current_on_inventory`` keeps the
  clusters an inventory has). ``fleet_workload`` is the inverse, from the domain model.
  ``list_fleet_workloads`` is the reader: one LIST call.
* **PlacementDecision writer**: ``write_placement_decisions`` keeps one PlacementDecision per
  FleetWorkload (same namespace and name, label ``calibrator.dev/fleet-workload=<name>``, owned
  by the FleetWorkload so it is garbage-collected with it). Per workload whose decision differs
  from what is stored, it server-side applies the FleetWorkload's status - the commit point,
  with the ``resourceVersion`` the caller's decision was computed from as a precondition - then
  mirrors the same decision into the PlacementDecision's ``status.decisions`` (``{clusterName,
  replicas, reason}``, every value a string, the Argo CD clusterDecisionResource duck type),
  also conditionally, so a writer whose commit was superseded never overwrites a newer mirror.
  ``PlacementWriter`` is the same writer taken apart (the stored objects read once, then one
  call per decision) so a caller can write the decisions of different workloads concurrently.
  What it compares with comes from a ``PlacementSource``: two fresh LISTs
  (``placement_listing``, the default) or the worker's watch-fed cache once it has reached the
  collections' current versions (``orchestrator.kube.backend.placement``); both are at least as
  new as the moment the write began, so an "unchanged" is never read from stale data.

Conversions are plain functions over dicts (unit-tested without a server); the I/O functions take
a ``kubernetes.dynamic.DynamicClient`` (or anything with the same ``resources.get`` surface).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources as package_data
from typing import Any, TypeVar, cast

import yaml
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from orchestrator.domain.snapshot import FleetSnapshot, Workload
from orchestrator.domain.snapshot_dump import snapshot_to_mapping
from orchestrator.kube.client import (
    FIELD_MANAGER,
    PAGE_SIZE,
    apply,
    collection_version,
    list_pages,
    object_meta,
    read_json,
    status_code,
)

log = logging.getLogger(__name__)

GROUP = "calibrator.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
FLEET_WORKLOAD = (API_VERSION, "FleetWorkload")
PLACEMENT_DECISION = (API_VERSION, "PlacementDecision")
WORKLOAD_LABEL = "calibrator.dev/fleet-workload"
CRD_NAMES = ("fleetworkloads.calibrator.dev", "placementdecisions.calibrator.dev")
CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")

# Argo CD ApplicationSet clusterDecisionResource duck type of status.decisions.
STATUS_LIST_KEY = "decisions"
MATCH_KEY = "clusterName"
CONFLICT = 409
MIRROR_RETRIES = 5


class ApiMissingError(RuntimeError):
    """The management cluster does not serve calibrator.dev/v1alpha1 (CRDs not installed)."""


class WorkloadMissingError(LookupError):
    """A decision names a workload that has no FleetWorkload."""


# ------------------------------------------------------------------------------------ CRDs


CRD_KUSTOMIZATION = "kustomization.yaml"


def crd_manifests() -> list[dict[str, Any]]:
    """The CustomResourceDefinitions of calibrator.dev, from the package data.

    The folder also holds ``kustomization.yaml``, which makes the same files part of
    ``kubectl apply -k`` of deploy/ (one copy of the CRDs); it is not a CRD.
    """
    folder = package_data.files("orchestrator.kube").joinpath("crds")
    docs: list[dict[str, Any]] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml") and entry.name != CRD_KUSTOMIZATION:
            docs += [d for d in yaml.safe_load_all(entry.read_text()) if d]
    return docs


def _established(crd: Mapping[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def install_crds(dyn: Any, timeout: float = 60.0) -> list[str]:
    """Server-side apply our CRDs and wait until each is Established; returns their names."""
    names = [str(apply(dyn, crd)["metadata"]["name"]) for crd in crd_manifests()]
    crds = dyn.resources.get(api_version=CRD[0], kind=CRD[1])
    deadline = time.monotonic() + timeout
    while True:
        items = read_json(crds.get).get("items") or []
        ready = {str(object_meta(i).get("name")) for i in items if _established(i)}
        waiting = sorted(set(names) - ready)
        if not waiting:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"CRDs not Established after {timeout:.0f}s: {', '.join(waiting)}")
        time.sleep(0.2)
    dyn.resources.invalidate_cache()  # discovery must see the new kinds
    return names


def resource(dyn: Any, kind: tuple[str, str]) -> Any:
    """The dynamic resource of one of our kinds, or ApiMissingError naming the remedy."""
    for attempt in range(2):
        try:
            return dyn.resources.get(api_version=kind[0], kind=kind[1])
        except ResourceNotFoundError:
            if attempt == 0:
                dyn.resources.invalidate_cache()  # installed after discovery was cached?
    raise ApiMissingError(
        f"the management cluster does not serve {kind[1]} ({API_VERSION}): install the "
        "calibrator.dev CRDs (`calibrator env up` does; elsewhere `kubectl apply -k` of a "
        "deploy/ overlay, or `kubectl apply --server-side -k orchestrator/kube/crds/`)"
    )


# ------------------------------------------------------------------------------------ FleetWorkload

_SPEC_FIELDS = ("apis", "replicas", "requests", "placement")


def workload_entry(obj: Mapping[str, Any]) -> dict[str, Any]:
    """One FleetWorkload as a FleetSnapshot ``workloads[]`` entry (validated by the snapshot parser).

    The current placement is ``status.clusters`` once the calibrator has written a decision, with
    each cluster's replica count (``{name, replicas}``: re-placement scales from it), else
    ``spec.placement.clusters`` (the initial placement the user declared: names only). The
    spec's ``metadata.generation`` and the decision's ``status.observedGeneration`` come along:
    equal, they say the counts were decided under the current policy (``policy_observed``).

    The entry shares the spec's values with ``obj`` instead of copying them: the inventory
    builds one entry per FleetWorkload on every read, from the cache's stored objects, and a
    deep copy of every spec was 14% of the worker's busy CPU at 100 x 1,000
    (docs/benchmarks.md). Sharing is safe because nothing changes an entry's nested values: the
    snapshot parser only reads, and the one change made to an entry, the current placement's
    clusters (here and in ``current_on_inventory``), replaces a key of ``placement``, which is
    always this entry's own copy.
    """
    meta = object_meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    entry: dict[str, Any] = {"name": meta.get("name"), "namespace": meta.get("namespace")}
    entry.update({k: spec[k] for k in _SPEC_FIELDS if spec.get(k) is not None})
    if isinstance(entry.get("placement"), Mapping):
        entry["placement"] = dict(entry["placement"])
    if meta.get("generation") is not None:
        entry["generation"] = meta["generation"]
    decided = status.get("clusters")
    if decided is not None:
        placement = dict(entry.get("placement") or {})
        placement["clusters"] = [
            {"name": c.get("name"), "replicas": c.get("replicas")} for c in decided
        ]
        if status.get("observedGeneration") is not None:
            placement["observedGeneration"] = status["observedGeneration"]
        entry["placement"] = placement
    return entry


def current_on_inventory(entry: dict[str, Any], clusters: Collection[str]) -> dict[str, Any]:
    """A workload entry whose current placement keeps only clusters of the inventory.

    A deleted (or not yet calibratable) cluster runs nothing this run can see: its replicas,
    with their counts, drop out of the current placement, so re-placement finds them a home and
    reports them as moved. Names and ``{name, replicas}`` entries are both kept as they are.
    """
    placement = entry.get("placement")
    if placement and placement.get("clusters"):
        placement["clusters"] = [
            c
            for c in placement["clusters"]
            if (c.get("name") if isinstance(c, Mapping) else c) in clusters
        ]
    return entry


def fleet_workload(workload: Workload) -> dict[str, Any]:
    """The FleetWorkload object of a domain workload (``placement.clusters`` as the initial one)."""
    dumped = snapshot_to_mapping(FleetSnapshot((), (), (workload,)))
    (entry,) = cast(list[dict[str, Any]], dumped["workloads"])
    # generation and observedGeneration are the API server's and the status's, never the spec's.
    spec = {k: v for k, v in entry.items() if k not in ("name", "namespace", "generation")}
    placement = spec.get("placement") or {}
    spec["placement"] = {
        k: v for k, v in placement.items() if v not in ([], None) and k != "observedGeneration"
    }
    return {
        "apiVersion": API_VERSION,
        "kind": FLEET_WORKLOAD[1],
        "metadata": {"name": workload.name, "namespace": workload.namespace},
        "spec": spec,
    }


_T = TypeVar("_T")


def _on_resource(dyn: Any, kind: tuple[str, str], call: Callable[[Any], _T]) -> _T:
    """``call`` with ``kind``'s resource, looked up afresh once on a 404.

    A 404 means discovery is stale: the CRD was deleted and made again since it was looked up.
    """
    try:
        return call(resource(dyn, kind))
    except NotFoundError:
        dyn.resources.invalidate_cache()
        return call(resource(dyn, kind))


def _list(
    dyn: Any,
    kind: tuple[str, str],
    namespace: str | None = None,
    label_selector: str = "",
    page_size: int = PAGE_SIZE,
) -> list[dict[str, Any]]:
    """One paginated LIST (``_on_resource``: a stale discovery is looked up afresh once)."""
    return _on_resource(
        dyn,
        kind,
        lambda res: list_pages(
            res, namespace=namespace, label_selector=label_selector, page_size=page_size
        ),
    )


def list_fleet_workloads(
    dyn: Any, namespace: str | None = None, page_size: int = PAGE_SIZE
) -> list[dict[str, Any]]:
    """Every FleetWorkload (of one namespace, or all): one paginated LIST."""
    return _list(dyn, FLEET_WORKLOAD, namespace, page_size=page_size)


def probe_version(dyn: Any, kind: tuple[str, str], namespace: str | None = None) -> str:
    """The current resourceVersion of one of our collections (``client.collection_version``).

    A stale discovery is looked up afresh once (``_on_resource``), as for ``_list``.
    """
    return _on_resource(dyn, kind, lambda res: collection_version(res, namespace=namespace))


# ------------------------------------------------------------------------------------ decisions


@dataclass(frozen=True)
class PlacementDecision:
    """Where one workload (``namespace/name``) runs: ``(cluster, replicas)`` pairs and why."""

    workload: str
    clusters: tuple[tuple[str, int], ...]
    reason: str
    resource_version: str = ""  # the FleetWorkload's, as read: a precondition ("" = none)


@dataclass(frozen=True)
class WriteOutcome:
    """Workloads whose decision was written, and those that changed since they were read."""

    written: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()


def decision_rows(decision: PlacementDecision) -> list[dict[str, str]]:
    """``status.decisions``: one ``{clusterName, replicas, reason}`` per cluster, all strings."""
    return [
        {MATCH_KEY: name, "replicas": str(replicas), "reason": decision.reason}
        for name, replicas in decision.clusters
    ]


def placement_decision(owner: Mapping[str, Any]) -> dict[str, Any]:
    """The PlacementDecision object (metadata only) of a FleetWorkload: same name, owned by it."""
    meta = object_meta(owner)
    return {
        "apiVersion": API_VERSION,
        "kind": PLACEMENT_DECISION[1],
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {WORKLOAD_LABEL: meta["name"]},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": FLEET_WORKLOAD[1],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
    }


def _owned_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    meta = object_meta(obj)
    refs = meta.get("ownerReferences") or []
    return (meta.get("labels") or {}).get(WORKLOAD_LABEL) == object_meta(owner).get("name") and any(
        r.get("uid") == object_meta(owner).get("uid") and r.get("controller") for r in refs
    )


def placement_decision_status(
    owner: Mapping[str, Any], decision: PlacementDecision
) -> dict[str, Any]:
    """The apply configuration of the PlacementDecision's status subresource."""
    meta = object_meta(owner)
    return {
        "apiVersion": API_VERSION,
        "kind": PLACEMENT_DECISION[1],
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "status": {STATUS_LIST_KEY: decision_rows(decision)},
    }


def fleet_workload_status(
    owner: Mapping[str, Any], decision: PlacementDecision, now: datetime
) -> dict[str, Any]:
    """The apply configuration of the FleetWorkload's status subresource (the same decision)."""
    meta = object_meta(owner)
    status: dict[str, Any] = {
        "clusters": [{"name": name, "replicas": replicas} for name, replicas in decision.clusters],
        "selectedClusters": len(decision.clusters),
        "reason": decision.reason,
        "lastUpdateTime": now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if meta.get("generation") is not None:
        status["observedGeneration"] = int(meta["generation"])
    return {
        "apiVersion": API_VERSION,
        "kind": FLEET_WORKLOAD[1],
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "status": status,
    }


def _namespace_missing(err: BaseException) -> bool:
    """Whether a 404's Status names a Namespace (its ``details.kind``), not the object itself."""
    try:
        details = json.loads(getattr(err, "body", None) or "{}").get("details") or {}
    except (ValueError, TypeError, AttributeError):
        return False
    return isinstance(details, dict) and details.get("kind") == "namespaces"


def _apply(res: Any, body: Mapping[str, Any]) -> dict[str, Any]:
    """Server-side apply; ``metadata.resourceVersion`` in ``body`` makes it conditional (409)."""
    return read_json(
        res.server_side_apply,
        body=dict(body),
        name=body["metadata"]["name"],
        namespace=body["metadata"]["namespace"],
        field_manager=FIELD_MANAGER,
        force_conflicts=True,
    )


def _with_version(body: dict[str, Any], resource_version: str) -> dict[str, Any]:
    if resource_version:
        body["metadata"]["resourceVersion"] = resource_version
    return body


def stored_clusters(fleet_workload_obj: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """The decision a FleetWorkload's status holds (``status.clusters``)."""
    rows = (fleet_workload_obj.get("status") or {}).get("clusters") or []
    return tuple((str(r.get("name")), int(r.get("replicas", 0))) for r in rows)


def _mirrored(pd: Mapping[str, Any] | None) -> tuple[tuple[str, int], ...] | None:
    if pd is None:
        return None
    rows = (pd.get("status") or {}).get(STATUS_LIST_KEY)
    if rows is None:
        return None
    return tuple((str(r.get(MATCH_KEY)), int(r.get("replicas", 0))) for r in rows)


def _mirror(
    dyn: Any,
    owner: Mapping[str, Any],
    decision: PlacementDecision,
    pd: Mapping[str, Any],
    committed: str,
) -> None:
    """Write the PlacementDecision status, conditionally on the PlacementDecision read.

    A 409 means another writer mirrored meanwhile: if the FleetWorkload is still at the version
    this writer committed, its decision is the newest and the mirror is retried on a fresh read;
    otherwise a later commit exists and that writer mirrors it (ours would be stale).
    """
    pds = resource(dyn, PLACEMENT_DECISION)
    fws = resource(dyn, FLEET_WORKLOAD)
    meta = object_meta(owner)
    current: Mapping[str, Any] = pd
    for _ in range(MIRROR_RETRIES):
        body = _with_version(
            placement_decision_status(owner, decision),
            str(object_meta(current).get("resourceVersion")),
        )
        try:
            _apply(pds.status, body)
            return
        except Exception as err:
            if status_code(err) != CONFLICT:
                raise
        latest = read_json(fws.get, name=meta["name"], namespace=meta["namespace"])
        if str(object_meta(latest).get("resourceVersion")) != committed:
            return
        current = read_json(pds.get, name=meta["name"], namespace=meta["namespace"])
    raise RuntimeError(f"PlacementDecision {decision.workload}: too many conflicting writers")


PlacementObjects = tuple[list[dict[str, Any]], list[dict[str, Any]]]
"""The FleetWorkloads and PlacementDecisions (of the writer's workloads, or more), as stored."""
PlacementSource = Callable[[Sequence[str]], PlacementObjects]
"""Where ``PlacementWriter`` reads what it compares with: called once, when there is a decision,
with the ``namespace/name`` of the workloads to write (a source may return others too)."""


def placement_listing(dyn: Any, namespace: str | None = None) -> PlacementSource:
    """The source without a cache: two fresh LISTs (FleetWorkloads; PlacementDecisions by label).

    What the CLI's one-shot commands use, and the worker whenever its cache cannot show the
    collections' current versions in time.
    """

    def listed(_: Sequence[str] = ()) -> PlacementObjects:
        owners = list_fleet_workloads(dyn, namespace)
        return owners, _list(dyn, PLACEMENT_DECISION, namespace, WORKLOAD_LABEL)

    return listed


def placement_by_key(dyn: Any, workers: int) -> PlacementSource:
    """The source for a few workloads: each FleetWorkload and PlacementDecision GET by key.

    A GET is a consistent read of one object, so what it returns is at least as new as the
    moment it was made, which is all ``PlacementWriter`` needs; ``workers`` GETs are in flight
    at once. For a handful of workloads that is cheaper than bringing a cache to the
    collections' current versions: a store whose kind did not change must ask the server for a
    bookmark, a second at best (docs/benchmarks.md, session 23). A missing object is left out
    (a missing FleetWorkload is the writer's ``WorkloadMissingError``).
    """
    fws = resource(dyn, FLEET_WORKLOAD)
    pds = resource(dyn, PLACEMENT_DECISION)

    def stored(res: Any, key: str) -> dict[str, Any] | None:
        namespace, _, name = key.partition("/")
        try:
            return read_json(res.get, name=name, namespace=namespace)
        except Exception as err:
            if status_code(err) == NOT_FOUND:
                return None
            raise

    def keyed(keys: Sequence[str]) -> PlacementObjects:
        asks = [(res, k) for k in keys for res in (fws, pds)]
        with ThreadPoolExecutor(max(1, min(workers, len(asks))), "placement-get") as pool:
            found = list(pool.map(lambda ask: stored(*ask), asks))
        owners = [o for o in found[0::2] if o is not None]
        return owners, [p for p in found[1::2] if p is not None]

    return keyed


UNCHANGED = "unchanged"
WRITTEN = "written"
CONFLICTED = "conflict"
GONE = "gone"  # the FleetWorkload's namespace no longer exists: nothing to place
NOT_FOUND = 404


class PlacementWriter:
    """One set of decisions to write: the stored objects read up front, then ``write`` each.

    The stored FleetWorkloads and PlacementDecisions come from ``source`` (default: two fresh
    LISTs, ``placement_listing``); any source must be at least as new as the moment the writer
    is built, because ``write`` calls a decision equal to what is stored ``UNCHANGED`` and writes
    nothing for it: a stale "unchanged" would skip a needed write. Its conditional applies
    (``resourceVersion`` preconditions, 409 -> ``CONFLICTED``) stay the guard against whatever
    changes after that moment. ``write`` touches only its own decision's FleetWorkload and
    PlacementDecision and reads the objects read here without changing them (they may be a
    cache's, shared), so decisions of different workloads may be written from several threads
    at once (the backend bounds how many); one workload's decisions must not be written
    concurrently (a write set has one decision per workload).
    """

    def __init__(
        self,
        dyn: Any,
        decisions: Sequence[PlacementDecision],
        namespace: str | None = None,
        now: datetime | None = None,
        source: PlacementSource | None = None,
    ) -> None:
        self._dyn = dyn
        self._when = now or datetime.now(UTC)
        # workload -> the FleetWorkload's resourceVersion this writer saw newer than the
        # decision's (a conflict) or committed: a cache the next read comes from must reach it.
        self.versions: dict[str, str] = {}
        self._owners: dict[str, Mapping[str, Any]] = {}
        self._existing: dict[str, Mapping[str, Any]] = {}
        if not decisions:
            return
        wanted = sorted({d.workload for d in decisions})
        owners, existing = (source or placement_listing(dyn, namespace))(wanted)
        self._owners = {
            f"{object_meta(o)['namespace']}/{object_meta(o)['name']}": o for o in owners
        }
        missing = [w for w in wanted if w not in self._owners]
        if missing:
            raise WorkloadMissingError(f"no FleetWorkload {', '.join(missing)}")
        # Ours carry the workload label (a cache holds every PlacementDecision in scope; the
        # LIST asks for the label); ``_owned_by`` then checks the link to the FleetWorkload.
        self._existing = {
            f"{object_meta(p)['namespace']}/{object_meta(p)['name']}": p
            for p in existing
            if WORKLOAD_LABEL in (object_meta(p).get("labels") or {})
        }
        self._pds = resource(dyn, PLACEMENT_DECISION)
        self._fws = resource(dyn, FLEET_WORKLOAD)

    def write(self, d: PlacementDecision) -> str:
        """Write one decision: ``WRITTEN``, ``UNCHANGED``, ``CONFLICTED`` or ``GONE``.

        ``GONE``: the API server answered 404 for the workload's namespace. An object can outlive
        its namespace in storage (a namespace force-finalized before its objects were deleted),
        and a LIST across all namespaces still returns it; it can hold no decision, and one such
        orphan must not halt every calibration of an all-namespaces worker.
        """
        try:
            return self._write(d)
        except Exception as err:
            if status_code(err) == NOT_FOUND and _namespace_missing(err):
                log.warning("placement of %s skipped: its namespace no longer exists", d.workload)
                return GONE
            raise

    def _write(self, d: PlacementDecision) -> str:
        owner = self._owners[d.workload]
        version = str(object_meta(owner).get("resourceVersion"))
        if d.resource_version and d.resource_version != version:
            self.versions[d.workload] = version
            return CONFLICTED
        pd = self._existing.get(d.workload)
        if pd is not None and not _owned_by(pd, owner):
            pd = None
        committed_same = stored_clusters(owner) == d.clusters
        if committed_same and _mirrored(pd) == d.clusters:
            return UNCHANGED
        if pd is None:
            pd = _apply(self._pds, placement_decision(owner))
        committed = version
        if not committed_same:
            body = _with_version(fleet_workload_status(owner, d, self._when), d.resource_version)
            try:
                committed = str(object_meta(_apply(self._fws.status, body)).get("resourceVersion"))
            except Exception as err:
                if status_code(err) != CONFLICT:
                    raise
                self.versions[d.workload] = version
                return CONFLICTED
            self.versions[d.workload] = committed
        _mirror(self._dyn, owner, d, pd, committed)
        return WRITTEN


def outcome_of(decisions: Sequence[PlacementDecision], statuses: Sequence[str]) -> WriteOutcome:
    """The outcome of ``PlacementWriter.write`` per decision, in the decisions' order."""
    return WriteOutcome(
        tuple(d.workload for d, s in zip(decisions, statuses, strict=True) if s == WRITTEN),
        tuple(d.workload for d, s in zip(decisions, statuses, strict=True) if s == CONFLICTED),
    )


def write_placement_decisions(
    dyn: Any,
    decisions: Iterable[PlacementDecision],
    namespace: str | None = None,
    now: datetime | None = None,
) -> WriteOutcome:
    """Write each decision that differs from the stored one: FleetWorkload status, then mirror.

    Two fresh LISTs (FleetWorkloads, PlacementDecisions), then per changed workload one
    conditional status apply of each (the PlacementDecision object itself is applied only when
    missing or not linked to its FleetWorkload). A decision whose ``resource_version`` no longer
    matches its FleetWorkload, or whose conditional commit gets a 409, is a conflict: nothing is
    written for it and the caller re-reads and recomputes. A decision equal to both stored copies
    writes nothing; one equal to the FleetWorkload's but not to the mirror (a writer that stopped
    between the two) repairs the mirror. A decision for a workload that has no FleetWorkload
    raises WorkloadMissingError naming it. One decision after the other; ``PlacementWriter``
    lets a caller write several at once.
    """
    todo = list(decisions)
    writer = PlacementWriter(dyn, todo, namespace, now)
    return outcome_of(todo, [writer.write(d) for d in todo])


def workload_versions(objs: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """``namespace/name`` -> resourceVersion of FleetWorkloads (the writer's preconditions)."""
    out: dict[str, str] = {}
    for o in objs:
        meta = object_meta(o)
        out[f"{meta.get('namespace')}/{meta.get('name')}"] = str(meta.get("resourceVersion"))
    return out
