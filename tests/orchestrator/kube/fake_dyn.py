"""An in-memory stand-in for ``kubernetes.dynamic.DynamicClient`` (the calls our adapters make).

Objects live in ``objects[kind][(namespace, name)]``. ``get`` lists (namespace and ``key=value``
or ``key`` label selectors, pages with ``limit``/``_continue``, counted in ``lists`` and
``pages``; a LIST of ``limit=1``, a version probe, in ``probes`` instead of ``lists``) or reads
one; a list's resourceVersion is the store's one counter (``rv``), shared by every kind as etcd's
revision is; ``patch`` is a JSON merge patch honouring
``metadata.resourceVersion`` (409 on mismatch); ``server_side_apply`` merges the applied fields
(creating the object); ``<resource>.status.server_side_apply`` replaces status fields of an
existing object (404 otherwise; 409 when ``metadata.resourceVersion`` is given and differs), as
the status subresource does; ``delete`` removes one (404 when absent). Every write is logged in
``writes`` as ``(verb, kind, name, body)``.
"""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

NS = "fleet"


class ApiError(Exception):
    def __init__(self, status: int, body: str | None = None) -> None:
        super().__init__(f"status {status}")
        self.status = status
        self.body = body


class Result:
    """What a call returns: ``to_dict`` as a ``ResourceInstance``, ``data`` as the raw response
    (``serialize=False``, what ``client.read_json`` asks for)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._data)

    @property
    def data(self) -> bytes:
        return json.dumps(self._data).encode()


def merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            merge(target[k], v)
        else:
            target[k] = copy.deepcopy(v)


def _selected(obj: dict[str, Any], selector: str) -> bool:
    labels = obj["metadata"].get("labels") or {}
    if "=" in selector:
        key, value = selector.split("=", 1)
        return labels.get(key) == value
    return selector in labels


class StatusResource:
    def __init__(self, parent: Resource) -> None:
        self.parent = parent

    def server_side_apply(
        self, body: dict[str, Any], name: str, namespace: str, **kwargs: Any
    ) -> Result:
        store = self.parent.store
        obj = store.objects.get(self.parent.kind, {}).get((namespace, name))
        if obj is None:
            raise ApiError(404)
        rv = body.get("metadata", {}).get("resourceVersion")
        if rv is not None and rv != obj["metadata"].get("resourceVersion"):
            raise ApiError(409)
        obj.setdefault("status", {}).update(copy.deepcopy(body["status"]))
        store.bump(obj)
        store.writes.append(("apply-status", self.parent.kind, name, copy.deepcopy(body)))
        return Result(obj)


class Resource:
    def __init__(self, store: FakeDyn, kind: str) -> None:
        self.store, self.kind = store, kind
        self.status = StatusResource(self)

    def get(
        self,
        name: str | None = None,
        namespace: str | None = None,
        label_selector: str = "",
        limit: int | None = None,
        _continue: str | None = None,
        serialize: bool = True,
    ) -> Result:
        objs = self.store.objects.setdefault(self.kind, {})
        if name is not None:
            self.store.gets[self.kind] = self.store.gets.get(self.kind, 0) + 1
            obj = objs.get((namespace or "", name))
            if obj is None:
                raise ApiError(404)
            return Result(obj)
        counts = self.store.probes if limit == 1 else self.store.lists
        if _continue is None:
            counts[self.kind] = counts.get(self.kind, 0) + 1
        self.store.pages[self.kind] = self.store.pages.get(self.kind, 0) + 1
        if _continue is not None and _continue in self.store.expired:
            raise ApiError(410)
        items = [o for (ns, _), o in sorted(objs.items()) if namespace in (None, ns)]
        if label_selector:
            items = [o for o in items if _selected(o, label_selector)]
        start = int(_continue or 0)
        version = str(self.store.rv)  # the list's resourceVersion (where a watch would start)
        if limit is None or start + limit >= len(items):
            return Result({"metadata": {"resourceVersion": version}, "items": items[start:]})
        return Result(
            {
                "metadata": {"continue": str(start + limit), "resourceVersion": version},
                "items": items[start : start + limit],
            }
        )

    def patch(
        self,
        body: dict[str, Any],
        name: str,
        namespace: str,
        content_type: str,
        serialize: bool = True,
    ) -> Result:
        assert content_type == "application/merge-patch+json"
        obj = self.store.objects.get(self.kind, {}).get((namespace, name))
        if obj is None:
            raise ApiError(404)
        rv = body.get("metadata", {}).get("resourceVersion")
        if rv is not None and rv != obj["metadata"]["resourceVersion"]:
            raise ApiError(409)
        merge(obj, body)
        self.store.bump(obj)
        self.store.patches.append((self.kind, name, copy.deepcopy(body)))
        return Result(obj)

    def delete(self, name: str, namespace: str, serialize: bool = True) -> Result:
        obj = self.store.objects.get(self.kind, {}).pop((namespace, name), None)
        if obj is None:
            raise ApiError(404)
        self.store.writes.append(("delete", self.kind, name, {}))
        return Result(obj)

    def server_side_apply(
        self, body: dict[str, Any], name: str, namespace: str, **kwargs: Any
    ) -> Result:
        assert kwargs.get("field_manager") and kwargs.get("force_conflicts")
        objs = self.store.objects.setdefault(self.kind, {})
        obj = objs.get((namespace, name))
        if obj is None and namespace in self.store.gone_namespaces:  # as kube-apiserver says it
            details = {"name": namespace, "kind": "namespaces"}
            raise ApiError(404, json.dumps({"kind": "Status", "code": 404, "details": details}))
        if obj is None:
            obj = {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"}}
            objs[(namespace, name)] = obj
        merge(obj, {k: v for k, v in body.items() if k != "status"})
        self.store.bump(obj)
        self.store.writes.append(("apply", self.kind, name, copy.deepcopy(body)))
        return Result(obj)


class FakeDyn:
    def __init__(self, missing: tuple[str, ...] = ()) -> None:
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.writes: list[tuple[str, str, str, dict[str, Any]]] = []
        self.missing = set(missing)  # kinds the server does not serve
        self.gone_namespaces: set[str] = set()  # objects listed there outlived their namespace
        self.invalidations = 0
        self.lists: dict[str, int] = {}  # LIST calls (first pages) per kind, probes apart
        self.probes: dict[str, int] = {}  # LISTs of limit=1 (client.collection_version) per kind
        self.gets: dict[str, int] = {}  # GETs of one object per kind
        self.pages: dict[str, int] = {}  # pages fetched per kind
        self.expired: set[str] = set()  # continue tokens the "server" answers with 410
        self.rv = 1
        self.rv_lock = threading.Lock()  # writers may run in threads (placement writes)
        self.resources = self

    def get(self, api_version: str, kind: str) -> Resource:  # resources.get
        if kind in self.missing:
            from kubernetes.dynamic.exceptions import ResourceNotFoundError

            raise ResourceNotFoundError(f"No matches found for {kind}")
        return Resource(self, kind)

    def invalidate_cache(self) -> None:  # resources.invalidate_cache
        self.invalidations += 1

    def bump(self, obj: dict[str, Any]) -> None:
        with self.rv_lock:
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)

    def add(self, kind: str, obj: dict[str, Any]) -> None:
        obj["metadata"].setdefault("namespace", NS)
        obj["metadata"].setdefault("resourceVersion", "1")
        meta = obj["metadata"]
        self.objects.setdefault(kind, {})[(meta["namespace"], meta["name"])] = obj
