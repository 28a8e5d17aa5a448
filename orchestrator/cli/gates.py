"""``--fail-on``: what turns an answer into exit status 3 (``output.EXIT_FOUND``) for CI gates.

A pipeline cannot stop on a document it has to parse; pluto exits 3 when it finds removed APIs,
kubent has ``--exit-error``, trivy ``--exit-code``. ``check`` and ``drift`` print the same
document as ever and exit 3 when it holds what the caller asked to fail on, with one stderr line
naming what was found. The default asks for nothing, so a script written before these options
keeps its statuses. Status 3 wins over 1 (partial): both stop a gate, and 3 says something was
found for certain, while the partial part is still named in the document and on stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

from orchestrator.cli.output import EXIT_FOUND

if TYPE_CHECKING:
    from orchestrator.domain.calibration import CalibrationPlan
    from orchestrator.domain.drift import ClusterDrift, DriftReport


class CheckFailOn(StrEnum):
    """What ``check --fail-on`` fails on: a finding that blocks, any finding, or nothing."""

    block = "block"
    warn = "warn"
    none = "none"


# ``drift --fail-on`` conditions; a cluster can meet several (a skewed cluster may be behind and
# past end of life too), so each is tested on its own, not through the one ``status`` column.
DRIFT_CONDITIONS = ("eol", "skew", "behind")


def parse_drift_conditions(value: str | None) -> tuple[str, ...]:
    """The conditions of ``--fail-on``, a comma list (``eol,skew``), in the order given.

    One plain string, not a repeatable option: the one-shot commands coerce their options
    without pydantic (``cli.params``), and a list option would bring it back. Strict: an
    unknown or empty item is bad input (``InputError``, exit 2), never ignored, so a typo
    cannot turn a gate off.
    """
    from orchestrator.domain.documents import quote
    from orchestrator.domain.errors import InputError

    if value is None:
        return ()
    found: list[str] = []
    for item in value.split(","):
        if item not in DRIFT_CONDITIONS:
            raise InputError(
                f"--fail-on: unknown condition {quote(item)}: expected a comma list of "
                + ", ".join(DRIFT_CONDITIONS)
            )
        if item not in found:
            found.append(item)
    return tuple(found)


def check_hits(plan: CalibrationPlan, fail_on: CheckFailOn) -> list[str]:
    """``cluster: namespace/workload (action)`` of every finding ``fail_on`` fails on.

    ``block`` fails on findings that block a cluster (declared or observed); ``warn`` on every
    finding, a "warn" verdict (early warning, quiet usage, a strategy's override) included. An
    observed finding is named by what was seen (``storage.k8s.io/v1alpha1/X (apiserver
    metrics)``, ``PodDisruptionBudget ns/name``), having no workload.
    """
    if fail_on is CheckFailOn.none:
        return []
    return [
        f"{v.finding.cluster}: {v.finding.label} ({v.action})"
        for v in plan.findings
        if fail_on is CheckFailOn.warn or v.action == "block"
    ]


def drift_hits(report: DriftReport, conditions: Iterable[str]) -> list[str]:
    """``cluster (condition, ...)`` of every cluster that meets one of ``conditions``."""
    wanted = tuple(conditions)
    hits = []
    for c in report.clusters:
        met = [name for name in wanted if _meets(report, c, name)]
        if met:
            hits.append(f"{c.cluster.name} ({', '.join(met)})")
    return hits


def _meets(report: DriftReport, c: ClusterDrift, condition: str) -> bool:
    if condition == "eol":
        return c.support.state == "end-of-life"
    if condition == "skew":
        return bool(c.skew_violations)
    # behind: the control plane or a worker pool is below the goal (target, else the newest
    # available version), whatever more urgent status the cluster shows.
    from orchestrator.domain.upgradeplan import min_worker_version

    goal = report.target or report.newest
    if goal is None:
        return False
    cp = c.cluster.control_plane.version
    oldest = min_worker_version(c.cluster.machine_deployments, cp)
    return cp < goal or (oldest is not None and oldest < goal)


def finish_gate(hits: Sequence[str], noun: str, flag: str, *, partial: bool) -> None:
    """End the command: exit 3 with one stderr line when ``hits``, else ``output.finish``.

    The line reads ``--fail-on block: 2 findings found: a: ns/w (block), ...`` (ten named at
    most: the document has them all).
    """
    from orchestrator.cli.output import finish
    from orchestrator.cli.runtime import quick_exit

    if hits:
        shown = ", ".join(hits[:10]) + (f", ... ({len(hits) - 10} more)" if len(hits) > 10 else "")
        plural = "" if len(hits) == 1 else "s"
        sys.stderr.write(f"{flag}: {len(hits)} {noun}{plural} found: {shown}\n")
        quick_exit(EXIT_FOUND)
        raise SystemExit(EXIT_FOUND)
    finish(partial=partial)
