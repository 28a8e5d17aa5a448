"""A calibration request, parsed and validated in one place: target, strategy and selector.

Every way into a calibration reads its request here: the CLI before it connects, the client
before it starts a run, the ``FleetCalibration`` workflow first thing in ``run`` (so this module
is pure and deterministic: no I/O, no clock), and the plan activity. Each mistake therefore has
one error text wherever it is found, and what the client lets through the workflow accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError
from orchestrator.domain.selectors import LabelSelector, parse_selector_string
from orchestrator.domain.versions import KubeVersion
from orchestrator.domain.waves import DEFAULT_STRATEGY, Strategy, strategy_from_mapping

# Bounds on the text fields of a request (a workflow input may come from any client).
MAX_VERSION_TEXT = 64
MAX_SELECTOR_TEXT = 1024


@dataclass(frozen=True)
class CalibrationRequest:
    """What a calibration was asked to do: the version, how to roll out, and which clusters."""

    target: KubeVersion
    strategy: Strategy = DEFAULT_STRATEGY
    selector: LabelSelector | None = None  # None: the whole fleet


def version_field(value: object, where: str) -> KubeVersion:
    """A version-valued field of an input: a short string that parses (InputError naming ``where``)."""
    if not isinstance(value, str) or len(value) > MAX_VERSION_TEXT:
        raise InputError(f"{where}: expected a Kubernetes version like v1.31.1, got {quote(value)}")
    try:
        return KubeVersion.parse(value)
    except InputError as err:
        raise InputError(f"{where}: {err}") from None


def selector_field(value: object) -> LabelSelector | None:
    """The request's selector (kubectl ``-l`` syntax); None selects the whole fleet."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_SELECTOR_TEXT:
        raise InputError(f"selector: expected a non-empty string, got {quote(value)}")
    return parse_selector_string(value)


def parse_calibration_request(
    target: object, strategy: object = None, selector: object = None
) -> CalibrationRequest:
    """Parse and validate a calibration request; InputError with the one text per mistake.

    ``strategy`` is a CalibrationStrategy document (a mapping; None = the default strategy),
    ``selector`` kubectl's label selector text (None = the whole fleet).
    """
    return CalibrationRequest(
        target=version_field(target, "target"),
        strategy=DEFAULT_STRATEGY if strategy is None else strategy_from_mapping(strategy),
        selector=selector_field(selector),
    )
