"""Calibration policy (pure): is the fleet where it should be, and if not, where should it go?

Continuous calibration (``calibrator schedule``) evaluates a policy on every tick of a Temporal
Schedule and starts a calibration only when a cluster breaks it. The rules, each optional:

* ``maxMinorsBehind: N`` -- no component (control plane or pool) more than N minors behind the
  newest released version the fleet offers (``availableVersions``);
* ``noEndOfLife: true`` -- no component on a minor past upstream end of support
  (``support.support_status`` on the evaluation day);
* ``maxWorkerSkew: M`` -- no pool more than M minors behind its control plane (stricter than the
  upstream kubelet window that ``skew.py`` enforces, never looser: M is at most 3);
* ``channel`` -- AKS-style auto-upgrade channels: ``patch`` keeps the whole cluster on the newest
  patch of its control plane's minor; ``stable`` keeps it at least at the newest patch of the
  newest minor minus one (a cluster already on the newest minor is ahead of the channel, fine).

A violating cluster's *goal* is the smallest move that satisfies every rule: the lowest minor that
every rule allows (never below the control plane's), at its newest released patch. Clusters are
then grouped by goal, so one calibration per goal version brings them there; a goal that no
available version reaches (or that would be a downgrade) is reported as unfixable instead.

Maintenance windows come from the policy's CalibrationStrategy (the ``waves`` windows, the same
objects the workflow obeys): a violating cluster whose window is closed is *deferred* to a later
tick, with the time its window opens. A cluster that carries the upgrading taint is busy (another
calibration owns it) and is left alone. Time is a parameter: pure code has no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from orchestrator.domain.documents import load_document, quote
from orchestrator.domain.errors import InputError
from orchestrator.domain.selectors import LabelSelector, selector_from_mapping
from orchestrator.domain.snapshot import Cluster, FleetSnapshot
from orchestrator.domain.strict import boolean, check_fields, integer
from orchestrator.domain.support import support_status
from orchestrator.domain.taints import UPGRADING_TAINT_KEY
from orchestrator.domain.upgradeplan import min_worker_version
from orchestrator.domain.versions import KubeVersion, newest, sort_versions
from orchestrator.domain.waves import DEFAULT_STRATEGY, MaintenanceWindow, Strategy
from orchestrator.domain.waves import strategy_from_mapping as _strategy_from_mapping

API_VERSION = "calibrator.dev/v1alpha1"
KIND = "CalibrationPolicy"
MAX_MINORS_BEHIND = 10
MAX_WORKER_SKEW = 3  # the upstream kubelet window: a policy may be stricter, never looser
Channel = Literal["patch", "stable"]
CHANNELS: tuple[Channel, ...] = ("patch", "stable")
Rule = Literal["maxMinorsBehind", "noEndOfLife", "maxWorkerSkew", "channel"]


class PolicyError(InputError):
    """A policy document that cannot be used."""


@dataclass(frozen=True, slots=True)
class Policy:
    """The rules a fleet must keep, the clusters they cover, and how calibrations roll."""

    selector: LabelSelector = LabelSelector()
    max_minors_behind: int | None = None
    no_end_of_life: bool = False
    max_worker_skew: int | None = None
    channel: Channel | None = None
    strategy: Strategy = DEFAULT_STRATEGY

    def describe(self) -> str:
        """``within 1 minor of newest, no end-of-life, worker skew <= 1, channel stable``."""
        parts = []
        if self.max_minors_behind is not None:
            parts.append(f"within {self.max_minors_behind} minor(s) of newest")
        if self.no_end_of_life:
            parts.append("no end-of-life")
        if self.max_worker_skew is not None:
            parts.append(f"worker skew <= {self.max_worker_skew}")
        if self.channel is not None:
            parts.append(f"channel {self.channel}")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule of one cluster, worded for the operator."""

    rule: Rule
    message: str


@dataclass(frozen=True, slots=True)
class ClusterVerdict:
    """A cluster that breaks the policy: why, where it should go, and when it may go."""

    name: str
    violations: tuple[Violation, ...]
    goal: KubeVersion | None = None
    unfixable: str = ""  # why no available version satisfies the policy (goal is None)
    busy: str = ""  # the calibration that is upgrading it now
    window: MaintenanceWindow | None = None
    opens_at: datetime | None = None  # its maintenance window is closed until then

    @property
    def due(self) -> bool:
        """A calibration may start for it now."""
        return self.goal is not None and not self.busy and self.opens_at is None

    def state(self) -> str:
        """``due``, ``deferred``, ``busy`` or ``unfixable``."""
        if self.goal is None:
            return "unfixable"
        if self.busy:
            return "busy"
        return "deferred" if self.opens_at is not None else "due"


