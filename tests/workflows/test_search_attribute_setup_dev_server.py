"""A namespace that is not the dev server's default, on the real dev server, through the CLI.

The dev server is started WITHOUT the calibration search attributes (as a self-hosted server or
a Temporal Cloud namespace starts), so the first ``calibrate`` is refused by the server itself;
the CLI must turn that into one ``error:`` line naming ``calibrator temporal setup`` (exit 1).
``calibrator temporal setup`` then registers them through the operator service, a second run
says they are already present, and ``calibrate`` is accepted. The answers the dev server never
gives (PERMISSION_DENIED from Temporal Cloud) are unit-tested in test_search_attribute_setup.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from typer.testing import CliRunner, Result

from orchestrator.cli.main import app
from testkit.workflow_harness import start_dev_server

BARE = "calibrator-bare"  # the namespace under test: nothing registered
CLASH = "calibrator-clash"  # ClusterName registered as Text by someone else
WANTED = {"CalibrationTarget", "CalibrationPhase", "ClusterName"}
runner = CliRunner()
POLICY = "apiVersion: calibrator.dev/v1alpha1\nkind: CalibrationPolicy\nrules: {channel: stable}\n"


async def _custom(client: Client, namespace: str) -> dict[str, int]:
    answer = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    return dict(answer.custom_attributes)


def _one_error_line(result: Result, code: int) -> str:
    """The command failed with ``code`` and said so in exactly one ``error:`` line."""
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_setup_makes_a_bare_namespace_accept_calibrations(tmp_path: Path) -> None:
    config = tmp_path / "temporal.toml"
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)

    async def main() -> None:
        env = await start_dev_server(
            attributes=(),
            namespace=BARE,
            dev_server_extra_args=["--namespace", CLASH],
        )
        try:
            client = env.client
            address = client.service_client.config.target_host
            config.write_text(f'[profile.own]\naddress = "{address}"\nnamespace = "{BARE}"\n')
            cli_env = {"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "own"}

            async def cli(*argv: str) -> Result:
                return await asyncio.to_thread(runner.invoke, app, list(argv), env=cli_env)

            assert not WANTED & set(await _custom(client, BARE))

            # 1. The server refuses the start; the CLI names the command (exit 1).
            line = _one_error_line(await cli("calibrate", "-t", "v1.35.0"), 1)
            assert f"Temporal namespace {BARE} lacks the search attribute(s)" in line
            assert "run `calibrator temporal setup`" in line
            # A schedule would fail at its first tick: refused now, the same way.
            created = await cli("schedule", "create", "nightly", "-p", str(policy), "--every", "1d")
            line = _one_error_line(created, 1)
            assert "CalibrationTarget, CalibrationPhase, ClusterName" in line
            assert "run `calibrator temporal setup`" in line
            assert [s async for s in await client.list_schedules()] == []

            # 2. Setup registers all three as Keyword, and says so.
            first = await cli("temporal", "setup", "-o", "json")
            assert first.exit_code == 0, first.output
            doc: dict[str, Any] = json.loads(first.stdout)
            assert doc["namespace"] == BARE and doc["address"] == address
            assert sorted(doc["created"]) == sorted(WANTED)
            assert {(a["name"], a["type"], a["status"]) for a in doc["searchAttributes"]} == {
                (name, "Keyword", "created") for name in WANTED
            }
            custom = await _custom(client, BARE)
            keyword = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
            assert {n: custom.get(n) for n in WANTED} == dict.fromkeys(WANTED, keyword)

            # 3. A second run is a success that changes nothing.
            again = await cli("temporal", "setup")
            assert again.exit_code == 0, again.output
            assert "every search attribute was already present: nothing to do" in again.stdout
            assert again.stdout.count("already present") == 1 + len(WANTED)
            second = await cli("temporal", "setup", "-o", "json")
            assert json.loads(second.stdout)["created"] == []

            # 4. The same calibrate is accepted now (no worker: it is only started).
            started = await cli("calibrate", "-t", "v1.35.0", "-o", "json")
            assert started.exit_code == 0, started.output
            calibration_id = json.loads(started.stdout)["calibrationId"]
            described = await client.get_workflow_handle(calibration_id).describe()
            assert described.search_attributes["CalibrationTarget"] == ["v1.35.0"]
            await client.get_workflow_handle(calibration_id).terminate("test done")

            # 5. A namespace that does not exist is bad input (exit 2), nothing created.
            line = _one_error_line(
                await cli("temporal", "setup", "--temporal-namespace", "no-such-ns"), 2
            )
            assert "Temporal namespace 'no-such-ns' does not exist" in line

            # 6. An attribute registered with another type is named; nothing is added.
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(
                    namespace=CLASH,
                    search_attributes={"ClusterName": IndexedValueType.INDEXED_VALUE_TYPE_TEXT},
                )
            )
            line = _one_error_line(await cli("temporal", "setup", "--temporal-namespace", CLASH), 1)
            assert f"namespace {CLASH} already has ClusterName as Text" in line
            assert set(await _custom(client, CLASH)) & WANTED == {"ClusterName"}
        finally:
            await env.shutdown()

    asyncio.run(main())
