"""``calibrator temporal setup``: prepare a Temporal namespace for calibrations, once.

The calibration workflows set three Keyword search attributes (workflows/search_attributes.py).
The dev server of ``calibrator demo`` and the tests gets them at start-up; any other server
(self-hosted, Temporal Cloud) refuses ``calibrate`` until they are registered in the namespace.
This command registers them through the operator service with the same connection settings as
every Temporal-facing command, is idempotent (present = success, and it says so), and where the
server does not allow it (Temporal Cloud) says who can and how, with exit 1. The rules behind
each answer live in ``workflows.search_attribute_setup``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.cli.output import Format, emit, fail, new_table
from orchestrator.cli.temporal import FROM_ENVIRONMENT, ConnectionFlags, connect, connection_options

if TYPE_CHECKING:  # Rich only when a command prints for people
    from rich.console import Console

temporal_app = typer.Typer(
    help="Prepare a Temporal namespace for calibrations (once per namespace).",
    no_args_is_help=True,
)

OutputOpt = Annotated[Format, typer.Option("--output", "-o", help="table, json or yaml.")]


def setup_table(con: Console, doc: dict[str, Any]) -> None:
    """People's view: one row per attribute, then one line saying what this run changed."""
    table = new_table(
        f"Search attributes in namespace {doc['namespace']} ({doc['address']})",
        ("Name", "Type", "Status"),
    )
    for row in doc["searchAttributes"]:
        table.add_row(row["name"], row["type"], row["status"])
    con.print(table)
    created = doc["created"]
    if created:
        con.print(f"registered {', '.join(created)}; calibrations can start in this namespace")
    else:
        con.print("every search attribute was already present: nothing to do")


@temporal_app.command()
@connection_options
def setup(
    temporal: ConnectionFlags = FROM_ENVIRONMENT,
    output: OutputOpt = Format.table,
) -> None:
    """Register the calibration search attributes in the namespace (idempotent).

    Needs a server that lets this client add search attributes (the dev server, a self-hosted
    server); Temporal Cloud does not, and the error says how to add them there instead.
    """
    import asyncio  # here: commands without Temporal do not pay for it

    from orchestrator.cli.temporal import resolve
    from workflows.client import register_search_attributes
    from workflows.search_attribute_setup import (
        NamespaceNotFound,
        SearchAttributeSetupError,
    )

    connection = resolve(temporal)  # bad settings: exit 2 before anything connects

    async def main() -> Any:
        return await register_search_attributes(await connect(temporal))

    try:
        registration = asyncio.run(main())
    except NamespaceNotFound as err:
        fail(str(err))
    except SearchAttributeSetupError as err:
        fail(str(err), code=1)
    doc: dict[str, Any] = {
        "address": connection.address,
        "namespace": registration.namespace,
        "searchAttributes": [
            {"name": a.name, "type": a.type, "status": a.status} for a in registration.attributes
        ],
        "created": list(registration.created),
    }
    emit(doc, output, lambda con: setup_table(con, doc))
