"""The worker's watch-fed cache on the real local plane (issue 29).

* The cache follows Clusters and FleetWorkloads created, changed and deleted on the real
  kube-apiserver (each within a bounded wait, polled), and once synced the inventory reads
  issue no LIST of the six cached kinds: only the watches talk to the server. Every request of
  the backend's client is counted by one hook on ``call_api`` (``client.observe_requests``).
* The placement writer reads what it compares with from the cache once the cache has reached
  the collections' current versions (two LISTs of ``limit=1``), while another kind's writes
  move the revision: its stores ask the real server for a bookmark (a 3-s watch) and are
  vouched for, so no whole LIST of FleetWorkloads or PlacementDecisions, within
  ``FRESH_TIMEOUT``.
* The real watch: reopened from its resourceVersion when the server ends it (no LIST), and a
  resourceVersion the server has forgotten answered 410, after which the cache LISTs again.
* The worker's own ClusterRole (deploy/rbac) may list and watch what the cache reads.
* Two backends on one namespace, each with its own cache (two worker processes on one task
  queue), place one workload concurrently, read-place-write rounds as the ``replace`` activity
  does: decisions computed from a cache that is behind fail their compare-and-swap and are
  computed again from fresher data, and no update is lost.

Clusters are created paused (CAPI provisions nothing), so the test takes seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes.dynamic import DynamicClient

from orchestrator.kube import cache as kcache
from orchestrator.kube import capi, fleetapi
from orchestrator.kube.backend import inventory as backend_inventory
from orchestrator.kube.backend import placement as backend_placement
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.backend.port import ClusterReplicasInfo, Inventory, PlacementDecisionInfo
from orchestrator.kube.cache import FleetCache, WatchCache
from orchestrator.kube.client import (
    Answered,
    api_client,
    apply_all,
    dynamic,
    is_probe,
    observe_requests,
)
from orchestrator.kube.templates import cluster_objects
from orchestrator.localplane.plane import LocalPlane
from testkit.capi_waits import patch, wait_for
from testkit.worker_rbac import WorkerIdentity

pytestmark = pytest.mark.integration

NS = "calibrator-cache"
FOLLOW_TIMEOUT = 30.0  # seconds for the cache to show a change (the watch takes milliseconds)
DELETE_TIMEOUT = 300
CACHED = {
    "clusterclasses",
    "clusters",
    "kubeadmcontrolplanes",
    "machinedeployments",
    "fleetworkloads",
    "placementdecisions",
}
PLACEMENT = {"fleetworkloads", "placementdecisions"}  # what the placement writer reads
INVENTORY = CACHED - {"placementdecisions"}  # what the inventory reads
INCREMENTS = 8  # per worker
ROUNDS = 200  # read-place-write rounds a worker may take for its increments


def _paused(name: str) -> list[dict[str, Any]]:
    objects = cluster_objects(name, NS, "v1.33.0", topology=False)
    for obj in objects:
        if obj["kind"] == "Cluster":
            obj["spec"]["paused"] = True
    return objects


def _workload(name: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": fleetapi.API_VERSION,
        "kind": "FleetWorkload",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"apis": ["apps/v1/Deployment"], "replicas": replicas, "placement": {}},
    }


@dataclass
class Requests:
    """(method, resource, watch?) of every request a client sent, and the watches answered 200.

    Version probes (LISTs of ``limit=1``: ``client.collection_version``) are kept apart in
    ``probed``: ``lists`` counts the LISTs that read a collection whole.
    """

    seen: list[tuple[str, str, bool]] = field(default_factory=list)
    probed: list[str] = field(default_factory=list)
    watched: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @contextlib.contextmanager
    def observe(self, method: str, url: str, headers: Mapping[str, str]) -> Iterator[Answered]:
        parts = urlsplit(url)
        watch = parse_qs(parts.query).get("watch", [""])[0].lower() == "true"
        resource = parts.path.rstrip("/").rsplit("/", 1)[-1]
        with self.lock:
            if method == "GET" and not watch and is_probe(url):
                self.probed.append(resource)
            else:
                self.seen.append((method, resource, watch))

        def answered(response: Any) -> None:
            if watch and response.status == 200:
                with self.lock:
                    self.watched.add(resource)

        yield answered

    def lists(self, kinds: set[str] = CACHED) -> int:
        """Whole LISTs of the cached kinds (or ``kinds``): a GET of a collection, not a watch."""
        with self.lock:
            return sum(1 for m, r, w in self.seen if m == "GET" and r in kinds and not w)

    def probes(self) -> dict[str, int]:
        with self.lock:
            return {r: self.probed.count(r) for r in sorted(set(self.probed))}

    def watches(self) -> set[str]:
        with self.lock:
            return {r for m, r, w in self.seen if m == "GET" and w}


def _backend(plane: LocalPlane, requests: Requests | None = None) -> KubeFleetBackend:
    api = api_client(plane.kubeconfig)
    if requests is not None:
        observe_requests(api, requests.observe)
    backend = KubeFleetBackend(api, NS, cache=True)
    backend.start()
    return backend


@pytest.fixture(scope="module")
def namespace(dyn: DynamicClient) -> Iterator[str]:
    apply_all(dyn, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    apply_all(dyn, _paused("cache-a"))
    clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    workloads = fleetapi.resource(dyn, fleetapi.FLEET_WORKLOAD)
    try:
        yield NS
    finally:
        for obj in workloads.get(namespace=NS).items:
            workloads.delete(name=obj.metadata.name, namespace=NS)
        for obj in clusters.get(namespace=NS).items:  # a paused cluster is deleted unpaused
            patch(dyn, capi.CLUSTER, NS, obj.metadata.name, {"spec": {"paused": False}})
            clusters.delete(name=obj.metadata.name, namespace=NS)
        wait_for(
            "clusters deleted",
            lambda: not clusters.get(namespace=NS).to_dict()["items"],
            DELETE_TIMEOUT,
        )


def _read(backend: KubeFleetBackend) -> Inventory:
    return asyncio.run(backend.inventory())


def _follows(backend: KubeFleetBackend, what: str, check: Callable[[Inventory], bool]) -> None:
    wait_for(what, lambda: check(_read(backend)), FOLLOW_TIMEOUT, interval=0.1)


def _listed(read: Inventory) -> set[str]:
    return set(read.snapshot.cluster_names()) | set(read.pending) | set(read.skipped)


def _workloads(read: Inventory) -> dict[str, int]:
    return {w.name: w.replicas for w in read.snapshot.workloads}


def test_the_cache_follows_the_server_and_reads_list_nothing(
    plane: LocalPlane, dyn: DynamicClient, namespace: str
) -> None:
    requests = Requests()
    backend = _backend(plane, requests)
    try:
        first = _read(backend)  # waits for the first LISTs of the inventory's kinds (synced)
        assert "cache-a" in _listed(first)
        assert backend._cache is not None
        backend._cache.cache.wait_synced(FOLLOW_TIMEOUT)  # the writer's PlacementDecisions too
        lists = requests.lists()
        assert lists == len(CACHED), requests.seen  # one LIST per kind (one page each here)
        for _ in range(10):
            _read(backend)
        assert requests.lists() == lists, "reads from a synced cache LIST nothing"
        assert requests.watches() >= CACHED, requests.watches()
        stored = backend._cache.cache.snapshot() if backend._cache is not None else {}
        assert stored and all(
            "managedFields" not in o["metadata"] for objs in stored.values() for o in objs
        )

        # Clusters: created, changed, deleted.
        apply_all(dyn, _paused("cache-b"))
        _follows(backend, "cache-b added", lambda r: "cache-b" in _listed(r))
        patch(dyn, capi.CLUSTER, NS, "cache-b", {"metadata": {"labels": {"tier": "gold"}}})
        _follows(
            backend,
            "cache-b relabelled",
            lambda r: (
                "cache-b" in r.snapshot.cluster_names()
                and r.snapshot.cluster("cache-b").labels.get("tier") == "gold"
            ),
        )
        patch(dyn, capi.CLUSTER, NS, "cache-b", {"spec": {"paused": False}})
        clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
        clusters.delete(name="cache-b", namespace=NS)
        # Being deleted: out of the fleet at once (fleetmap), gone once CAPI has finished.
        _follows(backend, "cache-b deleted", lambda r: "cache-b" not in _listed(r))

        # FleetWorkloads: created, changed, deleted.
        apply_all(dyn, [_workload("cached-web", 2)])
        _follows(backend, "cached-web added", lambda r: _workloads(r).get("cached-web") == 2)
        apply_all(dyn, [_workload("cached-web", 5)])
        _follows(backend, "cached-web changed", lambda r: _workloads(r).get("cached-web") == 5)
        fleetapi.resource(dyn, fleetapi.FLEET_WORKLOAD).delete(name="cached-web", namespace=NS)
        _follows(backend, "cached-web deleted", lambda r: "cached-web" not in _workloads(r))

        assert requests.lists() == lists, "the cache followed by its watches, no LIST"
    finally:
        backend.close()


def test_the_placement_writer_reads_the_cache_at_the_collections_versions(
    plane: LocalPlane, dyn: DynamicClient, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unchanged decisions are found unchanged from memory, while other kinds keep changing.

    Between writes a Cluster is relabelled (another kind's write moves the revision every LIST
    reports, as CAPI's status writes do during a rollout): the writer's probes report that
    revision, and its stores of FleetWorkloads and PlacementDecisions, which saw no change of
    their own, must still reach it within ``FRESH_TIMEOUT`` - by asking for a bookmark (the
    server's side of ``WatchCache._ask``: a bookmark 2 s before a 3-s watch ends, at the watch
    cache's revision, which the probe brought up to etcd's) - or the writer LISTs them whole.
    Then the same write of one workload by key (``KEYED_READS``): no probe, no LIST.
    """
    monkeypatch.setattr(backend_placement, "KEYED_READS", 0)  # the cache's path first
    apply_all(dyn, [_workload("cached-probe", 1)])
    requests = Requests()
    backend = _backend(plane, requests)
    key = f"{NS}/cached-probe"
    try:
        _follows(backend, "the workload cached", lambda r: "cached-probe" in _workloads(r))
        read = _read(backend)
        decision = PlacementDecisionInfo(
            key,
            (ClusterReplicasInfo("cache-a", 1),),
            reason="probe",
            resource_version=read.workload_versions[key],
        )
        assert asyncio.run(backend.write_placement([decision], "probe")).written == (key,)
        _follows(
            backend,
            "the decision cached",
            lambda r: any(
                w.key == key and (w.placement.current() or {}).get("cache-a") == 1
                for w in r.snapshot.workloads
            ),
        )
        lists = requests.lists(PLACEMENT)
        for i in range(3):
            patch(dyn, capi.CLUSTER, NS, "cache-a", {"metadata": {"labels": {"probe": str(i)}}})
            same = PlacementDecisionInfo(
                key,
                decision.clusters,
                reason="probe",
                resource_version=_read(backend).workload_versions[key],
            )
            began = time.monotonic()
            assert asyncio.run(backend.write_placement([same], "probe")).written == ()
            took = time.monotonic() - began
            assert took < backend_inventory.FRESH_TIMEOUT, f"waited {took:.1f}s"
        assert requests.lists(PLACEMENT) == lists, "compared from memory, no whole LIST"
        assert requests.probes() == {"fleetworkloads": 4, "placementdecisions": 4}
        assert backend._cache is not None
        asks = backend._cache.cache.asks
        print(f"\n[watch cache] asks for a bookmark: {asks}")
        monkeypatch.setattr(backend_placement, "KEYED_READS", 1)
        patch(dyn, capi.CLUSTER, NS, "cache-a", {"metadata": {"labels": {"probe": "keyed"}}})
        assert asyncio.run(backend.write_placement([same], "probe")).written == ()
        assert requests.lists(PLACEMENT) == lists, "read by key, no whole LIST"
        assert requests.probes() == {"fleetworkloads": 4, "placementdecisions": 4}, "no probe"
    finally:
        backend.close()


