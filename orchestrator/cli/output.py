"""Rendering: JSON/YAML for machines, Rich tables for people; one error line for bad input."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TextIO, TypeVar

if TYPE_CHECKING:  # Rich only for tables: JSON and YAML output need none of it
    from rich.console import Console
    from rich.table import Table

# Width Rich gets when the stream is not a terminal (a pipe, a CI log, `| tee demo.log`). Rich
# falls back to 80 columns there and squeezes tables until names end in "…" ("demo-prod…"),
# which makes logs useless for grep. Tables are only as wide as their content, so a large width
# costs nothing; text longer than this still wraps (never cuts).
NON_TTY_WIDTH = 1000

T = TypeVar("T")

# Exit statuses of every command (README "Exit status"): 0 = the whole answer; 1 = a partial
# answer -- the output is valid and complete for what it covers, and names every cluster or
# workload it leaves out with the reason (kubectl diff's "1 = look at the output"); 2 = bad
# input, nothing computed. Scripts can therefore tell "clean" from "not fully checked".
# 3 = found what the caller asked to fail on (``--fail-on``, as pluto's 3; ``cli.gates``).
# 4-6 = ``calibrate --wait`` saw the run end other than Succeeded (``cli.outcome``).
EXIT_OK = 0
EXIT_PARTIAL = 1
EXIT_BAD_INPUT = 2
EXIT_FOUND = 3
EXIT_RUN_FAILED = 4
EXIT_RUN_ABORTED = 5
EXIT_RUN_INCOMPLETE = 6


class Format(StrEnum):
    """Output formats every command accepts (``wide``: the table with extra columns, as kubectl)."""

    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"


def console(*, stderr: bool = False) -> Console:
    """A Rich console for people: the terminal's width, or NON_TTY_WIDTH when not a terminal."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr, highlight=False)
    return Console(stderr=stderr, highlight=False, width=NON_TTY_WIDTH)


def new_table(title: str, columns: Sequence[str], *, names: int = 1) -> Table:
    """A table whose cells are never cut with "…".

    The first ``names`` columns hold names (clusters, workloads): they never wrap, so each name
    stays one greppable token. Every other column folds a long word onto the next line instead
    of Rich's default ellipsis. Together with ``output.console`` (wide when not a terminal) this
    keeps names whole in logs and in narrow terminals.
    """
    from rich.table import Table

    table = Table(title=title, title_justify="left", caption_justify="left")  # logs: no centring
    for i, col in enumerate(columns):
        table.add_column(col, no_wrap=i < names, overflow="fold")
    return table


def emit(doc: Mapping[str, object], fmt: Format, table: Callable[[Console], None]) -> None:
    """Print ``doc`` as JSON/YAML, or call ``table`` to render it for people (table and wide).

    JSON is written as it is encoded (``write_json``), so a value may be ``Items``.
    """
    if fmt is Format.json:
        write_json(doc, sys.stdout)
    elif fmt is Format.yaml:
        import yaml  # here: JSON and tables do not need it

        # libyaml's emitter when PyYAML has it: the pure-Python one takes seconds per megabyte.
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        sys.stdout.write(yaml.dump(doc, Dumper=dumper, sort_keys=False))
    else:
        table(console())


def dumps_json(doc: Mapping[str, object]) -> str:
    """``doc`` as JSON with one line per top-level key and per item of a top-level list.

    ``json.dumps(indent=2)`` runs the pure-Python encoder (the C one only does compact output),
    which took longer than placing 10,000 workloads; here every line is encoded in C. The result
    is still easy to read and to diff (one decision or cluster per line) and parses the same.
    A top-level value may be ``Items``: written as the list of its items' JSON.
    """
    return "".join(_json_chunks(doc))


def write_json(doc: Mapping[str, object], out: TextIO) -> None:
    """Write ``dumps_json(doc)`` to ``out`` a batch of items at a time, never as one string.

    Each batch's items are encoded, written and dropped in turn (a 1k x 10k ``place``: 10,000
    decision dicts, ~45 MB, and three copies of 10 MB of text were alive at once when the
    document was built whole; the pages they touched were a tenth of the run's CPU time).
    """
    for chunk in _json_chunks(doc):
        out.write(chunk)


@dataclass(frozen=True, slots=True)
class Items(Generic[T]):
    """A top-level list written as it is converted: each item of ``source`` as ``to_json`` gives it.

    ``to_json`` runs a batch at a time, just before that batch is encoded and written, so the
    converted items are never all alive at once (``write_json``).
    """

    source: Sequence[T]
    to_json: Callable[[T], object]


_BATCH = 512  # items encoded per chunk written: large writes, little text alive at once
_SEP = ",\n    "


def _json_chunks(doc: Mapping[str, object]) -> Iterator[str]:
    """The text of ``dumps_json(doc)`` in pieces (see there and ``write_json``)."""
    encode = json.JSONEncoder(separators=(", ", ": ")).encode
    yield "{\n"
    sep = ""
    for key, value in doc.items():
        head = f"{sep}  {encode(key)}: "
        sep = ",\n"
        items: Sequence[object]
        to_json: Callable[[Any], object] | None
        if isinstance(value, Items):
            items, to_json = value.source, value.to_json
        elif isinstance(value, list):
            items, to_json = value, None
        else:
            yield head + encode(value)
            continue
        if not items:
            yield head + "[]"
            continue
        yield head + "["
        for start in range(0, len(items), _BATCH):
            yield _items_text(encode, to_json, items[start : start + _BATCH], start)
        yield "\n  ]"
    yield "\n}\n"


def _items_text(
    encode: Callable[[object], str],
    to_json: Callable[[Any], object] | None,
    items: Sequence[object],
    start: int,
) -> str:
    """Items ``start..`` of a top-level list, one per line (the first after the list's ``[``)."""
    lead = "\n    " if start == 0 else _SEP
    if to_json is None:
        return lead + _SEP.join(map(encode, items))
    return lead + _SEP.join([encode(to_json(item)) for item in items])


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr and a non-zero exit, never a traceback."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(code)


def finish(partial: bool) -> None:
    """End a command whose document is already printed: exit 1 when it left something out.

    In the ``calibrator`` process the exit is immediate (``runtime.quick_exit``).
    """
    from orchestrator.cli.runtime import quick_exit

    quick_exit(EXIT_PARTIAL if partial else EXIT_OK)
    if partial:
        raise SystemExit(EXIT_PARTIAL)
