"""Scripted sources for the watch-fed cache, shared by the cache's and the placement writer's tests.

``WatchCache`` takes a ``list`` and a ``watch`` function; ``Feed`` scripts both per kind (the lists
to return, a queue of watch events, errors or stream ends a test pushes, and the answer to a
bookmark ask), so a test decides when, and whether, a cache hears of a change. ``DynFeed`` lists
through the real ``kube_list`` over a ``FakeDyn`` and leaves the watches to the test;
``fleet`` is a small CAPI fleet in a ``FakeDyn``. Every wait has a timeout (``wait_until``).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

from orchestrator.kube import cache as kcache
from orchestrator.kube.cache import FleetCache, WatchCache
from testkit.capi_objects import cclass, cluster, kcp, md
from tests.orchestrator.kube.fake_dyn import NS, FakeDyn

END = object()  # ends the current watch stream (a server-side timeout)
WAIT = 5.0


def wait_until(what: str, done: Callable[[], bool], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} within {timeout}s")
        time.sleep(0.005)


def obj(name: str, rv: str, ns: str = NS, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv}, **extra}


def event(kind: str, o: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": o}


@dataclass
class Feed:
    """Scripted sources: ``lists[kind]`` is popped per LIST (the last one repeats).

    A watch of ``ASK_TIMEOUT`` (the cache asking for a bookmark) is answered by ``answer``:
    the events it yields, given the kind and the version it starts from (default: none, the
    stream ends at once, as a server that sends no bookmark).
    """

    lists: dict[Hashable, list[Any]] = field(default_factory=dict)
    events: dict[Hashable, queue.Queue[Any]] = field(default_factory=dict)
    watched_from: list[tuple[Hashable, str]] = field(default_factory=list)
    asked_from: list[tuple[Hashable, str]] = field(default_factory=list)
    answer: Callable[[Hashable, str], list[Any]] = lambda kind, version: []
    closed: threading.Event = field(default_factory=threading.Event)

    def list(self, kind: Hashable) -> tuple[list[dict[str, Any]], str]:
        script = self.lists[kind]
        step = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(step, Exception):
            raise step
        items, version = step
        return [dict(o) for o in items], version

    def watch(self, kind: Hashable, version: str, timeout: int) -> Iterator[dict[str, Any]]:
        if timeout == kcache.ASK_TIMEOUT:
            self.asked_from.append((kind, version))
            for item in self.answer(kind, version):
                if isinstance(item, Exception):
                    raise item
                yield item
            return
        self.watched_from.append((kind, version))
        events = self.events.setdefault(kind, queue.Queue())
        while not self.closed.is_set():
            try:
                item = events.get(timeout=0.01)
            except queue.Empty:
                continue
            if item is END:
                return
            if isinstance(item, Exception):
                raise item
            yield item

    def push(self, kind: Hashable, *items: Any) -> None:
        for item in items:
            self.events.setdefault(kind, queue.Queue()).put(item)


class DynFeed(Feed):
    """The real ``kube_list`` over a FakeDyn, and watches the test feeds."""

    def __init__(self, dyn: FakeDyn) -> None:
        super().__init__()
        self.listing = kcache.kube_list(dyn, NS)

    def list(self, kind: Hashable) -> tuple[list[dict[str, Any]], str]:
        return self.listing(kind)


def fleet_cache(dyn: FakeDyn) -> tuple[FleetCache, DynFeed]:
    source = DynFeed(dyn)
    watch = WatchCache(
        kcache.CACHED_KINDS, source.list, source.watch, backoff=0.01, interrupt=source.closed.set
    )
    return FleetCache(dyn, NS, cache=watch), source


def fleet(clusters: int, *, missing: tuple[str, ...] = ()) -> FakeDyn:
    dyn = FakeDyn(missing)
    dyn.add("ClusterClass", cclass("cc", ["v1.33.0", "v1.34.0"]))
    for i in range(clusters):
        name = f"c{i:03d}"
        dyn.add("Cluster", cluster(name, labels={"env": "prod" if i % 2 else "dev"}))
        dyn.add("KubeadmControlPlane", kcp(name))
        dyn.add("MachineDeployment", md(f"{name}-md-0", name))
    for i in range(3):
        dyn.add(
            "FleetWorkload",
            {
                "metadata": {"name": f"w{i}", "uid": f"u{i}"},
                "spec": {"apis": ["apps/v1/Deployment"], "placement": {"clusters": ["c000"]}},
            },
        )
    return dyn
