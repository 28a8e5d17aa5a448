"""The kube-apiserver's deprecated-API metrics, read from its Prometheus text exposition (pure).

A kube-apiserver's ``/metrics`` is a few MB of text (``# HELP``/``# TYPE`` comments and one
sample per line). Two families tell which deprecated APIs its clients really requested:

- ``apiserver_requested_deprecated_apis{group,version,resource,subresource,removed_release}``,
  a gauge set to 1 the first time since the process started that a deprecated group/version/
  resource is requested (``removed_release`` is "" for a deprecated CRD version);
- ``apiserver_request_total{verb,group,version,resource,subresource,scope,component,code,...}``,
  the request counter, summed here per group/version/resource (every verb, code and
  subresource) for the deprecated ones only.

The text is read as a stream of lines (``LineReader`` splits raw chunks as they arrive): nothing
keeps the whole body, only the counters of distinct group/version/resources (at most
``MAX_TRACKED``; the counter family comes before the gauge in the exposition, so which of them
are deprecated is known only at the end). Lines of other families are skipped by a prefix test
before any parsing, so the cost is one ``startswith`` per line for most of the body (a 2.5 MB
body of 18,700 lines: about 10 ms of CPU).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

DEPRECATED_FAMILY: Final = "apiserver_requested_deprecated_apis"
REQUEST_FAMILY: Final = "apiserver_request_total"
# A sample line of either family starts with its name and "{" (or " " without labels); other
# families that share the prefix (apiserver_request_duration_seconds_bucket, thousands of lines)
# fail this one test and are never parsed.
_PREFIXES: Final = tuple(f"{n}{c}" for n in (REQUEST_FAMILY, DEPRECATED_FAMILY) for c in "{ ")
MAX_LINE: Final = 64 * 1024
"""Longest line kept (bytes); a real sample line is under 1 KiB, a longer one is skipped."""
MAX_TRACKED: Final = 10_000
"""Most distinct group/version/resources whose request counts are kept (a cluster has ~500)."""

_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*([,}])')
_ESCAPE = re.compile(r"\\(.)")


@dataclass(frozen=True, slots=True, order=True)
class Resource:
    """An API resource as the metrics label it: ``group`` is "" for the core group."""

    group: str
    version: str
    resource: str

    @property
    def group_version(self) -> str:
        """``storage.k8s.io/v1beta1`` or ``v1``."""
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True, slots=True)
class DeprecatedUse:
    """One deprecated resource an apiserver was asked for since it started.

    ``requests`` sums ``apiserver_request_total`` over its series; None when the counter was not
    tracked (more than ``MAX_TRACKED`` resources, never on a real apiserver).
    """

    resource: Resource
    removed_release: str
    requests: int | None


@dataclass(frozen=True, slots=True)
class DeprecatedRequests:
    """What one apiserver's ``/metrics`` says: the deprecated resources requested, sorted.

    ``lines`` counts the lines read, ``malformed`` the lines of the two families that could not
    be parsed (they are skipped, not guessed).
    """

    uses: tuple[DeprecatedUse, ...]
    lines: int
    malformed: int


class LineReader:
    """Splits a byte stream into text lines, keeping at most ``max_line`` bytes pending.

    ``bytes`` counts what was read; ``overlong`` counts lines longer than ``max_line``, which are
    dropped whole (a hostile or broken endpoint cannot make the reader hold an unbounded line).
    """

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self.bytes = 0
        self.overlong = 0

    def lines(self, chunks: Iterable[bytes]) -> Iterator[str]:
        """Every complete line (the last one also without a newline), decoded as UTF-8."""
        pending = b""
        dropping = False  # inside an overlong line: skip up to its newline
        for chunk in chunks:
            self.bytes += len(chunk)
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                if end < 0:
                    break
                if dropping:
                    dropping = False
                elif len(pending) + end - start > self.max_line:
                    self.overlong += 1
                else:
                    yield (pending + chunk[start:end]).decode("utf-8", "replace")
                pending = b""
                start = end + 1
            if not dropping:
                pending += chunk[start:]
                if len(pending) > self.max_line:
                    self.overlong += 1
                    pending, dropping = b"", True
        if pending and not dropping:
            yield pending.decode("utf-8", "replace")


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return _ESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def parse_sample(line: str) -> tuple[str, dict[str, str], float] | None:
    r"""``name{label="value",...} value [timestamp]`` as (name, labels, value); None if malformed.

    Label values may hold ``\\``, ``\"`` and ``\n`` escapes (the text format's three), commas
    and braces; a trailing comma before ``}`` is allowed, as the format allows it.
    """
    brace = line.find("{")
    space = line.find(" ")
    labels: dict[str, str] = {}
    if brace >= 0 and (space < 0 or brace < space):
        name = line[:brace]
        pos = brace + 1
        while True:
            rest = line[pos:].lstrip()
            if rest.startswith("}"):
                pos = len(line) - len(rest) + 1
                break
            match = _LABEL.match(line, pos)
            if match is None:
                return None
            labels[match.group(1)] = _unescape(match.group(2))
            pos = match.end()
            if match.group(3) == "}":
                break
        tail = line[pos:]
    else:
        name, _, tail = line.partition(" ")
    fields = tail.split()
    if not name or not fields or len(fields) > 2:
        return None
    try:
        value = float(fields[0])
    except ValueError:
        return None
    return name, labels, value


def _count(value: float) -> int:
    """A counter as an integer (large ones are printed as ``1.204e+06``); NaN and Inf as 0."""
    if not math.isfinite(value) or value < 0:
        return 0
    return round(value)


def read_deprecated_requests(
    lines: Iterable[str], max_tracked: int = MAX_TRACKED
) -> DeprecatedRequests:
    """The deprecated resources one apiserver was asked for, with their request counts."""
    counted: dict[Resource, int] = {}
    deprecated: dict[Resource, str] = {}
    total = malformed = 0
    overflow = False
    for line in lines:
        total += 1
        if not line.startswith(_PREFIXES):
            continue
        sample = parse_sample(line)
        if sample is None:
            malformed += 1
            continue
        name, labels, value = sample
        if name not in (REQUEST_FAMILY, DEPRECATED_FAMILY):
            continue
        version, resource = labels.get("version", ""), labels.get("resource", "")
        if not version or not resource:  # non-resource requests (/healthz, /metrics)
            continue
        key = Resource(labels.get("group", ""), version, resource)
        if name == DEPRECATED_FAMILY:
            if value > 0:
                deprecated.setdefault(key, labels.get("removed_release", ""))
        elif key in counted:
            counted[key] += _count(value)
        elif len(counted) < max_tracked:
            counted[key] = _count(value)
        else:
            overflow = True
    uses = tuple(
        DeprecatedUse(key, release, counted.get(key, None if overflow else 0))
        for key, release in sorted(deprecated.items())
    )
    return DeprecatedRequests(uses, total, malformed)
