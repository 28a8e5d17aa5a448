"""A fault-injecting HTTPS proxy between the worker and kube-apiserver (issue 11, "API faults").

It terminates TLS itself (its own CA and serving certificate, made with the local plane's PKI
helpers) and opens its own TLS connection to kube-apiserver, verifying the plane's CA. The worker
authenticates with a bearer token, which passes through unchanged; a client certificate would
not (the proxy cannot present it), which is why the worker's ServiceAccount token is used.

For a share of the requests (``rate``, drawn from a seeded RNG) it injects one fault, chosen
uniformly among those that apply to the request:

* ``conflict``: 409 Conflict (writes only), the request is not forwarded;
* ``throttle``: 429 Too Many Requests with ``Retry-After``, not forwarded;
* ``error500`` / ``error503``: 500 Internal Server Error / 503 Service Unavailable, not forwarded;
* ``reset``: the connection is reset (RST) after the request was read, not forwarded;
* ``delay``: forwarded, and the answer is held back ``delay`` seconds (past the client's timeout)
  before it is sent: the write happened but the client never learns it.

``version_write_faults`` scripts the fault of the first version writes (say conflict, delay,
reset), so the paths that matter most - a 409 re-read, a write whose answer was lost - are
exercised in every run instead of by chance.

It counts requests, faults by kind, and every PATCH that carries the step annotation
``calibrator.dev/step`` (each version write of the worker does, and only those) with the status
kube-apiserver gave it: a 2xx is an effective version write, so "exactly one effective version
write per step" is checked where the writes really go, whatever the worker believed.

HTTP/1.1 keep-alive on both sides; bodies delimited by Content-Length or chunked encoding. The
proxy runs its asyncio loop on a thread of its own so synchronous tests can drive it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import socket
import ssl
import struct
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from orchestrator.localplane import pki

STEP_ANNOTATION = "calibrator.dev/step"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
KINDS = ("conflict", "throttle", "error500", "error503", "reset", "delay")
REASONS = {
    "conflict": (409, "Conflict"),
    "throttle": (429, "TooManyRequests"),
    "error500": (500, "InternalError"),
    "error503": (503, "ServiceUnavailable"),
}
PHRASES = {409: "Conflict", 429: "Too Many Requests", 500: "Internal Server Error",
           503: "Service Unavailable"}  # fmt: skip
HEAD_LIMIT = 64 * 1024


@dataclass(frozen=True)
class VersionWrite:
    """A PATCH carrying the step annotation, and what kube-apiserver answered (0: never sent)."""

    path: str
    step: str
    status: int
    fault: str = ""

    @property
    def effective(self) -> bool:
        """Whether the API server accepted the write (a 2xx)."""
        return 200 <= self.status <= 299


@dataclass
class ProxyStats:
    """What went through the proxy (read under ``lock``)."""

    requests: int = 0
    forwarded: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    writes: list[VersionWrite] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> dict[str, Any]:
        """A consistent copy of the counters, for a report."""
        with self.lock:
            return {
                "requests": self.requests,
                "forwarded": self.forwarded,
                "faults": dict(sorted(self.faults.items())),
                "faults_total": sum(self.faults.values()),
                "version_writes": len(self.writes),
                "effective_version_writes": sum(1 for w in self.writes if w.effective),
            }

    def effective_writes(self) -> Counter[tuple[str, str]]:
        """(object path, step id) -> effective writes: every value must be 1."""
        with self.lock:
            return Counter((w.path.split("?")[0], w.step) for w in self.writes if w.effective)


@dataclass
class _Request:
    method: str
    target: str
    head: bytes
    body: bytes

    def step(self) -> str | None:
        """The step annotation a PATCH sets, if any."""
        if self.method != "PATCH" or not self.body:
            return None
        try:
            doc = json.loads(self.body)
            value = ((doc.get("metadata") or {}).get("annotations") or {}).get(STEP_ANNOTATION)
        except (ValueError, AttributeError):
            return None
        return str(value) if value else None


def _headers(head: bytes) -> dict[str, str]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    out: dict[str, str] = {}
    for line in lines:
        if ":" in line:
            name, value = line.split(":", 1)
            out[name.strip().lower()] = value.strip()
    return out


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    """The body after a head: Content-Length, or chunked (re-sent as read, framing included)."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        out = bytearray()
        while True:
            line = await reader.readuntil(b"\r\n")
            out += line
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers, then the blank line
                    trailer = await reader.readuntil(b"\r\n")
                    out += trailer
                    if trailer == b"\r\n":
                        return bytes(out)
            out += await reader.readexactly(size + 2)
    length = int(headers.get("content-length") or 0)
    return await reader.readexactly(length) if length else b""


