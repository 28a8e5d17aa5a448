"""The placement writer of ``KubeFleetBackend`` with a watch-fed cache (issue 29 §1).

What it compares its decisions with is read from the cache once the cache's FleetWorkload and
PlacementDecision stores have reached the collections' current resourceVersions (two LISTs of
``limit=1``), else LISTed whole, as without a cache; a round of at most ``KEYED_READS``
workloads GETs them instead (the tests of the cache's path set it to 0). The "server" is a
``FakeDyn`` (one resourceVersion counter shared by every kind, as etcd's revision is) and the
cache's watches are scripted (``watch_feed.DynFeed``): a test decides when, and whether, the
cache hears of a change. Every wait has a timeout; nothing sleeps and asserts.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from orchestrator.kube import capi, fleetapi
from orchestrator.kube.backend import inventory as backend_inventory
from orchestrator.kube.backend import placement as backend_placement
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.backend.port import (
    ClusterReplicasInfo,
    NotFoundError,
    PlacementDecisionInfo,
    PlacementWrite,
)
from orchestrator.kube.cache import PLACEMENT_KINDS, FleetCache
from tests.orchestrator.kube.fake_dyn import NS, FakeDyn
from tests.orchestrator.kube.watch_feed import WAIT, DynFeed, fleet, fleet_cache

FW, PD = fleetapi.FLEET_WORKLOAD, fleetapi.PLACEMENT_DECISION
WORKLOADS = ("w0", "w1", "w2")
# What is stored when a test begins: written by a writer without a cache, then listed by the cache.
Decided = tuple[tuple[str, int], ...]
STORED: dict[str, Decided] = {"w0": (("c000", 1),), "w1": (("c001", 1),), "w2": (("c000", 2),)}


def _info(name: str, clusters: tuple[tuple[str, int], ...], version: str) -> PlacementDecisionInfo:
    return PlacementDecisionInfo(
        f"{NS}/{name}",
        tuple(ClusterReplicasInfo(c, r) for c, r in clusters),
        reason="test",
        resource_version=version,
    )


def _version(dyn: FakeDyn, name: str) -> str:
    return str(dyn.objects["FleetWorkload"][(NS, name)]["metadata"]["resourceVersion"])


def stored_fleet() -> FakeDyn:
    """Two clusters, three FleetWorkloads, each with its decision committed and mirrored."""
    dyn = fleet(2)
    decisions = [
        fleetapi.PlacementDecision(f"{NS}/{n}", c, "first", _version(dyn, n))
        for n, c in STORED.items()
    ]
    assert fleetapi.write_placement_decisions(dyn, decisions, NS).written == tuple(
        f"{NS}/{n}" for n in STORED
    )
    dyn.writes.clear()
    dyn.lists.clear()
    return dyn


def changes(dyn: FakeDyn, cache: FleetCache, kind: tuple[str, str]) -> list[dict[str, Any]]:
    """What the server's watch of ``kind`` sends from the cache's store on: every change since,
    in order (objects new or changed: ADDED/MODIFIED, objects gone: DELETED), then a BOOKMARK
    at the server's current resourceVersion.
    """
    held = {o["metadata"]["name"]: o for o in cache.cache.snapshot((kind,))[kind]}
    live = dyn.objects.get(kind[1], {})
    events: list[tuple[int, dict[str, Any]]] = []
    for (_, name), obj in live.items():
        was = held.get(name)
        version = obj["metadata"]["resourceVersion"]
        if was is None or was["metadata"]["resourceVersion"] != version:
            change = "ADDED" if was is None else "MODIFIED"
            events.append((int(version), {"type": change, "object": copy.deepcopy(obj)}))
    for name, obj in held.items():
        if (NS, name) not in live:
            gone = copy.deepcopy(obj)
            gone["metadata"]["resourceVersion"] = str(dyn.rv)
            events.append((dyn.rv, {"type": "DELETED", "object": gone}))
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(dyn.rv)}}}
    return [e for _, e in sorted(events, key=lambda e: e[0])] + [bookmark]


def catch_up(dyn: FakeDyn, source: DynFeed, cache: FleetCache) -> None:
    """The cache's watches deliver what the server holds (``changes``)."""
    for kind in PLACEMENT_KINDS:
        source.push(kind, *changes(dyn, cache, kind))


