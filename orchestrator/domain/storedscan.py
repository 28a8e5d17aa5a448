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
from orchestrator.domain.snapshot import ApiRef

LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass(frozen=True, slots=True)
class ScanTarget:
    """One kind to LIST through ``list_version`` (a served group/version).

    ``rows`` are the catalog rows whose old group/versions its objects' metadata is searched for.
    """

    kind: str
    list_version: str
    rows: tuple[ApiLifecycle, ...]


def scan_targets(
    catalog: Mapping[ApiRef, ApiLifecycle], minor: tuple[int, int], served: Collection[str]
) -> tuple[ScanTarget, ...]:
    """The kinds to scan on a cluster at ``minor`` serving ``served``, sorted.

    A row counts when its API is not removed at ``minor``. Its kind is LISTed through the
    replacement when served, else through the row's own group/version when served, else not at
    all (no served version: nothing of that kind can be stored or read). Rows of one kind that
    LIST through the same version share one LIST.
    """
    grouped: dict[tuple[str, str], list[ApiLifecycle]] = {}
    for api, row in catalog.items():
        if minor >= row.removed_in:
            continue
        if row.replacement and row.replacement in served:
            through = row.replacement
        elif api.group_version in served:
            through = api.group_version
        else:
            continue
        grouped.setdefault((through, api.kind), []).append(row)
    return tuple(
        ScanTarget(kind, through, tuple(sorted(rows, key=lambda r: r.api)))
        for (through, kind), rows in sorted(grouped.items())
    )


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