class FaultProxy:
    """``start()`` it, point a kubeconfig at ``url`` with ``ca_cert``; ``stop()`` at the end."""

    def __init__(
        self,
        upstream: str,
        upstream_ca: Path,
        workdir: Path,
        *,
        rate: float,
        seed: int,
        delay: float,
        retry_after: int = 1,
        kinds: tuple[str, ...] = KINDS,
        version_write_faults: tuple[str, ...] = (),
    ) -> None:
        parts = urlsplit(upstream)
        assert parts.scheme == "https" and parts.hostname and parts.port, upstream
        self._upstream = (parts.hostname, parts.port)
        self._upstream_tls = ssl.create_default_context(cafile=str(upstream_ca))
        ca = pki.ensure_ca(workdir, name="faultproxy-ca")
        served = pki.issue(ca, workdir, "faultproxy", common_name="faultproxy")
        self.ca_cert = ca.cert
        self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._tls.load_cert_chain(served.cert, served.key)
        self.rate = rate
        self.delay = delay
        self.retry_after = retry_after
        self.kinds = kinds
        self._scripted = list(version_write_faults)
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self.stats = ProxyStats()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        """Where the worker connects (its kubeconfig's server)."""
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> FaultProxy:
        """Listen on a free port of 127.0.0.1 (``port``) and serve in a thread of its own."""
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        future.result(timeout=30)
        return self

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", 0, ssl=self._tls, ssl_handshake_timeout=30
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    def stop(self) -> None:
        """Close the listener and every connection, and end the thread."""

        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
        self._loop.close()

    def set_rate(self, rate: float) -> None:
        """Change the share of faulty requests (0 turns injection off)."""
        with self._rng_lock:
            self.rate = rate

    def kubeconfig(self, path: Path, token: str) -> Path:
        """A kubeconfig for this proxy: its CA, and ``token`` as the bearer token."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "faultproxy", "cluster": {
                "server": self.url,
                "certificate-authority-data": base64.b64encode(self.ca_cert.read_bytes()).decode(),
            }}],
            "users": [{"name": "worker", "user": {"token": token}}],
            "contexts": [{"name": "faultproxy",
                          "context": {"cluster": "faultproxy", "user": "worker"}}],
            "current-context": "faultproxy",
        }  # fmt: skip
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    # ------------------------------------------------------------------ per connection

    def _draw(self, method: str, step: str | None) -> str:
        """The fault for one request ("" for none): scripted for version writes, else drawn."""
        with self._rng_lock:
            if step and self._scripted:
                return self._scripted.pop(0)
            if self._rng.random() >= self.rate:
                return ""
            kinds = [k for k in self.kinds if k != "conflict" or method in WRITES]
            return self._rng.choice(kinds) if kinds else ""

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                request = await self._read_request(reader)
                if request is None:
                    return
                upstream, keep = await self._one(request, writer, upstream)
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ssl.SSLError, OSError):  # fmt: skip
            return
        except asyncio.CancelledError:
            return
        finally:
            self._tasks.discard(task)
            if upstream is not None:
                upstream[1].close()
            with contextlib.suppress(Exception):
                writer.close()

    @staticmethod
    async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None  # the client closed a kept-alive connection
        if len(head) > HEAD_LIMIT:
            return None
        method, target = head.split(b" ", 2)[:2]
        body = await _read_body(reader, _headers(head))
        return _Request(method.decode(), target.decode(), head, body)

    async def _one(
        self,
        request: _Request,
        writer: asyncio.StreamWriter,
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None,
    ) -> tuple[tuple[asyncio.StreamReader, asyncio.StreamWriter] | None, bool]:
        """Handle one request; (upstream connection to keep, keep the client connection)."""
        step = request.step()
        fault = self._draw(request.method, step)
        with self.stats.lock:
            self.stats.requests += 1
            if fault:
                self.stats.faults[fault] += 1
        if fault in REASONS:
            if step:
                self._wrote(request, step, 0, fault)
            await self._status(writer, *REASONS[fault])
            return upstream, True
        if fault == "reset":
            if step:
                self._wrote(request, step, 0, fault)
            self._reset(writer)
            return upstream, False
        if upstream is None:
            host, port = self._upstream
            upstream = await asyncio.open_connection(
                host, port, ssl=self._upstream_tls, server_hostname=host
            )
        up_reader, up_writer = upstream
        up_writer.write(request.head + request.body)
        await up_writer.drain()
        head = await up_reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        headers = _headers(head)
        close_delimited = (
            "content-length" not in headers
            and "chunked" not in headers.get("transfer-encoding", "").lower()
        )
        body = await (up_reader.read() if close_delimited else _read_body(up_reader, headers))
        with self.stats.lock:
            self.stats.forwarded += 1
        if step:
            self._wrote(request, step, status, fault)
        keep_upstream = not close_delimited and headers.get("connection", "").lower() != "close"
        if not keep_upstream:
            up_writer.close()
            upstream = None
        if fault == "delay":
            await asyncio.sleep(self.delay)  # the client gave up meanwhile
            with contextlib.suppress(Exception):
                writer.write(head + body)
                await writer.drain()
            return upstream, False
        writer.write(head + body)
        await writer.drain()
        return upstream, keep_upstream

    def _wrote(self, request: _Request, step: str, status: int, fault: str) -> None:
        with self.stats.lock:
            self.stats.writes.append(VersionWrite(request.target, step, status, fault))

    async def _status(self, writer: asyncio.StreamWriter, code: int, reason: str) -> None:
        body = json.dumps({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"injected by faultproxy: {reason}", "reason": reason, "code": code,
        }).encode()  # fmt: skip
        head = [f"HTTP/1.1 {code} {PHRASES[code]}", "Content-Type: application/json",
                f"Content-Length: {len(body)}"]  # fmt: skip
        if code == 429:
            head.append(f"Retry-After: {self.retry_after}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await writer.drain()

    @staticmethod
    def _reset(writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport = writer.transport
        transport.abort()  # no TLS close_notify, no FIN: RST


def upstream_of(kubeconfig: Path) -> str:
    """The server URL of a kubeconfig's first cluster (the plane's kube-apiserver)."""
    config = yaml.safe_load(kubeconfig.read_text())
    return str(config["clusters"][0]["cluster"]["server"])