@dataclass
class Worker:
    """A backend with a cache over scripted watches, synced."""

    dyn: FakeDyn
    backend: KubeFleetBackend
    cache: FleetCache
    source: DynFeed
    monkeypatch: pytest.MonkeyPatch
    timers: list[threading.Timer] = field(default_factory=list)

    def answer_asks(self) -> None:
        """Answer the cache's asks for a bookmark as kube-apiserver does (``changes``)."""

        def answer(kind: Hashable, start: str) -> list[Any]:
            assert isinstance(kind, tuple)
            assert start == self.cache.cache.version(kind)
            return changes(self.dyn, self.cache, kind)

        self.source.answer = answer

    def patience(self, seconds: float) -> None:
        """How long a read waits for the cache before it LISTs (``FRESH_TIMEOUT``)."""
        self.monkeypatch.setattr(backend_inventory, "FRESH_TIMEOUT", seconds)

    def keyed(self, up_to: int) -> None:
        """Rounds of at most ``up_to`` workloads GET what they compare with (``KEYED_READS``)."""
        self.monkeypatch.setattr(backend_placement, "KEYED_READS", up_to)

    def write(self, decisions: list[PlacementDecisionInfo]) -> PlacementWrite:
        return asyncio.run(self.backend.write_placement(decisions, "test"))

    def catch_up(self) -> None:
        catch_up(self.dyn, self.source, self.cache)

    def catch_up_later(self, seconds: float = 0.05) -> None:
        timer = threading.Timer(seconds, self.catch_up)
        self.timers.append(timer)
        timer.start()

    def at_server(self) -> None:
        """Wait until the cache has heard everything the server holds (the watches delivered)."""
        self.catch_up()
        self.cache.current({k: str(self.dyn.rv) for k in PLACEMENT_KINDS}, fresh_timeout=WAIT)


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[Worker]:
    dyn = stored_fleet()
    cache, source = fleet_cache(dyn)
    backend = KubeFleetBackend(None, NS, dyn=dyn, cache=cache)
    backend.start()
    cache.cache.wait_synced(WAIT)
    dyn.lists.clear()  # the cache's own first LISTs
    w = Worker(dyn, backend, cache, source, monkeypatch)
    # A wait that runs out LISTs: short, so the tests where the watch stays silent are quick;
    # a test where the watch delivers late gives it time (``patience``).
    w.patience(0.3)
    w.keyed(0)  # the cache's path; the keyed tests say so
    yield w
    for timer in w.timers:
        timer.cancel()
    backend.close()
    source.closed.set()


def _bulk_lists(dyn: FakeDyn) -> dict[str, int]:
    return {k: n for k, n in dyn.lists.items() if k in ("FleetWorkload", "PlacementDecision")}


def test_a_cache_at_the_collections_versions_is_read_without_a_bulk_list(worker: Worker) -> None:
    dyn = worker.dyn
    versions = {n: _version(dyn, n) for n in WORKLOADS}
    # Unchanged decisions: nothing to write, and nothing LISTed whole to find that out.
    unchanged = [_info(n, STORED[n], versions[n]) for n in WORKLOADS]
    assert worker.write(unchanged) == PlacementWrite((), ())
    assert _bulk_lists(dyn) == {}
    assert dyn.probes == {"FleetWorkload": 1, "PlacementDecision": 1}
    assert dyn.writes == []
    # A changed one is written (conditionally, as ever) ...
    moved = _info("w1", (("c000", 1),), versions["w1"])
    assert worker.write([moved]) == PlacementWrite((f"{NS}/w1",), ())
    assert [(verb, kind) for verb, kind, _, _ in dyn.writes] == [
        ("apply-status", "FleetWorkload"),
        ("apply-status", "PlacementDecision"),
    ]
    # ... and once the watches have delivered it, the next write compares with it from memory.
    worker.at_server()
    dyn.writes.clear()
    again = _info("w1", (("c000", 1),), _version(dyn, "w1"))
    assert worker.write([again]) == PlacementWrite((), ())
    assert dyn.writes == [] and _bulk_lists(dyn) == {}
    assert dyn.probes == {"FleetWorkload": 3, "PlacementDecision": 3}


