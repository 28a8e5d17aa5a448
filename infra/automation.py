"""``calibrator fleet up|preview|down``: the fleet program through Pulumi's Automation API.

The program runs inline (``infra.program.main``), with the committed stack config of
``infra/Pulumi.<stack>.yaml`` and the management plane's kubeconfig as a secret. State lives in a
local file backend under the state directory, encrypted with a passphrase generated there once
(or ``$PULUMI_CONFIG_PASSPHRASE``), so nothing needs an account or the network. The engine, the
Python language host and the Kubernetes provider are the binaries tools/build.sh builds from Go
modules; automatic plugin downloads are switched off, so a missing plugin is an error, not a
download attempt, and the provider is found as an ambient plugin on PATH.

The Python language host cannot be built here (its Go module is not served by the proxy), which
is why the program runs inline, where the SDK hosts it, and why the policy pack in infra/policy
is started by a small launcher the CLI executes directly instead of through the host.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes.dynamic.exceptions import ResourceNotFoundError
from pulumi import automation as auto

from infra.ownership import LiveVersions, VersionDecision, effective_clusters, reconcile
from infra.program import main
from infra.spec import CONFIG_NAMESPACE, FleetSpecError, parse_fleet
from orchestrator.domain.versions import KubeVersion
from orchestrator.kube import capi
from orchestrator.kube.client import api_client, dynamic, list_pages
from orchestrator.localplane.components import resolve_bin_dir
from orchestrator.localplane.processes import PlaneError

INFRA = Path(__file__).resolve().parent
POLICY_PACK = INFRA / "policy"
PROJECT = "calibrator-fleet"


class FleetStackError(RuntimeError):
    """The stack could not be set up or the engine reported a failure."""


def default_state_dir() -> Path:
    """``$CALIBRATOR_PULUMI_STATE_DIR`` or ``~/.local/state/fleet-calibrator/pulumi``."""
    env = os.environ.get("CALIBRATOR_PULUMI_STATE_DIR")
    return Path(env) if env else Path.home() / ".local" / "state" / "fleet-calibrator" / "pulumi"


def resolve_pulumi_bin(progress: Callable[[str], None] = lambda _: None) -> Path:
    """``$CALIBRATOR_PULUMI_BIN_DIR``, or build/reuse the pinned Pulumi binaries."""
    try:
        return resolve_bin_dir(progress, build_set="pulumi", env_var="CALIBRATOR_PULUMI_BIN_DIR")
    except PlaneError as err:
        raise FleetStackError(str(err)) from None


def stack_config(stack: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The stack file's ``calibrator-fleet:*`` values plus ``overrides``, validated.

    Validation happens here, before the engine starts, so bad config is one clear error.
    """
    path = INFRA / f"Pulumi.{stack}.yaml"
    if not path.exists():
        known = sorted(p.name.split(".")[1] for p in INFRA.glob("Pulumi.*.yaml"))
        raise FleetSpecError(f"stack {stack!r}: no {path.name} (known stacks: {', '.join(known)})")
    doc = yaml.safe_load(path.read_text()) or {}
    prefix = f"{CONFIG_NAMESPACE}:"
    values = {
        key[len(prefix) :]: value
        for key, value in (doc.get("config") or {}).items()
        if key.startswith(prefix)
    }
    values.update(overrides or {})
    parse_fleet({k: v for k, v in values.items() if k != "environment"})
    return values


