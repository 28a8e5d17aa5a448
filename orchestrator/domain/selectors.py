"""Kubernetes label selectors (pure): ``matchLabels`` plus ``matchExpressions``.

Used by placement affinities, wave stages, canary selection and the CLI's ``--selector``; one
implementation keeps "which clusters does this select" identical everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, cast

from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
_OPERATORS: tuple[Operator, ...] = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` entry."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Kubernetes semantics: NotIn also matches when the key is absent."""
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return labels.get(self.key) in self.values
        return labels.get(self.key) not in self.values

    def describe(self) -> str:
        """Selector-string form, e.g. ``env in (prod,staging)``."""
        if self.operator == "Exists":
            return self.key
        if self.operator == "DoesNotExist":
            return f"!{self.key}"
        op = "in" if self.operator == "In" else "notin"
        return f"{self.key} {op} ({','.join(self.values)})"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """An empty selector selects everything, as in Kubernetes."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when every label and every expression matches."""
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)

    def is_empty(self) -> bool:
        """An empty selector matches every cluster."""
        return not self.match_labels and not self.match_expressions

    def describe(self) -> str:
        """Selector-string form used in reasons and tables."""
        parts = [f"{k}={v}" for k, v in self.match_labels]
        parts += [req.describe() for req in self.match_expressions]
        return ",".join(parts) if parts else "<all>"

    def to_json(self) -> dict[str, object]:
        """The ``{matchLabels, matchExpressions}`` form."""
        out: dict[str, object] = {}
        if self.match_labels:
            out["matchLabels"] = dict(self.match_labels)
        if self.match_expressions:
            out["matchExpressions"] = [
                {"key": r.key, "operator": r.operator, "values": list(r.values)}
                for r in self.match_expressions
            ]
        return out


def selector_from_mapping(raw: object, where: str) -> LabelSelector:
    """Parse ``{matchLabels: {...}, matchExpressions: [...]}``; None means select everything."""
    if raw is None:
        return LabelSelector()
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: a label selector must be a mapping")
    unknown = set(raw) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise InputError(
            f"{where}: unknown selector field(s) {', '.join(sorted(map(str, unknown)))}"
        )
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        raise InputError(f"{where}.matchLabels: must be a mapping of strings")
    pairs = tuple(
        sorted((str(k), _label_value(v, f"{where}.matchLabels.{k}")) for k, v in labels.items())
    )
    exprs_raw = raw.get("matchExpressions") or []
    if not isinstance(exprs_raw, list):
        raise InputError(f"{where}.matchExpressions: must be a list")
    exprs: list[Requirement] = []
    for i, item in enumerate(exprs_raw):
        here = f"{where}.matchExpressions[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise InputError(f"{here}: needs a string 'key'")
        extra = [k for k in item if k not in ("key", "operator", "values")]
        if extra:
            raise InputError(f"{here}: unknown field(s) {', '.join(quote(k, 40) for k in extra)}")
        op = item.get("operator")
        if op not in _OPERATORS:
            raise InputError(
                f"{here}: operator must be one of {', '.join(_OPERATORS)}, got {quote(op)}"
            )
        values = item.get("values") or []
        if not isinstance(values, list):
            raise InputError(f"{here}.values: must be a list")
        if op in ("In", "NotIn") and not values:
            raise InputError(f"{here}: operator {op} needs at least one value")
        if op in ("Exists", "DoesNotExist") and values:
            raise InputError(f"{here}: operator {op} takes no values")
        exprs.append(
            Requirement(
                item["key"], cast(Operator, op), tuple(_label_value(v, here) for v in values)
            )
        )
    return LabelSelector(pairs, tuple(exprs))


def _label_value(value: object, where: str) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        raise InputError(f"{where}: label values must be strings, got {quote(value)}")
    return str(value)


_TERM = re.compile(r"^\s*(!?)([A-Za-z0-9./_-]+)\s*(?:(==|=|!=|\s+in\s+|\s+notin\s+)\s*(.*?))?\s*$")


MAX_SELECTOR_LENGTH = 4096


def parse_selector_string(text: str) -> LabelSelector:
    """Parse kubectl's ``-l`` syntax: ``env=prod,region in (eu,us),!legacy``."""
    if len(text) > MAX_SELECTOR_LENGTH:
        raise InputError(
            f"invalid label selector {quote(text)}: longer than {MAX_SELECTOR_LENGTH} characters"
        )
    terms: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        terms.append(current)
    labels: list[tuple[str, str]] = []
    exprs: list[Requirement] = []
    for term in terms:
        match = _TERM.match(term)
        if not match:
            raise InputError(
                f"invalid label selector {quote(text)}: cannot parse {quote(term.strip())}"
            )
        neg, key, op, rest = match.groups()
        op = (op or "").strip()
        if neg:
            if op:
                raise InputError(
                    f"invalid label selector {quote(text)}: '!' only negates a bare key"
                )
            exprs.append(Requirement(key, "DoesNotExist"))
        elif not op:
            exprs.append(Requirement(key, "Exists"))
        elif op in ("=", "=="):
            labels.append((key, rest))
        elif op == "!=":
            exprs.append(Requirement(key, "NotIn", (rest,)))
        else:
            if not (rest.startswith("(") and rest.endswith(")")):
                raise InputError(f"invalid label selector {quote(text)}: '{op}' needs a (list)")
            values = tuple(v.strip() for v in rest[1:-1].split(",") if v.strip())
            if not values:
                raise InputError(f"invalid label selector {quote(text)}: empty value list")
            exprs.append(Requirement(key, "In" if op == "in" else "NotIn", values))
    return LabelSelector(tuple(sorted(labels)), tuple(exprs))
