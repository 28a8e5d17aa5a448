"""``calibrator --version``: the package version and the pins the calibrator was built against.

The pins are the versions of the real Kubernetes, Cluster API and etcd that ``tools/build.sh``
builds from Go modules and that the calibrator is tested against (the local plane, the kind
images, the CAPI managers). tools/build.sh is not part of an installed package (a wheel, the
worker image), so they are repeated here; tests/orchestrator/cli/test_version.py holds the two
equal, so a pin bump that forgets this file fails CI.
"""

from __future__ import annotations

from typing import Any

# tools/build.sh: KUBERNETES_VERSION, CLUSTER_API_VERSION, ETCD_VERSION.
BUILT_AGAINST = {
    "kubernetes": "v1.35.8",
    "clusterAPI": "v1.13.4",
    "etcd": "v3.6.16",
}


def version_doc() -> dict[str, Any]:
    """The ``--version -o json|yaml`` document."""
    import orchestrator

    return {"version": orchestrator.__version__, "builtAgainst": dict(BUILT_AGAINST)}


def version_line() -> str:
    """The plain ``--version`` line: ``calibrator 0.1.0``."""
    import orchestrator

    return f"calibrator {orchestrator.__version__}"
