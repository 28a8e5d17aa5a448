"""``calibrator env up|down|status``: the local management plane (see orchestrator.localplane)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli.output import Format, emit, fail

if TYPE_CHECKING:  # Rich only when a command prints for people
    from rich.console import Console

env_app = typer.Typer(
    help="Local management plane: etcd, kube-apiserver and real CAPI controllers."
)

StateOpt = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        help="State directory (default: $CALIBRATOR_STATE_DIR or ~/.local/state/...).",
    ),
]
OutputOpt = Annotated[Format, typer.Option("--output", "-o", help="table, json or yaml.")]


def _plane(state_dir: Path | None):  # type: ignore[no-untyped-def]
    from orchestrator.localplane.plane import LocalPlane

    return LocalPlane(state_dir)


def _status_table(con: Console, doc: dict[str, object]) -> None:
    from rich.table import Table

    table = Table(title=f"Local management plane ({doc['stateDir']})")
    for col in ("Component", "PID", "Running", "Healthy", "Endpoint"):
        table.add_column(col)
    comps = doc["components"]
    assert isinstance(comps, list)
    for c in comps:
        table.add_row(
            c["name"],
            str(c["pid"]),
            "yes" if c["running"] else "[red]no[/]",
            "yes" if c["healthy"] else "[red]no[/]",
            c["endpoint"],
        )
    con.print(table)
    if not comps:
        con.print("not running (calibrator env up starts it)")
    con.print(f"kubeconfig: {doc['kubeconfig']}")


@env_app.command()
def up(
    state_dir: StateOpt = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for every component.")] = 300.0,
    ttl: Annotated[
        int | None, typer.Option(help="Stop the plane by itself after this many seconds.")
    ] = None,
    output: OutputOpt = Format.table,
    provider: Annotated[
        str,
        typer.Option(
            help="in-memory (simulated machines, the default) or docker (CAPD's docker backend "
            "on our own dockerd; see docs/kind.md)."
        ),
    ] = "in-memory",
    docker_state_dir: Annotated[
        Path | None,
        typer.Option(help="docker: dockerd's state dir (default: $CALIBRATOR_DOCKER_DIR or ...)."),
    ] = None,
    node_version: Annotated[
        list[str] | None,
        typer.Option(help="docker: load only this node image version (repeatable; default all)."),
    ] = None,
    raise_inotify: Annotated[
        bool,
        typer.Option(
            "--raise-inotify/--no-raise-inotify",
            help="docker, as root: raise fs.inotify.max_user_watches/instances to kind's values "
            "(524288/512) where lower; host-wide, said on stderr. --no-raise-inotify only warns.",
        ),
    ] = True,
) -> None:
    """Start the plane (idempotent; repairs a plane whose component crashed).

    The plane outlives the command (``env down`` or --ttl stop it); ended while it starts, by
    Ctrl-C or SIGTERM alike, the command stops what it had started and exits (SIGTERM: 143).
    """
    from orchestrator.cli.children import sigterm_as_interrupt

    with sigterm_as_interrupt():
        _up(
            state_dir, timeout, ttl, output, provider, docker_state_dir, node_version,
            raise_inotify,
        )  # fmt: skip


def _up(
    state_dir: Path | None,
    timeout: float,
    ttl: int | None,
    output: Format,
    provider: str,
    docker_state_dir: Path | None,
    node_version: list[str] | None,
    raise_inotify: bool,
) -> None:
    from orchestrator.localplane import dockerenv
    from orchestrator.localplane.processes import PlaneError

    if provider not in dockerenv.PROVIDERS:
        fail(f"unknown provider {provider!r} (in-memory or docker)")
    plane = _plane(state_dir)
    from rich.console import Console

    con = Console(stderr=True)
    extra: dict[str, object] = {}
    try:
        with con.status("starting local management plane") as live:
            if provider == "docker":
                started = dockerenv.up(
                    plane,
                    docker_state_dir=docker_state_dir,
                    node_versions=node_version,
                    timeout=timeout,
                    ttl_seconds=ttl,
                    progress=live.update,
                    raise_inotify=raise_inotify,
                    # Above the spinner and kept: a host-wide change is never said in passing.
                    notice=lambda line: con.print(
                        line, markup=False, highlight=False, soft_wrap=True
                    ),
                )
                status = started.plane
                extra = {
                    "provider": "docker",
                    "dockerHost": started.docker_host,
                    "dockerStateDir": str(started.docker_state_dir),
                    "imagesLoaded": started.loaded,
                    "seconds": started.seconds,
                    "inotify": started.inotify.to_json(),
                }
            else:
                status = plane.up(timeout=timeout, ttl_seconds=ttl, progress=live.update)
    except PlaneError as err:
        fail(str(err).splitlines()[0] + f" (logs in {plane.logs})", code=1)
    doc = {**status.to_json(), **extra}
    emit(doc, output, lambda c: _status_table(c, doc))


@env_app.command()
def down(
    state_dir: StateOpt = None,
    purge: Annotated[
        bool, typer.Option(help="Also delete the state directory (etcd data, certs).")
    ] = False,
) -> None:
    """Stop exactly the processes ``up`` started.

    With ``--provider docker`` also our dockerd, after removing its containers.
    """
    from rich.console import Console

    from orchestrator.localplane import dockerenv

    con = Console(stderr=True)
    stopped = dockerenv.down(_plane(state_dir), purge=purge, progress=con.print)
    sys.stdout.write(f"stopped: {', '.join(stopped) or 'nothing was running'}\n")


@env_app.command()
def status(state_dir: StateOpt = None, output: OutputOpt = Format.table) -> None:
    """Report every component; exit code 1 when any is unhealthy."""
    st = _plane(state_dir).status()
    doc = st.to_json()
    emit(doc, output, lambda c: _status_table(c, doc))
    if not st.healthy:
        raise typer.Exit(1)