def _increment(backend: KubeFleetBackend, workload: str, cluster: str) -> tuple[int, int]:
    """One increment of the workload's replicas on ``cluster``, read-place-write as ``replace``.

    A round reads the inventory (from this backend's cache), computes the new decision and
    writes it conditionally on the version it read; a conflict means read again. Returns
    (rounds taken, conflicts met).
    """
    key = f"{NS}/{workload}"
    for attempt in range(1, ROUNDS + 1):
        read = _read(backend)
        (w,) = [w for w in read.snapshot.workloads if w.key == key]
        now = (w.placement.current() or {}).get(cluster, 0)
        decision = PlacementDecisionInfo(
            key,
            (ClusterReplicasInfo(cluster, now + 1),),
            reason=f"increment to {now + 1}",
            resource_version=read.workload_versions[key],
        )
        outcome = asyncio.run(backend.write_placement([decision], "increment"))
        if outcome.written == (key,):
            return attempt, attempt - 1
        assert outcome.conflicts == (key,), outcome
    raise AssertionError(f"no increment after {ROUNDS} rounds")


@pytest.mark.parametrize("keyed", [False, True], ids=["from the cache", "read by key"])
def test_two_workers_with_their_own_caches_place_concurrently_without_lost_updates(
    plane: LocalPlane,
    dyn: DynamicClient,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    keyed: bool,
) -> None:
    """The writers compare with their caches (``KEYED_READS`` 0) or GET by key (the default)."""
    if not keyed:
        monkeypatch.setattr(backend_placement, "KEYED_READS", 0)
    counter = "keyed-counter" if keyed else "cached-counter"
    apply_all(dyn, [_workload(counter, 1)])
    requests = [Requests(), Requests()]
    workers = [_backend(plane, requests[0]), _backend(plane, requests[1])]
    try:
        for backend in workers:
            _follows(backend, "the counter cached", lambda r: counter in _workloads(r))
        results: list[list[tuple[int, int]]] = [[], []]
        failures: list[BaseException] = []

        def work(i: int) -> None:
            try:
                for _ in range(INCREMENTS):
                    results[i].append(_increment(workers[i], counter, "cache-a"))
            except BaseException as err:
                failures.append(err)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(240)
        assert not [t for t in threads if t.is_alive()], "a worker did not finish"
        assert not failures, failures
        conflicts = sum(c for r in results for _, c in r)
        print(f"\n[watch cache] {2 * INCREMENTS} increments, {conflicts} conflicts retried")
        # No lost update: the stored decision counts every increment exactly once.
        fw = fleetapi.resource(dyn, fleetapi.FLEET_WORKLOAD).get(name=counter, namespace=NS)
        assert fleetapi.stored_clusters(fw.to_dict()) == (("cache-a", 2 * INCREMENTS),)
        pd = fleetapi.resource(dyn, fleetapi.PLACEMENT_DECISION).get(name=counter, namespace=NS)
        rows = pd.to_dict()["status"]["decisions"]
        assert [(r["clusterName"], r["replicas"]) for r in rows] == [
            ("cache-a", str(2 * INCREMENTS))
        ]
        # Every retry read its cache once it had caught up: no read fell back to LISTing (the
        # placement writer's own reads are of FleetWorkloads and PlacementDecisions only).
        for r in requests:
            with r.lock:
                assert sum(1 for m, res, w in r.seen if res == "clusters" and not w) == 1
        # Every write from the cache probed both collections' versions (by key: none); whole
        # LISTs are the writes whose cache did not reach them within FRESH_TIMEOUT (reported:
        # they depend on the timing).
        rounds = sum(n for r in results for n, _ in r)
        for i, r in enumerate(requests):
            probes = r.probes()
            assert probes.get("fleetworkloads", 0) == probes.get("placementdecisions", 0)
            print(
                f"[watch cache] worker {i}: {probes} probes, "
                f"{r.lists(PLACEMENT) - 2} whole LISTs of {sorted(PLACEMENT)} after sync"
            )
        probed = sum(r.probes().get("fleetworkloads", 0) for r in requests)
        assert probed == (0 if keyed else rounds)
        # Both caches end at the stored decision.
        for backend in workers:
            _follows(
                backend,
                "the final count cached",
                lambda r: any(
                    w.name == counter
                    and (w.placement.current() or {}).get("cache-a") == 2 * INCREMENTS
                    for w in r.snapshot.workloads
                ),
            )
    finally:
        for backend in workers:
            backend.close()


