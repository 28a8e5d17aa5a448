"""The fault proxy itself, in front of a small local TLS server (no plane needed): TLS
re-terminated, the bearer token passed through, bodies relayed (chunked too), every kind of
fault injected and counted, scripted faults on the first version writes, effective writes
counted by step."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from kubernetes import client

from orchestrator.kube.client import RequestPolicy, api_client, harden
from orchestrator.localplane import pki
from testkit.faultproxy import KINDS, STEP_ANNOTATION, FaultProxy

N = 25  # rounds of one list and one version write
FAST = RequestPolicy(timeout=0.75, attempts=8, backoff=0.01, max_backoff=0.05, retry_after_cap=0.05)


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    tokens: ClassVar[list[str]] = []

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.tokens.append(self.headers.get("Authorization", ""))
        data = json.dumps({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": []})
        payload = data.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.path.startswith("/api/v1/nodes"):  # kube-apiserver streams lists chunked
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (payload[:7], payload[7:]):
                self.wfile.write(b"%x\r\n" % len(part) + part + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_PATCH = _handle

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    ca = pki.ensure_ca(tmp_path / "upstream")
    served = pki.issue(ca, tmp_path / "upstream", "server", common_name="upstream")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    server.daemon_threads = True
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(served.cert, served.key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Upstream.tokens = []
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", ca.cert
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_faults_are_injected_counted_and_ridden_out(
    upstream: tuple[str, Path], tmp_path: Path
) -> None:
    url, ca = upstream
    proxy = FaultProxy(
        url, ca, tmp_path / "proxy", rate=0.4, seed=3, delay=1.5,
        version_write_faults=("conflict", "delay", "reset"),
    ).start()  # fmt: skip
    retries: list[str] = []
    try:
        api = api_client(proxy.kubeconfig(tmp_path / "kubeconfig", "secret-token"))
        harden(api, FAST, lambda method, url, why, delay: retries.append(why))
        core = client.CoreV1Api(api)
        conflicts = 0
        for i in range(N):
            assert core.list_node().items == []
            body = {"metadata": {"annotations": {STEP_ANNOTATION: f"s{i}"}}}
            while True:  # what the backend does on 409: re-read, decide, write again
                try:
                    core.patch_namespace(f"ns{i}", body)
                    break
                except client.ApiException as err:
                    assert err.status == 409
                    conflicts += 1
    finally:
        proxy.stop()
    stats = proxy.stats.snapshot()
    assert set(stats["faults"]) == set(KINDS), stats
    assert stats["faults_total"] == sum(stats["faults"].values())
    assert (
        stats["requests"] == stats["forwarded"] + stats["faults_total"] - stats["faults"]["delay"]
    )
    assert set(_Upstream.tokens) == {"Bearer secret-token"}  # passed through, never replaced
    # The scripted faults met the first three version writes, in order.
    assert [w.fault for w in proxy.stats.writes[:3]] == ["conflict", "delay", "reset"]
    assert conflicts == stats["faults"]["conflict"]
    effective = proxy.stats.effective_writes()
    assert len(effective) == N
    # These PATCHes are unconditional, so a held answer's retry writes again: counted as such
    # (the worker's writes are conditional and do not; the integration test asserts 1 each).
    held = sum(1 for w in proxy.stats.writes if w.fault == "delay")
    assert sum(effective.values()) - N >= held > 0
    assert "ReadTimeoutError" in retries and "ProtocolError" in retries
