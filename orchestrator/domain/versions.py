"""Kubernetes versions: parsing and ordering (pure).

Kubernetes writes versions as ``v1.31.1`` but tools and users drop the ``v``; CAPI tolerates both and
so do we. Ordering is semver precedence; two versions that differ only in build metadata
(``v1.32.0+a`` vs ``v1.32.0+b``) have no semver order, so callers that must order them keep the order
in which a version list gives them (what cluster-api does), see ``sort_versions``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import semver

from orchestrator.domain.errors import InputError

_SHAPE = re.compile(r"v?[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")


class VersionError(InputError):
    """A string that is not a Kubernetes version."""


@functools.total_ordering
@dataclass(frozen=True, slots=True)
class KubeVersion:
    """One Kubernetes version; equality includes build metadata, ordering ignores it."""

    major: int
    minor: int
    patch: int
    prerelease: str = ""
    build: str = ""
    _key: tuple[object, ...] = field(default=(), init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        key = (self.major, self.minor, self.patch, _prerelease_key(self.prerelease))
        object.__setattr__(self, "_key", key)

    @staticmethod
    def parse(text: object) -> KubeVersion:
        """Parse ``v1.31.1``, ``1.31.1``, ``v1.32.0-alpha.2`` or ``v1.32.0+foo.2-bar.2``."""
        return _parse_cached(text) if isinstance(text, str) else _reject(text)

    @property
    def minor_key(self) -> tuple[int, int]:
        """(major, minor): the unit of the skew policy and of 'visit every minor'."""
        return (self.major, self.minor)

    def precedence(self) -> tuple[object, ...]:
        """Semver precedence key: build metadata is ignored, pre-releases sort before GA."""
        return self._key

    @property
    def is_prerelease(self) -> bool:
        """``v1.34.0-rc.1`` is, ``v1.34.0+build.1`` is not: build metadata does not make a pre-release.

        Pre-releases are not releases: the planner uses one only as the target itself or when the
        strategy opts in (``allowPrereleases``), and drift never calls one "newest".
        """
        return bool(self.prerelease)

    def same_precedence(self, other: KubeVersion) -> bool:
        """True when the two differ at most in build metadata (semver cannot order them)."""
        return self._key == other._key

    def minor_distance(self, other: KubeVersion) -> int:
        """Minors from ``other`` up to ``self`` (negative when ``self`` is older); same major only."""
        return (
            self.minor - other.minor
            if self.major == other.major
            else 1000 * (self.major - other.major)
        )

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, KubeVersion):
            return NotImplemented
        return self._key < other._key

    def __str__(self) -> str:
        text = f"v{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += f"-{self.prerelease}"
        if self.build:
            text += f"+{self.build}"
        return text


def _reject(text: object) -> KubeVersion:
    raise VersionError(f"invalid Kubernetes version {text!r}: expected a string like v1.31.1")


def _prerelease_key(prerelease: str) -> tuple[object, ...]:
    # semver: GA sorts after any pre-release; numeric identifiers sort numerically and before
    # alphanumeric ones.
    if not prerelease:
        return (1,)
    parts: list[tuple[int, int, str]] = []
    for ident in prerelease.split("."):
        parts.append((0, int(ident), "") if ident.isdigit() else (1, 0, ident))
    return (0, tuple(parts))


@functools.lru_cache(maxsize=65536)
def _parse_cached(text: str) -> KubeVersion:
    # Exactly the version, nothing around it: "v1.35.0\n" (a file read without its newline
    # cut) is bad input, not normalised, and ``fullmatch`` because ``$`` would let it through.
    if text != text.strip():
        raise VersionError(f"invalid Kubernetes version {text!r}: leading or trailing whitespace")
    if not _SHAPE.fullmatch(text):
        _reject(text)
    try:
        info = semver.Version.parse(text.removeprefix("v"))
    except ValueError:
        _reject(text)
    return KubeVersion(info.major, info.minor, info.patch, info.prerelease or "", info.build or "")


def parse_version(text: object) -> KubeVersion:
    """Module-level alias of ``KubeVersion.parse`` for call sites that read better with it."""
    return KubeVersion.parse(text)


def sort_versions(versions: Iterable[KubeVersion]) -> list[KubeVersion]:
    """Order by precedence, keeping the given order among build-metadata twins (stable sort)."""
    return sorted(versions, key=KubeVersion.precedence)


def newest(
    versions: Iterable[KubeVersion], *, include_prereleases: bool = False
) -> KubeVersion | None:
    """The last release in precedence order (ties broken by the given order), or None.

    Pre-releases count only with ``include_prereleases``: a ClusterClass that lists
    ``v1.36.0-alpha.1`` for testing does not make 1.36 the version the fleet should run.
    """
    ordered = [v for v in sort_versions(versions) if include_prereleases or not v.is_prerelease]
    return ordered[-1] if ordered else None
