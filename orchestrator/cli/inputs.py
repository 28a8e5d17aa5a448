"""What the one-shot commands read the same way: target, selector, strategy and plan, today.

``calibrator drift``, ``plan``, ``check`` (``main``) and ``report`` parse ``--target`` and check
``-l`` before any fleet is read, plan with the same strategy and selector, and date their answer
by the same clock; they share these helpers so that ``report``'s waves are ``plan``'s, and so that
no command module has to import ``main`` (which imports every command module to register it).
Domain and planning code is imported lazily, like everywhere in the CLI.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.domain.calibration import CalibrationPlan
    from orchestrator.domain.snapshot import FleetSnapshot
    from orchestrator.domain.versions import KubeVersion


def target_version(text: str) -> KubeVersion:
    """``--target`` as a Kubernetes version (an ``InputError`` when it is none)."""
    from orchestrator.domain.versions import KubeVersion

    return KubeVersion.parse(text)


def checked_selector(selector: str | None) -> None:
    """Parse ``-l`` before anything is read: bad input never costs a fleet read."""
    if selector:
        from orchestrator.domain.selectors import parse_selector_string

        parse_selector_string(selector)


def plan_fleet(
    snap: FleetSnapshot, version: KubeVersion, strategy: Path | None, selector: str | None
) -> CalibrationPlan:
    """The calibration plan of ``calibrator plan``: ``--strategy`` (or the default) and ``-l``."""
    from orchestrator.cli.files import read_document
    from orchestrator.domain.selectors import parse_selector_string
    from orchestrator.domain.waves import DEFAULT_STRATEGY, load_strategy
    from orchestrator.planning import plan_calibration

    strat = (
        DEFAULT_STRATEGY if strategy is None else load_strategy(read_document(strategy, "strategy"))
    )
    sel = parse_selector_string(selector) if selector else None
    return plan_calibration(snap, version, strat, sel)


def today() -> date:
    """The date the commands judge support and end of life by (UTC)."""
    return datetime.now(UTC).date()
