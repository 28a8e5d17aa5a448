"""``remove_namespace`` does the namespace controller's job the local plane lacks, in CAPI's order.

The fake below answers the calls the kubernetes dynamic client makes for real ``Resource``
objects (``resource.get`` -> ``client.get(resource, ...)``), keeps objects per kind, and deletes
like the local plane: a Cluster is gone one LIST after its DELETE (CAPI tears it down
asynchronously), an object with a finalizer nobody removes stays, a deleted Namespace stays
Terminating until its ``kubernetes`` finalizer is removed through ``/finalize``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ForbiddenError, NotFoundError
from kubernetes.dynamic.resource import Resource, ResourceList

from orchestrator.kube import namespaces

NS = "calibrator-demo-20261203-110655"


def _res(group: str, version: str, kind: str, plural: str, **kw: Any) -> Any:
    return Resource(  # type: ignore[no-untyped-call]
        prefix="api" if not group else "apis",
        group=group,
        api_version=version,
        kind=kind,
        name=plural,
        namespaced=kw.get("namespaced", True),
        verbs=kw.get("verbs", ["list", "get", "delete", "deletecollection"]),
        preferred=kw.get("preferred", True),
    )


CLUSTER = _res("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters")
CLUSTER_V1BETA1 = _res("cluster.x-k8s.io", "v1beta1", "Cluster", "clusters", preferred=False)
SECRET = _res("", "v1", "Secret", "secrets")
WORKLOAD = _res("calibrator.dev", "v1alpha1", "FleetWorkload", "fleetworkloads")
NAMESPACE = _res("", "v1", "Namespace", "namespaces", namespaced=False)
REVIEW = _res(
    "authorization.k8s.io",
    "v1",
    "LocalSubjectAccessReview",
    "localsubjectaccessreviews",
    verbs=["create"],
)
ALL: list[Any] = [CLUSTER, CLUSTER_V1BETA1, SECRET, WORKLOAD, NAMESPACE, REVIEW]


def _missing() -> NotFoundError:
    return NotFoundError(ApiException(status=404, reason="Not Found"))  # type: ignore[no-untyped-call]


class _Result:
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._data)

    @property
    def data(self) -> bytes:  # the raw response (``serialize=False``)
        return json.dumps(self._data).encode()


class _Resources:
    def __init__(self, every: list[Any]) -> None:
        self.every = every

    def get(self, api_version: str, kind: str) -> Any:
        return next(r for r in self.every if r.group_version == api_version and r.kind == kind)

    def __iter__(self) -> Any:
        return iter(self.every)


class FakeDyn:
    """Objects per kind; every call in ``calls`` as ``(verb, what)``."""

    def __init__(self) -> None:
        secret_list = ResourceList(self, "", "v1", "Secret")  # type: ignore[no-untyped-call]
        self.resources = _Resources([*ALL, secret_list])
        for res in ALL:
            res.client = self
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self.deleting: set[tuple[str, str, str]] = set()  # kind, namespace, name
        self.calls: list[tuple[str, str]] = []
        self.refused: set[str] = set()  # kinds whose deletecollection answers 403

    def add(self, kind: str, namespace: str, name: str, **meta: Any) -> None:
        obj = {"kind": kind, "metadata": {"name": name, "namespace": namespace, **meta}}
        if kind == "Namespace":
            obj["spec"] = {"finalizers": ["kubernetes"]}
        self.objects.setdefault(kind, {})[(namespace, name)] = obj

    def names(self, kind: str) -> list[str]:
        return sorted(name for _, name in self.objects.get(kind, {}))

    # -- what Resource.get / Resource.delete forward to -------------------------------------
    def get(self, resource: Resource, name: str | None = None, **kw: Any) -> _Result:
        namespace = kw.get("namespace") or ""
        store = self.objects.get(resource.kind, {})
        if name is not None:
            if (namespace, name) not in store:
                raise _missing()
            return _Result(store[(namespace, name)])
        items = [o for (ns, _), o in sorted(store.items()) if ns == namespace]
        for kind, ns, n in sorted(self.deleting):  # CAPI finishes one LIST later
            if kind == resource.kind and ns == namespace:
                self.objects[kind].pop((ns, n), None)
                self.deleting.discard((kind, ns, n))
        return _Result({"items": items, "metadata": {}})

    def delete(self, resource: Resource, name: str, namespace: str = "", **_: Any) -> None:
        self.calls.append(("delete", f"{resource.kind}/{name}"))
        obj = self.objects.get(resource.kind, {}).get((namespace, name))
        if obj is None:
            raise _missing()
        if resource.kind == "Namespace":
            obj["metadata"]["deletionTimestamp"] = "now"
        elif resource.kind == "Cluster" and not obj["metadata"].get("stuck"):
            self.deleting.add(("Cluster", namespace, name))

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> None:
        self.calls.append((method, path))
        if path.endswith("/finalize"):
            assert body["spec"]["finalizers"] == []
            self.objects["Namespace"].pop(("", NS))
            return
        kind = next(r.kind for r in ALL if r.path(namespace=NS) == path)
        if kind in self.refused:
            raise ForbiddenError(ApiException(status=403, reason="Forbidden"))  # type: ignore[no-untyped-call]
        store = self.objects.get(kind, {})
        for key in [k for k, o in store.items() if k[0] == NS]:
            if not store[key]["metadata"].get("finalizers"):
                del store[key]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _demo_namespace(dyn: FakeDyn) -> None:
    dyn.add("Namespace", "", NS)
    for name in ("demo-dev-1", "demo-prod-1"):
        dyn.add("Cluster", NS, name)
        dyn.add("Secret", NS, f"{name}-kubeconfig")
    dyn.add("FleetWorkload", NS, "web")
    dyn.add("Secret", "elsewhere", "kept")
    dyn.add("Cluster", "elsewhere", "kept")


def _remove(dyn: FakeDyn, timeout: float = 300) -> list[str]:
    clock = Clock()
    return namespaces.remove_namespace(dyn, NS, timeout=timeout, clock=clock, sleep=clock.sleep)


def test_one_version_per_namespaced_kind_that_can_be_emptied() -> None:
    kinds = namespaces.collection_kinds(FakeDyn().resources)
    assert [(r.kind, r.api_version) for r in kinds] == [
        ("Secret", "v1"),
        ("FleetWorkload", "v1alpha1"),
        ("Cluster", "v1beta2"),  # the preferred version; no SecretList, Namespace or review
    ]


def test_clusters_go_first_then_every_object_then_the_namespace() -> None:
    dyn = FakeDyn()
    _demo_namespace(dyn)
    assert _remove(dyn) == []
    assert dyn.names("Namespace") == []
    assert dyn.objects["Secret"] == {
        ("elsewhere", "kept"): dyn.objects["Secret"][("elsewhere", "kept")]
    }
    assert dyn.names("Cluster") == ["kept"] and dyn.names("FleetWorkload") == []
    verbs = [verb for verb, _ in dyn.calls]
    # Clusters are deleted one by one through CAPI, then one DELETE per kind, then the namespace.
    assert dyn.calls[:2] == [("delete", "Cluster/demo-dev-1"), ("delete", "Cluster/demo-prod-1")]
    assert verbs[2:] == ["delete"] * 4 + ["put"]
    assert dyn.calls[-2] == ("delete", "Namespace/" + NS)
    assert dyn.calls[-1] == ("put", f"/api/v1/namespaces/{NS}/finalize")


def test_a_cluster_that_is_not_deleted_in_time_is_named_and_nothing_else_is_touched() -> None:
    dyn = FakeDyn()
    _demo_namespace(dyn)
    dyn.add("Cluster", NS, "demo-prod-2", stuck=True)
    assert _remove(dyn, timeout=30) == ["Cluster/demo-prod-2"]
    assert dyn.names("Namespace") == [NS]
    assert "deletionTimestamp" not in dyn.objects["Namespace"][("", NS)]["metadata"]
    assert len(dyn.objects["Secret"]) == 3 and dyn.names("FleetWorkload") == ["web"]


def test_an_object_kept_by_a_finalizer_leaves_the_namespace_in_place() -> None:
    dyn = FakeDyn()
    _demo_namespace(dyn)
    dyn.add("FleetWorkload", NS, "held", finalizers=["example.com/hold"])
    assert _remove(dyn, timeout=30) == ["FleetWorkload/held"]
    assert dyn.names("Namespace") == [NS]


def test_a_namespace_that_is_gone_already_is_done() -> None:
    dyn = FakeDyn()
    assert _remove(dyn) == []


def test_a_kind_that_cannot_be_emptied_is_named_and_the_rest_still_goes() -> None:
    dyn = FakeDyn()
    _demo_namespace(dyn)
    dyn.refused.add("FleetWorkload")
    assert _remove(dyn, timeout=30) == ["FleetWorkload/web"]
    assert dyn.names("Namespace") == [NS]
    assert list(dyn.objects["Secret"]) == [("elsewhere", "kept")]
