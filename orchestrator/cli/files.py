"""Reading user files for the CLI: bounded, and every failure one ``error:`` line (exit 2).

The size limit is enforced while reading: at most ``MAX_DOCUMENT_BYTES + 1`` bytes are read, so
``--snapshot /dev/zero`` or a runaway export fails at once instead of filling memory. Parsing
(and the same limit for callers that hand over text) lives in ``orchestrator.domain.documents``.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.cli.output import fail

MAX_MESSAGE = 400
"""Longest error line printed; the domain already quotes values short, this is the backstop."""


def clip_message(message: str, limit: int = MAX_MESSAGE) -> str:
    """One line of at most ``limit`` characters."""
    line = " ".join(message.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def read_document(path: Path, what: str) -> bytes:
    """Bytes of ``path`` (a file, pipe or device), at most the document size limit."""
    from orchestrator.domain.documents import MAX_DOCUMENT_BYTES

    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_DOCUMENT_BYTES + 1)
    except FileNotFoundError:
        fail(f"{what} file {clip_message(str(path), 200)!r} does not exist")
    except IsADirectoryError:
        fail(f"{what} file {clip_message(str(path), 200)!r} is a directory")
    except OSError as err:
        fail(f"cannot read {what} file {clip_message(str(path), 200)!r}: {err.strerror or err}")
    if len(data) > MAX_DOCUMENT_BYTES:
        fail(
            f"{what} file {clip_message(str(path), 200)!r} is larger than the "
            f"{MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB limit for documents"
        )
    return data
