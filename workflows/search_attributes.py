"""Search attributes the calibration workflows set, so the Temporal UI can filter runs.

They must be registered in the namespace before a workflow uses them, or the server refuses the
start: ``calibrator temporal setup`` does it once per namespace through the operator service
(``search_attribute_setup``, also what the demo and the tests call; the time-skipping test
server implements the add, not the list).
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

CALIBRATION_TARGET = SearchAttributeKey.for_keyword("CalibrationTarget")
CALIBRATION_PHASE = SearchAttributeKey.for_keyword("CalibrationPhase")
CLUSTER_NAME = SearchAttributeKey.for_keyword("ClusterName")

ALL: tuple[SearchAttributeKey[str], ...] = (CALIBRATION_TARGET, CALIBRATION_PHASE, CLUSTER_NAME)
