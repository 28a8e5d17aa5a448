"""The observation record kept on each CAPI Cluster (pure): usage that outlives a rollout.

The kube-apiserver's deprecated-API metric lives in the apiserver process, and KCP replaces that
process at every control-plane step. So before each control-plane step the worker folds what it
read into this record, an annotation on the CAPI Cluster object (``OBSERVED_ANNOTATION``), and
the live inventory folds the record into what it reads:

- the Cluster is where the taints already are: every reader LISTs Clusters anyway, so the record
  costs no extra request, and it goes away with the cluster;
- a Temporal history would keep it only for one run, and only for that run's readers;
- a blob would need a second read per cluster.

The annotation holds JSON: ``{"v": 1, "usage": [...]}``, each entry an ``ApiUsage`` with the
per-instance request counters the next read is compared with. It is bounded (``MAX_USAGES``
entries, ``MAX_INSTANCES`` counters each, ``MAX_RECORD_BYTES`` in all, well under the 256 KiB
Kubernetes allows for all of an object's annotations). A record someone edited into something
unreadable is reported, never silently dropped: the reader makes the cluster's observation
partial with the error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError
from orchestrator.domain.observed import (
    MAX_INSTANCES,
    MAX_USAGES,
    USAGE_SOURCES,
    ApiUsage,
    UsageSource,
)
from orchestrator.domain.snapshot import ApiRef

OBSERVED_ANNOTATION: Final = "calibrator.dev/observed-usage"
RECORD_VERSION: Final = 1
MAX_RECORD_BYTES: Final = 128 * 1024
MAX_TEXT: Final = 253
MAX_COUNT: Final = 2**53  # exact in JSON readers that use doubles
_FIELDS: Final = frozenset(
    {
        "api",
        "resource",
        "source",
        "removedRelease",
        "firstSeen",
        "lastSeen",
        "observedAt",
        "requests",
        "objects",
        "example",
        "counters",
    }
)
_RELEASE = re.compile(r"(?:[1-9][0-9]{0,2}\.(?:0|[1-9][0-9]{0,3}))?")
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


class ObservedRecordError(InputError):
    """The record on a Cluster cannot be read."""


def format_time(at: datetime) -> str:
    """RFC 3339 in UTC to the second, as Kubernetes writes times."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(raw: object, where: str) -> datetime:
    """A time written by ``format_time``."""
    if not isinstance(raw, str) or not _TIME.fullmatch(raw):
        raise ObservedRecordError(f"{where}: expected a UTC time such as 2026-12-05T10:02:00Z")
    try:
        return datetime.strptime(raw, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise ObservedRecordError(f"{where}: not a valid time: {quote(raw)}") from None


def encode_record(usage: Iterable[ApiUsage]) -> str:
    """The annotation's value; the newest usages are kept when there are too many.

    Deterministic (sorted keys, compact) so an unchanged record is an unchanged string and the
    writer can skip the PATCH.
    """
    kept = sorted(usage, key=lambda u: u.last_seen, reverse=True)[:MAX_USAGES]
    kept.sort(key=lambda u: (u.api, u.source))
    entries = [_entry(u) for u in kept]
    text = json.dumps(
        {"v": RECORD_VERSION, "usage": entries}, sort_keys=True, separators=(",", ":")
    )
    while len(text.encode()) > MAX_RECORD_BYTES and entries:
        entries.pop()
        text = json.dumps(
            {"v": RECORD_VERSION, "usage": entries}, sort_keys=True, separators=(",", ":")
        )
    return text


def _entry(u: ApiUsage) -> dict[str, object]:
    entry: dict[str, object] = {
        "api": str(u.api),
        "resource": u.resource,
        "source": u.source,
        "removedRelease": u.removed_release,
        "firstSeen": format_time(u.first_seen),
        "lastSeen": format_time(u.last_seen),
        "observedAt": format_time(u.observed_at),
        "objects": u.objects,
        "example": u.example,
    }
    if u.requests is not None:
        entry["requests"] = u.requests
    if u.counters:
        entry["counters"] = dict(u.counters[:MAX_INSTANCES])
    return entry


def decode_record(text: str | None, where: str) -> tuple[ApiUsage, ...]:
    """The usages an annotation holds (none for a missing annotation).

    Strict: an unknown field, a wrong type or a value out of bounds is one ObservedRecordError
    naming it, so a hand edit is caught rather than half read.
    """
    if text is None or text == "":
        return ()
    if len(text.encode()) > MAX_RECORD_BYTES:
        raise ObservedRecordError(f"{where}: larger than {MAX_RECORD_BYTES} bytes")
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ObservedRecordError(f"{where}: not JSON: {err}") from None
    if not isinstance(data, dict) or set(data) != {"v", "usage"}:
        raise ObservedRecordError(f'{where}: expected {{"v": 1, "usage": [...]}}')
    if data["v"] != RECORD_VERSION:
        raise ObservedRecordError(f"{where}.v: unknown record version {quote(data['v'])}")
    raw = data["usage"]
    if not isinstance(raw, list) or len(raw) > MAX_USAGES:
        raise ObservedRecordError(f"{where}.usage: expected a list of at most {MAX_USAGES}")
    out = tuple(_usage(item, f"{where}.usage[{i}]") for i, item in enumerate(raw))
    if len({u.key for u in out}) != len(out):
        raise ObservedRecordError(f"{where}.usage: one API and source listed twice")
    return out


def _usage(raw: object, where: str) -> ApiUsage:
    if not isinstance(raw, dict):
        raise ObservedRecordError(f"{where}: expected a mapping")
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise ObservedRecordError(f"{where}: unknown field {quote(unknown[0])}")
    for key in ("api", "resource", "source", "firstSeen", "lastSeen", "observedAt"):
        if key not in raw:
            raise ObservedRecordError(f"{where}: missing field {quote(key)}")
    try:
        api = ApiRef.parse(raw["api"])
    except InputError as err:
        raise ObservedRecordError(f"{where}.api: {err}") from None
    source = raw["source"]
    if source not in USAGE_SOURCES:
        raise ObservedRecordError(
            f"{where}.source: expected one of {', '.join(USAGE_SOURCES)}, got {quote(source)}"
        )
    release = raw.get("removedRelease", "")
    if not isinstance(release, str) or not _RELEASE.fullmatch(release):
        raise ObservedRecordError(
            f'{where}.removedRelease: expected "1.NN" or "", got {quote(release)}'
        )
    requests = raw.get("requests")
    if requests is not None:
        requests = _count(requests, f"{where}.requests")
    return ApiUsage(
        api=api,
        resource=_text(raw["resource"], f"{where}.resource", empty=False),
        source=_source(source),
        removed_release=release,
        first_seen=parse_time(raw["firstSeen"], f"{where}.firstSeen"),
        last_seen=parse_time(raw["lastSeen"], f"{where}.lastSeen"),
        observed_at=parse_time(raw["observedAt"], f"{where}.observedAt"),
        requests=requests,
        objects=_count(raw.get("objects", 0), f"{where}.objects"),
        example=_text(raw.get("example", ""), f"{where}.example"),
        counters=_counters(raw.get("counters", {}), f"{where}.counters"),
    )


def _source(raw: str) -> UsageSource:
    for source in USAGE_SOURCES:
        if raw == source:
            return source
    raise AssertionError(raw)  # checked by the caller


def _text(raw: object, where: str, *, empty: bool = True) -> str:
    if not isinstance(raw, str) or len(raw) > MAX_TEXT or (not empty and not raw):
        raise ObservedRecordError(f"{where}: expected a string of at most {MAX_TEXT} characters")
    return raw


def _count(raw: object, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= MAX_COUNT:
        raise ObservedRecordError(f"{where}: expected a whole number from 0 to 2^53")
    return raw


def _counters(raw: object, where: str) -> tuple[tuple[str, int], ...]:
    if not isinstance(raw, Mapping) or len(raw) > MAX_INSTANCES:
        raise ObservedRecordError(f"{where}: expected a mapping of at most {MAX_INSTANCES}")
    items: list[tuple[str, int]] = []
    for key, value in raw.items():
        items.append((_text(key, f"{where} key", empty=False), _count(value, f"{where}.{key}")))
    return tuple(sorted(items))


def record_of(annotations: Mapping[str, Any] | None, where: str) -> tuple[ApiUsage, ...]:
    """The usages recorded in an object's annotations (``decode_record`` on the one we own)."""
    text = (annotations or {}).get(OBSERVED_ANNOTATION)
    if text is not None and not isinstance(text, str):
        raise ObservedRecordError(f"{where}: annotation {OBSERVED_ANNOTATION} is not a string")
    return decode_record(text, f"{where}: annotation {OBSERVED_ANNOTATION}")
