"""Connection resolution: profile < TEMPORAL_* environment < flags, and the strict refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.service import TLSConfig

from workflows.connection import ConnectionConfigError, resolve
from workflows.connection_flags import ConnectionFlags

PROFILES = """
[profile.default]
address = "file-default:7233"
namespace = "file-ns"

[profile.cloud]
address = "acct.tmprl.cloud:7233"
namespace = "prod.acct"
api_key = "file-key"

[profile.mtls]
address = "mtls.example:7233"
namespace = "mtls-ns"
[profile.mtls.tls]
server_name = "frontend.example"
server_ca_cert_data = "CA-PEM"
client_cert_data = "CERT-PEM"
client_key_data = "KEY-PEM"

[profile.plain]
address = "plain:7233"
[profile.plain.tls]
disabled = true

[profile.meta]
address = "meta:7233"
[profile.meta.grpc_meta]
x-team = "fleet"
"""


@pytest.mark.parametrize(
    ("name", "flags", "env", "expected"),
    [
        (
            "nothing set: defaults",
            ConnectionFlags(),
            {},
            ("localhost:7233", "default", False, None),
        ),
        (
            "the default profile",
            ConnectionFlags(),
            {},
            ("file-default:7233", "file-ns", False, None),
        ),
        (
            "env overrides the default profile field by field",
            ConnectionFlags(),
            {"TEMPORAL_ADDRESS": "env:7233"},
            ("env:7233", "file-ns", False, None),
        ),
        (
            "TEMPORAL_PROFILE picks a profile",
            ConnectionFlags(),
            {"TEMPORAL_PROFILE": "cloud"},
            ("acct.tmprl.cloud:7233", "prod.acct", True, "file-key"),
        ),
        (
            "--profile beats TEMPORAL_PROFILE",
            ConnectionFlags(profile="plain"),
            {"TEMPORAL_PROFILE": "cloud"},
            ("plain:7233", "default", False, None),
        ),
        (
            "flags beat env and profile",
            ConnectionFlags(profile="cloud", address="flag:1", namespace="flag-ns", api_key="fk"),
            {"TEMPORAL_ADDRESS": "env:7233", "TEMPORAL_NAMESPACE": "env-ns"},
            ("flag:1", "flag-ns", True, "fk"),
        ),
        (
            "env API key turns TLS on",
            ConnectionFlags(),
            {"TEMPORAL_API_KEY": "env-key"},
            ("file-default:7233", "file-ns", True, "env-key"),
        ),
        (
            "--no-tls beats the API key's TLS",
            ConnectionFlags(profile="cloud", tls=False),
            {},
            ("acct.tmprl.cloud:7233", "prod.acct", False, "file-key"),
        ),
        (
            "TEMPORAL_TLS=false beats the profile's API key",
            ConnectionFlags(profile="cloud"),
            {"TEMPORAL_TLS": "false"},
            ("acct.tmprl.cloud:7233", "prod.acct", False, "file-key"),
        ),
        (
            "--tls beats a profile that disables TLS",
            ConnectionFlags(profile="plain", tls=True),
            {},
            ("plain:7233", "default", True, None),
        ),
        (
            "TEMPORAL_TLS=1 turns TLS on",
            ConnectionFlags(),
            {"TEMPORAL_TLS": "1"},
            ("file-default:7233", "file-ns", True, None),
        ),
        (
            "both sources off: flags and defaults only",
            ConnectionFlags(disable_config_env=True, disable_config_file=True, namespace="n"),
            {"TEMPORAL_ADDRESS": "env:7233"},
            ("localhost:7233", "n", False, None),
        ),
        (
            "--disable-config-env ignores TEMPORAL_*",
            ConnectionFlags(disable_config_env=True),
            {"TEMPORAL_ADDRESS": "env:7233", "TEMPORAL_PROFILE": "cloud", "TEMPORAL_TLS": "junk"},
            ("file-default:7233", "file-ns", False, None),
        ),
    ],
)
def test_resolution_order(
    name: str, flags: ConnectionFlags, env: dict[str, str], expected: tuple[Any, ...]
) -> None:
    # The first row reads no file at all (an empty one): everything comes from the defaults.
    source = "" if name == "nothing set: defaults" else PROFILES
    conn = resolve(flags, env, config_source=source)
    tls_on = conn.tls is not False
    assert (conn.address, conn.namespace, tls_on, conn.api_key) == expected, name


def test_mtls_profile_gives_the_sdk_its_pem_material() -> None:
    conn = resolve(ConnectionFlags(profile="mtls"), {}, config_source=PROFILES)
    assert conn.tls == TLSConfig(
        server_root_ca_cert=b"CA-PEM",
        domain="frontend.example",
        client_cert=b"CERT-PEM",
        client_private_key=b"KEY-PEM",
    )
    assert conn.describe() == "mtls.example:7233 (namespace mtls-ns, mTLS, profile mtls)"


def test_tls_env_variables_and_flags_merge_field_by_field(tmp_path: Path) -> None:
    ca, cert, key = (tmp_path / n for n in ("ca.pem", "cert.pem", "key.pem"))
    for path in (ca, cert, key):
        path.write_text(path.stem)
    env = {
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(ca),
        "TEMPORAL_TLS_CLIENT_CERT_DATA": "ENV-CERT",
        "TEMPORAL_TLS_CLIENT_KEY_DATA": "ENV-KEY",
        "TEMPORAL_TLS_SERVER_NAME": "env-name",
    }
    conn = resolve(
        ConnectionFlags(tls_cert_path=cert, tls_key_path=key, tls_server_name="flag-name"),
        env,
        config_source=PROFILES,
    )
    assert conn.tls == TLSConfig(
        server_root_ca_cert=b"ca",
        domain="flag-name",
        client_cert=b"cert",
        client_private_key=b"key",
    )


def test_grpc_metadata_and_api_key_reach_connect() -> None:
    conn = resolve(
        ConnectionFlags(profile="meta"), {"TEMPORAL_API_KEY": "secret-key"}, config_source=PROFILES
    )
    kwargs = conn.connect_kwargs()
    assert kwargs["rpc_metadata"] == {"x-team": "fleet"}
    assert kwargs["api_key"] == "secret-key"
    assert kwargs["tls"] is True
    assert "secret-key" not in conn.describe()


def test_a_real_file_is_read_from_the_flag_and_from_the_env(tmp_path: Path) -> None:
    path = tmp_path / "temporal.toml"
    path.write_text(PROFILES)
    by_flag = resolve(ConnectionFlags(config_file=path, profile="cloud"), {})
    by_env = resolve(
        ConnectionFlags(), {"TEMPORAL_CONFIG_FILE": str(path), "TEMPORAL_PROFILE": "cloud"}
    )
    assert by_flag == by_env
    assert by_flag.address == "acct.tmprl.cloud:7233"
    ignored = resolve(ConnectionFlags(config_file=path, disable_config_file=True), {})
    assert ignored.address == "localhost:7233"


@pytest.mark.parametrize(
    ("flags", "env", "source", "message"),
    [
        (ConnectionFlags(profile="nope"), {}, PROFILES, "profile 'nope': Profile 'nope' not found"),
        (ConnectionFlags(), {"TEMPORAL_PROFILE": "nope"}, PROFILES, "Profile 'nope' not found"),
        (ConnectionFlags(), {}, '[profile.default]\nadress = "x"\n', "unknown field `adress`"),
        (ConnectionFlags(), {}, "[profile.default]\naddress = 7233\n", "invalid type"),
        (ConnectionFlags(), {"TEMPORAL_TLS": "yes"}, None, "TEMPORAL_TLS='yes': expected true"),
        (
            ConnectionFlags(),
            {"TEMPORAL_TLS_DISABLE_HOST_VERIFICATION": "true"},
            None,
            "cannot switch host verification off",
        ),
        (
            ConnectionFlags(),
            {},
            "[profile.default.tls]\ndisable_host_verification = true\n",
            "disable_host_verification is not supported",
        ),
        (
            ConnectionFlags(),
            {"TEMPORAL_TLS_CLIENT_CERT_DATA": "CERT"},
            None,
            "mTLS needs both a client certificate and its private key",
        ),
        (
            ConnectionFlags(tls_ca_path=Path("/nonexistent/ca.pem")),
            {},
            None,
            "TLS server CA file /nonexistent/ca.pem does not exist",
        ),
        (
            ConnectionFlags(config_file=Path("/nonexistent/temporal.toml")),
            {},
            None,
            "config file /nonexistent/temporal.toml does not exist",
        ),
        (
            ConnectionFlags(),
            {"TEMPORAL_CONFIG_FILE": "/nonexistent/temporal.toml"},
            None,
            "config file /nonexistent/temporal.toml does not exist",
        ),
    ],
)
def test_bad_settings_are_one_clear_error(
    flags: ConnectionFlags, env: dict[str, str], source: str | None, message: str
) -> None:
    with pytest.raises(ConnectionConfigError) as caught:
        resolve(flags, env, config_source=source)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value).strip() or "TOML parse error" in str(caught.value)
