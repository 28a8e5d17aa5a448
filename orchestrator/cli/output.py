"""Rendering: JSON/YAML for machines, Rich tables for people; one error line for bad input."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from enum import StrEnum
from typing import NoReturn

import yaml
from rich.console import Console


class Format(StrEnum):
    """Output formats every command accepts."""

    table = "table"
    json = "json"
    yaml = "yaml"


def emit(doc: dict[str, object], fmt: Format, table: Callable[[Console], None]) -> None:
    """Print ``doc`` as JSON/YAML, or call ``table`` to render it for people."""
    if fmt is Format.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif fmt is Format.yaml:
        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
    else:
        table(Console(highlight=False))


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr and a non-zero exit, never a traceback."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(code)
