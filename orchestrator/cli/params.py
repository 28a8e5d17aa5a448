"""Option values of the one-shot commands coerced without pydantic (``QuickCommand``).

Typer (0.2x with its own click) coerces every option value that is not None through a pydantic
``TypeAdapter``: the first one imports pydantic and builds its schemas, about 0.1 s of CPU in
every ``drift``/``plan``/``check``/``place`` process (the default ``-o table`` is coerced too),
for options that are only text, paths, flags and ``Format``. ``QuickCommand`` gives those
parameters a coercion that calls the same Typer functions the adapters wrap
(``coerce_cli_choice``, ``coerce_cli_path``) and leaves pydantic out. Whatever it does not
handle exactly as the adapter would, an invalid choice included, goes to Typer's own coercion,
so values, errors and help stay the same; with a Typer without ``typer._coercion`` (older
releases coerce through click types, without pydantic) nothing is changed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import typer.core

if TYPE_CHECKING:
    from typer._click import Context
    from typer.core import _TyperParameter

TYPER = object()
"""What ``plain_value`` returns for a value it leaves to Typer's own coercion.

Public because it is part of ``plain_value``'s answer: its callers (``QuickCommand`` and the
test that holds the coercion to Typer's) tell it from a coerced value.
"""


def plain_value(param: _TyperParameter, value: object, ctx: Context) -> object:
    """``value`` coerced as Typer's adapter would for ``param``, or ``TYPER`` to ask Typer."""
    from typer._param_types import coerce_cli_choice, coerce_cli_path

    desc = param.type_descriptor
    info = desc.parameter_info
    annotation = desc.annotation
    if annotation is str or annotation is bool:
        return value if type(value) is annotation else TYPER
    if annotation is Path and info.path_type is None:
        # pydantic's lax Path validation of a str is Path(str); then the adapter's own checks.
        if type(value) is str:
            value = Path(value)
        if not isinstance(value, Path):
            return TYPER
        return coerce_cli_path(value, info, path_type=Path, param=param, ctx=ctx)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        try:
            return coerce_cli_choice(
                value, choices=list(annotation), case_sensitive=info.case_sensitive, ctx=ctx
            )
        except ValueError:
            return TYPER  # Typer words the error (through pydantic, as ever)
    return TYPER


def handled(param: object) -> TypeGuard[_TyperParameter]:
    """Whether ``plain_value`` may be asked for ``param`` (one plain value, no custom parser).

    Public because it states ``plain_value``'s precondition: the test that compares the two
    coercions asks it too, to know that every option of the one-shot commands is covered.
    """
    desc = getattr(param, "type_descriptor", None)
    if desc is None or not hasattr(param, "_runtime_param"):
        return False
    return (
        desc.file_annotation is None
        and desc.parameter_info.parser is None
        and not getattr(param, "multiple", True)
        and getattr(param, "nargs", 0) == 1
        and (
            desc.annotation in (str, bool, Path)
            or (isinstance(desc.annotation, type) and issubclass(desc.annotation, Enum))
        )
    )


@functools.cache
def _plain_runtime_param() -> type | None:
    """Typer's ``RuntimeParam`` with ``plain_value`` first; None when this Typer has none."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError:
        return None

    @dataclass(frozen=True)
    class PlainRuntimeParam(RuntimeParam):
        def _coerce_value(self, value: Any, param: _TyperParameter, ctx: Context) -> Any:
            out = plain_value(param, value, ctx)
            if out is TYPER:
                typer_own = build_runtime_param(param.type_descriptor)
                return typer_own._coerce_value(value, param=param, ctx=ctx)
            return out

    return PlainRuntimeParam


def _plain_params(params: list[Any]) -> None:
    """Give each parameter ``plain_value`` coercion that can have it and has none yet."""
    plain = _plain_runtime_param()
    if plain is None:
        return
    for param in params:
        if handled(param) and param._runtime_param is None:
            desc = param.type_descriptor
            param._runtime_param = plain(
                parameter_info=desc.parameter_info, annotation=desc.annotation
            )


class QuickCommand(typer.core.TyperCommand):
    """A Typer command whose options (``--help`` too) are coerced by ``plain_value``."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        """Typer's, after giving the parameters their coercion."""
        _plain_params(self.get_params(ctx))
        return super().parse_args(ctx, args)


class QuickGroup(typer.core.TyperGroup):
    """The same for a group's own options (its ``--help``), parsed before any command's."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        """Typer's, after giving the parameters their coercion."""
        _plain_params(self.get_params(ctx))
        return super().parse_args(ctx, args)
