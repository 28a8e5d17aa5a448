"""Where a cluster runs (pure): provider, region and zones, as Karmada's Cluster fields.

(Named *location*, not topology: a CAPI Cluster's ``topology`` is its ClusterClass.)

Placement selects and spreads by these (``fieldSelector`` in cluster affinity, spread
constraints), so they must mean the same in a snapshot file and in the live fleet. One function,
``cluster_location``, derives them from what a CAPI Cluster carries (its labels, the kind of its
infrastructure object, its failure domains); the live inventory calls it with all three, the
snapshot loader with the labels alone for fields a file does not give. docs/decisions.md
("Cluster fields") records why these sources and in which order.

Values follow Kubernetes' label value syntax (they usually come from labels, and a selector
must be able to name them): 1-63 characters, alphanumerics with ``-``, ``_``, ``.`` inside.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, cast

from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError

PROVIDER_LABEL = "calibrator.dev/provider"
# The Kubernetes well-known label first, then the shorthand this project read since v1.
REGION_LABELS = ("topology.kubernetes.io/region", "region")
ZONE_LABEL = "topology.kubernetes.io/zone"
# Suffixes of a CAPI infrastructure cluster kind that name no provider (AWSManagedCluster: aws).
_KIND_SUFFIXES = ("ManagedCluster", "Cluster")

MAX_ZONES = 32
MAX_VALUE_LENGTH = 63
_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")

Field = Literal["provider", "region", "zone"]
FIELDS: tuple[Field, ...] = ("provider", "region", "zone")
FieldOperator = Literal["In", "NotIn"]
FIELD_OPERATORS: tuple[FieldOperator, ...] = ("In", "NotIn")
SpreadField = Literal["cluster", "region", "zone", "provider"]
SPREAD_FIELDS: tuple[SpreadField, ...] = ("cluster", "region", "zone", "provider")
# What a spread constraint counts, for messages ("2 regions").
PLURAL: Mapping[SpreadField, str] = {
    "cluster": "clusters",
    "region": "regions",
    "zone": "zones",
    "provider": "providers",
}


def value_error(raw: object) -> str:
    """Why ``raw`` is not a valid field value ("" when it is one)."""
    if not isinstance(raw, str):
        return f"must be a string, got {quote(raw)}"
    if len(raw) > MAX_VALUE_LENGTH:
        return f"longer than {MAX_VALUE_LENGTH} characters: {quote(raw)}"
    if not _VALUE.match(raw):
        return (
            f"invalid value {quote(raw)}: alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    return ""


def field_value(raw: object, where: str, error: type[InputError] = InputError) -> str:
    """``raw`` if it is a valid provider, region or zone."""
    problem = value_error(raw)
    if problem:
        raise error(f"{where}: {problem}")
    return cast(str, raw)


def zone_list(raw: object, where: str, error: type[InputError] = InputError) -> tuple[str, ...]:
    """A list of distinct zones, sorted (the order of a cluster's zones means nothing)."""
    if not isinstance(raw, list):
        raise error(f"{where}: expected a list of zones, got {quote(raw)}")
    if len(raw) > MAX_ZONES:
        raise error(f"{where}: more than {MAX_ZONES} zones")
    zones = [field_value(z, f"{where}[{i}]", error) for i, z in enumerate(raw)]
    if len(set(zones)) != len(zones):
        raise error(f"{where}: duplicate zones")
    return tuple(sorted(zones))


@dataclass(frozen=True, slots=True)
class Location:
    """A cluster's provider, region and zones (None / empty when unknown)."""

    provider: str | None = None
    region: str | None = None
    zones: tuple[str, ...] = ()


def provider_of_kind(kind: str) -> str | None:
    """``AWSCluster`` / ``AWSManagedCluster`` -> ``aws``, ``DockerCluster`` -> ``docker``."""
    for suffix in _KIND_SUFFIXES:
        if kind.endswith(suffix) and len(kind) > len(suffix):
            name = kind[: -len(suffix)].lower()
            return name if not value_error(name) else None
    return None


def cluster_location(
    labels: Mapping[str, str],
    *,
    infrastructure_kind: str | None = None,
    failure_domains: Iterable[str] = (),
) -> Location:
    """A cluster's fields from its CAPI object; labels state intent and win over derivation.

    * provider: label ``calibrator.dev/provider``, else the infrastructure kind without its
      ``Cluster`` / ``ManagedCluster`` suffix, lowercased;
    * region: label ``topology.kubernetes.io/region``, else label ``region``;
    * zones: label ``topology.kubernetes.io/zone`` (one zone), else the names of the
      Cluster's ``status.failureDomains`` (CAPI's zones for machines), sorted.

    An empty label value counts as no label. Other label values are taken as they are: the API
    server (or the snapshot loader) validated them as labels, and a snapshot that loaded before
    these fields existed must still load. Failure domain names are validated (InputError), as
    nothing else checks them.
    """
    provider = labels.get(PROVIDER_LABEL) or None
    if provider is None and infrastructure_kind:
        provider = provider_of_kind(infrastructure_kind)
    region = next((labels[k] for k in REGION_LABELS if labels.get(k)), None)
    zone = labels.get(ZONE_LABEL)
    zones: tuple[str, ...] = ()
    if zone:
        zones = (zone,)
    elif failure_domains:
        zones = zone_list(sorted(set(failure_domains)), "status.failureDomains")
    return Location(provider, region, zones)


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """One ``fieldSelector.matchExpressions`` entry over provider, region or zone."""

    key: Field
    operator: FieldOperator
    values: tuple[str, ...]

    def matches(self, location: Location) -> bool:
        """Karmada's rules.

        provider and region as label selectors do (NotIn also matches a cluster without the
        field); zone over all of a cluster's zones, as current Karmada matches them (its zones
        fix of mid-2025): In needs any one of the cluster's zones listed, NotIn none of them.
        The two are each other's negation, except that a cluster without zones matches NotIn
        only.
        """
        if self.key == "zone":
            listed = any(z in self.values for z in location.zones)
            return listed if self.operator == "In" else not listed
        value = location.provider if self.key == "provider" else location.region
        return (value in self.values) == (self.operator == "In")

    def describe(self) -> str:
        """``region in (eu,us)``, the label selector string form."""
        return f"{self.key} {self.operator.lower()} ({','.join(self.values)})"


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """Karmada's ``ClusterAffinity.fieldSelector``: every expression must match."""

    match_expressions: tuple[FieldRequirement, ...] = ()

    def matches(self, location: Location) -> bool:
        """True when every expression matches (an empty selector matches every cluster)."""
        return all(req.matches(location) for req in self.match_expressions)

    def is_empty(self) -> bool:
        """No expression: selects every cluster."""
        return not self.match_expressions

    def describe(self) -> str:
        """``provider in (aws),zone notin (eu-1a)``."""
        return ",".join(req.describe() for req in self.match_expressions)

    def to_json(self) -> dict[str, object]:
        """The ``{matchExpressions: [...]}`` form."""
        return {
            "matchExpressions": [
                {"key": r.key, "operator": r.operator, "values": list(r.values)}
                for r in self.match_expressions
            ]
        }


MAX_FIELD_EXPRESSIONS = 16
MAX_FIELD_VALUES = 64


def field_selector_from_mapping(
    raw: object, where: str, error: type[InputError] = InputError
) -> FieldSelector:
    """Parse ``{matchExpressions: [{key, operator, values}]}``; keys provider/region/zone, In/NotIn."""
    if not isinstance(raw, Mapping):
        raise error(f"{where}: expected a mapping with matchExpressions, got {quote(raw)}")
    unknown = [k for k in raw if k != "matchExpressions"]
    if unknown:
        names = ", ".join(quote(k, 40) for k in unknown[:5])
        raise error(f"{where}: unknown field(s) {names} (allowed: matchExpressions)")
    items = raw.get("matchExpressions")
    if not isinstance(items, list) or not items:
        raise error(f"{where}.matchExpressions: expected a non-empty list, got {quote(items)}")
    if len(items) > MAX_FIELD_EXPRESSIONS:
        raise error(f"{where}.matchExpressions: more than {MAX_FIELD_EXPRESSIONS} expressions")
    out: list[FieldRequirement] = []
    for i, item in enumerate(items):
        here = f"{where}.matchExpressions[{i}]"
        if not isinstance(item, Mapping):
            raise error(f"{here}: expected a mapping, got {quote(item)}")
        extra = [k for k in item if k not in ("key", "operator", "values")]
        if extra:
            names = ", ".join(quote(k, 40) for k in extra[:5])
            raise error(f"{here}: unknown field(s) {names} (allowed: key, operator, values)")
        key = item.get("key")
        if key not in FIELDS:
            raise error(f"{here}.key: must be one of {', '.join(FIELDS)}, got {quote(key)}")
        op = item.get("operator")
        if op not in FIELD_OPERATORS:
            raise error(
                f"{here}.operator: must be one of {', '.join(FIELD_OPERATORS)}, got {quote(op)}"
            )
        values = item.get("values")
        if not isinstance(values, list) or not values:
            raise error(f"{here}.values: operator {op} needs a non-empty list of values")
        if len(values) > MAX_FIELD_VALUES:
            raise error(f"{here}.values: more than {MAX_FIELD_VALUES} values")
        parsed = tuple(field_value(v, f"{here}.values[{j}]", error) for j, v in enumerate(values))
        out.append(
            FieldRequirement(cast(Field, key), cast(FieldOperator, op), tuple(sorted(set(parsed))))
        )
    return FieldSelector(tuple(out))


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """Karmada's ``spreadConstraints`` entry with ``spreadByField``.

    The clusters a workload runs on must span at least ``min_groups`` and at most
    ``max_groups`` (None: no cap) distinct values of ``field`` (``cluster``: clusters).
    """

    field: SpreadField
    min_groups: int = 1
    max_groups: int | None = None

    def describe(self) -> str:
        """``at least 2 and at most 3 regions``."""
        noun = PLURAL[self.field]
        if self.max_groups is None:
            return f"at least {self.min_groups} {noun}"
        if self.max_groups == self.min_groups:
            return f"exactly {self.min_groups} {noun}"
        return f"at least {self.min_groups} and at most {self.max_groups} {noun}"


def groups_of(field: SpreadField, name: str, location: Location) -> tuple[str, ...]:
    """The groups a cluster belongs to for a spread by ``field`` (a cluster may span zones)."""
    if field == "cluster":
        return (name,)
    if field == "zone":
        return location.zones
    value = location.region if field == "region" else location.provider
    return (value,) if value is not None else ()
