"""The watch-fed cache (``orchestrator.kube.cache``) over fake list and watch sources: no network.

The cache takes a ``list`` and a ``watch`` function; here they are scripted: ``Feed`` holds, per
kind, the lists to return and a queue of watch events (or errors, or the end of a stream) that a
test pushes. Every wait has a timeout (``wait_until``), nothing sleeps and asserts.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import pytest

from orchestrator.kube import cache as kcache
from orchestrator.kube import capi, fleetapi
from orchestrator.kube.backend import inventory as backend_inventory
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.backend.port import ClusterReplicasInfo, PlacementDecisionInfo
from orchestrator.kube.cache import CacheNotSynced, WatchCache, version_reached
from orchestrator.kube.inventory import read_fleet
from tests.orchestrator.kube.fake_dyn import NS, ApiError, FakeDyn
from tests.orchestrator.kube.watch_feed import (
    END,
    WAIT,
    Feed,
    event,
    fleet,
    fleet_cache,
    obj,
    wait_until,
)


def started(feed: Feed, kinds: tuple[Hashable, ...] = ("A",), **kw: Any) -> WatchCache:
    cache = WatchCache(
        kinds,
        feed.list,
        feed.watch,
        backoff=0.01,
        max_backoff=0.05,
        interrupt=feed.closed.set,
        **kw,
    )
    cache.start()
    cache.wait_synced(WAIT)
    return cache


@pytest.fixture
def feed() -> Iterator[Feed]:
    f = Feed()
    yield f
    f.closed.set()


def at(cache: WatchCache, kind: Hashable, version: str) -> Callable[[], bool]:
    return lambda: cache.version(kind) == version


def names(cache: WatchCache, kind: Hashable = "A") -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in cache.snapshot()[kind]}


def test_the_initial_list_is_the_store_and_its_version(feed: Feed) -> None:
    feed.lists["A"] = [([obj("a", "3"), obj("b", "5")], "7")]
    cache = started(feed)
    try:
        assert cache.synced
        assert names(cache) == {"a": "3", "b": "5"}
        assert cache.version("A") == "7"
        wait_until("watching", lambda: feed.watched_from == [("A", "7")])
        assert cache.lists == {"A": 1}
    finally:
        cache.stop()


# (events pushed, the store after them, the version after them)
EVENTS = [
    pytest.param([event("ADDED", obj("c", "8"))], {"a": "3", "c": "8"}, "8", id="added"),
    pytest.param([event("MODIFIED", obj("a", "9"))], {"a": "9"}, "9", id="modified"),
    pytest.param([event("DELETED", obj("a", "10"))], {}, "10", id="deleted"),
    pytest.param(
        [event("BOOKMARK", {"kind": "X", "metadata": {"resourceVersion": "42"}})],
        {"a": "3"},
        "42",
        id="bookmark moves only the version",
    ),
    pytest.param(
        [
            event("ADDED", obj("c", "8")),
            event("MODIFIED", obj("c", "11")),
            event("DELETED", obj("a", "12")),
            event("BOOKMARK", {"metadata": {"resourceVersion": "15"}}),
        ],
        {"c": "11"},
        "15",
        id="in order",
    ),
]


@pytest.mark.parametrize(("events", "store", "version"), EVENTS)
def test_events_change_the_store_and_move_the_version(
    feed: Feed, events: list[dict[str, Any]], store: dict[str, str], version: str
) -> None:
    feed.lists["A"] = [([obj("a", "3")], "7")]
    cache = started(feed)
    try:
        feed.push("A", *events)
        wait_until(f"at {version}", lambda: cache.version("A") == version)
        assert names(cache) == store
        # A watch opened again (the server's timeout) starts from the moved version.
        feed.push("A", END)
        wait_until("watching again", lambda: len(feed.watched_from) == 2)
        assert feed.watched_from == [("A", "7"), ("A", version)]
        assert cache.lists == {"A": 1}
    finally:
        cache.stop()


GONE_EVENT = event("ERROR", {"kind": "Status", "code": 410, "message": "too old"})


@pytest.mark.parametrize("gone", [GONE_EVENT, ApiError(410)], ids=["ERROR event 410", "410 answer"])
def test_410_gone_lists_again_and_replaces_the_store(feed: Feed, gone: Any) -> None:
    feed.lists["A"] = [([obj("a", "3"), obj("b", "4")], "7"), ([obj("b", "20")], "21")]
    cache = started(feed)
    try:
        feed.push("A", gone)
        wait_until("listed again", lambda: cache.version("A") == "21")
        assert names(cache) == {"b": "20"}  # a deleted while the watch was lost: gone too
        assert cache.lists == {"A": 2}
        wait_until("watching from the new list", lambda: ("A", "21") in feed.watched_from)
    finally:
        cache.stop()


@pytest.mark.parametrize(
    "error",
    [ApiError(500), ConnectionResetError("reset"), event("ERROR", {"code": 500})],
    ids=["500", "reset", "ERROR event 500"],
)
def test_an_error_reconnects_from_the_last_version_without_listing(feed: Feed, error: Any) -> None:
    feed.lists["A"] = [([obj("a", "3")], "7")]
    cache = started(feed)
    try:
        feed.push("A", event("MODIFIED", obj("a", "8")), error)
        wait_until("reconnected", lambda: len(feed.watched_from) == 2)
        assert feed.watched_from == [("A", "7"), ("A", "8")]
        assert cache.lists == {"A": 1}
        feed.push("A", event("ADDED", obj("b", "9")))
        wait_until("following again", lambda: cache.version("A") == "9")
        assert names(cache) == {"a": "8", "b": "9"}
    finally:
        cache.stop()


def test_a_failing_list_is_tried_again_with_backoff(feed: Feed) -> None:
    feed.lists["A"] = [ApiError(503), ApiError(503), ([obj("a", "3")], "4")]
    cache = WatchCache(
        ("A",), feed.list, feed.watch, backoff=0.01, max_backoff=0.02, interrupt=feed.closed.set
    )
    cache.start()
    try:
        cache.wait_synced(WAIT)
        assert names(cache) == {"a": "3"}
        assert cache.lists == {"A": 1}  # successful LISTs
    finally:
        cache.stop()


def test_waiting_for_sync_times_out_with_an_error(feed: Feed) -> None:
    feed.lists["A"] = [([obj("a", "3")], "4")]
    feed.lists["B"] = [ApiError(403)]  # never listed
    cache = WatchCache(
        ("A", "B"), feed.list, feed.watch, backoff=0.01, max_backoff=0.02, interrupt=feed.closed.set
    )
    cache.start()
    try:
        began = time.monotonic()
        with pytest.raises(CacheNotSynced, match=r"not synced within 0\.2s"):
            cache.wait_synced(0.2)
        assert time.monotonic() - began < 2
        assert not cache.synced
    finally:
        cache.stop()


def test_objects_are_found_by_name_in_every_namespace(feed: Feed) -> None:
    feed.lists["A"] = [([obj("a", "1"), obj("a", "2", ns="other"), obj("b", "3")], "3")]
    cache = started(feed)
    try:
        assert sorted(o["metadata"]["namespace"] for o in cache.named("A", "a")) == [NS, "other"]
        assert cache.named("A", "c") == []
        feed.push("A", event("DELETED", obj("a", "4", ns="other")))
        wait_until("deleted", at(cache, "A", "4"))
        assert [o["metadata"]["namespace"] for o in cache.named("A", "a")] == [NS]
    finally:
        cache.stop()


def test_waiting_for_a_version_returns_once_seen_and_times_out_otherwise(feed: Feed) -> None:
    feed.lists["A"] = [([obj("a", "3")], "7")]
    cache = started(feed)
    try:
        cache.wait_for({"A": "6"}, 0.01)  # already past
        # The reader that gives up is told where the store stands and when it last heard.
        with pytest.raises(CacheNotSynced, match=r"\(A at 7, last heard \d+\.\ds ago\)$"):
            cache.wait_for({"A": "9"}, 0.1)
        threading.Timer(0.05, feed.push, ("A", event("MODIFIED", obj("a", "9")))).start()
        cache.wait_for({"A": "9"}, WAIT)
        assert names(cache) == {"a": "9"}
    finally:
        cache.stop()


@pytest.mark.parametrize(
    ("have", "want", "reached"),
    [("7", "7", True), ("8", "7", True), ("10", "9", True), ("7", "8", False),
     ("", "1", False), ("x", "x", True), ("x", "y", False), ("1", "", True)],
)  # fmt: skip
def test_version_reached(have: str, want: str, reached: bool) -> None:
    assert version_reached(have, want) is reached


def bookmark(version: str) -> dict[str, Any]:
    return event("BOOKMARK", {"metadata": {"resourceVersion": version}})


# (what the short watch answers, what the cache's own watch delivers meanwhile, the store's
# version after the wait, whether the wait for "12" returns)
ASKS = [
    pytest.param([bookmark("12")], [], "12", True, id="no change: moved to the bookmark"),
    pytest.param([bookmark("15")], [], "15", True, id="a bookmark past the version"),
    pytest.param(
        [event("MODIFIED", obj("a", "9")), bookmark("12")],
        [event("MODIFIED", obj("a", "9"))],
        "12",
        True,
        id="a change: moved once the store has it",
    ),
    pytest.param(
        [event("MODIFIED", obj("a", "9")), bookmark("12")],
        [],
        "7",
        False,
        id="a change the store has not heard of: not moved",
    ),
    pytest.param([bookmark("10")], [], "7", False, id="a bookmark short of the version"),
    pytest.param([], [], "7", False, id="no bookmark"),
    pytest.param([GONE_EVENT], [], "7", False, id="410"),
    pytest.param([ApiError(500)], [], "7", False, id="an error"),
]


@pytest.mark.parametrize(("answer", "delivered", "version", "reached"), ASKS)
def test_asking_for_a_bookmark_moves_a_store_only_as_far_as_the_server_vouches(
    feed: Feed,
    answer: list[Any],
    delivered: list[dict[str, Any]],
    version: str,
    reached: bool,
) -> None:
    """A consistent read's version is etcd's revision: the store of a quiet kind must ask.

    The store is at 7 and a reader waits for 12 (another kind's writes moved the revision).
    """
    feed.lists["A"] = [([obj("a", "3")], "7")]
    feed.answer = lambda kind, start: answer if (kind, start) == ("A", "7") else []
    cache = started(feed)
    try:
        for item in delivered:
            threading.Timer(0.05, feed.push, ("A", item)).start()
        if reached:
            cache.wait_for({"A": "12"}, WAIT, ask=True)
        else:
            with pytest.raises(CacheNotSynced):
                cache.wait_for({"A": "12"}, 0.3, ask=True)
        assert cache.version("A") == version
        assert feed.asked_from == [("A", "7")] and cache.asks == {"A": 1}
        assert names(cache) == ({"a": "9"} if delivered else {"a": "3"})
        assert cache.lists == {"A": 1}
    finally:
        cache.stop()


def test_a_store_at_the_version_asks_nothing(feed: Feed) -> None:
    feed.lists["A"] = [([obj("a", "3")], "7")]
    cache = started(feed)
    try:
        cache.wait_for({"A": "7"}, 0.01, ask=True)
        assert feed.asked_from == []
    finally:
        cache.stop()


def test_managed_fields_and_last_applied_are_dropped_from_listed_and_watched_objects(
    feed: Feed,
) -> None:
    managed = [{"manager": "capi", "fieldsV1": {"f:spec": {}}}]
    listed = obj("a", "3", spec={"x": 1})
    listed["metadata"]["managedFields"] = managed
    feed.lists["A"] = [([listed], "7")]
    cache = started(feed)
    try:
        watched = obj("b", "8", spec={"y": 2})
        watched["metadata"]["managedFields"] = managed
        watched["metadata"]["annotations"] = {
            kcache.LAST_APPLIED: '{"a whole": "copy"}',
            "calibrator.dev/taints": "[]",
        }
        feed.push("A", event("ADDED", watched))
        wait_until("b stored", lambda: cache.version("A") == "8")
        stored = {o["metadata"]["name"]: o for o in cache.snapshot()["A"]}
        assert all("managedFields" not in o["metadata"] for o in stored.values())
        assert stored["a"]["spec"] == {"x": 1} and stored["b"]["spec"] == {"y": 2}
        assert stored["a"]["metadata"]["resourceVersion"] == "3"
        assert stored["b"]["metadata"]["annotations"] == {"calibrator.dev/taints": "[]"}
        assert kcache.LAST_APPLIED in watched["metadata"]["annotations"], "the event is not changed"
    finally:
        cache.stop()


def test_concurrent_readers_get_consistent_snapshots(feed: Feed) -> None:
    """Objects are added in order, under one lock: every snapshot is a prefix of that order.

    Kind B mirrors kind A event by event (B's i-th object comes after A's): a snapshot taken
    under the one lock never holds B's object i without A's.
    """
    count = 200
    feed.lists["A"] = [([], "1")]
    feed.lists["B"] = [([], "1")]
    cache = started(feed, ("A", "B"))
    failures: list[str] = []
    stop = threading.Event()

    def read() -> None:
        seen = 0
        while not stop.is_set():
            snap = cache.snapshot()
            a = sorted(int(o["metadata"]["name"]) for o in snap["A"])
            b = sorted(int(o["metadata"]["name"]) for o in snap["B"])
            if a != list(range(len(a))) or len(a) < seen:
                failures.append(f"A not a growing prefix: {len(a)} after {seen}")
            if not set(b) <= set(a):
                failures.append(f"B ahead of A: {sorted(set(b) - set(a))[:3]}")
            seen = len(a)

    readers = [threading.Thread(target=read) for _ in range(4)]
    for r in readers:
        r.start()
    try:
        for i in range(count):
            feed.push("A", event("ADDED", obj(str(i), str(i + 2))))
            wait_until(f"A {i}", at(cache, "A", str(i + 2)))
            feed.push("B", event("ADDED", obj(str(i), str(i + 2))))
        wait_until("B done", lambda: cache.version("B") == str(count + 1))
    finally:
        stop.set()
        for r in readers:
            r.join(WAIT)
        cache.stop()
    assert not failures, failures[:5]
    assert len(cache.snapshot()["A"]) == count


def test_subscribers_hear_matching_changes_and_every_list(feed: Feed) -> None:
    feed.lists["A"] = [([obj("a", "3"), obj("b", "4")], "7"), ([obj("a", "20")], "21")]
    cache = started(feed)
    heard: list[str] = []
    lock = threading.Lock()

    def wake(what: str) -> Callable[[], None]:
        def woken() -> None:
            with lock:
                heard.append(what)

        return woken

    def seen() -> list[str]:
        with lock:
            return list(heard)

    try:
        unsubscribe = cache.subscribe(lambda kind, o: o["metadata"]["name"] == "a", wake("a"))
        # Events arrive in order: once a's change is heard, b's was seen and matched nothing.
        feed.push("A", event("MODIFIED", obj("b", "8")), event("MODIFIED", obj("a", "9")))
        wait_until("a's change heard", lambda: seen() == ["a"])
        feed.push("A", event("DELETED", obj("a", "10")))
        wait_until("a's deletion heard", lambda: seen() == ["a", "a"])
        # A LIST (here after 410 Gone) wakes every subscriber: what changed meanwhile is unknown.
        cache.subscribe(lambda kind, o: False, wake("none"))
        feed.push("A", GONE_EVENT)
        wait_until("the LIST heard", lambda: sorted(seen()[2:]) == ["a", "none"])
        unsubscribe()
        feed.push("A", event("MODIFIED", obj("a", "22")), event("MODIFIED", obj("b", "23")))
        wait_until("at 23", at(cache, "A", "23"))
        assert sorted(seen()[2:]) == ["a", "none"]
    finally:
        cache.stop()


def test_racing_starts_start_one_thread_per_kind(feed: Feed) -> None:
    feed.lists["A"] = [([], "1")]
    cache = WatchCache(("A",), feed.list, feed.watch, interrupt=feed.closed.set, name="race")
    starters = [threading.Thread(target=cache.start) for _ in range(8)]
    for s in starters:
        s.start()
    for s in starters:
        s.join(WAIT)
    try:
        assert len([t for t in threading.enumerate() if t.name.startswith("race-")]) == 1
    finally:
        cache.stop()


def test_stop_ends_the_threads(feed: Feed) -> None:
    feed.lists["A"] = [([], "1")]
    cache = started(feed)
    cache.stop(WAIT)
    assert cache.stopping
    with pytest.raises(CacheNotSynced):
        cache.wait_for({"A": "99"}, WAIT)  # a stopped cache answers at once
    assert not [t for t in threading.enumerate() if t.name.startswith("watch-cache-")]


# --------------------------------------------------------------- the fleet cache and the backend


def test_the_cache_yields_what_a_list_yields_one_switch() -> None:
    dyn = fleet(5)
    listed = read_fleet(dyn, NS)
    cache, source = fleet_cache(dyn)
    cache.start()
    try:
        lists = dict(dyn.lists)
        cached = read_fleet(dyn, NS, source=cache.objects)
        assert cached == listed
        for _ in range(3):
            read_fleet(dyn, NS, source=cache.objects)
        assert dyn.lists == lists, "reads from the cache LIST nothing"
    finally:
        cache.stop()
        source.closed.set()


def _fw(dyn: FakeDyn) -> dict[str, Any]:
    return dyn.objects["FleetWorkload"][(NS, "w0")]


def test_a_stale_placement_conflicts_and_the_retry_reads_fresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A decision from a stale cache fails its compare-and-swap; the next read waits for fresher.

    The FleetWorkload changes on the "server" (another worker's placement) and the cache has
    not heard yet: the placement computed from it is a conflict (nothing written) and the next
    inventory read waits until the cache reaches the version that refused it - or, when the
    watch stays silent, LISTs.
    """
    monkeypatch.setattr(backend_inventory, "FRESH_TIMEOUT", 0.3)
    dyn = fleet(2)
    cache, source = fleet_cache(dyn)
    backend = KubeFleetBackend(None, NS, dyn=dyn, cache=cache)
    try:
        key = f"{NS}/w0"
        stale = asyncio.run(backend.inventory()).workload_versions[key]
        lists = dict(dyn.lists)
        dyn.bump(_fw(dyn))  # another writer, unheard by the cache
        fresh = _fw(dyn)["metadata"]["resourceVersion"]
        decision = PlacementDecisionInfo(
            key, (ClusterReplicasInfo("c001", 1),), reason="r", resource_version=stale
        )
        outcome = asyncio.run(backend.write_placement([decision], "r"))
        assert outcome.written == () and outcome.conflicts == (key,)
        assert "status" not in _fw(dyn)  # nothing was written
        # The event arrives while the retry's read waits for it: the read is from the cache.
        threading.Timer(
            0.05, source.push, (fleetapi.FLEET_WORKLOAD, {"type": "MODIFIED", "object": _fw(dyn)})
        ).start()
        lists = dict(dyn.lists)
        assert asyncio.run(backend.inventory()).workload_versions[key] == fresh
        assert dyn.lists == lists
        # Silent watch: the read gives up waiting and LISTs (fresh, never stale).
        dyn.bump(_fw(dyn))
        newer = _fw(dyn)["metadata"]["resourceVersion"]
        again = PlacementDecisionInfo(
            key, (ClusterReplicasInfo("c001", 1),), reason="r", resource_version=fresh
        )
        assert asyncio.run(backend.write_placement([again], "r")).conflicts == (key,)
        lists = dict(dyn.lists)
        assert asyncio.run(backend.inventory()).workload_versions[key] == newer
        assert dyn.lists["FleetWorkload"] == lists["FleetWorkload"] + 1
    finally:
        backend.close()
        source.closed.set()


def test_a_watch_that_keeps_failing_makes_readers_list_until_it_is_back() -> None:
    dyn = fleet(1)
    cache, source = fleet_cache(dyn)
    cache.start()
    try:
        cache.objects(sync_timeout=WAIT)
        for _ in range(kcache.LAG_AFTER):
            source.push(capi.CLUSTER, ApiError(403))  # e.g. a ClusterRole without watch
        wait_until("lagging", lambda: cache.cache.lagging() == (capi.CLUSTER,))
        began = time.monotonic()
        with pytest.raises(CacheNotSynced, match="the watch of Cluster keeps failing"):
            cache.objects(sync_timeout=WAIT)
        assert time.monotonic() - began < 1, "no wait: the caller LISTs at once"
        source.push(
            capi.CLUSTER, {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "99"}}}
        )
        wait_until("back", lambda: not cache.cache.lagging())
        cache.objects(sync_timeout=WAIT)
    finally:
        cache.stop()


