"""``QuickCommand``: option values coerced without pydantic, exactly as Typer's adapters do."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer.main
from typer._click import Context
from typer._coercion import build_runtime_param

from orchestrator.cli.main import app
from orchestrator.cli.output import Format
from orchestrator.cli.params import TYPER, handled, plain_value


def _params() -> list[tuple[str, object]]:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    out: list[tuple[str, object]] = []
    for name in ("drift", "plan", "check", "place"):
        command = group.commands[name]
        ctx = Context(command)
        out += [(f"{name} {p.name}", (command, p)) for p in command.get_params(ctx)]
    return out


VALUES: list[object] = [
    "json",
    "JSON",
    "yaml",
    "bogus",
    Format.table,
    "/tmp",
    "relative/file.json",
    "",
    "v1.35.0",
    True,
    False,
    Path("/"),
]


@pytest.mark.parametrize(
    ("label", "pair"), _params(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_plain_coercion_is_typers(label: str, pair: tuple[typer.core.TyperCommand, object]) -> None:
    command, param = pair
    assert handled(param), label  # every option of the one-shot commands is a plain one
    ctx = Context(command)
    typer_own = build_runtime_param(param.type_descriptor)
    for value in VALUES:
        try:
            expected: object = typer_own._coerce_value(value, param=param, ctx=ctx)
        except Exception as err:
            try:
                refused = plain_value(param, value, ctx)
            except Exception as mine:
                assert (type(mine), str(mine)) == (type(err), str(err)), (label, value)
                continue
            assert refused is TYPER, (label, value)  # or it leaves the value to Typer
            continue
        got = plain_value(param, value, ctx)
        if got is not TYPER:
            assert got == expected and type(got) is type(expected), (label, value)
