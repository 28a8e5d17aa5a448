"""API clients and server-side apply.

Patches are built as data first (plain dicts) and applied here, so callers stay testable and every
write is an idempotent server-side apply with one field manager.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import urllib3
from kubernetes import client, config
from kubernetes.client import rest
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

FIELD_MANAGER = "fleet-calibrator"
# ``api_client``'s name for "the pod's own ServiceAccount" (client-go's in-cluster config).
IN_CLUSTER = "in-cluster"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
PAGE_SIZE = 500  # objects per page of a LIST (kubectl's chunk size)
GONE = 410
APPLY_PATCH = "application/apply-patch"  # server-side apply's content type (+yaml, +cbor)

T = TypeVar("T")
log = logging.getLogger(__name__)


def read_json(call: Callable[..., Any], **kwargs: Any) -> dict[str, Any]:
    """What ``call(**kwargs)`` returns (a dynamic resource's get, patch, apply), as plain dicts.

    The dynamic client wraps every field of a response in a ``ResourceField`` object, which
    ``to_dict`` then walks back into dicts: for a LIST of 1,000 FleetWorkloads that is 73 ms of
    CPU against 6 ms for ``json.loads`` alone (docs/benchmarks.md), held under the GIL that the
    worker's event loop and its queries wait for. Asked for the raw response
    (``serialize=False``, the dynamic client's own option), the body is parsed once. Items of a
    list get the list's ``apiVersion`` and kind where the server left them out, as the dynamic
    client does for built-in kinds.
    """
    body: dict[str, Any] = json.loads(call(serialize=False, **kwargs).data)
    kind = body.get("kind")
    items = body.get("items")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
        for item in items:
            item.setdefault("apiVersion", body.get("apiVersion"))
            item.setdefault("kind", kind[:-4])
    return body


def object_meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's ``metadata`` (empty if absent): every reader of API objects needs it."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def status_code(err: BaseException) -> int | None:
    """An API error's HTTP status, or None: callers tell 404, 409, 403 and 410 apart by it."""
    status = getattr(err, "status", None)
    return status if isinstance(status, int) else None


def list_pages(
    resource: Any,
    *,
    namespace: str | None = None,
    label_selector: str = "",
    page_size: int = PAGE_SIZE,
) -> list[dict[str, Any]]:
    """Every object of one LIST, fetched in pages of ``page_size`` (``limit`` / ``continue``).

    One paginated LIST per kind keeps the API server's cost and each response bounded whatever
    the fleet size, and all pages come from one consistent read (the continue token pins the
    resourceVersion). When the token expires midway (410: etcd compacted meanwhile), this does
    what client-go's pager does: one full LIST instead.
    """
    items, _ = list_snapshot(
        resource, namespace=namespace, label_selector=label_selector, page_size=page_size
    )
    return items


def list_snapshot(
    resource: Any,
    *,
    namespace: str | None = None,
    label_selector: str = "",
    page_size: int = PAGE_SIZE,
) -> tuple[list[dict[str, Any]], str]:
    """``list_pages`` and the list's ``resourceVersion`` (where a watch of the same read starts).

    Every page of one paginated LIST carries the resourceVersion of the one consistent read
    they come from; after a 410 on the continue token the full LIST's own is returned.
    """
    base: dict[str, Any] = {}
    if namespace:
        base["namespace"] = namespace
    if label_selector:
        base["label_selector"] = label_selector
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        kwargs = dict(base, limit=page_size)
        if token:
            kwargs["_continue"] = token
        try:
            page = read_json(resource.get, **kwargs)
        except Exception as err:
            if token and getattr(err, "status", None) == GONE:
                full = read_json(resource.get, **base)
                return full.get("items") or [], _list_version(full)
            raise
        items += page.get("items") or []
        token = (page.get("metadata") or {}).get("continue") or None
        if not token:
            return items, _list_version(page)


def _list_version(page: dict[str, Any]) -> str:
    return str((page.get("metadata") or {}).get("resourceVersion") or "")


PROBE_LIMIT = 1  # objects a version probe asks for: the fewest a LIST may be limited to


def collection_version(resource: Any, *, namespace: str | None = None) -> str:
    """The current resourceVersion of a collection: one LIST of ``limit=1``, no resourceVersion.

    A LIST without a resourceVersion is a consistent read (served from etcd, or from the API
    server's watch cache once it has caught up with etcd), and its list metadata carries the
    resourceVersion it was read at; ``limit=1`` keeps the answer to one object whatever the
    collection holds. A cache whose store of the same kind has reached that version holds
    everything such a LIST would return (``cache.version_reached``): the client-side half of
    "consistent reads from cache". ``RequestCounts`` counts these apart (``probes``).
    """
    kwargs: dict[str, Any] = {"limit": PROBE_LIMIT}
    if namespace:
        kwargs["namespace"] = namespace
    return _list_version(read_json(resource.get, **kwargs))


def in_cluster() -> bool:
    """Inside a pod with a mounted ServiceAccount token (the rule client-go's in-cluster uses)."""
    return (
        bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        and bool(os.environ.get("KUBERNETES_SERVICE_PORT"))
        and (SERVICE_ACCOUNT_DIR / "token").is_file()
    )


def in_cluster_namespace() -> str:
    """The pod's namespace (mounted beside the token), else ``default``."""
    try:
        return (SERVICE_ACCOUNT_DIR / "namespace").read_text().strip() or "default"
    except OSError:
        return "default"


def api_client(
    kubeconfig: Path | str | None = None, context: str | None = None
) -> client.ApiClient:
    """An ApiClient for a kubeconfig file (or the default loading rules), or ``IN_CLUSTER``.

    In a pod the worker runs as its ServiceAccount: the projected token expires (an hour by
    default) and is rotated in place, so the loader re-reads it before it runs out.
    """
    if str(kubeconfig) == IN_CLUSTER:
        configuration = client.Configuration()
        config.incluster_config.InClusterConfigLoader(  # type: ignore[no-untyped-call]
            token_filename=str(SERVICE_ACCOUNT_DIR / "token"),
            cert_filename=str(SERVICE_ACCOUNT_DIR / "ca.crt"),
            try_refresh_token=True,
        ).load_and_set(configuration)
        return client.ApiClient(configuration)
    api: client.ApiClient = config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig) if kubeconfig else None, context=context
    )
    return api


