"""A watch-fed cache of the fleet's objects: LIST once, then WATCH (issue 29).

What controllers built on client-go informers do, for the five kinds the inventory reads
(ClusterClasses, Clusters, KubeadmControlPlanes, MachineDeployments, FleetWorkloads) and the
PlacementDecisions the placement writer compares its decisions with, so that a worker's
re-placements, compatibility checks and placement writes read the fleet from memory instead of
LISTing it whole on every call (docs/decisions.md, "Reads from a watch-fed cache (issue 29)").

Per kind, one daemon thread:

* **LIST** once, paginated (``client.list_snapshot``: ``limit``/``continue``), and keep the
  list's ``resourceVersion``;
* **WATCH** from it with ``allowWatchBookmarks=true`` and a server-side ``timeoutSeconds``
  (``kubernetes.watch.Watch`` streaming the dynamic client's raw ``get``, as the client's own
  ``DynamicClient.watch`` does, without wrapping every object in a ``ResourceInstance``);
  ADDED and MODIFIED store the object under ``namespace/name``, DELETED removes it, each moves
  the kind's resourceVersion to the object's; a BOOKMARK only moves the resourceVersion;
* a watch that ends (its timeout) is opened again from the last resourceVersion; **410 Gone**
  (the version was compacted away: an ERROR event or a 410 answer) means LIST again; any other
  error reconnects from the last resourceVersion after a backoff (doubling up to a cap, reset by
  a watch that delivered events), and a LIST that fails is tried again the same way.

A kind whose watch keeps failing (``LAG_AFTER`` attempts in a row, e.g. a watch the API server
refuses) is **lagging** until one succeeds: ``FleetCache`` readers then LIST instead of
serving a store that may have stopped moving. The cache is **synced** once every kind has been
listed; ``wait_synced`` and ``wait_for`` wait
with a timeout (``CacheNotSynced`` past it), never for ever. Readers take a consistent copy under
one lock: ``snapshot`` returns, for every kind at one instant, a fresh list of the stored objects
(objects are replaced whole by events and never changed in place, so the lists may share them;
readers must not change them either).

**Bounded memory**: only what the readers need is kept. ``slim`` drops ``metadata.managedFields``
(per field manager a copy of the field set it owns: often the largest part of a CAPI object)
and the ``kubectl.kubernetes.io/last-applied-configuration`` annotation (a whole copy of the
object as last ``kubectl apply``-ed). That is safe because nothing that reads these objects
looks at either: ``orchestrator.kube.fleetmap``, ``capi`` and ``fleetapi`` read metadata's name,
namespace, uid, labels, generation, resourceVersion, deletionTimestamp and (a
PlacementDecision's) ownerReferences, and of the annotations only named keys of their own
(taints, the observed-usage record, CAPI's defer and hold); the managedFields and
last-applied readers (``apiusage``, ``domain.storedscan``) read workload clusters' objects,
never these. Everything else (spec, status) is kept: the rules in
``fleetmap`` read both.

**Asking for a bookmark** (``wait_for(ask=True)``, the placement writer's consistent read): a
reader that waits for the resourceVersion a LIST of the kind was just answered at waits for
etcd's revision, which every kind's writes move; a store whose own kind did not change reaches
it only by a BOOKMARK, which kube-apiserver sends a watcher about once a minute and 2 s before
the watch's timeout. So the store asks: a watch of ``ASK_TIMEOUT`` (3 s) from its version, whose
bookmark comes after about a second, carrying the API server's watch-cache revision (which the
consistent LIST has just brought up to etcd's, v1.34 and later). The events before it are
every change of the kind since the store's version; once the store has had them from its own
watch, it is complete up to the bookmark and its version moves there. An answer that is short,
fails or names changes the store never gets moves nothing: the reader's wait runs out and it
LISTs.

**Wake-ups** (``subscribe``): a reader that would otherwise poll, the rollout waits, is told
when an object it cares about changed (a ``match`` on each event's object, a ``wake`` called on
the watch's thread, and every subscriber after a LIST); it then reads fresh itself, so a
wake-up is a hint, never data.

The sources are injected: the cache takes a ``list`` function (kind -> objects and the list's
resourceVersion) and a ``watch`` function (kind, resourceVersion, timeout -> events), so it is
tested with fake streams and no network; ``kube_list``/``kube_watch`` are the real ones and
``FleetCache`` puts them together for one namespace or all.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from kubernetes import watch as kube_watch_module

from orchestrator.kube import capi, fleetapi
from orchestrator.kube.client import (
    DEFAULT_REQUESTS,
    GONE,
    PAGE_SIZE,
    list_snapshot,
    object_meta,
    status_code,
)
from orchestrator.kube.fleetmap import FleetObjects

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Event = Mapping[str, Any]
"""One watch event: ``{"type": "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR", "object": {...}}``."""
ListFn = Callable[[Hashable], tuple[list[Obj], str]]
"""kind -> (every object, the list's resourceVersion)."""
WatchFn = Callable[[Hashable, str, int], Iterable[Event]]
"""(kind, resourceVersion to start from, server-side timeout in seconds) -> events."""
Match = Callable[[Hashable, Obj], bool]
"""(kind, object as stored) -> whether a subscriber wants to hear of this change (``subscribe``)."""

WATCH_TIMEOUT = 300  # seconds a watch stays open before it is opened again (client-go: 5-10 min)
# Failed attempts in a row after which a kind counts as lagging: its store may be behind by more
# than a reconnect (0.5 + 1 + 2 s of backoff), so readers LIST instead (``FleetCache.objects``).
LAG_AFTER = 3
BACKOFF = 0.5
MAX_BACKOFF = 30.0
# Server-side timeout of a watch opened only to ask for a bookmark (``wait_for(ask=True)``):
# kube-apiserver sends a watcher a BOOKMARK 2 s before its timeout (else about once a minute),
# so a 3-s watch brings one after about a second.
ASK_TIMEOUT = 3


class CacheNotSynced(TimeoutError):
    """The cache did not reach what a reader waited for within its timeout."""


class Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): LIST again."""


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def slim(obj: Obj) -> Obj:
    """The object as stored: without managedFields and kubectl's last-applied copy (see above)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    notes = meta.get("annotations")
    copied = notes if isinstance(notes, dict) and LAST_APPLIED in notes else None
    if "managedFields" not in meta and copied is None:
        return obj
    meta = {k: v for k, v in meta.items() if k != "managedFields"}
    if copied is not None:
        meta["annotations"] = {k: v for k, v in copied.items() if k != LAST_APPLIED}
    return dict(obj, metadata=meta)


