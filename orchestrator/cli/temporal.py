"""The Temporal connection options every Temporal-facing command takes, as the Temporal CLI names them.

``@connection_options`` adds ``--profile``, ``--config-file``, ``--address``,
``--temporal-namespace``, ``--api-key``, ``--tls`` and the ``--tls-*`` paths to a command and
hands the command one ``ConnectionFlags`` value, so ten commands do not repeat twelve parameters
and can never disagree on a name. Resolution (profile < environment < flags) lives in
``workflows.connection``; it is imported only when a command connects, because importing the
Temporal SDK costs about a second that ``drift`` or ``plan`` should not pay.

The namespace flag is ``--temporal-namespace`` rather than the Temporal CLI's ``--namespace``:
``-n/--namespace`` already means the CAPI namespace here, as in kubectl.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer

from orchestrator.cli.output import fail
from workflows.connection_flags import FROM_ENVIRONMENT, ConnectionFlags

P = ParamSpec("P")
R = TypeVar("R")
PANEL = "Temporal connection (flags > TEMPORAL_* env > temporal.toml profile)"


"""No flag given: the placeholder default of a command's ``temporal`` parameter."""


def _opt(*names: str, help: str) -> Any:
    return typer.Option(*names, help=help, rich_help_panel=PANEL, show_default=False)


# CLI parameter -> ConnectionFlags field where they differ (``-n/--namespace`` is the CAPI one).
_FIELDS = {"temporal_namespace": "namespace"}
__all__ = ["FROM_ENVIRONMENT", "ConnectionFlags", "connect", "connection_options", "resolve"]
_PARAMETERS: dict[str, Any] = {
    "profile": Annotated[
        str | None, _opt("--profile", help="Profile of the config file (TEMPORAL_PROFILE).")
    ],
    "config_file": Annotated[
        Path | None,
        _opt("--config-file", help="temporal.toml to read (TEMPORAL_CONFIG_FILE)."),
    ],
    "disable_config_file": Annotated[
        bool, _opt("--disable-config-file", help="Ignore every config file.")
    ],
    "disable_config_env": Annotated[
        bool, _opt("--disable-config-env", help="Ignore the TEMPORAL_* environment.")
    ],
    "address": Annotated[
        str | None,
        _opt("--address", help="Frontend host:port (TEMPORAL_ADDRESS; default localhost:7233)."),
    ],
    "temporal_namespace": Annotated[
        str | None,
        _opt(
            "--temporal-namespace", help="Temporal namespace (TEMPORAL_NAMESPACE; default default)."
        ),
    ],
    "api_key": Annotated[
        str | None,
        _opt(
            "--api-key", help="API key, turns TLS on (prefer TEMPORAL_API_KEY: flags show in ps)."
        ),
    ],
    "tls": Annotated[
        bool | None, _opt("--tls/--no-tls", help="Force TLS on or off (TEMPORAL_TLS).")
    ],
    "tls_ca_path": Annotated[
        Path | None, _opt("--tls-ca-path", help="Server CA certificate (PEM).")
    ],
    "tls_cert_path": Annotated[
        Path | None, _opt("--tls-cert-path", help="Client certificate for mTLS (PEM).")
    ],
    "tls_key_path": Annotated[
        Path | None, _opt("--tls-key-path", help="Client private key for mTLS (PEM).")
    ],
    "tls_server_name": Annotated[
        str | None, _opt("--tls-server-name", help="Server name to verify (SNI override).")
    ],
}


def connection_options(func: Callable[..., R]) -> Callable[..., R]:
    """Give ``func`` the connection flags; it receives them as ``temporal: ConnectionFlags``."""
    signature = inspect.signature(func, eval_str=True)
    kept = [p for p in signature.parameters.values() if p.name != "temporal"]
    added = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=ConnectionFlags.__dataclass_fields__[_FIELDS.get(name, name)].default,
            annotation=annotation,
        )
        for name, annotation in _PARAMETERS.items()
    ]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> R:
        options = ConnectionFlags(**{_FIELDS.get(n, n): kwargs.pop(n) for n in _PARAMETERS})
        return func(*args, temporal=options, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{p.name: p.annotation for p in kept},
        **_PARAMETERS,
        "return": signature.return_annotation,
    }
    return wrapper


def resolve(options: ConnectionFlags) -> Any:
    """The resolved ``workflows.connection.Connection`` (bad settings: one error line, exit 2)."""
    from workflows.connection import ConnectionConfigError
    from workflows.connection import resolve as resolve_connection

    try:
        return resolve_connection(options)
    except ConnectionConfigError as err:
        fail(str(err))


async def connect(options: ConnectionFlags, **extra: Any) -> Any:
    """A connected ``temporalio.client.Client`` (unreachable: one error line, exit 1).

    ``extra`` adds ``Client.connect`` options that are not connection settings: the worker's
    telemetry runtime and tracing interceptors.
    """
    from temporalio.client import Client

    connection = resolve(options)
    try:
        return await Client.connect(**connection.connect_kwargs(), **extra)
    except Exception as err:
        fail(f"cannot reach Temporal at {connection.describe()}: {err}", code=1)
