"""Render the cluster templates in capi-templates/ (clusterctl's variable syntax) into objects.

Templates stay usable with ``clusterctl generate cluster --from`` on a machine with Docker; here we
do clusterctl's only job ourselves: substitute ``${VAR}``, ``${VAR:=default}`` and
``${VAR:-default}``. A variable with neither a value nor a default is an error, never an empty
string in a manifest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

TEMPLATES = Path(__file__).resolve().parents[2] / "capi-templates"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::[=-]([^}]*))?\}")


class TemplateError(ValueError):
    """A template that cannot be rendered with the given variables."""


def substitute(text: str, variables: Mapping[str, object]) -> str:
    """Replace clusterctl-style variables; raise TemplateError naming every missing one."""
    missing: list[str] = []

    def repl(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in variables:
            return str(variables[name])
        if default is not None:
            return default
        missing.append(name)
        return ""

    out = _VAR.sub(repl, text)
    if missing:
        raise TemplateError(
            f"template variables without a value: {', '.join(sorted(set(missing)))}"
        )
    return out


def render(path: Path | str, variables: Mapping[str, object]) -> list[dict[str, Any]]:
    """All objects of a template file, variables substituted."""
    file = Path(path) if Path(path).is_absolute() else TEMPLATES / path
    return [d for d in yaml.safe_load_all(substitute(file.read_text(), variables)) if d]


def cluster_objects(
    name: str,
    namespace: str,
    version: str,
    *,
    control_plane_replicas: int = 1,
    worker_replicas: int = 1,
    labels: Mapping[str, str] | None = None,
    topology: bool = True,
    backend: str = "in-memory",
) -> list[dict[str, Any]]:
    """Objects of one cluster from our templates, with ``labels`` on the Cluster."""
    template = f"{backend}/cluster-topology.yaml" if topology else f"{backend}/cluster-kcp.yaml"
    objects = render(
        template,
        {
            "CLUSTER_NAME": name,
            "NAMESPACE": namespace,
            "KUBERNETES_VERSION": version,
            "CONTROL_PLANE_MACHINE_COUNT": control_plane_replicas,
            "WORKER_MACHINE_COUNT": worker_replicas,
        },
    )
    for obj in objects:
        if obj["kind"] == "Cluster" and labels:
            obj["metadata"].setdefault("labels", {}).update(labels)
    return objects


def cluster_class_objects(namespace: str, backend: str = "in-memory") -> list[dict[str, Any]]:
    """The ClusterClass and its templates."""
    return render(f"{backend}/clusterclass.yaml", {"NAMESPACE": namespace})
