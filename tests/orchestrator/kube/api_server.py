"""A tiny HTTP server that answers like an API server for a few paths (real sockets, real client).

``api_server`` answers /api/v1/nodes with an empty list and 404 elsewhere. ``faulty_server``
first plays a script of faults (an error status with headers, a connection reset, an answer held
back until the test ends), one per request, then answers like ``api_server``; it records every
request's method and path.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kubernetes import client

NODES: dict[str, object] = {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": []}


@dataclass(frozen=True)
class Fault:
    """What the server does with one request: ``status`` (with ``headers``), ``reset`` or ``hold``."""

    kind: str
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Script:
    faults: list[Fault]
    requests: list[tuple[str, str]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next(self, method: str, path: str) -> Fault | None:
        with self.lock:
            self.requests.append((method, path))
            return self.faults.pop(0) if self.faults else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as an API server does

    def _answer(self, status: int, body: dict[str, object], headers: dict[str, str]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        script: _Script | None = getattr(self.server, "script", None)
        fault = script.next(self.command, self.path) if script else None
        if fault is not None and script is not None:
            if fault.kind == "reset":
                # RST instead of FIN: what a crashed proxy or a dropped connection looks like.
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()
                self.close_connection = True
                return
            if fault.kind == "hold":
                script.release.wait(30)  # longer than the client waits; released at teardown
                self.close_connection = True
                return
            status = {"kind": "Status", "code": fault.status, "reason": "Injected"}
            self._answer(fault.status, status, fault.headers)
            return
        found = self.path.split("?")[0] == "/api/v1/nodes"
        body: dict[str, object] = (
            NODES if found else {"kind": "Status", "code": 404, "reason": "NotFound"}
        )
        self._answer(200 if found else 404, body, {})

    do_GET = do_PATCH = do_POST = do_PUT = do_DELETE = _handle

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    script: _Script | None = None

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a reset connection is the point of some scripts


@contextmanager
def _serve(script: _Script | None) -> Iterator[client.ApiClient]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.script = script
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{server.server_address[1]}"
    api = client.ApiClient(config)
    try:
        yield api
    finally:
        if script is not None:
            script.release.set()
        api.close()  # type: ignore[no-untyped-call]
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextmanager
def api_server() -> Iterator[client.ApiClient]:
    """An ApiClient talking to a local server: /api/v1/nodes is an empty list, the rest 404."""
    with _serve(None) as api:
        yield api


@contextmanager
def faulty_server(
    faults: Sequence[Fault],
) -> Iterator[tuple[client.ApiClient, list[tuple[str, str]]]]:
    """(client, requests seen): the server plays ``faults`` first, then answers normally."""
    script = _Script(list(faults))
    with _serve(script) as api:
        yield api, script.requests
