"""The kind stack's management cluster: kind itself, then Cluster API with CAPD's docker backend.

Only kind and clusterctl know how to do these two steps, so they run as pulumi-command ``local``
commands with matching delete commands: ``pulumi destroy`` removes the kind cluster, and a
changed kind config replaces it. The kubeconfig is read back as a secret output, never written
into the stack's config. Needs a Docker engine, kind and clusterctl on PATH (docs/kind.md).
"""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_command as command

KIND_CONFIG = Path(__file__).resolve().parents[1] / "kind-configs" / "management.yaml"


class KindManagementCluster(pulumi.ComponentResource):
    """A kind cluster with CAPI core, CABPK, KCP and CAPD installed by ``clusterctl init``."""

    kubeconfig: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        cluster_name: str = "calibrator-mgmt",
        config: Path = KIND_CONFIG,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("calibrator:fleet:KindManagementCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.cluster = command.local.Command(
            "kind-cluster",
            create=f"kind create cluster --name {cluster_name} --config {config} --wait 5m",
            delete=f"kind delete cluster --name {cluster_name}",
            triggers=[config.read_text()],
            opts=child,
        )
        kubeconfig = command.local.Command(
            "kind-kubeconfig",
            create=f"kind get kubeconfig --name {cluster_name}",
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[self.cluster], additional_secret_outputs=["stdout"]
            ),
        )
        self.kubeconfig = pulumi.Output.secret(kubeconfig.stdout)
        # clusterctl wants a file; the command writes a private temp copy and removes it.
        init = (
            "cfg=$(mktemp) && trap 'rm -f \"$cfg\"' EXIT && "
            f'kind get kubeconfig --name {cluster_name} > "$cfg" && '
            'KUBECONFIG="$cfg" clusterctl init --infrastructure docker --wait-providers'
        )
        self.capi = command.local.Command(
            "clusterctl-init",
            create=init,
            environment={"CLUSTER_TOPOLOGY": "true"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[kubeconfig]),
        )
        self.register_outputs({"kubeconfig": self.kubeconfig})
