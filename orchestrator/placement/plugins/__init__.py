"""Built-in plugins, one per file, and the default registry (filters run in this order).

Cheap, selective filters come first so that their reasons lead each cluster's explanation.
"""

from __future__ import annotations

from orchestrator.placement.framework import Registry
from orchestrator.placement.plugins.api_compatibility import ApiCompatibility
from orchestrator.placement.plugins.cluster_affinity import ClusterAffinityFilter
from orchestrator.placement.plugins.locality import ClusterLocality
from orchestrator.placement.plugins.network_latency import NetworkLatency
from orchestrator.placement.plugins.resource_balance import ResourceBalance
from orchestrator.placement.plugins.resource_fit import ResourceFit
from orchestrator.placement.plugins.spread_constraint import SpreadConstraintFilter
from orchestrator.placement.plugins.taint_toleration import TaintToleration

__all__ = [
    "DEFAULT_REGISTRY",
    "ApiCompatibility",
    "ClusterAffinityFilter",
    "ClusterLocality",
    "NetworkLatency",
    "ResourceBalance",
    "ResourceFit",
    "SpreadConstraintFilter",
    "TaintToleration",
]

DEFAULT_REGISTRY = Registry(
    [
        ClusterAffinityFilter(),
        SpreadConstraintFilter(),
        TaintToleration(),
        ApiCompatibility(),
        NetworkLatency(),
        ResourceFit(),
        ClusterLocality(),
        ResourceBalance(),
    ]
)
