"""``/readyz`` and ``/livez`` of a real worker on the real Temporal dev server.

The worker (``run_worker`` with a health socket, as ``calibrator worker`` runs it) polls its
task queue; the endpoint turns ready once the server lists its polls, while an endpoint asking
about a queue nobody polls stays not ready; when the worker stops, the endpoint is gone with it.
Waits are bounded polls of the endpoint's own answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from typing import Any

import pytest

from testkit.prometheus import free_address
from testkit.workflow_harness import cluster, in_memory, start_dev_server
from workflows import health
from workflows.health import HealthServer, server_poll_check
from workflows.worker import run_worker

READY_TIMEOUT = 60.0


async def _get(address: str, path: str) -> tuple[int, dict[str, Any]]:
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET {path} HTTP/1.1\r\nHost: probe\r\n\r\n".encode())
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 15)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def test_the_worker_is_ready_once_the_server_sees_it_poll_and_the_endpoint_stops_with_it() -> None:
    fleet = in_memory(cluster("solo", "v1.32.9"))
    address = free_address()
    queue = f"health-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        env = await start_dev_server()
        try:
            client = env.client
            worker = asyncio.ensure_future(
                run_worker(client, fleet, task_queue=queue, health=health.bind(address))
            )
            deadline = time.monotonic() + READY_TIMEOUT
            while True:
                try:
                    status, body = await _get(address, "/readyz")
                except ConnectionRefusedError:  # not listening yet
                    status, body = 0, {}
                if status == 200:
                    break
                assert time.monotonic() < deadline, f"not ready in {READY_TIMEOUT:.0f}s: {body}"
                await asyncio.sleep(0.5)
            assert body == {
                "worker": "running", "taskQueue": queue,
                "workflowPoll": True, "activityPoll": True,
            }  # fmt: skip
            assert await _get(address, "/livez") == (200, {"worker": "running"})

            # The same question about a queue nobody polls: the server lists no poll of ours.
            idle = server_poll_check(client, f"{queue}-idle", client.identity)
            assert await idle() == health.Polling(workflow=False, activity=False)
            other = server_poll_check(client, queue, "someone-else@nowhere")
            assert await other() == health.Polling(workflow=False, activity=False)
            # A question the server refuses (no queue name) is a reason, not an exception.
            bad = HealthServer(lambda: health.RUNNING, server_poll_check(client, "", "x"), "")
            status, body = await bad.answer("GET", "/readyz")
            assert status == 503 and body["error"], body

            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(worker, 30)
            with pytest.raises(ConnectionRefusedError):  # the endpoint did not outlive it
                await _get(address, "/livez")
        finally:
            await env.shutdown()

    asyncio.run(main())
