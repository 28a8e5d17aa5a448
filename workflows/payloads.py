"""Strict decoding of what clients send the workflows: inputs, update and signal arguments.

Temporal's default JSON converter builds a dataclass from whatever the payload holds: unknown
fields are ignored silently (``{"target": ..., "optoins": {...}}`` runs with default options), and
a wrong type raises a ``TypeError`` that the SDK turns into a *workflow task* failure, which the
server retries forever: the run sits in Running with a Python traceback in its history and no
operator-facing error. A workflow can be started by any client (``temporal workflow start``,
another SDK, a script), so the worker decodes the types clients send strictly:

* the top-level inputs and every update/signal argument type in ``STRICT_TYPES`` must be JSON
  objects whose fields are the dataclass's, at every nested dataclass level (an unknown field is
  an error, as in snapshots and strategies);
* any decoding failure raises one non-retryable ``ApplicationError`` of type ``InvalidInput``
  with a short message. The SDK fails the *workflow* with it when it is the start input (the run
  ends at once, before any activity), and rejects the update when it is an update argument
  (validators run after decoding). A signal whose argument does not decode is dropped by the SDK
  and logged; nothing in the workflow changes.
* strings in operator requests (reasons, stage and cluster names) are at most
  ``MAX_REQUEST_TEXT`` characters: they are kept in the progress every query returns.

What is checked after decoding (versions, bounds, strategy documents) is
``workflows.validation``'s job. Activity results and the parent/child ``ClusterReport`` signal
keep the SDK's lenient decoding: they are our own payloads, and a field removed in a later
version must still replay from old histories.

Domain types are payloads as they are (docs/decisions.md, "One plan model"), so the same
converter also spells a ``KubeVersion`` as its text (``"v1.33.5"``, never its fields), in both
directions, and reads the JSON that payloads had before they were domain types
(``LEGACY_SHAPES``: a decoder that rewrites an old document into today's shape). Every place
that encodes or decodes a payload uses it: the worker (``strict_client``), every client
(``DATA_CONVERTER`` through ``Connection.connect_kwargs``), the stored plan, the tests and the
replayer. One place with the SDK's default would write a version as a dict, silently.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from temporalio.client import Client
from temporalio.converter import (
    AdvancedJSONEncoder,
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
    JSONTypeConverter,
    value_to_type,
)
from temporalio.exceptions import ApplicationError

from orchestrator.domain.compatibility import Finding
from orchestrator.domain.documents import quote
from orchestrator.domain.versions import KubeVersion
from workflows.model import (
    AbortRequest,
    ApproveRequest,
    CalibrationInput,
    CalibrationRun,
    ClusterCommand,
    ClusterRun,
    ClusterUpgradeInput,
    ContinuousInput,
    Decision,
    PatchWorkersInput,
    PauseRequest,
    PreflightInput,
    ResumeRequest,
    RetryRequest,
    SkipRequest,
)

INVALID_INPUT = "InvalidInput"  # the same type as workflows.validation's
MESSAGE_LIMIT = 300
MAX_REQUEST_TEXT = 1024
INPUT_TYPES: tuple[type, ...] = (CalibrationInput, ContinuousInput, ClusterUpgradeInput)
REQUEST_TYPES: tuple[type, ...] = (
    PauseRequest,
    ResumeRequest,
    ApproveRequest,
    SkipRequest,
    RetryRequest,
    AbortRequest,
    Decision,
    ClusterCommand,
)
STRICT_TYPES = frozenset(INPUT_TYPES + REQUEST_TYPES)
# Written by our own worker for continue-as-new: a field a later version drops must not fail
# the continued run, so unknown fields are not looked for below these (types still are). A
# child's inline plan is checked strictly except its window: windows written before the payload's
# window became the domain ``MaintenanceWindow`` carry a ``description`` it no longer has.
OWN_FIELDS = frozenset({(CalibrationInput, "checkpoint"), (ClusterRun, "window")})


def _finding_v1(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A check's finding as the workflow payload spelled it before it was the domain ``Finding``.

    It named no cluster and no version: the version becomes the first release without the API
    (``removed_in``, ``"1.32"``), the cluster is unnamed. The run reads only workload, API and
    removal from a finding, so a result recorded then replays and reads the same.
    """
    if "version" in doc:
        return None
    return {
        "cluster": "",
        "version": f"v{doc.get('removed_in', '0.0')}.0",
        "replacement": "",
        **doc,
    }


