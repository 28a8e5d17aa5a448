"""Kubernetes object names (pure): the rules the API server applies to each kind we name.

A snapshot names Cluster API objects and our own FleetWorkloads, and the calibrator later looks
them up, labels them and writes objects after them on a real management cluster. A name that
Kubernetes would refuse (``../../etc/prod-eu-1``, ``Dev_AP 2!``) can never match a real object,
so it is bad input at the door rather than a cluster that silently never upgrades.

The rules, as the API server and the Cluster API webhooks have them:

* **Namespace**: a DNS-1123 label (apimachinery's ``IsDNS1123Label``): lower-case letters,
  digits and ``-``, starting and ending with a letter or digit, at most 63 characters.
* **FleetWorkload** (a custom resource): a DNS-1123 subdomain (``IsDNS1123Subdomain``, what the
  API server checks for every custom resource): labels as above joined by ``.``, at most 253.
* **Cluster and MachineDeployment** (Cluster API): a DNS-1123 subdomain that is also a valid
  label value, since Cluster API's webhooks refuse names that cannot be one (they are written
  into ``cluster.x-k8s.io/cluster-name`` and ``.../deployment-name`` labels): so at most 63.
"""

from __future__ import annotations

import functools
import re
from typing import Final

from orchestrator.domain.documents import quote

DNS1123_LABEL_MAX: Final = 63
DNS1123_SUBDOMAIN_MAX: Final = 253
LABEL_VALUE_MAX: Final = 63

_LABEL = "[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL: Final = re.compile(_LABEL)
_DNS1123_SUBDOMAIN: Final = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")

_LABEL_RULE = "lower-case letters, digits and '-', starting and ending with a letter or digit"
_SUBDOMAIN_RULE = (
    "lower-case letters, digits, '-' and '.', each '.'-separated part starting and ending "
    "with a letter or digit"
)


def dns1123_label_error(raw: object) -> str | None:
    """Why ``raw`` is not a DNS-1123 label (a namespace name), or None when it is one."""
    if not isinstance(raw, str) or not raw:
        return f"must be a non-empty string, got {quote(raw)}"
    if len(raw) > DNS1123_LABEL_MAX:  # before the cache: it keeps only short strings
        return f"must be at most {DNS1123_LABEL_MAX} characters, got {quote(raw)}"
    return _label_error(raw)


# A fleet names few namespaces and clusters many times over (every workload, every reference):
# each distinct name is checked once. Workload names are mostly unique and are not cached.
@functools.lru_cache(maxsize=16384)
def _label_error(raw: str) -> str | None:
    # fullmatch, not match with $: "$" also matches before a trailing newline.
    if not _DNS1123_LABEL.fullmatch(raw):
        return f"must be a DNS-1123 label ({_LABEL_RULE}), got {quote(raw)}"
    return None


def dns1123_subdomain_error(raw: object, maximum: int = DNS1123_SUBDOMAIN_MAX) -> str | None:
    """Why ``raw`` is not a DNS-1123 subdomain of at most ``maximum`` characters, or None."""
    if not isinstance(raw, str) or not raw:
        return f"must be a non-empty string, got {quote(raw)}"
    if len(raw) > maximum:
        return f"must be at most {maximum} characters, got {quote(raw)}"
    if not _DNS1123_SUBDOMAIN.fullmatch(raw):
        return f"must be a DNS-1123 subdomain ({_SUBDOMAIN_RULE}), got {quote(raw)}"
    return None


def capi_name_error(raw: object) -> str | None:
    """Why ``raw`` cannot name a Cluster API Cluster or MachineDeployment, or None.

    A DNS-1123 subdomain (every custom resource) that is also a label value (Cluster API's
    webhooks): every subdomain character is a label-value character, so only the length differs.
    """
    if not isinstance(raw, str) or len(raw) > LABEL_VALUE_MAX:  # the cache keeps short ones
        return dns1123_subdomain_error(raw, LABEL_VALUE_MAX)
    return _capi_name_error(raw)


@functools.lru_cache(maxsize=16384)
def _capi_name_error(raw: str) -> str | None:
    return dns1123_subdomain_error(raw, LABEL_VALUE_MAX)
