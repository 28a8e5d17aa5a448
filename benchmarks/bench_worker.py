"""The calibration benchmarks' worker: the product's backend and worker in a process of its own,
counting its own requests (issue 29).

``python -m benchmarks.bench_worker ADDRESS KUBECONFIG TASK_QUEUE NAMESPACE [--no-cache]
[--counts FILE]`` runs ``workflows.worker.build_worker`` on ``KubeFleetBackend`` as ``calibrator
worker`` does. With ``--counts`` it counts its requests at its management client's request layer
(``orchestrator.kube.client.RequestCounts`` through ``observe_requests``) and writes them to FILE
once it is ready (after a first fleet read: the cache's sync, or one LIST of each kind without
it) and again on each SIGUSR1, replacing the file whole, so ``bench_calibration`` can take the
calibration's own requests as the difference of two readings. Without ``--counts`` it starts as
before (the Pulumi test's worker).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client

from orchestrator.kube.client import RequestCounts, api_client, observe_requests

WORKER_READY_TIMEOUT = 300.0  # the worker's start: imports, Temporal, the first fleet read
COUNTS_TIMEOUT = 60.0  # for the worker to write its counts once signalled (a starved loop)


Kinds = Counter[tuple[str, str]]


def kinds_of(counted: dict[str, int]) -> Kinds:
    """``{"VERB resource": n}`` (``RequestCounts.totals``) as a Counter by (verb, resource)."""
    out: Kinds = Counter()
    for key, n in counted.items():
        verb, _, resource = key.partition(" ")
        out[(verb, resource)] += n
    return out


@dataclass(frozen=True)
class WorkerCounts:
    """The worker's own requests and the bytes it read, by (verb, resource), at one moment."""

    seq: int
    requests: Kinds
    received: Kinds
    refused: Kinds  # answers of 400 or more: (verb, "resource status")

    def __sub__(self, earlier: WorkerCounts) -> WorkerCounts:
        return WorkerCounts(
            self.seq,
            self.requests - earlier.requests,
            self.received - earlier.received,
            self.refused - earlier.refused,
        )


def read_counts(path: Path) -> WorkerCounts | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # not written yet (the worker replaces the file whole: never half-read)
    return WorkerCounts(
        int(doc["seq"]),
        kinds_of(doc["requests"]),
        kinds_of(doc["received"]),
        kinds_of(doc["refused"]),
    )


def write_counts(path: Path, seq: int, counts: RequestCounts) -> None:
    """The worker's side: the counts so far, replacing the file at once (rename)."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps({"seq": seq, **counts.totals()}))
    os.replace(part, path)


def _await_counts(
    worker: subprocess.Popen[bytes], path: Path, after: int, timeout: float
) -> WorkerCounts:
    deadline = time.monotonic() + timeout
    while True:
        counts = read_counts(path)
        if counts is not None and counts.seq > after:
            return counts
        if worker.poll() is not None:
            raise AssertionError(f"the worker exited ({worker.returncode}) before its counts")
        if time.monotonic() > deadline:
            raise AssertionError(f"no request counts from the worker within {timeout:.0f}s")
        time.sleep(0.1)


def worker_ready(worker: subprocess.Popen[bytes], path: Path) -> WorkerCounts:
    """Wait for the worker's first counts: it has read the fleet once and answers signals."""
    return _await_counts(worker, path, 0, WORKER_READY_TIMEOUT)


def worker_counts(worker: subprocess.Popen[bytes], path: Path, last: WorkerCounts) -> WorkerCounts:
    """The worker's counts now: signal it (SIGUSR1) and wait for the file it writes."""
    worker.send_signal(signal.SIGUSR1)
    return _await_counts(worker, path, last.seq, COUNTS_TIMEOUT)


def start_bench_worker(
    address: str,
    kubeconfig: Path,
    task_queue: str,
    namespace: str,
    *,
    cache: bool = True,
    counts: Path | None = None,
    metrics: str | None = None,
    placement_rounds: int | None = None,
) -> subprocess.Popen[bytes]:
    """This module's worker in a process of its own (the calibration benchmark and the Pulumi
    integration test run it).

    ``cache``: the watch-fed cache, as ``calibrator worker`` has it. ``counts``: a file the
    worker writes its own request counts to, when ready and on SIGUSR1 (``worker_counts``).
    ``metrics``: IP:PORT for its Prometheus endpoint. ``placement_rounds``: the worker's
    re-placement rounds at once (its default when None).
    """
    argv = [sys.executable, "-m", "benchmarks.bench_worker",
            address, str(kubeconfig), task_queue, namespace]  # fmt: skip
    if not cache:
        argv.append("--no-cache")
    if counts is not None:
        argv += ["--counts", str(counts)]
    if metrics is not None:
        argv += ["--metrics", metrics]
    if placement_rounds is not None:
        argv += ["--placement-rounds", str(placement_rounds)]
    return subprocess.Popen(argv, cwd=Path(__file__).resolve().parents[1])


async def worker_main(argv: list[str]) -> None:
    """The benchmark's worker: the product's backend and worker, its requests counted."""
    from orchestrator.kube.backend.fleet import KubeFleetBackend  # noqa: PLC0415
    from workflows.activities.placement import PLACEMENT_ROUNDS_AT_ONCE  # noqa: PLC0415
    from workflows.telemetry import runtime_for  # noqa: PLC0415
    from workflows.worker import build_worker  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_worker")
    for name in ("address", "kubeconfig", "task_queue", "namespace"):
        parser.add_argument(name)
    parser.add_argument("--no-cache", dest="cache", action="store_false")
    parser.add_argument("--counts", type=Path)
    parser.add_argument("--metrics", help="IP:PORT to serve the worker's Prometheus metrics on")
    parser.add_argument("--placement-rounds", type=int, default=PLACEMENT_ROUNDS_AT_ONCE)
    args = parser.parse_args(argv)
    api = api_client(args.kubeconfig)
    counts = RequestCounts()
    if args.counts is not None:
        observe_requests(api, counts.observe)  # before the backend hardens it: every attempt
    backend = KubeFleetBackend(api, args.namespace, cache=args.cache)
    try:
        backend.start()  # as ``calibrator worker``: the cache LISTs and watches from now on
        runtime = None if args.metrics is None else runtime_for(args.metrics)
        temporal = await Client.connect(args.address, runtime=runtime)
        if args.counts is not None:
            # The start, reported apart: the cache's sync (or one LIST of each kind without it).
            await backend.inventory()
            seq = 0

            def dump() -> None:
                nonlocal seq
                seq += 1
                write_counts(args.counts, seq, counts)

            # The handler first: the benchmark signals as soon as it sees the first file.
            asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump)
            dump()
        worker = build_worker(
            temporal, backend, task_queue=args.task_queue, placement_rounds=args.placement_rounds
        )
        await worker.run()
    finally:
        backend.close()


if __name__ == "__main__":
    asyncio.run(worker_main(sys.argv[1:]))
