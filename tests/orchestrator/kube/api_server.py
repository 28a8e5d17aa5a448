"""A tiny HTTP server that answers like an API server for a few paths (real sockets, real client)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kubernetes import client

NODES = {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": []}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        found = self.path.split("?")[0] == "/api/v1/nodes"
        body = json.dumps(
            NODES if found else {"kind": "Status", "code": 404, "reason": "NotFound"}
        ).encode()
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def api_server() -> Iterator[client.ApiClient]:
    """An ApiClient talking to a local server: /api/v1/nodes is an empty list, the rest 404."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{server.server_address[1]}"
    api = client.ApiClient(config)
    try:
        yield api
    finally:
        api.close()  # type: ignore[no-untyped-call]
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
