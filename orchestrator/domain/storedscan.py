"""Which stored objects to scan for old apiVersions, and what one object says (pure).

An object is stored once, whatever version it was written at; the apiserver converts it to any
served version on read. What remembers the version a client wrote it at is its metadata:
``managedFields[].apiVersion`` (per field manager, set by every create, update and apply) and
the ``apiVersion`` inside kubectl's ``last-applied-configuration`` annotation. So the objects
of a kind can be LISTed through any served version (the replacement is preferred: it is the one
that stays) and their metadata tells who still writes the old one.

Only the catalog's rows still served at the cluster's minor are scanned (an API already removed
cannot be written any more, and the catalog is the bound on cost): a handful of kinds.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final

from orchestrator.domain.apicatalog import ApiLifecycle
from orchestrator.domain.apis import ApiRef

LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass(frozen=True, slots=True)
class ScanTarget:
    """One kind to LIST through the first of ``list_versions`` that serves it.

    ``list_versions`` are served group/versions, preferred first; ``rows`` are the catalog rows
    whose old group/versions its objects' metadata is searched for.
    """

    kind: str
    list_versions: tuple[str, ...]
    rows: tuple[ApiLifecycle, ...]


def _group(group_version: str) -> str:
    return group_version.rpartition("/")[0]


def scan_targets(
    catalog: Mapping[ApiRef, ApiLifecycle], minor: tuple[int, int], served: Collection[str]
) -> tuple[ScanTarget, ...]:
    """The kinds to scan on a cluster at ``minor`` serving ``served``, sorted.

    A row counts when its API is not removed at ``minor``. Its kind is LISTed through the
    replacement when served, else through the row's own group/version when served (a served
    group/version may still not serve the kind: discovery decides, the caller tries the next).
    Rows of one kind and group (the replacement's, else their own) share one LIST; a kind with
    no served candidate is not LISTed (nothing of it can be read).
    """
    grouped: dict[tuple[str, str], list[ApiLifecycle]] = {}
    for api, row in catalog.items():
        if minor < row.removed_in:
            home = _group(row.replacement) if row.replacement else api.group
            grouped.setdefault((home, api.kind), []).append(row)
    targets: list[ScanTarget] = []
    for (_, kind), rows in sorted(grouped.items()):
        rows.sort(key=lambda r: r.api)
        wanted = [r.replacement for r in rows if r.replacement]
        wanted += [r.api.group_version for r in rows]
        candidates = tuple(gv for gv in dict.fromkeys(wanted) if gv in served)
        if candidates:
            targets.append(ScanTarget(kind, candidates, tuple(rows)))
    return tuple(targets)


def written_versions(metadata: Mapping[str, object]) -> tuple[frozenset[str], str]:
    """(The apiVersions of the object's managedFields, the last-applied annotation's apiVersion).

    A malformed entry or annotation (not JSON, not an object) contributes nothing: what was
    written by a client that is not kubectl is not guessed at.
    """
    managed = metadata.get("managedFields")
    versions = frozenset(
        str(entry["apiVersion"])
        for entry in (managed if isinstance(managed, list) else [])
        if isinstance(entry, Mapping) and isinstance(entry.get("apiVersion"), str)
    )
    annotations = metadata.get("annotations")
    applied = annotations.get(LAST_APPLIED) if isinstance(annotations, Mapping) else None
    version = ""
    if isinstance(applied, str) and applied:
        try:
            loaded = json.loads(applied)
        except ValueError:
            loaded = None
        if isinstance(loaded, Mapping) and isinstance(loaded.get("apiVersion"), str):
            version = str(loaded["apiVersion"])
    return versions, version


def object_name(metadata: Mapping[str, object]) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object."""
    name = str(metadata.get("name") or "")
    namespace = metadata.get("namespace")
    return f"{namespace}/{name}" if namespace else name
