"""bench_observation's bookkeeping: how requests are named, what a run must have seen, the table.

The measurement itself needs real apiservers (``python -m benchmarks.bench_observation``); these
checks keep its accounting honest without one and assert no timing.
"""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.bench_observation import Meter, check, summary, table

MGMT = object()
WORKLOAD = object()


@pytest.mark.parametrize(
    ("api", "url", "kind"),
    [
        (MGMT, "https://h:1/api/v1/namespaces/ns/secrets/c-kubeconfig", "mgmt GET Secret"),
        (MGMT, "https://h:1/apis/cluster.x-k8s.io/v1beta2/clusters?limit=500", "mgmt inventory"),
        (WORKLOAD, "https://h:1/metrics", "GET /metrics"),
        (WORKLOAD, "https://h:1/apis", "discovery /api, /apis"),
        (WORKLOAD, "https://h:1/version", "GET /version"),
        (WORKLOAD, "https://h:1/api/v1/nodes?limit=500", "LIST Nodes"),
        (WORKLOAD, "https://h:1/api/v1/namespaces/kube-system/pods", "LIST kube-apiserver pods"),
        (WORKLOAD, "https://h:1/apis/policy/v1/poddisruptionbudgets", "LIST PDBs"),
        (WORKLOAD, "https://h:1/apis/storage.k8s.io/v1beta1", "discovery of a group/version"),
        (WORKLOAD, "https://h:1/api/v1", "discovery of a group/version"),
        (
            WORKLOAD,
            "https://h:1/apis/storage.k8s.io/v1/volumeattributesclasses?limit=500",
            "GET stored objects",
        ),
    ],
)
def test_requests_are_named_by_what_they_read(api: object, url: str, kind: str) -> None:
    meter = Meter()
    meter.management = MGMT
    assert meter.kind(api, "GET", url) == kind


def run(variant: str, wall: float, **seen: Any) -> dict[str, Any]:
    observing = variant == "observe"
    base = {
        "variant": variant,
        "clusters": 2,
        "reachable": 2,
        "with_metric_usage": 2 if observing else 0,
        "with_stored_usage": 2 if observing else 0,
        "with_blockers": 2 if observing else 0,
        "partial": [],
        "unreachable": [],
        "wall_s": wall,
        "cpu_s": wall / 2,
        "apiserver_cpu_s": wall / 4,
        "rss_before_mib": 70.0,
        "peak_rss_mib": 80.0,
        "rss_growth_mib": 1.0,
        "requests": {"GET /metrics": 6} if observing else {"LIST Nodes": 2},
        "received": {"GET /metrics": 500_000} if observing else {"LIST Nodes": 2_000},
        "sent": {},
        "connections": 10 if observing else 4,
    }
    return base | seen


def test_a_run_that_did_not_see_the_whole_fleet_is_refused() -> None:
    check(run("observe", 1.0))
    check(run("reach", 1.0))
    with pytest.raises(RuntimeError, match="whole fleet"):
        check(run("observe", 1.0, partial=["apiserver x: GET /metrics: refused"]))
    with pytest.raises(RuntimeError, match="whole fleet"):
        check(run("observe", 1.0, with_metric_usage=1))
    with pytest.raises(RuntimeError, match="whole fleet"):
        check(run("reach", 1.0, reachable=1))


def test_medians_and_the_extra_cost_per_cluster() -> None:
    results = {
        "2": {
            "observe": summary([run("observe", w) for w in (3.0, 1.0, 2.0)]),
            "reach": summary([run("reach", w) for w in (1.0, 0.5, 9.0)]),
        }
    }
    assert results["2"]["observe"]["wall_s"] == 2.0
    assert results["2"]["reach"]["wall_s"] == 1.0
    text = table(results)
    assert "| 2 | **extra per cluster** | 0.500 | 0.250 | 0.125 | 2.0 | 249.0 | 3.0 |" in text
    assert "| 2 | observe | 6 (500 KB) | 0 |" in text
