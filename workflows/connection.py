"""How the worker and every Temporal-facing command find their Temporal server.

The same way the Temporal CLI and SDKs do, through ``temporalio.envconfig`` (the SDK's own
loader, so a ``temporal.toml`` that works for ``temporal workflow list`` works here too):

1. a profile of the config file: ``--profile`` / ``TEMPORAL_PROFILE`` (default ``default``) from
   ``--config-file`` / ``TEMPORAL_CONFIG_FILE`` or the SDK's default location
   (``~/.config/temporalio/temporal.toml`` on Linux);
2. ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS*`` and
   ``TEMPORAL_GRPC_META_*`` override the profile field by field;
3. command-line flags override both, field by field;
4. what is still unset takes the defaults ``localhost:7233`` and namespace ``default``.

TLS is on when the profile, ``TEMPORAL_TLS`` or ``--tls`` says so, when any TLS material (CA,
client certificate, server name) is given, or when an API key is given (Temporal Cloud), unless it
is explicitly switched off -- the SDK's rule. Where the SDK's loader is lenient we are strict, so
a typo never silently changes how (or whether) the connection is secured: unknown keys in the
file, a ``TEMPORAL_TLS`` that is not a boolean, a config file named explicitly but missing, a
client certificate without its key, and ``disable_host_verification`` (the Python SDK cannot
switch verification off; the setting would be dropped silently) are all errors (exit 2).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.bridge.temporal_sdk_bridge import (  # type: ignore[import-not-found]  # no stubs
    envconfig as bridge,
)
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS
from temporalio.service import TLSConfig

from orchestrator.domain.errors import InputError
from workflows.connection_flags import FROM_ENVIRONMENT, ConnectionFlags
from workflows.payloads import DATA_CONVERTER

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_PROFILE = "default"
_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}


class ConnectionConfigError(InputError):
    """A connection setting that cannot be used: bad input, reported before connecting."""


@dataclass(frozen=True)
class Connection:
    """A resolved connection: everything ``Client.connect`` needs, and where it came from."""

    address: str
    namespace: str
    tls: bool | TLSConfig
    api_key: str | None = None
    rpc_metadata: Mapping[str, str] = dataclasses.field(default_factory=dict)
    profile: str = DEFAULT_PROFILE

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``temporalio.client.Client.connect``, our data converter included."""
        kwargs: dict[str, Any] = {
            "target_host": self.address,
            "namespace": self.namespace,
            "tls": self.tls,
            "data_converter": DATA_CONVERTER,
        }
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        if self.rpc_metadata:
            kwargs["rpc_metadata"] = dict(self.rpc_metadata)
        return kwargs

    def describe(self) -> str:
        """``prod.tmprl.cloud:7233 (namespace prod.acct, mTLS, profile prod)``: no secrets."""
        if self.tls is False:
            security = "plaintext"
        elif isinstance(self.tls, TLSConfig) and self.tls.client_cert is not None:
            security = "mTLS"
        else:
            security = "TLS"
        if self.api_key is not None:
            security += " + API key"
        return f"{self.address} (namespace {self.namespace}, {security}, profile {self.profile})"


def _env_bool(env: Mapping[str, str], name: str) -> None:
    value = env.get(name)
    if value is not None and value.strip().lower() not in _BOOLEANS:
        raise ConnectionConfigError(f"{name}={value[:20]!r}: expected true or false")


def _explicit_file(flags: ConnectionFlags, env: Mapping[str, str]) -> Path | None:
    """The config file the user named (flag, then env), which must then exist."""
    if flags.disable_config_file:
        return None
    named = flags.config_file
    if named is None and not flags.disable_config_env and env.get("TEMPORAL_CONFIG_FILE"):
        named = Path(env["TEMPORAL_CONFIG_FILE"])
    if named is not None and not named.is_file():
        raise ConnectionConfigError(f"Temporal config file {named} does not exist")
    return named


def _apply_flags(profile: ClientConfigProfile, flags: ConnectionFlags) -> ClientConfigProfile:
    """Flags win over the profile and the environment, one field at a time."""
    changes: dict[str, Any] = {}
    if flags.address is not None:
        changes["address"] = flags.address
    if flags.namespace is not None:
        changes["namespace"] = flags.namespace
    if flags.api_key is not None:
        changes["api_key"] = flags.api_key
    tls_changes: dict[str, Any] = {}
    if flags.tls is not None:
        tls_changes["disabled"] = not flags.tls
    if flags.tls_ca_path is not None:
        tls_changes["server_root_ca_cert"] = flags.tls_ca_path
    if flags.tls_cert_path is not None:
        tls_changes["client_cert"] = flags.tls_cert_path
    if flags.tls_key_path is not None:
        tls_changes["client_private_key"] = flags.tls_key_path
    if flags.tls_server_name is not None:
        tls_changes["server_name"] = flags.tls_server_name
    if tls_changes:
        changes["tls"] = dataclasses.replace(profile.tls or ClientConfigTLS(), **tls_changes)
    return dataclasses.replace(profile, **changes) if changes else profile