Answered = Callable[[Any], None]
"""Called with the answer (a ``rest.RESTResponse``) of an observed request, before its body is read."""
RequestObserver = Callable[[str, str, Mapping[str, str]], AbstractContextManager[Answered]]
"""(method, url with its query, request headers) -> a context around the request's send."""


def observe_requests(api: client.ApiClient, observer: RequestObserver) -> None:
    """Run every HTTP request ``api`` sends inside ``observer(method, url, headers)``.

    Every typed and dynamic call of the kubernetes client goes through ``ApiClient.call_api``, so
    this one hook sees them all (tracing spans per request, the benchmark's request counts; the
    caller decides what to record). The observer's value is called with the answer before
    anyone reads its body, so an observer may put a wrapper around the body
    (``RESTResponse.response``) to see what is read of it (``RequestCounts`` does). Installed
    per client, only by callers that want it: an unobserved client pays nothing.
    """
    send = api.call_api

    def call_api(
        method: str, url: str, header_params: Any = None, *args: Any, **kwargs: Any
    ) -> Any:
        with observer(method, url, header_params or {}) as answered:
            response = send(method, url, header_params, *args, **kwargs)
            answered(response)
            return response

    api.call_api = call_api  # type: ignore[method-assign]


def request_kind(method: str, url: str, headers: Mapping[str, str]) -> tuple[str, str]:
    """(verb, resource) of a request as kube-apiserver counts it (``apiserver_request_total``).

    The verb is the API server's metric label, which is the HTTP method except: a GET of a
    collection is LIST, with ``watch=true`` WATCH; a PATCH with the apply content type is
    APPLY; a DELETE of a collection is DELETECOLLECTION (POST and PUT stay). The resource is the plural with its subresource (``clusters``,
    ``fleetworkloads/status``); discovery (``/api``, ``/apis``, a group or version) is
    ``discovery``, any other path (``/readyz``, ``/version``) is itself. So the worker's own
    counts read beside the API server's metrics, which count every client.
    """
    parts = urlsplit(url)
    path = [p for p in parts.path.split("/") if p]
    method = method.upper()
    if path[:1] == ["api"]:
        rest = path[2:]
    elif path[:1] == ["apis"]:
        rest = path[3:]
    else:
        return method, parts.path or "/"
    if not rest:
        return method, "discovery"
    if rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]  # a namespaced resource; ``namespaces/NAME`` alone is the Namespace
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    named = len(rest) > 1
    if method == "GET":
        if any(v.lower() == "true" for v in parse_qs(parts.query).get("watch", ())):
            return "WATCH", resource
        return ("GET" if named else "LIST"), resource
    if method == "PATCH":
        content = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
        return ("APPLY" if content.startswith(APPLY_PATCH) else "PATCH"), resource
    if method == "DELETE" and not named:
        return "DELETECOLLECTION", resource
    return method, resource


