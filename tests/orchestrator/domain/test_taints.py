from __future__ import annotations

import pytest

from orchestrator.domain.errors import InputError
from orchestrator.domain.taints import (
    Taint,
    Toleration,
    decode_taints,
    encode_taints,
    schedulable_label,
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