@dataclass(frozen=True, slots=True)
class PolicyEvaluation:
    """The verdict on a fleet: only violating clusters are listed (compliant ones are counted)."""

    checked: int
    violating: tuple[ClusterVerdict, ...]
    newest: KubeVersion

    @property
    def compliant(self) -> bool:
        """Every checked cluster keeps every rule."""
        return not self.violating

    def due_groups(self) -> tuple[tuple[KubeVersion, tuple[str, ...]], ...]:
        """Due clusters by goal, oldest goal first: one calibration per group."""
        groups: dict[KubeVersion, list[str]] = {}
        for verdict in self.violating:
            if verdict.due and verdict.goal is not None:
                groups.setdefault(verdict.goal, []).append(verdict.name)
        return tuple((goal, tuple(sorted(groups[goal]))) for goal in sort_versions(groups))

    def counts(self) -> dict[str, int]:
        """Violating clusters by state, every state present (stable JSON)."""
        out = {"due": 0, "deferred": 0, "busy": 0, "unfixable": 0}
        for verdict in self.violating:
            out[verdict.state()] += 1
        return out

    def next_opening(self) -> datetime | None:
        """When the first deferred cluster's window opens."""
        times = [v.opens_at for v in self.violating if v.opens_at is not None and v.goal]
        return min(times) if times else None


# ------------------------------------------------------------------------------------------
# Evaluation
# ------------------------------------------------------------------------------------------


def _latest_patch(minor: tuple[int, int], released: list[KubeVersion]) -> KubeVersion | None:
    patches = [v for v in released if v.minor_key == minor]
    return patches[-1] if patches else None


def _violations(
    cluster: Cluster, policy: Policy, released: list[KubeVersion], top: KubeVersion, now: datetime
) -> list[Violation]:
    cp = cluster.control_plane.version
    oldest = min_worker_version(cluster.machine_deployments, cp)
    lowest = oldest if oldest is not None and oldest < cp else cp
    which = "control plane" if lowest is cp else "workers"
    out: list[Violation] = []
    if policy.max_minors_behind is not None:
        behind = top.minor_distance(lowest)
        if behind > policy.max_minors_behind:
            out.append(
                Violation(
                    "maxMinorsBehind",
                    f"{which} at {lowest} {behind} minors behind the newest {top} "
                    f"(policy: at most {policy.max_minors_behind})",
                )
            )
    if policy.no_end_of_life:
        support = support_status(lowest, now.date())
        if support.state == "end-of-life":
            out.append(Violation("noEndOfLife", f"{which} at {lowest}: {support.describe()}"))
    if policy.max_worker_skew is not None and oldest is not None:
        skew = cp.minor_distance(oldest)
        if skew > policy.max_worker_skew:
            out.append(
                Violation(
                    "maxWorkerSkew",
                    f"workers at {oldest} {skew} minors behind the control plane at {cp} "
                    f"(policy: at most {policy.max_worker_skew})",
                )
            )
    if policy.channel == "patch":
        latest = _latest_patch(cp.minor_key, released)
        versions = (cp, *cluster.worker_versions)
        stale = sorted({str(v) for v in versions if latest is not None and v < latest})
        if latest is not None and stale:
            out.append(
                Violation(
                    "channel",
                    f"channel patch: {', '.join(stale)} not at the newest "
                    f"{cp.major}.{cp.minor} patch {latest}",
                )
            )
    elif policy.channel == "stable":
        stable = _stable_version(top, released)
        if lowest < stable:
            out.append(
                Violation("channel", f"channel stable: {which} at {lowest}, stable is {stable}")
            )
    return out


def _stable_version(top: KubeVersion, released: list[KubeVersion]) -> KubeVersion:
    """The newest patch of the newest minor minus one (the newest minor if it stands alone)."""
    older = [v for v in released if v.minor_key < top.minor_key]
    return older[-1] if older else top


def _goal(
    cluster: Cluster, policy: Policy, released: list[KubeVersion], top: KubeVersion, now: datetime
) -> tuple[KubeVersion | None, str]:
    """The smallest version that keeps every rule, or (None, why there is none)."""
    cp = cluster.control_plane.version
    floor = cp.minor
    if policy.max_minors_behind is not None:
        floor = max(floor, top.minor - policy.max_minors_behind)
    if policy.channel == "stable":
        floor = max(floor, _stable_version(top, released).minor)
    if policy.no_end_of_life:
        supported = [v for v in released if support_status(v, now.date()).state != "end-of-life"]
        if not supported:
            return None, "every available version is past end of support"
        floor = max(floor, supported[0].minor)
    candidates = [v for v in released if v.major == cp.major and v.minor >= floor]
    if not candidates:
        return None, f"no available version on minor {cp.major}.{floor} or newer"
    goal = _latest_patch(candidates[0].minor_key, released)
    assert goal is not None
    if goal < cp:
        return (
            None,
            f"control plane at {cp} is newer than every available {goal.major}.{goal.minor} release",
        )
    return goal, ""


