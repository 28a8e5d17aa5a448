"""bench_calibration's and bench_worker's accounting of the worker's own requests (issue 29): no plane, no timing.

The worker counts its requests in its own process (``client.RequestCounts``) and writes them to
a file when signalled; the benchmark takes the difference around the calibration and reports it
per cluster-step beside kube-apiserver's counts of every client. These checks keep that
bookkeeping honest; the measurement itself is ``python -m benchmarks.bench_calibration``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from benchmarks.bench_calibration import HistoryStats, Report
from benchmarks.bench_worker import WorkerCounts, read_counts, write_counts
from orchestrator.kube.client import RequestCounts

CAPI = "https://h:6443/apis/cluster.x-k8s.io/v1beta2/namespaces/scale"


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, *_: Any, **__: Any) -> Iterator[bytes]:
        yield self.data


class _Answer:
    status = 200

    def __init__(self, data: bytes) -> None:
        self.response: Any = _Body(data)


def _send(
    counts: RequestCounts,
    method: str,
    url: str,
    body: bytes,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> None:
    with counts.observe(method, url, headers or {}) as answered:
        answer = _Answer(body)
        answer.status = status
        answered(answer)
    _ = answer.response.data


def test_the_run_is_what_the_worker_counted_between_two_files(tmp_path: Path) -> None:
    counts = RequestCounts()
    path = tmp_path / "requests.json"
    assert read_counts(path) is None  # not written yet: the benchmark keeps waiting
    _send(counts, "GET", f"{CAPI}/clusters?limit=500", b"x" * 100)  # the start's LIST
    write_counts(path, 1, counts)
    before = read_counts(path)
    assert before is not None and before.seq == 1
    for _ in range(3):
        _send(counts, "GET", f"{CAPI}/clusters/s001", b"y" * 10)
    _send(counts, "PATCH", f"{CAPI}/clusters/s001", b"z" * 20, headers={"Content-Type": "x"})
    _send(counts, "PATCH", f"{CAPI}/clusters/s001", b"c" * 5, status=409)
    write_counts(path, 2, counts)
    after = read_counts(path)
    assert after is not None
    run = after - before
    assert run.requests == Counter({("GET", "clusters"): 3, ("PATCH", "clusters"): 2})
    assert run.received == Counter({("GET", "clusters"): 30, ("PATCH", "clusters"): 25})
    assert run.refused == Counter({("PATCH", "clusters 409"): 1})
    assert not list(tmp_path.glob("*.part"))  # written whole, then renamed


def _report(**kw: Any) -> Report:
    history = HistoryStats(runs=1, events=10, bytes=100, max_run_events=10)
    base: dict[str, Any] = {
        "clusters": 4,
        "concurrency": 2,
        "wall": 120.0,
        "ideal": 100.0,
        "waves": 2,
        "succeeded": 4,
        "blocked": {},
        "parent": history,
        "children": {"s000": history},
        "worker_cpu": 20.0,
        "worker_peak_mib": 150.0,
        "requests": Counter({("PATCH", "clusters"): 400, ("PATCH", "clusters/status"): 600}),
        "cluster_steps": 10,
        "samples": 5,
        "plane_mib": 1000.0,
    }
    return Report(**(base | kw))


def test_the_report_gives_the_workers_figures_per_cluster_step() -> None:
    run = WorkerCounts(
        3,
        Counter({("PATCH", "clusters"): 25, ("WATCH", "clusters"): 1}),
        Counter({("PATCH", "clusters"): 50_000, ("WATCH", "clusters"): 10_000}),
        Counter({("PATCH", "clusters 409"): 5}),
    )
    report = _report(
        worker_requests=run.requests,
        worker_received=run.received,
        worker_refused=run.refused,
        cache=True,
    )
    doc = report.as_json()
    worker = doc["worker"]
    assert worker["cpu_s_per_cluster_step"] == 2.0
    assert worker["requests_per_cluster_step"] == {"PATCH clusters": 2.5, "WATCH clusters": 0.1}
    assert worker["requests_total_per_cluster_step"] == 2.6
    assert worker["bytes_read_total_per_cluster_step"] == 6_000
    assert doc["apiserver_requests_per_cluster_step"]["PATCH clusters/status"] == 60.0
    text = report.markdown()
    assert "| PATCH | clusters | 25 | 2.50 | 5.0 |" in text  # the worker's own, kB per step
    assert "| PATCH | clusters | 400 | 40.0 | 2.5 |" in text  # every client, of which ours
    assert "| PATCH | clusters/status | 600 | 60.0 | 0.0 |" in text
    assert "a conflict refused): PATCH clusters 409: 5" in text
    assert doc["worker"]["refused"] == {"PATCH clusters 409": 5}


def test_the_report_says_where_each_clusters_time_went() -> None:
    """Each child's span beyond its CAPI rollout, and its activities' time per cluster."""

    def child(span: float, replace_s: float) -> HistoryStats:
        return HistoryStats(
            runs=1,
            events=10,
            bytes=100,
            max_run_events=10,
            span_s=span,
            activity_s={"replace": replace_s, "wait_control_plane": 50.0},
            activity_calls=Counter({"replace": 4, "wait_control_plane": 2}),
        )

    report = _report(
        children={"s000": child(100.0, 12.0), "s001": child(130.0, 30.0), "s002": child(90, 6)},
        rollouts={"s000": 80.0, "s001": 100.0},  # s002's rollout was not seen: left out
    )
    assert report.own_time() == [20.0, 30.0]
    assert report.activity_time() == [("wait_control_plane", 2.0, 50.0), ("replace", 4.0, 16.0)]
    doc = report.as_json()
    assert doc["clusters_own_time_s"] == {"median": 30.0, "p90": 30.0, "max": 30.0}
    assert doc["activity_time_per_cluster"]["replace"] == {"calls": 4.0, "s": 16.0}
    text = report.markdown()
    assert "beyond its own rollout, each cluster took median 30 s, p90 30 s, max 30 s" in text
    assert "| replace | 4.00 | 16.0 |" in text
