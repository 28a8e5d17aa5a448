"""merge_usage and the record on the Cluster: usage outlives the apiserver that counted it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.domain.apis import ApiRef
from orchestrator.domain.observed import ApiUsage, merge_usage
from orchestrator.domain.observed_record import (
    OBSERVED_ANNOTATION,
    ObservedRecordError,
    decode_record,
    encode_record,
    record_of,
)

T0 = datetime(2026, 12, 5, 10, 2, tzinfo=UTC)
T1 = T0 + timedelta(minutes=10)
API = ApiRef("storage.k8s.io", "v1alpha1", "VolumeAttributesClass")


def metric(*counters: tuple[str, int], at: datetime = T0) -> ApiUsage:
    total = sum(n for _, n in counters)
    return ApiUsage(API, "volumeattributesclasses", "metric", "1.35", at, at, at, total, 0,
                    counters[0][0] if counters else "", tuple(counters))  # fmt: skip


def stored(at: datetime = T0) -> ApiUsage:
    return ApiUsage(
        API, "volumeattributesclasses", "managedFields", "1.35", at, at, at, None, 2, "gold"
    )


@pytest.mark.parametrize(
    ("fresh", "requests", "active"),
    [
        pytest.param([metric(("a:6443", 12), at=T1)], 12, False, id="unchanged-is-quiet"),
        pytest.param([metric(("a:6443", 20), at=T1)], 20, True, id="grew"),
        pytest.param([metric(("a:6443", 3), at=T1)], 15, True, id="restarted-counter-counts-anew"),
        pytest.param([metric(("b:6443", 4), at=T1)], 16, True, id="new-instance"),
        pytest.param([], 12, False, id="apiserver-replaced-and-quiet-stays-reported"),
    ],
)  # fmt: skip
def test_merge_metric(fresh: list[ApiUsage], requests: int, active: bool) -> None:
    (first,) = merge_usage([], [metric(("a:6443", 12))], T0)
    assert first.active and first.requests == 12
    (merged,) = merge_usage([first], fresh, T1)
    assert merged.requests == requests
    assert merged.active is active
    assert merged.first_seen == T0 and merged.observed_at == T1


def test_a_stored_object_gone_is_dropped_and_one_still_there_keeps_its_first_sighting() -> None:
    (first,) = merge_usage([], [stored()], T0)
    assert merge_usage([first], [], T1) == ()
    (kept,) = merge_usage([first], [stored(T1)], T1)
    assert kept.first_seen == T0 and kept.active


def test_describe_names_count_source_and_quiet_time() -> None:
    (first,) = merge_usage([], [metric(("a:6443", 1204))], T0)
    assert first.describe() == (
        "observed: 1,204 requests to storage.k8s.io/v1alpha1 volumeattributesclasses since "
        "2026-12-05 10:02 UTC (apiserver metrics)"
    )
    (quiet,) = merge_usage([first], [metric(("a:6443", 1204), at=T1)], T1)
    assert quiet.describe().endswith("none since 10:02 UTC (apiserver metrics)")
    (one,) = merge_usage([], [metric(("a:6443", 1))], T0)
    assert one.describe().startswith("observed: 1 request to storage.k8s.io/v1alpha1 ")


def test_record_round_trip_keeps_counters() -> None:
    usage = merge_usage([], [metric(("a:6443", 12), ("b:6443", 3)), stored()], T0)
    text = encode_record(usage)
    assert decode_record(text, "here") == usage
    assert [u.counters for u in decode_record(text, "here")] == [u.counters for u in usage]
    assert record_of({OBSERVED_ANNOTATION: text}, "Cluster x") == usage
    assert record_of({}, "Cluster x") == ()


_GOOD = (
    '"api": "storage.k8s.io/v1alpha1/VolumeAttributesClass", "resource": "volumeattributesclasses",'
    ' "removedRelease": "1.35", "firstSeen": "2026-12-05T10:02:00Z",'
    ' "lastSeen": "2026-12-05T10:02:00Z", "observedAt": "2026-12-05T10:02:00Z"'
)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{", "not JSON"),
        ('{"v": 2, "usage": []}', "unknown record version"),
        ('{"v": 1, "usage": [], "x": 1}', 'expected {"v": 1'),
        ('{"v": 1, "usage": [{"api": "x"}]}', "usage[0].api"),
        ('{"v": 1, "usage": [{' + _GOOD + ', "source": "guess"}]}', "usage[0].source"),
        ('{"v": 1, "usage": [{' + _GOOD.replace("10:02:00Z", "later", 1) + ', "source": "metric"}]}',
         "usage[0].firstSeen"),
        ('{"v": 1, "usage": [{' + _GOOD + ', "source": "metric", "requests": -1}]}', "usage[0].requests"),
        ('{"v": 1, "usage": [{' + _GOOD + ', "source": "metric", "typo": 1}]}', "typo"),
        ('{"v": 1, "usage": [{' + _GOOD + ', "source": "metric", "counters": {"a:6443": -2}}]}',
         "usage[0].counters.a:6443"),
        ('{"v": 1, "usage": [{' + _GOOD + ', "source": "metric", "counters": [1]}]}',
         "usage[0].counters"),
    ],
)  # fmt: skip
def test_bad_record_is_one_error_naming_the_field(text: str, error: str) -> None:
    with pytest.raises(ObservedRecordError, match=None) as err:
        decode_record(text, "Cluster x")
    assert error in str(err.value)
