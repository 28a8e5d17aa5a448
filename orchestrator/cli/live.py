"""Where a command's fleet comes from: a FleetSnapshot file, or the live management cluster.

Without ``--snapshot``, ``drift``, ``plan``, ``check``, ``place`` and ``snapshot`` read the fleet
through ``orchestrator.kube.inventory.read_fleet`` - the worker's code path - so a file written by
``calibrator snapshot`` gives the same answers as the live fleet it was read from.

The management cluster is found as kubectl finds it: ``--kubeconfig``, else ``$KUBECONFIG``, else
``~/.kube/config``, else (in a pod) the pod's ServiceAccount; ``--context`` or the kubeconfig's
current context; ``-n``, else ``-A`` (every namespace), else the context's (or the pod's)
namespace, else ``default``. Only when none of those exists and the local plane (``calibrator env
up``) is healthy is the plane's kubeconfig used, so a developer's real ~/.kube/config is never
silently bypassed. The worker finds its management cluster the same way.

Exit statuses: bad flags or a kubeconfig that cannot be used are bad input (2, nothing read); a
management cluster that cannot be read (unreachable, forbidden, not Cluster API) is 1, like
kubectl. Clusters the read leaves out (being created, malformed) are named on stderr and make the
answer partial (exit 1); an unreachable workload cluster is reported in the output itself.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli.files import clip_message
from orchestrator.cli.output import fail

if TYPE_CHECKING:
    from orchestrator.domain.snapshot import FleetSnapshot

EXIT_UNREADABLE = 1

SnapshotOpt = Annotated[
    Path | None,
    typer.Option(
        "--snapshot",
        "-s",
        help="FleetSnapshot YAML/JSON file (default: read the live fleet).",
        show_default=False,
    ),
]
KubeconfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        help="Management cluster kubeconfig (default: $KUBECONFIG, ~/.kube/config, local plane).",
        show_default=False,
    ),
]
ContextOpt = Annotated[
    str | None,
    typer.Option(
        "--context", help="kubeconfig context (default: the current one).", show_default=False
    ),
]
NamespaceOpt = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        "-n",
        help="Read the fleet of this namespace (default: the context's, else default).",
        show_default=False,
    ),
]
AllNamespacesOpt = Annotated[
    bool, typer.Option("--all-namespaces", "-A", help="Read the fleet of every namespace.")
]
ProbeOpt = Annotated[
    bool | None,
    typer.Option(
        "--probe/--no-probe",
        help="Read each workload cluster's API versions and Nodes through its CAPI kubeconfig "
        "secret (default: probe).",
        show_default=False,
    ),
]


@dataclass(frozen=True)
class Source:
    """The fleet-source flags of one command, as given."""

    snapshot: Path | None = None
    kubeconfig: Path | None = None
    context: str | None = None
    namespace: str | None = None
    all_namespaces: bool = False
    probe: bool | None = None

    def live_flags(self) -> list[str]:
        """The live-mode flags that were given."""
        given = [
            ("--kubeconfig", self.kubeconfig is not None),
            ("--context", self.context is not None),
            ("--namespace", self.namespace is not None),
            ("--all-namespaces", self.all_namespaces),
            ("--probe" if self.probe else "--no-probe", self.probe is not None),
        ]
        return [name for name, present in given if present]


@dataclass(frozen=True)
class Fleet:
    """The fleet a command works on, and the clusters its read left out (live reads only)."""

    snapshot: FleetSnapshot
    left_out: dict[str, str] = field(default_factory=dict)


def checked(source: Source) -> Source:
    """``source`` if its flags go together; one exit-2 line otherwise (before any I/O)."""
    if source.snapshot is not None and source.live_flags():
        fail(
            f"--snapshot reads a file; {', '.join(source.live_flags())} "
            f"{'is' if len(source.live_flags()) == 1 else 'are'} for the live fleet: give one or "
            "the other"
        )
    if source.namespace is not None and source.all_namespaces:
        fail("--namespace and --all-namespaces exclude each other: give one")
    if source.namespace is not None and not source.namespace.strip():
        fail("--namespace must not be empty")
    return source


def load(source: Source) -> Fleet:
    """The fleet of ``source``: the file's snapshot, or the live fleet."""
    checked(source)
    if source.snapshot is not None:
        from orchestrator.cli.files import read_document
        from orchestrator.domain.snapshot_load import load_snapshot

        return Fleet(load_snapshot(read_document(source.snapshot, "snapshot")))
    return read_live(source)