def is_probe(url: str) -> bool:
    """Whether a LIST's query asks for ``limit=1`` (a version probe: ``collection_version``)."""
    return parse_qs(urlsplit(url).query).get("limit") == [str(PROBE_LIMIT)]


class _CountedBody:
    """An answer's body (a urllib3 response) that counts the bytes read of it.

    The kubernetes client reads a body as ``data`` (whole: GET, LIST, PATCH answers) or by
    ``stream`` (a watch), and ``RESTResponse.read`` reads ``data``; those are counted. Anything
    else is passed through to the response itself.
    """

    def __init__(self, inner: Any, count: Callable[[int], None]) -> None:
        self._inner = inner
        self._count = count
        self._read_whole = False

    @property
    def data(self) -> bytes:
        body: bytes = self._inner.data
        if not self._read_whole:  # urllib3 keeps the body: a second ``data`` reads nothing
            self._read_whole = True
            self._count(len(body or b""))
        return body

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        chunk: bytes = self._inner.read(*args, **kwargs)
        self._count(len(chunk or b""))
        return chunk

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[bytes]:
        for chunk in self._inner.stream(*args, **kwargs):
            self._count(len(chunk))
            yield chunk

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class RequestCounts:
    """A ``RequestObserver``: the requests one client sent and the bytes it read, by kind.

    Keys are ``request_kind``'s (verb, resource). A request is counted when it is sent (every
    attempt: the server sees each); ``received`` counts the answers' body bytes as they are
    read (a watch's as its events arrive; headers and TLS not included); ``refused`` the answers
    of 400 or more, by status too; ``probes`` the LISTs among ``requests`` that are version
    probes (``limit=1``: ``collection_version``), so a LIST count tells bulk reads from probes
    while staying what the API server's own metrics count (a probe is a LIST there).
    Thread-safe: the worker's calls and the cache's watches run on threads. Per request it
    costs a URL split and a lock; installed by the calibration benchmark's worker
    (``benchmarks.bench_worker``), not by the product, which reports no request counts.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[tuple[str, str]] = Counter()
        self.received: Counter[tuple[str, str]] = Counter()
        # Answers of 400 or more by (verb, resource, status): a 409 is a write a conflict refused.
        self.refused: Counter[tuple[str, str, int]] = Counter()
        # LISTs of limit=1 (version probes), also counted in ``requests``.
        self.probes: Counter[tuple[str, str]] = Counter()

    @contextmanager
    def observe(self, method: str, url: str, headers: Mapping[str, str]) -> Iterator[Answered]:
        """The observer: count the request, and wrap its answer's body to count what is read."""
        key = request_kind(method, url, headers)
        with self._lock:
            self.requests[key] += 1
            if key[0] == "LIST" and is_probe(url):
                self.probes[key] += 1

        def count(n: int) -> None:
            with self._lock:
                self.received[key] += n

        def answered(response: Any) -> None:
            status = int(getattr(response, "status", 0) or 0)
            if status >= 400:
                with self._lock:
                    self.refused[(*key, status)] += 1
            body = getattr(response, "response", None)
            if body is not None:
                response.response = _CountedBody(body, count)

        yield answered

    def totals(self) -> dict[str, dict[str, int]]:
        """The counts so far, consistent with each other and ready for JSON.

        ``requests``, ``received`` and ``probes`` by ``"VERB resource"``, ``refused`` by
        ``"VERB resource status"``.
        """
        with self._lock:
            return {
                "requests": {f"{v} {r}": n for (v, r), n in self.requests.items()},
                "received": {f"{v} {r}": n for (v, r), n in self.received.items()},
                "refused": {f"{v} {r} {c}": n for (v, r, c), n in self.refused.items()},
                "probes": {f"{v} {r}": n for (v, r), n in self.probes.items()},
            }


