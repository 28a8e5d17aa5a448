"""Which kinds a stored-object scan LISTs, and what one object's metadata says."""

from __future__ import annotations

import json

import pytest

from orchestrator.domain.apicatalog import ApiLifecycle
from orchestrator.domain.apis import ApiRef
from orchestrator.domain.storedscan import object_name, scan_targets, written_versions

VAC_ALPHA = ApiLifecycle(
    ApiRef("storage.k8s.io", "v1alpha1", "VolumeAttributesClass"),
    (1, 31),
    (1, 35),
    "storage.k8s.io/v1",
)
VAC_BETA = ApiLifecycle(
    ApiRef("storage.k8s.io", "v1beta1", "VolumeAttributesClass"),
    (1, 34),
    (1, 37),
    "storage.k8s.io/v1",
)
CTB = ApiLifecycle(
    ApiRef("certificates.k8s.io", "v1alpha1", "ClusterTrustBundle"),
    (1, 34),
    (1, 37),
    "certificates.k8s.io/v1beta1",
)
PSP = ApiLifecycle(ApiRef("policy", "v1beta1", "PodSecurityPolicy"), (1, 21), (1, 40), "")
CATALOG = {r.api: r for r in (VAC_ALPHA, VAC_BETA, CTB, PSP)}


@pytest.mark.parametrize(
    ("minor", "served", "targets"),
    [
        # Removed rows are skipped; the replacement is preferred, the own version next.
        (
            (1, 35),
            {"storage.k8s.io/v1", "storage.k8s.io/v1beta1", "certificates.k8s.io/v1alpha1"},
            [
                ("ClusterTrustBundle", ("certificates.k8s.io/v1alpha1",), [CTB]),
                (
                    "VolumeAttributesClass",
                    ("storage.k8s.io/v1", "storage.k8s.io/v1beta1"),
                    [VAC_BETA],
                ),
            ],
        ),
        # Two rows of one kind share one LIST.
        (
            (1, 34),
            {"storage.k8s.io/v1", "storage.k8s.io/v1alpha1", "certificates.k8s.io/v1beta1"},
            [
                ("ClusterTrustBundle", ("certificates.k8s.io/v1beta1",), [CTB]),
                (
                    "VolumeAttributesClass",
                    ("storage.k8s.io/v1", "storage.k8s.io/v1alpha1"),
                    [VAC_ALPHA, VAC_BETA],
                ),
            ],
        ),
        # Neither version served: nothing of the kind can be read; no replacement: its own.
        ((1, 35), {"policy/v1beta1"}, [("PodSecurityPolicy", ("policy/v1beta1",), [PSP])]),
        ((1, 35), set(), []),
        ((1, 40), {"policy/v1beta1", "storage.k8s.io/v1"}, []),
    ],
)
def test_scan_targets(
    minor: tuple[int, int],
    served: set[str],
    targets: list[tuple[str, tuple[str, ...], list[ApiLifecycle]]],
) -> None:
    got = [(t.kind, t.list_versions, list(t.rows)) for t in scan_targets(CATALOG, minor, served)]
    assert got == targets


def applied(api_version: object) -> str:
    return json.dumps({"apiVersion": api_version, "kind": "VolumeAttributesClass"})


@pytest.mark.parametrize(
    ("metadata", "managed", "annotation"),
    [
        ({}, set(), ""),
        (
            {
                "managedFields": [
                    {"manager": "kubectl", "apiVersion": "storage.k8s.io/v1beta1"},
                    {"manager": "x", "apiVersion": "storage.k8s.io/v1"},
                    {"manager": "y"},
                    "junk",
                ],
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": applied(
                        "storage.k8s.io/v1beta1"
                    )
                },
            },
            {"storage.k8s.io/v1beta1", "storage.k8s.io/v1"},
            "storage.k8s.io/v1beta1",
        ),
        (
            {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{not json"}},
            set(),
            "",
        ),
        ({"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "[1]"}}, set(), ""),
        (
            {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": applied(3)}},
            set(),
            "",
        ),
        ({"managedFields": "x", "annotations": "y"}, set(), ""),
    ],
)
def test_written_versions(metadata: dict[str, object], managed: set[str], annotation: str) -> None:
    assert written_versions(metadata) == (frozenset(managed), annotation)


def test_object_name() -> None:
    assert object_name({"namespace": "a", "name": "b"}) == "a/b"
    assert object_name({"name": "b"}) == "b"