def test_a_cache_behind_the_collections_is_waited_for_then_read(worker: Worker) -> None:
    """Another writer commits w0 meanwhile; the cache hears of it while the writer waits."""
    dyn = worker.dyn
    read = _version(dyn, "w0")  # what this worker's inventory read
    theirs = fleetapi.PlacementDecision(f"{NS}/w0", (("c001", 1),), "theirs", read)
    assert fleetapi.write_placement_decisions(dyn, [theirs], NS).written == (f"{NS}/w0",)
    dyn.writes.clear()
    dyn.lists.clear()
    worker.patience(WAIT)
    worker.catch_up_later()
    mine = _info("w0", STORED["w0"], read)  # equal to what the cache still holds
    assert worker.write([mine]) == PlacementWrite((), (f"{NS}/w0",))
    assert dyn.writes == [] and _bulk_lists(dyn) == {}, "waited for the cache, then read it"


def test_a_cache_that_does_not_catch_up_in_time_is_passed_by_for_a_list(worker: Worker) -> None:
    """A change of another kind moves the revision; the watches stay silent: the writer LISTs."""
    dyn = worker.dyn
    cluster = dyn.objects["Cluster"][(NS, "c000")]
    dyn.resources.get(*capi.CLUSTER).patch(
        {"metadata": {"labels": {"x": "y"}}}, "c000", NS, "application/merge-patch+json"
    )
    assert cluster["metadata"]["resourceVersion"] == str(dyn.rv)
    unchanged = [_info(n, STORED[n], _version(dyn, n)) for n in WORKLOADS]
    assert worker.write(unchanged) == PlacementWrite((), ())
    assert _bulk_lists(dyn) == {"FleetWorkload": 1, "PlacementDecision": 1}
    assert dyn.writes == []


def test_a_cache_whose_kinds_did_not_change_asks_for_a_bookmark_and_is_read(
    worker: Worker,
) -> None:
    """Another kind's write moves the revision: the stores ask and are vouched for at once."""
    dyn = worker.dyn
    worker.answer_asks()
    worker.patience(WAIT)
    dyn.resources.get(*capi.CLUSTER).patch(
        {"metadata": {"labels": {"x": "y"}}}, "c000", NS, "application/merge-patch+json"
    )
    unchanged = [_info(n, STORED[n], _version(dyn, n)) for n in WORKLOADS]
    assert worker.write(unchanged) == PlacementWrite((), ())
    assert _bulk_lists(dyn) == {} and dyn.writes == []
    assert {k for k, _ in worker.source.asked_from} == set(PLACEMENT_KINDS)
    assert len(worker.source.asked_from) == len(PLACEMENT_KINDS)
    assert {k: worker.cache.cache.version(k) for k in PLACEMENT_KINDS} == dict.fromkeys(
        PLACEMENT_KINDS, str(dyn.rv)
    )


def test_a_backend_without_a_cache_lists_and_probes_nothing() -> None:
    dyn = stored_fleet()
    backend = KubeFleetBackend(None, NS, dyn=dyn)
    unchanged = [_info(n, STORED[n], _version(dyn, n)) for n in WORKLOADS]
    assert asyncio.run(backend.write_placement(unchanged, "test")) == PlacementWrite((), ())
    assert _bulk_lists(dyn) == {"FleetWorkload": 1, "PlacementDecision": 1}
    assert dyn.probes == {}
    assert asyncio.run(backend.write_placement([], "test")) == PlacementWrite((), ())
    assert _bulk_lists(dyn) == {"FleetWorkload": 1, "PlacementDecision": 1}, "nothing to write"


# ----------------------------------------------------- a stale cache never decides the outcome


def _bump(dyn: FakeDyn) -> None:
    with dyn.rv_lock:
        dyn.rv += 1


def their_commit(dyn: FakeDyn) -> None:
    """Another worker committed a different decision for w0 (and mirrored it)."""
    theirs = fleetapi.PlacementDecision(f"{NS}/w0", (("c001", 3),), "theirs", _version(dyn, "w0"))
    fleetapi.write_placement_decisions(dyn, [theirs], NS)


