from __future__ import annotations

from typing import Any

import pytest

from orchestrator.placement.plugins.spread_constraint import SpreadConstraintFilter
from tests.orchestrator.placement.fleet import cluster, single, workload

PLUGIN = SpreadConstraintFilter()


@pytest.mark.parametrize(
    ("cluster_fields", "spread", "reasons"),
    [
        ({}, [], ()),
        ({}, [{"spreadByField": "cluster", "minGroups": 2}], ()),  # every cluster is a cluster
        ({"region": "eu"}, [{"spreadByField": "region"}], ()),
        ({}, [{"spreadByField": "region"}], ("no region to spread by",)),
        ({"region": "eu"}, [{"spreadByField": "provider"}], ("no provider to spread by",)),
        ({"zones": ["a"]}, [{"spreadByField": "zone"}], ()),
        ({"region": "eu"}, [{"spreadByField": "zone"}], ("no zones to spread by",)),
        (
            {},
            [{"spreadByField": "cluster"}, {"spreadByField": "zone"}],
            ("no zones to spread by",),
        ),
    ],
)
def test_filter(
    cluster_fields: dict[str, Any], spread: list[dict[str, Any]], reasons: tuple[str, ...]
) -> None:
    placement: dict[str, Any] = {"spreadConstraints": spread} if spread else {}
    ctx, w, c = single({**cluster("c1"), **cluster_fields}, workload("w", **placement))
    assert PLUGIN.filter(ctx, w, c).reasons == reasons
    assert PLUGIN.fits(ctx, w, c) == (not reasons)


def test_a_region_label_is_a_region() -> None:
    """Snapshots from before the fields: the region label still counts."""
    ctx, w, c = single(
        cluster("c1", labels={"topology.kubernetes.io/region": "eu"}),
        workload("w", spreadConstraints=[{"spreadByField": "region"}]),
    )
    assert PLUGIN.filter(ctx, w, c).fits
