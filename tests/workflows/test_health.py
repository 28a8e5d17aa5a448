"""The health endpoint's answers, read over a real loopback socket, with the poll check faked.

``workflows.health`` behind its own seam (``PollCheck``): whether the Temporal server lists the
worker's polls is a fake here and the real server's in tests/workflows/test_health_dev_server.py.
The clock is a fake too, so reuse of an answer is tested without waiting.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest

from orchestrator.domain.errors import InputError
from testkit.prometheus import free_address
from workflows import health
from workflows.health import HealthServer, Polling


async def _get(sock: socket.socket, request: bytes) -> tuple[int, dict[str, Any], bytes]:
    host, port = sock.getsockname()[:2]
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(request)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, (json.loads(body) if body else {}), head


class Fake:
    """A worker in some state, and a server that lists its polls or not."""

    def __init__(self) -> None:
        self.state = health.RUNNING
        self.polling = Polling(workflow=True, activity=True)
        self.checks = 0
        self.now = 0.0

    async def check(self) -> Polling:
        self.checks += 1
        return self.polling


def _serve(fake: Fake, scenario: Any) -> Any:
    async def main() -> Any:
        sock = health.bind(free_address())
        server = HealthServer(lambda: fake.state, fake.check, "calibration", lambda: fake.now)
        await server.start(sock)
        try:
            return await scenario(sock)
        finally:
            await server.close()

    return asyncio.run(main())


def test_ready_while_running_and_polling_then_not() -> None:
    fake = Fake()

    async def scenario(sock: socket.socket) -> None:
        status, body, head = await _get(sock, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 200
        assert body == {
            "worker": "running", "taskQueue": "calibration",
            "workflowPoll": True, "activityPoll": True,
        }  # fmt: skip
        assert b"Connection: close" in head and len(head) + len(json.dumps(body)) < 300
        assert (await _get(sock, b"GET /livez HTTP/1.1\r\n\r\n"))[0] == 200
        # The server stops listing the activity polls: not ready, still alive.
        fake.polling = Polling(workflow=True, activity=False)
        fake.now += health.CHECK_INTERVAL
        status, body, _ = await _get(sock, b"GET /readyz HTTP/1.1\r\n\r\n")
        assert (status, body["activityPoll"]) == (503, False)
        assert (await _get(sock, b"GET /livez HTTP/1.1\r\n\r\n"))[0] == 200
        # The server cannot be asked: not ready, and why.
        fake.polling = Polling(error="cannot reach Temporal")
        fake.now += health.CHECK_INTERVAL
        status, body, _ = await _get(sock, b"GET /readyz?verbose=1 HTTP/1.1\r\n\r\n")
        assert (status, body["error"]) == (503, "cannot reach Temporal")
        # Starting (before the worker's run began): alive, not ready, the server is not asked.
        fake.state = health.STARTING
        checks = fake.checks
        status, body, _ = await _get(sock, b"GET /livez HTTP/1.1\r\n\r\n")
        assert (status, body) == (200, {"worker": "starting"})
        status, body, _ = await _get(sock, b"GET /readyz HTTP/1.1\r\n\r\n")
        assert (status, body["worker"], body["workflowPoll"]) == (503, "starting", False)
        # The worker stopped: neither alive nor ready, and the server is not asked.
        fake.state = health.STOPPED
        for path in (b"/livez", b"/readyz"):
            status, body, _ = await _get(sock, b"GET " + path + b" HTTP/1.1\r\n\r\n")
            assert (status, body["worker"]) == (503, "stopped")
        assert fake.checks == checks

    _serve(fake, scenario)


def test_probes_share_one_answer_per_interval() -> None:
    fake = Fake()

    async def scenario(sock: socket.socket) -> None:
        for _ in range(5):
            assert (await _get(sock, b"GET /readyz HTTP/1.1\r\n\r\n"))[0] == 200
        assert fake.checks == 1
        fake.now += health.CHECK_INTERVAL - 0.5
        await _get(sock, b"GET /readyz HTTP/1.1\r\n\r\n")
        assert fake.checks == 1
        fake.now += 0.5
        await _get(sock, b"GET /readyz HTTP/1.1\r\n\r\n")
        assert fake.checks == 2

    _serve(fake, scenario)


def test_a_no_is_asked_again_sooner_than_a_yes() -> None:
    fake = Fake()
    fake.polling = Polling(workflow=True, activity=False)  # the server has not seen both yet

    async def scenario(sock: socket.socket) -> None:
        assert (await _get(sock, b"GET /readyz HTTP/1.1\r\n\r\n"))[0] == 503
        assert (await _get(sock, b"GET /readyz HTTP/1.1\r\n\r\n"))[0] == 503
        assert fake.checks == 1
        fake.polling = Polling(workflow=True, activity=True)
        fake.now += health.RECHECK_INTERVAL
        assert (await _get(sock, b"GET /readyz HTTP/1.1\r\n\r\n"))[0] == 200
        assert fake.checks == 2

    _serve(fake, scenario)


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /metrics HTTP/1.1\r\n\r\n", 404),
        (b"GET / HTTP/1.1\r\n\r\n", 404),
        (b"POST /readyz HTTP/1.1\r\n\r\n", 405),
        (b"nonsense\r\n\r\n", 400),
    ],
)
def test_other_requests(request_bytes: bytes, status: int) -> None:
    async def scenario(sock: socket.socket) -> int:
        return (await _get(sock, request_bytes))[0]

    assert _serve(Fake(), scenario) == status


def test_head_has_no_body_and_an_oversized_request_gets_no_answer() -> None:
    async def scenario(sock: socket.socket) -> tuple[int, dict[str, Any], bytes]:
        head = await _get(sock, b"HEAD /livez HTTP/1.1\r\n\r\n")
        host, port = sock.getsockname()[:2]
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /livez HTTP/1.1\r\nX: " + b"a" * (2 * health.MAX_REQUEST))
        await writer.drain()
        rest = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert rest == b""  # closed without an answer
        return head

    status, body, _ = _serve(Fake(), scenario)
    assert (status, body) == (200, {})


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [
        (None, {}, "127.0.0.1:9465"),
        (None, {"CALIBRATOR_HEALTH_ADDRESS": "0.0.0.0:8080"}, "0.0.0.0:8080"),
        ("[::1]:9465", {"CALIBRATOR_HEALTH_ADDRESS": "0.0.0.0:8080"}, "[::1]:9465"),
        ("off", {}, None),
        (None, {"CALIBRATOR_HEALTH_ADDRESS": "off"}, None),
    ],
)
def test_address(flag: str | None, env: dict[str, str], expected: str | None) -> None:
    assert health.health_address(flag, env) == expected


def test_a_busy_port_is_bad_input() -> None:
    sock = health.bind(free_address())
    try:
        host, port = sock.getsockname()[:2]
        with pytest.raises(InputError, match=f"cannot serve health on {host}:{port}"):
            health.bind(f"{host}:{port}")
    finally:
        sock.close()
