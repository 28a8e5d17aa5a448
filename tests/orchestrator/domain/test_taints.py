from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.domain.errors import InputError
from orchestrator.domain.taints import (
    Taint,
    Toleration,
    decode_taints,
    encode_taints,
    eviction_time,
    numeric_value_error,
    parse_time,
    schedulable_label,
    taint_from_mapping,
    tolerance,
    untolerated,
    with_taint,
    without_taint,
)

UPGRADING = Taint("calibrator.dev/upgrading", "NoSchedule", "v1.34.1", "2026-12-02T10:00:00Z")


@pytest.mark.parametrize(
    ("toleration", "taint", "ok"),
    [
        (Toleration(operator="Exists"), UPGRADING, True),
        (Toleration("calibrator.dev/upgrading", "Exists"), UPGRADING, True),
        (Toleration("calibrator.dev/upgrading", "Equal", "v1.34.1"), UPGRADING, True),
        (Toleration("calibrator.dev/upgrading", "Equal", "v1.33.0"), UPGRADING, False),
        (Toleration("calibrator.dev/upgrading", "Exists", effect="NoExecute"), UPGRADING, False),
        (Toleration("calibrator.dev/upgrading", "Exists", effect="NoSchedule"), UPGRADING, True),
        (Toleration("other", "Exists"), UPGRADING, False),
    ],
)
def test_kubernetes_toleration_semantics(toleration: Toleration, taint: Taint, ok: bool) -> None:
    assert toleration.tolerates(taint) is ok


def test_annotation_round_trip_is_stable() -> None:
    taints = (Taint("b", "NoExecute"), UPGRADING, Taint("a", "PreferNoSchedule", "x"))
    text = encode_taints(taints)
    assert text.startswith('[{"key":"a"')
    assert set(decode_taints(text)) == set(taints)
    assert encode_taints(decode_taints(text)) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ('{"key":"a"}', "must be a JSON list"),
        ('[{"effect":"NoSchedule"}]', "non-empty string 'key'"),
    ],
)
def test_bad_annotation(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        decode_taints(text, "cluster prod-eu-1")


def test_idempotent_add_and_remove() -> None:
    once = with_taint((), UPGRADING)
    again = with_taint(once, Taint(UPGRADING.key, "NoSchedule", "v1.34.1", "2026-12-02T11:00:00Z"))
    assert again == once  # a retried activity keeps the first timeAdded
    assert without_taint(again, UPGRADING.key) == ()
    assert schedulable_label(once) == "false"
    assert schedulable_label([Taint("a", "PreferNoSchedule")]) == "true"


def test_untolerated_keeps_order() -> None:
    taints = [Taint("a", "NoSchedule"), Taint("b", "NoExecute")]
    assert untolerated(taints, [Toleration("a", "Exists")]) == [Taint("b", "NoExecute")]


SLA = Taint("example.com/sla", "NoSchedule", "950")


@pytest.mark.parametrize(
    ("operator", "value", "taint_value", "ok"),
    [
        ("Gt", "900", "950", True),  # the taint's value is greater than the toleration's
        ("Gt", "950", "950", False),
        ("Gt", "999", "950", False),
        ("Lt", "999", "950", True),  # the taint's value is less than the toleration's
        ("Lt", "950", "950", False),
        ("Lt", "0", "-5", True),
        ("Gt", "-10", "-5", True),
        # A taint value must be canonical too (apimachinery's IsDecimalInteger, as Kubernetes
        # checks it before comparing): a leading zero or a plus sign is not an integer there.
        ("Gt", "1", "0950", False),
        ("Gt", "1", "+7", False),
        ("Gt", "100", "0200", False),
        ("Gt", "100", "+200", False),
        ("Lt", "300", "0200", False),
        ("Lt", "1", "-0", False),
        ("Gt", "100", "200", True),
        ("Gt", "-1", "0", True),
        ("Lt", "1", "0", True),
        ("Gt", "1", "95.5", False),  # not an integer: never matched, never an error
        ("Lt", "5", "", False),
        ("Gt", "1", "9223372036854775808", False),  # beyond int64
        ("Gt", "x", "950", False),  # an invalid toleration (the parser refuses it) matches nothing
    ],
)
def test_numeric_operators(operator: str, value: str, taint_value: str, ok: bool) -> None:
    toleration = Toleration("example.com/sla", operator, value)  # type: ignore[arg-type]
    taint = Taint("example.com/sla", "NoSchedule", taint_value)
    assert toleration.tolerates(taint) is ok
    assert Toleration("other", operator, value).tolerates(taint) is False  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("0", None),
        ("950", None),
        ("-5", None),
        ("9223372036854775807", None),
        ("0950", "without sign or leading zeros"),
        ("+5", "without sign or leading zeros"),
        ("-0", "without sign or leading zeros"),
        ("", "without sign or leading zeros"),
        ("95.5", "without sign or leading zeros"),
        ("9223372036854775808", "64-bit"),
    ],
)
def test_numeric_toleration_values_follow_kubernetes_validation(
    value: str, problem: str | None
) -> None:
    found = numeric_value_error(value)
    assert (found is None) if problem is None else (problem in (found or ""))


