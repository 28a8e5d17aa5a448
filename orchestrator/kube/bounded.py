"""Bounded raw requests to a workload cluster: one deadline for many calls, no retries.

A live inventory asks every workload cluster several things (discovery, Nodes, metrics, LISTs);
each call gets what is left of one shared deadline, and the client retries nothing, so one
cluster costs at most about its timeout whatever answers slowly. ``workload`` and ``apiusage``
both send their requests through here.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from kubernetes import client, config

REASON_LIMIT = 300
CHUNK = 64 * 1024  # bytes per read of a streamed body


class Deadline:
    """Seconds left for the requests of one probe or observation; TimeoutError once none are."""

    def __init__(self, timeout: float) -> None:
        self._end = time.monotonic() + timeout

    def left(self) -> float:
        """Seconds left, > 0; raises TimeoutError once the deadline has passed."""
        remaining = self._end - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no answer in time")
        return remaining


def _send(
    api: client.ApiClient,
    path: str,
    deadline: Deadline,
    accept: str,
    query: Mapping[str, Any],
    *,
    headers: Mapping[str, str] | None = None,
) -> Any:
    request = api.param_serialize(
        "GET",
        path,
        query_params=[(k, v) for k, v in query.items() if v is not None],
        header_params={"Accept": accept, **(headers or {})},
        auth_settings=["BearerToken"],
    )
    return api.call_api(*request, _request_timeout=deadline.left())


def get_json(
    api: client.ApiClient,
    path: str,
    deadline: Deadline,
    query: Mapping[str, Any] | None = None,
    accept: str = "application/json",
) -> dict[str, Any]:
    """GET ``path`` as raw JSON (discovery paths have no generated method without a slash).

    ``query`` parameters whose value is None are left out (a first page has no ``continue``).
    """
    resp: Any = _send(api, path, deadline, accept, query or {})
    resp.read()
    if not 200 <= resp.status <= 299:
        raise client.ApiException(status=resp.status, reason=resp.reason)
    loaded: dict[str, Any] = json.loads(resp.data)
    return loaded


class BodyStream:
    """The body of one GET, read in chunks as they arrive, never whole (a context manager).

    The deadline is checked before every chunk (each read also waits at most what was left when
    the request was sent), and the connection is released however the caller stops reading.
    ``wire_bytes`` is what crossed the network (compressed when the server compressed: the body
    is inflated here, in bounded steps, rather than by urllib3, which cannot count the bytes of a
    chunked body).
    """

    def __init__(self, resp: Any, deadline: Deadline) -> None:
        self._raw = resp.response
        self._deadline = deadline
        self.wire_bytes = 0
        if not 200 <= resp.status <= 299:
            self.close()
            raise client.ApiException(status=resp.status, reason=resp.reason)
        self._gzip = self._raw.headers.get("Content-Encoding", "").strip().lower() == "gzip"

    def __iter__(self) -> Iterator[bytes]:
        """Decoded chunks of at most ``CHUNK`` bytes, even from a body that inflates 1000:1."""
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if self._gzip else None
        for chunk in self._raw.stream(CHUNK, decode_content=False):
            self._deadline.left()
            self.wire_bytes += len(chunk)
            if inflate is None:
                yield chunk
                continue
            data = chunk
            while data:
                yield inflate.decompress(data, CHUNK)
                data = inflate.unconsumed_tail
        if inflate is not None:
            yield inflate.flush()

    def close(self) -> None:
        """Give the connection back (or drop it, when the body was not read to its end)."""
        self._raw.release_conn()

    def __enter__(self) -> BodyStream:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def get_stream(
    api: client.ApiClient, path: str, deadline: Deadline, accept: str, *, gzip: bool = False
) -> BodyStream:
    """GET ``path`` for reading as a stream (``gzip``: ask the server to compress it)."""
    headers = {"Accept-Encoding": "gzip"} if gzip else {}
    return BodyStream(_send(api, path, deadline, accept, {}, headers=headers), deadline)


def _clip(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= REASON_LIMIT else line[: REASON_LIMIT - 1] + "…"


def failure_reason(err: BaseException) -> str:
    """Why a request failed, in a few words (no credentials: only status, host, error kind)."""
    status = getattr(err, "status", None)
    if isinstance(status, int) and status:
        return f"API server answered {status} {getattr(err, 'reason', '') or ''}".strip()
    if isinstance(err, TimeoutError):
        return str(err) or "no answer in time"
    cause = getattr(err, "reason", None)  # urllib3's MaxRetryError wraps the real error
    text = str(cause or err) or type(err).__name__
    if text.startswith("HTTP") and "): " in text:  # "HTTPSConnection(host=..., port=...): why"
        text = text.split("): ", 1)[1]
    return _clip(text)


def no_retry_client(kubeconfig: dict[str, Any], host: str = "") -> client.ApiClient:
    """A client that does not retry: the caller's deadline, not urllib3, bounds its time.

    ``host`` (``https://10.0.0.5:6443``) replaces the kubeconfig's server, keeping its
    credentials and CA: TLS is verified against that CA for that host, never switched off.
    """
    cfg = client.Configuration()
    config.load_kube_config_from_dict(kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
    cfg.retries = False
    if host:
        cfg.host = host
    return client.ApiClient(cfg)
