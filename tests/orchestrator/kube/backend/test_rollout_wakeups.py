"""Rollout wake-ups (``RolloutObserver.rollout_wakeups``): what wakes a wait, over scripted watches.

``rollout_match`` is pure and table-tested; the backend's wake-up is then driven end to end by a
watch event pushed into the worker's cache (``watch_feed``), with every wait bounded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any

import pytest

from orchestrator.kube import capi
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.backend.port import ClusterRef
from orchestrator.kube.backend.rollout import rollout_match
from testkit.capi_objects import kcp, md
from tests.orchestrator.kube.fake_dyn import NS
from tests.orchestrator.kube.watch_feed import WAIT, event, fleet, fleet_cache

KCP, MD, CLUSTER = capi.KUBEADM_CONTROL_PLANE, capi.MACHINE_DEPLOYMENT, capi.CLUSTER


def finished(o: dict[str, Any], replicas: int = 1) -> dict[str, Any]:
    """``o`` with the status CAPI writes once its rollout is over."""
    o["metadata"]["generation"] = 2
    o["status"] = {
        "observedGeneration": 2,
        "replicas": replicas,
        "upToDateReplicas": replicas,
        "availableReplicas": replicas,
        "conditions": [
            {"type": "Available", "status": "True"},
            {"type": "RollingOut", "status": "False"},
        ],
    }
    return o


def rolling(o: dict[str, Any]) -> dict[str, Any]:
    o = finished(o)
    o["status"]["upToDateReplicas"] = 0
    return o


def labelled(o: dict[str, Any], cluster: str) -> dict[str, Any]:
    o["metadata"]["labels"] = {capi.CLUSTER_NAME_LABEL: cluster}
    return o


def owned(o: dict[str, Any], cluster: str) -> dict[str, Any]:
    o["metadata"]["ownerReferences"] = [
        {"kind": "Secret", "name": "x"},
        {"kind": "Cluster", "name": cluster},
    ]
    return o


# (kind, object, the wait's cluster, woken)
MATCHES = [
    pytest.param(KCP, finished(owned(kcp("c1-x"), "c1")), ClusterRef("c1", NS), True, id="kcp owned"),
    pytest.param(KCP, finished(labelled(kcp("c1-x"), "c1")), ClusterRef("c1", NS), True, id="kcp labelled"),
    pytest.param(KCP, finished(owned(kcp("c1-x"), "c1")), ClusterRef("c1", ""), True, id="any ns"),
    pytest.param(KCP, rolling(owned(kcp("c1-x"), "c1")), ClusterRef("c1", NS), False, id="kcp rolling"),
    pytest.param(KCP, finished(owned(kcp("c2-x"), "c2")), ClusterRef("c1", NS), False, id="kcp other"),
    pytest.param(KCP, finished(kcp("c1")), ClusterRef("c1", NS), False, id="kcp unowned"),
    pytest.param(
        KCP, finished(owned(kcp("c1-x", ns="b"), "c1")), ClusterRef("c1", NS), False, id="kcp other ns"
    ),
    pytest.param(MD, finished(md("c1-md", "c1")), ClusterRef("c1", NS), True, id="md done"),
    pytest.param(MD, rolling(md("c1-md", "c1")), ClusterRef("c1", NS), False, id="md rolling"),
    pytest.param(MD, finished(md("c2-md", "c2")), ClusterRef("c1", NS), False, id="md other"),
    pytest.param(
        CLUSTER, finished({"metadata": {"name": "c1", "namespace": NS}}), ClusterRef("c1", NS), False,
        id="the Cluster itself",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "obj", "ref", "woken"), MATCHES)
def test_what_wakes_a_rollout_wait(
    kind: Hashable, obj: dict[str, Any], ref: ClusterRef, woken: bool
) -> None:
    assert rollout_match(ref)(kind, obj) is woken


def test_a_finished_pool_in_the_cache_wakes_the_wait_and_a_change_between_waits_is_kept() -> None:
    dyn = fleet(2)
    cache, source = fleet_cache(dyn)
    backend = KubeFleetBackend(None, NS, dyn=dyn, cache=cache)

    async def scenario() -> tuple[bool, bool]:
        async with backend.rollout_wakeups(ClusterRef("c000", NS)) as wakeups:
            # Pushed before the wait (as if it came during an observation): not lost.
            source.push(MD, event("MODIFIED", finished(md("c000-md-0", "c000"))))
            first = await wakeups.wait(WAIT)
            source.push(MD, event("MODIFIED", finished(md("c000-md-0", "c000"))))
            second = await wakeups.wait(WAIT)
            return first, second

    try:
        cache.start()
        cache.cache.wait_synced(WAIT)
        assert asyncio.run(scenario()) == (True, True)
    finally:
        backend.close()
        source.closed.set()


def test_a_backend_without_a_cache_sleeps_the_whole_interval() -> None:
    backend = KubeFleetBackend(None, NS, dyn=fleet(1))

    async def scenario() -> bool:
        async with backend.rollout_wakeups(ClusterRef("c000", NS)) as wakeups:
            return await wakeups.wait(0)

    assert asyncio.run(scenario()) is False