ADDED = "2026-12-02T10:00:00Z"
T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
DRAIN = Taint("example.com/drain", "NoExecute", "", ADDED)


@pytest.mark.parametrize(
    ("tolerations", "taint", "now", "tolerated", "until"),
    [
        pytest.param(
            [Toleration("example.com/drain", "Exists")],
            DRAIN,
            None,
            True,
            None,
            id="no seconds: for good",
        ),
        pytest.param(
            [Toleration("example.com/drain", "Exists", toleration_seconds=300)],
            DRAIN,
            None,
            True,
            T0 + timedelta(seconds=300),
            id="offline: says until when",
        ),
        pytest.param(
            [Toleration("example.com/drain", "Exists", toleration_seconds=300)],
            DRAIN,
            T0 + timedelta(seconds=299),
            True,
            T0 + timedelta(seconds=300),
            id="within the grace period",
        ),
        pytest.param(
            [Toleration("example.com/drain", "Exists", toleration_seconds=300)],
            DRAIN,
            T0 + timedelta(seconds=300),
            False,
            T0 + timedelta(seconds=300),
            id="grace period over",
        ),
        pytest.param(
            [Toleration("example.com/drain", "Exists", toleration_seconds=0)],
            DRAIN,
            T0,
            False,
            T0,
            id="0 seconds: evict at once",
        ),
        pytest.param(
            [
                Toleration("example.com/drain", "Exists", toleration_seconds=60),
                Toleration(operator="Exists"),
            ],
            DRAIN,
            T0 + timedelta(seconds=61),
            False,
            T0 + timedelta(seconds=60),
            id="the first matching toleration is used",
        ),
        pytest.param(
            [
                Toleration(operator="Exists"),
                Toleration("example.com/drain", "Exists", toleration_seconds=60),
            ],
            DRAIN,
            T0 + timedelta(days=9),
            True,
            None,
            id="a first one without seconds wins",
        ),
        pytest.param(
            [Toleration("example.com/drain", "Exists", toleration_seconds=60)],
            Taint("example.com/drain", "NoExecute"),
            T0,
            True,
            None,
            id="no timeAdded: nothing to count from",
        ),
        pytest.param(
            [Toleration("k", "Exists", toleration_seconds=60)],
            Taint("k", "NoSchedule", "", ADDED),
            T0 + timedelta(days=1),
            True,
            None,
            id="seconds only bound NoExecute",
        ),
        pytest.param([], DRAIN, None, False, None, id="not tolerated"),
    ],
)
def test_toleration_seconds(
    tolerations: list[Toleration],
    taint: Taint,
    now: datetime | None,
    tolerated: bool,
    until: datetime | None,
) -> None:
    found = tolerance(taint, tolerations, now)
    assert found.tolerated is tolerated
    assert found.until == until
    assert (taint in untolerated([taint], tolerations, now)) is not tolerated


def test_eviction_time_is_the_earliest_bounded_taint() -> None:
    later = Taint("b", "NoExecute", "", "2026-12-02T11:00:00Z")
    unknown = Taint("c", "NoExecute")
    tolerations = [Toleration(operator="Exists", toleration_seconds=600)]
    assert eviction_time([later, DRAIN, unknown], tolerations) == (T0 + timedelta(seconds=600), 600)
    assert eviction_time([unknown], tolerations) == (None, 600)
    assert eviction_time([DRAIN], [Toleration(operator="Exists")]) is None
    assert eviction_time([Taint("a", "NoSchedule", "", ADDED)], tolerations) is None


@pytest.mark.parametrize(
    ("added", "stored"),
    [
        ("2026-12-02T10:00:00Z", "2026-12-02T10:00:00Z"),
        (datetime(2026, 12, 2, 10, 0, tzinfo=UTC), "2026-12-02T10:00:00Z"),  # YAML timestamp
        ("2026-12-02T11:00:00+01:00", "2026-12-02T11:00:00+01:00"),
    ],
)
def test_time_added_is_an_rfc3339_time(added: object, stored: str) -> None:
    taint = taint_from_mapping({"key": "k", "effect": "NoExecute", "timeAdded": added}, "t")
    assert taint.time_added == stored
    assert parse_time(stored) == T0


def test_a_time_added_that_is_no_time_is_bad_input() -> None:
    with pytest.raises(InputError, match="timeAdded 'yesterday' is not an RFC 3339 time"):
        taint_from_mapping({"key": "k", "effect": "NoExecute", "timeAdded": "yesterday"}, "t")
