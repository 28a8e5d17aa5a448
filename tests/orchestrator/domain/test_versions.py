from __future__ import annotations

import pytest

from orchestrator.domain.versions import KubeVersion, VersionError, newest, sort_versions

V = KubeVersion.parse


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("v1.31.1", "v1.31.1"),
        ("1.31.1", "v1.31.1"),
        ("v1.32.0-alpha.2", "v1.32.0-alpha.2"),
        ("v1.32.0+foo.2-bar.2", "v1.32.0+foo.2-bar.2"),
        ("v1.33.0-rc.1+build.7", "v1.33.0-rc.1+build.7"),
    ],
)
def test_parse_round_trips(text: str, expected: str) -> None:
    assert str(V(text)) == expected


@pytest.mark.parametrize(
    "bad", ["1.31", "v1", "latest", "v1.31.x", "", "vv1.31.1", "v1.31.01", None, 131, "v1.31.1-"]
)
def test_parse_rejects_with_one_clear_message(bad: object) -> None:
    with pytest.raises(VersionError, match="invalid Kubernetes version"):
        KubeVersion.parse(bad)


@pytest.mark.parametrize(
    "padded", ["v1.35.0\n", " v1.35.0", "v1.35.0 ", "\tv1.35.0", "v1.35.0\r\n"]
)
def test_parse_refuses_surrounding_whitespace_instead_of_trimming_it(padded: str) -> None:
    with pytest.raises(VersionError, match="leading or trailing whitespace"):
        KubeVersion.parse(padded)


@pytest.mark.parametrize("odd", ["v1.\u0663\u0665.0", "v1.35.0\nv1.36.0"])
def test_parse_takes_ascii_digits_and_one_line_only(odd: str) -> None:
    with pytest.raises(VersionError, match="invalid Kubernetes version"):
        KubeVersion.parse(odd)


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("v1.31.1", "v1.31.2"),
        ("v1.31.9", "v1.32.0"),
        ("v1.32.0-alpha.2", "v1.32.0"),
        ("v1.32.0-alpha.2", "v1.32.0-alpha.10"),
        ("v1.32.0-alpha.10", "v1.32.0-beta.0"),
        ("v1.32.0-rc.1", "v1.32.0"),
        ("v1.31.0", "v1.32.0-alpha.0"),
    ],
)
def test_semver_precedence(older: str, newer: str) -> None:
    assert V(older) < V(newer)
    assert not V(newer) < V(older)


def test_build_metadata_is_equal_precedence_but_not_equal() -> None:
    a, b = V("v1.32.0+foo.1"), V("v1.32.0+foo.2")
    assert a != b
    assert a.same_precedence(b)
    assert not a < b and not b < a


def test_sort_keeps_list_order_among_build_twins() -> None:
    given = [V("v1.32.0+b"), V("v1.31.0"), V("v1.32.0+a")]
    assert [str(v) for v in sort_versions(given)] == ["v1.31.0", "v1.32.0+b", "v1.32.0+a"]
    assert str(newest(given)) == "v1.32.0+a"
    assert newest([]) is None


def test_minor_helpers() -> None:
    assert V("v1.34.1").minor_distance(V("v1.31.0")) == 3
    assert V("v1.31.1").minor_key == (1, 31)
    assert KubeVersion(1, 31, 0) < V("v1.31.1")


@pytest.mark.parametrize(
    ("versions", "include_prereleases", "expected"),
    [
        (["v1.35.0", "v1.36.0-alpha.1"], False, "v1.35.0"),
        (["v1.35.0", "v1.36.0-alpha.1"], True, "v1.36.0-alpha.1"),
        (["v1.35.0", "v1.35.1-rc.0", "v1.34.9"], False, "v1.35.0"),
        (["v1.35.0+vendor.1", "v1.36.0-rc.0+vendor.1"], False, "v1.35.0+vendor.1"),
        (["v1.36.0-alpha.1", "v1.36.0-rc.0"], False, None),
        (["v1.36.0-alpha.1", "v1.36.0-rc.0"], True, "v1.36.0-rc.0"),
    ],
)
def test_newest_is_a_release_unless_prereleases_are_asked_for(
    versions: list[str], include_prereleases: bool, expected: str | None
) -> None:
    found = newest([V(v) for v in versions], include_prereleases=include_prereleases)
    assert (None if found is None else str(found)) == expected


@pytest.mark.parametrize(
    ("text", "pre"),
    [
        ("v1.34.0-rc.1", True),
        ("v1.34.0-rc.1+b.1", True),
        ("v1.34.0+b.1", False),
        ("v1.34.0", False),
    ],
)
def test_is_prerelease(text: str, pre: bool) -> None:
    assert V(text).is_prerelease is pre
