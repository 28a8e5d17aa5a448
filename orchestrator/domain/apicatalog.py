"""API lifecycle catalog (pure): which group/version/kinds a Kubernetes version no longer serves.

The data lives in ``data/api_lifecycle.yaml`` so a release's removals are a one-line change that
reviewers can check against the upstream deprecation guide. Reading a package-owned constant file
once is the only "I/O" here; the result is cached and identical on every worker, so workflow code
stays deterministic.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

from orchestrator.domain.apis import GROUP_VERSION_PATTERN, ApiRef
from orchestrator.domain.documents import load_document, quote
from orchestrator.domain.errors import InputError
from orchestrator.domain.strict import check_fields
from orchestrator.domain.versions import KubeVersion

MAX_ENTRIES: Final = 10_000
"""Most rows one catalog (built-in or operator file) may hold."""
ROW_FIELDS: Final = frozenset({"groupVersion", "kinds", "deprecatedIn", "removedIn", "replacement"})
# "v1", "apps/v1", "widgets.example.com/v1alpha2": as a workload's ``apis`` entry has them, so
# that every row can match some workload.
_GROUP_VERSION = re.compile(GROUP_VERSION_PATTERN)
_KIND = re.compile(r"[A-Z][A-Za-z0-9]{0,62}")
_MINOR = re.compile(r"(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,3})")


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


def minor_of(raw: object, where: str, error: type[InputError]) -> tuple[int, int]:
    """A Kubernetes minor written as a string, ``"1.25"``, as (major, minor).

    A string only: YAML reads an unquoted ``1.30`` as the number 1.3, which would be 1.3.
    """
    if not isinstance(raw, str) or not _MINOR.fullmatch(raw):
        hint = " (quote it: YAML reads 1.30 as the number 1.3)" if isinstance(raw, float) else ""
        raise error(f'{where}: expected a minor such as "1.25", got {quote(raw)}{hint}')
    major, minor = raw.split(".")
    return int(major), int(minor)


def entries_from_rows(
    raw: object, where: str, error: type[InputError]
) -> dict[ApiRef, ApiLifecycle]:
    """Catalog rows validated: every field known and typed, one row per API.

    The built-in file's ``entries`` and an operator file's ``removedApis`` go through here alike.

    One row is ``{groupVersion, kinds: [Kind, ...], deprecatedIn: "1.21", removedIn: "1.25",
    replacement: group/version}`` (``replacement`` optional, "" for none); ``deprecatedIn``
    may not come after ``removedIn``.
    """
    if not isinstance(raw, list):
        raise error(f"{where}: expected a list of rows, got {quote(raw)}")
    if len(raw) > MAX_ENTRIES:
        raise error(f"{where}: more than {MAX_ENTRIES:,} rows")
    entries: dict[ApiRef, ApiLifecycle] = {}
    for i, item in enumerate(raw):
        here = f"{where}[{i}]"
        row = _row(item, here, error)
        group_version = row["groupVersion"]
        if not isinstance(group_version, str) or not _GROUP_VERSION.fullmatch(group_version):
            raise error(
                f"{here}.groupVersion: expected group/version (v1 for core), "
                f"got {quote(group_version)}"
            )
        group, _, version = group_version.rpartition("/")
        kinds = row["kinds"]
        if not isinstance(kinds, list) or not kinds:
            raise error(f"{here}.kinds: expected a non-empty list of kinds, got {quote(kinds)}")
        deprecated = minor_of(row["deprecatedIn"], f"{here}.deprecatedIn", error)
        removed = minor_of(row["removedIn"], f"{here}.removedIn", error)
        if deprecated > removed:
            raise error(f"{here}: deprecatedIn {row['deprecatedIn']} is after removedIn")
        replacement = row.get("replacement", "")
        if replacement != "" and (
            not isinstance(replacement, str) or not _GROUP_VERSION.fullmatch(replacement)
        ):
            raise error(
                f'{here}.replacement: expected group/version or "", got {quote(replacement)}'
            )
        for j, kind in enumerate(kinds):
            if not isinstance(kind, str) or not _KIND.fullmatch(kind):
                raise error(
                    f"{here}.kinds[{j}]: expected a kind such as CronJob, got {quote(kind)}"
                )
            api = ApiRef(group, version, kind)
            if api in entries:
                raise error(f"{here}: {api} is listed twice")
            entries[api] = ApiLifecycle(api, deprecated, removed, replacement)
    return entries


def _row(item: object, where: str, error: type[InputError]) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise error(f"{where}: expected a mapping, got {quote(item)}")
    check_fields(item, ROW_FIELDS, where, error)
    for key in ("groupVersion", "kinds", "deprecatedIn", "removedIn"):
        if key not in item:
            raise error(f"{where}: missing required field '{key}'")
    return item


@functools.cache
def builtin_catalog() -> dict[ApiRef, ApiLifecycle]:
    """Every removal keyed by API, parsed once from the package data file.

    Read by ``load_document`` (libyaml's events): the same data as ``yaml.safe_load``, which
    took ~17 ms of CPU per process with PyYAML's pure-Python loader against ~1 ms. Checked by
    the same rules as an operator's file (``entries_from_rows``).
    """
    text = resources.files("orchestrator.domain").joinpath("data/api_lifecycle.yaml").read_text()
    document = load_document(text, "api_lifecycle.yaml")
    return entries_from_rows(document["entries"], "api_lifecycle.yaml: entries", InputError)


# The catalog in force: the built-in one, or the built-in one extended by an operator's
# lifecycle file for the length of one command (``lifecycle.using``). A context variable
# rather than a parameter through planning, checking and placement, which all read it.
ACTIVE_CATALOG: ContextVar[Mapping[ApiRef, ApiLifecycle] | None] = ContextVar(
    "ACTIVE_CATALOG", default=None
)


def catalog() -> Mapping[ApiRef, ApiLifecycle]:
    """Every removal keyed by API: the built-in catalog, with an operator's rows if in force."""
    active = ACTIVE_CATALOG.get()
    return builtin_catalog() if active is None else active


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