def live_versions(kubeconfig: Path, namespace: str) -> dict[str, LiveVersions]:
    """The versions of the clusters that already exist in ``namespace`` (infra.ownership).

    One paginated LIST each of Clusters, KubeadmControlPlanes and MachineDeployments. A
    management cluster without Cluster API yet has no clusters, so nothing to reconcile.
    """
    dyn = dynamic(api_client(kubeconfig))

    def items(kind: tuple[str, str]) -> list[dict[str, Any]]:
        resource = dyn.resources.get(api_version=kind[0], kind=kind[1])
        return list_pages(resource, namespace=namespace)

    try:
        clusters = items(capi.CLUSTER)
    except ResourceNotFoundError:
        return {}
    kcps = {capi.meta(k)["name"]: k for k in items(capi.KUBEADM_CONTROL_PLANE)}
    pools: dict[str, list[dict[str, Any]]] = {}
    for md in items(capi.MACHINE_DEPLOYMENT):
        owner = (capi.meta(md).get("labels") or {}).get(capi.CLUSTER_NAME_LABEL)
        pools.setdefault(str(owner), []).append(md)
    out: dict[str, LiveVersions] = {}
    for cluster in clusters:
        name = str(capi.meta(cluster)["name"])
        topo = capi.topology(cluster)
        ref = (cluster.get("spec") or {}).get("controlPlaneRef") or {}
        kcp = kcps.get(str(ref.get("name")))
        control = topo.get("version") if topo else ((kcp or {}).get("spec") or {}).get("version")
        if not control:
            continue  # still being created: nothing declared on it yet
        by_pool = {
            # Our plain clusters name each pool's MachineDeployment <cluster>-<pool>.
            str(capi.meta(md)["name"]).removeprefix(f"{name}-"): KubeVersion.parse(
                capi.pool_declared(cluster, md)
            )
            for md in pools.get(name, [])
        }
        out[name] = LiveVersions(KubeVersion.parse(str(control)), by_pool)
    return out


