"""API clients and server-side apply.

Patches are built as data first (plain dicts) and applied here, so callers stay testable and every
write is an idempotent server-side apply with one field manager.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

FIELD_MANAGER = "fleet-calibrator"
PAGE_SIZE = 500  # objects per page of a LIST (kubectl's chunk size)
GONE = 410


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
            page: dict[str, Any] = resource.get(**kwargs).to_dict()
        except Exception as err:
            if token and getattr(err, "status", None) == GONE:
                full: list[dict[str, Any]] = resource.get(**base).to_dict().get("items") or []
                return full
            raise
        items += page.get("items") or []
        token = (page.get("metadata") or {}).get("continue") or None
        if not token:
            return items


def api_client(
    kubeconfig: Path | str | None = None, context: str | None = None
) -> client.ApiClient:
    """An ApiClient for a kubeconfig file (or the default loading rules)."""
    api: client.ApiClient = config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig) if kubeconfig else None, context=context
    )
    return api


RequestObserver = Callable[[str, str], AbstractContextManager[Callable[[int], None]]]


def observe_requests(api: client.ApiClient, observer: RequestObserver) -> None:
    """Run every HTTP request ``api`` sends inside ``observer(method, url)``.

    Every typed and dynamic call of the kubernetes client goes through ``ApiClient.call_api``, so
    this one hook sees them all (tracing spans per request; the caller decides what to record).
    The observer's value is called with the response status. Installed per client, only by
    callers that want it: an unobserved client pays nothing.
    """
    send = api.call_api

    def call_api(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        with observer(method, url) as record:
            response = send(method, url, *args, **kwargs)
            record(int(response.status))
            return response

    api.call_api = call_api  # type: ignore[method-assign]


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
            result = resource.server_side_apply(
                body=dict(obj),
                name=obj["metadata"]["name"],
                namespace=namespace,
                field_manager=FIELD_MANAGER,
                force_conflicts=True,
            )
            return dict(result.to_dict())
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
