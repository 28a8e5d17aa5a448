"""Kubernetes object names, kind by kind (orchestrator/domain/names.py)."""

from __future__ import annotations

import pytest

from orchestrator.domain.names import capi_name_error, dns1123_label_error, dns1123_subdomain_error

GOOD_LABELS = ["a", "0", "prod-eu-1", "a" * 63, "1-2-3"]
BAD_LABELS = [
    ("", "non-empty"),
    ("a" * 64, "at most 63"),
    ("Prod", "DNS-1123 label"),
    ("prod_eu", "DNS-1123 label"),
    ("-prod", "DNS-1123 label"),
    ("prod-", "DNS-1123 label"),
    ("team.shop", "DNS-1123 label"),
    ("prod\n", "DNS-1123 label"),
    ("pröd", "DNS-1123 label"),
    (None, "non-empty string"),
    (7, "non-empty string"),
]


@pytest.mark.parametrize("name", GOOD_LABELS)
def test_namespace_names_that_kubernetes_accepts(name: str) -> None:
    assert dns1123_label_error(name) is None


@pytest.mark.parametrize(("name", "problem"), BAD_LABELS)
def test_namespace_names_that_kubernetes_refuses(name: object, problem: str) -> None:
    assert problem in (dns1123_label_error(name) or "")


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("web.shop.example", None),
        ("a" * 63 + "." + "b" * 63, None),
        ("a" * 253, None),
        ("a" * 254, "at most 253"),
        ("web..shop", "DNS-1123 subdomain"),
        (".web", "DNS-1123 subdomain"),
        ("web.", "DNS-1123 subdomain"),
        ("Web", "DNS-1123 subdomain"),
        ("web app", "DNS-1123 subdomain"),
        ("web\n", "DNS-1123 subdomain"),
    ],
)
def test_workload_names_are_subdomains(name: str, problem: str | None) -> None:
    found = dns1123_subdomain_error(name)
    assert found is None if problem is None else problem in (found or "")


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("prod-eu-1", None),
        ("prod.eu-1", None),  # a subdomain, and every subdomain character is a label-value one
        ("c" * 63, None),
        ("c" * 64, "at most 63"),  # Cluster API: the name must also be a label value
        ("../../etc/prod-eu-1", "DNS-1123 subdomain"),
        ("Dev_AP 2!", "DNS-1123 subdomain"),
        ("", "non-empty"),
        (["prod"], "non-empty string"),
    ],
)
def test_cluster_and_machine_deployment_names_are_what_cluster_api_accepts(
    name: object, problem: str | None
) -> None:
    found = capi_name_error(name)
    assert found is None if problem is None else problem in (found or "")
    assert capi_name_error(name) == found  # the cached answer is the same answer
