"""What the backend's parts share (``backend.access``): finding a Cluster's namespace by its name.

A backend for every namespace is handed clusters by name alone (a ``ClusterRef`` without a
namespace). With the worker's watch-fed cache it finds the namespace in memory; a name the cache
does not know, a cache not synced and one whose Cluster watch keeps failing LIST every Cluster, as
a backend without a cache always does. The cache runs over the real ``kube_list`` of a
``FakeDyn`` and a scripted watch (``watch_feed.Feed``, no network); every wait is bounded.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Hashable, Iterator
from typing import Any

import pytest

from orchestrator.kube import cache as kcache
from orchestrator.kube import capi, workload
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.backend.port import ClusterRef, NotFoundError
from orchestrator.kube.cache import FleetCache, WatchCache
from tests.orchestrator.kube.backend.test_kube_backend import one_cluster_fleet
from tests.orchestrator.kube.fake_dyn import NS, ApiError, FakeDyn
from tests.orchestrator.kube.watch_feed import Feed

WAIT = 5.0
OTHER = "other-ns"


@pytest.fixture
def watches() -> Iterator[Feed]:
    w = Feed()
    yield w
    w.closed.set()


def _backend(dyn: FakeDyn, watches: Feed, *, start: bool = True) -> KubeFleetBackend:
    """A backend for every namespace (``namespace=None``) with a cache of every namespace."""
    cache = WatchCache(
        kcache.CACHED_KINDS,
        kcache.kube_list(dyn, None),
        watches.watch,
        backoff=0.01,
        max_backoff=0.05,
        interrupt=watches.closed.set,
    )
    backend = KubeFleetBackend(None, None, dyn=dyn, cache=FleetCache(dyn, None, cache=cache))
    if start:
        backend.start()
        cache.wait_synced(WAIT)
    return backend


def _cluster(name: str, namespace: str, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, **meta}, "spec": {}}


def test_a_named_cluster_is_found_in_the_cache_without_a_list(
    watches: Feed, monkeypatch: pytest.MonkeyPatch
) -> None:
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    monkeypatch.setattr(workload, "workload_client", lambda *a: object())
    monkeypatch.setattr(workload, "nodes", lambda api: {"cp-m": ready, "md-m": ready})
    dyn = one_cluster_fleet(topology=False)
    backend = _backend(dyn, watches)
    try:
        lists = dict(dyn.lists)
        assert backend._namespace_of(ClusterRef("c1")) == NS
        # What the activities call: observe resolves the name, then reads the cluster fresh.
        observed = asyncio.run(backend.observe(ClusterRef("c1")))
        assert observed.cluster == ClusterRef("c1", NS) and observed.reachable
        assert dyn.lists.get("Cluster") == lists.get("Cluster"), "no LIST of Clusters"
    finally:
        backend.close()


def test_a_name_the_cache_has_not_seen_yet_is_listed(watches: Feed) -> None:
    dyn = one_cluster_fleet(topology=False)
    backend = _backend(dyn, watches)
    try:
        dyn.add("Cluster", _cluster("new", OTHER))  # created since the cache's last event
        lists = dyn.lists["Cluster"]
        assert backend._namespace_of(ClusterRef("new")) == OTHER
        assert dyn.lists["Cluster"] == lists + 1
        with pytest.raises(NotFoundError, match="cluster 'gone' not found"):
            backend._namespace_of(ClusterRef("gone"))  # unknown to both: one more LIST
        assert dyn.lists["Cluster"] == lists + 2
    finally:
        backend.close()


def test_a_cluster_being_deleted_in_the_cache_is_looked_up_afresh(watches: Feed) -> None:
    dyn = one_cluster_fleet(topology=False)
    backend = _backend(dyn, watches)
    try:
        deleting = _cluster("c1", NS, deletionTimestamp="2026-12-06T02:00:00Z")
        watches.push(capi.CLUSTER, {"type": "MODIFIED", "object": deleting})
        assert backend._cache is not None
        deadline = time.monotonic() + WAIT
        while "deletionTimestamp" not in backend._cache.named(capi.CLUSTER, "c1")[0]["metadata"]:
            assert time.monotonic() < deadline, "the event was not applied"
            time.sleep(0.005)
        dyn.add("Cluster", _cluster("c1", OTHER))  # the name again, elsewhere
        dyn.objects["Cluster"].pop((NS, "c1"))
        lists = dyn.lists["Cluster"]
        assert backend._namespace_of(ClusterRef("c1")) == OTHER
        assert dyn.lists["Cluster"] == lists + 1
    finally:
        backend.close()


def test_one_name_in_two_namespaces_must_be_named_with_its_namespace(watches: Feed) -> None:
    dyn = one_cluster_fleet(topology=False)
    dyn.add("Cluster", _cluster("c1", OTHER))
    backend = _backend(dyn, watches)
    try:
        with pytest.raises(NotFoundError, match="exists in several namespaces"):
            backend._namespace_of(ClusterRef("c1"))
        assert backend._namespace_of(ClusterRef("c1", OTHER)) == OTHER  # given: no lookup
    finally:
        backend.close()


def test_a_cache_not_synced_is_not_waited_for(watches: Feed) -> None:
    """The first LIST fails: the lookup LISTs at once, it does not wait for the cache's sync."""
    dyn = one_cluster_fleet(topology=False)
    backend = _backend(dyn, watches, start=False)
    assert backend._cache is not None
    listing = kcache.kube_list(dyn, None)
    failed = threading.Event()

    def failing(kind: Hashable) -> tuple[list[dict[str, Any]], str]:
        if kind == capi.CLUSTER:
            failed.set()
            raise ApiError(500)
        return listing(kind)

    backend._cache.cache._list = failing  # every LIST of Clusters fails: never synced
    try:
        began = time.monotonic()
        assert backend._namespace_of(ClusterRef("c1")) == NS
        assert time.monotonic() - began < 1, "no wait for the sync"
        assert failed.wait(WAIT), "the lookup started the cache"
        assert not backend._cache.cache.synced
    finally:
        backend.close()


def test_a_cluster_watch_that_keeps_failing_makes_the_lookup_list(watches: Feed) -> None:
    dyn = one_cluster_fleet(topology=False)
    backend = _backend(dyn, watches)
    assert backend._cache is not None
    try:
        for _ in range(kcache.LAG_AFTER):
            watches.push(capi.CLUSTER, ApiError(403))
        deadline = time.monotonic() + WAIT
        while backend._cache.cache.lagging() != (capi.CLUSTER,):
            assert time.monotonic() < deadline, "not lagging"
            time.sleep(0.005)
        lists = dyn.lists["Cluster"]
        assert backend._namespace_of(ClusterRef("c1")) == NS
        assert dyn.lists["Cluster"] == lists + 1
    finally:
        backend.close()


def test_a_backend_without_a_cache_lists_each_lookup() -> None:
    dyn = one_cluster_fleet(topology=False)
    backend = KubeFleetBackend(None, None, dyn=dyn)
    backend._namespace_of(ClusterRef("c1"))
    backend._namespace_of(ClusterRef("c1"))
    assert dyn.lists["Cluster"] == 2
