"""``calibrator ARGS`` as it runs in a pod of deploy/worker, for tests/integration/test_deploy_overlay.py.

``python -m tests.integration.pod_worker SA_DIR ARGS...``

In a pod the kubelet mounts the ServiceAccount's ``token``, ``ca.crt`` and ``namespace`` at
/var/run/secrets/kubernetes.io/serviceaccount. A test cannot mount there without owning the
machine's filesystem, so this points the product's one constant for that path
(``orchestrator.kube.client.SERVICE_ACCOUNT_DIR``) at ``SA_DIR`` and then runs the product's own
entry point (``orchestrator.cli.main.main``) with ``ARGS``: the same command, flags, environment
rules (``KUBERNETES_SERVICE_HOST``/``PORT``, no kubeconfig) and in-cluster client as the pod.
"""

from __future__ import annotations

import sys
from pathlib import Path

from orchestrator.cli import main as cli
from orchestrator.kube import client as kube_client


def run(argv: list[str]) -> None:
    """Point the ServiceAccount mount at ``argv[0]`` and run ``calibrator argv[1:]``."""
    if len(argv) < 2 or not Path(argv[0]).is_dir():
        sys.exit("usage: python -m tests.integration.pod_worker SA_DIR ARGS...")
    kube_client.SERVICE_ACCOUNT_DIR = Path(argv[0])
    sys.argv = ["calibrator", *argv[1:]]
    cli.main()


if __name__ == "__main__":
    run(sys.argv[1:])
