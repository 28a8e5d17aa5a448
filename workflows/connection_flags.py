"""The Temporal connection flags as given on the command line (no Temporal SDK import).

Its own module so that the CLI can declare and collect the flags of every command without
importing the SDK, which only ``workflows.connection.resolve`` needs once a command connects.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ConnectionFlags:
    """What the command line said; ``None`` means "not given" (the profile or env decides)."""

    profile: str | None = None
    config_file: Path | None = None
    disable_config_file: bool = False
    disable_config_env: bool = False
    address: str | None = None
    namespace: str | None = None
    api_key: str | None = None
    tls: bool | None = None
    tls_ca_path: Path | None = None
    tls_cert_path: Path | None = None
    tls_key_path: Path | None = None
    tls_server_name: str | None = None


FROM_ENVIRONMENT = ConnectionFlags()  # no flag given: the env and the profile decide
