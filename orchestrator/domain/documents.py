"""Loading user-supplied YAML and JSON documents, strictly and in bounded time and memory (pure).

Every document a user hands the calibrator (snapshots, strategies, anything else read by the
offline CLI or sent to a workflow as text) goes through ``load_document``. It takes text or bytes
(no I/O: the caller reads the file, at most ``MAX_DOCUMENT_BYTES + 1`` bytes of it) and returns
plain ``dict`` / ``list`` / scalar data, or raises one ``DocumentError`` whose message stands alone.

Why a loader of our own instead of ``yaml.safe_load``:

* **Speed.** PyYAML's pure-Python scanner is the slowest part of reading a large fleet. We read
  libyaml's event stream (``CParser``) when PyYAML was built with it and fall back to the
  pure-Python parser otherwise; JSON documents (the first character is ``{`` or ``[``) take the
  ``json.loads`` fast path and only fall back to YAML when they are not JSON.
* **Bounded work.** Building objects from events ourselves, with an explicit stack, lets every
  limit fail at the first event that crosses it: nesting deeper than ``MAX_DEPTH`` (libyaml's
  own composer recurses in C and crashes the process at a few hundred thousand levels, and both
  parsers slow down quadratically with depth), and aliases that would expand to more than
  ``MAX_ALIAS_NODES`` nodes (a 2 KB "billion laughs" file). Aliases still share one object, as
  in PyYAML; the limit bounds the work of anyone who walks the result.
* **Strictness.** A duplicate key is an error in YAML and JSON alike (``yaml.safe_load`` and
  ``json.loads`` keep the last one silently). Integers longer than ``MAX_INT_DIGITS`` digits,
  non-finite numbers in JSON, recursive aliases, tags other than YAML's standard scalar, sequence
  and mapping tags, and more than one document are errors.
* **Short messages.** Errors quote at most ``QUOTE_LIMIT`` characters of any value (``quote``),
  so a bombed value cannot turn one error line into megabytes.

Scalars resolve as ``yaml.safe_load`` resolves them (YAML 1.1: ``yes`` is a boolean, ``2026-01-01``
a date), so documents that loaded before load to the same data now.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final

import yaml
from yaml import events as ev
from yaml.constructor import SafeConstructor
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from orchestrator.domain.errors import InputError

MAX_DOCUMENT_BYTES: Final = 64 * 1024 * 1024
"""Largest document accepted (64 MiB): a 10,000-cluster / 100,000-workload fleet is ~50 MB JSON."""
MAX_DEPTH: Final = 64
"""Deepest nesting of YAML mappings and sequences; real documents need fewer than 10 levels.

