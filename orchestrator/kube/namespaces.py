"""Remove a namespace and everything in it where no namespace controller runs (the local plane).

kube-apiserver only marks a deleted namespace Terminating; kube-controller-manager's namespace
controller then deletes every object in it and removes the ``kubernetes`` finalizer. The local
plane runs no kube-controller-manager (docs/localplane.md), so a deleted namespace would stay
Terminating with its objects for ever. ``remove_namespace`` does that controller's job, in the
order that keeps CAPI's teardown intact: the Clusters first (CAPI's own finalizers delete their
Machines, control planes, infrastructure and CAPD's simulated API servers), then every other
namespaced kind, then the finalizer.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes.dynamic.exceptions import (
    DynamicApiError,
    NotFoundError,
    ResourceNotFoundError,
)
from kubernetes.dynamic.resource import Resource, ResourceList

from orchestrator.kube import capi
from orchestrator.kube.client import list_pages, read_json

REQUEST_TIMEOUT = 60  # seconds for one API call
POLL = 2.0  # seconds between two looks at what is left


def collection_kinds(resources: Iterable[object]) -> list[Any]:
    """The namespaced kinds to empty, one version per kind.

    Discovery lists a kind once per served version (CAPI serves v1beta1 and v1beta2); deleting
    the collection through one of them deletes it in all, and the preferred version needs no
    conversion webhook. Kinds without ``deletecollection`` and ``list`` (reviews, bindings) hold
    nothing to delete.
    """
    chosen: dict[tuple[str, str], Any] = {}
    for res in resources:
        # Discovery also yields a ``ResourceList`` per kind (FooList): nothing to delete there.
        if not isinstance(res, Resource) or isinstance(res, ResourceList) or not res.namespaced:
            continue
        if not {"deletecollection", "list"} <= set(res.verbs or ()):
            continue
        key = (str(res.group or ""), str(res.kind))
        if key not in chosen or (res.preferred and not chosen[key].preferred):
            chosen[key] = res
    return sorted(chosen.values(), key=lambda r: (str(r.group or ""), str(r.kind)))


def remove_namespace(
    dyn: Any,
    namespace: str,
    *,
    timeout: float,
    progress: Callable[[str], None] = lambda _: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Delete ``namespace`` and all it holds; return what is still there after ``timeout``.

    An empty list means the namespace is gone. Anything returned (``Kind/name``) is left as it
    was found or Terminating, and a later call finishes the job: every step is idempotent.
    """
    deadline = clock() + timeout

    def wait(what: str, left: Callable[[], list[str]]) -> list[str]:
        while remaining := left():
            if clock() > deadline:
                return remaining
            progress(f"{what}: {len(remaining)} left")
            sleep(POLL)
        return []

    # 1. Clusters, through CAPI (their finalizers tear down what each cluster owns).
    try:
        clusters: Any = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    except ResourceNotFoundError:
        clusters = None
    if clusters is not None:

        def cluster_names() -> list[str]:
            return [str(c["metadata"]["name"]) for c in list_pages(clusters, namespace=namespace)]

        for name in cluster_names():
            _ignore_missing(
                clusters.delete, name=name, namespace=namespace, _request_timeout=REQUEST_TIMEOUT
            )
        left = wait(
            f"deleting the Clusters in {namespace}",
            lambda: [f"Cluster/{n}" for n in cluster_names()],
        )
        if left:
            return left

    # 2. Every other namespaced object, one DELETE per kind (deletecollection). A kind whose
    # DELETE is refused is not the end: the LISTs below are the truth and name what stayed.
    kinds = collection_kinds(dyn.resources)
    for res in kinds:
        path = res.path(namespace=namespace)
        with contextlib.suppress(DynamicApiError):
            dyn.request("delete", path, _request_timeout=REQUEST_TIMEOUT)

    def objects() -> list[str]:
        found: list[str] = []
        for res in kinds:
            try:
                items = list_pages(res, namespace=namespace)
            except NotFoundError:
                continue
            found += [f"{res.kind}/{o['metadata']['name']}" for o in items]
        return found

    left = wait(f"deleting the objects in {namespace}", objects)
    if left:
        return left

    # 3. The namespace itself, and the finalizer the missing namespace controller would remove.
    spaces = dyn.resources.get(api_version="v1", kind="Namespace")
    _ignore_missing(spaces.delete, name=namespace, _request_timeout=REQUEST_TIMEOUT)

    def namespace_left() -> list[str]:
        try:
            ns = read_json(spaces.get, name=namespace, _request_timeout=REQUEST_TIMEOUT)
        except NotFoundError:
            return []
        if (ns.get("spec") or {}).get("finalizers"):
            ns["spec"]["finalizers"] = []
            finalize = f"/api/v1/namespaces/{namespace}/finalize"
            _ignore_missing(dyn.request, "put", finalize, body=ns, _request_timeout=REQUEST_TIMEOUT)
        return [f"Namespace/{namespace}"]

    return wait(f"removing namespace {namespace}", namespace_left)


def _ignore_missing(call: Callable[..., object], *args: Any, **kwargs: Any) -> None:
    """Run one DELETE/PUT; what is already gone is what we wanted."""
    with contextlib.suppress(NotFoundError):
        call(*args, **kwargs)