def test_the_real_watch_reopens_from_its_version_after_the_server_ends_it(
    plane: LocalPlane, dyn: DynamicClient, namespace: str
) -> None:
    """Watches of 2 s: the server ends each, the cache opens the next from where it was.

    No LIST again (that is only for 410), and what changes meanwhile is still followed.
    """
    cache = FleetCache(dynamic(api_client(plane.kubeconfig)), NS, watch_timeout=2)
    cache.start()
    try:
        cache.cache.wait_synced(FOLLOW_TIMEOUT)
        wait_for(
            "three watches of Clusters",
            lambda: cache.cache.watches[capi.CLUSTER] >= 3,
            FOLLOW_TIMEOUT,
            interval=0.2,
        )
        patch(dyn, capi.CLUSTER, NS, "cache-a", {"metadata": {"labels": {"reopened": "yes"}}})

        def labelled() -> bool:
            found = cache.cache.get(capi.CLUSTER, f"{NS}/cache-a") or {}
            labels = (found.get("metadata") or {}).get("labels") or {}
            return bool(labels.get("reopened") == "yes")

        wait_for("the label followed", labelled, FOLLOW_TIMEOUT, interval=0.1)
        assert cache.cache.lists[capi.CLUSTER] == 1, "a watch that ends is no reason to LIST"
    finally:
        cache.stop()