def dynamic(api: client.ApiClient) -> DynamicClient:
    """Dynamic client over ``api`` (discovery is cached per client)."""
    return DynamicClient(api)  # type: ignore[no-untyped-call]


def apply(
    dyn: DynamicClient, obj: Mapping[str, Any], *, retries: int = 30, delay: float = 1.0
) -> dict[str, Any]:
    """Server-side apply one object, retrying while its kind is not yet discoverable.

    Right after CRDs are created the API server needs a moment before it serves them; the retry
    loop is bounded (``retries`` x ``delay``).
    """
    last: Exception | None = None
    for _ in range(retries):
        try:
            resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            namespace = obj.get("metadata", {}).get("namespace") if resource.namespaced else None
            return read_json(
                resource.server_side_apply,
                body=dict(obj),
                name=obj["metadata"]["name"],
                namespace=namespace,
                field_manager=FIELD_MANAGER,
                force_conflicts=True,
            )
        except (ResourceNotFoundError, NotFoundError) as err:
            last = err
            dyn.resources.invalidate_cache()
            time.sleep(delay)
    raise RuntimeError(f"cannot apply {obj['kind']} {obj['metadata']['name']}: {last}")


def apply_all(dyn: DynamicClient, objects: Iterable[Mapping[str, Any]]) -> int:
    """Apply objects in order; returns how many were applied."""
    count = 0
    for obj in objects:
        apply(dyn, obj)
        count += 1
    return count


# ------------------------------------------------------------------------------ transient faults

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
# Transport failures worth another attempt: connection refused/reset/aborted, timeouts. A TLS
# verification failure (urllib3.exceptions.SSLError) is not: retrying cannot fix it.
RETRYABLE_ERRORS: tuple[type[Exception], ...] = (
    urllib3.exceptions.ProtocolError,
    urllib3.exceptions.TimeoutError,
    ConnectionError,
)


@dataclass(frozen=True)
class RequestPolicy:
    """How one API request is bounded and retried (see docs/decisions.md, "API faults").

    ``timeout``: seconds for one attempt (connect plus each read). ``attempts``: tries of one
    request in all. Between tries the client waits ``backoff`` seconds, doubled each time up to
    ``max_backoff``; a 429 or 503 with ``Retry-After`` waits what the server asks, but at most
    ``retry_after_cap`` seconds. With the defaults one request takes at most
    4 x 20 s + 10 s + 10 s + 10 s = 110 s, inside the activities' 120 s start-to-close timeout.
    """

    timeout: float = 20.0
    attempts: int = 4
    backoff: float = 0.5
    max_backoff: float = 4.0
    retry_after_cap: float = 10.0

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.retry_after_cap)
        return float(min(self.backoff * 2 ** (retry - 1), self.max_backoff))


