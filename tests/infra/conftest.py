"""Pulumi mocks behind the SDK's own Mocks interface: the program runs for real, the engine
and provider are replaced, and every registered resource is recorded for the assertions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pytest


@dataclass
class Registered:
    typ: str
    name: str
    inputs: dict[str, Any]
    provider: str | None
    # Filled from the monitor's request once the registration returns (the Mocks interface does
    # not see them): the parent's URN and the URNs this resource depends on.
    urn: str = ""
    parent: str = ""
    dependencies: frozenset[str] = frozenset()


@dataclass
class RecordingMocks(pulumi.runtime.Mocks):
    resources: list[Registered] = field(default_factory=list)

    def new_resource(
        self, args: pulumi.runtime.MockResourceArgs
    ) -> tuple[str | None, dict[str, Any]]:
        self.resources.append(Registered(args.typ, args.name, dict(args.inputs), args.provider))
        outputs = dict(args.inputs)
        if args.typ == "command:local:Command":
            outputs["stdout"] = "apiVersion: v1\nkind: Config\n"
        return f"{args.name}-id", outputs

    def call(
        self, args: pulumi.runtime.MockCallArgs
    ) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None

    def by_urn(self, urn: str) -> Registered:
        (found,) = [r for r in self.resources if r.urn == urn]
        return found

    def of_type(self, typ: str) -> list[Registered]:
        return [r for r in self.resources if r.typ == typ]

    def objects(self, kind: str) -> list[Registered]:
        return [r for r in self.resources if r.inputs.get("kind") == kind]


def _record_graph(recording: RecordingMocks) -> None:
    """Wrap the mock monitor's RegisterResource so each record also gets its URN, parent and
    dependencies: what the program promises about order is the graph, not the SDK's
    (asynchronous, unordered) registration sequence."""
    monitor = pulumi.runtime.settings.SETTINGS.monitor
    register = monitor.RegisterResource

    def recorded(request: Any) -> Any:
        response = register(request)
        # Registrations may run on several threads; URNs are unique, so match on the record
        # that has this type and name and no URN yet.
        for r in recording.resources:
            if not r.urn and r.typ == request.type and r.name == request.name:
                r.urn = response.urn
                r.parent = request.parent
                r.dependencies = frozenset(request.dependencies)
                break
        return response

    monitor.RegisterResource = recorded


@pytest.fixture
def mocks() -> Iterator[RecordingMocks]:
    # Pulumi's mock runtime builds futures on the main thread's current event loop. A test that
    # ran asyncio.run() before leaves none set, so each test gets its own loop (and closes it):
    # the result must not depend on which test ran first.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    recording = RecordingMocks()
    pulumi.runtime.set_mocks(recording, project="calibrator-fleet", stack="test", preview=False)
    _record_graph(recording)
    try:
        yield recording
    finally:
        pulumi.runtime.set_all_config({})
        asyncio.set_event_loop(None)
        loop.close()


def set_config(values: dict[str, Any]) -> None:
    """Stack config as `pulumi config set --path` would leave it (objects as JSON strings)."""
    pulumi.runtime.set_all_config(
        {
            f"calibrator-fleet:{k}": v if isinstance(v, str) else json.dumps(v)
            for k, v in values.items()
        }
    )
