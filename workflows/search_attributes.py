"""Search attributes the calibration workflows set, so the Temporal UI can filter runs.

They must be registered on the server before a workflow uses them (the dev server takes
``--search-attribute NAME=Keyword``; ``client.register_search_attributes`` does it through the
operator service, which the time-skipping test server also implements).
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

CALIBRATION_TARGET = SearchAttributeKey.for_keyword("CalibrationTarget")
CALIBRATION_PHASE = SearchAttributeKey.for_keyword("CalibrationPhase")
CLUSTER_NAME = SearchAttributeKey.for_keyword("ClusterName")

ALL: tuple[SearchAttributeKey[str], ...] = (CALIBRATION_TARGET, CALIBRATION_PHASE, CLUSTER_NAME)
