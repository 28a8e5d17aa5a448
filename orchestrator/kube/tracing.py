"""OpenTelemetry CLIENT spans for the requests of a kube client (``client.observe_requests``).

``KubeFleetBackend`` installs ``request_spans(tracer)`` on the management cluster's client and on
every workload-cluster client it opens, when the worker traces (``workflows.telemetry``).
OpenTelemetry is imported only when a tracer is given.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from orchestrator.kube.client import Answered, RequestObserver


def request_route(url: str) -> str:
    """The request's path with namespace and object names replaced: a low-cardinality span name.

    ``/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters/a/status`` becomes
    ``/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/clusters/{name}/status``.
    """
    path = urlsplit(url).path
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        head, rest = parts[:2], parts[2:]
    elif parts[:1] == ["apis"]:
        head, rest = parts[:3], parts[3:]
    else:
        return "/" + "/".join(parts)
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = ["namespaces", "{namespace}", *rest[2:]]
        resource_at = 2
    else:
        resource_at = 0
    if len(rest) > resource_at + 1:
        rest[resource_at + 1] = "{name}"
    return "/" + "/".join(head + rest)


def request_spans(tracer: Any) -> RequestObserver:
    """An ``orchestrator.kube.client.observe_requests`` observer: one CLIENT span per request.

    Attributes follow the OpenTelemetry HTTP client conventions; a status of 400 or more marks
    the span as an error. The span ends when the response headers arrive.
    """
    from opentelemetry.trace import SpanKind, Status, StatusCode

    @contextmanager
    def observe(method: str, url: str, headers: Mapping[str, str]) -> Iterator[Answered]:
        route = request_route(url)
        parts = urlsplit(url)
        attributes: dict[str, Any] = {
            "http.request.method": method,
            "url.full": url,
            "url.template": route,
            "server.address": parts.hostname or "",
        }
        if parts.port is not None:
            attributes["server.port"] = parts.port
        with tracer.start_as_current_span(
            f"{method} {route}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:

            def status(response: Any) -> None:
                code = int(response.status)
                span.set_attribute("http.response.status_code", code)
                if code >= 400:
                    span.set_attribute("error.type", str(code))
                    span.set_status(Status(StatusCode.ERROR))

            yield status

    return observe