JSON documents are refused at the JSON parser's own guard instead (the interpreter's recursion
limit, about 1,000 levels): measuring their depth first would cost more than parsing them, and
nothing downstream recurses into unknown structure, so the lower bound buys nothing there.
"""
MAX_ALIAS_NODES: Final = 1_000_000
"""Nodes that YAML aliases may add in total, each use counting the full size of what it names."""
MAX_INT_DIGITS: Final = 100
"""Longest integer literal accepted (Python refuses to convert more than 4,300 digits anyway)."""
QUOTE_LIMIT: Final = 60
"""Characters of an offending value quoted in an error message."""

_JSON_START = re.compile(r"\s*[\[{]")
_INT = "tag:yaml.org,2002:int"
_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_SCALAR_TAGS = frozenset(
    {
        _STR,
        _INT,
        "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:null",
        "tag:yaml.org,2002:timestamp",
        _MERGE,
    }
)


class DocumentError(InputError):
    """A document that cannot be read as YAML or JSON, or that crosses one of the limits."""


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """A short, safe rendering of ``value`` for an error message.

    Strings and numbers are quoted up to ``limit`` characters; containers are named by type and
    size only, because ``repr`` of an aliased structure expands every alias and ``repr`` of a deep
    one recurses without bound.
    """
    if isinstance(value, str):
        text = repr(value[: limit + 1])
        return (
            text
            if len(value) <= limit
            else f"{repr(value[:limit])[:-1]}…{text[-1]} ({len(value)} characters)"
        )
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        if value.bit_length() > 3 * limit:
            return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
        return repr(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict):
        return f"a mapping of {len(value)} entries"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} items"
    return f"a {type(value).__name__}"


def load_document(
    data: str | bytes, what: str = "document", *, max_bytes: int = MAX_DOCUMENT_BYTES
) -> Any:
    """Parse one YAML or JSON document; None for an empty one. ``what`` names it in errors."""
    if isinstance(data, bytes | bytearray):
        if len(data) > max_bytes:
            raise DocumentError(_too_large(what, max_bytes))
        try:
            text = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise DocumentError(
                f"{what} is not UTF-8 text (invalid byte at offset {err.start})"
            ) from None
    else:
        text = data.removeprefix("\ufeff")
        # A character takes 1-4 bytes: only a long text needs the exact (copying) count.
        if len(text) > max_bytes // 4 and len(text.encode("utf-8", "surrogatepass")) > max_bytes:
            raise DocumentError(_too_large(what, max_bytes))
    if "\x00" in text:
        raise DocumentError(f"{what} contains NUL characters: not a text document")
    if _JSON_START.match(text):
        found, value = _load_json(text, what)
        if found:
            return value
    return _load_yaml(text, what)


def _too_large(what: str, max_bytes: int) -> str:
    return f"{what} is larger than the {max_bytes // (1024 * 1024)} MiB limit for documents"


# ------------------------------------------------------------------------------------------
# JSON
# ------------------------------------------------------------------------------------------


def _json_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DocumentError(f"duplicate key {quote(key)}")
            seen.add(key)
    return out


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise DocumentError(
            f"integer of {len(text.lstrip('-'))} digits: at most {MAX_INT_DIGITS} are accepted"
        )
    return int(text)


def _json_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise DocumentError(f"number {quote(text)} is out of range")
    return value


def _json_constant(name: str) -> float:
    raise DocumentError(f"{name} is not a number a document may contain")


# Every byte that is not a digit becomes a space: a run of more than MAX_INT_DIGITS digits then
# shows as a run of zeros (one C pass over the text, then a substring search).
_DIGITS_AS_ZEROS: Final = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_DIGIT_RUN: Final = b"0" * (MAX_INT_DIGITS + 1)


def _has_long_digit_run(text: str) -> bool:
    """Whether some run of digits (in a number or a string) is longer than MAX_INT_DIGITS."""
    return _LONG_DIGIT_RUN in text.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_ZEROS)


def _load_json(text: str, what: str) -> tuple[bool, Any]:
    """(True, value) for a JSON document; (False, None) when it is not JSON (try YAML).

    Integers are checked by ``_json_int`` only when the text has a digit run long enough to
    break the limit: a Python call per integer was half of the parse of a 1k x 10k snapshot.
    """
    try:
        value = json.loads(
            text,
            object_pairs_hook=_json_pairs,
            parse_int=_json_int if _has_long_digit_run(text) else None,
            parse_float=_json_float,
            parse_constant=_json_constant,
        )
    except json.JSONDecodeError:
        return False, None
    except DocumentError as err:
        raise DocumentError(f"{what}: {err}") from None
    except RecursionError:
        # json's C scanner stops at the interpreter's recursion limit, quickly and cleanly.
        raise DocumentError(
            f"{what} nests too deep (JSON deeper than about 1,000 levels)"
        ) from None
    return True, value


# ------------------------------------------------------------------------------------------
# YAML
# ------------------------------------------------------------------------------------------

_RESOLVER = Resolver()
_CONSTRUCTOR = SafeConstructor()
_PLAIN_CONSTANTS: dict[tuple[str, str], Any] = {}
for _value in ("~", "null", "Null", "NULL", ""):
    _PLAIN_CONSTANTS[("tag:yaml.org,2002:null", _value)] = None
for _value in ("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"):
    _PLAIN_CONSTANTS[("tag:yaml.org,2002:bool", _value)] = True
for _value in ("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"):
    _PLAIN_CONSTANTS[("tag:yaml.org,2002:bool", _value)] = False

_Parser: Callable[[str], Any]
try:
    from yaml.cyaml import CParser as _CParser  # type: ignore[attr-defined]

    _Parser = _CParser
    LIBYAML = True
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml.parser import Parser as _PyParser
    from yaml.reader import Reader as _Reader
    from yaml.scanner import Scanner as _Scanner

    class _PurePythonParser(_Reader, _Scanner, _PyParser):
        """PyYAML's pure-Python reader, scanner and parser, for the event stream only."""

        def __init__(self, stream: str) -> None:
            _Reader.__init__(self, stream)
            _Scanner.__init__(self)
            _PyParser.__init__(self)

    _Parser = _PurePythonParser
    LIBYAML = False