def test_a_version_the_server_no_longer_has_is_410_and_the_cache_lists_again(
    plane: LocalPlane, namespace: str
) -> None:
    """The real server's answer to a watch from a resourceVersion it has forgotten: LIST again.

    The first LIST is made to report resourceVersion 1 (older than anything the server's watch
    cache holds), so its watch is answered 410 Gone; the cache LISTs again and follows from there.
    """
    dyn2 = dynamic(api_client(plane.kubeconfig))
    listing = kcache.kube_list(dyn2, NS)
    versions: list[str] = []

    def stale_first(kind: Any) -> tuple[list[dict[str, Any]], str]:
        items, version = listing(kind)
        versions.append(version)
        return items, "1" if len(versions) == 1 else version

    cache = WatchCache(
        (capi.CLUSTER,), stale_first, kcache.kube_watch(dyn2, NS), watch_timeout=2, backoff=0.1
    )
    cache.start()
    try:
        wait_for("listed again", lambda: cache.lists[capi.CLUSTER] >= 2, FOLLOW_TIMEOUT, 0.1)
        wait_for(
            "at the second list's version",
            lambda: cache.version(capi.CLUSTER) not in ("", "1"),
            FOLLOW_TIMEOUT,
            0.1,
        )
        assert f"{NS}/cache-a" in {kcache.key_of(o) for o in cache.snapshot()[capi.CLUSTER]}
    finally:
        cache.stop()


