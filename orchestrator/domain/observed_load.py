"""Reading observed usage and disruption blockers (pure): strict, bounded, one error per field.

The FleetSnapshot's ``workloadCluster`` carries what a live read saw (``observed``):
``apiUsage``, ``disruptionBlockers`` and ``observationPartial``. A hand-edited or stale file is
as much input as any other part of the snapshot, and a usage read wrongly would block or release
a cluster's upgrade, so the rules are the snapshot's own: unknown fields are errors, every value
is typed and bounded, and the one error names the exact field
(``clusters[2].workloadCluster.apiUsage[0].removedRelease: ...``). The error class is the
caller's (``SnapshotError`` for a snapshot), as in ``strict``, so any other document that keeps
the same entries can read them with the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from typing import Any, Final, cast

from orchestrator.domain.apis import ApiRef
from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError
from orchestrator.domain.names import dns1123_label_error, dns1123_subdomain_error
from orchestrator.domain.observed import (
    MAX_BLOCKERS,
    MAX_USAGES,
    USAGE_SOURCES,
    ApiUsage,
    DisruptionBlocker,
    UsageSource,
)
from orchestrator.domain.strict import check_fields, integer

MAX_COUNT: Final = 2**63 - 1
"""Largest ``requests`` or ``objects`` count (an int64, as the apiserver's counters are)."""
MAX_TEXT: Final = 1000
"""Longest ``reason``, ``example`` or ``observationPartial`` text."""
MAX_EXPECTED_PODS: Final = 1_000_000
USAGE_FIELDS: Final = frozenset(
    {
        "api",
        "resource",
        "source",
        "removedRelease",
        "requests",
        "objects",
        "firstSeen",
        "lastSeen",
        "observedAt",
        "example",
    }
)
BLOCKER_FIELDS: Final = frozenset({"namespace", "name", "reason", "expectedPods"})
# The kube-apiserver's removed_release label: a Kubernetes 1.x minor, "1.35".
_RELEASE = re.compile(r"1\.(0|[1-9][0-9]{0,2})")
# An RFC 3339 time in UTC, as Kubernetes writes metav1.Time (fractions of a second allowed).
_UTC_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z")


def usages_from_list(raw: object, where: str, error: type[InputError]) -> tuple[ApiUsage, ...]:
    """The ``apiUsage`` list: at most ``MAX_USAGES`` entries, one per API and source.

    Sorted by API and source, the order ``merge_usage`` keeps, so a file and a live read of the
    same usage compare equal.
    """
    items = _list(raw, where, error)
    if len(items) > MAX_USAGES:
        raise error(f"{where}: more than {MAX_USAGES} entries")
    usages: dict[tuple[ApiRef, UsageSource], ApiUsage] = {}
    for i, item in enumerate(items):
        usage = _usage(item, f"{where}[{i}]", error)
        if usage.key in usages:
            raise error(f"{where}[{i}]: {usage.api} from {usage.source} is listed twice")
        usages[usage.key] = usage
    return tuple(usages[k] for k in sorted(usages))


def blockers_from_list(
    raw: object, where: str, error: type[InputError]
) -> tuple[DisruptionBlocker, ...]:
    """The ``disruptionBlockers`` list: at most ``MAX_BLOCKERS``, one per PodDisruptionBudget."""
    items = _list(raw, where, error)
    if len(items) > MAX_BLOCKERS:
        raise error(f"{where}: more than {MAX_BLOCKERS} entries")
    out: list[DisruptionBlocker] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(items):
        here = f"{where}[{i}]"
        data = _mapping(item, here, error)
        check_fields(data, BLOCKER_FIELDS, here, error)
        namespace = _checked(
            dns1123_label_error,
            _required(data, "namespace", here, error),
            f"{here}.namespace",
            error,
        )
        name = _checked(
            dns1123_subdomain_error, _required(data, "name", here, error), f"{here}.name", error
        )
        if (namespace, name) in seen:
            raise error(f"{here}: PodDisruptionBudget {namespace}/{name} is listed twice")
        seen.add((namespace, name))
        out.append(
            DisruptionBlocker(
                namespace,
                name,
                text(_required(data, "reason", here, error), f"{here}.reason", error),
                integer(
                    data.get("expectedPods", 0),
                    f"{here}.expectedPods",
                    0,
                    MAX_EXPECTED_PODS,
                    error,
                ),
            )
        )
    return tuple(out)


def text(raw: object, where: str, error: type[InputError]) -> str:
    """A non-empty single-line string of at most ``MAX_TEXT`` characters (shown in tables)."""
    if (
        not isinstance(raw, str)
        or not raw.strip()
        or len(raw) > MAX_TEXT
        or any(ch < " " for ch in raw)
    ):
        raise error(
            f"{where}: must be a non-empty single line of at most {MAX_TEXT} characters, "
            f"got {quote(raw)}"
        )
    return raw


def _usage(raw: object, where: str, error: type[InputError]) -> ApiUsage:
    data = _mapping(raw, where, error)
    check_fields(data, USAGE_FIELDS, where, error)
    try:
        api = ApiRef.parse(_required(data, "api", where, error))
    except InputError as err:
        raise error(f"{where}.api: {err}") from None
    resource = _checked(
        dns1123_label_error, _required(data, "resource", where, error), f"{where}.resource", error
    )
    source = _required(data, "source", where, error)
    if source not in USAGE_SOURCES:
        raise error(
            f"{where}.source: must be one of {', '.join(USAGE_SOURCES)}, got {quote(source)}"
        )
    release = _required(data, "removedRelease", where, error)
    if not isinstance(release, str) or not _RELEASE.fullmatch(release):
        hint = (
            " (quote it: YAML reads 1.30 as the number 1.3)" if isinstance(release, float) else ""
        )
        raise error(
            f'{where}.removedRelease: expected a release such as "1.35", got {quote(release)}{hint}'
        )
    requests: int | None = None
    objects = 0
    if source == "metric":
        if "objects" in data:
            raise error(f"{where}.objects: only for the managedFields and annotation sources")
        if data.get("requests") is not None:
            requests = integer(data["requests"], f"{where}.requests", 0, MAX_COUNT, error)
    else:
        if "requests" in data:
            raise error(f"{where}.requests: only for the metric source")
        objects = integer(data.get("objects", 0), f"{where}.objects", 0, MAX_COUNT, error)
    first = _time(_required(data, "firstSeen", where, error), f"{where}.firstSeen", error)
    last = _time(_required(data, "lastSeen", where, error), f"{where}.lastSeen", error)
    observed = _time(_required(data, "observedAt", where, error), f"{where}.observedAt", error)
    if not first <= last <= observed:
        raise error(f"{where}: expected firstSeen <= lastSeen <= observedAt")
    example = data.get("example", "")
    if example != "":
        example = text(example, f"{where}.example", error)
    return ApiUsage(
        api=api,
        resource=resource,
        source=cast(UsageSource, source),
        removed_release=release,
        first_seen=first,
        last_seen=last,
        observed_at=observed,
        requests=requests,
        objects=objects,
        example=example,
    )


def _time(raw: object, where: str, error: type[InputError]) -> datetime:
    """An RFC 3339 UTC time: ``2026-12-05T10:02:00Z`` (YAML may have read it as a datetime).

    UTC only (a ``Z``): every writer of this format writes UTC, and an offset would make two
    spellings of one moment, so a hand edit is caught rather than silently shifted.
    """
    if isinstance(raw, datetime):
        # YAML resolved an unquoted timestamp; it keeps the offset it was written with.
        if raw.tzinfo is None or raw.utcoffset() != UTC.utcoffset(None):
            raise error(f"{where}: must be an RFC 3339 time in UTC (ending in Z), got {raw}")
        return raw.astimezone(UTC)
    if isinstance(raw, date) or not isinstance(raw, str) or not _UTC_TIME.fullmatch(raw):
        raise error(
            f"{where}: must be an RFC 3339 time in UTC such as 2026-12-05T10:02:00Z, "
            f"got {quote(raw if isinstance(raw, str | int | float) else str(raw))}"
        )
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        raise error(f"{where}: not a valid date and time: {quote(raw)}") from None


def _checked(
    rule: Callable[[object], str | None], raw: object, where: str, error: type[InputError]
) -> str:
    """``raw`` if the name ``rule`` (from ``names``) finds nothing wrong with it."""
    problem = rule(raw)
    if problem:
        raise error(f"{where}: {problem}")
    return cast(str, raw)


def _mapping(raw: object, where: str, error: type[InputError]) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise error(f"{where}: expected a mapping, got {quote(raw)}")
    return cast(Mapping[str, Any], raw)


def _list(raw: object, where: str, error: type[InputError]) -> list[Any]:
    if not isinstance(raw, list):
        raise error(f"{where}: expected a list, got {quote(raw)}")
    return raw


def _required(data: Mapping[str, Any], key: str, where: str, error: type[InputError]) -> Any:
    if data.get(key) is None:
        raise error(f"{where}: missing required field '{key}'")
    return data[key]