def their_commit_of_ours(dyn: FakeDyn) -> None:
    """Another worker committed w1's decision to c000 first: ours is the same, from older data."""
    theirs = fleetapi.PlacementDecision(f"{NS}/w1", (("c000", 1),), "theirs", _version(dyn, "w1"))
    fleetapi.write_placement_decisions(dyn, [theirs], NS)


def spec_changed(dyn: FakeDyn) -> None:
    """A user changed w2's spec (a new generation): its decision must be computed again."""
    fw = dyn.objects["FleetWorkload"][(NS, "w2")]
    fw["metadata"]["generation"] = 2
    fw["spec"]["replicas"] = 4
    dyn.bump(fw)


def mirror_cleared(dyn: FakeDyn) -> None:
    """w0's mirror lost its rows (a writer stopped between commit and mirror): to be repaired."""
    pd = dyn.objects["PlacementDecision"][(NS, "w0")]
    pd["status"]["decisions"] = []
    dyn.bump(pd)


def mirror_deleted(dyn: FakeDyn) -> None:
    """w1's PlacementDecision was deleted: to be created and written again."""
    del dyn.objects["PlacementDecision"][(NS, "w1")]
    _bump(dyn)


def workload_created(dyn: FakeDyn) -> None:
    """A FleetWorkload created after the cache listed: a decision for it is not "missing"."""
    dyn.add("FleetWorkload", {"metadata": {"name": "w3", "uid": "u3"}, "spec": {}})
    dyn.bump(dyn.objects["FleetWorkload"][(NS, "w3")])


@dataclass(frozen=True)
class Stale:
    """A change the cache has not heard of, and the decisions a worker then writes."""

    change: Callable[[FakeDyn], None]
    decisions: Mapping[str, Decided]
    written: tuple[str, ...]  # what a fresh LIST makes of them (asserted, and compared with)
    conflicts: tuple[str, ...]


STALE = [
    pytest.param(Stale(their_commit, STORED, (), ("w0",)), id="another writer's commit"),
    pytest.param(
        Stale(their_commit_of_ours, {**STORED, "w1": (("c000", 1),)}, (), ("w1",)),
        id="another writer's commit of the same decision",
    ),
    pytest.param(Stale(spec_changed, STORED, (), ("w2",)), id="a spec change"),
    pytest.param(Stale(mirror_cleared, STORED, ("w0",), ()), id="a mirror to repair"),
    pytest.param(Stale(mirror_deleted, STORED, ("w1",), ()), id="a mirror deleted"),
    pytest.param(
        Stale(workload_created, {**STORED, "w3": (("c001", 1),)}, ("w3",), ()),
        id="a workload created",
    ),
]


def _decisions(case: Stale, versions: dict[str, str]) -> list[PlacementDecisionInfo]:
    return [_info(n, c, versions.get(n, "")) for n, c in case.decisions.items()]


def _writes(dyn: FakeDyn) -> list[tuple[str, str, str]]:
    return [(verb, kind, name) for verb, kind, name, _ in dyn.writes]


@pytest.mark.parametrize(
    ("delivered", "answered"),
    [(False, False), (True, False), (False, True)],
    ids=["watch silent", "watch late", "watch silent, asks answered"],
)
@pytest.mark.parametrize("case", STALE)
def test_a_stale_cache_never_skips_a_needed_write_nor_writes_a_stale_decision(
    worker: Worker, case: Stale, delivered: bool, answered: bool
) -> None:
    """Each change is made on the server behind the cache's back, after the inventory read.

    The decisions are those computed from what the cache held (its versions); the outcome and
    the writes must be those of a writer that LISTs fresh, over the same server: whether the
    watch delivers the change while the writer waits (read from the cache) or stays silent
    (the wait runs out and the writer LISTs), even when the server answers the cache's asks
    for a bookmark (the answer names the change the store has not had: it is not moved).
    """
    versions = {n: _version(worker.dyn, n) for n in WORKLOADS}  # the inventory's read
    reference = stored_fleet()
    case.change(reference)
    reference.writes.clear()
    fresh_backend = KubeFleetBackend(None, NS, dyn=reference)
    expected = asyncio.run(fresh_backend.write_placement(_decisions(case, versions), "test"))
    assert expected == PlacementWrite(
        tuple(f"{NS}/{n}" for n in case.written), tuple(f"{NS}/{n}" for n in case.conflicts)
    )

    case.change(worker.dyn)
    worker.dyn.writes.clear()
    worker.dyn.lists.clear()  # the other writer's
    if answered:
        worker.answer_asks()
    if delivered:
        worker.patience(WAIT)
        worker.catch_up_later()
    outcome = worker.write(_decisions(case, versions))
    assert outcome == expected
    assert _writes(worker.dyn) == _writes(reference)
    assert _stored(worker.dyn) == _stored(reference)
    listed = _bulk_lists(worker.dyn)
    assert listed == ({} if delivered else {"FleetWorkload": 1, "PlacementDecision": 1})