def kubeconfig_path(given: Path | None) -> str:
    """The kubeconfig to use, as kubectl picks it, then the local plane (see module docstring)."""
    if given is not None:
        if not given.is_file():
            fail(f"kubeconfig {clip_message(str(given), 200)!r} is not a file")
        return str(given)
    env = os.environ.get("KUBECONFIG", "")
    if any(part for part in env.split(os.pathsep)):
        return env  # kubectl's merge of every listed file (the kubernetes client does the same)
    default = Path.home() / ".kube" / "config"
    if default.is_file():
        return str(default)
    from orchestrator.kube.client import IN_CLUSTER, in_cluster

    if in_cluster():
        return IN_CLUSTER  # a pod's ServiceAccount, as kubectl and client-go use it there
    from orchestrator.localplane.plane import LocalPlane

    plane = LocalPlane()
    if plane.kubeconfig.is_file() and plane.status().healthy:
        return str(plane.kubeconfig)
    fail(
        "no management cluster: give --kubeconfig, set $KUBECONFIG or create ~/.kube/config, "
        "start the local plane (calibrator env up), or read a file with --snapshot"
    )


def _context_namespace(kubeconfig: str, context: str | None) -> str:
    """The namespace of ``context`` (or the current one) in ``kubeconfig``, else ``default``."""
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    from orchestrator.kube.client import IN_CLUSTER, in_cluster_namespace

    if kubeconfig == IN_CLUSTER:
        return in_cluster_namespace()

    try:
        contexts, current = kube_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=kubeconfig
        )
    except (ConfigException, OSError, ValueError) as err:
        fail(f"kubeconfig {clip_message(kubeconfig, 200)!r}: {clip_message(str(err), 200)}")
    chosen = current
    if context is not None:
        chosen = next((c for c in contexts or [] if c.get("name") == context), None)
        if chosen is None:
            names = ", ".join(str(c.get("name")) for c in contexts or []) or "none"
            fail(
                f"context {context!r} is not in the kubeconfig (contexts: {clip_message(names, 200)})"
            )
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"


def read_live(source: Source) -> Fleet:
    """Read the live fleet (``orchestrator.kube.inventory``), failing with one line on errors."""
    from kubernetes.config.config_exception import ConfigException

    from orchestrator.kube import inventory, workload
    from orchestrator.kube.client import api_client, dynamic, harden
    from orchestrator.kube.fleetmap import InventoryError

    kubeconfig = kubeconfig_path(source.kubeconfig)
    namespace: str | None
    if source.all_namespaces:
        namespace = None
    elif source.namespace is not None:
        namespace = source.namespace
    else:
        namespace = _context_namespace(kubeconfig, source.context)
    try:
        # The worker's request rules: a timeout per attempt, bounded retries of 429/5xx/resets.
        api = harden(api_client(kubeconfig, source.context))
    except (ConfigException, OSError, ValueError, TypeError) as err:
        fail(f"kubeconfig {clip_message(kubeconfig, 200)!r}: {clip_message(str(err), 200)}")
    server = str(api.configuration.host)
    probe = functools.partial(workload.probe, api) if source.probe is not False else None
    try:
        read = inventory.read_fleet(dynamic(api), namespace, probe=probe, require_workloads=False)
    except InventoryError as err:
        fail(clip_message(str(err)))
    except Exception as err:  # unreachable, forbidden, ...: the environment, not the input
        fail(
            f"cannot read the fleet from {server}: {workload.failure_reason(err)}",
            code=EXIT_UNREADABLE,
        )
    finally:
        api.close()  # type: ignore[no-untyped-call]
    if not read.workloads_served:
        _warn(
            "the management cluster does not serve calibrator.dev FleetWorkloads (CRDs not "
            "installed): the fleet has no workloads"
        )
    left_out = {name: f"being created: {why}" for name, why in read.pending.items()}
    left_out |= {name: f"skipped: {why}" for name, why in read.skipped.items()}
    for name, why in sorted(left_out.items()):
        _warn(f"cluster {name} left out ({why})")
    return Fleet(read.snapshot, left_out)


def _warn(message: str) -> None:
    import sys

    sys.stderr.write(f"warning: {message}\n")