def key_of(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` (``name`` for a cluster-scoped object)."""
    meta = object_meta(obj)
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def version_reached(have: str, want: str) -> bool:
    """Whether a store at resourceVersion ``have`` has seen everything up to ``want``.

    resourceVersions of one resource type are etcd revisions, compared as integers (what
    Kubernetes documents for them since v1.35, and what its own caches do); anything that is
    not a number counts as reached only when it is equal.
    """
    if not want:
        return True
    if have.isdigit() and want.isdigit():
        return int(have) >= int(want)
    return have == want


class _Store:
    def __init__(self) -> None:
        self.objects: dict[str, Obj] = {}
        self.version = ""
        self.synced = False
        self.failing = 0  # attempts (watch or LIST) failed in a row since the last success
        self.heard = 0.0  # time.monotonic() of the last event or LIST (0: none yet)


class WatchCache:
    """Objects of several kinds, kept current by a LIST then a WATCH per kind (module docstring).

    ``list_fn`` and ``watch_fn`` are the sources (injected); ``keep`` reduces each object before it is
    stored. ``start`` runs one daemon thread per kind; ``stop`` ends them.
    """

    def __init__(
        self,
        kinds: Sequence[Hashable],
        list_fn: ListFn,
        watch_fn: WatchFn,
        *,
        watch_timeout: int = WATCH_TIMEOUT,
        backoff: float = BACKOFF,
        max_backoff: float = MAX_BACKOFF,
        keep: Callable[[Obj], Obj] = slim,
        name: str = "watch-cache",
        interrupt: Callable[[], None] | None = None,
    ) -> None:
        self._kinds = tuple(kinds)
        self._list = list_fn
        self._watch = watch_fn
        self._watch_timeout = watch_timeout
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._keep = keep
        self._name = name
        self._interrupt = interrupt
        self._stores = {kind: _Store() for kind in self._kinds}
        self._changed = threading.Condition(threading.Lock())
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._subscribers: dict[int, tuple[Match, Callable[[], None]]] = {}
        self._next_subscriber = 0
        self.lists = dict.fromkeys(self._kinds, 0)  # LISTs made per kind (tests and metrics)
        self.watches = dict.fromkeys(self._kinds, 0)  # watches opened per kind
        self.asks = dict.fromkeys(self._kinds, 0)  # short watches opened to ask for a bookmark

    # ------------------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start one daemon thread per kind (once, whoever calls first: readers may race)."""
        with self._changed:
            if self._threads:
                return
            for kind in self._kinds:
                thread = threading.Thread(
                    target=self._run, args=(kind,), name=f"{self._name}-{kind}", daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Tell the threads to stop and wait up to ``timeout`` s for them (daemons: never for ever).

        A thread blocked in a watch's read ends when the stream yields or ends; ``interrupt``
        (given to the constructor) closes the open watches so that happens at once (the real
        source's: ``FleetCache``).
        """
        self._stopping.set()
        if self._interrupt is not None:
            self._interrupt()
        with self._changed:
            self._changed.notify_all()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    @property
    def stopping(self) -> bool:
        """Whether ``stop`` was called."""
        return self._stopping.is_set()

    # -------------------------------------------------------------------------------- readers

    @property
    def synced(self) -> bool:
        """Whether every kind has been listed at least once."""
        with self._changed:
            return all(s.synced for s in self._stores.values())

    def wait_synced(self, timeout: float, kinds: Iterable[Hashable] | None = None) -> None:
        """Return once every kind (of ``kinds``, if given) has been listed.

        ``CacheNotSynced`` after ``timeout`` s. A reader names the kinds it reads, so a kind it
        does not read (the placement writer's PlacementDecisions, for the inventory) never
        holds it up.
        """
        wanted = self._kinds if kinds is None else tuple(kinds)
        self._wait(lambda: all(self._stores[k].synced for k in wanted), timeout, "synced")

    def wait_for(
        self, versions: Mapping[Hashable, str], timeout: float, *, ask: bool = False
    ) -> None:
        """Return once each kind's store has seen its resourceVersion in ``versions``.

        Read-your-writes: after a write that returned resourceVersion R, a reader that waits for
        R sees that write (and everything before it of that kind): its event comes. A consistent
        read: given the resourceVersion a LIST of the kind was answered at
        (``client.collection_version``), a store that reaches it holds everything that LIST
        would have returned. That version is etcd's revision, which every kind's writes move:
        a store whose kind did not change gets there only by a BOOKMARK, so with ``ask`` the
        cache asks for one (``_ask``) for each kind that is behind. ``CacheNotSynced`` after
        ``timeout`` s.
        """

        def reached() -> bool:
            return all(self._at(k, v) for k, v in versions.items())

        if ask:
            deadline = time.monotonic() + timeout
            with self._changed:
                behind = {
                    k: v
                    for k, v in versions.items()
                    if self._stores[k].synced and not version_reached(self._stores[k].version, v)
                }
            for kind, version in behind.items():
                threading.Thread(
                    target=self._ask,
                    args=(kind, version, deadline),
                    name=f"{self._name}-ask-{kind}",
                    daemon=True,
                ).start()
        self._wait(reached, timeout, f"at {dict(versions)}", lambda: self._behind(versions))

    def _ask(self, kind: Hashable, want: str, deadline: float) -> None:
        """Ask the server whether the store of ``kind`` is complete up to ``want``; if so, move it.

        The client-side counterpart of the API server's progress request to etcd: a short watch
        of the kind from the store's version (``ASK_TIMEOUT``). Its events are every change of
        the kind since that version, in order, and a BOOKMARK at version B says no other change
        up to B exists. Once the store (fed by its own watch, which delivers the same events)
        has the last of those events, it holds the kind as it was at B, so its version may move
        to B. A bookmark short of ``want``, an error or a stream that ends first moves nothing:
        the reader's wait runs out and it LISTs.
        """
        with self._changed:
            store = self._stores[kind]
            start = store.version
        last = start
        self.asks[kind] += 1
        try:
            for event in self._watch(kind, start, ASK_TIMEOUT):
                obj = event.get("object")
                kind_of_event = event.get("type")
                if not isinstance(obj, dict) or kind_of_event == "ERROR":
                    return
                version = str(object_meta(obj).get("resourceVersion") or "")
                if kind_of_event != "BOOKMARK":
                    last = version or last
                elif version_reached(version, want):
                    self._move(kind, last, version, deadline)
                    return
                if self._stopping.is_set() or time.monotonic() > deadline:
                    return
        except Exception as err:
            log.info("%s: asking for a bookmark of %s: %s", self._name, kind, err)

    def _move(self, kind: Hashable, last: str, version: str, deadline: float) -> None:
        """Once the store of ``kind`` has reached ``last``, move it to ``version`` (``_ask``)."""
        with self._changed:
            store = self._stores[kind]
            while not version_reached(store.version, last):
                left = deadline - time.monotonic()
                if left <= 0 or self._stopping.is_set():
                    return
                self._changed.wait(left)
            if not version_reached(store.version, version):
                store.version = version
            self._changed.notify_all()

    def _wait(
        self,
        done: Callable[[], bool],
        timeout: float,
        what: str,
        behind: Callable[[], str] | None = None,
    ) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0 or self._stopping.is_set():
                    where = f" ({behind()})" if behind is not None else ""
                    raise CacheNotSynced(f"{self._name}: not {what} within {timeout:g}s{where}")
                self._changed.wait(left)

    def _at(self, kind: Hashable, want: str) -> bool:
        """Whether the store of ``kind`` is synced and has seen ``want`` (the lock held)."""
        store = self._stores[kind]
        return store.synced and version_reached(store.version, want)

    def _behind(self, versions: Mapping[Hashable, str]) -> str:
        """Where each store short of ``versions`` stands, for the reader that gives up (locked).

        Its version and how long ago it last heard from the server tell a watch that delivers
        late (events still coming, older than the version waited for) from one that went
        silent.
        """
        now = time.monotonic()
        parts = []
        for kind, want in versions.items():
            if self._at(kind, want):
                continue
            store = self._stores[kind]
            name = kind[1] if isinstance(kind, tuple) else str(kind)
            heard = f"last heard {now - store.heard:.1f}s ago" if store.heard else "never heard"
            parts.append(f"{name} at {store.version or '-'}, {heard}")
        return "; ".join(parts)

    def lagging(self, after: int = LAG_AFTER) -> tuple[Hashable, ...]:
        """Kinds whose watch (or LIST) has failed ``after`` times in a row, not yet back.

        A store keeps serving what it had while its watch reconnects (what informers do); one
        that keeps failing (a watch the API server refuses: a ClusterRole without ``watch``)
        would serve stale data for ever, so its readers are told.
        """
        with self._changed:
            return tuple(k for k, s in self._stores.items() if s.failing >= after)

    def snapshot(self, kinds: Iterable[Hashable] | None = None) -> dict[Hashable, list[Obj]]:
        """Every kind's (or ``kinds``') objects at one instant.

        New lists; the objects are shared, read-only.
        """
        wanted = self._kinds if kinds is None else tuple(kinds)
        with self._changed:
            return {kind: list(self._stores[kind].objects.values()) for kind in wanted}

    def version(self, kind: Hashable) -> str:
        """The resourceVersion the store of ``kind`` is at ("" before its first LIST)."""
        with self._changed:
            return self._stores[kind].version

    def get(self, kind: Hashable, key: str) -> Obj | None:
        """One stored object by ``namespace/name``."""
        with self._changed:
            return self._stores[kind].objects.get(key)

    def named(self, kind: Hashable, name: str) -> list[Obj]:
        """The stored objects of ``kind`` called ``name``, in every namespace (shared, read-only)."""
        with self._changed:
            return [
                o for o in self._stores[kind].objects.values() if object_meta(o).get("name") == name
            ]

    def subscribe(self, match: Match, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` after each change of an object ``match`` accepts; returns the unsubscribe.

        For a reader that would otherwise poll (the rollout waits): it is woken when what it
        waits for may have happened, and then reads fresh itself, so a wake-up carries no data
        and a spurious one costs a read. ``match`` sees each ADDED, MODIFIED and DELETED object
        (as stored), ``wake`` is called on the watch's thread, outside the cache's lock, and must
        return at once; both must not raise. After a LIST (the first, or after a 410) every
        subscriber is woken: what changed while the watch was down is not known.
        """
        with self._changed:
            token = self._next_subscriber
            self._next_subscriber += 1
            self._subscribers[token] = (match, wake)

        def unsubscribe() -> None:
            with self._changed:
                self._subscribers.pop(token, None)

        return unsubscribe

    def _wake(self, kind: Hashable, obj: Obj | None) -> None:
        """Wake the subscribers whose ``match`` accepts ``obj`` (every one when it is None)."""
        with self._changed:
            subscribers = list(self._subscribers.values())
        for match, wake in subscribers:
            if obj is None or match(kind, obj):
                wake()

    # ------------------------------------------------------------------------------- the loop

    def _run(self, kind: Hashable) -> None:
        version, listed = "", False
        failures = 0
        while not self._stopping.is_set():
            try:
                if not listed:
                    version = self._relist(kind)
                    listed = True
                events = 0
                opened = time.monotonic()
                self.watches[kind] += 1
                for event in self._watch(kind, version, self._watch_timeout):
                    if self._stopping.is_set():
                        return
                    version = self._apply(kind, event) or version
                    events += 1
                self._succeeded(kind)  # the stream ended as the server ends watches
                if events:
                    failures = 0
                elif time.monotonic() - opened < 1.0:  # ended at once, empty: do not spin
                    self._stopping.wait(self._backoff)
            except Expired:
                log.info("%s: %s watch expired (410): listing again", self._name, kind)
                listed = False
                failures += 1
                if failures > 1:  # a second 410 in a row: do not spin on the API server
                    self._pause(failures)
            except Exception as err:
                if status_code(err) == GONE:
                    listed = False
                failures += 1
                with self._changed:
                    self._stores[kind].failing += 1
                    self._changed.notify_all()
                log.warning(
                    "%s: %s: %s; again in %.1fs", self._name, kind, err, self._delay(failures)
                )
                self._pause(failures)

    def _succeeded(self, kind: Hashable) -> None:
        with self._changed:
            self._stores[kind].failing = 0

    def _delay(self, failures: int) -> float:
        return float(min(self._backoff * 2 ** max(0, failures - 1), self._max_backoff))

    def _pause(self, failures: int) -> None:
        self._stopping.wait(self._delay(failures))

    def _relist(self, kind: Hashable) -> str:
        items, version = self._list(kind)
        self.lists[kind] += 1
        objects = {key_of(o): self._keep(o) for o in items}
        with self._changed:
            store = self._stores[kind]
            store.objects = objects
            store.version = version
            store.synced = True
            store.failing = 0
            store.heard = time.monotonic()
            self._changed.notify_all()
        self._wake(kind, None)
        return version

    def _apply(self, kind: Hashable, event: Event) -> str:
        """Apply one event to the store; the resourceVersion it moves to ("" if none)."""
        kind_of_event = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            return ""
        if kind_of_event == "ERROR":
            if obj.get("code") == GONE:
                raise Expired(str(obj.get("message") or "Gone"))
            raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")
        version = str(object_meta(obj).get("resourceVersion") or "")
        changed: Obj | None = None
        with self._changed:
            store = self._stores[kind]
            if kind_of_event in ("ADDED", "MODIFIED"):
                changed = store.objects[key_of(obj)] = self._keep(obj)
            elif kind_of_event == "DELETED":
                changed = store.objects.pop(key_of(obj), None) or self._keep(obj)
            elif kind_of_event != "BOOKMARK":
                return ""
            store.failing = 0
            store.heard = time.monotonic()
            if version:
                store.version = version
            self._changed.notify_all()
        if changed is not None and self._subscribers:
            self._wake(kind, changed)
        return version


# ------------------------------------------------------------------------------- the real source

FLEET_KINDS: tuple[tuple[str, str], ...] = (
    capi.CLUSTER_CLASS,
    capi.CLUSTER,
    capi.KUBEADM_CONTROL_PLANE,
    capi.MACHINE_DEPLOYMENT,
    fleetapi.FLEET_WORKLOAD,
)
"""The kinds the inventory reads (``FleetCache.objects``)."""
PLACEMENT_KINDS: tuple[tuple[str, str], ...] = (
    fleetapi.FLEET_WORKLOAD,
    fleetapi.PLACEMENT_DECISION,
)
"""The kinds the placement writer compares its decisions with (``FleetCache.current``)."""
CACHED_KINDS: tuple[tuple[str, str], ...] = (*FLEET_KINDS, fleetapi.PLACEMENT_DECISION)
"""Every kind ``FleetCache`` keeps: the worker's ClusterRole allows ``watch`` on exactly these."""
SYNC_TIMEOUT = 60.0  # seconds a reader waits for the first LISTs before it LISTs itself
# A watch's read timeout: longer than its server-side timeoutSeconds, so a quiet watch is
# closed by the server (and reopened), never cut by the client.
WATCH_READ_SLACK = 30


class _Watches:
    """The watches open now, so ``stop`` can close them (their threads then end at once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[Any] = set()

    def add(self, w: Any) -> None:
        with self._lock:
            self._open.add(w)

    def discard(self, w: Any) -> None:
        with self._lock:
            self._open.discard(w)

    def stop_all(self) -> None:
        with self._lock:
            for w in self._open:
                w.stop()


def _resource(dyn: Any, kind: Hashable) -> Any:
    assert isinstance(kind, tuple)
    if kind in PLACEMENT_KINDS:
        return fleetapi.resource(dyn, kind)  # ApiMissingError naming the remedy
    return dyn.resources.get(api_version=kind[0], kind=kind[1])


def kube_list(dyn: Any, namespace: str | None, page_size: int = PAGE_SIZE) -> ListFn:
    """The ``list`` source of the fleet's kinds: one paginated LIST and its resourceVersion."""

    def listed(kind: Hashable) -> tuple[list[Obj], str]:
        return list_snapshot(_resource(dyn, kind), namespace=namespace, page_size=page_size)

    return listed


def kube_watch(
    dyn: Any, namespace: str | None, watches: _Watches | None = None, connect: float | None = None
) -> WatchFn:
    """The ``watch`` source: ``kubernetes.watch.Watch`` over the raw ``get`` (plain dicts)."""
    connect_timeout = connect if connect is not None else DEFAULT_REQUESTS.timeout

    def watched(kind: Hashable, version: str, timeout: int) -> Iterator[Event]:
        resource = _resource(dyn, kind)
        w = kube_watch_module.Watch()  # type: ignore[no-untyped-call]
        if watches is not None:
            watches.add(w)
        kwargs: dict[str, Any] = {
            "serialize": False,
            "resource_version": version,
            "allow_watch_bookmarks": True,
            "timeout_seconds": timeout,
            "_request_timeout": (connect_timeout, timeout + WATCH_READ_SLACK),
        }
        if namespace:
            kwargs["namespace"] = namespace
        try:
            for event in w.stream(resource.get, **kwargs):  # type: ignore[no-untyped-call]
                yield {"type": event.get("type"), "object": event.get("raw_object")}
        finally:
            if watches is not None:
                watches.discard(w)

    return watched


class FleetCache:
    """The worker's cache of the fleet's six kinds, in one namespace or all (``namespace``).

    One per worker process, shared by every activity (``KubeFleetBackend(cache=True)`` builds
    it); ``objects`` is the inventory's source (the same ``FleetObjects`` a LIST gives) and
    ``current`` the placement writer's (FleetWorkloads and PlacementDecisions at least as new as
    a LIST of them made now: ``orchestrator.kube.backend.placement``).
    """

    def __init__(
        self,
        dyn: Any,
        namespace: str | None,
        *,
        cache: WatchCache | None = None,
        watch_timeout: int = WATCH_TIMEOUT,
    ) -> None:
        self._watches = _Watches()
        self.cache = cache or WatchCache(
            CACHED_KINDS,
            kube_list(dyn, namespace),
            kube_watch(dyn, namespace, self._watches),
            watch_timeout=watch_timeout,
            name="fleet-cache",
            interrupt=self._watches.stop_all,
        )

    def start(self) -> None:
        """Start the LISTs and watches (in daemon threads; returns at once)."""
        self.cache.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Close the watches and end the threads."""
        self.cache.stop(timeout)

    def subscribe(self, match: Match, wake: Callable[[], None]) -> Callable[[], None]:
        """``WatchCache.subscribe`` (and start the cache, if no reader has yet)."""
        self.cache.start()
        return self.cache.subscribe(match, wake)

    def named(self, kind: tuple[str, str], name: str) -> list[Obj]:
        """The cached objects of ``kind`` called ``name``, in every namespace, without waiting.

        For a short call that would otherwise LIST a whole kind to find one name (the backend's
        ``_namespace_of``): ``CacheNotSynced`` at once while the cache has not listed every kind
        yet or the kind is ``lagging``, and the caller LISTs. A call must not wait the first
        LISTs out (``SYNC_TIMEOUT``): the LIST it would make costs what it did before the cache.
        """
        if not self.cache.synced:
            raise CacheNotSynced("fleet-cache: not synced yet")
        if kind in self.cache.lagging():
            raise CacheNotSynced(f"fleet-cache: the watch of {kind[1]} keeps failing")
        return self.cache.named(kind, name)

    def objects(
        self,
        *,
        sync_timeout: float = SYNC_TIMEOUT,
        fresh: Mapping[Hashable, str] | None = None,
        fresh_timeout: float = SYNC_TIMEOUT,
    ) -> tuple[FleetObjects, bool]:
        """The fleet's objects from memory, once synced (and at ``fresh`` versions, if given).

        ``CacheNotSynced`` past ``sync_timeout`` s (then ``fresh_timeout`` s), or at once while a
        kind is ``lagging``: the caller LISTs.
        """
        self._wait(FLEET_KINDS, fresh or {}, sync_timeout, fresh_timeout, ask=False)
        kinds = self.cache.snapshot(FLEET_KINDS)
        classes, clusters, control_planes, machine_deployments, workloads = (
            kinds[k] for k in FLEET_KINDS
        )
        return (
            FleetObjects(classes, clusters, control_planes, machine_deployments, workloads),
            True,
        )

    def current(
        self,
        versions: Mapping[tuple[str, str], str],
        *,
        keys: Collection[str] | None = None,
        sync_timeout: float = SYNC_TIMEOUT,
        fresh_timeout: float = SYNC_TIMEOUT,
    ) -> dict[tuple[str, str], list[Obj]]:
        """The objects of each kind in ``versions``, once its store has reached that version.

        ``versions`` are what a consistent read of each collection was answered at
        (``client.collection_version``): what is returned is then at least as new as a LIST of
        it made at that moment. Those are etcd revisions, which other kinds' writes move too, so
        a store that is behind asks the server for a bookmark (``WatchCache.wait_for(ask=True)``)
        rather than wait for its kind's next change. ``CacheNotSynced`` as ``objects`` says: the
        caller LISTs.

        ``keys`` (``namespace/name``): only those objects of each kind, looked up one by one
        (an indexer's get by key), so the read costs what the caller asks for, not the fleet.
        Each is at least as new as those versions; they are not one instant of the store.
        """
        fresh: dict[Hashable, str] = dict(versions)
        self._wait(tuple(fresh), fresh, sync_timeout, fresh_timeout, ask=True)
        if keys is not None:
            return {
                kind: [o for k in keys if (o := self.cache.get(kind, k)) is not None]
                for kind in versions
            }
        kinds = self.cache.snapshot(tuple(fresh))
        return {kind: kinds[kind] for kind in versions}

    def _wait(
        self,
        kinds: Sequence[Hashable],
        fresh: Mapping[Hashable, str],
        sync_timeout: float,
        fresh_timeout: float,
        *,
        ask: bool,
    ) -> None:
        """Until ``kinds`` are synced, not lagging and at ``fresh`` (else ``CacheNotSynced``).

        What follows reads from memory, so a reader gets objects at least that new.
        """
        self.cache.wait_synced(sync_timeout, kinds)
        behind = [k for k in self.cache.lagging() if k in kinds]
        if behind:
            named = ", ".join(str(k[1]) if isinstance(k, tuple) else str(k) for k in behind)
            raise CacheNotSynced(f"fleet-cache: the watch of {named} keeps failing")
        if fresh:
            self.cache.wait_for(fresh, fresh_timeout, ask=ask)