def _pairs(pools: Any) -> list[Any]:
    """Pools as ``[name, version]`` pairs; before, each was a ``{name, version}`` object."""
    return [[p.get("name"), p.get("version")] if isinstance(p, Mapping) else p for p in pools or ()]


def _pools_v1(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """An activity input whose ``pools`` were ``{name, version}`` objects (``PoolVersion``)."""
    pools = doc.get("pools")
    if not isinstance(pools, list) or not any(isinstance(p, Mapping) for p in pools):
        return None
    return {**doc, "pools": _pairs(pools)}


def _cluster_plan_v1(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The domain ``ClusterPlan`` of an old ``ClusterUpgradePlan`` document.

    The old document said per step what the domain plan says, with the versions as text; the
    plan's control-plane and worker versions are its steps' versions, and its target the last
    one (or where it starts, when it has no step). Unknown fields of a step stay, so a strict
    decoder still names them.
    """
    steps = [s for s in doc.get("steps") or () if isinstance(s, Mapping)]
    cluster = doc.get("cluster")
    keep = {"index", "step_id", "pools"}

    def versions(component: str) -> list[Any]:
        return [s.get("version") for s in steps if s.get("component") == component]

    return {
        "cluster": cluster.get("name") if isinstance(cluster, Mapping) else cluster,
        "target": steps[-1].get("version") if steps else doc.get("control_plane_from"),
        "control_plane_from": doc.get("control_plane_from"),
        "control_plane_steps": versions("controlPlane"),
        "workers_from": doc.get("workers_from"),
        "worker_steps": versions("workers"),
        "steps": [
            {
                **{k: v for k, v in s.items() if k not in keep},
                "pools": [p[0] for p in _pairs(s.get("pools"))],
                "pools_from": _pairs(s.get("pools")),
            }
            for s in steps
        ],
        "blocked": doc.get("blocked", False),
        "reasons": doc.get("reasons", []),
        "pools_from": _pairs(doc.get("pools")),
        "topology": doc.get("topology", True),
    }


def _cluster_run_v1(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A ``ClusterRun`` from an old ``ClusterUpgradePlan``: a child's inline plan or its read.

    Recorded histories hold this shape (the ``cluster_plan`` result, a child's input).
    """
    if "plan" in doc:
        return None
    cluster = doc.get("cluster")
    return {
        "plan": _cluster_plan_v1(doc),
        "namespace": cluster.get("namespace", "") if isinstance(cluster, Mapping) else "",
        "step_ids": [s.get("step_id") for s in doc.get("steps") or () if isinstance(s, Mapping)],
        "window": doc.get("window"),
        "on_observed_usage": doc.get("on_observed_usage", "block"),
        "on_disruption_blocker": doc.get("on_disruption_blocker", "block"),
    }


def _calibration_run_v1(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A ``CalibrationRun`` from an old ``FleetPlan``: a plan stored before it was the domain's.

    The old document kept per cluster what the rollout keeps once (its window, the gates), and
    the findings as counts only (older ones as a list, which is dropped).
    """
    if "plan" in doc:
        return None
    clusters = [c for c in doc.get("clusters") or () if isinstance(c, Mapping)]
    names = [_cluster_plan_v1(c)["cluster"] for c in clusters]
    first = clusters[0] if clusters else {}
    return {
        "plan": {
            "target": doc.get("target"),
            "clusters": [_cluster_plan_v1(c) for c in clusters],
            "findings": [],
            "rollout": {
                "stages": doc.get("stages", []),
                "unassigned": doc.get("unassigned", []),
                "windows": {
                    n: c["window"] for n, c in zip(names, clusters, strict=True) if c.get("window")
                },
                "max_failures": doc.get("max_failures", 0),
                "observed_usage": first.get("on_observed_usage", "block"),
                "unsatisfiable_disruption_budgets": first.get("on_disruption_blocker", "block"),
            },
        },
        "calibration_id": doc.get("calibration_id", ""),
        "namespaces": {
            n: c["cluster"].get("namespace", "")
            for n, c in zip(names, clusters, strict=True)
            if isinstance(c.get("cluster"), Mapping)
        },
        "finding_actions": doc.get("finding_actions", {}),
    }


# Type -> rewrite of a document in an older shape into today's (None: already today's shape).
LEGACY_SHAPES: dict[type, Callable[[Mapping[str, Any]], Mapping[str, Any] | None]] = {
    Finding: _finding_v1,
    ClusterRun: _cluster_run_v1,
    CalibrationRun: _calibration_run_v1,
    PreflightInput: _pools_v1,
    PatchWorkersInput: _pools_v1,
}


def current_shape(hint: Any, value: Any) -> Any:
    """``value`` rewritten from an older shape of ``hint`` when it is one; else as it is."""
    legacy = LEGACY_SHAPES.get(hint) if isinstance(value, Mapping) else None
    rewritten = None if legacy is None else legacy(value)
    return value if rewritten is None else rewritten


class DomainTypes(JSONTypeConverter):
    """``KubeVersion`` from its text, and older payload shapes rewritten (``LEGACY_SHAPES``)."""

    def to_typed_value(self, hint: type, value: Any) -> Any:
        """The decoded value, or ``Unhandled`` to let the SDK decode it."""
        if hint is KubeVersion:
            if not isinstance(value, str):
                raise TypeError(f"expected a version string, got {quote(value)}")
            return KubeVersion.parse(value)
        rewritten = current_shape(hint, value)
        if rewritten is value:
            return JSONTypeConverter.Unhandled
        return value_to_type(hint, rewritten, CONVERTERS)


CONVERTERS: tuple[JSONTypeConverter, ...] = (DomainTypes(),)


class PayloadEncoder(AdvancedJSONEncoder):
    """The SDK's JSON encoder, with a ``KubeVersion`` as its text at any depth.

    The SDK's encoder turns a dataclass into a dict with ``dataclasses.asdict``, which recurses
    itself and never shows a nested version to ``default``; this one encodes one level at a time
    (the same fields, in the same order), so every nested value comes back here.
    """

    def default(self, o: Any) -> Any:
        """JSON-ready form of ``o`` (see ``json.JSONEncoder.default``)."""
        if isinstance(o, KubeVersion):
            return str(o)
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            return {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}
        if isinstance(o, Mapping):
            return dict(o)
        return super().default(o)


def _invalid(hint: type, message: str) -> ApplicationError:
    text = " ".join(f"invalid {hint.__name__}: {message}".split())
    if len(text) > MESSAGE_LIMIT:
        text = text[: MESSAGE_LIMIT - 1] + "…"
    return ApplicationError(text, type=INVALID_INPUT, non_retryable=True)


def _dataclasses_in(hint: Any) -> list[type]:
    """The dataclass types a field's hint can hold (``X``, ``X | None``, ``tuple[X, ...]``)."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return [hint]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType, tuple, list):
        return [t for arg in typing.get_args(hint) for t in _dataclasses_in(arg)]
    return []


def unknown_fields(hint: type, value: object, where: str) -> str | None:
    """The first unknown field at any dataclass level of ``value``, as ``where.path``; or None."""
    value = current_shape(hint, value)
    if not isinstance(value, Mapping):
        return None  # value_to_type names the wrong type
    fields = {f.name for f in dataclasses.fields(hint)}
    extra = sorted(str(k) for k in value if k not in fields)
    if extra:
        return f"{where}: unknown field(s) {', '.join(quote(k) for k in extra[:5])}"
    hints = typing.get_type_hints(hint)
    for name, raw in value.items():
        nested = _dataclasses_in(hints[name])
        if not nested or raw is None or (hint, name) in OWN_FIELDS:
            continue
        items = raw if isinstance(raw, list) else [raw]
        for i, item in enumerate(items):
            here = f"{where}.{name}" + (f"[{i}]" if isinstance(raw, list) else "")
            found = unknown_fields(nested[0], item, here)
            if found:
                return found
    return None


def _long_text(value: Mapping[str, Any]) -> str | None:
    for name, raw in value.items():
        if isinstance(raw, str) and len(raw) > MAX_REQUEST_TEXT:
            return f"{name}: longer than {MAX_REQUEST_TEXT} characters"
    return None


_SDK_FIELD = re.compile(r"Failed converting field (\w+) on dataclass [\w.]+")


def _reasons(err: BaseException) -> str:
    """The SDK's conversion messages down the cause chain, as ``field: nested: what``."""
    parts: list[str] = []
    current: BaseException | None = err
    while current is not None and len(parts) < 6:
        text = str(current).replace("<class '", "").replace("'>", "")
        parts.append(_SDK_FIELD.sub(r"\1", text[:MESSAGE_LIMIT]))
        current = current.__cause__
    return ": ".join(p for p in parts if p)


def _nested_reason(hint: type, value: Mapping[str, Any]) -> str | None:
    """The inner error of an optional nested dataclass (the SDK reports only its union)."""
    hints = typing.get_type_hints(hint)
    for name, raw in value.items():
        nested = _dataclasses_in(hints.get(name))
        if raw is None or not nested or isinstance(raw, list):
            continue
        try:
            value_to_type(nested[0], raw, CONVERTERS)
        except Exception as err:  # any conversion error is the answer
            inner = _nested_reason(nested[0], raw) if isinstance(raw, Mapping) else None
            return f"{name}: {inner or _reasons(err)}"
    return None


class StrictTypes(JSONTypeConverter):
    """Decode ``STRICT_TYPES`` strictly; leave every other type to ``DomainTypes`` and the SDK."""

    def to_typed_value(self, hint: type, value: Any) -> Any:
        """The decoded value, ``Unhandled`` for other types, or a non-retryable InvalidInput."""
        if hint not in STRICT_TYPES:
            return JSONTypeConverter.Unhandled
        if not isinstance(value, Mapping):
            raise _invalid(hint, f"expected a JSON object, got {quote(value)}")
        problem = unknown_fields(hint, value, hint.__name__)
        if problem is None and hint in REQUEST_TYPES:
            problem = _long_text(value)
        if problem is not None:
            raise _invalid(hint, problem)
        try:
            return value_to_type(hint, value, CONVERTERS)  # nested: the SDK's rules, no recursion
        except Exception as err:
            raise _invalid(hint, _nested_reason(hint, value) or _reasons(err)) from None


class StrictPayloadConverter(CompositePayloadConverter):
    """The SDK's default converters, with our JSON: versions as text, client input strict."""

    def __init__(self) -> None:
        super().__init__(
            *(
                JSONPlainPayloadConverter(
                    encoder=PayloadEncoder, custom_type_converters=[StrictTypes(), *CONVERTERS]
                )
                if isinstance(c, JSONPlainPayloadConverter)
                else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


DATA_CONVERTER = dataclasses.replace(
    DataConverter.default, payload_converter_class=StrictPayloadConverter
)
"""The one data converter of every client, worker, test environment and replayer."""


def strict_client(client: Client) -> Client:
    """``client`` (same connection, namespace, codec, interceptors) decoding strictly."""
    config = client.config()
    config["data_converter"] = dataclasses.replace(
        client.data_converter, payload_converter_class=StrictPayloadConverter
    )
    return Client(**config)