def _where(event: ev.Event) -> str:
    mark = event.start_mark
    return "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"


def _scalar(event: ev.ScalarEvent, what: str) -> Any:
    tag = event.tag
    value: str = event.value
    if tag is None or tag == "!":
        if event.implicit[0]:
            tag = _RESOLVER.resolve(ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
        else:
            return value  # quoted, or a non-specific tag: a string
    if tag == _STR:
        return value
    found = _PLAIN_CONSTANTS.get((tag, value), _scalar)
    if found is not _scalar:
        return found
    if tag not in _SCALAR_TAGS:
        raise DocumentError(f"{what}: unsupported tag {quote(tag)}{_where(event)}")
    if tag == _INT:
        digits = len(value.lstrip("+-").replace("_", ""))
        if digits > MAX_INT_DIGITS:
            raise DocumentError(
                f"{what}: integer of {digits} digits{_where(event)}: "
                f"at most {MAX_INT_DIGITS} are accepted"
            )
    if tag == _MERGE:
        return _MERGE_KEY
    try:
        return _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, ScalarNode(tag, value))
    except (ValueError, OverflowError, yaml.YAMLError):
        raise DocumentError(
            f"{what}: invalid {tag.rsplit(':', 1)[-1]} {quote(value)}{_where(event)}"
        ) from None


class _MergeKey:
    """The ``<<`` key of a YAML merge; never appears in the result."""


_MERGE_KEY = _MergeKey()


class _Frame:
    """A mapping or sequence being built: its object, pending key, merges and node count."""

    __slots__ = ("anchor", "event", "key", "merges", "nodes", "value")

    def __init__(self, value: dict[Any, Any] | list[Any], event: ev.CollectionStartEvent) -> None:
        self.value = value
        self.event = event
        self.anchor: str | None = event.anchor
        self.key: Any = _NO_KEY
        self.merges: list[dict[Any, Any]] = []
        self.nodes = 1


_NO_KEY = object()


def _load_yaml(text: str, what: str) -> Any:
    try:
        parser = _Parser(text)
    except UnicodeEncodeError as err:  # text (not bytes) holding lone surrogates
        raise DocumentError(f"{what} is not valid text (position {err.start})") from None
    try:
        return _build(parser, what)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = err.problem or "unparseable"
        if problem == "exceeded maximum nesting depth":
            # libyaml from 0.2.5 on (bundled with PyYAML 6.0.4) stops deep flow collections
            # while scanning, before our builder sees the events: same limit, same message.
            raise DocumentError(f"{what} nests deeper than {MAX_DEPTH} levels{where}") from None
        raise DocumentError(f"{what} is not valid YAML{where}: {problem}") from None
    except yaml.YAMLError as err:  # e.g. a ReaderError: control characters
        first = (str(err).splitlines() or ["unparseable"])[0]
        raise DocumentError(f"{what} is not valid YAML: {first[:200]}") from None
    finally:
        dispose = getattr(parser, "dispose", None)
        if dispose is not None:
            dispose()


