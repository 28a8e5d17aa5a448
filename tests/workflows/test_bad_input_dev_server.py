"""Bad workflow inputs and operator requests, raw through a client, on the Temporal dev server.

The real dev server and a real worker (strict decoding, ``workflows.payloads``) on the in-memory
fleet: every malformed start ends its run at once with one non-retryable InvalidInput error (no
failed workflow task, so no retry loop; no child; no write), a payload over the server's size
limit is refused with no run, and every bad update is rejected or fails with one clear message
while the run it targets is unchanged. The corpus is testkit/bad_workflow_inputs.py;
benchmarks/bad_inputs.py prints the same as figures.
"""

from __future__ import annotations

import asyncio
import uuid

from testkit import bad_workflow_inputs as corpus
from testkit.workflow_harness import start_dev_server
from workflows.worker import build_worker


def test_every_bad_input_fails_fast_once_and_every_bad_update_is_refused() -> None:
    async def main() -> list[corpus.Outcome]:
        async with await start_dev_server() as env:
            fleet = corpus.fleet()
            task_queue = f"bad-input-{uuid.uuid4().hex[:8]}"
            async with build_worker(env.client, fleet, task_queue=task_queue):
                return await corpus.run_all(env.client, task_queue, fleet)

    outcomes = asyncio.run(main())
    failed = [f"{o.kind} {o.id}: {o.detail}" for o in outcomes if not o.handled or o.traceback]
    assert not failed, "\n".join(failed)
    assert len(outcomes) == len(corpus.STARTS) + len(corpus.UPDATES)
