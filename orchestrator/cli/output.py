"""Rendering: JSON/YAML for machines, Rich tables for people; one error line for bad input."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from enum import StrEnum
from typing import NoReturn

import yaml
from rich.console import Console

# Exit statuses of every command (README "Exit status"): 0 = the whole answer; 1 = a partial
# answer -- the output is valid and complete for what it covers, and names every cluster or
# workload it leaves out with the reason (kubectl diff's "1 = look at the output"); 2 = bad
# input, nothing computed. Scripts can therefore tell "clean" from "not fully checked".
EXIT_OK = 0
EXIT_PARTIAL = 1
EXIT_BAD_INPUT = 2


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


def finish(partial: bool) -> None:
    """End a command whose document is already printed: exit 1 when it left something out."""
    if partial:
        raise SystemExit(EXIT_PARTIAL)