def test_a_kind_a_reader_does_not_read_never_holds_it_up() -> None:
    """A failing PlacementDecision watch (a ClusterRole without it) sends only the writer to LIST.

    The inventory reads five kinds and the placement writer two: each waits for, and is told
    about, only its own.
    """
    dyn = fleet(1)
    cache, source = fleet_cache(dyn)
    cache.start()
    try:
        cache.objects(sync_timeout=WAIT)
        for _ in range(kcache.LAG_AFTER):
            source.push(fleetapi.PLACEMENT_DECISION, ApiError(403))
        wait_until("lagging", lambda: cache.cache.lagging() == (fleetapi.PLACEMENT_DECISION,))
        assert len(cache.objects(sync_timeout=WAIT)[0].fleet_workloads) == 3
        now = {k: cache.cache.version(k) for k in kcache.PLACEMENT_KINDS}
        with pytest.raises(CacheNotSynced, match="the watch of PlacementDecision keeps failing"):
            cache.current(now, sync_timeout=WAIT)
        assert [len(v) for v in cache.current({fleetapi.FLEET_WORKLOAD: "1"}).values()] == [3]
    finally:
        cache.stop()
        source.closed.set()


def test_the_writer_reads_only_the_objects_it_asks_for() -> None:
    """``current(keys=...)``: each asked object as new as the versions, none of the others."""
    dyn = fleet(1)
    cache, source = fleet_cache(dyn)
    cache.start()
    try:
        cache.objects(sync_timeout=WAIT)
        now = {k: cache.cache.version(k) for k in kcache.PLACEMENT_KINDS}
        read = cache.current(now, keys=[f"{NS}/w2", f"{NS}/w0", f"{NS}/gone"], sync_timeout=WAIT)
        names = [o["metadata"]["name"] for o in read[fleetapi.FLEET_WORKLOAD]]
        assert names == ["w2", "w0"]  # in the order asked; one that is not stored is left out
        assert read[fleetapi.PLACEMENT_DECISION] == []
    finally:
        cache.stop()
        source.closed.set()


