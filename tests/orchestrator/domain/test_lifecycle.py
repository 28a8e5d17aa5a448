"""An operator's lifecycle file: strict like a snapshot, extends (or replaces) built-in rows."""

from __future__ import annotations

import contextvars
from datetime import date
from typing import Any

import pytest

from orchestrator.domain.apicatalog import builtin_catalog, catalog, removed_apis
from orchestrator.domain.apis import ApiRef
from orchestrator.domain.lifecycle import (
    LifecycleError,
    load_overrides,
    overrides_from_mapping,
    using,
)
from orchestrator.domain.support import support_status
from orchestrator.domain.versions import KubeVersion

WIDGET = {
    "groupVersion": "widgets.example.com/v1alpha2",
    "kinds": ["Widget"],
    "deprecatedIn": "1.33",
    "removedIn": "1.35",
    "replacement": "widgets.example.com/v1",
}
HEAD = {"apiVersion": "calibrator.dev/v1alpha1", "kind": "LifecycleOverrides"}


def _doc(**fields: Any) -> dict[str, Any]:
    return {**HEAD, **fields}


def test_a_crd_version_and_an_extended_support_date() -> None:
    found = overrides_from_mapping(
        _doc(removedApis=[WIDGET], releases=[{"minor": "1.31", "endOfLife": "2030-01-01"}])
    )
    api = ApiRef("widgets.example.com", "v1alpha2", "Widget")
    merged = found.catalog()
    assert merged[api].removed_in == (1, 35)
    assert merged[api].replacement_api == "widgets.example.com/v1/Widget"
    assert len(merged) == len(builtin_catalog()) + 1
    calendar = found.calendar()
    assert calendar[(1, 31)].end_of_life == date(2030, 1, 1)  # replaces the built-in row
    assert calendar[(1, 31)].released is None


def test_in_force_only_inside_the_context_that_set_it() -> None:
    api = ApiRef("widgets.example.com", "v1alpha2", "Widget")
    overrides = overrides_from_mapping(_doc(removedApis=[WIDGET]))
    v135 = KubeVersion.parse("v1.35.0")

    def inside() -> tuple[int, str]:
        using(overrides)
        return len(removed_apis([api], v135)), support_status(v135, date(2026, 1, 1)).state

    assert contextvars.copy_context().run(inside) == (1, "supported")
    assert removed_apis([api], v135) == []
    assert catalog() is builtin_catalog()


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (_doc(removedApis=[{**WIDGET, "removedin": "1.35"}]), "unknown field(s) removedin"),
        (_doc(removedApis=[WIDGET], extra=1), "lifecycle: unknown field(s) extra"),
        ({**_doc(removedApis=[WIDGET]), "apiVersion": "v1"}, "lifecycle.apiVersion"),
        ({**_doc(removedApis=[WIDGET]), "kind": "Catalog"}, "lifecycle.kind"),
        (_doc(), "give removedApis, releases or both"),
        (_doc(removedApis={"a": 1}), "removedApis: expected a list"),
        (_doc(removedApis=[{**WIDGET, "removedIn": 1.3}]), "quote it"),
        (_doc(removedApis=[{**WIDGET, "removedIn": "1.x"}]), "removedIn: expected a minor"),
        (_doc(removedApis=[{**WIDGET, "deprecatedIn": "1.36"}]), "is after removedIn"),
        (_doc(removedApis=[{**WIDGET, "groupVersion": "Widgets/v1"}]), "groupVersion"),
        (_doc(removedApis=[{**WIDGET, "kinds": []}]), "non-empty list of kinds"),
        (_doc(removedApis=[{**WIDGET, "kinds": ["widget"]}]), "kinds[0]: expected a kind"),
        (_doc(removedApis=[{**WIDGET, "replacement": "v 1"}]), "replacement"),
        (_doc(removedApis=[WIDGET, WIDGET]), "is listed twice"),
        (_doc(removedApis=[{k: v for k, v in WIDGET.items() if k != "kinds"}]), "'kinds'"),
        (_doc(releases=[{"minor": "1.31"}]), "missing required field 'endOfLife'"),
        (_doc(releases=[{"minor": "1.31", "endOfLife": "2030-13-01"}]), "expected a day"),
        (_doc(releases=[{"minor": "1.31", "endOfLife": "tomorrow"}]), "expected a day"),
        (
            _doc(releases=[{"minor": "1.31", "released": "2030-01-02", "endOfLife": "2030-01-01"}]),
            "is before released",
        ),
        (
            _doc(releases=[{"minor": "1.31", "endOfLife": "2030-01-01"}] * 2),
            "minor 1.31 is listed twice",
        ),
        (_doc(releases=[{"minor": "1.31", "endOfLife": "2030-01-01", "eol": 1}]), "eol"),
        ([WIDGET], "lifecycle: expected a mapping"),
    ],
)
def test_bad_documents_are_one_error_naming_the_field(document: object, message: str) -> None:
    with pytest.raises(LifecycleError, match=None) as caught:
        overrides_from_mapping(document)
    assert message in str(caught.value)


def test_text_goes_through_the_document_loader() -> None:
    with pytest.raises(LifecycleError, match="duplicate key 'releases'"):
        load_overrides(b"releases: []\nreleases: []\n")
    with pytest.raises(LifecycleError, match="lifecycle file is empty"):
        load_overrides("")
    text = (
        "apiVersion: calibrator.dev/v1alpha1\nkind: LifecycleOverrides\n"
        "releases:\n- {minor: '1.32', endOfLife: 2027-02-28}\n"
    )
    assert load_overrides(text).releases[(1, 32)].end_of_life == date(2027, 2, 28)
