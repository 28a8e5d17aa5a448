"""The worker's health endpoint: ``/livez`` (the worker runs) and ``/readyz`` (it polls its queue).

Why not ``/metrics`` for the kubelet's probes: the metrics page grows past 10 KiB with the SDK's
series, a probe reads only the start of it and closes, and the SDK's exporter then logs
"Error serving metrics connection ... Connection reset by peer" at every probe; and an answer
from the metrics exporter only says the process is alive, not that the worker takes work.

- ``GET /livez``: 200 from start-up until the Temporal worker has shut down (``starting`` and
  ``running`` are alive, ``stopped`` is not). That this small server answers at all also says
  the worker's event loop is not blocked. It does not depend on the Temporal server, so an
  outage of Temporal does not restart every worker.
- ``GET /readyz``: 200 when, besides, the Temporal server lists this worker's identity among
  the recent pollers of its task queue, for workflow tasks and for activity tasks (a poll seen
  within ``POLL_FRESHNESS``: polls are long polls of about a minute when there is no work).
  Read with ``DescribeTaskQueue``, at most once per ``CHECK_INTERVAL`` while the answer is yes
  (all probes share it) and once per ``RECHECK_INTERVAL`` while it is no, with ``CHECK_TIMEOUT``. In a rolling update the new pod
  is ready only once it takes work.

Each answer is one short JSON document (under 300 bytes) with ``Connection: close``; any other
path is 404, any other method 405. The server serves on the worker's event loop and closes with
the worker (``HealthServer.close``), binds one IP:PORT (127.0.0.1:9465 by default; the pod binds
0.0.0.0 for the kubelet), and reads at most ``MAX_REQUEST`` bytes of a request for at most
``READ_TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from orchestrator.domain.errors import InputError
from workflows.telemetry import parse_metrics_address

DEFAULT_HEALTH_ADDRESS = "127.0.0.1:9465"
HEALTH_ADDRESS_ENV = "CALIBRATOR_HEALTH_ADDRESS"
POLL_FRESHNESS = timedelta(minutes=2)
CHECK_INTERVAL = 10.0  # seconds a "polling" answer of the server is reused
RECHECK_INTERVAL = 1.0  # seconds a "not polling" answer is: a starting worker turns ready soon
CHECK_TIMEOUT = 3.0  # both questions at once: under the probes' 5 s timeout
READ_TIMEOUT = 5.0
MAX_REQUEST = 8192


@dataclass(frozen=True)
class Polling:
    """What the Temporal server says of this worker's polls (``error`` when it could not say)."""

    workflow: bool = False
    activity: bool = False
    error: str = ""

    @property
    def ok(self) -> bool:
        """Both kinds of task are polled."""
        return self.workflow and self.activity


PollCheck = Callable[[], Awaitable[Polling]]
STARTING, RUNNING, STOPPED = "starting", "running", "stopped"


def worker_state(worker: Any) -> str:
    """STARTING before ``Worker.run`` began, RUNNING while it runs, STOPPED once it shut down."""
    if worker.is_shutdown:
        return STOPPED
    return RUNNING if worker.is_running else STARTING


def health_address(flag: str | None, environ: Mapping[str, str]) -> str | None:
    """The flag, else ``CALIBRATOR_HEALTH_ADDRESS``, else the loopback default (None: ``off``)."""
    if flag is not None:
        return parse_metrics_address(flag, "--health-address", DEFAULT_HEALTH_ADDRESS)
    if HEALTH_ADDRESS_ENV in environ:
        return parse_metrics_address(
            environ[HEALTH_ADDRESS_ENV], HEALTH_ADDRESS_ENV, DEFAULT_HEALTH_ADDRESS
        )
    return DEFAULT_HEALTH_ADDRESS


def bind(address: str) -> socket.socket:
    """A listening socket on ``address`` (IP:PORT, as ``telemetry.parse_metrics_address`` gives).

    Bound before anything connects, so a busy port is bad input (InputError), not a failure
    after the worker started.
    """
    host, _, port = address.rpartition(":")
    family = socket.AF_INET6 if host.startswith("[") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), int(port)))
        sock.listen(16)
    except OSError as err:
        sock.close()
        raise InputError(f"cannot serve health on {address}: {err.strerror or err}") from None
    sock.setblocking(False)
    return sock


def server_poll_check(client: Client, task_queue: str, identity: str) -> PollCheck:
    """Ask the Temporal server whether ``identity`` polled ``task_queue`` recently."""

    async def polled(kind: TaskQueueType.ValueType) -> bool:
        answer = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=kind,
            ),
            timeout=timedelta(seconds=CHECK_TIMEOUT),
        )
        since = datetime.now(UTC) - POLL_FRESHNESS
        return any(
            p.identity == identity and p.last_access_time.ToDatetime().replace(tzinfo=UTC) >= since
            for p in answer.pollers
        )

    async def check() -> Polling:
        try:
            workflow, activity = await asyncio.gather(
                polled(TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW),
                polled(TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY),
            )
            return Polling(workflow=workflow, activity=activity)
        except Exception as err:  # the server's answer is the signal; its failure is one too
            return Polling(error=str(err)[:120] or type(err).__name__)

    return check


class HealthServer:
    """Answers ``/livez`` and ``/readyz`` for one worker until ``close``."""

    def __init__(
        self,
        state: Callable[[], str],
        poll_check: PollCheck,
        task_queue: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._state = state
        self._check = poll_check
        self._task_queue = task_queue
        self._clock = clock
        self._last: tuple[float, Polling] | None = None
        self._lock = asyncio.Lock()
        self._server: asyncio.Server | None = None

    async def start(self, sock: socket.socket) -> None:
        """Serve on the bound ``sock`` (``bind``)."""
        self._server = await asyncio.start_server(self._serve, sock=sock, limit=MAX_REQUEST)

    async def close(self) -> None:
        """Stop listening and wait for open connections to end."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def polling(self) -> Polling:
        """The server's answer, reused for CHECK_INTERVAL seconds (RECHECK_INTERVAL if not ok)."""
        async with self._lock:
            now = self._clock()
            if self._last is not None:
                asked, answer = self._last
                if now - asked < (CHECK_INTERVAL if answer.ok else RECHECK_INTERVAL):
                    return answer
            self._last = (now, await self._check())
            return self._last[1]

    async def answer(self, method: str, path: str) -> tuple[int, dict[str, Any]]:
        """Status and body for a request line's method and path."""
        if path not in ("/livez", "/readyz"):
            return 404, {"error": "not found: /livez or /readyz"}
        if method not in ("GET", "HEAD"):
            return 405, {"error": "GET only"}
        state = self._state()
        running = state == RUNNING
        body: dict[str, Any] = {"worker": state}
        if path == "/livez":
            return (503 if state == STOPPED else 200), body
        polling = await self.polling() if running else Polling()
        body.update(taskQueue=self._task_queue, workflowPoll=polling.workflow)
        body["activityPoll"] = polling.activity
        if polling.error:
            body["error"] = polling.error
        return (200 if running and polling.ok else 503), body

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT)
            except (asyncio.LimitOverrunError, asyncio.IncompleteReadError, TimeoutError):
                return
            if len(head) > MAX_REQUEST:
                return
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            if len(parts) != 3:
                status, body = 400, {"error": "bad request"}
            else:
                status, body = await self.answer(parts[0], parts[1].split("?", 1)[0])
            payload = json.dumps(body, separators=(",", ":")).encode()
            reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
            writer.write(
                f"HTTP/1.1 {status} {reason.get(status, 'Service Unavailable')}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + (payload if parts[0] != "HEAD" else b"")
            )
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