def _stored(dyn: FakeDyn) -> dict[str, Any]:
    """The FleetWorkloads and PlacementDecisions, but for the time each decision was written."""
    held = {k[1]: copy.deepcopy(dyn.objects.get(k[1])) for k in PLACEMENT_KINDS}
    for obj in (held["FleetWorkload"] or {}).values():
        (obj.get("status") or {}).pop("lastUpdateTime", None)
    return held


def test_a_decision_for_a_workload_neither_the_cache_nor_the_server_has_is_not_found(
    worker: Worker,
) -> None:
    with pytest.raises(NotFoundError, match=f"no FleetWorkload {NS}/nope"):
        worker.write([_info("nope", (("c000", 1),), "")])


# ------------------------------------------------------------ a few workloads: GETs, no cache


def test_a_few_workloads_are_read_by_key_without_probes_lists_or_asks(worker: Worker) -> None:
    """At most ``KEYED_READS`` workloads: two GETs each, whatever the cache has heard."""
    dyn = worker.dyn
    worker.keyed(len(WORKLOADS))
    dyn.resources.get(*capi.CLUSTER).patch(  # the revision moves: the cache path would ask
        {"metadata": {"labels": {"x": "y"}}}, "c000", NS, "application/merge-patch+json"
    )
    dyn.gets.clear()
    versions = {n: _version(dyn, n) for n in WORKLOADS}
    unchanged = [_info(n, STORED[n], versions[n]) for n in WORKLOADS]
    assert worker.write(unchanged) == PlacementWrite((), ())
    assert dyn.gets == {"FleetWorkload": 3, "PlacementDecision": 3}
    assert _bulk_lists(dyn) == {} and dyn.probes == {} and worker.source.asked_from == []
    moved = _info("w1", (("c000", 1),), versions["w1"])
    assert worker.write([moved]) == PlacementWrite((f"{NS}/w1",), ())
    # One more workload than the bound: the cache's path (probes, then a LIST: its watch is silent).
    worker.keyed(len(WORKLOADS) - 1)
    dyn.gets.clear()
    again = [
        _info(n, (("c000", 1),) if n == "w1" else STORED[n], _version(dyn, n)) for n in WORKLOADS
    ]
    assert worker.write(again) == PlacementWrite((), ())
    assert dyn.gets == {} and dyn.probes == {"FleetWorkload": 1, "PlacementDecision": 1}


@pytest.mark.parametrize("case", STALE)
def test_a_few_workloads_read_by_key_decide_as_a_fresh_list(worker: Worker, case: Stale) -> None:
    """The stale table again: the cache never hears of the change, and the GETs see it."""
    versions = {n: _version(worker.dyn, n) for n in WORKLOADS}
    reference = stored_fleet()
    case.change(reference)
    reference.writes.clear()
    fresh_backend = KubeFleetBackend(None, NS, dyn=reference)
    expected = asyncio.run(fresh_backend.write_placement(_decisions(case, versions), "test"))

    case.change(worker.dyn)
    worker.dyn.writes.clear()
    worker.dyn.lists.clear()
    worker.keyed(len(case.decisions))
    assert worker.write(_decisions(case, versions)) == expected
    assert _writes(worker.dyn) == _writes(reference)
    assert _stored(worker.dyn) == _stored(reference)
    assert _bulk_lists(worker.dyn) == {} and worker.dyn.probes == {}


def test_a_workload_missing_from_the_server_is_not_found_by_key(worker: Worker) -> None:
    worker.keyed(1)
    with pytest.raises(NotFoundError, match=f"no FleetWorkload {NS}/nope"):
        worker.write([_info("nope", (("c000", 1),), "")])