def test_the_backend_reads_its_own_version_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A taint (a Cluster patch) is seen by the next inventory read: it waits for the watch."""
    monkeypatch.setattr(backend_inventory, "FRESH_TIMEOUT", 5.0)
    dyn = fleet(1)
    cache, source = fleet_cache(dyn)
    backend = KubeFleetBackend(None, NS, dyn=dyn, cache=cache)
    try:
        asyncio.run(backend.inventory())
        cluster = dyn.objects["Cluster"][(NS, "c000")]
        backend._patch(capi.CLUSTER, NS, "c000", {"metadata": {"labels": {"tainted": "yes"}}})
        threading.Timer(
            0.05, source.push, (capi.CLUSTER, {"type": "MODIFIED", "object": dict(cluster)})
        ).start()
        lists = dict(dyn.lists)
        read = asyncio.run(backend.inventory())
        assert read.snapshot.cluster("c000").labels.get("tainted") == "yes"
        assert dyn.lists == lists
    finally:
        backend.close()
        source.closed.set()


def test_a_backend_without_a_cache_lists_each_read() -> None:
    dyn = fleet(1)
    backend = KubeFleetBackend(None, NS, dyn=dyn)
    asyncio.run(backend.inventory())
    asyncio.run(backend.inventory())
    assert dyn.lists["Cluster"] == 2
    backend.close()  # nothing to stop