def _check_tls(tls: ClientConfigTLS | None) -> None:
    if tls is None or tls.disabled:
        return
    if (tls.client_cert is None) != (tls.client_private_key is None):
        raise ConnectionConfigError(
            "mTLS needs both a client certificate and its private key (tls client_cert/"
            "client_key, TEMPORAL_TLS_CLIENT_CERT_*/KEY_*, or --tls-cert-path/--tls-key-path)"
        )
    for what, source in (
        ("server CA", tls.server_root_ca_cert),
        ("client certificate", tls.client_cert),
        ("client key", tls.client_private_key),
    ):
        if isinstance(source, Path) and not source.is_file():
            raise ConnectionConfigError(f"TLS {what} file {source} does not exist")


def resolve(
    flags: ConnectionFlags = FROM_ENVIRONMENT,
    env: Mapping[str, str] | None = None,
    *,
    config_source: str | bytes | None = None,
) -> Connection:
    """The connection that profile, environment and flags describe (ConnectionConfigError if bad).

    ``env`` defaults to the process environment; ``config_source`` (TOML text) replaces the file
    lookup, for tests.
    """
    environ = dict(os.environ if env is None else env)
    if not flags.disable_config_env:
        _env_bool(environ, "TEMPORAL_TLS")
        _env_bool(environ, "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION")
        if _BOOLEANS.get(environ.get("TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", "").lower()):
            raise ConnectionConfigError(
                "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: the Temporal Python SDK cannot switch "
                "host verification off; give the server's CA (TEMPORAL_TLS_SERVER_CA_CERT_PATH) "
                "and, if its certificate names another host, TEMPORAL_TLS_SERVER_NAME"
            )
    source: str | bytes | Path | None = config_source
    if source is None:
        source = _explicit_file(flags, environ)
    profile_name = flags.profile
    if profile_name is None and not flags.disable_config_env:
        profile_name = environ.get("TEMPORAL_PROFILE") or None
    try:
        # Both sources off: only flags and defaults (the loader refuses to load nothing).
        profile = (
            ClientConfigProfile()
            if flags.disable_config_file and flags.disable_config_env
            else ClientConfigProfile.load(
                profile_name,
                config_source=source,
                disable_file=flags.disable_config_file,
                disable_env=flags.disable_config_env,
                config_file_strict=True,
                override_env_vars=environ,
            )
        )
    except Exception as err:  # the bridge's ConfigError: a parse or lookup error
        where = f"profile {profile_name!r}" if profile_name else "Temporal client config"
        raise ConnectionConfigError(f"{where}: {str(err).strip()}") from None
    _reject_disabled_verification(profile_name, source, flags, environ)
    profile = _apply_flags(profile, flags)
    _check_tls(profile.tls)
    config = profile.to_client_connect_config()
    tls = config.get("tls", False)
    return Connection(
        address=config.get("target_host") or DEFAULT_ADDRESS,
        namespace=config.get("namespace") or DEFAULT_NAMESPACE,
        tls=tls,
        api_key=config.get("api_key"),
        rpc_metadata=dict(config.get("rpc_metadata") or {}),
        profile=profile_name or DEFAULT_PROFILE,
    )


def _reject_disabled_verification(
    profile: str | None,
    source: str | bytes | Path | None,
    flags: ConnectionFlags,
    env: Mapping[str, str],
) -> None:
    """Refuse ``tls.disable_host_verification = true`` in the profile (the SDK drops it)."""
    if flags.disable_config_file:
        return
    path, data = (
        (str(source), None)
        if isinstance(source, Path)
        else (None, source.encode() if isinstance(source, str) else source)
    )
    raw = bridge.load_client_connect_config(
        profile=profile,
        path=path,
        data=data,
        disable_file=False,
        disable_env=True,
        config_file_strict=True,
        env_vars=env,
    )
    if (raw.get("tls") or {}).get("disable_host_verification"):
        raise ConnectionConfigError(
            f"profile {profile or DEFAULT_PROFILE!r}: tls.disable_host_verification is not "
            "supported by the Temporal Python SDK; give the server's CA (server_ca_cert_path) "
            "and, if its certificate names another host, server_name"
        )
