"""An operator's lifecycle file: more API removals and end-of-life dates (pure).

The built-in catalog (``apicatalog``) knows Kubernetes' own removals and the built-in calendar
(``support``) upstream's end-of-life dates. A platform team knows more: a CRD's own versions
that an operator release drops (``widgets.example.com/v1alpha2``), or a vendor's extended
support for a minor. As pluto's additional versions file does, one document adds those:

.. code-block:: yaml

    apiVersion: calibrator.dev/v1alpha1
    kind: LifecycleOverrides
    removedApis:        # rows as in the built-in catalog
    - {groupVersion: widgets.example.com/v1alpha2, kinds: [Widget], deprecatedIn: "1.33",
       removedIn: "1.35", replacement: widgets.example.com/v1}
    releases:           # rows as in the built-in calendar
    - {minor: "1.32", endOfLife: "2027-02-28"}

It is read as strictly as a snapshot: an unknown field, a wrong type or a row listed twice is
one ``LifecycleError`` naming the field. A row for an API or a minor the built-in data already
has replaces that row (the operator's word wins: their support contract, their CRD); every other
row is added. ``check``, ``drift`` and ``plan`` take the file with ``--lifecycle``; ``using``
puts it in force for the rest of that one command.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from orchestrator.domain.apicatalog import (
    ACTIVE_CATALOG,
    ApiLifecycle,
    builtin_catalog,
    entries_from_rows,
)
from orchestrator.domain.apis import ApiRef
from orchestrator.domain.documents import load_document, quote
from orchestrator.domain.errors import InputError
from orchestrator.domain.strict import check_fields
from orchestrator.domain.support import (
    ACTIVE_RELEASES,
    Release,
    builtin_releases,
    releases_from_rows,
)

API_VERSION: Final = "calibrator.dev/v1alpha1"
KIND: Final = "LifecycleOverrides"
MAX_LIFECYCLE_BYTES: Final = 4 * 1024 * 1024
"""Largest lifecycle file read (4 MiB: tens of thousands of rows)."""


class LifecycleError(InputError):
    """A lifecycle file that cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class Overrides:
    """An operator's rows, and the catalog and calendar they make with the built-in data."""

    removed_apis: Mapping[ApiRef, ApiLifecycle] = field(default_factory=dict)
    releases: Mapping[tuple[int, int], Release] = field(default_factory=dict)

    def catalog(self) -> dict[ApiRef, ApiLifecycle]:
        """The built-in removals with these rows added (or replacing the built-in row)."""
        return {**builtin_catalog(), **self.removed_apis}

    def calendar(self) -> dict[tuple[int, int], Release]:
        """The built-in calendar with these rows added (or replacing the built-in row)."""
        return {**builtin_releases(), **self.releases}


def overrides_from_mapping(raw: object) -> Overrides:
    """Validate a LifecycleOverrides document (already parsed from YAML or JSON)."""
    if not isinstance(raw, Mapping):
        raise LifecycleError(f"lifecycle: expected a mapping, got {quote(raw)}")
    check_fields(
        raw, ("apiVersion", "kind", "removedApis", "releases"), "lifecycle", LifecycleError
    )
    if raw.get("apiVersion") != API_VERSION:
        raise LifecycleError(
            f"lifecycle.apiVersion: expected {API_VERSION}, got {quote(raw.get('apiVersion'))}"
        )
    if raw.get("kind") != KIND:
        raise LifecycleError(f"lifecycle.kind: expected {KIND}, got {quote(raw.get('kind'))}")
    if "removedApis" not in raw and "releases" not in raw:
        raise LifecycleError("lifecycle: give removedApis, releases or both")
    apis = (
        entries_from_rows(raw["removedApis"], "lifecycle.removedApis", LifecycleError)
        if "removedApis" in raw
        else {}
    )
    minors = (
        releases_from_rows(raw["releases"], "lifecycle.releases", LifecycleError)
        if "releases" in raw
        else {}
    )
    return Overrides(apis, minors)


def load_overrides(text: str | bytes) -> Overrides:
    """Parse a lifecycle file (``documents.load_document`` rules) into validated overrides."""
    try:
        raw = load_document(text, "lifecycle", max_bytes=MAX_LIFECYCLE_BYTES)
    except InputError as err:
        raise LifecycleError(str(err)) from None
    if raw is None:
        raise LifecycleError("lifecycle file is empty")
    return overrides_from_mapping(raw)


def using(overrides: Overrides | None) -> None:
    """Put ``overrides`` in force for the rest of the current context (None: built-in only).

    The CLI runs each command in a context of its own, so this lasts exactly one command.
    """
    ACTIVE_CATALOG.set(None if overrides is None else overrides.catalog())
    ACTIVE_RELEASES.set(None if overrides is None else overrides.calendar())
