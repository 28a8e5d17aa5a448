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
        sys.stdout.write(dumps_json(doc))
    elif fmt is Format.yaml:
        # libyaml's emitter when PyYAML has it: the pure-Python one takes seconds per megabyte.
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        sys.stdout.write(yaml.dump(doc, Dumper=dumper, sort_keys=False))
    else:
        table(Console(highlight=False))


def dumps_json(doc: dict[str, object]) -> str:
    """``doc`` as JSON with one line per top-level key and per item of a top-level list.

    ``json.dumps(indent=2)`` runs the pure-Python encoder (the C one only does compact output),
    which took longer than placing 10,000 workloads; here every line is encoded in C. The result
    is still easy to read and to diff (one decision or cluster per line) and parses the same.
    """
    encode = json.JSONEncoder(separators=(", ", ": ")).encode
    lines: list[str] = []
    for key, value in doc.items():
        name = encode(key)
        if isinstance(value, list) and value:
            items = ",\n    ".join(map(encode, value))
            lines.append(f"  {name}: [\n    {items}\n  ]")
        else:
            lines.append(f"  {name}: {encode(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr and a non-zero exit, never a traceback."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(code)