@dataclass(frozen=True)
class FleetStack:
    """One fleet stack on this machine: where its state is and how to reach the engine."""

    stack: str
    kubeconfig: Path | None
    state_dir: Path = field(default_factory=default_state_dir)
    bin_dir: Path | None = None
    policy: bool = True
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def _passphrase(self) -> str:
        env = os.environ.get("PULUMI_CONFIG_PASSPHRASE")
        if env is not None:
            return env
        path = self.state_dir / "passphrase"
        if not path.exists():
            self.state_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(32))
        return path.read_text().strip()

    def versions(self, values: Mapping[str, Any]) -> tuple[VersionDecision, ...]:
        """The version each declared cluster gets, from the stack and the live fleet.

        Only where this stack reaches an existing management cluster (``kubeconfig``); the kind
        stack creates its own, so there every cluster is new on its first ``up``.
        """
        spec = parse_fleet({k: v for k, v in values.items() if k != "environment"})
        live = {} if self.kubeconfig is None else live_versions(self.kubeconfig, spec.namespace)
        return reconcile(spec, live)

    def open(self, progress: Callable[[str], None]) -> auto.Stack:
        """Create or select the stack with its config; nothing is deployed yet."""
        # Every input is checked before anything is written (state dir, stack, config).
        values = stack_config(self.stack, self.overrides)
        if self.kubeconfig is not None and not self.kubeconfig.exists():
            raise FleetSpecError(f"kubeconfig {self.kubeconfig} does not exist")
        decisions = self.versions(values)  # a refusal (FleetSpecError) changes nothing
        for decision in decisions:
            if decision.action == "kept":
                progress(f"version owned by the calibrator: {decision.describe()}\n")
        if any(d.action == "kept" for d in decisions):
            spec = parse_fleet({k: v for k, v in values.items() if k != "environment"})
            values = {
                **values,
                "clusters": effective_clusters(values["clusters"], spec.clusters, decisions),
            }
        bin_dir = self.bin_dir or resolve_pulumi_bin(progress)
        if not (bin_dir / "pulumi").exists():
            raise FleetStackError(f"{bin_dir}/pulumi not found")
        # PulumiCommand looks for <root>/bin/pulumi; give it that layout without copying.
        root = self.state_dir / "cli"
        root.mkdir(parents=True, exist_ok=True)
        link = root / "bin"
        if link.is_symlink() and link.resolve() != bin_dir.resolve():
            link.unlink()
        if not link.exists():
            link.symlink_to(bin_dir.resolve(), target_is_directory=True)
        backend = self.state_dir / "backend"
        work_dir = self.state_dir / "work" / self.stack
        for folder in (backend, work_dir):
            folder.mkdir(parents=True, exist_ok=True)
        env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PULUMI_CONFIG_PASSPHRASE": self._passphrase(),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
        }
        opts = auto.LocalWorkspaceOptions(
            work_dir=str(work_dir),
            pulumi_home=str(self.state_dir / "home"),
            env_vars=env,
            secrets_provider="passphrase",
            project_settings=auto.ProjectSettings(
                name=PROJECT,
                runtime="python",
                backend=auto.ProjectBackend(url=f"file://{backend}"),
            ),
            pulumi_command=auto.PulumiCommand(root=str(root), skip_version_check=True),
        )
        stack = auto.create_or_select_stack(
            stack_name=self.stack, project_name=PROJECT, program=main, opts=opts
        )
        config = {
            f"{CONFIG_NAMESPACE}:{key}": auto.ConfigValue(
                value=value if isinstance(value, str) else json.dumps(value)
            )
            for key, value in values.items()
        }
        if self.kubeconfig is not None:
            config[f"{CONFIG_NAMESPACE}:kubeconfig"] = auto.ConfigValue(
                value=self.kubeconfig.read_text(), secret=True
            )
        stack.set_all_config(config)
        return stack

    def _policy(self) -> list[str] | None:
        """The policy pack as an executable the engine runs directly (no language host)."""
        if not self.policy:
            return None
        launcher = self.state_dir / "policy" / "run-pack"
        launcher.parent.mkdir(parents=True, exist_ok=True)
        launcher.write_text(
            "#!/bin/sh\n# Written by infra/automation.py: runs infra/policy with this interpreter.\n"
            f'cd "{POLICY_PACK}" && exec "{sys.executable}" -u -m pulumi.policy "$1" .\n'
        )
        launcher.chmod(0o755)
        return [str(launcher)]

    def up(self, progress: Callable[[str], None]) -> dict[str, Any]:
        """Deploy; returns a JSON-able summary (changes, outputs, seconds)."""
        stack = self.open(progress)
        try:
            result = stack.up(on_output=progress, policy_packs=self._policy(), color="never")
        except auto.errors.CommandError as err:
            raise FleetStackError(engine_error(err)) from None
        outputs = {k: v.value for k, v in result.outputs.items() if not v.secret}
        return {**self._summary(result.summary), "outputs": outputs}

    def preview(self, progress: Callable[[str], None]) -> dict[str, Any]:
        """What ``up`` would change, with the policy pack's verdict."""
        stack = self.open(progress)
        try:
            result = stack.preview(on_output=progress, policy_packs=self._policy(), color="never")
        except auto.errors.CommandError as err:
            raise FleetStackError(engine_error(err)) from None
        return {"stack": self.stack, "changes": dict(result.change_summary)}

    def down(self, progress: Callable[[str], None]) -> dict[str, Any]:
        """Destroy everything the stack created (clusters first, then the ClusterClass)."""
        stack = self.open(progress)
        try:
            result = stack.destroy(on_output=progress, color="never")
        except auto.errors.CommandError as err:
            raise FleetStackError(engine_error(err)) from None
        return self._summary(result.summary)

    def _summary(self, summary: auto.UpdateSummary) -> dict[str, Any]:
        seconds = 0.0
        if summary.end_time is not None and summary.start_time is not None:
            seconds = (summary.end_time - summary.start_time).total_seconds()
        return {
            "stack": self.stack,
            "result": summary.result,
            "changes": dict(summary.resource_changes or {}),
            "seconds": seconds,
        }


def engine_error(err: auto.errors.CommandError) -> str:
    """The engine's own verdict in one line: policy violations with their messages, else errors.

    A policy block reads ``- [mandatory]  <policy>  (<resource>)``, then the policy's
    description, then the violation message; the message is what a person has to act on.
    Public so that its reading of the engine's text is tested on that text alone, without
    running Pulumi (tests/infra/test_automation.py).
    """
    lines = [ln.strip() for ln in str(err).splitlines()]
    violations: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("- [mandatory]"):
            header = line.removeprefix("- [mandatory]").split()
            body: list[str] = []
            for follow in lines[i + 2 :]:
                if not follow or follow.startswith("- ["):
                    break
                body.append(follow)
            violations.append(f"policy {header[0] if header else '?'}: {' '.join(body)}")
    if violations:
        return "; ".join(violations)
    errors = list(dict.fromkeys(ln for ln in lines if "error" in ln.lower()))
    return "; ".join(errors[-5:]) or (lines[-1] if lines else "pulumi failed")
