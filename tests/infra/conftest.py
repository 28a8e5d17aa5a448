"""Pulumi mocks behind the SDK's own Mocks interface: the program runs for real, the engine
and provider are replaced, and every registered resource is recorded for the assertions."""

from __future__ import annotations

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

    def of_type(self, typ: str) -> list[Registered]:
        return [r for r in self.resources if r.typ == typ]

    def objects(self, kind: str) -> list[Registered]:
        return [r for r in self.resources if r.inputs.get("kind") == kind]


@pytest.fixture
def mocks() -> Iterator[RecordingMocks]:
    recording = RecordingMocks()
    pulumi.runtime.set_mocks(recording, project="calibrator-fleet", stack="test", preview=False)
    yield recording
    pulumi.runtime.set_all_config({})


def set_config(values: dict[str, Any]) -> None:
    """Stack config as `pulumi config set --path` would leave it (objects as JSON strings)."""
    pulumi.runtime.set_all_config(
        {
            f"calibrator-fleet:{k}": v if isinstance(v, str) else json.dumps(v)
            for k, v in values.items()
        }
    )
