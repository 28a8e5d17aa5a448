"""The observation record kept on each CAPI Cluster (pure): usage that outlives a rollout.

The kube-apiserver's deprecated-API metric lives in the apiserver process, and KCP replaces that
process at every control-plane step. So before and after each control-plane step the worker
folds what it read into this record, an annotation on the CAPI Cluster object
(``OBSERVED_ANNOTATION``), and the live inventory folds the record into what it reads
(docs/decisions.md, "Observed usage outlives the apiserver that counted it").

The annotation holds JSON: ``{"v": 1, "usage": [...]}``, each entry the FleetSnapshot's
``apiUsage`` entry (``snapshot.usage_to_json``, read back by the same strict reader,
``observed_load.usages_from_list``) plus ``counters``: each apiserver instance's raw request
count, the baseline the next read is compared with. It is bounded (``MAX_USAGES`` entries,
``MAX_INSTANCES`` counters each, ``MAX_RECORD_BYTES`` in all, well under the 256 KiB Kubernetes
allows for all of an object's annotations). A record edited into something unreadable is an
``ObservedRecordError`` naming the field, never silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Final

from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError
from orchestrator.domain.observed import MAX_INSTANCES, MAX_USAGES, ApiUsage
from orchestrator.domain.observed_load import MAX_COUNT, usages_from_list
from orchestrator.domain.snapshot import usage_to_json
from orchestrator.domain.strict import integer

OBSERVED_ANNOTATION: Final = "calibrator.dev/observed-usage"
RECORD_VERSION: Final = 1
MAX_RECORD_BYTES: Final = 128 * 1024
MAX_INSTANCE_TEXT: Final = 261  # an IPv6 address or DNS name, a colon and a port


class ObservedRecordError(InputError):
    """The record on a Cluster cannot be read."""


def _dump(entries: list[dict[str, object]]) -> str:
    return json.dumps(
        {"v": RECORD_VERSION, "usage": entries}, sort_keys=True, separators=(",", ":")
    )


def encode_record(usage: Iterable[ApiUsage]) -> str:
    """The annotation's value; the most recently seen usages are kept when there are too many.

    Deterministic (sorted keys, compact), so an unchanged record is an unchanged string and the
    writer can skip the PATCH.
    """
    kept = sorted(usage, key=lambda u: u.last_seen, reverse=True)[:MAX_USAGES]
    entries: list[dict[str, object]] = []
    for u in kept:
        entry = usage_to_json(u)
        if u.counters:
            entry["counters"] = dict(u.counters[:MAX_INSTANCES])
        entries.append(entry)
    while len(_dump(entries).encode()) > MAX_RECORD_BYTES:
        entries.pop()  # the least recently seen go first
    entries.sort(key=lambda e: (str(e["api"]), str(e["source"])))
    return _dump(entries)


def decode_record(text: str | None, where: str) -> tuple[ApiUsage, ...]:
    """The usages an annotation holds (none for a missing one), with their counters.

    Each entry is read by the FleetSnapshot's own rules (``usages_from_list``), so a hand edit
    is caught the same way in both places; ``counters`` is checked here.
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
    if not isinstance(raw, list):
        raise ObservedRecordError(f"{where}.usage: expected a list")
    stripped: list[object] = []
    counters: dict[tuple[str, str], tuple[tuple[str, int], ...]] = {}
    for i, item in enumerate(raw):
        entry = item
        if isinstance(item, dict) and "counters" in item:
            entry = dict(item)
            found = _counters(entry.pop("counters"), f"{where}.usage[{i}].counters")
            counters[(str(entry.get("api")), str(entry.get("source")))] = found
        stripped.append(entry)
    usages = usages_from_list(stripped, f"{where}.usage", ObservedRecordError)
    return tuple(replace(u, counters=counters.get((str(u.api), u.source), ())) for u in usages)


def _counters(raw: object, where: str) -> tuple[tuple[str, int], ...]:
    if not isinstance(raw, Mapping) or len(raw) > MAX_INSTANCES:
        raise ObservedRecordError(f"{where}: expected a mapping of at most {MAX_INSTANCES}")
    items: list[tuple[str, int]] = []
    for key, value in raw.items():
        if not isinstance(key, str) or not key or len(key) > MAX_INSTANCE_TEXT:
            raise ObservedRecordError(f"{where}: invalid instance {quote(key)}")
        items.append((key, integer(value, f"{where}.{key}", 0, MAX_COUNT, ObservedRecordError)))
    return tuple(sorted(items))


def record_of(annotations: Mapping[str, Any] | None, where: str) -> tuple[ApiUsage, ...]:
    """The usages recorded in an object's annotations (``decode_record`` on the one we own)."""
    text = (annotations or {}).get(OBSERVED_ANNOTATION)
    if text is not None and not isinstance(text, str):
        raise ObservedRecordError(f"{where}: annotation {OBSERVED_ANNOTATION} is not a string")
    return decode_record(text, f"{where}: annotation {OBSERVED_ANNOTATION}")
