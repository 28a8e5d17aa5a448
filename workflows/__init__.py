"""Temporal layer of Fleet Calibrator: workflows (deterministic), activities (I/O), worker, client.

Layout follows temporalio/samples-python: queue names in ``task_queues``, every payload in
``model``, the activity interface in ``activities`` over the ``backend.FleetBackend`` protocol,
the workflows in ``calibration``, and ``worker`` / ``client`` to run and drive them.
"""
