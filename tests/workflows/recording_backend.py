"""KubeFleetBackend that remembers its version writes, for tests only.

The production backend keeps no history of its patches (a long-running worker would grow
without bound); tests that assert "no step applied twice" use this subclass, which records
through the backend's ``_patched`` hook.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from workflows.kube_backend import KubeFleetBackend, PatchRecord


class RecordingKubeBackend(KubeFleetBackend):
    """``patches`` counts writes per (cluster, component, version); ``patch_log`` lists them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._records = threading.Lock()
        self.patches: Counter[tuple[str, str, str]] = Counter()
        self.patch_log: list[PatchRecord] = []

    def _patched(self, record: PatchRecord) -> None:
        with self._records:
            self.patches[(record.cluster, record.component, record.version)] += 1
            self.patch_log.append(record)
