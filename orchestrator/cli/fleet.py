"""``calibrator fleet up|preview|down``: provision the fleet of a Pulumi stack (infra/).

Thin on purpose: infra.automation runs the stack; this module turns its progress into a live
status line (or Pulumi's own output with ``--verbose``) and its result into a table or JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.cli.output import Format, emit, fail

if TYPE_CHECKING:  # Rich only when a command prints for people
    from rich.console import Console

fleet_app = typer.Typer(help="Provision the fleet declared by a Pulumi stack (infra/).")

StackOpt = Annotated[
    str, typer.Option("--stack", help="Stack: infra/Pulumi.<stack>.yaml (local or kind).")
]
KubeconfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        help="Management cluster kubeconfig (default for the local stack: the local plane's).",
    ),
]
StateOpt = Annotated[
    Path | None,
    typer.Option(
        "--state-dir", help="Pulumi state (default: ~/.local/state/fleet-calibrator/pulumi)."
    ),
]
PolicyOpt = Annotated[
    bool, typer.Option("--policy/--no-policy", help="Run the infra/policy policy pack.")
]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Show Pulumi's own output.")]
OutputOpt = Annotated[Format, typer.Option("--output", "-o", help="table, json or yaml.")]


def _run(
    action: str,
    stack: str,
    kubeconfig: Path | None,
    state_dir: Path | None,
    policy: bool,
    verbose: bool,
    output: Format,
) -> None:
    from infra.automation import FleetStack, FleetStackError, default_state_dir
    from infra.spec import FleetSpecError

    if kubeconfig is None and stack == "local":
        from orchestrator.localplane.plane import LocalPlane

        kubeconfig = LocalPlane().kubeconfig
        if not kubeconfig.exists():
            fail(f"no local plane kubeconfig at {kubeconfig}: run `calibrator env up` first")
    fleet = FleetStack(stack, kubeconfig, state_dir or default_state_dir(), policy=policy)
    from rich.console import Console

    con = Console(stderr=True, highlight=False)
    try:
        with con.status(f"pulumi {action} ({stack})") as live:

            def progress(line: str) -> None:
                text = line.rstrip()
                if verbose:
                    con.print(text, markup=False)
                elif text.strip():
                    live.update(f"pulumi {action} ({stack}): {text.strip()[:100]}")

            step: Callable[[Callable[[str], None]], dict[str, Any]] = getattr(fleet, action)
            doc = step(progress)
    except FleetSpecError as err:
        fail(str(err))
    except FleetStackError as err:
        fail(str(err), code=1)
    emit(doc, output, lambda c: _table(c, action, doc))


def _table(con: Console, action: str, doc: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"pulumi {action}: stack {doc['stack']}")
    table.add_column("Operation")
    table.add_column("Resources", justify="right")
    for op, count in sorted(doc["changes"].items()):
        table.add_row(op, str(count))
    con.print(table)
    clusters = doc.get("outputs", {}).get("clusters")
    if clusters:
        ct = Table(title="Clusters")
        for col in ("Cluster", "Version", "Topology", "Labels"):
            ct.add_column(col)
        for name, info in clusters.items():
            labels = ",".join(f"{k}={v}" for k, v in sorted(info.get("labels", {}).items()))
            ct.add_row(name, info["version"], "yes" if info.get("topology") else "no", labels)
        con.print(ct)
    if "seconds" in doc:
        con.print(f"{doc['result']} in {doc['seconds']:.1f} s")


@fleet_app.command()
def up(
    stack: StackOpt = "local",
    kubeconfig: KubeconfigOpt = None,
    state_dir: StateOpt = None,
    policy: PolicyOpt = True,
    verbose: VerboseOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Create or update the stack's fleet; returns when every cluster is Available."""
    _run("up", stack, kubeconfig, state_dir, policy, verbose, output)


@fleet_app.command()
def preview(
    stack: StackOpt = "local",
    kubeconfig: KubeconfigOpt = None,
    state_dir: StateOpt = None,
    policy: PolicyOpt = True,
    verbose: VerboseOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Show what up would change, with the policy pack's verdict."""
    _run("preview", stack, kubeconfig, state_dir, policy, verbose, output)


@fleet_app.command()
def down(
    stack: StackOpt = "local",
    kubeconfig: KubeconfigOpt = None,
    state_dir: StateOpt = None,
    verbose: VerboseOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Destroy the stack's fleet (waits until CAPI has deleted every cluster)."""
    _run("down", stack, kubeconfig, state_dir, False, verbose, output)