def _build(parser: Any, what: str) -> Any:
    """Objects from the event stream of exactly one document, with every limit checked."""
    anchors: dict[str, tuple[Any, int]] = {}
    open_anchors: set[str] = set()
    stack: list[_Frame] = []
    alias_nodes = 0
    documents = 0
    result: Any = None
    # Plain scalars resolve by their text alone, and their values are immutable: each distinct
    # text is resolved once (a fleet repeats its labels, regions and numbers many times).
    plain: dict[str, Any] = {}
    get_event = parser.get_event
    while True:
        event = get_event()
        value: Any
        size = 1
        kind = type(event)
        if kind is ev.ScalarEvent:
            if event.tag is None and event.implicit[0]:
                value = plain.get(event.value, _NO_KEY)
                if value is _NO_KEY:
                    value = plain[event.value] = _scalar(event, what)
            else:
                value = _scalar(event, what)
            anchor = event.anchor
            if anchor is not None:
                anchors[anchor] = (value, 1)
        elif kind is ev.MappingStartEvent or kind is ev.SequenceStartEvent:
            tag = event.tag
            is_map = kind is ev.MappingStartEvent
            if tag not in (None, "!", _MAP if is_map else _SEQ):
                raise DocumentError(f"{what}: unsupported tag {quote(tag)}{_where(event)}")
            if len(stack) >= MAX_DEPTH:
                raise DocumentError(f"{what} nests deeper than {MAX_DEPTH} levels{_where(event)}")
            frame = _Frame({} if is_map else [], event)
            if frame.anchor is not None:
                open_anchors.add(frame.anchor)
            stack.append(frame)
            continue
        elif kind is ev.MappingEndEvent or kind is ev.SequenceEndEvent:
            frame = stack.pop()
            value = frame.value
            if frame.merges:
                _apply_merges(value, frame.merges)
            size = frame.nodes
            if frame.anchor is not None:
                open_anchors.discard(frame.anchor)
                anchors[frame.anchor] = (value, size)
        elif kind is ev.AliasEvent:
            name = event.anchor
            if name in open_anchors:
                raise DocumentError(f"{what}: recursive alias *{quote(name)}{_where(event)}")
            if name not in anchors:
                raise DocumentError(f"{what}: unknown alias *{quote(name)}{_where(event)}")
            value, size = anchors[name]
            alias_nodes += size
            if alias_nodes > MAX_ALIAS_NODES:
                raise DocumentError(
                    f"{what}: aliases expand to more than {MAX_ALIAS_NODES:,} nodes"
                    f"{_where(event)} (a YAML alias bomb?)"
                )
        elif kind is ev.DocumentStartEvent:
            documents += 1
            if documents > 1:
                raise DocumentError(
                    f"{what}: expected one YAML document, found more{_where(event)}"
                )
            continue
        elif kind is ev.StreamEndEvent:
            return result
        else:  # StreamStart, DocumentEnd
            continue
        if value is _MERGE_KEY and not (
            stack and type(stack[-1].value) is dict and stack[-1].key is _NO_KEY
        ):
            value = "<<"  # only a mapping key merges
        if not stack:
            result = value
            continue
        parent = stack[-1]
        parent.nodes += size
        container = parent.value
        if type(container) is list:
            container.append(value)
        elif parent.key is _NO_KEY:
            if isinstance(value, dict | list):
                raise DocumentError(f"{what}: a mapping key must be a scalar{_where(event)}")
            parent.key = value
        else:
            key = parent.key
            parent.key = _NO_KEY
            if key is _MERGE_KEY:
                parent.merges.extend(_merge_sources(value, what, event))
            elif key in container:
                raise DocumentError(f"{what}: duplicate key {quote(key)}{_where(event)}")
            else:
                container[key] = value


def _merge_sources(value: Any, what: str, event: ev.Event) -> list[dict[Any, Any]]:
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return list(value)
    raise DocumentError(
        f"{what}: a merge key (<<) needs a mapping or a list of mappings{_where(event)}"
    )


def _apply_merges(target: dict[Any, Any], merges: list[dict[Any, Any]]) -> None:
    """YAML merge keys: explicit keys win, then the earlier merged mapping."""
    explicit = set(target)
    for source in merges:
        for key, value in source.items():
            if key not in explicit:
                explicit.add(key)
                target[key] = value
