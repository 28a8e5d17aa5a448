"""Tests on the kind management stack (``tools/e2e-kind.sh``), collected only when asked for.

They need the stack up: a kind management cluster with CAPI as pods, the worker deployed from
``deploy/overlays/kind`` and a Temporal dev server, all in the stack's network namespace
(``tools/e2e-kind.sh up`` then ``worker``). ``.ci/run`` brings it up, runs them inside it with
``CALIBRATOR_KIND_TESTS=1`` and tears it down. Without the variable they are not collected at
all, so nothing skips silently; collected without the stack, they fail. By hand::

    tools/e2e-kind.sh up && tools/e2e-kind.sh worker
    tools/e2e-kind.sh exec env CALIBRATOR_KIND_TESTS=1 python3 -m pytest tests/kind -p no:randomly -s
    tools/e2e-kind.sh down
"""

from __future__ import annotations

import os

collect_ignore_glob = [] if os.environ.get("CALIBRATOR_KIND_TESTS") == "1" else ["test_*.py"]
