"""ApiRef: one Kubernetes API a workload uses or a client called, as ``group/version/Kind`` (pure).

Its own module because both the fleet's types (``snapshot``: a workload's ``apis``) and what is
observed on a cluster (``observed``: an API usage) name APIs, and the snapshot holds observed
usage: with ApiRef beside either of them, the two would import each other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError

# An API group (a DNS-1123 subdomain, absent for the core group) and a Kubernetes API version
# (v1, v1beta2, v2alpha1): the shape the FleetWorkload CRD's ``apis`` pattern allows.
GROUP_VERSION_PATTERN = (
    r"(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?"
    r"v[0-9]+(?:(?:alpha|beta)[0-9]+)?"
)
_API = re.compile(rf"(?:{GROUP_VERSION_PATTERN})/[A-Z][A-Za-z0-9]*")


@dataclass(frozen=True, slots=True, order=True)
class ApiRef:
    """An API a workload uses, written ``group/version/Kind`` (``v1/Kind`` for the core group)."""

    group: str
    version: str
    kind: str

    @staticmethod
    def parse(text: object) -> ApiRef:
        """Parse ``batch/v1beta1/CronJob`` or ``v1/ConfigMap``, exactly as written.

        The FleetWorkload CRD's pattern: a group that is a DNS-1123 subdomain, a Kubernetes
        version (``v1``, ``v2beta1``), a Kind; no surrounding whitespace.
        """
        if not isinstance(text, str) or len(text) > 316 or not _API.fullmatch(text):
            raise InputError(
                f"invalid API {quote(text)}: expected group/version/Kind (v1/Kind for core)"
            )
        parts = text.split("/")
        if len(parts) == 2:
            return ApiRef("", parts[0], parts[1])
        return ApiRef(parts[0], parts[1], parts[2])

    @property
    def group_version(self) -> str:
        """``apps/v1`` or ``v1``: the apiVersion field of a manifest."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.group_version}/{self.kind}"