DEFAULT_REQUESTS = RequestPolicy()
Retried = Callable[[str, str, str, float], None]
"""(method, url, why, seconds to wait) -> None: called before each retry of a request."""


class CallCancelled(Exception):
    """The caller gave up on this call (its activity ended): no further request is sent."""


_CANCEL: ContextVar[threading.Event | None] = ContextVar("kube_call_cancel", default=None)


def run_cancellable(fn: Callable[[], T], cancel: threading.Event) -> T:
    """Run ``fn`` (in a worker thread) so that its requests stop once ``cancel`` is set.

    A thread cannot be killed: when the activity that started it times out or is cancelled,
    the thread runs on. Setting ``cancel`` makes every hardened client in ``fn`` raise
    ``CallCancelled`` before its next attempt and cut short a backoff wait, so the thread
    outlives its activity by at most one request timeout.
    """
    token = _CANCEL.set(cancel)
    try:
        return fn()
    finally:
        _CANCEL.reset(token)


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds: a number, or an HTTP date (RFC 9110); None if absent or bad."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _wait(seconds: float) -> None:
    cancel = _CANCEL.get()
    if cancel is None:
        time.sleep(seconds)
    elif cancel.wait(seconds):
        raise CallCancelled("the call was cancelled while waiting to retry")


def _check_cancelled() -> None:
    cancel = _CANCEL.get()
    if cancel is not None and cancel.is_set():
        raise CallCancelled("the call was cancelled")


def harden(
    api: client.ApiClient,
    policy: RequestPolicy = DEFAULT_REQUESTS,
    retried: Retried | None = None,
) -> client.ApiClient:
    """Give every request of ``api`` a timeout and bounded retries of transient failures.

    The one place transient API faults are handled (docs/decisions.md): each attempt gets
    ``policy.timeout`` unless the caller passed its own ``_request_timeout``; 429, 500, 502,
    503, 504, connection errors (refused, reset, aborted) and timeouts are tried again, up to
    ``policy.attempts`` in all, waiting as ``RequestPolicy.delay`` says; the last answer or error
    goes to the caller (Temporal's activity retry is the next level). urllib3's own silent
    retries are switched off so no second layer multiplies these. Every request may be repeated
    safely: the worker's writes are merge patches conditional on ``resourceVersion`` or
    idempotent server-side applies, so a write whose answer was lost comes back as 409 (the
    caller re-reads) or as the same apply again. Idempotent: a client is hardened once.
    """
    if getattr(api, "_calibrator_hardened", False):
        return api
    api.configuration.retries = False
    api.rest_client = rest.RESTClientObject(api.configuration)
    send = api.call_api

    def call_api(
        method: str,
        url: str,
        header_params: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        timeout = _request_timeout or policy.timeout
        for attempt in range(1, policy.attempts + 1):
            _check_cancelled()
            last = attempt == policy.attempts
            try:
                response = send(method, url, header_params, body, post_params, timeout)
            except RETRYABLE_ERRORS as err:
                if last:
                    raise
                why, retry_after = type(err).__name__, None
            else:
                if last or int(response.status) not in RETRYABLE_STATUS:
                    return response
                why = f"HTTP {response.status}"
                retry_after = retry_after_seconds(response.headers.get("Retry-After"))
                response.response.drain_conn()  # the connection goes back to the pool
            delay = policy.delay(attempt, retry_after)
            log.info(
                "retrying %s %s in %.1fs after %s (attempt %d)", method, url, delay, why, attempt
            )
            if retried is not None:
                retried(method, url, why, delay)
            _wait(delay)
        raise AssertionError("not reached")  # the last attempt returns or raises

    api.call_api = call_api  # type: ignore[method-assign]
    api._calibrator_hardened = True  # type: ignore[attr-defined]
    return api