def test_the_workers_own_role_may_list_and_watch_what_it_caches(
    worker_identity: WorkerIdentity, namespace: str
) -> None:
    """deploy/rbac's ClusterRole is enough for the cache: reads come from it, none LISTs."""
    requests = Requests()
    api = worker_identity.client()
    observe_requests(api, requests.observe)
    backend = KubeFleetBackend(api, NS, cache=True)
    backend.start()
    try:
        for _ in range(3):
            assert "cache-a" in _listed(_read(backend))
        with requests.lock:
            assert sum(1 for m, r, w in requests.seen if r == "clusters" and not w) == 1
        wait_for("every watch allowed", lambda: requests.watched >= CACHED, FOLLOW_TIMEOUT, 0.1)
        assert backend._cache is not None and not backend._cache.cache.lagging()
    finally:
        backend.close()


def test_a_cli_backend_opens_no_watch(plane: LocalPlane, namespace: str) -> None:
    """The one-shot commands' backend (no cache) LISTs each read and never watches."""
    requests = Requests()
    api = api_client(plane.kubeconfig)
    observe_requests(api, requests.observe)
    backend = KubeFleetBackend(api, NS)
    _read(backend)
    _read(backend)
    assert requests.lists() == 2 * len(INVENTORY)
    assert not requests.watches()
