"""API lifecycle catalog (pure): which group/version/kinds a Kubernetes version no longer serves.

The data lives in ``data/api_lifecycle.yaml`` so a release's removals are a one-line change that
reviewers can check against the upstream deprecation guide. Reading a package-owned constant file
once is the only "I/O" here; the result is cached and identical on every worker, so workflow code
stays deterministic.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources

from orchestrator.domain.documents import load_document
from orchestrator.domain.snapshot import ApiRef
from orchestrator.domain.versions import KubeVersion


@dataclass(frozen=True, slots=True)
class ApiLifecycle:
    """One removed API: deprecated and removed in (major, minor), and what replaces it."""

    api: ApiRef
    deprecated_in: tuple[int, int]
    removed_in: tuple[int, int]
    replacement: str

    @property
    def removed_in_text(self) -> str:
        """``1.25``."""
        return f"{self.removed_in[0]}.{self.removed_in[1]}"

    @property
    def deprecated_in_text(self) -> str:
        """``1.21``."""
        return f"{self.deprecated_in[0]}.{self.deprecated_in[1]}"

    @property
    def replacement_api(self) -> str:
        """``batch/v1/CronJob``, or "" when the API has no replacement (PodSecurityPolicy)."""
        return f"{self.replacement}/{self.api.kind}" if self.replacement else ""


def _minor(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


@functools.cache
def catalog() -> dict[ApiRef, ApiLifecycle]:
    """Every removal keyed by API, parsed once from the package data file.

    Read by ``load_document`` (libyaml's events): the same data as ``yaml.safe_load``, which
    took ~17 ms of CPU per process with PyYAML's pure-Python loader against ~1 ms.
    """
    text = resources.files("orchestrator.domain").joinpath("data/api_lifecycle.yaml").read_text()
    entries: dict[ApiRef, ApiLifecycle] = {}
    for row in load_document(text, "api_lifecycle.yaml")["entries"]:
        group_version = str(row["groupVersion"])
        group, _, version = group_version.rpartition("/")
        for kind in row["kinds"]:
            api = ApiRef(group, version, str(kind))
            entries[api] = ApiLifecycle(
                api=api,
                deprecated_in=_minor(str(row["deprecatedIn"])),
                removed_in=_minor(str(row["removedIn"])),
                replacement=str(row.get("replacement") or ""),
            )
    return entries


def lifecycle(api: ApiRef) -> ApiLifecycle | None:
    """The removal record of ``api``, or None when the catalog knows no removal for it."""
    return catalog().get(api)


def is_served(api: ApiRef, version: KubeVersion) -> bool:
    """False when ``api`` was removed at or before ``version``'s minor.

    APIs the catalog does not list (GA built-ins, CRDs) count as served: the catalog only knows
    removals, and discovery on a live cluster is the authority for anything else.
    """
    record = catalog().get(api)
    return record is None or version.minor_key < record.removed_in


def removed_apis(apis: Iterable[ApiRef], version: KubeVersion) -> list[ApiLifecycle]:
    """Records of the given APIs that ``version`` no longer serves, in the given order."""
    out: list[ApiLifecycle] = []
    for api in apis:
        record = catalog().get(api)
        if record is not None and version.minor_key >= record.removed_in:
            out.append(record)
    return out


def deprecated_apis(apis: Iterable[ApiRef], version: KubeVersion) -> list[ApiLifecycle]:
    """Records of the given APIs deprecated but still served at ``version`` (early warnings)."""
    out: list[ApiLifecycle] = []
    for api in apis:
        record = catalog().get(api)
        if record is not None and record.deprecated_in <= version.minor_key < record.removed_in:
            out.append(record)
    return out