def _busy(cluster: Cluster) -> str:
    for taint in cluster.taints:
        if taint.key == UPGRADING_TAINT_KEY:
            return taint.value or "another calibration"
    return ""


def evaluate_policy(snapshot: FleetSnapshot, policy: Policy, now: datetime) -> PolicyEvaluation:
    """Check every selected cluster; give each violating one its goal and its window.

    ``now`` is timezone-aware (the workflow's clock): its date decides end of support, its time
    the maintenance windows.
    """
    if now.tzinfo is None:
        raise PolicyError("policy evaluation needs a timezone-aware time")
    released = sort_versions(v for v in snapshot.available_versions if not v.is_prerelease)
    top = newest(released)
    if top is None:
        raise PolicyError("the fleet lists no released version in availableVersions")
    checked = 0
    violating: list[ClusterVerdict] = []
    for cluster in snapshot.clusters:
        if not policy.selector.matches(cluster.labels):
            continue
        checked += 1
        broken = _violations(cluster, policy, released, top, now)
        if not broken:
            continue
        goal, why = _goal(cluster, policy, released, top, now)
        window = policy.strategy.window_for(cluster)
        opens_at = None
        if window is not None and not window.is_open(now):
            opens_at = window.next_opening(now)
        violating.append(
            ClusterVerdict(
                name=cluster.name,
                violations=tuple(broken),
                goal=goal,
                unfixable=why,
                busy=_busy(cluster),
                window=window,
                opens_at=opens_at,
            )
        )
    return PolicyEvaluation(checked, tuple(violating), top)


# ------------------------------------------------------------------------------------------
# Policy file
# ------------------------------------------------------------------------------------------


def _fields(raw: object, allowed: tuple[str, ...], where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{where}: expected a mapping, got {quote(raw)}")
    check_fields(raw, allowed, where, PolicyError)
    return raw


def policy_from_mapping(raw: object) -> Policy:
    """Validate a CalibrationPolicy document: every field known, typed and within bounds."""
    data = _fields(raw, ("apiVersion", "kind", "selector", "rules", "strategy"), "policy")
    if data.get("apiVersion", API_VERSION) != API_VERSION:
        raise PolicyError(
            f"policy.apiVersion: expected {API_VERSION}, got {quote(data.get('apiVersion'))}"
        )
    if data.get("kind", KIND) != KIND:
        raise PolicyError(f"policy.kind: expected {KIND}, got {quote(data.get('kind'))}")
    try:
        selector = selector_from_mapping(data.get("selector"), "policy.selector")
    except InputError as err:
        raise PolicyError(str(err)) from None
    rules = _fields(
        {} if data.get("rules") is None else data["rules"],
        ("maxMinorsBehind", "noEndOfLife", "maxWorkerSkew", "channel"),
        "policy.rules",
    )
    if not rules:
        raise PolicyError(
            "policy.rules: name at least one rule (maxMinorsBehind, noEndOfLife, "
            "maxWorkerSkew, channel)"
        )
    behind = rules.get("maxMinorsBehind")
    skew = rules.get("maxWorkerSkew")
    channel = rules.get("channel")
    if channel is not None and channel not in CHANNELS:
        raise PolicyError(f"policy.rules.channel: expected patch or stable, got {quote(channel)}")
    strategy = DEFAULT_STRATEGY
    if data.get("strategy") is not None:
        try:
            strategy = _strategy_from_mapping(data["strategy"])
        except InputError as err:
            raise PolicyError(f"policy.{err}") from None
    return Policy(
        selector=selector,
        max_minors_behind=None
        if behind is None
        else integer(behind, "policy.rules.maxMinorsBehind", 0, MAX_MINORS_BEHIND, PolicyError),
        no_end_of_life=boolean(
            rules.get("noEndOfLife", False), "policy.rules.noEndOfLife", PolicyError
        ),
        max_worker_skew=None
        if skew is None
        else integer(skew, "policy.rules.maxWorkerSkew", 0, MAX_WORKER_SKEW, PolicyError),
        channel=channel,
        strategy=strategy,
    )


def load_policy(text: str | bytes) -> Policy:
    """Parse a policy YAML or JSON document (``documents.load_document`` rules)."""
    try:
        raw = load_document(text, "policy")
    except InputError as err:
        raise PolicyError(str(err)) from None
    return policy_from_mapping(raw)
